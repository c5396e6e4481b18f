#!/bin/sh
# Two GPU hosts behind a front nginx (issue 24 item 3), simulated on loopback: "hosts" 127.0.0.2 and
# 127.0.0.3, each one worker (--ctx 256) and its own nginx requiring a client certificate of the private
# CA (BACKEND_TLS=1), and a front nginx on 127.0.0.1 with the API keys over both (HOSTS=...), with the
# certificates of deploy/multihost-ca.sh. Checks: completions through the front, served by both hosts;
# a host refuses a client without a certificate and one whose certificate another CA signed; with one
# host's worker gone the front serves through the other; everything stops at the end.
cd "$(dirname "$0")/../.." || exit 1
M=models/gemma-3-270m-q4_k_m.gguf
PY=.venv/bin/python
d=$(mktemp -d /tmp/clgemma-multihost.XXXXXX)
fails=0
ok() { echo "PASS $1"; }
no() { echo "FAIL $1: $2"; fails=1; }
die() { echo "FAIL $1: $2"; exit 1; }

# running, not a zombie (a daemonized nginx's master may wait to be reaped by whoever adopted it)
alive() { [ -r "/proc/$1/stat" ] && ! sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | grep -q '^Z'; }
stop_all() {
  for n in h1 h2 front; do
    [ -f "$d/$n/nginx/nginx.pid" ] && kill -QUIT "$(cat "$d/$n/nginx/nginx.pid")" 2>/dev/null
  done
  for n in h1 h2; do
    p=$(cat "$d/$n.pid" 2>/dev/null) || continue
    kill -TERM "$p" 2>/dev/null
    i=0; while kill -0 "$p" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    kill -KILL "$p" 2>/dev/null
  done
  i=0
  for n in h1 h2 front; do
    while [ -f "$d/$n/nginx/nginx.pid" ] && alive "$(cat "$d/$n/nginx/nginx.pid")" && [ $i -lt 50 ]; do
      sleep 0.1; i=$((i + 1))
    done
  done
}
cleanup() {
  stop_all
  mkdir -p build/test-logs
  for n in h1 h2 front; do cp "$d/$n/logs/access.log" "build/test-logs/e2e_multihost.$n.access.log" 2>/dev/null; done
  for n in h1 h2; do cp "$d/$n.log" "build/test-logs/e2e_multihost.$n.worker.log" 2>/dev/null; done
  rm -rf "$d"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
[ -x build/clgemma-fcgi ] && [ -s "$M" ] || die multihost_setup "build/clgemma-fcgi or $M missing"
for a in 127.0.0.2 127.0.0.3; do
  $PY -c "import socket,sys; socket.socket().bind(('$a', 0))" 2>/dev/null || die multihost_setup "cannot bind $a on this machine"
done
port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
hport=$(port) fport=$(port)

# the private CA: a server certificate per host, the front's client certificate; a stranger's CA and client
ca=$d/ca
for h in h1:127.0.0.2 h2:127.0.0.3; do sh deploy/multihost-ca.sh "$ca" host "${h%%:*}" "${h#*:}" 2>/dev/null || die multihost_ca "host $h"; done
sh deploy/multihost-ca.sh "$ca" front 2>/dev/null || die multihost_ca front
sh deploy/multihost-ca.sh "$d/other" front 2>/dev/null || die multihost_ca "another CA"
if [ "$(stat -c %a "$ca/ca.key")" = 600 ] && [ "$(stat -c %a "$ca/front.key")" = 600 ] &&
   openssl verify -CAfile "$ca/ca.pem" "$ca/h1.pem" "$ca/front.pem" >/dev/null 2>&1 &&
   ! openssl verify -CAfile "$ca/ca.pem" "$d/other/front.pem" >/dev/null 2>&1 &&
   openssl x509 -in "$ca/h2.pem" -noout -ext subjectAltName | grep -q 'DNS:clgemma-host, DNS:h2, IP Address:127.0.0.3'; then
  ok multihost_ca_certificates
else no multihost_ca_certificates "keys not 0600, or a certificate does not verify as it should"; fi

# two hosts: a worker and an nginx each, on the same port of their own address
for h in h1:127.0.0.2 h2:127.0.0.3; do
  n=${h%%:*} addr=${h#*:}
  mkdir -p "$d/$n/logs"
  build/clgemma-fcgi -m "$M" --listen "unix:$d/$n/w0.sock" --ctx 256 --max-seqs 2 --queue-timeout 0 > "$d/$n.log" 2>&1 &
  echo $! > "$d/$n.pid"
  RUN_DIR=$d/$n SOCKETS=$d/$n/w0.sock BIND=$addr HTTPS_PORT=$hport CERT=$ca/$n.pem CERT_KEY=$ca/$n.key \
    BACKEND_TLS=1 CLIENT_CA=$ca/ca.pem LOG_DIR=$d/$n/logs sh deploy/render-conf.sh || die multihost_render "host $n"
  nginx -p "$d/$n/nginx/" -c "$d/$n/nginx/nginx.conf" -e "$d/$n/nginx/logs/error.log" 2>"$d/$n.nginx.err" ||
    die multihost_host_nginx "$n: $(cat "$d/$n.nginx.err")"
done
# the front: TLS for clients (its own self-signed certificate), the API key, both hosts upstream
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=localhost \
  -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -keyout "$d/site.key" -out "$d/site.pem" 2>/dev/null
key=sk-test-$(od -An -tx1 -N12 /dev/urandom | tr -d ' \n')
printf '%s\n' "$key" > "$d/keys"
mkdir -p "$d/front/logs"
RUN_DIR=$d/front HOSTS="127.0.0.2:$hport 127.0.0.3:$hport" HTTPS_PORT=$fport CERT=$d/site.pem CERT_KEY=$d/site.key \
  KEYS_FILE=$d/keys CLIENT_CERT=$ca/front.pem CLIENT_KEY=$ca/front.key HOSTS_CA=$ca/ca.pem LOG_DIR=$d/front/logs \
  sh deploy/render-conf.sh || die multihost_render front
nginx -p "$d/front/nginx/" -c "$d/front/nginx/nginx.conf" -e "$d/front/nginx/logs/error.log" 2>"$d/front.nginx.err" ||
  die multihost_front_nginx "$(cat "$d/front.nginx.err")"
if grep -q 'proxy_pass https://' "$d/front/nginx/clgemma-upstream.conf" && ! grep -Eq 'proxy_pass http://|fastcgi_pass' "$d/front/nginx/clgemma-upstream.conf" &&
   grep -q 'ssl_verify_client on' "$d/h1/nginx/clgemma-site.conf"; then
  ok multihost_only_tls_between_hosts
else no multihost_only_tls_between_hosts "the front's upstream or a host's site is not mutual TLS"; fi

url=https://localhost:$fport
t0=$(date +%s)
for n in h1 h2; do
  # a host's own /health, with the front's certificate (what the front presents)
  until curl -sf --cacert "$ca/ca.pem" --cert "$ca/front.pem" --key "$ca/front.key" --resolve "clgemma-host:$hport:127.0.0.$((${n#h} + 1))" \
      "https://clgemma-host:$hport/health" -o /dev/null; do
    kill -0 "$(cat "$d/$n.pid")" 2>/dev/null || { tail -n 5 "$d/$n.log"; die multihost_up "worker $n exited"; }
    [ $(($(date +%s) - t0)) -gt 120 ] && die multihost_up "no /health 200 from $n in 120 s"
    sleep 0.2
  done
done
ok "multihost_hosts_up_with_client_certificate ($(($(date +%s) - t0)) s)"

complete() { # -> http status of one completion through the front
  curl -s -o "$d/answer" -w '%{http_code}' --cacert "$d/site.pem" "$url/v1/completions" \
    -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
    -d '{"model":"gemma-3-270m-q4_k_m","prompt":"The capital of France is","max_tokens":4}'
}
codes=""
for i in 1 2 3 4 5 6; do codes="$codes $(complete)"; done
h1n=$(grep -c "up=127.0.0.2:$hport" "$d/front/logs/access.log")
h2n=$(grep -c "up=127.0.0.3:$hport" "$d/front/logs/access.log")
if [ "$codes" = " 200 200 200 200 200 200" ] && grep -q '"text":"' "$d/answer" && [ "$h1n" -ge 1 ] && [ "$h2n" -ge 1 ]; then
  ok "multihost_front_serves_through_both_hosts (6 x 200; host 1 served $h1n, host 2 $h2n)"
else no multihost_front_serves_through_both_hosts "codes$codes, h1 $h1n h2 $h2n: $(head -c 200 "$d/answer")"; fi
# the hosts saw the requests (their own logs), each from the front
if grep -q 'POST /v1/completions HTTP/1.1" 200' "$d/h1/logs/access.log" && grep -q 'POST /v1/completions HTTP/1.1" 200' "$d/h2/logs/access.log"; then
  ok multihost_hosts_log_the_requests
else no multihost_hosts_log_the_requests "$(tail -n 2 "$d/h1/logs/access.log") | $(tail -n 2 "$d/h2/logs/access.log")"; fi
# one request id from client to worker: the front's X-Request-Id is the host's and the worker's
rid=$(curl -s -D - -o /dev/null --cacert "$d/site.pem" "$url/v1/completions" -H "Authorization: Bearer $key" \
  -H 'Content-Type: application/json' -d '{"model":"gemma-3-270m-q4_k_m","prompt":"Hi","max_tokens":1}' |
  tr -d '\r' | sed -n 's/^[Xx]-[Rr]equest-[Ii]d: //p')
sleep 0.2
if [ -n "$rid" ] && grep -q "rid=$rid " "$d/front/logs/access.log" && cat "$d"/h?/logs/access.log | grep -q "rid=$rid " &&
   cat "$d"/h?.log | grep -q "rid=$rid "; then
  ok "multihost_one_request_id_end_to_end ($rid)"
else no multihost_one_request_id_end_to_end "'$rid' not in the front's, a host's and a worker's log"; fi
# a client's own X-Request-Id is not taken by the front
curl -s -o /dev/null --cacert "$d/site.pem" -H 'X-Request-Id: 0123456789abcdef0123456789abcdef' "$url/health"
grep -q 'rid=0123456789abcdef0123456789abcdef' "$d/front/logs/access.log" &&
  no multihost_front_ignores_client_request_id "the front logged the client's id" || ok multihost_front_ignores_client_request_id
# a stream crosses both tiers as events (unbuffered at the front and at the host)
curl -sN --cacert "$d/site.pem" "$url/v1/completions" -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
  -d '{"model":"gemma-3-270m-q4_k_m","prompt":"The capital of France is","max_tokens":6,"stream":true}' > "$d/stream"
if [ "$(grep -c '^data: {' "$d/stream")" -ge 6 ] && tail -n 2 "$d/stream" | grep -q '^data: \[DONE\]'; then
  ok "multihost_stream_through_the_front ($(grep -c '^data: {' "$d/stream") events)"
else no multihost_stream_through_the_front "$(head -c 300 "$d/stream")"; fi
[ "$(curl -s -o /dev/null -w '%{http_code}' --cacert "$d/site.pem" "$url/v1/models")" = 401 ] &&
  ok multihost_front_needs_the_key || no multihost_front_needs_the_key "the front answered without a key"

# a scraper with its own certificate of the CA reads each host's pool metrics straight from the host
sh deploy/multihost-ca.sh "$ca" front scraper 2>/dev/null
code=$(curl -s -o "$d/metrics" -w '%{http_code}' --cacert "$ca/ca.pem" --cert "$ca/scraper.pem" --key "$ca/scraper.key" \
  --resolve "clgemma-host:$hport:127.0.0.3" "https://clgemma-host:$hport/metrics")
[ "$code" = 200 ] && grep -q '^clgemma_' "$d/metrics" && ok "multihost_host_metrics_with_a_scraper_certificate ($(grep -c '^clgemma_' "$d/metrics") samples)" ||
  no multihost_host_metrics_with_a_scraper_certificate "status $code: $(head -c 200 "$d/metrics")"

# straight to a host: no certificate, or one from another CA -> refused (handshake failure or 400)
refused() { # name, curl options...
  name=$1; shift
  code=$(curl -s -o "$d/refused" -w '%{http_code}' --cacert "$ca/ca.pem" --resolve "clgemma-host:$hport:127.0.0.2" "$@" \
    -H 'Content-Type: application/json' -d '{"model":"gemma-3-270m-q4_k_m","prompt":"Hi","max_tokens":1}' \
    "https://clgemma-host:$hport/v1/completions")
  case "$code" in
    000) ok "$name (TLS handshake refused)" ;;
    400) if grep -q 'SSL certificate' "$d/refused"; then ok "$name (400: $(grep -o '<title>[^<]*' "$d/refused" | cut -c8-))"
         else no "$name" "400 without the certificate message"; fi ;;
    *) no "$name" "status $code: $(head -c 200 "$d/refused")" ;;
  esac
}
refused multihost_host_refuses_no_certificate
refused multihost_host_refuses_another_ca --cert "$d/other/front.pem" --key "$d/other/front.key"
# a host's own server certificate is no client certificate (serverAuth only)
refused multihost_host_refuses_a_server_certificate --cert "$ca/h2.pem" --key "$ca/h2.key"

