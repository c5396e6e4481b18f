#!/bin/sh
# Failover that balances: two workers behind nginx at and beyond their capacity
# (tests/e2e/test_balance.py).
cd "$(dirname "$0")/../.." || exit 1
. tests/e2e/lib.sh
export PYTHONPATH=tests/e2e BALANCE_SEQS=4 BALANCE_QUEUE=4
E2E_WORKERS=2 e2e_start e2e_balance --ctx 512 --max-seqs $BALANCE_SEQS --max-queue $BALANCE_QUEUE
"$E2E_PY" tests/e2e/test_balance.py
