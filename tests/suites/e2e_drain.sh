#!/bin/sh
# Worker lifecycle end to end: crash -> restart by the master; SIGTERM during a stream -> the
# stream completes, new requests get 503, then master and worker exit 0; --drain-timeout cuts a
# stream that runs past it (tests/e2e/test_drain.py).
cd "$(dirname "$0")/../.." || exit 1
. tests/e2e/lib.sh
export PYTHONPATH=tests/e2e

master_exit() { # name: waits for the master, which the test made drain, and checks it exited 0
  wait "$E2E_MASTER_PID"; rc=$?
  workers_ok=$(grep -c 'worker 0 (pid [0-9]*) exited with 0' "$E2E_WORKER_LOG")
  if [ "$rc" -eq 0 ] && [ "$workers_ok" -ge 1 ]; then echo "PASS $1"; else
    echo "FAIL $1: master exit $rc, worker exits: $(grep -o 'worker 0 (pid [0-9]*) [a-z ]* [0-9]*' "$E2E_WORKER_LOG" | tr '\n' ';')"
    tail -n 20 "$E2E_WORKER_LOG"; fail=1
  fi
  E2E_MASTER_PID=""
}

fail=0
e2e_start e2e_drain --ctx 1024 --drain-timeout 30
"$E2E_PY" tests/e2e/test_drain.py graceful || fail=1
master_exit master_and_worker_exit_0_after_drain
e2e_cleanup; E2E_DIR=""

e2e_start e2e_drain_deadline --ctx 1024 --drain-timeout 1
"$E2E_PY" tests/e2e/test_drain.py deadline || fail=1
master_exit master_exits_0_after_deadline
exit $fail
