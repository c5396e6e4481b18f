#!/bin/bash
# Settings A/B on the real-format files in one GPU-machine call (repo root; carry .gpu as
# tools/gpu_vs_llama.sh wants it, which writes the files):
#   bash tools/gpu_settings_ab.sh "MODELS" "VARIANTS" [BENCH ARGS...]
# MODELS: gpu_vs_llama.sh's names (26b 31b e4b ...) or paths of GGUF files. VARIANTS: ';'-separated lists of
# bench settings, "-" for the defaults, e.g. "-;ATTN_MAX_CHUNK=256;ATTN_MAX_CHUNK=256 ATTN_GROUPS_PER_CU=2";
# bin=PATH in a list runs that clgemma binary instead (two builds: "bin=.gpu/now/base;bin=.gpu/now/new").
# BENCH ARGS (default "-p 512 -n 64 -r 3"), e.g. "-p 32768 -n 64 -r 3" for decode after 32k tokens.
# Every model runs the variants in ROUNDS (default 2) rounds, the order reversed each round, and
# $OUT/settings_ab.md (OUT defaults to ./settings-ab) gets one row per model and variant: decode and
# prefill tok/s of each round (bench's medians of its -r runs); each round's line also goes to
# $OUT/settings_ab.log as it is measured, so a call cut short keeps what it has.
models=$1 variants=$2
shift 2
args=("$@"); [ ${#args[@]} -eq 0 ] && args=(-p 512 -n 64 -r 3)
export OUT=${OUT:-settings-ab} VS_DIR=${VS_DIR:-/tmp/clgemma-ab} XDG_CACHE_HOME=${XDG_CACHE_HOME:-/tmp/cc}
mkdir -p "$OUT" "$VS_DIR"
cg=build/clgemma; [ -x .gpu/now/clgemma ] && cg=.gpu/now/clgemma
PY=.venv/bin/python; [ -x "$PY" ] || PY=python3
IFS=';' read -ra vs <<< "$variants"
run() { # variant -> "decode prefill"
  local sets=() bin=$cg
  for kv in $1; do
    case $kv in -) ;; bin=*) bin=${kv#bin=} ;; *) sets+=(--set "$kv") ;; esac
  done
  timeout 300 $bin bench -m "$file" "${args[@]}" "${sets[@]}" 2>>"$OUT/bench.err" | tail -1 |
    "$PY" -c 'import json, sys; j = json.load(sys.stdin); print("%.1f %.1f" % (j["decode_tok_s"], j["prefill_tok_s"]))' \
    2>/dev/null || echo "- -"
}
echo "| model | settings | decode tok/s by round | prefill tok/s by round |" >> "$OUT/settings_ab.md"
echo "| --- | --- | --- | --- |" >> "$OUT/settings_ab.md"
for m in $models; do
  case $m in
    *.gguf) file=$m; name=$(basename "$m" .gguf) ;;
    *) KEEP=1 bash tools/gpu_vs_llama.sh "$m" none >/dev/null || exit 1; file=$VS_DIR/$m.gguf; name=$m ;;
  esac
  declare -A dec pre
  n=${#vs[@]}
  for r in $(seq 1 "${ROUNDS:-2}"); do
    for k in $(seq 0 $((n - 1))); do
      j=$k; [ $((r % 2)) = 0 ] && j=$((n - 1 - k))
      read -r d p <<< "$(run "${vs[$j]}")"
      dec[$j]="${dec[$j]:-}${dec[$j]:+ / }$d"; pre[$j]="${pre[$j]:-}${pre[$j]:+ / }$p"
      echo "$name [${vs[$j]}] round $r: decode $d prefill $p" | tee -a "$OUT/settings_ab.log"
    done
  done
  for i in "${!vs[@]}"; do echo "| $name | ${vs[$i]} | ${dec[$i]} | ${pre[$i]} |" >> "$OUT/settings_ab.md"; done
  unset dec pre
done
cat "$OUT/settings_ab.md"
