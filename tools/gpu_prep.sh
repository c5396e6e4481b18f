#!/bin/bash
# Prepares .gpu/ (ignored by git) for the tools/gpu_*.sh scripts on the GPU machine, which a device call
# carries with `carry: [".gpu"]` (run here, from the repository root, after `make`):
#   .gpu/debs/            the Debian runtime libraries clgemma links beyond that machine's (OpenCL loader,
#                         CLBlast, json-c, libfcgi, the image decoders, pcre2), unpacked there by gpu-env.sh
#   .gpu/gpu-env.sh       source it first on the GPU machine: the libraries, and NVIDIA's OpenCL as the ICD
#   .gpu/now/clgemma      build/clgemma, stripped
#   .gpu/vocab-gemma-4.gguf.xz, .gpu/llama-slim.tar.xz
#                         the real Gemma 4 vocabulary (tools/gpu_vs_llama.sh writes the real-format files
#                         with it) and llama.cpp's source (tools/gpu_llama_src.sh), both from the
#                         llama-cpp-python 0.3.36 sdist, downloaded once into .cache/
#   bash tools/gpu_prep.sh [--no-llama]
# --no-llama leaves the llama.cpp source out (4 MB) where a call measures clgemma alone. A call carries the
# tracked files and .gpu within 64 MiB: the script ends with the total.
set -euo pipefail
cd "$(dirname "$0")/.."
llama=1; [ "${1:-}" = --no-llama ] && llama=0
ver=0.3.36
mkdir -p .gpu/debs .gpu/now .cache
pkgs="ocl-icd-libopencl1 libclblast1 clinfo libjson-c5 libfcgi0ldbl libpcre2-8-0 libjpeg62-turbo libpng16-16
      libwebp7 libwebpdemux2 libgif7"
(cd .gpu/debs && rm -f ./*.deb && { apt-get download $pkgs >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get download $pkgs; }; })
cat > .gpu/gpu-env.sh <<'EOF'
# `. .gpu/gpu-env.sh` on the GPU machine: the carried libraries unpacked into /tmp/gpu-root, NVIDIA's OpenCL as the ICD
mkdir -p /tmp/gpu-root
for f in .gpu/debs/*.deb; do dpkg -x "$f" /tmp/gpu-root; done
export LD_LIBRARY_PATH=/tmp/gpu-root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=/tmp/gpu-root/usr/bin:$PATH
mkdir -p /etc/OpenCL/vendors
nv=$(ls /usr/local/nvidia/lib64/libnvidia-opencl.so.1 /usr/lib/libnvidia-opencl.so.1 2>/dev/null | head -1)
[ -n "$nv" ] && echo "$nv" > /etc/OpenCL/vendors/nvidia.icd
clinfo -l 2>/dev/null || true
EOF
[ -x build/clgemma ] || { echo "gpu_prep: no build/clgemma (run make first)" >&2; exit 1; }
cp build/clgemma .gpu/now/clgemma && strip .gpu/now/clgemma
sdist=.cache/llama_cpp_python-$ver.tar.gz
if [ ! -f $sdist ]; then
  py=.venv/bin/python; [ -x $py ] || py=python3
  $py -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: "llama-cpp-python==$ver" -d .cache
fi
if [ ! -f .gpu/vocab-gemma-4.gguf.xz ]; then
  tar -xzOf $sdist "llama_cpp_python-$ver/vendor/llama.cpp/models/ggml-vocab-gemma-4.gguf" | xz -9 -T2 > .gpu/vocab-gemma-4.gguf.xz
fi
if [ $llama = 1 ]; then [ -f .gpu/llama-slim.tar.xz ] || sh tools/gpu_llama_src.sh $sdist; else rm -f .gpu/llama-slim.tar.xz; fi
tracked=$(git ls-files -z | xargs -0 stat -c %s | awk '{s += $1} END {print s}')
gpu=$(du -sb .gpu | cut -f1)
echo "gpu_prep: .gpu $((gpu / 1048576)) MiB; a call carries $(( (tracked + gpu) / 1048576 )) of 64 MiB"
[ $((tracked + gpu)) -le $((64 * 1048576)) ] || { echo "gpu_prep: over the 64 MiB a call carries: leave files out of .gpu" >&2; exit 1; }
