#!/bin/sh
# One view of all workers, two workers behind nginx (tests/e2e/test_pool.py): /metrics and /health
# answered by either worker show the whole pool, with per-worker labels; the pool's request counts
# add up on every scrape; the latency / queue-wait / time-per-output-token histograms and the KV
# block gauges; a kill -9'd worker shows as down until it is back.
cd "$(dirname "$0")/../.." || exit 1
. tests/e2e/lib.sh
export PYTHONPATH=tests/e2e
E2E_WORKERS=2 e2e_start e2e_pool --ctx 1024
"$E2E_PY" tests/e2e/test_pool.py
