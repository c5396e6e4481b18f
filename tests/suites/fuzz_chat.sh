#!/bin/sh
# The chat templates (opencl/io/chat*.c): libFuzzer + ASan + UBSan on tests/fuzz/fuzz_chat.c for a bounded
# time (FUZZ_SECONDS, default 15), seeded with the conversations of tests/golden/chat_gemma4.json and the
# texts of tests/golden/chat_checks.json. A crash file reproduces with: build/fuzz/fuzz_chat FILE
cd "$(dirname "$0")/../.." || exit 1
out=build/fuzz
mkdir -p "$out"
cc=${FUZZ_CC:-clang}
secs=${FUZZ_SECONDS:-15}
if ! command -v "$cc" >/dev/null 2>&1; then
  echo "FAIL fuzz_chat: $cc not found (libFuzzer needs clang)"; exit 1
fi
if ! "$cc" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -std=c11 -Wall -Wextra -D_GNU_SOURCE \
     -Iopencl -Iopencl/io -Iopencl/include tests/fuzz/fuzz_chat.c opencl/io/chat.c opencl/io/chat_py.c opencl/io/chat_gemma4.c opencl/io/chat_qwen35.c opencl/io/chat_check.c \
     opencl/io/tokenizer*.c opencl/io/gguf.c opencl/errf.c -ljson-c -lpcre2-8 -lm -o "$out/fuzz_chat" 2> "$out/chat-build.log" ||
   [ -s "$out/chat-build.log" ]; then
  echo "FAIL fuzz_chat: build failed or warned"; cat "$out/chat-build.log"; exit 1
fi
corpus=$out/corpus_chat
rm -rf "$corpus" && mkdir -p "$corpus"
rm -f "$out"/crash-* "$out"/leak-* "$out"/timeout-* "$out"/oom-*
.venv/bin/python - "$corpus" <<'PY' || { echo "FAIL fuzz_chat: could not write the seeds"; exit 1; }
import json, sys
out = sys.argv[1]
cases = json.load(open("tests/golden/chat_gemma4.json", encoding="utf-8"))["cases"]
for i, c in enumerate(cases):
    body = json.dumps({"messages": c["messages"], "tools": c.get("tools")}, ensure_ascii=False).encode()
    open(f"{out}/conv-{i}", "wb").write(bytes([(i * 7) & 0x1f]) + body)
for i, c in enumerate(json.load(open("tests/golden/chat_checks.json", encoding="utf-8"))["checks"]):
    open(f"{out}/tpl-{i}", "wb").write(b"\x01" + c["text"].encode())
PY
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
"$out/fuzz_chat" -max_total_time="$secs" -rss_limit_mb=2048 -malloc_limit_mb=256 -max_len=8192 \
  -timeout=10 -artifact_prefix="$out/" -print_final_stats=1 "$corpus" > "$out/fuzz_chat.log" 2>&1
rc=$?
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/fuzz_chat.log" | tail -n 1)
if [ "$rc" -eq 0 ] && [ -n "$execs" ]; then
  echo "PASS fuzz_chat ($execs execs in ${secs}s, $(ls "$corpus" | wc -l) corpus files)"
else
  crash=$(sed -n 's/.*Test unit written to \([^ ]*\).*/\1/p' "$out/fuzz_chat.log" | tail -n 1)
  echo "FAIL fuzz_chat: exit $rc${crash:+, crash file $crash (reproduce: $out/fuzz_chat $crash)}"
  tail -n 40 "$out/fuzz_chat.log"
  exit 1
fi
