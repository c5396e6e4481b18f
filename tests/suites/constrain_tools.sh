#!/bin/sh
# Tool calls constrained to Gemma 4's own syntax end to end on the host: for each tools array of
# tests/data/tools, N random walks (WALKS, default 200) through constraint_create_tool_calls on the
# tiny fixture vocabulary and the real 262k Gemma 4 vocabulary (tools/constrain_walk --tools, the
# two in parallel), in three modes: required (one call of any function), parallel (1..8 calls) and
# named (tool_choice naming get_time in several.json). Each output is parsed by an independent
# Python parser of the call syntax and checked with jsonschema (tests/tool_calls_validate.py).
# Prints the mask CPU time per step. Replay: build/tools/constrain_walk VOCAB N SEED OUTDIR TOOLS... --tools
cd "$(dirname "$0")/../.." || exit 1
walks=${WALKS:-200}
seed=${SEED:-$(date +%s)}
py=.venv/bin/python
[ -x "$py" ] || py=python3
make -s build/tools/constrain_walk >/dev/null || { echo "FAIL constrain_tools_build: make build/tools/constrain_walk"; exit 1; }
fx=tests/fixtures/gemma4_dense.gguf
g4=.cache/llama.cpp/models/ggml-vocab-gemma-4.gguf
[ -f "$g4" ] || sh deploy/fetch_llama_ref.sh >/dev/null 2>&1
out=build/constrain_tools; rm -rf "$out"
echo "seed $seed, $walks walks per tools array and mode"
# walks VOCAB LABEL: the three modes on one vocabulary, one after the other
walks() {
  mkdir -p "$out/$2/required" "$out/$2/parallel" "$out/$2/named"
  build/tools/constrain_walk "$1" "$walks" "$seed" "$out/$2/required" tests/data/tools/*.json --tools > "$out/$2-required.log" 2> "$out/$2.err" &&
  build/tools/constrain_walk "$1" "$walks" "$seed" "$out/$2/parallel" tests/data/tools/*.json --tools --parallel > "$out/$2-parallel.log" 2>> "$out/$2.err" &&
  build/tools/constrain_walk "$1" "$walks" "$seed" "$out/$2/named" tests/data/tools/several.json --tools --only get_time > "$out/$2-named.log" 2>> "$out/$2.err"
}
walks "$fx" fixture & pf=$!
walks "$g4" gemma4; r4=$?
wait $pf; rf=$?
rc=0
for v in fixture gemma4; do
  if [ "$v" = fixture ]; then r=$rf; else r=$r4; fi
  if [ "$r" -ne 0 ]; then echo "FAIL constrain_tools_walk_$v: exit $r"; head -n 5 "$out/$v.err"; rc=1; fi
  for m in required parallel named; do
    grep -h '^FAIL' "$out/$v-$m.log" 2>/dev/null
    sed -n 's/^all schemas: /mask time '"$v $m"': /p' "$out/$v-$m.log" 2>/dev/null
    opt=; [ "$m" = parallel ] && opt=--parallel; [ "$m" = named ] && opt="--only get_time"
    "$py" tests/tool_calls_validate.py tests/data/tools "$out/$v/$m" "${v}_$m" $opt || rc=1
  done
done
exit $rc
