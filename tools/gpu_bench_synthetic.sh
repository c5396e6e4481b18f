#!/bin/bash
# Synthetic real-shape Gemma 4 benchmarks, run ON the GPU machine from the repo root:
#   tools/gpu_bench_synthetic.sh [OUTDIR] [PER_RUN_TIMEOUT_S]
# For 26B-A4B q4_k, 31B q4_k and E4B q8_0 (weights made on the device, no file): decode B=1
# (-p 512 -n 64), prefill 2048 (-n 4), decode B=16 (-p 128 -n 32), each the median of 3 runs,
# then one per-kernel profile of 26B-A4B. Most important rows first; every result is appended to
# OUTDIR as soon as it exists, so a run cut short still leaves what it measured.
set -u
out=${1:-/tmp/clgemma-synth}
lim=${2:-110}
mkdir -p "$out"
[ -f .gpu/gpu-env.sh ] && . .gpu/gpu-env.sh >/dev/null 2>&1
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-$out/cache}
build/clgemma devices | head -5
run() { # tag, args...
  tag=$1; shift
  t0=$(date +%s)
  j=$(timeout "$lim" build/clgemma bench "$@" 2>"$out/$tag.err"); rc=$?
  echo "$tag rc=$rc $(( $(date +%s) - t0 ))s $j" | tee -a "$out/bench.txt"
  grep -E "made on|output check|clgemma: .*(error|fail|NaN)" "$out/$tag.err" | head -3 | sed "s/^/  /" | tee -a "$out/bench.txt"
}
S="--synthetic"
run 26b_b1 $S gemma4-26b-a4b --type q4_k -p 512 -n 64 -r 3
run 31b_b1 $S gemma4-31b --type q4_k -p 512 -n 64 -r 3
run e4b_b1 $S gemma4-e4b --type q8_0 -p 512 -n 64 -r 3
run 26b_p2048 $S gemma4-26b-a4b --type q4_k -p 2048 -n 4 -r 3
run 31b_p2048 $S gemma4-31b --type q4_k -p 2048 -n 4 -r 3
run e4b_p2048 $S gemma4-e4b --type q8_0 -p 2048 -n 4 -r 3
run 26b_b16 $S gemma4-26b-a4b --type q4_k -b 16 -p 128 -n 32 -r 3
run 31b_b16 $S gemma4-31b --type q4_k -b 16 -p 128 -n 32 -r 3
run e4b_b16 $S gemma4-e4b --type q8_0 -b 16 -p 128 -n 32 -r 3
t0=$(date +%s)
timeout "$lim" build/clgemma bench $S gemma4-26b-a4b --type q4_k -p 512 -n 64 -r 1 --profile >"$out/profile_26b.json" \
  2>"$out/profile_26b.txt"
echo "profile rc=$? $(( $(date +%s) - t0 ))s" | tee -a "$out/bench.txt"
