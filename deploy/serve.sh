#!/bin/sh
# make serve: install what is missing, build, fetch the default model, make a self-signed
# certificate and an API key, start the workers (spawn-fcgi) and nginx (TLS, unprivileged port,
# as the current user, prefix under .run/), wait for /health, then print the URL, the key and a
# curl command that works as pasted. `make stop` (deploy/stop.sh) stops all of it.
# Environment: CLGEMMA_PORT (8443), CLGEMMA_BIND (127.0.0.1), CLGEMMA_DEVICES ("" = one worker per
# GPU of this host, or one on the engine's pick where it has none; "0:0,0:1" = one worker per device
# named), CLGEMMA_MODEL, CLGEMMA_MMPROJ (a vision projector beside a Gemma 4 model: image input; nginx then
# takes bodies of 32 MiB), CLGEMMA_RUN_DIR (.run),
# CLGEMMA_CTX (context per sequence, default from conf/clgemma.conf), CLGEMMA_PROTOCOL (http or
# fastcgi: what nginx and the workers speak; default http), CLGEMMA_SKIP_SETUP=1.
# `make serve MODEL=path/to/file.gguf` sets CLGEMMA_MODEL.
set -eu
here=$(pwd)
cd "$(dirname "$0")/.."
root=$(pwd)
RUN_DIR=${CLGEMMA_RUN_DIR:-$root/.run}
case "$RUN_DIR" in /*) ;; *) RUN_DIR=$root/$RUN_DIR ;; esac
PORT=${CLGEMMA_PORT:-8443}
BIND_ADDR=${CLGEMMA_BIND:-127.0.0.1}
MODEL=${CLGEMMA_MODEL:-models/gemma-3-270m-q4_k_m.gguf}
# a model path given relative to where make/serve was called from
case "$MODEL" in /*|models/gemma-3-270m-q4_k_m.gguf) ;; *) [ -e "$here/$MODEL" ] && MODEL=$here/$MODEL ;; esac
DEVICES=${CLGEMMA_DEVICES:-}
PROTOCOL=${CLGEMMA_PROTOCOL:-http}

say() { printf 'serve: %s\n' "$*"; }

if [ "${CLGEMMA_SKIP_SETUP:-0}" != 1 ]; then
  sh deploy/setup.sh
  say "building"
  make --no-print-directory -s build/clgemma-fcgi build/clgemma
  [ "$MODEL" = models/gemma-3-270m-q4_k_m.gguf ] && sh deploy/fetch_model.sh
fi
[ -s "$MODEL" ] || { echo "serve: model $MODEL not found" >&2; exit 1; }
# the workers' devices (one per GPU unless named), each checked to hold the model before anything
# stops or starts: a model too big for one device is one line here, not N crashing workers
DEVICES=$(DEVICES=$DEVICES CTX=${CLGEMMA_CTX:-} sh deploy/devices.sh "$MODEL") || exit 1

# one server at a time per run directory
RUN_DIR=$RUN_DIR sh deploy/stop.sh --quiet

mkdir -p "$RUN_DIR/tls" "$RUN_DIR/sockets" "$RUN_DIR/logs"
chmod 700 "$RUN_DIR"
cert=$RUN_DIR/tls/cert.pem
if [ ! -s "$cert" ]; then
  say "making a self-signed certificate for localhost"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 825 \
    -subj "/CN=localhost" -addext "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1" \
    -keyout "$RUN_DIR/tls/key.pem" -out "$cert" 2>/dev/null
  chmod 600 "$RUN_DIR/tls/key.pem"
fi
keys=$RUN_DIR/api_keys
if [ ! -s "$keys" ]; then
  printf 'sk-clgemma-%s\n' "$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n')" > "$keys"
  chmod 600 "$keys"
fi
key=$(grep -v '^#' "$keys" | head -n 1)

# workers: one per device, each on its own socket
sockets=""
i=0
for dev in $DEVICES; do
  [ "$dev" = default ] && dev=""
  sock=$RUN_DIR/sockets/worker-$i.sock
  PIDFILE=$RUN_DIR/worker-$i.pid LOGFILE=$RUN_DIR/logs/worker-$i.log \
    sh deploy/spawn-fcgi.sh "$sock" "$dev" -- -m "$MODEL" --protocol "$PROTOCOL" ${CLGEMMA_CTX:+--ctx "$CLGEMMA_CTX"} \
      ${CLGEMMA_MMPROJ:+--mmproj "$CLGEMMA_MMPROJ"} >/dev/null
  sockets="$sockets $sock"
  i=$((i + 1))
done
say "started $i worker(s); logs in $RUN_DIR/logs/"

RUN_DIR=$RUN_DIR SOCKETS=$sockets HTTPS_PORT=$PORT BIND=$BIND_ADDR CERT=$cert \
  CERT_KEY=$RUN_DIR/tls/key.pem KEYS_FILE=$keys LOG_DIR=$RUN_DIR/logs PROTOCOL=$PROTOCOL \
  MAX_BODY=${CLGEMMA_MMPROJ:+33554432} sh deploy/render-conf.sh
nginx -q -t -p "$RUN_DIR/nginx/" -c "$RUN_DIR/nginx/nginx.conf" -e "$RUN_DIR/nginx/logs/error.log" 2>&1 |
  grep -v 'the "user" directive' >&2 || true
nginx -p "$RUN_DIR/nginx/" -c "$RUN_DIR/nginx/nginx.conf" -e "$RUN_DIR/nginx/logs/error.log" || {
  echo "serve: nginx did not start (is port $PORT taken? CLGEMMA_PORT=... picks another); see $RUN_DIR/nginx/logs/error.log" >&2
  RUN_DIR=$RUN_DIR sh deploy/stop.sh --quiet
  exit 1
}

host=$BIND_ADDR
[ "$host" = 127.0.0.1 ] || [ "$host" = 0.0.0.0 ] && host=localhost
url=https://$host:$PORT
say "waiting for the model to load ($url/health)"
t=0
until curl -sf --cacert "$cert" "https://localhost:$PORT/health" -o /dev/null; do
  t=$((t + 1))
  # every worker has failed to load (each restarts with back-off and would fail again): say why, stop
  why=$( [ $((t % 3)) -eq 0 ] && curl -s --cacert "$cert" "https://localhost:$PORT/health" 2>/dev/null |
    python3 -c 'import json, sys
p = json.load(sys.stdin).get("pool") or []
if p and all(w.get("load_failures") for w in p):
    print("; ".join(sorted({w.get("last_error", "") for w in p})))' 2>/dev/null || true)
  if [ -n "$why" ]; then
    echo "serve: no worker can load $MODEL: $why (logs: $RUN_DIR/logs/)" >&2
    RUN_DIR=$RUN_DIR sh deploy/stop.sh --quiet
    exit 1
  fi
  if [ "$t" -gt 600 ]; then
    echo "serve: no healthy worker after 10 minutes; worker log:" >&2
    tail -n 20 "$RUN_DIR/logs/worker-0.log" >&2
    exit 1
  fi
  sleep 1
done
model_id=$(basename "$MODEL" .gguf)

# the built-in default is a base (completion) model; chat examples only for files that carry a
# chat template (instruction-tuned checkpoints do)
chat=0
if [ "$MODEL" != models/gemma-3-270m-q4_k_m.gguf ] && head -c 67108864 "$MODEL" | grep -aq tokenizer.chat_template; then
  chat=1
fi

cat <<TXT

clgemma is serving $model_id
  URL      $url/v1        (OpenAI API; /health open, /metrics from this machine only)
  API key  $key
  CA cert  $cert   (self-signed: curl --cacert, or SSL_CERT_FILE for Python clients)
  logs     $RUN_DIR/logs/        stop with: make stop

Try it (a streamed completion):

curl -N --cacert $cert $url/v1/completions \\
  -H "Authorization: Bearer $key" -H "Content-Type: application/json" \\
  -d '{"model":"$model_id","stream":true,"max_tokens":64,"prompt":"The three primary colours are"}'

or, with the openai Python package:

SSL_CERT_FILE=$cert OPENAI_API_KEY=$key OPENAI_BASE_URL=$url/v1 python3 -c 'import openai; print(openai.OpenAI().completions.create(model="$model_id", prompt="The capital of France is", max_tokens=32).choices[0].text)'
TXT
if [ "$chat" = 1 ]; then
cat <<TXT

A chat turn (this file carries a chat template):

curl -N --cacert $cert $url/v1/chat/completions \\
  -H "Authorization: Bearer $key" -H "Content-Type: application/json" \\
  -d '{"model":"$model_id","stream":true,"max_tokens":256,"messages":[{"role":"user","content":"Why is the sky blue?"}]}'
TXT
else
  echo
  echo "($model_id is a base model: it continues text, so use /v1/completions; chat needs an instruction-tuned GGUF, see README.md)"
fi
