# libfuzzer_suite.sh — sourced by tests/suites/fuzz_*.sh: builds a libFuzzer target with ASan + UBSan and
# runs it for a bounded time over a copy of its committed seed corpus. Prints "PASS NAME (N execs)" or
# "FAIL NAME: ..." naming the crash file, which reproduces with: build/fuzz/NAME FILE.
# Usage (from the repository root): libfuzzer_suite NAME SEEDS DICT MALLOC_MB SECONDS SOURCE... [-lLIB...]
# FUZZ_CC overrides clang.
libfuzzer_suite() {
  name=$1 seeds=$2 dict=$3 malloc_mb=$4 secs=$5
  shift 5
  out=build/fuzz
  mkdir -p "$out"
  cc=${FUZZ_CC:-clang}
  if ! command -v "$cc" >/dev/null 2>&1; then
    echo "FAIL $name: $cc not found (libFuzzer needs clang)"; return 1
  fi
  # -fno-sanitize-recover: UBSan findings must stop the run like a crash, not scroll by.
  if ! "$cc" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
       -std=c11 -Wall -Wextra -D_GNU_SOURCE -Iopencl -Iopencl/io -Iopencl/include \
       "$@" -o "$out/$name" 2> "$out/$name.build.log"; then
    echo "FAIL $name: build failed"; cat "$out/$name.build.log"; return 1
  fi
  if [ -s "$out/$name.build.log" ]; then
    echo "FAIL $name: build warnings"; cat "$out/$name.build.log"; return 1
  fi
  if [ -z "$(ls "$seeds" 2>/dev/null)" ]; then
    echo "FAIL $name: no seeds in $seeds"; return 1
  fi
  corpus=$out/corpus_${name#fuzz_}
  rm -rf "$corpus" && mkdir -p "$corpus" && cp "$seeds"/* "$corpus"/
  # build/fuzz is shared with the other fuzzers: our artifacts carry the target's prefix
  art=$out/${name#fuzz_}-
  rm -f "$art"crash-* "$art"leak-* "$art"timeout-* "$art"oom-* "$art"slow-unit-*
  log=$out/$name.log
  # -malloc_limit_mb: no input may make the target ask for more; anything bigger means an
  # allocation is not bounded by the input size or the limits the target sets.
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
  "$out/$name" -max_total_time="$secs" -rss_limit_mb=2048 -malloc_limit_mb="$malloc_mb" -max_len=65536 \
    -timeout=10 -dict="$dict" -artifact_prefix="$art" -print_final_stats=1 \
    "$corpus" > "$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  if [ "$rc" -eq 0 ] && [ -n "$execs" ]; then
    echo "PASS $name ($execs execs, $(ls "$corpus" | wc -l) corpus files)"
    return 0
  fi
  crash=$(sed -n 's/.*Test unit written to \([^ ]*\).*/\1/p' "$log" | tail -n 1)
  echo "FAIL $name: exit $rc${crash:+, crash file $crash (reproduce: $out/$name $crash)}"
  tail -n 40 "$log"
  return 1
}
