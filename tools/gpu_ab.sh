#!/bin/bash
# Before/after table of two clgemma builds in one GPU-machine call (run there from the repo root):
#   [ONLY="tag ..."] tools/gpu_ab.sh BEFORE_BIN AFTER_BIN [GEMMA3.gguf] [OUTDIR] [ROUNDS]
# Every row runs both binaries back to back (the order alternates per round), each a median of 3 runs
# inside bench; the row's figure is the median over ROUNDS (default 2). Rows: the Gemma 3 file's decode
# B=1/16/64 and prefill 2048 when given (a tools/gguf_sample.py grown copy times the same), and synthetic
# real-shape Gemma 4 26B-A4B q4_k, 31B q4_k, E4B q8_0 decode B=1, prefill 2048, decode B=16. Each result
# line is appended to OUTDIR/ab.txt as soon as it exists; the table comes last.
# REAL="31b e4b 26b" (any of them) adds the real-format files (llama.cpp's Q4_K_M / Q8_0 type mixes, written
# once by the after build's `clgemma synth` into OUTDIR with the vocabulary .gpu/vocab-gemma-4.gguf.xz) at
# decode B=8, 16, 64 and 128 (BATCHES to change them): the rows the int8 tensor-core products serve.
set -u
A=$1; B=$2; g3=${3:-}; out=${4:-/tmp/clgemma-ab}; rounds=${5:-2}
mkdir -p "$out"
[ -f .gpu/gpu-env.sh ] && . .gpu/gpu-env.sh >/dev/null 2>&1
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-$out/cache}
S=--synthetic
rows=()
[ -n "$g3" ] && rows+=(
  "g3_b1|-m $g3 -p 512 -n 128|decode"
  "g3_b16|-m $g3 -b 16 -p 512 -n 128|decode"
  "g3_b64|-m $g3 -b 64 -p 128 -n 64|decode"
  "g3_p2048|-m $g3 -p 2048 -n 16|prefill")
rows+=(
  "31b_b1|$S gemma4-31b --type q4_k -p 512 -n 64|decode"
  "31b_b16|$S gemma4-31b --type q4_k -b 16 -p 128 -n 32|decode"
  "31b_p2048|$S gemma4-31b --type q4_k -p 2048 -n 4|prefill"
  "26b_b1|$S gemma4-26b-a4b --type q4_k -p 512 -n 64|decode"
  "26b_b16|$S gemma4-26b-a4b --type q4_k -b 16 -p 128 -n 32|decode"
  "26b_p2048|$S gemma4-26b-a4b --type q4_k -p 2048 -n 4|prefill"
  "e4b_b1|$S gemma4-e4b --type q8_0 -p 512 -n 64|decode"
  "e4b_b16|$S gemma4-e4b --type q8_0 -b 16 -p 128 -n 32|decode"
  "e4b_p2048|$S gemma4-e4b --type q8_0 -p 2048 -n 4|prefill")
for m in ${REAL:-}; do
  case $m in 31b) arch=gemma4-31b mix=q4_k_m ;; 26b) arch=gemma4-26b-a4b mix=q4_k_m ;; e4b) arch=gemma4-e4b mix=q8_0 ;;
             *) echo "gpu_ab: REAL takes 31b, 26b, e4b, not $m" >&2; exit 1 ;; esac
  f=$out/real-$m.gguf
  [ -f "$out/vocab-g4.gguf" ] || xz -dc .gpu/vocab-gemma-4.gguf.xz > "$out/vocab-g4.gguf" || exit 1
  [ -f "$f" ] || "$B" synth $arch -o "$f" --mix $mix --vocab "$out/vocab-g4.gguf" > "$out/synth-$m.log" 2>&1 ||
    { tail -3 "$out/synth-$m.log"; exit 1; }
  for n in ${BATCHES:-8 16 64 128}; do rows+=("${m}_real_b$n|-m $f -b $n -p 64 -n 32|decode"); done
done
one() { # bin tag args metric -> prints the figure (empty on failure)
  j=$(timeout 120 "$1" bench $3 -r 3 2>>"$out/$2.err")
  echo "$j" | grep -o "\"$4_tok_s\":[0-9.]*" | cut -d: -f2
}
# warm both binaries' program caches first so no row pays a kernel build
"$A" bench $S gemma4-e4b --type q8_0 --layers 2 -p 16 -n 2 -r 1 >/dev/null 2>&1
"$B" bench $S gemma4-e4b --type q8_0 --layers 2 -p 16 -n 2 -r 1 >/dev/null 2>&1
for r in $(seq "$rounds"); do
  for row in "${rows[@]}"; do
    IFS='|' read -r tag args metric <<<"$row"
    [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $tag "* ]] && continue
    if [ $((r % 2)) -eq 1 ]; then a=$(one "$A" "$tag" "$args" "$metric"); b=$(one "$B" "$tag" "$args" "$metric")
    else b=$(one "$B" "$tag" "$args" "$metric"); a=$(one "$A" "$tag" "$args" "$metric"); fi
    echo "$tag $r ${a:-NA} ${b:-NA}" | tee -a "$out/ab.txt"
  done
done
python3 - "$out/ab.txt" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    tag, _, a, b = line.split()
    if a != "NA" and b != "NA":
        rows.setdefault(tag, ([], []))
        rows[tag][0].append(float(a)); rows[tag][1].append(float(b))
print("| row | before tok/s | after tok/s | after/before |")
print("| --- | --- | --- | --- |")
for tag, (a, b) in rows.items():
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"| {tag} | {ma:,.1f} | {mb:,.1f} | {mb / ma:.3f} |")
PY
