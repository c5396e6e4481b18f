#!/bin/sh
# Keys and the edge (issue 18 item 6) through the real stack: exact, case-sensitive keys; the
# longest accepted key; key file modes; deploy/keys.sh add + revoke with an nginx reload while the
# worker keeps running; 415 for non-JSON bodies; plain HTTP on the TLS port; [::1]; no TLS 1.2
# CBC suites; the worker's log line format; the systemd unit's hardening. Ports 18500-18599.
cd "$(dirname "$0")/../.." || exit 1
. tests/e2e/lib.sh
E2E_PORT=${E2E_KEYS_PORT:-18501} e2e_start e2e_keys --ctx 512 --max-seqs 1 --max-queue 2 --threads 6
port=${E2E_URL##*:}
fail=0
ok() { echo "PASS $1"; }
no() { echo "FAIL $1: $2"; fail=1; }
code() { # key [curl args...]: HTTP status of GET /v1/models with that key
  k=$1; shift
  curl -s -o /dev/null -w '%{http_code}' --cacert "$E2E_CERT" -H "Authorization: Bearer $k" "$@" "$E2E_URL/v1/models"
}
keys() { RUN_DIR=$E2E_DIR KEYS_FILE=$E2E_DIR/keys sh deploy/keys.sh "$@"; }
workers() { ps -o pid= --ppid "$E2E_MASTER_PID" | tr -d ' ' | sort | tr '\n' ' '; echo "$E2E_MASTER_PID"; }

# exact, case-sensitive
c1=$(code "$E2E_KEY"); c2=$(code "$(printf '%s' "$E2E_KEY" | tr a-z A-Z)"); c3=$(code "${E2E_KEY}x"); c4=$(code "${E2E_KEY%?}")
[ "$c1$c2$c3$c4" = 200401401401 ] && ok keys_exact_case_sensitive ||
  no keys_exact_case_sensitive "right/upper-case/longer/shorter key gave $c1/$c2/$c3/$c4 (want 200/401/401/401)"
c=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$E2E_CERT" -H "Authorization: bearer $E2E_KEY" "$E2E_URL/v1/models")
[ "$c" = 200 ] && ok keys_scheme_case_insensitive || no keys_scheme_case_insensitive "'bearer KEY' gave $c"

# key file modes (the map nginx reads and the keys file keys.sh writes)
m=$(stat -c %a "$E2E_DIR/nginx/keys.map")
[ "$m" = 600 ] && ok keys_map_mode_0600 || no keys_map_mode_0600 "keys.map is $m"

# add + revoke with a reload: the same worker processes serve before, between and after
before=$(workers)
long=$(printf 'sk-._~+/=-%0190d' 0 | tr 0 A)   # 200 characters, every allowed punctuation mark
cb=$(code "$long")
reloads=0
if keys add "$long" > "$E2E_DIR/add.out" 2>&1; then
  reloads=$((reloads + 1)); sleep 0.5
  ca=$(code "$long")
  [ "$cb$ca" = 401200 ] && ok keys_add_reload_longest_key_works || no keys_add_reload_longest_key_works "before/after add: $cb/$ca"
else
  no keys_add_reload_longest_key_works "keys.sh add of a ${#long}-character key failed: $(cat "$E2E_DIR/add.out")"
fi
# the longest key render-conf accepts, rendered alone into a config of its own: nginx -t must pass
mkdir -p "$E2E_DIR/t"; printf '%s\n' "$long" > "$E2E_DIR/t/keys"
if RUN_DIR=$E2E_DIR/t SOCKETS=$E2E_DIR/w0.sock HTTPS_PORT=18502 CERT=$E2E_CERT CERT_KEY=$E2E_DIR/key.pem \
     KEYS_FILE=$E2E_DIR/t/keys sh deploy/render-conf.sh 2>"$E2E_DIR/t.err" &&
   nginx -q -t -p "$E2E_DIR/t/nginx/" -c "$E2E_DIR/t/nginx/nginx.conf" -e "$E2E_DIR/t/nginx/logs/error.log" 2>>"$E2E_DIR/t.err"; then
  ok keys_longest_key_nginx_t
else
  no keys_longest_key_nginx_t "$(grep -v 'the "user" directive' "$E2E_DIR/t.err" | head -n 3)"
fi
m=$(stat -c %a "$E2E_DIR/keys"); mm=$(stat -c %a "$E2E_DIR/nginx/keys.map")
[ "$m$mm" = 600600 ] && ok keys_file_mode_0600_after_add || no keys_file_mode_0600_after_add "keys $m, keys.map $mm"
if keys revoke "$long" > "$E2E_DIR/revoke.out" 2>&1; then
  reloads=$((reloads + 1)); sleep 0.5
  cr=$(code "$long"); ck=$(code "$E2E_KEY")
  [ "$cr$ck" = 401200 ] && ok keys_revoke_reload || no keys_revoke_reload "revoked/kept key: $cr/$ck"
else
  no keys_revoke_reload "keys.sh revoke failed: $(cat "$E2E_DIR/revoke.out")"
fi
after=$(workers)
echo "worker pids (children, master) before and after the reloads: $before / $after"
[ "$reloads" = 2 ] && [ "$before" = "$after" ] && [ -n "${before% *}" ] && ok keys_reload_keeps_workers ||
  no keys_reload_keeps_workers "$reloads of 2 reloads; worker pids $before -> $after"
keys add 'bad key with spaces' > "$E2E_DIR/bad.out" 2>&1
case "$?:$(cat "$E2E_DIR/bad.out")" in [1-9]*'keys.sh: a key is'*) ok keys_rejects_bad_key ;; *) no keys_rejects_bad_key "$(cat "$E2E_DIR/bad.out")" ;; esac

