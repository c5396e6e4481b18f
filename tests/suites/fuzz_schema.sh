#!/bin/sh
# The structured-output compilers and matcher (opencl/constrain/: schema.c, tools.c, matcher.c)
# under libFuzzer + ASan + UBSan for a bounded time each (FUZZ_SECONDS, default 30): any schema
# text (fuzz_schema) or tools array with tool_choice flags (fuzz_tools) compiles or is refused with
# a message, and bytes fed to the matcher never crash it.
# A crash file reproduces with: build/fuzz/fuzz_schema FILE (or build/fuzz/fuzz_tools FILE)
cd "$(dirname "$0")/../.." || exit 1
out=build/fuzz
mkdir -p "$out"
cc=${FUZZ_CC:-clang}
secs=${FUZZ_SECONDS:-30}
flags="-std=c11 -Wall -Wextra -D_GNU_SOURCE -Iopencl -Iopencl/include -Iopencl/constrain"
srcs="opencl/constrain/grammar.c opencl/constrain/schema.c opencl/constrain/tools.c opencl/constrain/matcher.c"
if ! command -v "$cc" >/dev/null 2>&1; then
  echo "FAIL fuzz_schema: $cc not found (libFuzzer needs clang)"; exit 1
fi
rc=0
seed() { i=$((i + 1)); printf "$1" > "$corpus/seed-$i"; }
# fuzz NAME: builds tests/fuzz/NAME.c and runs it on $out/corpus_NAME (seeded by the caller)
fuzz() {
  name=$1
  if ! "$cc" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all $flags \
       "tests/fuzz/$name.c" $srcs -ljson-c -lm -o "$out/$name" 2> "$out/$name-build.log" ||
     [ -s "$out/$name-build.log" ]; then
    echo "FAIL $name: build failed or warned"; cat "$out/$name-build.log"; rc=1; return
  fi
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
  "$out/$name" -max_total_time="$secs" -rss_limit_mb=2048 -malloc_limit_mb=256 -max_len=4096 \
    -timeout=10 -artifact_prefix="$out/$name-" -print_final_stats=1 "$corpus" > "$out/$name.log" 2>&1
  r=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/$name.log" | tail -n 1)
  if [ "$r" -eq 0 ] && [ -n "$execs" ]; then
    echo "PASS $name ($execs execs in ${secs}s, $(ls "$corpus" | wc -l) corpus files)"
  else
    crash=$(sed -n 's/.*Test unit written to \([^ ]*\).*/\1/p' "$out/$name.log" | tail -n 1)
    echo "FAIL $name: exit $r${crash:+, crash file $crash (reproduce: $out/$name $crash)}"
    tail -n 40 "$out/$name.log"
    rc=1
  fi
}
rm -f "$out"/crash-* "$out"/leak-* "$out"/timeout-* "$out"/oom-* "$out"/fuzz_*-crash-* "$out"/fuzz_*-leak-* \
      "$out"/fuzz_*-timeout-* "$out"/fuzz_*-oom-*

# schemas: the committed schema corpus, some with a valid or nearly valid output after a NUL
corpus=$out/corpus_schema
rm -rf "$corpus" && mkdir -p "$corpus"
i=0
for s in tests/data/schemas/*.json; do i=$((i + 1)); cp "$s" "$corpus/seed-$i"; done
seed '{"type":"object","properties":{"a":{"type":"string","maxLength":3},"b":{"enum":[1,12,"x"]}},"required":["b"]}\000{"a":"\\u00e9x","b":12}'
seed '{"anyOf":[{"type":"integer"},{"type":"array","items":{"$ref":"#"},"maxItems":2}]}\000[[1,[]],-0]'
seed '\000{"k": [1.5e+3, true, null, "\\n"]}'
seed '{"type":["string","null"],"minLength":1}\000null'
fuzz fuzz_schema

# tools: the committed tools corpus under each flag, some with calls after a NUL
corpus=$out/corpus_tools
rm -rf "$corpus" && mkdir -p "$corpus"
i=0
for s in tests/data/tools/*.json; do
  for f in '\000' '\001' '\002' '\005'; do i=$((i + 1)); { printf "$f"; cat "$s"; } > "$corpus/seed-$i"; done
done
w='[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"location":{"type":"string"},"unit":{"enum":["c","f"]}},"required":["location"]}}},{"type":"function","function":{"name":"f"}}]'
seed "\\000$w\\000\\371call:get_weather{location:\\370Rio \"x\"\\370,unit:\\370c\\370}\\372"
seed "\\001$w\\000\\371call:f{a:[1,{b:\\370<|\"|\\370}],c.d:-2e5}\\372\\371call:get_weather{location:\\370\\370}\\372"
seed "\\004$w\\000\\371call:f{}\\372"
fuzz fuzz_tools
exit $rc
