#!/bin/bash
# Quick iteration on the GPU machine (run there from the repo root, $OUT set by the device tool):
# kernel and Gemma 4 unit tests on the NVIDIA device (fast paths against float64 / transformers),
# then A/B benches of the settings being measured. Carry .gpu, build/clgemma and the test binaries
# (build/tests/test_kernels, test_kernels_rows, test_kernels_attn, test_kv_ring, test_gemma4). The full tables come
# from tools/gpu_bench.sh and tools/gpu_bench_synthetic.sh.
#   tools/gpu_iter.sh [tests] [prefill] [decode] [dprof] [ab] [exp] [groups] [ptx]   (sections to run; default all)
. .gpu/gpu-env.sh >/dev/null 2>&1
export XDG_CACHE_HOME=/tmp/cc PATH=$PATH:/usr/local/cuda/bin
what=" ${*:-tests prefill decode ptx} "
S=--synthetic
on() { [[ "$what" == *" $1 "* ]]; }
if on tests; then
  for t in test_kernels test_kernels_rows test_kernels_attn test_kv_ring; do
    timeout 150 build/tests/$t >> $OUT/tk.txt 2>&1; echo "$t rc=$?"
  done; echo "kernel tests: $(grep -c ^PASS $OUT/tk.txt) passed, $(grep -c ^FAIL $OUT/tk.txt) failed"
  grep -E "FAIL|error" $OUT/tk.txt | head -8
  timeout 120 build/tests/test_gemma4 -v > $OUT/tg4.txt 2>&1; echo "test_gemma4 rc=$? $(grep -c PASS $OUT/tg4.txt) passed"
  grep -E "FAIL|gemma4 moe" $OUT/tg4.txt | head -8
fi
# b TAG SETTING... -- ARGS: one bench line with the median figures and the enqueue time per step
# (settings are written CLGEMMA_NAME=VALUE and passed as bench --set NAME=VALUE; X=1 for none)
b() {
  tag=$1; shift; sets=()
  while [ "$1" != -- ]; do [[ $1 == CLGEMMA_* ]] && sets+=(--set "${1#CLGEMMA_}"); shift; done; shift
  j=$(timeout 100 build/clgemma bench "$@" "${sets[@]}" 2>$OUT/$tag.err)
  echo "$tag rc=$? $(echo $j | grep -o '"\(prefill\|decode\)_tok_s":[0-9.]*\|"enqueue_ms_per_step":[0-9.]*' | tr '\n' ' ')"
  tail -1 $OUT/$tag.err | grep -i error
}
if on prefill; then
b 31b_p2048 X=1 -- $S gemma4-31b --type q4_k -p 2048 -n 2 -r 2
b e4b_p2048 X=1 -- $S gemma4-e4b --type q8_0 -p 2048 -n 2 -r 2
b 26b_p2048 X=1 -- $S gemma4-26b-a4b --type q4_k -p 2048 -n 2 -r 2
b 31b_p2048_prof X=1 -- $S gemma4-31b --type q4_k -p 2048 -n 1 -r 1 --profile
grep -E "^mm|kernel time" $OUT/31b_p2048_prof.err | head -6
b e4b_p2048_prof X=1 -- $S gemma4-e4b --type q8_0 -p 2048 -n 1 -r 1 --profile
sed -n '/prefill of/,/kernel time/p' $OUT/e4b_p2048_prof.err | sort -k3 -n -r | head -8
fi
if on decode; then
b 31b_b1 X=1 -- $S gemma4-31b --type q4_k -p 64 -n 32 -r 3

b 26b_b1 X=1 -- $S gemma4-26b-a4b --type q4_k -p 64 -n 32 -r 3

b e4b_b1 X=1 -- $S gemma4-e4b --type q8_0 -p 64 -n 32 -r 3

fi
# profile rows by their time (the first numeric field: kernel names have spaces)
byms() { awk '{for (i = 1; i <= NF; i++) if ($i ~ /^[0-9.]+$/) { print $i "\t" $0; break }}' | sort -rn | cut -f2-; }
if on dprof; then # per-kernel decode profiles (DPROF="tag model type batch;..."; default B=1 of the three)
IFS=';' read -ra runs <<< "${DPROF:-26b gemma4-26b-a4b q4_k 1;31b gemma4-31b q4_k 1;e4b gemma4-e4b q8_0 1}"
for m in "${runs[@]}"; do
  set -- $m
  b ${1}_b$4_prof X=1 -- $S $2 --type $3 -b $4 -p 64 -n 16 -r 1 --profile
  awk '/profile: decode/{n=1} n' $OUT/${1}_b$4_prof.err | grep -v "^kernel \|^profile" | byms | head -${DPROF_TOP:-10}
  grep "kernel time" $OUT/${1}_b$4_prof.err | tail -1
done
fi
if on ab; then # A/B runs: AB="tag ENV=VALUE model --type T args...;..." (ENV X=1 for none)
IFS=';' read -ra runs <<< "$AB"
for r in "${runs[@]}"; do
  set -- $r; tag=$1; e=$2; shift 2
  IFS=',' read -ra es <<< "${e//+/ }" # several switches: A=1,B=2; '+' stands for a space in a value
  b $tag "${es[@]}" -- $S "$@"
done
fi
if on exp; then # kernel experiments: build-option variants (CLGEMMA_CL_DEFS), e.g. -DNAME=value
for d in ${EXP_DEFS:-"-DCLG_EXP=0"}; do
  tag=31b_p512_$(echo $d | tr -dc 'A-Za-z0-9=_' | tr '=' '_')
  b $tag "CLGEMMA_CL_DEFS=$d" -- $S gemma4-31b --type q4_k -p 512 -n 1 -r 1 --profile
  grep -E "^mmt " $OUT/$tag.err | head -1
done
fi
if on groups; then # A/B of the smallest grid that takes the tiles (default: one group per compute unit)
for m in 132 66 0; do
  b e4b_p2048_mg$m CLGEMMA_MMT_MIN_GROUPS=$m -- $S gemma4-e4b --type q8_0 -p 2048 -n 2 -r 3
  b 31b_p2048_mg$m CLGEMMA_MMT_MIN_GROUPS=$m -- $S gemma4-31b --type q4_k -p 2048 -n 2 -r 3
  b 26b_p2048_mg$m CLGEMMA_MMT_MIN_GROUPS=$m -- $S gemma4-26b-a4b --type q4_k -p 2048 -n 2 -r 3
done
fi
on ptx || exit 0
# registers and spills of the kernels under work (PTX from the program-binary cache)
f=$(grep -rla "${PTX_FILE:-mmt_q4_k}" /tmp/cc | head -1) # PTX_FILE: a kernel the program must hold
python3 -c "import sys;d=open(sys.argv[1],'rb').read().decode('latin1');a=d.find('//');b=d.rfind('}');open('/tmp/k.ptx','w').write(d[a:b+1])" "$f"
# PTX_K: a grep pattern of kernel names (default the prefill tiles)
ptxas -arch=sm_90 -v /tmp/k.ptx -o /dev/null 2>&1 | grep -A3 "entry function '\(${PTX_K:-mmt_q4_k\|mmt_q8_0\|mmql_q4_k}\)'" | grep -v "^--"
