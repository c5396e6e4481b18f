#!/bin/sh
# Recomputes the tiny Qwen 3.5 fixtures' logits with the float64 reference tools/ref_qwen35.py and compares them to
# transformers' float32 logits kept at a few positions in tests/golden/qwen35_*.json/.logits (made by
# tools/gen_qwen35_fixtures.py) and to the full build/golden/qwen35_*.logits that make test wrote before the suites.
cd "$(dirname "$0")/../.." || exit 1
if [ ! -x .venv/bin/python ]; then
  echo "FAIL ref_qwen35: .venv/bin/python not found (create the venv from tools/requirements.txt)"
  exit 1
fi
exec .venv/bin/python tests/ref_qwen35_check.py
