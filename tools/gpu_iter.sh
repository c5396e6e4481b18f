#!/bin/bash
# Quick iteration on the GPU machine (run there from the repo root, $OUT set by the device tool):
# kernel and Gemma 4 unit tests on the NVIDIA device (fast paths against float64 / transformers),
# a few synthetic benches and one per-kernel profile. Carry .gpu, build/clgemma and the two test
# binaries. The full tables come from tools/gpu_bench.sh and tools/gpu_bench_synthetic.sh.
. .gpu/gpu-env.sh >/dev/null 2>&1
export XDG_CACHE_HOME=/tmp/cc PATH=$PATH:/usr/local/cuda/bin
S=--synthetic
timeout 120 build/tests/test_kernels > $OUT/tk.txt 2>&1; echo "test_kernels rc=$? $(grep -c PASS $OUT/tk.txt) passed"; grep FAIL $OUT/tk.txt | head -5
timeout 120 build/tests/test_gemma4 -v > $OUT/tg4.txt 2>&1; echo "test_gemma4 rc=$? $(grep -c PASS $OUT/tg4.txt) passed"; grep -E "FAIL|gemma4 moe" $OUT/tg4.txt | head -8
b() { tag=$1; shift; j=$(timeout 100 build/clgemma bench "$@" 2>$OUT/$tag.err); echo "$tag rc=$? $(echo $j | grep -o '"\(prefill\|decode\)_tok_s":[0-9.]*' | tr '\n' ' ')"; tail -1 $OUT/$tag.err | grep -i error; }
b 26b_b1 $S gemma4-26b-a4b --type q4_k -p 64 -n 32 -r 3
b 26b_b16 $S gemma4-26b-a4b --type q4_k -b 16 -p 64 -n 16 -r 3
b 31b_b1 $S gemma4-31b --type q4_k -p 64 -n 32 -r 3
b e4b_p2048 $S gemma4-e4b --type q8_0 -p 2048 -n 2 -r 2
