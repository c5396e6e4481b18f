#!/bin/sh
# Builds tests/opencl/io/test_tokenizer.c (Gemma 3, SentencePiece) and test_tokenizer_gemma4.c
# (Gemma 4, BPE) with the tokenizer and GGUF reader under AddressSanitizer +
# UndefinedBehaviorSanitizer (leak checking on) and runs them. The tests' PASS/FAIL lines pass
# through; any sanitizer report aborts the run, which fails the suite.
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/asan_test.sh
for t in test_tokenizer test_tokenizer_gemma4; do
    asan_test asan_tokenizer "$t" -Itests/opencl/io "tests/opencl/io/$t.c" opencl/io/tokenizer*.c opencl/io/gguf.c \
        opencl/errf.c || exit 1
done
echo "PASS asan_tokenizer"
