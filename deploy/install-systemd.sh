#!/bin/sh
# Installs clgemma as a system service on a host with systemd and the system nginx (as root):
# a user "clgemma", /etc/clgemma/clgemma.conf, the hardened clgemma-fcgi@N units (one per GPU: N = 0,
# 1, ..., each pinned to its device by /etc/clgemma/worker-N.env) and the nginx site
# /etc/nginx/sites-enabled/clgemma (TLS cert/key and keys file given by you).
#   CERT=/etc/ssl/... CERT_KEY=/etc/ssl/... KEYS_FILE=/etc/clgemma/api_keys HTTPS_PORT=443 \
#     sh deploy/install-systemd.sh
# Devices: every GPU of the host by default (deploy/devices.sh: one worker each, or one on the engine's
# pick where there is none), after checking the model fits one; DEVICES="0:0,0:2" names them; GPUS=N
# takes 0:0 .. 0:N-1 as before. BACKEND_TLS=1 (with the variables of deploy/render-conf.sh) renders the
# site of a GPU host behind a front nginx (mutual TLS, deploy/README.md "Several hosts").
# The repository (built: make build/clgemma-fcgi, model fetched) is used in place: PREFIX (default
# this checkout) replaces /opt/clgemma in the units.
set -eu
cd "$(dirname "$0")/.."
PREFIX=${PREFIX:-$(pwd)}
: "${CERT:?}" "${CERT_KEY:?}"
BACKEND_TLS=${BACKEND_TLS:-0}
# a host behind a front checks the front's certificate, not API keys
[ "$BACKEND_TLS" = 1 ] && : "${CLIENT_CA:?BACKEND_TLS=1 needs CLIENT_CA}" || : "${KEYS_FILE:?}"
[ "$(id -u)" -eq 0 ] || { echo "install-systemd.sh: run as root" >&2; exit 1; }
[ -x build/clgemma-fcgi ] && [ -x build/clgemma ] || { echo "install-systemd.sh: build first (make build/clgemma-fcgi build/clgemma)" >&2; exit 1; }
case "$PREFIX" in /home/*|/root/*) echo "install-systemd.sh: $PREFIX is hidden from the workers (ProtectHome=yes): install under /opt or /srv" >&2; exit 1 ;; esac
id clgemma >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin clgemma
# nginx's worker user reaches the sockets through group clgemma (sockets 0660, /run/clgemma 0750)
nginx_user=$(sed -n 's/^[[:space:]]*user[[:space:]]\{1,\}\([^[:space:];]*\).*/\1/p' /etc/nginx/nginx.conf 2>/dev/null | head -n 1)
usermod -a -G clgemma "${nginx_user:-www-data}"
mkdir -p /etc/clgemma
# the keys: read by nginx's master (root) only; owned by the service user, 0600
if [ -n "${KEYS_FILE:-}" ]; then
  chown clgemma:clgemma "$KEYS_FILE"
  chmod 600 "$KEYS_FILE"
fi
[ -f /etc/clgemma/clgemma.conf ] || sed "s|^model = models/|model = $PREFIX/models/|" conf/clgemma.conf > /etc/clgemma/clgemma.conf
sed "s|/opt/clgemma|$PREFIX|g" deploy/systemd/clgemma-fcgi@.service > /etc/systemd/system/clgemma-fcgi@.service
cp deploy/systemd/clgemma.target /etc/systemd/system/clgemma.target
# nginx speaks what the workers' config says (protocol = http|fastcgi; default http)
protocol=$(sed -n 's/^[[:space:]]*protocol[[:space:]]*=[[:space:]]*\([a-z]*\).*/\1/p' /etc/clgemma/clgemma.conf | tail -n 1)
# the devices, each checked to hold the model (with the workers' own config) before anything is enabled
if [ -n "${GPUS:-}" ]; then
  DEVICES=$(i=0; while [ "$i" -lt "$GPUS" ]; do printf '0:%s ' "$i"; i=$((i + 1)); done)
fi
devices=$(DEVICES=${DEVICES:-} CONFIG=/etc/clgemma/clgemma.conf sh deploy/devices.sh) || exit 1
sockets=""
n=0
for dev in $devices; do
  [ "$dev" = default ] && dev=""
  # clgemma-fcgi@N reads its device here (an empty one: the engine's pick)
  printf '# written by deploy/install-systemd.sh: the OpenCL device of clgemma-fcgi@%s\nDEVICE=%s\n' "$n" "$dev" \
    > "/etc/clgemma/worker-$n.env"
  sockets="$sockets /run/clgemma/worker-$n.sock"
  n=$((n + 1))
done
RUN_DIR=/etc/clgemma SOCKETS=$sockets CERT=$CERT CERT_KEY=$CERT_KEY KEYS_FILE=${KEYS_FILE:-} KEYS_OWNER=clgemma:clgemma \
  BACKEND_TLS=$BACKEND_TLS CLIENT_CA=${CLIENT_CA:-} \
  PROTOCOL=${protocol:-http} HTTPS_PORT=${HTTPS_PORT:-443} BIND=${BIND:-0.0.0.0} LOG_DIR=/var/log/nginx SITE_ONLY=1 sh deploy/render-conf.sh
ln -sf /etc/clgemma/nginx/clgemma-site.conf /etc/nginx/sites-enabled/clgemma
systemctl daemon-reload
i=0
while [ "$i" -lt "$n" ]; do systemctl enable --now "clgemma-fcgi@$i.service"; i=$((i + 1)); done
# workers of an earlier install beyond this host's devices now (a GPU fewer): stopped, their files gone
for f in /etc/clgemma/worker-*.env; do
  [ -f "$f" ] || continue
  i=${f#/etc/clgemma/worker-}; i=${i%.env}
  [ "$i" -lt "$n" ] || { systemctl disable --now "clgemma-fcgi@$i.service" || true; rm -f "$f"; }
done
systemctl enable clgemma.target
nginx -t && systemctl reload nginx
echo "clgemma: $n worker(s) enabled on devices: $(echo $devices); nginx site /etc/nginx/sites-enabled/clgemma"
[ -z "${KEYS_FILE:-}" ] || echo "keys: RUN_DIR=/etc/clgemma KEYS_FILE=$KEYS_FILE KEYS_OWNER=clgemma:clgemma sh deploy/keys.sh add|revoke KEY|list"
