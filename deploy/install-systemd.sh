#!/bin/sh
# Installs clgemma as a system service on a host with systemd and the system nginx (as root):
# a user "clgemma", /etc/clgemma/clgemma.conf, the hardened clgemma-fcgi@N units (one per GPU: N = 0..GPUS-1)
# and the nginx site /etc/nginx/sites-enabled/clgemma (TLS cert/key and keys file given by you).
#   GPUS=2 CERT=/etc/ssl/... CERT_KEY=/etc/ssl/... KEYS_FILE=/etc/clgemma/api_keys HTTPS_PORT=443 \
#     sh deploy/install-systemd.sh
# The repository (built: make build/clgemma-fcgi, model fetched) is used in place: PREFIX (default
# this checkout) replaces /opt/clgemma in the units.
set -eu
cd "$(dirname "$0")/.."
PREFIX=${PREFIX:-$(pwd)}
GPUS=${GPUS:-1}
: "${CERT:?}" "${CERT_KEY:?}" "${KEYS_FILE:?}"
[ "$(id -u)" -eq 0 ] || { echo "install-systemd.sh: run as root" >&2; exit 1; }
[ -x build/clgemma-fcgi ] || { echo "install-systemd.sh: build first (make build/clgemma-fcgi)" >&2; exit 1; }
case "$PREFIX" in /home/*|/root/*) echo "install-systemd.sh: $PREFIX is hidden from the workers (ProtectHome=yes): install under /opt or /srv" >&2; exit 1 ;; esac
id clgemma >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin clgemma
# nginx's worker user reaches the sockets through group clgemma (sockets 0660, /run/clgemma 0750)
nginx_user=$(sed -n 's/^[[:space:]]*user[[:space:]]\{1,\}\([^[:space:];]*\).*/\1/p' /etc/nginx/nginx.conf 2>/dev/null | head -n 1)
usermod -a -G clgemma "${nginx_user:-www-data}"
mkdir -p /etc/clgemma
# the keys: read by nginx's master (root) only; owned by the service user, 0600
chown clgemma:clgemma "$KEYS_FILE"
chmod 600 "$KEYS_FILE"
[ -f /etc/clgemma/clgemma.conf ] || sed "s|^model = models/|model = $PREFIX/models/|" conf/clgemma.conf > /etc/clgemma/clgemma.conf
sed "s|/opt/clgemma|$PREFIX|g" deploy/systemd/clgemma-fcgi@.service > /etc/systemd/system/clgemma-fcgi@.service
cp deploy/systemd/clgemma.target /etc/systemd/system/clgemma.target
# nginx speaks what the workers' config says (protocol = http|fastcgi; default http)
protocol=$(sed -n 's/^[[:space:]]*protocol[[:space:]]*=[[:space:]]*\([a-z]*\).*/\1/p' /etc/clgemma/clgemma.conf | tail -n 1)
sockets=""
i=0
while [ "$i" -lt "$GPUS" ]; do sockets="$sockets /run/clgemma/worker-$i.sock"; i=$((i + 1)); done
RUN_DIR=/etc/clgemma SOCKETS=$sockets CERT=$CERT CERT_KEY=$CERT_KEY KEYS_FILE=$KEYS_FILE KEYS_OWNER=clgemma:clgemma \
  PROTOCOL=${protocol:-http} HTTPS_PORT=${HTTPS_PORT:-443} BIND=${BIND:-0.0.0.0} LOG_DIR=/var/log/nginx SITE_ONLY=1 sh deploy/render-conf.sh
ln -sf /etc/clgemma/nginx/clgemma-site.conf /etc/nginx/sites-enabled/clgemma
systemctl daemon-reload
i=0
while [ "$i" -lt "$GPUS" ]; do systemctl enable --now "clgemma-fcgi@$i.service"; i=$((i + 1)); done
systemctl enable clgemma.target
nginx -t && systemctl reload nginx
echo "clgemma: $GPUS worker(s) enabled; nginx site /etc/nginx/sites-enabled/clgemma"
echo "keys: RUN_DIR=/etc/clgemma KEYS_FILE=$KEYS_FILE KEYS_OWNER=clgemma:clgemma sh deploy/keys.sh add|revoke KEY|list"
