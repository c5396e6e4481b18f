#!/bin/sh
# The private CA of a multi-host clgemma (deploy/README.md "Several hosts"): it signs each GPU host's
# server certificate and the front nginx's client certificate, and nothing else trusts it, so a host
# nginx that requires a client certificate of this CA serves only the front.
#   sh deploy/multihost-ca.sh DIR host NAME [ADDR...]   server certificate DIR/NAME.pem, DIR/NAME.key for a
#                                                       GPU host (ADDR: its IP addresses or DNS names)
#   sh deploy/multihost-ca.sh DIR front [NAME]          client certificate of the front (NAME default "front")
# The first call makes the CA: DIR/ca.pem (give it to every host and the front) and DIR/ca.key (keep it on
# the machine that signs, offline if you can). Every host certificate also names SSL_NAME (default
# clgemma-host), the one name the front verifies (nginx checks one proxy_ssl_name per upstream group).
# Keys are P-256, 0600; certificates last DAYS (default 825).
set -eu
[ $# -ge 2 ] || { sed -n '2,12p' "$0" >&2; exit 2; }
dir=$1 kind=$2; shift 2
DAYS=${DAYS:-825}
SSL_NAME=${SSL_NAME:-clgemma-host}
umask 077
mkdir -p "$dir"
die() { echo "multihost-ca: $*" >&2; exit 1; }
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out "$1" 2>/dev/null || die "openssl genpkey failed"; }

if [ ! -s "$dir/ca.pem" ]; then
  key "$dir/ca.key"
  openssl req -x509 -new -key "$dir/ca.key" -days "$DAYS" -subj "/CN=clgemma private CA $(date -u +%Y%m%d%H%M%S)" \
    -addext "basicConstraints=critical,CA:TRUE,pathlen:0" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out "$dir/ca.pem" 2>/dev/null || die "could not make the CA"
  chmod 644 "$dir/ca.pem"
  echo "multihost-ca: made the CA $dir/ca.pem (key $dir/ca.key)" >&2
fi

# sign NAME with extensions (a file of openssl's x509v3 lines)
sign() {
  key "$dir/$1.key"
  openssl req -new -key "$dir/$1.key" -subj "/CN=$1" -out "$dir/$1.csr" 2>/dev/null || die "could not make a request for $1"
  openssl x509 -req -in "$dir/$1.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial -days "$DAYS" \
    -extfile "$dir/$1.ext" -out "$dir/$1.pem" 2>/dev/null || die "could not sign $1"
  rm -f "$dir/$1.csr" "$dir/$1.ext"
  chmod 644 "$dir/$1.pem"
  echo "multihost-ca: $dir/$1.pem, key $dir/$1.key" >&2
}

case "$kind" in
  host)
    [ $# -ge 1 ] || die "host NAME [ADDR...]"
    name=$1; shift
    san="DNS:$SSL_NAME,DNS:$name"
    for a in "$@"; do
      case "$a" in *[!0-9.]*) case "$a" in *:*) san="$san,IP:$a" ;; *) san="$san,DNS:$a" ;; esac ;; *) san="$san,IP:$a" ;; esac
    done
    # serverAuth only: a host's certificate cannot pass as the front's
    printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=%s\n' \
      "$san" > "$dir/$name.ext"
    sign "$name" ;;
  front)
    name=${1:-front}
    printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n' > "$dir/$name.ext"
    sign "$name" ;;
  *) die "unknown kind '$kind': host or front" ;;
esac
