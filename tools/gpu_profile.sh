#!/bin/bash
# Per-kernel and per-launch-shape profiles of clgemma on the real-format files, on the GPU machine (repo
# root; carry .gpu as tools/gpu_vs_llama.sh wants it, which writes the files):
#   bash tools/gpu_profile.sh [MODELS] [BENCH ARGS...]
# MODELS (default "31b 26b e4b"): gpu_vs_llama.sh's names (g3 26b 31b e4b e2b q27b q35b).
# BENCH ARGS (default "-p 512 -n 32 -r 2"): what `clgemma bench --profile` runs; the last repetition is
# profiled (prefill, then decode). Each model's output goes to $OUT/prof-MODEL.txt (OUT defaults to ./profiles)
# after one unprofiled run of the same arguments (its JSON line first): the profile's events slow the host.
models=${1:-31b 26b e4b}
shift
args=("$@"); [ ${#args[@]} -eq 0 ] && args=(-p 512 -n 32 -r 2)
export OUT=${OUT:-profiles} VS_DIR=${PROFILE_DIR:-/tmp/clgemma-profile} XDG_CACHE_HOME=${XDG_CACHE_HOME:-/tmp/cc}
mkdir -p "$OUT" "$VS_DIR"
cg=build/clgemma; [ -x .gpu/now/clgemma ] && cg=.gpu/now/clgemma
for m in $models; do
  KEEP=1 bash tools/gpu_vs_llama.sh "$m" none || exit 1 # writes $VS_DIR/$m.gguf (and $OUT/device.txt)
  file=$VS_DIR/$m.gguf
  { timeout 300 $cg bench -m $file "${args[@]}" 2>/dev/null | tail -1
    timeout 300 $cg bench -m $file "${args[@]}" --profile 2>&1 | grep -v '^ *$'; } > $OUT/prof-$m.txt
  echo "$m: $(head -1 $OUT/prof-$m.txt | cut -c1-200)"
  [ "${KEEP:-0}" = 1 ] || rm -f $file
done
