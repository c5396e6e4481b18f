#!/bin/bash
# On the GPU machine (repo root, $OUT set by the device tool; carry .gpu with build/ binaries in .gpu/now):
# issue 20's load trace (tools/loadgen.py: 200 streamed completions, prompts 50-4,000 tokens, outputs
# 20-500, 30% opening with one 1,000-token system prompt, arrivals ramped to saturation) against
# clgemma-fcgi and llama-server built from the same llama.cpp source (.gpu/llama-slim.tar.xz, built once
# per machine into /tmp/lcpp), on the same file, one server at a time, both over HTTP on localhost.
#   bash tools/gpu_load.sh g3|26b [RATES]
# g3: the Gemma 3 270M Q4_K_M file's layout grown from .gpu/g3.sample (repeated weights: outputs run to
# max_tokens on both servers alike); 26b: a real-shape Gemma 4 26B-A4B Q4_K_M written by `clgemma synth`
# with the real vocabulary (.gpu/vocab-gemma-4.gguf.xz). SEQS (64): sequences both servers run at once
# (clgemma --max-seqs, llama-server -np); CTX (4608) tokens each. Then clgemma once more as its defaults size
# it from the device's memory (hundreds of sequences), at the last rate. KVBENCH=1: clgemma bench's decode
# and prefill with each --kv-type. SERVERS: which of "clgemma auto llama-server" run (default all).
model=${1:-g3}
. .gpu/gpu-env.sh >/dev/null 2>&1
export XDG_CACHE_HOME=/tmp/cc
seqs=${SEQS:-64}
ctx=${CTX:-4608}
mkdir -p build && cp -f .gpu/now/* build/ 2>/dev/null
lcpp=/tmp/lcpp
servers=" ${SERVERS:-clgemma auto llama-server} "
if [[ $servers == *" llama-server "* ]] && [ ! -x $lcpp/build/bin/llama-server ]; then
  t0=$(date +%s)
  mkdir -p $lcpp && tar -xJf .gpu/llama-slim.tar.xz -C $lcpp
  cmake -S $lcpp/llama.cpp -B $lcpp/build -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF > $OUT/llama-build.log 2>&1 &&
  ninja -C $lcpp/build llama-server >> $OUT/llama-build.log 2>&1 || { tail -30 $OUT/llama-build.log; exit 1; }
  echo "llama-server built in $(( $(date +%s) - t0 )) s"
fi
python3 -c "import httpx" 2>/dev/null || pip install -q --no-index --find-links .gpu/wheels httpx || exit 1
case $model in
  g3) rates=${2:-8,32,inf} ;;
  26b) rates=${2:-2,8,inf} ;;
  *) echo "usage: bash tools/gpu_load.sh g3|26b [RATES]" >&2; exit 1 ;;
esac
file=$(bash tools/gpu_model_file.sh $model) || exit 1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
up() { # waits for /health (clgemma) or /health 200 (llama-server)
  for i in $(seq 300); do
    python3 -c "import http.client,sys; c=http.client.HTTPConnection('127.0.0.1',$1,timeout=2); c.request('GET','/health'); sys.exit(c.getresponse().status!=200)" 2>/dev/null && return 0
    sleep 1
  done
  return 1
}
run() { # label port pid
  if up $2; then
    python3 tools/loadgen.py --url http://127.0.0.1:$2 --model m --rates $rates --label "$1 $model" \
      --json $OUT/load-$model-$1.json 2>&1 | tee $OUT/load-$model-$1.txt
  else echo "$1 did not come up"; fi
  kill $3; wait $3 2>/dev/null
}
if [[ $servers == *" clgemma "* ]]; then
build/clgemma-fcgi -m $file --model-id m --listen 127.0.0.1:18091 --protocol http --ctx $ctx --max-seqs $seqs --max-queue $((seqs * 4)) \
  > $OUT/clgemma-$model.log 2>&1 &
run clgemma 18091 $!
fi
# and as sized from the memory (no --max-seqs: hundreds of sequences), at the highest rate
if [[ $servers == *" auto "* ]]; then
build/clgemma-fcgi -m $file --model-id m --listen 127.0.0.1:18093 --protocol http --ctx $ctx \
  > $OUT/clgemma-auto-$model.log 2>&1 &
rates=${rates##*,} run clgemma-auto 18093 $!
grep -m1 "ready:" $OUT/clgemma-auto-$model.log | sed 's/.*ready: /clgemma sized from memory: /'
fi
# the KV cache's types: decode of 64 sequences after 1,024-token prompts, prefill 2,048 (KVBENCH=1)
if [ "${KVBENCH:-0}" = 1 ]; then
  for t in f16 q8_0 q4; do
    printf '%-5s ' $t; build/clgemma bench -m $file -p 1024 -n 64 -b 64 -r 3 --kv-type $t 2>&1 | tail -1
  done | tee $OUT/kvbench-$model.txt
fi
[[ $servers == *" llama-server "* ]] || exit 0
$lcpp/build/bin/llama-server -m $file -a m --host 127.0.0.1 --port 18092 -c $((seqs * ctx)) -np $seqs -ngl 99 -fa on \
  > $OUT/llama-$model.log 2>&1 &
run llama-server 18092 $!
