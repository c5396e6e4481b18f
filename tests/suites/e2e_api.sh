#!/bin/sh
# End to end through nginx (TLS, API key) to one clgemma-fcgi worker on the real 270M model:
# the official openai client, error cases, SSE, stop strings, usage, metrics, disconnects,
# concurrency. One server for the whole suite (tests/e2e/test_api.py).
cd "$(dirname "$0")/../.." || exit 1
. tests/e2e/lib.sh
e2e_start e2e_api --ctx 1024 --max-seqs 2 --max-queue 1 --threads 8 --max-body 1048576 --drain-timeout 10
PYTHONPATH=tests/e2e "$E2E_PY" tests/e2e/test_api.py
