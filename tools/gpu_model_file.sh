#!/bin/bash
# On the GPU machine (repo root, build/clgemma present, carried .gpu): writes the load scripts' model file
# once and prints its path. g3: the Gemma 3 270M Q4_K_M layout grown from .gpu/g3.sample; 26b: a
# real-shape Gemma 4 26B-A4B Q4_K_M written by `clgemma synth` with the real vocabulary
# (.gpu/vocab-gemma-4.gguf.xz). The synth log goes to ${OUT:-/tmp}/synth.log.
#   file=$(bash tools/gpu_model_file.sh g3|26b) || exit 1
case $1 in
  g3) file=/tmp/g3.gguf
      [ -f $file ] || python3 tools/gguf_sample.py grow .gpu/g3.sample $file >&2 || exit 1 ;;
  26b) file=/tmp/26b.gguf
      if [ ! -f $file ]; then
        log=${OUT:-/tmp}/synth.log
        xz -dc .gpu/vocab-gemma-4.gguf.xz > /tmp/vocab-g4.gguf &&
        build/clgemma synth gemma4-26b-a4b -o $file.part --mix q4_k_m --vocab /tmp/vocab-g4.gguf > $log 2>&1 &&
          mv $file.part $file || { tail $log >&2; exit 1; }
      fi ;;
  *) echo "usage: bash tools/gpu_model_file.sh g3|26b" >&2; exit 1 ;;
esac
echo $file
