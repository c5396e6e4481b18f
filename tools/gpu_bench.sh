#!/bin/bash
# GPU harness, run ON the GPU machine from the repo root (see docs/PERF.md for how it is called):
#   tools/gpu_bench.sh MODEL.gguf [OUTDIR]
# Lists devices, times a cold and a warm start (program-binary cache), runs the golden checks when
# the golden file and python are there, then the bench matrix (median of 3 runs with min-max) and
# one per-kernel profile. Prints a table at the end.
set -u
model=$1
out=${2:-/tmp/clgemma-bench}
mkdir -p "$out"
[ -f .gpu/gpu-env.sh ] && . .gpu/gpu-env.sh >/dev/null
build/clgemma devices
export XDG_CACHE_HOME=$out/cache
rm -rf "$out/cache"
t0=$(date +%s.%N); build/clgemma generate -m "$model" -p "Hello" -n 1 --temp 0 >/dev/null 2>"$out/cold.log"; t1=$(date +%s.%N)
build/clgemma generate -m "$model" -p "Hello" -n 1 --temp 0 >/dev/null 2>"$out/warm.log"; t2=$(date +%s.%N)
python3 -c "print('start-up to first token: cold %.2f s, warm (binary cache) %.2f s' % ($t1 - $t0, $t2 - $t1))"
if [ -f tests/golden_check.py ] && [ -f tests/golden/gemma3_270m.json ]; then
  GOLDEN_MODEL=$model GOLDEN_ALL=1 python3 tests/golden_check.py 2>&1 | tee "$out/golden.log" | grep -E '^(PASS|FAIL)'
fi
echo "| batch | prompt | gen | prefill tok/s (min-max) | decode tok/s aggregate (min-max) |"
echo "| --- | --- | --- | --- | --- |"
row() { # B P N
  j=$(build/clgemma bench -m "$model" -p "$2" -n "$3" -r 3 -b "$1" 2>>"$out/bench.err") || { echo "| $1 | $2 | $3 | failed: $(tail -1 "$out/bench.err") | |"; return; }
  echo "$j" >> "$out/bench.jsonl"
  python3 - "$j" <<'PY'
import json, sys
j = json.loads(sys.argv[1])
print(f"| {j['batch']} | {j['n_prompt']} | {j['n_gen']} | {j['prefill_tok_s']:.0f} ({j['prefill_min']:.0f}-{j['prefill_max']:.0f}) | {j['decode_tok_s']:.0f} ({j['decode_min']:.0f}-{j['decode_max']:.0f}) |")
PY
}
row 1 512 128
row 4 512 128
row 16 512 128
row 64 128 64
row 1 2048 16
echo "per-kernel profiles, B=1 (512-token prompt, 64 decode steps):"
build/clgemma bench -m "$model" -p 512 -n 64 -r 1 --profile 2>&1 >/dev/null | tail -40
echo "per-kernel profile, decode B=16:"
build/clgemma bench -m "$model" -p 128 -n 32 -r 1 -b 16 --profile 2>&1 >/dev/null | grep -A30 "profile: decode"
