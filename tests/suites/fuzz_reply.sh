#!/bin/sh
# The reply splitter and Gemma 4's call parser (opencl/io/chat_reply.c) under libFuzzer + ASan + UBSan for a
# bounded time (FUZZ_SECONDS, default 30): any model output, cut anywhere, splits without a crash into events
# in bounds, and every tool call it reports has a JSON object for arguments.
# A crash file reproduces with: build/fuzz/fuzz_reply FILE
cd "$(dirname "$0")/../.." || exit 1
out=build/fuzz
mkdir -p "$out"
cc=${FUZZ_CC:-clang}
secs=${FUZZ_SECONDS:-30}
if ! command -v "$cc" >/dev/null 2>&1; then
  echo "FAIL fuzz_reply: $cc not found (libFuzzer needs clang)"; exit 1
fi
if ! "$cc" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -std=c11 -Wall -Wextra -D_GNU_SOURCE \
     -Iopencl/include tests/fuzz/fuzz_reply.c opencl/io/chat_reply.c -ljson-c -o "$out/fuzz_reply" \
     2> "$out/fuzz_reply-build.log" || [ -s "$out/fuzz_reply-build.log" ]; then
  echo "FAIL fuzz_reply: build failed or warned"; cat "$out/fuzz_reply-build.log"; exit 1
fi
corpus=$out/corpus_reply
rm -rf "$corpus" && mkdir -p "$corpus"
i=0
seed() { i=$((i + 1)); printf "$1" > "$corpus/seed-$i"; }
seed '\003\005<|channel>thought\nhm <b><channel|>Sure <|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:3,o:{a:[1,true,None]}}<tool_call|><|tool_call>call:f{}<tool_call|>'
seed '\003\001<|tool_call>call:f{x:<|"|>a<|"|> b<|"|>,y:-1.5e+3}<tool_call|>tail'
seed '\003\002<|tool_call>call:f{x:[1,{y:<|"|>cut'
seed '\001\007<|channel>no newline<channel|>text<|channel>'
seed '\000\003plain <|tool_call>call:f{}<tool_call|>'
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
"$out/fuzz_reply" -max_total_time="$secs" -rss_limit_mb=2048 -malloc_limit_mb=256 -max_len=4096 -timeout=10 \
  -artifact_prefix="$out/fuzz_reply-" -print_final_stats=1 "$corpus" > "$out/fuzz_reply.log" 2>&1
r=$?
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/fuzz_reply.log" | tail -n 1)
if [ "$r" -eq 0 ] && [ -n "$execs" ]; then
  echo "PASS fuzz_reply ($execs execs in ${secs}s, $(ls "$corpus" | wc -l) corpus files)"
else
  crash=$(sed -n 's/.*Test unit written to \([^ ]*\).*/\1/p' "$out/fuzz_reply.log" | tail -n 1)
  echo "FAIL fuzz_reply: exit $r${crash:+, crash file $crash (reproduce: $out/fuzz_reply $crash)}"
  tail -n 40 "$out/fuzz_reply.log"
  exit 1
fi
