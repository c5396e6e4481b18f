#!/bin/sh
# Structured output end to end on the host (issue 19): for each schema of tests/data/schemas (and
# json_object mode), N random walks (WALKS, default 200) through the constraint on the Gemma 3
# and Gemma 4 vocabularies (tools/constrain_walk, the two in parallel), each output checked by
# json.loads + jsonschema's Draft202012Validator (tests/constrain_validate.py). Prints the mask
# CPU time per step. Replay: build/tools/constrain_walk VOCAB N SEED OUTDIR SCHEMA...
cd "$(dirname "$0")/../.." || exit 1
walks=${WALKS:-200}
seed=${SEED:-$(date +%s)}
py=.venv/bin/python
[ -x "$py" ] || py=python3
make -s build/tools/constrain_walk >/dev/null || { echo "FAIL constrain_build: make build/tools/constrain_walk"; exit 1; }
g3=models/gemma-3-270m-q4_k_m.gguf
g4=.cache/llama.cpp/models/ggml-vocab-gemma-4.gguf
[ -f "$g4" ] || sh deploy/fetch_llama_ref.sh >/dev/null 2>&1
out=build/constrain; rm -rf "$out"; mkdir -p "$out/gemma3" "$out/gemma4"
echo "seed $seed, $walks walks per schema"
rc=0
build/tools/constrain_walk "$g3" "$walks" "$seed" "$out/gemma3" tests/data/schemas/*.json - > "$out/gemma3.log" 2> "$out/gemma3.err" &
p3=$!
build/tools/constrain_walk "$g4" "$walks" "$seed" "$out/gemma4" tests/data/schemas/*.json - > "$out/gemma4.log" 2> "$out/gemma4.err"
r4=$?
wait $p3; r3=$?
for v in gemma3 gemma4; do
  grep '^FAIL' "$out/$v.log"
  eval r=\$r${v#gemma}
  if [ "$r" -ne 0 ]; then echo "FAIL constrain_walk_$v: exit $r"; head -n 5 "$out/$v.err"; rc=1; fi
  sed -n 's/^all schemas: /mask time '"$v"': /p' "$out/$v.log"
  "$py" tests/constrain_validate.py tests/data/schemas "$out/$v" "$v" || rc=1
done
exit $rc
