#!/bin/sh
# Fuzzes the GGUF reader (tests/fuzz/fuzz_gguf.c) with libFuzzer + ASan + UBSan for a bounded
# time over a copy of the committed seed corpus (python3 tools/make_gguf_seeds.py). Prints
# "PASS fuzz_gguf (N execs)" or "FAIL fuzz_gguf: ..." naming the crash file, which reproduces
# with: build/fuzz/fuzz_gguf FILE
# FUZZ_SECONDS overrides the 60 s budget (e.g. FUZZ_SECONDS=600 for a long run).
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/libfuzzer_suite.sh
# 32 MB: a 64 KiB input may never make the reader ask for more than a few MB
libfuzzer_suite fuzz_gguf tests/fuzz/corpus_gguf tests/fuzz/gguf.dict 32 "${FUZZ_SECONDS:-60}" \
  tests/fuzz/fuzz_gguf.c opencl/io/gguf.c
