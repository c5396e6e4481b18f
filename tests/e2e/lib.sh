# tests/e2e/lib.sh — sourced by tests/suites/e2e_*.sh: a real stack on loopback (clgemma-fcgi on
# the 270M model, nginx with TLS and an API key, rendered from conf/ by deploy/render-conf.sh) in a
# temp dir on free ports, always torn down by the EXIT trap. After e2e_start these are set:
#   E2E_DIR E2E_URL E2E_KEY E2E_CERT E2E_MASTER_PID E2E_ACCESS_LOG E2E_WORKER_LOG E2E_MODEL_ID
# E2E_PORT, when set, is the TLS port (default: a free one). E2E_PROTOCOL: http (default) or
# fastcgi, what the workers and nginx speak to each other.
E2E_MODEL=${E2E_MODEL:-models/gemma-3-270m-q4_k_m.gguf}
E2E_PY=.venv/bin/python

e2e_fail() { echo "FAIL $1: $2"; exit 1; }

e2e_cleanup() {
  if [ -n "${E2E_DIR:-}" ]; then
    [ -f "$E2E_DIR/nginx/nginx.pid" ] && kill -QUIT "$(cat "$E2E_DIR/nginx/nginx.pid")" 2>/dev/null
    if [ -n "${E2E_MASTER_PID:-}" ] && kill -0 "$E2E_MASTER_PID" 2>/dev/null; then
      kill -TERM "$E2E_MASTER_PID" 2>/dev/null
      n=0
      while kill -0 "$E2E_MASTER_PID" 2>/dev/null && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
      kill -KILL "$E2E_MASTER_PID" 2>/dev/null
    fi
    mkdir -p build/test-logs
    cp "$E2E_DIR/worker.log" "build/test-logs/${E2E_NAME:-e2e}.worker.log" 2>/dev/null
    cp "$E2E_DIR/logs/access.log" "build/test-logs/${E2E_NAME:-e2e}.access.log" 2>/dev/null
    rm -rf "$E2E_DIR"
  fi
}

