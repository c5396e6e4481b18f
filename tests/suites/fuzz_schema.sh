#!/bin/sh
# The structured-output schema compiler and matcher (opencl/constrain/schema.c, matcher.c) under
# libFuzzer + ASan + UBSan for a bounded time (FUZZ_SECONDS, default 30): any schema text compiles
# or is refused with a message, and bytes fed to the matcher never crash it.
# A crash file reproduces with: build/fuzz/fuzz_schema FILE
cd "$(dirname "$0")/../.." || exit 1
out=build/fuzz
mkdir -p "$out"
cc=${FUZZ_CC:-clang}
secs=${FUZZ_SECONDS:-30}
flags="-std=c11 -Wall -Wextra -D_GNU_SOURCE -Iopencl -Iopencl/include -Iopencl/constrain"
srcs="opencl/constrain/schema.c opencl/constrain/matcher.c"
if ! command -v "$cc" >/dev/null 2>&1; then
  echo "FAIL fuzz_schema: $cc not found (libFuzzer needs clang)"; exit 1
fi
if ! "$cc" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all $flags \
     tests/fuzz/fuzz_schema.c $srcs -ljson-c -lm -o "$out/fuzz_schema" 2> "$out/schema-build.log" ||
   [ -s "$out/schema-build.log" ]; then
  echo "FAIL fuzz_schema: build failed or warned"; cat "$out/schema-build.log"; exit 1
fi
corpus=$out/corpus_schema
rm -rf "$corpus" && mkdir -p "$corpus"
rm -f "$out"/crash-* "$out"/leak-* "$out"/timeout-* "$out"/oom-*
# seeds: the committed schema corpus, some with a valid or nearly valid output after a NUL
i=0
for s in tests/data/schemas/*.json; do i=$((i + 1)); cp "$s" "$corpus/seed-$i"; done
seed() { i=$((i + 1)); printf "$1" > "$corpus/seed-$i"; }
seed '{"type":"object","properties":{"a":{"type":"string","maxLength":3},"b":{"enum":[1,12,"x"]}},"required":["b"]}\000{"a":"\\u00e9x","b":12}'
seed '{"anyOf":[{"type":"integer"},{"type":"array","items":{"$ref":"#"},"maxItems":2}]}\000[[1,[]],-0]'
seed '\000{"k": [1.5e+3, true, null, "\\n"]}'
seed '{"type":["string","null"],"minLength":1}\000null'
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
"$out/fuzz_schema" -max_total_time="$secs" -rss_limit_mb=2048 -malloc_limit_mb=256 -max_len=4096 \
  -timeout=10 -artifact_prefix="$out/" -print_final_stats=1 "$corpus" > "$out/fuzz_schema.log" 2>&1
rc=$?
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/fuzz_schema.log" | tail -n 1)
if [ "$rc" -eq 0 ] && [ -n "$execs" ]; then
  echo "PASS fuzz_schema ($execs execs in ${secs}s, $(ls "$corpus" | wc -l) corpus files)"
else
  crash=$(sed -n 's/.*Test unit written to \([^ ]*\).*/\1/p' "$out/fuzz_schema.log" | tail -n 1)
  echo "FAIL fuzz_schema: exit $rc${crash:+, crash file $crash (reproduce: $out/fuzz_schema $crash)}"
  tail -n 40 "$out/fuzz_schema.log"
  exit 1
fi
