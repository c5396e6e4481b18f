#!/bin/sh
# The NVIDIA kernel programs compiled without a GPU: clang (nvptx64, OpenCL C 1.2, -DCLG_NVIDIA=1) to PTX,
# then ptxas for sm_90a, so the inline PTX and the int8 / tensor-core paths are checked before a device
# call. NVIDIA's own OpenCL compiler differs (register counts, inlining, unrolling): this catches errors, and
# tools/gpu_ptxas.sh shows the driver's own figures on the GPU machine.
#   sh tools/ptx_check.sh [-v] [PROGRAM] [-- EXTRA_CLANG_FLAGS]
# PROGRAM: main (default), capped, sm90a, or all; main is built for each KV type (-DCLG_KV=0|1|2). -v: registers,
# spill bytes and stack frame bytes per kernel. Needs clang and ptxas (the CUDA toolkit) on PATH; exit 2 without them.
cd "$(dirname "$0")/.." || exit 1
verbose=0; [ "${1:-}" = -v ] && { verbose=1; shift; }
prog=${1:-main}; [ $# -gt 0 ] && shift; [ "${1:-}" = -- ] && shift
for t in clang ptxas; do command -v $t >/dev/null || { echo "ptx_check: $t not on PATH" >&2; exit 2; }; done
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
build() { # program tag, -D flags
  p=$1; shift
  { cat tools/ptx_shim.cl
    awk -v p="$p" '$1 !~ /^#/ { n = split($1, a, ","); for (i = 1; i <= n; i++) if (a[i] == p) print $2 }' opencl/kernels/manifest.def | while read -r f; do cat "$f"; done
  } > "$dir/k.cl"
  clang -x cl -cl-std=CL1.2 -target nvptx64-nvidia-nvcl -Xclang -finclude-default-header \
    -Xclang -cl-ext=+cl_khr_fp16 -fgnu89-inline -Dasm=__asm__ -DCLG_NVIDIA=1 -O2 -Wno-everything "$@" \
    -S -o "$dir/k.ptx" "$dir/k.cl" 2> "$dir/clang.err" || { echo "ptx_check: $p $*: clang failed"; head -20 "$dir/clang.err"; return 1; }
  # clang writes PTX 3.2 for sm_20; the kernels' PTX (mma, cp.async) is sm_80+
  # and ptx.cl's sm_90a lines uncommented, as runtime.c does
  sed -i -e 's/^\.version .*/.version 8.0/' -e 's/^\.target .*/.target sm_90a/' -e 's|//@sm90a ||' "$dir/k.ptx"
  ptxas -arch=sm_90a -c -v $PTXAS_FLAGS -o "$dir/k.o" "$dir/k.ptx" > "$dir/ptxas.out" 2>&1 ||
    { echo "ptx_check: $p $*: ptxas failed"; grep -v '^ptxas info' "$dir/ptxas.out" | head -20; return 1; }
  n=$(grep -c "Compiling entry function" "$dir/ptxas.out")
  echo "ptx_check: $p $*: $n kernels"
  [ $verbose = 1 ] && awk -F"'" -f tools/ptxas_table.awk "$dir/ptxas.out"
  return 0
}
rc=0
PTXAS_FLAGS=
case $prog in
  main|all) for kv in 0 1 2; do build main -DCLG_KV=$kv "$@" || rc=1; done ;;
esac
case $prog in
  capped|all) PTXAS_FLAGS=--maxrregcount=128 build capped "$@" || rc=1 ;; # runtime.c's capped_opts
esac
case $prog in
  sm90a|all) PTXAS_FLAGS=--maxrregcount=128 build sm90a -DCLG_SM90A=1 "$@" || rc=1 ;;
esac
exit $rc
