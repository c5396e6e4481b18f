#!/bin/sh
# Renders the nginx configuration from conf/*.in into $RUN_DIR/nginx/ (used by serve.sh, the
# end-to-end tests and install-systemd.sh). Settings come from the environment:
#   RUN_DIR      absolute directory for the nginx prefix, logs and temp files     (required)
#   SOCKETS      worker socket paths, space-separated (one upstream server each)  (required)
#   HTTPS_PORT   TLS port (default 8443)           BIND   address (default 127.0.0.1; [::1] beside it)
#   CERT, CERT_KEY  PEM certificate and key        (required)
#   KEYS_FILE    API keys, one per line            (required; deploy/keys.sh makes the map)
#   MAX_BODY     client_max_body_size in bytes (default 1048576)
#   RATE, BURST  requests/s per client address and burst (default 50, 100)
#   NGINX_WORKERS (default 1)   LOG_DIR (default $RUN_DIR/nginx/logs)
#   READ_TIMEOUT proxy_/fastcgi_read_timeout in seconds (default 600; above the workers' request-timeout)
#   PROTOCOL     http (proxy_pass, default) or fastcgi (fastcgi_pass): what the workers speak (--protocol)
#   SITE_ONLY=1  render only the site (for a system nginx), into $RUN_DIR/nginx too
set -eu
cd "$(dirname "$0")/.."
: "${RUN_DIR:?}" "${SOCKETS:?}" "${CERT:?}" "${CERT_KEY:?}" "${KEYS_FILE:?}"
HTTPS_PORT=${HTTPS_PORT:-8443}
BIND=${BIND:-127.0.0.1}
MAX_BODY=${MAX_BODY:-1048576}
RATE=${RATE:-50}
BURST=${BURST:-100}
NGINX_WORKERS=${NGINX_WORKERS:-1}
READ_TIMEOUT=${READ_TIMEOUT:-600}
PROTOCOL=${PROTOCOL:-http}
case "$PROTOCOL" in http|fastcgi) ;; *) echo "render-conf: PROTOCOL must be http or fastcgi, not '$PROTOCOL'" >&2; exit 1 ;; esac
LOG_DIR=${LOG_DIR:-$RUN_DIR/nginx/logs}
out=$RUN_DIR/nginx
mkdir -p "$out/logs" "$out/tmp" "$LOG_DIR"

RUN_DIR=$RUN_DIR KEYS_FILE=$KEYS_FILE sh deploy/keys.sh render

# [::1] beside 127.0.0.1 (and [::] beside 0.0.0.0) where the host has IPv6 at all
listen_v6=""
if grep -q '^00000000000000000000000000000001 ' /proc/net/if_inet6 2>/dev/null; then
  case "$BIND" in
    127.0.0.1) listen_v6="    listen [::1]:$HTTPS_PORT ssl;" ;;
    0.0.0.0)   listen_v6="    listen [::]:$HTTPS_PORT ssl;" ;;
  esac
fi

servers=""
for s in $SOCKETS; do
  servers="$servers    server unix:$s max_fails=0;
"
done
user_line=""
[ "$(id -u)" -eq 0 ] && user_line="user root root;  # nginx started by root: workers must reach the root-owned sockets"

render() { # template output
  awk -v RUN_DIR="$RUN_DIR" -v HTTPS_PORT="$HTTPS_PORT" -v BIND="$BIND" -v CERT="$CERT" \
      -v CERT_KEY="$CERT_KEY" -v KEYS_MAP="$out/keys.map" -v MAX_BODY="$MAX_BODY" -v RATE="$RATE" \
      -v BURST="$BURST" -v NGINX_WORKERS="$NGINX_WORKERS" -v LOG_DIR="$LOG_DIR" -v READ_TIMEOUT="$READ_TIMEOUT" \
      -v SERVERS="$servers" -v USER_LINE="$user_line" -v LISTEN_V6="$listen_v6" '
    {
      if ($0 == "@UPSTREAM_SERVERS@") { printf "%s", SERVERS; next }
      if ($0 == "@USER_LINE@") { print USER_LINE; next }
      if ($0 == "@LISTEN_V6@") { print LISTEN_V6; next }
      gsub(/@RUN_DIR@/, RUN_DIR); gsub(/@HTTPS_PORT@/, HTTPS_PORT); gsub(/@BIND@/, BIND)
      gsub(/@CERT@/, CERT); gsub(/@CERT_KEY@/, CERT_KEY); gsub(/@KEYS_MAP@/, KEYS_MAP)
      gsub(/@MAX_BODY@/, MAX_BODY); gsub(/@RATE@/, RATE); gsub(/@BURST@/, BURST)
      gsub(/@NGINX_WORKERS@/, NGINX_WORKERS); gsub(/@LOG_DIR@/, LOG_DIR); gsub(/@READ_TIMEOUT@/, READ_TIMEOUT)
      print
    }' "$1" > "$2.new"
  if grep -n '@[A-Z_]*@' "$2.new" >&2; then echo "render-conf: unfilled names in $2" >&2; exit 1; fi
  mv "$2.new" "$2"
}
render conf/clgemma-site.conf.in "$out/clgemma-site.conf"
render "conf/clgemma-$PROTOCOL.conf.in" "$out/clgemma-upstream.conf"
[ "${SITE_ONLY:-0}" = 1 ] || render conf/nginx.conf.in "$out/nginx.conf"
