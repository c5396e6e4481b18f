#!/bin/sh
# Writes .gpu/llama-slim.tar.xz: llama.cpp's source of October 2026 (the llama-cpp-python 0.3.36 sdist's
# vendor/llama.cpp) with only what a CUDA build of llama-bench, llama-batched-bench, llama-completion,
# llama-mtmd-cli and llama-server needs on x86, for the tools/gpu_*.sh scripts on the GPU machine. Kept small
# because a device call carries the working tree and its carried folders within 64 MiB. Deterministic for one
# sdist.
#   sh tools/gpu_llama_src.sh [SDIST.tar.gz]
set -e
cd "$(dirname "$0")/.."
ver=0.3.36
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
sdist=${1:-}
if [ -z "$sdist" ]; then
  .venv/bin/pip download -q --disable-pip-version-check --no-deps --no-binary :all: "llama-cpp-python==$ver" -d "$tmp"
  sdist=$tmp/llama_cpp_python-$ver.tar.gz
fi
tar -xzf "$sdist" -C "$tmp" "llama_cpp_python-$ver/vendor/llama.cpp"
src=$tmp/llama_cpp_python-$ver/vendor
# other backends, models, docs, tests, the web UI and the Python converter are not built
( cd "$src/llama.cpp/ggml/src" && rm -rf ggml-blas ggml-cann ggml-et ggml-hexagon ggml-hip ggml-metal ggml-musa \
    ggml-opencl ggml-openvino ggml-rpc ggml-sycl ggml-virtgpu ggml-vulkan ggml-webgpu ggml-zdnn ggml-zendnn )
( cd "$src/llama.cpp" && rm -rf models docs benches tests media pocs ci scripts conversion gguf-py requirements \
    tools/server/public tools/server/webui tools/mtmd/legacy-models skills )
# the GPU machines are x86: other CPUs' kernels go; so do the web UI's and mtmd's test media
( cd "$src/llama.cpp" && rm -rf ggml/src/ggml-cpu/arch/arm ggml/src/ggml-cpu/arch/riscv ggml/src/ggml-cpu/arch/powerpc \
    ggml/src/ggml-cpu/arch/loongarch ggml/src/ggml-cpu/arch/s390 ggml/src/ggml-cpu/arch/wasm ggml/src/ggml-cpu/spacemit \
    tools/ui/tests tools/mtmd/test-1.jpeg tools/mtmd/test-2.mp3 tools/mtmd/test-3.mp4 )
mkdir -p .gpu
tar -C "$src" --sort=name --owner=0 --group=0 --mtime=@0 -cf - llama.cpp | xz -9 -T2 > .gpu/llama-slim.tar.xz
echo ".gpu/llama-slim.tar.xz: $(du -h .gpu/llama-slim.tar.xz | cut -f1)"
