#!/bin/sh
# Abnormal ends and bounded work end to end, two workers behind nginx (tests/e2e/test_crash.py):
# kill -9 mid-stream -> the openai client raises; kill -9 of a busy worker -> the next request is
# served by the other one (restart time printed);
# no max_tokens -> --default-max-tokens; --request-timeout -> finish_reason "length"; a request
# past nginx's read timeout is not re-sent to the other worker (runs counted in the worker log).
# The deadline phase runs over FastCGI, the others over HTTP (the default).
cd "$(dirname "$0")/../.." || exit 1
. tests/e2e/lib.sh
export PYTHONPATH=tests/e2e CRASH_CAP=16 CRASH_TIMEOUT=3
fail=0
E2E_WORKERS=2 e2e_start e2e_crash --ctx 1024 --default-max-tokens $CRASH_CAP
"$E2E_PY" tests/e2e/test_crash.py crash || fail=1
e2e_cleanup; E2E_DIR=""

# this phase over FastCGI (--protocol fastcgi, fastcgi_pass), so both transports stay tested end to end
E2E_PROTOCOL=fastcgi E2E_WORKERS=1 e2e_start e2e_crash_deadline --ctx 1024 --request-timeout $CRASH_TIMEOUT
"$E2E_PY" tests/e2e/test_crash.py deadline || fail=1
e2e_cleanup; E2E_DIR=""

E2E_READ_TIMEOUT=2 E2E_WORKERS=2 e2e_start e2e_crash_rerun --ctx 1024 --request-timeout 0
"$E2E_PY" tests/e2e/test_crash.py rerun || fail=1
exit $fail
