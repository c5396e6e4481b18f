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
# Several hosts (deploy/README.md "Several hosts"; certificates from deploy/multihost-ca.sh):
#   BACKEND_TLS=1 a GPU host's nginx behind a front: CLIENT_CA (the private CA) must have signed the
#                client's certificate (ssl_verify_client on); no API keys (KEYS_FILE not needed) and no
#                per-address rate limit here: the front does both
#   HOSTS        a front over hosts' nginx, "h1:port h2:port" instead of SOCKETS (clgemma-hosts.conf.in):
#                CLIENT_CERT, CLIENT_KEY (the front's), HOSTS_CA (the private CA), SSL_NAME (clgemma-host)
set -eu
cd "$(dirname "$0")/.."
BACKEND_TLS=${BACKEND_TLS:-0}
HOSTS=${HOSTS:-}
: "${RUN_DIR:?}" "${CERT:?}" "${CERT_KEY:?}"
[ -n "$HOSTS" ] || : "${SOCKETS:?SOCKETS (or HOSTS) is required}"
[ "$BACKEND_TLS" = 1 ] && : "${CLIENT_CA:?BACKEND_TLS=1 needs CLIENT_CA}" || : "${KEYS_FILE:?}"
[ -z "$HOSTS" ] || : "${CLIENT_CERT:?HOSTS needs CLIENT_CERT}" "${CLIENT_KEY:?HOSTS needs CLIENT_KEY}" "${HOSTS_CA:?HOSTS needs HOSTS_CA}"
[ -z "$HOSTS" ] || [ "$BACKEND_TLS" != 1 ] || { echo "render-conf: HOSTS (a front) and BACKEND_TLS=1 (a host) exclude each other" >&2; exit 1; }
SSL_NAME=${SSL_NAME:-clgemma-host}
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

# what differs between a client-facing nginx (keys, rate limit) and a host behind a front (client certificate)
if [ "$BACKEND_TLS" = 1 ]; then
  keys_map="# none here: only the front reaches this nginx, with its certificate (ssl_verify_client)"
  client_cert="    ssl_client_certificate $CLIENT_CA;  # the private CA: the front's certificate, no other
    ssl_verify_client on;
    ssl_verify_depth 2;"
  key_check="        # no API key here: the front checked it, and the client certificate is the front's"
  rate_limit="        # no per-address limit here: every request comes from the front's address"
  metrics_access="        # any holder of a certificate of the private CA: the front, a scraper (multihost-ca.sh DIR front NAME)"
  rid_map="map \$http_x_request_id \$clgemma_rid {
    \"~^[0-9a-f]{32}\$\" \$http_x_request_id;  # the front's (only the front gets here)
    default \$request_id;
}"
else
  RUN_DIR=$RUN_DIR KEYS_FILE=$KEYS_FILE sh deploy/keys.sh render
  # deploy/keys.sh writes one case-sensitive regex per key:  "~^(?i:bearer) sk\-\.\.\.$" 1;
  # (a map's plain strings would match case-insensitively; regexes also have no hash size limit on length)
  keys_map="map \$http_authorization \$clgemma_key_ok {
    default 0;
    include $out/keys.map;
}"
  client_cert=""
  key_check="        if (\$clgemma_key_ok = 0) {
            return 401;
        }"
  rate_limit="        limit_req zone=clgemma_api burst=$BURST nodelay;"
  metrics_access="        allow 127.0.0.1;
        allow ::1;
        deny all;"
  rid_map="map \$request_id \$clgemma_rid { default \$request_id; }  # a client's X-Request-Id is not taken"
fi

# [::1] beside 127.0.0.1 (and [::] beside 0.0.0.0) where the host has IPv6 at all
listen_v6=""
if grep -q '^00000000000000000000000000000001 ' /proc/net/if_inet6 2>/dev/null; then
  case "$BIND" in
    127.0.0.1) listen_v6="    listen [::1]:$HTTPS_PORT ssl;" ;;
    0.0.0.0)   listen_v6="    listen [::]:$HTTPS_PORT ssl;" ;;
  esac
fi

servers=""
for s in ${SOCKETS:-}; do
  [ -n "$HOSTS" ] && break
  servers="$servers    server unix:$s max_fails=0;
"
done
for h in $HOSTS; do
  servers="$servers    server $h max_fails=0;
"
done
# TLS connections to the hosts are kept (a handshake per request would cost a round trip or two)
[ -z "$HOSTS" ] || servers="$servers    keepalive 16;
"
user_line=""
[ "$(id -u)" -eq 0 ] && user_line="user root root;  # nginx started by root: workers must reach the root-owned sockets"

render() { # template output
  awk -v RUN_DIR="$RUN_DIR" -v HTTPS_PORT="$HTTPS_PORT" -v BIND="$BIND" -v CERT="$CERT" \
      -v CERT_KEY="$CERT_KEY" -v KEYS_MAP="$out/keys.map" -v MAX_BODY="$MAX_BODY" -v RATE="$RATE" \
      -v BURST="$BURST" -v NGINX_WORKERS="$NGINX_WORKERS" -v LOG_DIR="$LOG_DIR" -v READ_TIMEOUT="$READ_TIMEOUT" \
      -v SERVERS="$servers" -v USER_LINE="$user_line" -v LISTEN_V6="$listen_v6" -v KEYS_BLOCK="$keys_map" \
      -v CLIENT_CERT_LINES="$client_cert" -v KEY_CHECK="$key_check" -v RATE_LIMIT="$rate_limit" -v RID_MAP="$rid_map" -v METRICS_ACCESS="$metrics_access" \
      -v CLIENT_CERT="${CLIENT_CERT:-}" -v CLIENT_KEY="${CLIENT_KEY:-}" -v HOSTS_CA="${HOSTS_CA:-}" -v SSL_NAME="$SSL_NAME" '
    {
      if ($0 == "@UPSTREAM_SERVERS@") { printf "%s", SERVERS; next }
      if ($0 == "@API_KEYS_MAP@") { print KEYS_BLOCK; next }
      if ($0 == "@CLIENT_VERIFY@") { print CLIENT_CERT_LINES; next }
      if ($0 == "@KEY_CHECK@") { print KEY_CHECK; next }
      if ($0 == "@RATE_LIMIT@") { print RATE_LIMIT; next }
      if ($0 == "@REQUEST_ID_MAP@") { print RID_MAP; next }
      if ($0 == "@METRICS_ACCESS@") { print METRICS_ACCESS; next }
      gsub(/@CLIENT_CERT@/, CLIENT_CERT); gsub(/@CLIENT_KEY@/, CLIENT_KEY); gsub(/@HOSTS_CA@/, HOSTS_CA)
      gsub(/@SSL_NAME@/, SSL_NAME)
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
if [ -n "$HOSTS" ]; then render conf/clgemma-hosts.conf.in "$out/clgemma-upstream.conf"
else render "conf/clgemma-$PROTOCOL.conf.in" "$out/clgemma-upstream.conf"; fi
[ "${SITE_ONLY:-0}" = 1 ] || render conf/nginx.conf.in "$out/nginx.conf"
