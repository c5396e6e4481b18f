#!/bin/sh
# Builds tests/opencl/io/test_tokenizer.c (Gemma 3, SentencePiece), test_tokenizer_gemma4.c
# (Gemma 4, BPE) and test_tokenizer_qwen35.c (Qwen, byte-level BPE) with the tokenizer and GGUF
# reader and writer under AddressSanitizer +
# UndefinedBehaviorSanitizer (leak checking on) and runs them. The tests' PASS/FAIL lines pass
# through; any sanitizer report aborts the run, which fails the suite.
cd "$(dirname "$0")/../.." || exit 1
CC=${CC:-cc}
out=build/asan
mkdir -p "$out"
for t in test_tokenizer test_tokenizer_gemma4 test_tokenizer_qwen35; do
    if ! $CC -std=c11 -Wall -Wextra -D_GNU_SOURCE -O1 -g \
            -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all \
            -Iopencl -Iopencl/io -Iopencl/include -Itests/lib -Itests/opencl/io -o "$out/$t" \
            "tests/opencl/io/$t.c" opencl/io/tokenizer*.c opencl/io/gguf.c opencl/io/gguf_write.c opencl/errf.c \
            -lpcre2-8; then
        echo "FAIL asan_tokenizer: $t: build failed"
        exit 1
    fi
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:halt_on_error=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$out/$t"
    rc=$?
    if [ "$rc" -ne 0 ]; then
        echo "FAIL asan_tokenizer: $t: exit status $rc (sanitizer report or failed checks above)"
        exit 1
    fi
done
echo "PASS asan_tokenizer"
