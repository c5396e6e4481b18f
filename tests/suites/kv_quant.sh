#!/bin/sh
# The quantized KV cache (--kv-type q8_0 | q4, issue 20 item 5): the runs make test does not do by
# itself (it runs test_kv_quant and test_engine_kv_quant, and test_engine_prefix with f16, on their own):
#   test_engine_prefix TYPE   warm starts on quantized blocks equal cold runs, copies on write, a
#                             wrapping ring and eviction (the Gemma 4 fixture; the f16 run is its own)
# About a minute with the kernel binaries cached (each KV type is a program of its own, some two
# minutes to compile on a 2-core PoCL the first time).
cd "$(dirname "$0")/../.." || exit 1
fails=0
for t in build/tests/test_engine_prefix; do
  [ -x "$t" ] || { echo "FAIL kv_quant: $t not built (make)"; exit 1; }
done
run() { "$@" || fails=1; }
run build/tests/test_engine_prefix q8_0 gemma4
run build/tests/test_engine_prefix q4 gemma4
exit $fails
