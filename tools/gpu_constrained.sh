#!/bin/bash
# On the GPU machine (repo root, $OUT set by the device tool; carry .gpu and build): the throughput of
# structured output against plain decoding through one HTTP worker on the real-layout Gemma 3 270M file
# (grown from .gpu/g3.sample, 262k vocabulary), B = 1 and 16 (tools/bench_constrained.py), and the host's
# per-step mask cost on the same vocabulary (constrain_walk's timing over tests/data/schemas).
. .gpu/gpu-env.sh >/dev/null 2>&1
export XDG_CACHE_HOME=/tmp/cc
python3 tools/gguf_sample.py grow .gpu/g3.sample /tmp/g3.gguf || exit 1
port=18090
build/clgemma-fcgi -m /tmp/g3.gguf --listen 127.0.0.1:$port --protocol http --max-seqs 16 --max-queue 16 \
  --threads 40 --ctx 2048 > $OUT/worker.log 2>&1 &
pid=$!
for i in $(seq 120); do
  python3 -c "import http.client,sys; c=http.client.HTTPConnection('127.0.0.1',$port,timeout=2); c.request('GET','/health'); sys.exit(c.getresponse().status!=200)" 2>/dev/null && break
  sleep 1
done
python3 tools/bench_constrained.py http://127.0.0.1:$port ${RUNS:-3} | tee $OUT/constrained.jsonl
kill $pid; wait $pid
mkdir -p /tmp/walk
build/tools/constrain_walk /tmp/g3.gguf 20 1 /tmp/walk tests/data/schemas/*.json 2>&1 | grep -v "^PASS" | tail -4 | tee $OUT/mask.txt
