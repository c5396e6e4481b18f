#!/bin/bash
# Per-kernel and per-launch-shape profiles of clgemma on the real-format files, on the GPU machine (repo
# root; carry .gpu with the binary in .gpu/now/clgemma, or build/clgemma present):
#   bash tools/gpu_profile.sh [MODELS] [BENCH ARGS...]
# MODELS (default "31b 26b e4b"): 26b / 31b = Gemma 4 26B-A4B / 31B Q4_K_M, e4b / e2b = E4B / E2B Q8_0, q27b /
#   q35b = Qwen 3.6 27B / 35B-A3B Q4_K_M, each written by `clgemma synth` with llama.cpp's names and type mix and
#   the real vocabulary (.gpu/vocab-gemma-4.gguf.xz, .gpu/vocab-qwen35.gguf.xz); random weights, timing only.
# BENCH ARGS (default "-p 512 -n 32 -r 2"): what `clgemma bench --profile` runs; the last repetition is
# profiled (prefill, then decode). Each model's output goes to $OUT/prof-MODEL.txt (OUT defaults to ./profiles)
# beside one unprofiled run of the same arguments (its JSON line first): the profile's events slow the host.
models=${1:-31b 26b e4b}
shift
args=("$@"); [ ${#args[@]} -eq 0 ] && args=(-p 512 -n 32 -r 2)
out=${OUT:-profiles}
work=${PROFILE_DIR:-/tmp/clgemma-profile}
mkdir -p "$out" "$work"
[ -f .gpu/gpu-env.sh ] && . .gpu/gpu-env.sh >/dev/null 2>&1
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-/tmp/cc}
cg=build/clgemma; [ -x .gpu/now/clgemma ] && cg=.gpu/now/clgemma
[ -x $cg ] || { echo "gpu_profile: no clgemma binary (.gpu/now/clgemma or build/clgemma)" >&2; exit 1; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | tee $out/device.txt
for m in $models; do
  vz=.gpu/vocab-gemma-4.gguf.xz
  case $m in
    26b) arch=gemma4-26b-a4b mix=q4_k_m ;;
    31b) arch=gemma4-31b mix=q4_k_m ;;
    e4b) arch=gemma4-e4b mix=q8_0 ;;
    e2b) arch=gemma4-e2b mix=q8_0 ;;
    q27b) arch=qwen35-27b mix=q4_k_m vz=.gpu/vocab-qwen35.gguf.xz ;;
    q35b) arch=qwen35-35b-a3b mix=q4_k_m vz=.gpu/vocab-qwen35.gguf.xz ;;
    *) echo "gpu_profile: unknown model $m" >&2; exit 1 ;;
  esac
  vocab=$work/$(basename $vz .xz) file=$work/$m.gguf
  [ -f $vocab ] || xz -dc $vz > $vocab || exit 1
  [ -f $file ] || $cg synth $arch -o $file --mix $mix --vocab $vocab > $out/synth-$m.log 2>&1 ||
    { tail -3 $out/synth-$m.log; exit 1; }
  { timeout 300 $cg bench -m $file "${args[@]}" 2>/dev/null | tail -1
    timeout 300 $cg bench -m $file "${args[@]}" --profile 2>&1 | grep -v '^ *$'; } > $out/prof-$m.txt
  echo "$m: $(head -1 $out/prof-$m.txt | cut -c1-200)"
  [ "${KEEP:-0}" = 1 ] || rm -f $file
done
