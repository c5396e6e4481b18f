#!/bin/sh
# End to end through nginx (TLS, API key) to one clgemma-fcgi worker on a tiny Gemma 4 with the real control
# tokens and chat template (tests/fixtures/gemma4_dense.gguf): tool calls, tool_choice, follow-up turns,
# thinking (tests/e2e/test_tools.py); the same through LangChain, litellm and the openai SDK's parse and stream
# helpers (tests/e2e/test_clients.py gemma4).
cd "$(dirname "$0")/../.." || exit 1
E2E_MODEL=tests/fixtures/gemma4_dense.gguf
. tests/e2e/lib.sh
e2e_start e2e_tools --ctx 1024 --max-seqs 4 --max-queue 4 --threads 12
fail=0
PYTHONPATH=tests/e2e "$E2E_PY" tests/e2e/test_tools.py || fail=1
PYTHONPATH=tests/e2e "$E2E_PY" tests/e2e/test_clients.py gemma4 || fail=1
exit $fail
