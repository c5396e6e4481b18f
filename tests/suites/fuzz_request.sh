#!/bin/sh
# The request parser of the FastCGI worker: its C unit cases (tests/e2e/json_io_cases.c, linked
# here with the parser's sources built under the sanitizers), then libFuzzer + ASan + UBSan on
# tests/fuzz/fuzz_request.c for a bounded time (FUZZ_SECONDS, default 30). A crash file reproduces with: build/fuzz/fuzz_request FILE
cd "$(dirname "$0")/../.." || exit 1
out=build/fuzz
mkdir -p "$out"
cc=${FUZZ_CC:-clang}
secs=${FUZZ_SECONDS:-30}
flags="-std=c11 -Wall -Wextra -D_GNU_SOURCE -Iopencl/include -iquote fcgi -Itests/lib" # -iquote: fcgi/sched.h must not shadow <sched.h>
parser="fcgi/json_io.c fcgi/json_fields.c fcgi/api_error.c fcgi/api_image.c opencl/sampler.c"

if ! command -v "$cc" >/dev/null 2>&1; then
  echo "FAIL fuzz_request: $cc not found (libFuzzer needs clang)"; exit 1
fi

# 1. unit cases (with ASan/UBSan: they must be clean too)
if ! "$cc" -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=all $flags \
     tests/e2e/json_io_cases.c $parser -ljson-c -lcrypto -lm -o "$out/json_io_cases" 2> "$out/cases-build.log" ||
   [ -s "$out/cases-build.log" ]; then
  echo "FAIL json_io_cases: build failed or warned"; cat "$out/cases-build.log"; exit 1
fi
"$out/json_io_cases" || cases_failed=1

# 2. fuzzing
if ! "$cc" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all $flags \
     tests/fuzz/fuzz_request.c $parser fcgi/stop.c -ljson-c -lcrypto -lm -o "$out/fuzz_request" 2> "$out/build.log" ||
   [ -s "$out/build.log" ]; then
  echo "FAIL fuzz_request: build failed or warned"; cat "$out/build.log"; exit 1
fi
corpus=$out/corpus_request
rm -rf "$corpus" && mkdir -p "$corpus"
rm -f "$out"/crash-* "$out"/leak-* "$out"/timeout-* "$out"/oom-*
# seeds: valid and nearly valid requests of each kind, and a stop-filter case
i=0
seed() { i=$((i + 1)); printf "$1" > "$corpus/seed-$i"; }
seed '\000{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_tokens":8,"temperature":0.7,"top_p":0.9,"top_k":40,"min_p":0.05,"seed":42,"stop":["\\n\\n","END"],"stream":true,"stream_options":{"include_usage":true},"n":1,"frequency_penalty":0.5,"presence_penalty":-0.5,"repetition_penalty":1.1,"user":"u"}'
seed '\000{"model":"m","messages":[{"role":"user","content":"a\\u00e9\\ud83d\\ude00"},{"role":"assistant","content":"b"}],"max_completion_tokens":3,"stop":"x"}'
seed '\000{"model":"m","messages":[],"n":2}'
seed '\000{"model":"m","messages":[{"role":"user","content":"w"},{"role":"assistant","content":null,"reasoning_content":"r","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\\"a\\":[1,{}]}"}}]},{"role":"tool","tool_call_id":"c","name":"f","content":"ok"}],"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object","properties":{"a":{"type":"array"}}},"strict":true}}],"tool_choice":{"type":"function","function":{"name":"f"}},"parallel_tool_calls":false,"reasoning_effort":"high","chat_template_kwargs":{"enable_thinking":true}}'
seed '\000{"model":"m","messages":[{"role":"user","content":"x"}],"n":4}'
seed '\000{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo=","detail":"low"}},{"type":"video","frames":["data:image/gif;base64,R0lGODlh",{"url":"data:image/webp;base64,UklGRg=="}],"timestamps":[0,1.5]}]}]}'
seed '\000{"model":"m","messages":[{"role":"user","content":[{"type":"video_url","video_url":{"url":"data:video/mp4;base64,AAAAIGZ0eXA="}},{"type":"video_url","video_url":"data:video/webm;base64,GkXfow=="},{"type":"text","text":"b"}]}]}'
seed '\001{"model":"m","prompt":["once upon"],"max_tokens":16,"echo":false,"seed":-1}'
seed '\001{"model":"m","prompt":"x","stop":null,"temperature":null}'
seed '\001{"model":"m","prompt":[[2,9259],[2,17,3]],"n":3,"echo":true,"logprobs":2,"suffix":""}'
seed '\001{"model":"m","prompt":[2,9259,1902],"n":16}'
seed '\002ab\001b\002xxa\001bb\001ab'
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
"$out/fuzz_request" -max_total_time="$secs" -rss_limit_mb=2048 -malloc_limit_mb=64 -max_len=4096 \
  -timeout=10 -artifact_prefix="$out/" -print_final_stats=1 "$corpus" > "$out/fuzz_request.log" 2>&1
rc=$?
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/fuzz_request.log" | tail -n 1)
if [ "$rc" -eq 0 ] && [ -n "$execs" ]; then
  echo "PASS fuzz_request ($execs execs in ${secs}s, $(ls "$corpus" | wc -l) corpus files)"
else
  crash=$(sed -n 's/.*Test unit written to \([^ ]*\).*/\1/p' "$out/fuzz_request.log" | tail -n 1)
  echo "FAIL fuzz_request: exit $rc${crash:+, crash file $crash (reproduce: $out/fuzz_request $crash)}"
  tail -n 40 "$out/fuzz_request.log"
  exit 1
fi
[ -z "${cases_failed:-}" ]
