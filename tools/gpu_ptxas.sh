#!/bin/sh
# The driver's own register, spill and stack figures per kernel (GPU machine, repo root, after any clgemma run):
# ptxas -v on the PTX that NVIDIA's OpenCL driver left in clgemma's binary cache, a table per cached program.
# tools/ptx_check.sh shows clang's PTX, whose stack frames the driver's compiler may not have (it unrolls more).
#   sh tools/gpu_ptxas.sh [CACHE_DIR] [KERNEL_REGEX]
# CACHE_DIR: clgemma's cache (default $XDG_CACHE_HOME/clgemma, else ~/.cache/clgemma); KERNEL_REGEX: an awk
# regex on kernel names (default: all). The program holding mmta_f16 is the capped one (runtime.c's capped_opts).
cd "$(dirname "$0")/.." || exit 1
cache=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/clgemma} pat=${2:-.}
PATH=$PATH:/usr/local/cuda/bin
command -v ptxas >/dev/null || { echo "gpu_ptxas: no ptxas (the CUDA toolkit)" >&2; exit 2; }
ls "$cache"/*.clbin >/dev/null 2>&1 || { echo "gpu_ptxas: no programs in $cache" >&2; exit 2; }
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
for f in $(ls -tr "$cache"/*.clbin); do
  tr -d '\000' < "$f" | sed -n '/^\.version/,$p' > "$dir/k.ptx" # the binary is PTX text, NUL-terminated
  [ -s "$dir/k.ptx" ] || { echo "$f: no PTX (not an NVIDIA binary)"; continue; }
  cap=; grep -q 'mmta_f16' "$dir/k.ptx" && cap=--maxrregcount=128
  echo "$(basename "$f") ($(stat -c %y "$f" | cut -c1-19)${cap:+, capped}):"
  ptxas -arch=sm_90a -c -v $cap -o "$dir/k.o" "$dir/k.ptx" 2>&1 | tee "$dir/ptxas.out" |
    awk -F"'" -v pat="$pat" -f tools/ptxas_table.awk
  grep -i error "$dir/ptxas.out" | sed 's/^/  /'
done
