#!/bin/sh
# The worker's HTTP/1.1 request reader (fcgi/http_reader.c, over http-parser): libFuzzer + ASan +
# UBSan on tests/fuzz/fuzz_http.c for a bounded time (FUZZ_SECONDS, default 30). A crash file
# reproduces with: build/fuzz/fuzz_http FILE
cd "$(dirname "$0")/../.." || exit 1
out=build/fuzz
mkdir -p "$out"
cc=${FUZZ_CC:-clang}
secs=${FUZZ_SECONDS:-30}
flags="-std=c11 -Wall -Wextra -D_GNU_SOURCE -Ifcgi"

if ! command -v "$cc" >/dev/null 2>&1; then
  echo "FAIL fuzz_http: $cc not found (libFuzzer needs clang)"; exit 1
fi
if ! "$cc" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all $flags \
     tests/fuzz/fuzz_http.c fcgi/http_reader.c -lhttp_parser -o "$out/fuzz_http" 2> "$out/http-build.log" ||
   [ -s "$out/http-build.log" ]; then
  echo "FAIL fuzz_http: build failed or warned"; cat "$out/http-build.log"; exit 1
fi
corpus=$out/corpus_http
rm -rf "$corpus" && mkdir -p "$corpus"
rm -f "$out"/crash-* "$out"/leak-* "$out"/timeout-* "$out"/oom-*
# seeds: what nginx sends (proxy_pass, HTTP/1.1), a chunked body, a bad one; the first byte picks
# the piece size and max-body
i=0
seed() { i=$((i + 1)); printf "$1" > "$corpus/seed-$i"; }
seed '\343POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nX-Request-Id: 0123456789abcdef0123456789abcdef\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{"model":"m"}'
seed '\002GET /health HTTP/1.1\r\nHost: localhost\r\nX-Request-Id: ab\r\n\r\n'
seed '\245POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n2;x=y\r\nef\r\n0\r\nT: v\r\n\r\n'
seed '\021GET /v1/models/x?y=1 HTTP/1.0\r\nContent-Type: a\r\n b\r\n\r\n'
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
"$out/fuzz_http" -max_total_time="$secs" -rss_limit_mb=2048 -malloc_limit_mb=64 -max_len=8192 \
  -timeout=10 -artifact_prefix="$out/" -print_final_stats=1 "$corpus" > "$out/fuzz_http.log" 2>&1
rc=$?
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/fuzz_http.log" | tail -n 1)
if [ "$rc" -eq 0 ] && [ -n "$execs" ]; then
  echo "PASS fuzz_http ($execs execs in ${secs}s, $(ls "$corpus" | wc -l) corpus files)"
else
  crash=$(sed -n 's/.*Test unit written to \([^ ]*\).*/\1/p' "$out/fuzz_http.log" | tail -n 1)
  echo "FAIL fuzz_http: exit $rc${crash:+, crash file $crash (reproduce: $out/fuzz_http $crash)}"
  tail -n 40 "$out/fuzz_http.log"
  exit 1
fi
