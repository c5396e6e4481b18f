#!/bin/sh
# The NVIDIA-only kernel paths (inline PTX, int8 dot products, tensor cores), which PoCL never builds,
# compiled for sm_90a without a GPU (tools/ptx_check.sh: clang to PTX, then ptxas): every program and
# KV type builds, the int8 decode kernels of every int8 type exist and spill nothing, and the int8
# tensor-core products keep their accumulators in registers (no stack frame: 31B at 64 tokens ran
# 1,070 tok/s with them in local memory, 1,294 without, H200), and the tensor-core attention kernels
# exist and spill nothing.
cd "$(dirname "$0")/../.." || exit 1
if ! command -v clang >/dev/null || ! command -v ptxas >/dev/null; then
  echo "ptx_nvidia: no clang or ptxas here (the CUDA toolkit): not checked"; exit 0
fi
out=$(sh tools/ptx_check.sh -v all 2>&1); rc=$?
echo "$out" | grep '^ptx_check'
if [ $rc -eq 0 ]; then echo "PASS ptx_programs_build"; else echo "FAIL ptx_programs_build: $(echo "$out" | grep -v '^  ' | head -5 | tr '\n' ' ')"; fi
# the int8 decode families per type: types.cl's CLG_TYPES_Q8
types=$(sed -n 's/^#define CLG_TYPES_Q8(X) //p; s/^#define CLG_TYPES_Q8_MMQ8(X) //p' opencl/kernels/types.cl |
        grep -o 'X([a-z0-9_]*' | sed 's/X(//' | sort -u)
bad=""
for t in $types; do
  for f in mvq mvqg mvqn mvqe; do
    line=$(echo "$out" | grep -m1 "^  ${f}_$t ")
    [ -n "$line" ] || { bad="$bad ${f}_$t:missing"; continue; }
    set -- $line
    [ "$4" = 0 ] || bad="$bad ${f}_$t:$4-bytes-spilled"
  done
done
if [ -z "$bad" ] && [ -n "$types" ]; then echo "PASS ptx_int8_decode_kernels ($(echo $types))"
else echo "FAIL ptx_int8_decode_kernels:$bad"; fi
# the int8 tensor-core products: every token width of every type, no stack frame
bad=""; n=0
for t in $types; do
  for f in mmq8 mmq8p mmq8r; do
    for nt in 1 2 4 8; do
      line=$(echo "$out" | grep -m1 "^  ${f}_${t}_$nt ")
      [ -n "$line" ] || continue
      n=$((n + 1)); set -- $line
      [ "$4" = 0 ] && [ "$7" = 0 ] || bad="$bad ${f}_${t}_$nt:$4-spilled-$7-stack"
    done
  done
done
if [ -z "$bad" ] && [ $n -ge 20 ]; then echo "PASS ptx_int8_mma_kernels ($n kernels)"
else echo "FAIL ptx_int8_mma_kernels ($n kernels):$bad"; fi
# the tensor-core decode attention (attn_decm.cl) of both head dims and its merge: built, nothing spilled
bad=""
for k in attn_decm_256 attn_decm_512 attn_decm_merge attn_fa4_512 attn_fa8_512 attn_fa8_256 attn_fa_q; do
  line=$(echo "$out" | grep -m1 "^  $k ")
  [ -n "$line" ] || { bad="$bad $k:missing"; continue; }
  set -- $line
  [ "$4" = 0 ] || bad="$bad $k:$4-bytes-spilled"
done
if [ -z "$bad" ]; then echo "PASS ptx_attention_kernels"; else echo "FAIL ptx_attention_kernels:$bad"; fi
