#!/bin/sh
# make stop: stops what `make serve` started (the workers of the run directory, then nginx).
# Workers get SIGTERM and drain: running streams finish first (up to their drain timeout); nginx
# quits gracefully only after them, so it carries the streams to their end.
set -u
cd "$(dirname "$0")/.."
root=$(pwd)
RUN_DIR=${RUN_DIR:-${CLGEMMA_RUN_DIR:-$root/.run}}
case "$RUN_DIR" in /*) ;; *) RUN_DIR=$root/$RUN_DIR ;; esac
quiet=0
[ "${1:-}" = --quiet ] && quiet=1
say() { [ "$quiet" = 1 ] || printf 'stop: %s\n' "$*"; }

# pid of a pid file, if that process runs
live_pid() { [ -f "$1" ] && pid=$(cat "$1" 2>/dev/null) && [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"; }

wait_gone() { # timeout_s pid...: 0 when all are gone in time
  t=$(($1 * 10)); shift
  n=0
  while [ "$n" -lt "$t" ]; do
    up=0
    for p in "$@"; do kill -0 "$p" 2>/dev/null && up=1; done
    [ "$up" = 0 ] && return 0
    sleep 0.1; n=$((n + 1))
  done
  return 1
}

# 1. the workers drain together: new requests get 503 (nginx tries the others, then answers 503),
#    running streams finish, up to the workers' drain-timeout (+15 s for the master to collect)
pids="" names=""
for f in "$RUN_DIR"/worker-*.pid; do
  pid=$(live_pid "$f") || { rm -f "$f"; continue; }
  w=$(basename "$f" .pid)
  kill -TERM "$pid" 2>/dev/null
  pids="$pids $pid" names="$names ${w#worker-}:$pid"
done
if [ -n "$pids" ]; then
  # shellcheck disable=SC2086
  wait_gone 90 $pids || say "workers still running after 90 s: killing them"
  for wp in $names; do
    pid=${wp#*:}
    if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null; say "killed worker ${wp%%:*} (pid $pid)"
    else say "stopped worker ${wp%%:*} (pid $pid)"; fi
  done
  rm -f "$RUN_DIR"/worker-*.pid
fi

# 2. nginx last and gracefully: it hands out what the workers wrote before they exited
if pid=$(live_pid "$RUN_DIR/nginx/nginx.pid"); then
  nginx -q -p "$RUN_DIR/nginx/" -c "$RUN_DIR/nginx/nginx.conf" -e "$RUN_DIR/nginx/logs/error.log" -s quit 2>/dev/null ||
    kill -QUIT "$pid" 2>/dev/null
  if wait_gone 10 "$pid"; then say "stopped nginx (pid $pid)"
  else kill -TERM "$pid" 2>/dev/null; wait_gone 5 "$pid" || kill -KILL "$pid" 2>/dev/null; say "nginx (pid $pid) did not quit in 10 s: stopped it"; fi
fi
rm -f "$RUN_DIR/nginx/nginx.pid" "$RUN_DIR"/sockets/*.sock 2>/dev/null
exit 0