# 415 unless application/json (charset allowed)
post() { # content-type -> "status body"
  curl -s -w ' %{http_code}' --cacert "$E2E_CERT" -H "Authorization: Bearer $E2E_KEY" ${1:+-H "Content-Type: $1"} \
    --data-binary "{\"model\":\"$E2E_MODEL_ID\",\"prompt\":\"Hi\",\"max_tokens\":1}" "$E2E_URL/v1/completions"
}
r1=$(post text/plain); r2=$(post application/x-www-form-urlencoded); r3=$(post "application/json; charset=utf-8")
case "$r1|$r2|$r3" in
  *unsupported_media_type*415\|*unsupported_media_type*415\|*'"choices"'*200) ok content_type_415 ;;
  *) no content_type_415 "$(printf '%.300s' "$r1|$r2|$r3")" ;;
esac

# plain HTTP to the TLS port: a JSON error, not nginx's HTML page
r=$(curl -s -w ' %{http_code}' "http://127.0.0.1:$port/v1/models")
case "$r" in '{"error":'*https_required*' 400') ok plain_http_on_tls_port_json ;; *) no plain_http_on_tls_port_json "$(printf '%.200s' "$r")" ;; esac

# [::1] beside 127.0.0.1, under the same certificate
if grep -q '^00000000000000000000000000000001 ' /proc/net/if_inet6 2>/dev/null; then
  c=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$E2E_CERT" "https://[::1]:$port/health")
  [ "$c" = 200 ] && ok ipv6_loopback_listener || no ipv6_loopback_listener "https://[::1]:$port/health gave $c"
else
  ok "ipv6_loopback_listener (SKIP: this host has no ::1)"
fi

# TLS 1.2: AEAD suites only
tls() { openssl s_client -connect "127.0.0.1:$port" -servername localhost "$@" < /dev/null > /dev/null 2>&1; }
if tls -tls1_2 -cipher AES128-SHA; then no tls12_cbc_refused "a TLS 1.2 AES128-SHA handshake succeeded"
elif tls -tls1_2 -cipher ECDHE-ECDSA-AES128-SHA; then no tls12_cbc_refused "a TLS 1.2 ECDHE-ECDSA-AES128-SHA handshake succeeded"
elif ! tls -tls1_2 -cipher ECDHE-ECDSA-AES128-GCM-SHA256; then no tls12_cbc_refused "TLS 1.2 AES-GCM failed too"
elif ! tls -tls1_3; then no tls12_cbc_refused "TLS 1.3 failed"
else ok tls12_cbc_refused; fi

# worker log line: ISO-8601 UTC timestamp, who, rid= the X-Request-Id nginx sent back
rid=$(curl -s -D - -o /dev/null --cacert "$E2E_CERT" -H "Authorization: Bearer $E2E_KEY" -H "Content-Type: application/json" \
  --data-binary "{\"model\":\"$E2E_MODEL_ID\",\"prompt\":\"Hi\",\"max_tokens\":1}" "$E2E_URL/v1/completions" |
  tr -d '\r' | sed -n 's/^[Xx]-[Rr]equest-[Ii]d: //p')
sleep 0.2
if [ -n "$rid" ] && grep -Eq "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z clgemma-fcgi\[worker 0 pid [0-9]+\]: rid=$rid POST /v1/completions 200 " "$E2E_WORKER_LOG"; then
  ok worker_log_iso_time_and_rid
else
  no worker_log_iso_time_and_rid "rid '$rid'; last lines: $(tail -n 2 "$E2E_WORKER_LOG")"
fi
# the systemd unit: the usual hardening, and systemd-analyze verify finds nothing to say
unit=deploy/systemd/clgemma-fcgi@.service
miss=""
for d in NoNewPrivileges=yes ProtectSystem=strict ProtectHome=yes PrivateTmp=yes User=clgemma 'ReadWritePaths=/run/clgemma'; do
  grep -q "^$d" "$unit" || miss="$miss $d"
done
if [ -n "$miss" ]; then
  no systemd_unit_hardened "$unit lacks$miss"
elif command -v systemd-analyze >/dev/null; then
  v=$E2E_DIR/units; mkdir -p "$v"; cp deploy/systemd/* "$v/"; ln -s clgemma-fcgi@.service "$v/clgemma-fcgi@0.service"
  (cd "$v" && systemd-analyze verify --man=no ./clgemma-fcgi@0.service ./clgemma.target) > "$v/out" 2>&1
  [ $? = 0 ] && [ ! -s "$v/out" ] && ok systemd_unit_hardened || no systemd_unit_hardened "systemd-analyze verify: $(head -n 3 "$v/out")"
else
  ok "systemd_unit_hardened (directives present; SKIP verify: no systemd-analyze)"
fi
exit $fail
