#!/bin/sh
# Real-shape Gemma 4 GGUF files as published ones are laid out, on the GPU machine: `clgemma synth`
# writes 26B-A4B Q4_K_M, 31B Q4_K_M and E4B Q8_0 with llama.cpp's names, keys and type mix and the
# real vocabulary (random weights), then clgemma loads each file unmodified and decodes. Prints per
# file: size and write speed, the wall time from start to the first token (load + a 6-token prompt +
# one step), the engine's own load time, and decode tokens/s over 32 greedy tokens. The files stay
# in DIR (llama.cpp can run the same ones); --clean removes each after its run.
#   sh tools/gpu_real_shapes.sh [DIR] [--clean]      (DIR default: $TMPDIR or /tmp, /clgemma-real)
# Needs build/clgemma (make all); the vocabulary comes from deploy/fetch_llama_ref.sh. Uses about
# 41 GiB of disk without --clean; pass the device with CLGEMMA_DEVICE=P:D if there are several.
set -e
cd "$(dirname "$0")/.."
dir=${TMPDIR:-/tmp}/clgemma-real
clean=0
for a in "$@"; do
  case $a in
    --clean) clean=1 ;;
    -*) echo "usage: sh tools/gpu_real_shapes.sh [DIR] [--clean]" >&2; exit 1 ;;
    *) dir=$a ;;
  esac
done
[ -x build/clgemma ] || { echo "gpu_real_shapes: build/clgemma missing (make all)" >&2; exit 1; }
vocab=$(sh deploy/fetch_llama_ref.sh)/models/ggml-vocab-gemma-4.gguf
mkdir -p "$dir"
now() { date +%s.%N; }
prompt="The capital of France is"
printf '%-26s %9s %10s %14s %9s %11s\n' file GiB "write MB/s" "first token s" "load s" "decode tok/s"
for spec in "gemma4-26b-a4b q4_k_m" "gemma4-31b q4_k_m" "gemma4-e4b q8_0"; do
  set -- $spec
  f=$dir/$1-$2.gguf
  log=$dir/$1-$2.log
  if [ -f "$f" ]; then mbs="(kept)"
  else
    build/clgemma synth "$1" -o "$f" --mix "$2" --vocab "$vocab" 2>"$log" || { cat "$log" >&2; exit 1; }
    mbs=$(sed -n 's/.*(\([0-9]*\) MB\/s.*/\1/p' "$log")
  fi
  gib=$(awk "BEGIN { printf \"%.2f\", $(stat -c %s "$f") / 1073741824 }")
  t0=$(now)
  build/clgemma generate -m "$f" -p "$prompt" -n 1 --ids >/dev/null 2>>"$log" || { tail -n 3 "$log" >&2; exit 1; }
  first=$(awk "BEGIN { printf \"%.2f\", $(now) - $t0 }")
  build/clgemma generate -m "$f" -p "$prompt" -n 32 --ids >"$dir/$1-$2.ids" 2>"$log.gen" ||
    { cat "$log.gen" >&2; exit 1; }
  load=$(sed -n 's/.*| load \([0-9.]*\) s.*/\1/p' "$log.gen")
  tps=$(sed -n 's/.*generated [0-9]* tok \([0-9.]*\) tok\/s.*/\1/p' "$log.gen")
  printf '%-26s %9s %10s %14s %9s %11s\n' "$1-$2.gguf" "$gib" "$mbs" "$first" "$load" "$tps"
  cat "$log" "$log.gen" | sed 's/^/    /'
  echo "    ids: $(cat "$dir/$1-$2.ids")"
  [ "$clean" -eq 0 ] || rm -f "$f"
done