# host 1's worker stops: its nginx answers 503, the front tries host 2, clients see only 200s
p=$(cat "$d/h1.pid"); kill -KILL "$p"; wait "$p" 2>/dev/null
sleep 0.3
before=$(wc -l < "$d/front/logs/access.log")
codes=""
for i in 1 2 3 4; do codes="$codes $(complete)"; done
tail -n +$((before + 1)) "$d/front/logs/access.log" > "$d/after"
if [ "$codes" = " 200 200 200 200" ] && [ "$(grep -c "[ =]127.0.0.3:$hport\$" "$d/after")" -eq 4 ]; then
  ok "multihost_one_host_down_front_serves (4 x 200 through host 2; $(grep -c "up=127.0.0.2:$hport, 127.0.0.3:$hport" "$d/after") after host 1 answered 503)"
else no multihost_one_host_down_front_serves "codes$codes; $(cut -d' ' -f4- "$d/after" | tr '\n' '|')"; fi

# host 1's nginx gone too (the machine off): the connection is refused and the front goes on to host 2
kill -QUIT "$(cat "$d/h1/nginx/nginx.pid")"; sleep 0.5
codes=""
for i in 1 2; do codes="$codes $(complete)"; done
[ "$codes" = " 200 200" ] && ok "multihost_one_host_off_front_serves (2 x 200)" || no multihost_one_host_off_front_serves "codes$codes"

# everything stops: no process of ours, no listener left
pids="$(cat "$d/h1.pid" "$d/h2.pid") $(cat "$d"/*/nginx/nginx.pid 2>/dev/null)"
stop_all
left=""
for p in $pids; do alive "$p" && left="$left $p"; done
for a in 127.0.0.2:$hport 127.0.0.3:$hport 127.0.0.1:$fport; do
  $PY -c "import socket; s=socket.socket(); s.settimeout(1); s.connect(('${a%:*}', ${a##*:}))" 2>/dev/null && left="$left $a"
done
[ -z "$left" ] && ok multihost_all_stopped || no multihost_all_stopped "still there:$left"
exit $fails
