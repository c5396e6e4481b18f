#!/bin/sh
# make stop: stops what `make serve` started (nginx and the workers of the run directory).
# Workers get SIGTERM and drain: running streams finish first (up to their drain timeout).
set -u
cd "$(dirname "$0")/.."
root=$(pwd)
RUN_DIR=${RUN_DIR:-${CLGEMMA_RUN_DIR:-$root/.run}}
case "$RUN_DIR" in /*) ;; *) RUN_DIR=$root/$RUN_DIR ;; esac
quiet=0
[ "${1:-}" = --quiet ] && quiet=1
say() { [ "$quiet" = 1 ] || printf 'stop: %s\n' "$*"; }

stop_pid() { # pidfile what timeout_s
  [ -f "$1" ] || return 0
  pid=$(cat "$1" 2>/dev/null)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null
    n=0
    while kill -0 "$pid" 2>/dev/null && [ "$n" -lt $(($3 * 10)) ]; do sleep 0.1; n=$((n + 1)); done
    if kill -0 "$pid" 2>/dev/null; then
      say "$2 (pid $pid) did not stop in $3 s: killing it"
      kill -KILL "$pid" 2>/dev/null
    else
      say "stopped $2 (pid $pid)"
    fi
  fi
  rm -f "$1"
}

if [ -f "$RUN_DIR/nginx/nginx.pid" ]; then
  # the pid before the quit: nginx removes its pid file as it exits
  pid=$(cat "$RUN_DIR/nginx/nginx.pid" 2>/dev/null)
  nginx -q -p "$RUN_DIR/nginx/" -c "$RUN_DIR/nginx/nginx.conf" -e "$RUN_DIR/nginx/logs/error.log" -s quit 2>/dev/null
  n=0
  while [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && [ "$n" -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
  if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then say "stopped nginx (pid $pid)"; rm -f "$RUN_DIR/nginx/nginx.pid"; fi
  stop_pid "$RUN_DIR/nginx/nginx.pid" nginx 5
  rm -f "$RUN_DIR/nginx/nginx.pid"
fi
for f in "$RUN_DIR"/worker-*.pid; do
  w=$(basename "$f" .pid)
  [ -f "$f" ] && stop_pid "$f" "worker ${w#worker-}" 90
done
rm -f "$RUN_DIR"/sockets/*.sock 2>/dev/null
exit 0
