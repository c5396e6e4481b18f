#!/bin/sh
# Runs tests/fuzz/fuzz_tokenizer.c (libFuzzer + ASan + UBSan) for a bounded time and prints
# "PASS fuzz_tokenizer (N execs)" or a FAIL line. FUZZ_SECONDS overrides the 30 s budget.
cd "$(dirname "$0")/../.." || exit 1
secs=${FUZZ_SECONDS:-30}
out=build/fuzz
model=${CLGEMMA_MODEL:-models/gemma-3-270m-q4_k_m.gguf}
if [ ! -f "$model" ]; then
    echo "FAIL fuzz_tokenizer: $model missing: run make model"
    exit 1
fi
if ! sh deploy/fetch_llama_ref.sh >/dev/null; then
    echo "FAIL fuzz_tokenizer: cannot fetch llama.cpp's Gemma 4 and Qwen 3.5 vocabularies (deploy/fetch_llama_ref.sh)"
    exit 1
fi
if ! command -v clang >/dev/null 2>&1; then
    echo "FAIL fuzz_tokenizer: clang not found"
    exit 1
fi
mkdir -p "$out/corpus_tokenizer"
if ! clang -std=c11 -Wall -Wextra -D_GNU_SOURCE -O1 -g \
        -fsanitize=fuzzer,address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all \
        -Iopencl -Iopencl/io -Iopencl/include -Itests/lib -Itests/opencl/io -o "$out/fuzz_tokenizer" \
        tests/fuzz/fuzz_tokenizer.c opencl/io/tokenizer*.c opencl/io/gguf.c opencl/errf.c -lpcre2-8; then
    echo "FAIL fuzz_tokenizer: build failed"
    exit 1
fi
# a few seeds: chat markup, user-defined whitespace runs, byte fallback, invalid UTF-8; the
# first byte's bit 3 picks the Gemma 4 vocabulary, bit 4 Qwen 3.5's
c=$out/corpus_tokenizer
printf '\001<start_of_turn>user\nHi<end_of_turn>\n' > "$c/seed_chat"
printf '\000a  b\t\tc\n\n\n   d</s><b>x</b>' > "$c/seed_ws"
printf '\004\360\240\200\200 \342\226\201 \377\376 <unused0><0x41>' > "$c/seed_bytes"
printf '\011<|turn>user\nHi <|"|>x<|"|><turn|>\n<|turn>model\n<|channel>t<channel|>' > "$c/seed_g4_chat"
printf '\010a  b\t\tc\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n d </s>' > "$c/seed_g4_ws"
printf '\014\360\240\200\200 \342\226\201 \377\300\240\300\212\355\240\200\364\220\200\200 \344\270' > "$c/seed_g4_bytes"
printf '\021<|im_start|>user\nHi, it'"'"'s 1234 caf\303\251 a\314\201b<|im_end|>\n' > "$c/seed_q35_chat"
printf '\020  \n\n x\302\205\302\205y!\341\240\216 \360\261\215\220 \r\n\t[PAD151646]' > "$c/seed_q35_ws"
printf '\024\355\240\200a\377 b\300\240x\344\270 \364\220\200\200' > "$c/seed_q35_bytes"
log=$out/fuzz_tokenizer.log
CLGEMMA_MODEL=$model ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "$out/fuzz_tokenizer" -max_total_time="$secs" -max_len=2048 -print_final_stats=1 \
    -artifact_prefix="$out/" "$c" > "$log" 2>&1
rc=$?
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
if [ "$rc" -ne 0 ] || [ -z "$execs" ]; then
    tail -n 40 "$log"
    echo "FAIL fuzz_tokenizer: exit status $rc (log: $log)"
    exit 1
fi
echo "PASS fuzz_tokenizer ($execs execs)"
