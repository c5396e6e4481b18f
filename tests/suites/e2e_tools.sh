#!/bin/sh
# End to end through nginx (TLS, API key) to one clgemma-fcgi worker on a tiny Gemma 4 with the real control
# tokens and chat template (tests/fixtures/gemma4_dense.gguf): tool calls, tool_choice, follow-up turns,
# thinking (tests/e2e/test_tools.py).
cd "$(dirname "$0")/../.." || exit 1
E2E_MODEL=tests/fixtures/gemma4_dense.gguf
. tests/e2e/lib.sh
e2e_start e2e_tools --ctx 1024 --max-seqs 4 --max-queue 4 --threads 12
PYTHONPATH=tests/e2e "$E2E_PY" tests/e2e/test_tools.py
