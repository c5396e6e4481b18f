#!/bin/bash
# Issue 25's table (docs/design-qwen35.md 7): Qwen 3.6 27B and 35B-A3B Q4_K_M, clgemma against llama.cpp CUDA on
# the same `clgemma synth` files (llama.cpp's qwen35 / qwen35moe layout with the MTP block, llama-quantize's Q4_K_M
# mix, the vocabulary padded to 248,320; random weights, so timing only), one engine process at a time, medians of
# 3, with the ratios: decode B=1 (after 512 tokens, and tg128 from an empty context: llama-bench -n 128 -fa 1),
# prefill 2,048 (llama-bench -p 2048 -fa 1) and decode B=16 (llama-batched-bench). tools/gpu_vs_llama.sh does the
# work (llama.cpp's CUDA sm_90a build from .gpu/llama-slim.tar.xz in the background, $OUT/vs_llama.md, KEEP=1,
# LLAMA_DIR); this names the models, the rows and the vocabulary.
#   here:         bash tools/gpu_qwen35.sh prep      writes .gpu/vocab-qwen35.gguf.xz from llama.cpp's
#                                                    ggml-vocab-qwen35.gguf (sh deploy/fetch_llama_ref.sh)
#   GPU machine:  bash tools/gpu_qwen35.sh [MODELS] [ROWS]   (repo root, carrying .gpu with llama-slim.tar.xz,
#                 vocab-qwen35.gguf.xz and now/clgemma, or build/clgemma present)
# MODELS: "q27b q35b" (default; 15.7 and 20.2 GiB, each removed after its rows unless KEEP=1), "build" as in
# gpu_vs_llama.sh. ROWS: "b1 tg128 p2048 b16" (default), or any of gpu_vs_llama.sh's.
cd "$(dirname "$0")/.." || exit 1
if [ "${1:-}" = prep ]; then
  src=.cache/llama.cpp/models/ggml-vocab-qwen35.gguf
  [ -f $src ] || src=$(sh deploy/fetch_llama_ref.sh)/models/ggml-vocab-qwen35.gguf || exit 1
  mkdir -p .gpu && xz -9 -c "$src" > .gpu/vocab-qwen35.gguf.xz && ls -l .gpu/vocab-qwen35.gguf.xz
  exit
fi
[ "${1:-}" = build ] || [ -f .gpu/vocab-qwen35.gguf.xz ] ||
  { echo "gpu_qwen35: no .gpu/vocab-qwen35.gguf.xz (bash tools/gpu_qwen35.sh prep before the device call)" >&2
    exit 1; }
exec bash tools/gpu_vs_llama.sh "${1:-q27b q35b}" "${2:-b1 tg128 p2048 b16}"
