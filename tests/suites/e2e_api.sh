#!/bin/sh
# End to end through nginx (TLS, API key) to one clgemma-fcgi worker on the real 270M model:
# the official openai client, error cases, SSE, stop strings, usage, metrics, disconnects,
# concurrency (tests/e2e/test_api.py); structured output and logit_bias (tests/e2e/test_structured.py); LangChain
# and litellm: structured output, completions, context overflow (tests/e2e/test_clients.py gemma3).
# One server for the whole suite.
cd "$(dirname "$0")/../.." || exit 1
. tests/e2e/lib.sh
e2e_start e2e_api --ctx 1024 --max-seqs 2 --max-queue 1 --threads 8 --max-body 1048576 --drain-timeout 10
fail=0
PYTHONPATH=tests/e2e "$E2E_PY" tests/e2e/test_api.py || fail=1
PYTHONPATH=tests/e2e "$E2E_PY" tests/e2e/test_structured.py || fail=1
PYTHONPATH=tests/e2e "$E2E_PY" tests/e2e/test_clients.py gemma3 || fail=1
exit $fail
