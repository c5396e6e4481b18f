#!/bin/bash
# On a GPU machine with several GPUs (issue 24; repo root, $OUT set by the device tool; carry .gpu with build/
# binaries in .gpu/now, the .debs of nginx, nginx-common, spawn-fcgi, libpcre2-8-0 and
# libhttp-parser2.9 in .gpu/ngx):
# make serve's own deployment (deploy/serve.sh: spawn-fcgi workers, nginx with TLS and an API key,
# least_conn) with one worker and with one worker per GPU, the same file, the load trace of issue 20
# (tools/loadgen.py) through nginx; then one worker killed mid-run while the trace runs.
#   bash tools/gpu_multi.sh g3|26b [REQUESTS] [RATES] [KILL_AFTER_S]
# g3 / 26b: the files of tools/gpu_model_file.sh (the 270M layout; a real-shape 26B-A4B Q4_K_M).
# REQUESTS (400) of the trace at each of RATES ("inf": all at once).
# The trace comes from one address, so nginx's per-address limit is lifted (RATE, BURST), and the
# queue holds a trace longer than the longest answer (max-queue MAX_QUEUE, 700; queue-timeout 900 s):
# throughput is the measure here, not admission. KILL_AFTER_S (0: none): seconds into a run with every GPU at the last rate before worker 1
# is killed with SIGKILL. Prints per run the loadgen table and each worker's requests and tokens.
# CONC (0): requests in flight at most per GPU of the run (loadgen --concurrency CONC x GPUs: a closed loop,
#   the capacity measure; a worker holds at most 1,024 requests, waiting or running).
# LOAD_TIMEOUT (900): seconds a trace may run. PROCS (8): loadgen client processes (one Python process streams ~5k tokens/s). GPUS ("P:D P:D"): these devices instead of the GPUs found; SCALE: loadgen's --scale (a CPU rehearsal:
#   GPUS="0:0 0:0" SCALE=0.05 OUT=/tmp/o bash tools/gpu_multi.sh g3 40 inf 3).
model=${1:-g3}
requests=${2:-400}
rates=${3:-inf}
kill_after=${4:-0}
. .gpu/gpu-env.sh >/dev/null 2>&1
for f in .gpu/ngx/*.deb; do dpkg -x "$f" /tmp/gpu-root; done
export PATH=/tmp/gpu-root/usr/sbin:$PATH XDG_CACHE_HOME=/tmp/cc
mkdir -p build && cp -f .gpu/now/* build/ 2>/dev/null
python3 -c "import httpx" 2>/dev/null || pip install -q --no-index --find-links .gpu/wheels httpx || exit 1
# serve.sh waits for /health with curl; a machine without curl gets a stand-in for that one use
if ! command -v curl >/dev/null; then
  mkdir -p /tmp/shim && cat > /tmp/shim/curl <<'PY'
#!/usr/bin/env python3
import ssl, sys, urllib.request
a = sys.argv[1:]; ca = a[a.index("--cacert") + 1] if "--cacert" in a else None
url = [x for x in a if x.startswith("http")][0]
try:
    urllib.request.urlopen(url, context=ssl.create_default_context(cafile=ca), timeout=5).read()
except Exception:
    sys.exit(22)
PY
  chmod +x /tmp/shim/curl; export PATH=/tmp/shim:$PATH
fi
# a library missing there would only show as spawn-fcgi's "child exited with: 127"
missing=$(ldd build/clgemma-fcgi | grep "not found") && { echo "build/clgemma-fcgi: $missing" >&2; exit 1; }
file=$(bash tools/gpu_model_file.sh $model) ||
  { echo "usage: bash tools/gpu_multi.sh g3|26b [REQUESTS] [RATES] [KILL_AFTER_S]" >&2; exit 1; }
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader 2>/dev/null
gpus=$(echo ${GPUS:-$(build/clgemma devices --plain | sh deploy/devices.sh --gpus)} | tr " " "\n")
echo "GPUs: $(echo $gpus)"
run=/tmp/run-multi
conf=/tmp/clgemma-multi.conf
sed -e 's/^ctx = .*/ctx = 4608/' -e 's/^queue-timeout = .*/queue-timeout = 900/' conf/clgemma.conf > $conf
echo "max-queue = ${MAX_QUEUE:-700}" >> $conf
export RATE=100000 BURST=100000 CONFIG=$conf
metrics() { # socket: requests and tokens per worker (each worker's /metrics shows every worker of its directory)
  python3 - "$1" <<'PY'
import re, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
s.sendall(b"GET /metrics HTTP/1.0\r\nHost: w\r\n\r\n"); b = b""
while True:
    d = s.recv(65536)
    if not d: break
    b += d
tot = {}
for l in b.decode().splitlines():
    m = re.match(r'clgemma_(requests|completion_tokens|prompt_tokens)_total\{worker="([^"]*)"[^}]*\} (\S+)', l)
    if m:
        w = tot.setdefault(m.group(2), {})
        w[m.group(1)] = w.get(m.group(1), 0) + float(m.group(3))
for w, v in sorted(tot.items()):
    print(f"{w}: " + " ".join(f"{k} {int(x)}" for k, x in v.items()))
PY
}
serve_trace() { # label devices [kill_after]
  local label=$1 devs=$2 k=${3:-0} n
  n=$(echo "$devs" | tr ',' '\n' | wc -l)
  # serve.sh waits up to 10 minutes for /health; a worker that cannot load says why well before that
  CLGEMMA_SKIP_SETUP=1 CLGEMMA_MODEL=$file CLGEMMA_DEVICES=$devs CLGEMMA_RUN_DIR=$run CLGEMMA_PORT=18443 \
    timeout ${SERVE_TIMEOUT:-240} sh deploy/serve.sh > $OUT/serve-$model-$label.txt 2>&1 || { echo "$label: serve failed"; tail -5 $OUT/serve-$model-$label.txt; tail -5 $run/logs/worker-0.log
         RUN_DIR=$run sh deploy/stop.sh --quiet; return 1; }
  local key; key=$(grep -v '^#' $run/api_keys | head -n 1)
  timeout ${LOAD_TIMEOUT:-900} python3 tools/loadgen.py --url https://localhost:18443 --cacert $run/tls/cert.pem --api-key "$key" --model "$(basename $file .gguf)" \
    --requests $requests --rates $rates --scale ${SCALE:-1} --procs ${PROCS:-8} --concurrency $(( ${CONC:-0} * n )) --label "$label $model" --json $OUT/multi-$model-$label.json \
    > $OUT/multi-$model-$label.txt 2>&1 &
  local lg=$!
  if [ "$k" != 0 ]; then
    # the whole worker: its master (spawn-fcgi's pid) and the engine process under it, as a lost GPU or OOM kill
    sleep "$k"; local m kids; m=$(cat $run/worker-1.pid); kids=$(pgrep -P $m | tr '\n' ' ')
    kill -9 $m $kids && echo "$label: worker 1 (pids $m $kids) killed at ${k} s"
  fi
  wait $lg; cat $OUT/multi-$model-$label.txt
  for s in $run/sockets/worker-*.sock; do metrics $s 2>/dev/null && break; done | sed 's/^/  /' 
  RUN_DIR=$run sh deploy/stop.sh --quiet
}
one=$(echo "$gpus" | head -n 1)
all=$(echo $gpus | tr ' ' ',')
serve_trace 1gpu "$one"
serve_trace "$(echo "$gpus" | wc -l)gpu" "$all"
[ "$kill_after" != 0 ] && rates=${rates##*,} serve_trace kill "$all" "$kill_after"
grep -h "error\|crit\|emerg" $run/nginx/logs/error.log 2>/dev/null | tail -3
exit 0
