#!/bin/sh
# API keys of a clgemma nginx: the keys file (one key a line, '#' comments) and the nginx map made
# from it. Adding or revoking a key re-renders the map and reloads nginx; workers keep running.
#   sh deploy/keys.sh add [KEY]     append KEY (default: a new random sk-clgemma-... key, printed)
#   sh deploy/keys.sh revoke KEY    remove every line equal to KEY
#   sh deploy/keys.sh list          the keys
#   sh deploy/keys.sh render        only write $RUN_DIR/nginx/keys.map (deploy/render-conf.sh calls it)
# Environment: RUN_DIR (default .run: the nginx of `make serve`; /etc/clgemma for the system
# install), KEYS_FILE (default $RUN_DIR/api_keys), KEYS_OWNER (chown the files, e.g. clgemma).
# Reload: the nginx of $RUN_DIR/nginx/ when it runs there, else the system nginx (nginx -s reload).
# A key is 8..200 characters of [A-Za-z0-9._~+/=-]; nginx matches it exactly, case-sensitively.
set -eu
cd "$(dirname "$0")/.."
RUN_DIR=${RUN_DIR:-${CLGEMMA_RUN_DIR:-$(pwd)/.run}}
case "$RUN_DIR" in /*) ;; *) RUN_DIR=$(pwd)/$RUN_DIR ;; esac
KEYS_FILE=${KEYS_FILE:-$RUN_DIR/api_keys}
map=$RUN_DIR/nginx/keys.map
umask 077  # keys and the map: owner only (0600)
die() { echo "keys.sh: $*" >&2; exit 1; }
valid() { printf '%s' "$1" | grep -Eqx '[A-Za-z0-9._~+/=-]{8,200}'; }
own() { [ -z "${KEYS_OWNER:-}" ] || chown "$KEYS_OWNER" "$@"; }

render() {
  mkdir -p "$RUN_DIR/nginx"
  : > "$map.new"
  while IFS= read -r key || [ -n "$key" ]; do
    case "$key" in ''|'#'*) continue ;; esac
    valid "$key" || { rm -f "$map.new"; die "$KEYS_FILE: a key has characters outside [A-Za-z0-9._~+/=-] or is not 8..200 long"; }
    # a case-sensitive regex (a map's plain strings match case-insensitively); every non-alphanumeric escaped
    printf '"~^(?i:bearer) %s$" 1;\n' "$(printf '%s' "$key" | sed 's/[^A-Za-z0-9]/\\&/g')" >> "$map.new"
  done < "$KEYS_FILE"
  [ -s "$map.new" ] || { rm -f "$map.new"; die "$KEYS_FILE holds no key"; }
  chmod 600 "$map.new"; own "$map.new"
  mv "$map.new" "$map"
}

reload() {
  conf=$RUN_DIR/nginx/nginx.conf
  if [ -f "$RUN_DIR/nginx/nginx.pid" ] && [ -f "$conf" ]; then
    set -- -p "$RUN_DIR/nginx/" -c "$conf" -e "$RUN_DIR/nginx/logs/error.log"
  else
    set --
  fi
  nginx -q -t "$@" 2>&1 | grep -v 'the "user" directive' >&2 || true
  nginx -q -t "$@" 2>/dev/null || return 1
  nginx "$@" -s reload
}

# edit the keys file, render, reload; on any failure the old file and map come back
change() { # new-keys-file
  cp -p "$KEYS_FILE" "$KEYS_FILE.old"
  [ -f "$map" ] && cp -p "$map" "$map.old"
  chmod 600 "$1"; own "$1"
  mv "$1" "$KEYS_FILE"
  if (render) && reload; then
    rm -f "$KEYS_FILE.old" "$map.old"
  else
    mv "$KEYS_FILE.old" "$KEYS_FILE"; [ -f "$map.old" ] && mv "$map.old" "$map"
    die "nginx did not take the new keys: nothing changed"
  fi
}

cmd=${1:-}
case "$cmd" in
  render) render ;;
  list) grep -v '^#' "$KEYS_FILE" | grep . || true ;;
  add)
    key=${2:-sk-clgemma-$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n')}
    valid "$key" || die "a key is 8..200 characters of [A-Za-z0-9._~+/=-]"
    grep -qxF -- "$key" "$KEYS_FILE" 2>/dev/null && die "that key is already there"
    [ -f "$KEYS_FILE" ] || : > "$KEYS_FILE"
    { cat "$KEYS_FILE"; printf '%s\n' "$key"; } > "$KEYS_FILE.new"
    change "$KEYS_FILE.new"
    [ -n "${2:-}" ] && echo "keys.sh: added" || echo "$key" ;;
  revoke)
    [ -n "${2:-}" ] || die "revoke which key?"
    grep -qxF -- "$2" "$KEYS_FILE" || die "no such key in $KEYS_FILE"
    grep -vxF -- "$2" "$KEYS_FILE" > "$KEYS_FILE.new" || true
    change "$KEYS_FILE.new"
    echo "keys.sh: revoked" ;;
  *) sed -n '2,12p' "$0" >&2; exit 2 ;;
esac
