#!/bin/sh
# KV-budget admission end to end (issue 20 item 2): nginx and one worker on the 270M model whose KV
# cache holds two requests' reservations (tests/e2e/test_admission.py). 3x more concurrent requests
# than fit all complete (queued, never failed); with a short --queue-timeout the ones that waited get
# 503 + Retry-After, never 500; a request larger than the cache is a 400 naming max_tokens.
cd "$(dirname "$0")/../.." || exit 1
. tests/e2e/lib.sh
export PYTHONPATH=tests/e2e
fail=0
e2e_start e2e_admission --ctx 64 --kv-tokens 64 --max-seqs 8 --max-queue 16 --queue-timeout 120
"$E2E_PY" tests/e2e/test_admission.py queue || fail=1
e2e_cleanup; E2E_DIR=""
e2e_start e2e_admission_timeout --ctx 32 --kv-tokens 32 --max-seqs 8 --max-queue 16 --queue-timeout 1
"$E2E_PY" tests/e2e/test_admission.py timeout || fail=1
exit $fail
