#!/bin/bash
# Issue 21's side-by-side table: clgemma against llama.cpp CUDA on the same real-format GGUF files, one
# engine process at a time, on the GPU machine (repo root; $OUT from the device tool, else ./vs-llama;
# carry .gpu with the clgemma binary in .gpu/now/clgemma, or build/clgemma present).
#   bash tools/gpu_vs_llama.sh [MODELS] [ROWS]
# MODELS (default "g3 26b 31b e4b e2b"): g3 = Gemma 3 270M Q4_K_M (the real file's layout grown from
#   .gpu/g3.sample), 26b / 31b = Gemma 4 26B-A4B / 31B Q4_K_M, e4b / e2b = Gemma 4 E4B / E2B Q8_0, q27b / q35b =
#   Qwen 3.6 27B / 35B-A3B Q4_K_M (tools/gpu_qwen35.sh), written by `clgemma synth` with llama.cpp's names and
#   llama-quantize's type mix and the real vocabulary (.gpu/vocab-gemma-4.gguf.xz, .gpu/vocab-qwen35.gguf.xz);
#   random weights, so timing only.
# ROWS (default "b1 p2048 b16 b64"): b1 = decode of one sequence after 512 tokens (llama-bench -n 128 -d 512;
#   clgemma bench -p 512 -n 128), tg128 = the same from an empty context (llama-bench -n 128; clgemma bench -p 1
#   -n 128), p2048 = a 2,048-token prompt (llama-bench -p 2048), bN = N sequences decoding 32 tokens each after
#   128-token prompts (llama-batched-bench -npp 128 -ntg 32 -npl N -kvu; clgemma bench
#   -b N -p 128 -n 32), b1_8k / b1_32k = decode after 8,192 / 32,768 tokens, p8k / p32k = prompts of that many,
#   start = process start to one generated token (llama-completion -n 1 against clgemma generate -n 1).
# MODELS "build" only builds llama.cpp (waiting for it); ROWS "none" only writes the files (with KEEP=1, for
# later calls on the same machine). The table's header is written once per $OUT.
# Every figure is the median of 3 runs (llama-bench's samples_ts; batched-bench and start-up run 3 times);
# llama.cpp: -ngl 99 -fa on, its defaults otherwise. Rows go to $OUT/vs_llama.md as they are measured, so a
# run cut short keeps what it has. llama.cpp is built once per machine into LLAMA_DIR (default /tmp/lcpp)
# from .gpu/llama-slim.tar.xz (the llama-cpp-python 0.3.36 sdist's vendor/llama.cpp; sh tools/gpu_llama_src.sh
# writes it, 6.1 MB), CUDA sm_90a, in the
# background while the first file is written (~4 min on 16 cores).
models=${1:-g3 26b 31b e4b e2b}
rows=${2:-b1 p2048 b16 b64}
out=${OUT:-vs-llama}
lcpp=${LLAMA_DIR:-/tmp/lcpp}
work=${VS_DIR:-/tmp/vs-llama}
mkdir -p "$out" "$work"
[ -f .gpu/gpu-env.sh ] && . .gpu/gpu-env.sh >/dev/null 2>&1
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-/tmp/cc}
cg=build/clgemma; [ -x .gpu/now/clgemma ] && cg=.gpu/now/clgemma
[ -x $cg ] || { echo "gpu_vs_llama: no clgemma binary (.gpu/now/clgemma or build/clgemma)" >&2; exit 1; }
bin=$lcpp/build/bin
if [ "$rows" != none ] && { [ ! -x $bin/llama-bench ] || [ ! -x $bin/llama-batched-bench ] || [ ! -x $bin/llama-completion ]; }; then
  ( t0=$(date +%s)
    mkdir -p $lcpp && tar -xJf .gpu/llama-slim.tar.xz -C $lcpp &&
    cmake -S $lcpp/llama.cpp -B $lcpp/build -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
      -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
      -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF > $out/llama-build.log 2>&1 &&
    ninja -C $lcpp/build llama-bench llama-batched-bench llama-completion >> $out/llama-build.log 2>&1 &&
    echo "llama.cpp built in $(( $(date +%s) - t0 )) s" ) > $work/build.status 2>&1 &
  build_pid=$!
