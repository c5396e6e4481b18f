#!/bin/sh
# Fuzzes the GGUF reader (tests/fuzz/fuzz_gguf.c) with libFuzzer + ASan + UBSan for a bounded
# time over a copy of the committed seed corpus. Prints "PASS fuzz_gguf (N execs)" or
# "FAIL fuzz_gguf: ..." naming the crash file, which reproduces with: build/fuzz/fuzz_gguf FILE
# FUZZ_SECONDS overrides the 60 s budget (e.g. FUZZ_SECONDS=600 for a long run).
cd "$(dirname "$0")/../.." || exit 1
out=build/fuzz
mkdir -p "$out"
cc=${FUZZ_CC:-clang}
secs=${FUZZ_SECONDS:-60}

if ! command -v "$cc" >/dev/null 2>&1; then
  echo "FAIL fuzz_gguf: $cc not found (libFuzzer needs clang)"; exit 1
fi
# -fno-sanitize-recover: UBSan findings must stop the run like a crash, not scroll by.
if ! "$cc" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
     -std=c11 -Wall -Wextra -D_GNU_SOURCE -Iopencl -Iopencl/io -Iopencl/include \
     tests/fuzz/fuzz_gguf.c opencl/io/gguf.c -o "$out/fuzz_gguf" 2> "$out/fuzz_gguf.build.log"; then
  echo "FAIL fuzz_gguf: build failed"; cat "$out/fuzz_gguf.build.log"; exit 1
fi
if [ -s "$out/fuzz_gguf.build.log" ]; then
  echo "FAIL fuzz_gguf: build warnings"; cat "$out/fuzz_gguf.build.log"; exit 1
fi

seeds=tests/fuzz/corpus_gguf
if [ -z "$(ls "$seeds" 2>/dev/null)" ]; then
  echo "FAIL fuzz_gguf: no seeds in $seeds (python3 tools/make_gguf_seeds.py)"; exit 1
fi
corpus=$out/corpus_gguf
rm -rf "$corpus" && mkdir -p "$corpus" && cp "$seeds"/* "$corpus"/
# build/fuzz is shared with the other fuzzers: our artifacts and logs carry a gguf prefix
art=$out/gguf-
rm -f "$art"crash-* "$art"leak-* "$art"timeout-* "$art"oom-* "$art"slow-unit-*
log=$out/fuzz_gguf.log

# -malloc_limit_mb: a 64 KiB input may never make the reader ask for more than a few MB;
# anything bigger means an allocation is not bounded by the input size.
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
"$out/fuzz_gguf" -max_total_time="$secs" -rss_limit_mb=2048 -malloc_limit_mb=32 -max_len=65536 \
  -timeout=10 -dict=tests/fuzz/gguf.dict -artifact_prefix="$art" -print_final_stats=1 \
  "$corpus" > "$log" 2>&1
rc=$?
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
if [ "$rc" -eq 0 ] && [ -n "$execs" ]; then
  echo "PASS fuzz_gguf ($execs execs, $(ls "$corpus" | wc -l) corpus files)"
  exit 0
fi
crash=$(sed -n 's/.*Test unit written to \([^ ]*\).*/\1/p' "$log" | tail -n 1)
echo "FAIL fuzz_gguf: exit $rc${crash:+, crash file $crash (reproduce: $out/fuzz_gguf $crash)}"
tail -n 40 "$log"
exit 1
