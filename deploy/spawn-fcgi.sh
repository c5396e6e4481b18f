#!/bin/sh
# Starts one clgemma-fcgi worker process tree under spawn-fcgi, which creates the unix socket and
# hands it over on fd 0.
#   deploy/spawn-fcgi.sh SOCKET DEVICE [-- extra clgemma-fcgi options]
# DEVICE is an OpenCL "P:D" ("" = the engine's pick). Environment:
#   FOREGROUND=1   do not fork (systemd, daemontools); else PIDFILE gets the worker's pid
#   PIDFILE        pid file (fork mode)          LOGFILE   append the worker's stderr here
#   CONFIG         worker config (default conf/clgemma.conf)
#   FCGI_BIN       the binary (default build/clgemma-fcgi)
#   SOCKET_MODE    (default 0660)   SOCKET_USER / SOCKET_GROUP / RUN_USER: ownership (root only)
set -eu
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: $0 SOCKET DEVICE [-- clgemma-fcgi options]" >&2; exit 2; }
sock=$1; dev=$2; shift 2
[ "${1:-}" = "--" ] && shift
bin=${FCGI_BIN:-$(pwd)/build/clgemma-fcgi}
config=${CONFIG:-conf/clgemma.conf}
[ -x "$bin" ] || { echo "spawn-fcgi.sh: $bin is not built (make build/clgemma-fcgi)" >&2; exit 1; }

set -- --config "$config" "$@"
[ -n "$dev" ] && set -- --devices "$dev" "$@"
opts="-s $sock -M ${SOCKET_MODE:-0660}"
[ -n "${SOCKET_USER:-}" ] && opts="$opts -U $SOCKET_USER"
[ -n "${SOCKET_GROUP:-}" ] && opts="$opts -G $SOCKET_GROUP"
[ -n "${RUN_USER:-}" ] && opts="$opts -u $RUN_USER"
if [ "${FOREGROUND:-0}" = 1 ]; then
  opts="$opts -n"
else
  opts="$opts -P ${PIDFILE:?PIDFILE is needed when forking}"
fi
rm -f "$sock"
if [ -n "${LOGFILE:-}" ]; then
  # a shell in between only to send stderr to the log; it execs the worker, so the pid is its pid
  export CLGEMMA_LOG="$LOGFILE"
  # shellcheck disable=SC2086
  exec spawn-fcgi $opts -- /bin/sh -c 'exec "$0" "$@" 2>>"$CLGEMMA_LOG" >&2' "$bin" "$@"
fi
# shellcheck disable=SC2086
exec spawn-fcgi $opts -- "$bin" "$@"
