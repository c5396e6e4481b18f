#!/bin/sh
# Compares the clgemma CLI on the real Gemma 3 270M model against tests/golden/gemma3_270m.json
# (llama.cpp + float64 numpy reference outputs, made by tools/gen_golden.py). One PASS/FAIL line per
# check; GOLDEN_ALL=1 checks every case instead of the CI subset (see tests/golden_check.py).
cd "$(dirname "$0")/../.." || exit 1
if [ ! -x .venv/bin/python ]; then
  echo "FAIL golden_gemma3: .venv/bin/python not found (create the venv from tools/requirements.txt)"
  exit 1
fi
exec .venv/bin/python tests/golden_check.py
