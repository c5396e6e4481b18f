#!/bin/sh
# Builds tests/opencl/io/test_tokenizer.c (Gemma 3, SentencePiece), test_tokenizer_gemma4.c (Gemma 4,
# BPE) and test_tokenizer_qwen35.c (Qwen 3.5 / Qwen 2, byte-level BPE) with the tokenizer and GGUF
# reader and writer under AddressSanitizer + UndefinedBehaviorSanitizer (leak checking on) and runs
# them. The tests' PASS/FAIL lines pass through; any sanitizer report aborts the run, which fails the
# suite.
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/asan_test.sh
for t in test_tokenizer test_tokenizer_gemma4 test_tokenizer_qwen35; do
    asan_test asan_tokenizer "$t" -Itests/opencl/io "tests/opencl/io/$t.c" opencl/io/tokenizer*.c opencl/io/gguf.c \
        opencl/io/gguf_write.c opencl/errf.c -lpcre2-8 || exit 1
done
echo "PASS asan_tokenizer"
