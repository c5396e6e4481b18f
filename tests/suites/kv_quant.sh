#!/bin/sh
# The quantized KV cache (--kv-type q8_0 | q4, issue 20 item 5), each test binary's PASS/FAIL lines:
#   test_kv_quant             the write kernel's rows against llama.cpp's quantization, attention over
#                             them against float64 (tests/opencl/ops/test_kv_quant.c)
#   test_engine_kv_quant      Gemma 3 270M and the Gemma 4 fixture with q8_0 and q4 KV against f16:
#                             max |Δlogit| and greedy agreement within the bounds its header gives
#   test_engine_prefix TYPE   warm starts on quantized blocks equal cold runs, copies on write, a
#                             wrapping ring and eviction (the Gemma 4 fixture; the f16 run is its own)
# About a minute with the kernel binaries cached (each KV type is a program of its own, some two
# minutes to compile on a 2-core PoCL the first time).
cd "$(dirname "$0")/../.." || exit 1
fails=0
for t in build/tests/test_kv_quant build/tests/test_engine_kv_quant build/tests/test_engine_prefix; do
  [ -x "$t" ] || { echo "FAIL kv_quant: $t not built (make)"; exit 1; }
done
run() { "$@" || fails=1; }
run build/tests/test_kv_quant
run build/tests/test_engine_kv_quant
run build/tests/test_engine_prefix q8_0 gemma4
run build/tests/test_engine_prefix q4 gemma4
exit $fails