fi
llama_ready() {
  [ -n "${build_pid:-}" ] && { wait $build_pid; build_pid=; cat $work/build.status; }
  [ -x $bin/llama-bench ] || { echo "llama.cpp build failed:"; tail -20 $out/llama-build.log; return 1; }
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $out/device.txt
med() { python3 -c "import sys,statistics as s; v=[float(x) for x in sys.argv[1:] if x]; print('%.1f' % s.median(v) if v else '-')" "$@"; }
# clgemma bench FIELD ARGS...: the median over -r 3 that bench reports
cg_bench() {
  f=$1; shift
  timeout 300 $cg bench -m $file "$@" -r 3 2>>$work/cg.err | python3 -c "import json,sys; print('%.1f' % json.load(sys.stdin)['$f'])" 2>/dev/null || echo -
}
# llama-bench ARGS...: the median of its samples
lb() {
  timeout 300 $bin/llama-bench -m $file -ngl 99 -fa 1 -r 3 -o json "$@" 2>>$work/lb.err |
    python3 -c "import json,sys,statistics as s; print('%.1f' % s.median(json.load(sys.stdin)[0]['samples_ts']))" 2>/dev/null || echo -
}
# llama-batched-bench at N sequences, three runs
lbb() {
  n=$1; v=()
  for i in 1 2 3; do
    v+=($(timeout 300 $bin/llama-batched-bench -m $file -ngl 99 -fa on -kvu -c $((n * 160 + 256)) -npp 128 -ntg 32 \
          -npl $n --output-format jsonl 2>&1 | tee -a $work/lbb.log | python3 -c "
import json,sys
for l in sys.stdin:
    l = l.strip()
    if l.startswith('{'): print(json.loads(l)['speed_tg'])"))
  done
  med "${v[@]}"
}
# seconds from process start to exit after one generated token, median of 3
start_s() {
  v=()
  for i in 1 2 3; do
    t0=$(date +%s.%N); timeout 300 "$@" >/dev/null 2>>$work/start.err && v+=($(python3 -c "import time; print(time.time() - $t0)"))
  done
  med "${v[@]}"
}
row() { # model row clgemma llama: ratio = clgemma / llama (start: llama / clgemma, lower is better)
  r=$(python3 -c "
a, b = '$3', '$4'
try:
    a, b = float(a), float(b)
    print('%.2f' % ((b / a) if '$2'.startswith('start') else (a / b)))
except ValueError: print('-')")
  printf '| %s | %s | %s | %s | %s |\n' "$1" "$2" "$3" "$4" "$r" | tee -a $out/vs_llama.md
}
if [ "$models" = build ]; then llama_ready; exit; fi
if [ ! -f $out/vs_llama.md ] && [ "$rows" != none ]; then
  echo "| model | row | clgemma | llama.cpp | ratio |" | tee $out/vs_llama.md
  echo "| --- | --- | --- | --- | --- |" | tee -a $out/vs_llama.md
fi
for m in $models; do
  file=$work/$m.gguf
  case $m in
    g3) name="Gemma 3 270M Q4_K_M"; [ -f $file ] || python3 tools/gguf_sample.py grow .gpu/g3.sample $file || exit 1 ;;
    26b|31b|e4b|e2b|q27b|q35b)
      vz=.gpu/vocab-gemma-4.gguf.xz
      case $m in 26b) arch=gemma4-26b-a4b mix=q4_k_m name="Gemma 4 26B-A4B Q4_K_M" ;;
                 31b) arch=gemma4-31b mix=q4_k_m name="Gemma 4 31B Q4_K_M" ;;
                 e4b) arch=gemma4-e4b mix=q8_0 name="Gemma 4 E4B Q8_0" ;;
                 e2b) arch=gemma4-e2b mix=q8_0 name="Gemma 4 E2B Q8_0" ;;
                 q27b) arch=qwen35-27b mix=q4_k_m name="Qwen 3.6 27B Q4_K_M" vz=.gpu/vocab-qwen35.gguf.xz ;;
                 q35b) arch=qwen35-35b-a3b mix=q4_k_m name="Qwen 3.6 35B-A3B Q4_K_M" vz=.gpu/vocab-qwen35.gguf.xz ;; esac
      vocab=$work/$(basename $vz .xz)
      [ -f $vocab ] || xz -dc $vz > $vocab || exit 1
      [ -f $file ] || $cg synth $arch -o $file --mix $mix --vocab $vocab > $out/synth-$m.log 2>&1 ||
        { tail -3 $out/synth-$m.log; exit 1; } ;;
    *) echo "gpu_vs_llama: unknown model $m" >&2; exit 1 ;;
  esac
  [ "$rows" = none ] && continue
  llama_ready || exit 1
  for r in $rows; do
    case $r in
      b1) row "$name" "decode B=1 @512" "$(cg_bench decode_tok_s -p 512 -n 128)" "$(lb -p 0 -n 128 -d 512)" ;;
      tg128) row "$name" "decode B=1 (tg128)" "$(cg_bench decode_tok_s -p 1 -n 128)" "$(lb -p 0 -n 128)" ;;
      b1_8k) row "$name" "decode B=1 @8k" "$(cg_bench decode_tok_s -p 8192 -n 64)" "$(lb -p 0 -n 64 -d 8192)" ;;
      b1_32k) row "$name" "decode B=1 @32k" "$(cg_bench decode_tok_s -p 32768 -n 64)" "$(lb -p 0 -n 64 -d 32768)" ;;
      p2048) row "$name" "prefill 2048" "$(cg_bench prefill_tok_s -p 2048 -n 4)" "$(lb -p 2048 -n 0)" ;;
      p8k) row "$name" "prefill 8192" "$(cg_bench prefill_tok_s -p 8192 -n 4)" "$(lb -p 8192 -n 0)" ;;
      p32k) row "$name" "prefill 32768" "$(cg_bench prefill_tok_s -p 32768 -n 4)" "$(lb -p 32768 -n 0)" ;;
      b[0-9]*) n=${r#b}; row "$name" "decode B=$n" "$(cg_bench decode_tok_s -b $n -p 128 -n 32)" "$(lbb $n)" ;;
      start) row "$name" "start to 1st token (s)" "$(start_s $cg generate -m $file -p 'The capital of France is' -n 1)" \
                 "$(start_s $bin/llama-completion -m $file -ngl 99 -fa on -p 'The capital of France is' -n 1 -no-cnv)" ;;
      *) echo "gpu_vs_llama: unknown row $r" >&2 ;;
    esac
  done
  [ "${KEEP:-0}" = 1 ] || rm -f $file
done