e2e_free_port() {
  "$E2E_PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# e2e_start NAME [clgemma-fcgi options...]: one worker unless E2E_WORKERS says otherwise
e2e_start() {
  E2E_NAME=$1; shift
  trap e2e_cleanup EXIT
  trap 'exit 1' INT TERM
  [ -x build/clgemma-fcgi ] || e2e_fail "$E2E_NAME" "build/clgemma-fcgi is not built (make all)"
  [ -s "$E2E_MODEL" ] || e2e_fail "$E2E_NAME" "$E2E_MODEL missing (sh deploy/fetch_model.sh)"
  "$E2E_PY" -c 'import openai, httpx, prometheus_client' 2>/dev/null ||
    e2e_fail "$E2E_NAME" "the test venv lacks openai/httpx/prometheus_client (sh deploy/setup.sh)"
  command -v nginx >/dev/null || e2e_fail "$E2E_NAME" "nginx is not installed (sh deploy/setup.sh)"
  E2E_DIR=$(mktemp -d /tmp/clgemma-e2e.XXXXXX)
  mkdir -p "$E2E_DIR/logs"
  E2E_CERT=$E2E_DIR/cert.pem
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=localhost \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1" -keyout "$E2E_DIR/key.pem" -out "$E2E_CERT" 2>/dev/null ||
    e2e_fail "$E2E_NAME" "openssl could not make a certificate"
  E2E_KEY=sk-test-$(od -An -tx1 -N12 /dev/urandom | tr -d ' \n')
  printf '# test keys\n%s\nsk-second-key-0001\n' "$E2E_KEY" > "$E2E_DIR/keys"
  E2E_WORKER_LOG=$E2E_DIR/worker.log
  E2E_ACCESS_LOG=$E2E_DIR/logs/access.log
  # E2E_WORKERS=N: N workers on the default device, one socket each
  sock="" listen="" devices="" i=0
  while [ $i -lt "${E2E_WORKERS:-1}" ]; do
    sock="$sock${sock:+ }$E2E_DIR/w$i.sock" listen="$listen${listen:+,}unix:$E2E_DIR/w$i.sock" devices="$devices${devices:+,}0:0"
    i=$((i + 1))
  done
  [ "${E2E_WORKERS:-1}" -gt 1 ] && set -- --devices "$devices" "$@"
  # no queue deadline unless the suite sets one (a later option wins): a busy 2-core machine may keep a
  # queued request past the default 30 s, and its 503 is not what those suites test
  set -- --queue-timeout 0 "$@"
  build/clgemma-fcgi -m "$E2E_MODEL" --listen "$listen" --protocol "${E2E_PROTOCOL:-http}" "$@" > "$E2E_WORKER_LOG" 2>&1 &
  E2E_MASTER_PID=$!
  port=${E2E_PORT:-$(e2e_free_port)}
  RUN_DIR=$E2E_DIR SOCKETS=$sock HTTPS_PORT=$port CERT=$E2E_CERT CERT_KEY=$E2E_DIR/key.pem \
    KEYS_FILE=$E2E_DIR/keys PROTOCOL=${E2E_PROTOCOL:-http} LOG_DIR=$E2E_DIR/logs READ_TIMEOUT=${E2E_READ_TIMEOUT:-600} MAX_BODY=${E2E_NGINX_MAX_BODY:-2m} \
    sh deploy/render-conf.sh || e2e_fail "$E2E_NAME" "render-conf failed"
  nginx -p "$E2E_DIR/nginx/" -c "$E2E_DIR/nginx/nginx.conf" -e "$E2E_DIR/nginx/logs/error.log" 2>"$E2E_DIR/nginx-start.log" ||
    { cat "$E2E_DIR/nginx-start.log"; e2e_fail "$E2E_NAME" "nginx did not start"; }
  E2E_URL=https://localhost:$port
  E2E_MODEL_ID=$(basename "$E2E_MODEL" .gguf)
  t0=$(date +%s)
  until curl -sf --cacert "$E2E_CERT" "$E2E_URL/health" -o /dev/null; do
    if ! kill -0 "$E2E_MASTER_PID" 2>/dev/null; then cat "$E2E_WORKER_LOG"; e2e_fail "$E2E_NAME" "the worker exited"; fi
    [ $(($(date +%s) - t0)) -gt 300 ] && { tail "$E2E_WORKER_LOG"; e2e_fail "$E2E_NAME" "no /health 200 after 300 s"; }
    sleep 0.2
  done
  echo "stack up in $(($(date +%s) - t0))s: $E2E_URL (worker log $E2E_WORKER_LOG)"
  export E2E_DIR E2E_URL E2E_KEY E2E_CERT E2E_MASTER_PID E2E_ACCESS_LOG E2E_WORKER_LOG E2E_MODEL_ID
}

# e2e_two_phases NAME DRIVER PHASE_VAR PHASE1 "OPTS1" PHASE2 "OPTS2": the driver against a worker started with
# OPTS1 (PHASE_VAR=PHASE1 in its environment), then against a fresh one with OPTS2; E2E_REF names a temp file
# the two phases share (removed at the end). Returns the first failing phase's status.
e2e_two_phases() {
  name=$1 driver=$2 var=$3
  E2E_REF=$(mktemp "/tmp/clgemma-$name-ref.XXXXXX")
  export E2E_REF
  e2e_start "${name}_$4" $5
  env "$var=$4" PYTHONPATH=tests/e2e "$E2E_PY" "$driver" || { rm -f "$E2E_REF"; return 1; }
  e2e_cleanup
  e2e_start "${name}_$6" $7
  env "$var=$6" PYTHONPATH=tests/e2e "$E2E_PY" "$driver"
  rc=$?
  rm -f "$E2E_REF"
  return $rc
}
