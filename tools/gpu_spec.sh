#!/bin/sh
# Speculative decoding through one worker on a GPU (issue 22): clgemma-fcgi on MODEL with --spec off, then with
# SPEC (default "ngram"; "mtp --draft FILE" for a drafter), each measured by tools/spec_measure.py (copy-heavy
# greedy prompts alone and CONC at once). Binaries from .gpu/now32 if carried, else build/.
#   sh tools/gpu_spec.sh MODEL [CONC] [SPEC...]
model=$1; conc=${2:-1,16}; shift 2 2>/dev/null; spec=${*:-ngram}
bin=build; [ -x .gpu/now32/clgemma-fcgi ] && bin=.gpu/now32
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
for mode in off "$spec"; do
  $bin/clgemma-fcgi -m "$model" --listen 127.0.0.1:$port --protocol http --ctx 2048 --max-seqs 16 --max-queue 16 \
    --spec $mode > /tmp/gpu_spec_worker.log 2>&1 &
  pid=$!
  n=0
  until python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$port/health', timeout=2)" 2>/dev/null ||
        [ $n -gt 600 ]; do sleep 0.2; n=$((n + 1)); done
  python3 tools/spec_measure.py http://127.0.0.1:$port --conc "$conc" --label "spec $mode" || tail -5 /tmp/gpu_spec_worker.log
  kill $pid; wait $pid 2>/dev/null
done
