#!/bin/sh
# The newcomer's path: deploy/serve.sh (what `make serve` runs, setup skipped: make test did it)
# in a temp run directory on a free port — spawn-fcgi workers, nginx, certificate, key — then the
# curl line it prints, pasted as is, must stream a completion from the default (base) model, which
# gets no chat example; deploy/stop.sh must stop it all, letting running streams complete first
# (workers drain, nginx quits last).
cd "$(dirname "$0")/../.." || exit 1
run=$(mktemp -d /tmp/clgemma-serve.XXXXXX)
cleanup() { RUN_DIR=$run sh deploy/stop.sh --quiet; rm -rf "$run"; }
trap cleanup EXIT
trap 'exit 1' INT TERM
port=$(.venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
if ! CLGEMMA_RUN_DIR=$run CLGEMMA_PORT=$port CLGEMMA_SKIP_SETUP=1 CLGEMMA_CTX=1024 sh deploy/serve.sh > "$run/serve.out" 2>&1; then
  echo "FAIL serve_starts: deploy/serve.sh failed"; cat "$run/serve.out"; exit 1
fi
echo "PASS serve_starts"
# the printed curl command: from "curl -N" to the line with -d '...'
sed -n '/^curl -N/,/-d /p' "$run/serve.out" | sed 's/"max_tokens":64/"max_tokens":8/' > "$run/curl.sh"
if [ ! -s "$run/curl.sh" ]; then echo "FAIL serve_prints_curl: no curl line in the output"; cat "$run/serve.out"; exit 1; fi
sh "$run/curl.sh" > "$run/answer" 2> "$run/curl.err"
if grep -q '"text":"[^"]' "$run/answer" && tail -n 2 "$run/answer" | grep -q '^data: \[DONE\]'; then
  echo "PASS serve_curl_line_streams_an_answer"
else
  echo "FAIL serve_curl_line_streams_an_answer: $(head -c 300 "$run/answer") $(cat "$run/curl.err")"; exit 1
fi
if grep -q 'chat/completions' "$run/serve.out" || ! grep -q 'is a base model' "$run/serve.out"; then
  echo "FAIL serve_base_model_demo_is_completion: the default base model got a chat example"; exit 1
fi
echo "PASS serve_base_model_demo_is_completion"
key=$(sed -n 's/^  API key  //p' "$run/serve.out")
[ -n "$key" ] && grep -qx "$key" "$run/api_keys" && echo "PASS serve_prints_the_key" || { echo "FAIL serve_prints_the_key: '$key'"; exit 1; }
pids="$(cat "$run"/worker-*.pid) $(cat "$run/nginx/nginx.pid")"
# make stop while streams run: the workers drain, nginx quits after them, every stream completes
.venv/bin/python tests/e2e/streams_through_stop.py "https://localhost:$port" "$run/tls/cert.pem" "$key" \
  gemma-3-270m-q4_k_m 3 "$run/streams.ready" > "$run/streams.out" 2>&1 &
streams=$!
n=0; while [ ! -f "$run/streams.ready" ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n + 1)); done
RUN_DIR=$run sh deploy/stop.sh > "$run/stop.out" 2>&1
if wait $streams; then
  echo "PASS stop_lets_running_streams_complete ($(tail -n 1 "$run/streams.out"))"
else
  echo "FAIL stop_lets_running_streams_complete: $(tr '\n' '|' < "$run/streams.out")"; cat "$run/stop.out"; exit 1
fi
if [ "$(grep -n 'stopped worker' "$run/stop.out" | tail -n 1 | cut -d: -f1)" -lt "$(grep -n 'stopped nginx' "$run/stop.out" | cut -d: -f1)" ]; then
  echo "PASS stop_quits_nginx_after_the_workers"
else
  echo "FAIL stop_quits_nginx_after_the_workers: $(tr '\n' '|' < "$run/stop.out")"; exit 1
fi
left=""
for p in $pids; do kill -0 "$p" 2>/dev/null && left="$left $p"; done
if [ -z "$left" ] && ! curl -s --cacert "$run/tls/cert.pem" "https://localhost:$port/health" >/dev/null 2>&1; then
  echo "PASS stop_stops_everything"
else
  echo "FAIL stop_stops_everything: still running:$left"; cat "$run/stop.out"; exit 1
fi
if grep -q '^stop: stopped nginx (pid [0-9][0-9]*)$' "$run/stop.out" && ! grep -Eq 'pid \(?\)' "$run/stop.out"; then
  echo "PASS stop_names_the_pids"
else
  echo "FAIL stop_names_the_pids: $(tr '\n' '|' < "$run/stop.out")"; exit 1
fi
# a model too big for one device: refused with one line naming weights and device memory, before any
# worker or nginx starts (a worker holds the whole model; there is no tensor or pipeline parallelism)
.venv/bin/python tools/make_bad_models.py "$run/bad" models/gemma-3-270m-q4_k_m.gguf >/dev/null 2>&1
if CLGEMMA_RUN_DIR=$run CLGEMMA_PORT=$port CLGEMMA_SKIP_SETUP=1 CLGEMMA_MODEL=$run/bad/huge.gguf sh deploy/serve.sh > "$run/huge.out" 2>&1; then
  echo "FAIL serve_refuses_a_model_too_big: it started"; cat "$run/huge.out"; exit 1
fi
if [ "$(wc -l < "$run/huge.out")" -eq 1 ] && grep -q 'of weights but device .* has .*no tensor or pipeline parallelism' "$run/huge.out" &&
   ! ls "$run"/worker-*.pid >/dev/null 2>&1; then
  echo "PASS serve_refuses_a_model_too_big ($(cut -c1-120 "$run/huge.out")...)"
else
  echo "FAIL serve_refuses_a_model_too_big: $(cat "$run/huge.out")"; exit 1
fi
# a worker that cannot load (here a queue needing more request threads than a worker has): serve.sh says why
# and stops once every worker has failed, instead of waiting 10 minutes on "loading" while they restart
sed 's/^# max-queue = .*/max-queue = 1700/' conf/clgemma.conf > "$run/noload.conf"
start=$(date +%s)
if CONFIG=$run/noload.conf CLGEMMA_RUN_DIR=$run CLGEMMA_PORT=$port CLGEMMA_SKIP_SETUP=1 CLGEMMA_CTX=1024 \
   sh deploy/serve.sh > "$run/noload.out" 2>&1; then
  echo "FAIL serve_reports_a_worker_that_cannot_load: it started"; cat "$run/noload.out"; exit 1
fi
took=$(( $(date +%s) - start ))
if grep -q '^serve: no worker can load .*--threads 1024 is too few for .*--max-queue 1700' "$run/noload.out" &&
   [ "$took" -lt 120 ] && ! ls "$run"/worker-*.pid >/dev/null 2>&1 && ! pgrep -f "$run/sockets" >/dev/null; then
  echo "PASS serve_reports_a_worker_that_cannot_load (${took} s: $(grep '^serve: no worker' "$run/noload.out" | cut -c1-140)...)"
else
  echo "FAIL serve_reports_a_worker_that_cannot_load (${took} s): $(tail -3 "$run/noload.out")"; exit 1
fi
