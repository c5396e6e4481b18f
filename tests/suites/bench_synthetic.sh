#!/bin/sh
# bench --synthetic: random weights of a real Gemma 4 shape made on the device. Each case must
# exit 0, print one JSON line that parses with the right "model", tok/s > 0, and pass the
# engine's output check (finite logits after prefill + decode). Bad names fail with one line.
# PoCL runs with 8 GiB of device memory, so a buffer may hold 2 GiB at most on every machine
# (PoCL makes CL_DEVICE_MAX_MEM_ALLOC_SIZE the power of two >= a quarter of the memory it sees,
# which depends on the host's free memory: 2, 4 or 8 GiB); other drivers ignore the variable.
cd "$(dirname "$0")/../.." || exit 1
export POCL_MEMORY_LIMIT=8
CLI=build/clgemma
PY=.venv/bin/python; [ -x "$PY" ] || PY=python3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0
bench() { # name, expected model, extra stderr word, args...
  name=$1; model=$2; word=$3; shift 3
  start=$(date +%s)
  $CLI bench "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?
  secs=$(( $(date +%s) - start ))
  why=""
  if [ "$rc" -ne 0 ]; then why="exit status $rc: $(tail -c 300 "$tmp/err")"
  elif ! grep -q "logits finite" "$tmp/err"; then why="no output check line: $(tail -c 300 "$tmp/err")"
  elif [ -n "$word" ] && ! grep -q -- "$word" "$tmp/err"; then why="'$word' not on stderr: $(head -c 300 "$tmp/err")"
  else
    why=$("$PY" - "$tmp/out" "$model" <<'EOF'
import json, math, sys
lines = [l for l in open(sys.argv[1]) if l.strip()]
if len(lines) != 1: print("expected one JSON line, got %d" % len(lines)); sys.exit()
try: j = json.loads(lines[0])
except Exception as e: print("JSON does not parse: %s" % e); sys.exit()
if j.get("model") != sys.argv[2]: print("model is %r, expected %r" % (j.get("model"), sys.argv[2])); sys.exit()
for k in ("prefill_tok_s", "decode_tok_s"):
    v = j.get(k)
    if not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0: print("%s = %r" % (k, v)); sys.exit()
EOF
)
  fi
  if [ -n "$why" ]; then echo "FAIL $name: $why"; fails=1
  else echo "PASS $name (${secs}s: $(cat "$tmp/out"))"; fi
}
. tests/lib/err_case.sh
# the whole E2B (35 layers, PLE, KV sharing, double-wide MLP) at its real size; its per-layer
# token embeddings (2,380 MiB at q8_0, over the 2 GiB max allocation) stay in host memory
bench e2b_q8_0_full "synthetic gemma4-e2b q8_0" "q8_0.*(+ 2.32 GiB in host memory)" \
  --synthetic gemma4-e2b --type q8_0 -p 16 -n 4 -r 1
# 26B-A4B layers (MoE, K=V full layer, Q5_0 fallback for rows of 2112/704), two sequences
bench moe_q4_k_b2 "synthetic gemma4-26b-a4b q4_k (2 layers)" "q5_0 .*(ffn_down" \
  --synthetic gemma4-26b-a4b --type q4_k --layers 2 -p 12 -n 3 -r 1 -b 2
# E4B layers in bf16
bench e4b_bf16 "synthetic gemma4-e4b bf16 (2 layers)" "bf16" --synthetic gemma4-e4b --type bf16 --layers 2 -p 8 -n 2 -r 1
# --profile: per-kind and per-shape launch times read after each step; the tables must add up
bench profile_e4b "synthetic gemma4-e4b q8_0 (2 layers)" "launch shapes" \
  --synthetic gemma4-e4b --type q8_0 --layers 2 -p 8 -n 3 -r 1 --profile
why=$("$PY" - "$tmp/err" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
parts = text.split("profile: ")[1:]
if len(parts) != 2 or not parts[0].startswith("prefill") or not parts[1].startswith("decode, batch 1, 3 steps"):
    print("expected a prefill and a 3-step decode profile"); sys.exit()
row = r"^\S.*? +([0-9.]+) +[0-9.]+% +([0-9]+) "
for p in parts:
    kinds, shapes = p.split("kernel time")[0], p.split("launch shapes")[-1]
    kr = [(float(a), int(b)) for a, b in re.findall(row, kinds, re.M)]
    m = re.search(r"kernel time ([0-9.]+) ms, wall ([0-9.]+) ms over ([0-9]+) steps: ([0-9]+) launches", p)
    w = re.search(r"wall: kernels ([0-9.]+)%, device idle between a step's kernels ([0-9.]+)% .*?"
                  r"outside the steps' device spans \(host between steps\) (-?[0-9.]+)%", p)
    if not (kr and m and w): print("a profile lacks its table or totals: %r" % p[:200]); sys.exit()
    total, launches = float(m.group(1)), int(m.group(4))
    if abs(sum(a for a, _ in kr) - total) > 0.01 * total + 0.01 or sum(b for _, b in kr) != launches:
        print("kinds add to %.3f ms / %d launches, totals say %.3f / %d" %
              (sum(a for a, _ in kr), sum(b for _, b in kr), total, launches)); sys.exit()
    k, idle, out = (float(w.group(i)) for i in (1, 2, 3))
    if k <= 0 or idle < 0 or k + idle + out > 100.5:
        print("wall shares %.1f + %.1f + %.1f" % (k, idle, out)); sys.exit()
    sh = [(float(a), int(b)) for a, b in re.findall(row, shapes, re.M)]
    if not sh or sum(a for a, _ in sh) > total * 1.01 + 0.01 or sum(b for _, b in sh) > launches:
        print("shapes add to %.3f ms of %.3f" % (sum(a for a, _ in sh), total)); sys.exit()
EOF
)
if [ -n "$why" ]; then echo "FAIL profile_tables: $why"; fails=1; else echo "PASS profile_tables"; fi
# --hold: each step's launches wait behind a gate opened once all are enqueued, and device_ms_per_step
# times them alone (0 without --hold); LAUNCH_TWICE=N enqueues kind N - 1 (here 39: mvq) twice, a
# timing knob whose doubled launches must leave the step running and finite
hold_ms() { "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["device_ms_per_step"])' "$tmp/out"; }
bench hold_e4b "synthetic gemma4-e4b q8_0 (2 layers)" "" \
  --synthetic gemma4-e4b --type q8_0 --layers 2 -p 8 -n 3 -r 1 --hold --set LAUNCH_TWICE=39
held=$(hold_ms)
bench nohold_e4b "synthetic gemma4-e4b q8_0 (2 layers)" "" --synthetic gemma4-e4b --type q8_0 --layers 2 -p 8 -n 3 -r 1
free=$(hold_ms)
if awk -v h="$held" -v f="$free" 'BEGIN { exit !(h > 0 && f == 0) }'; then echo "PASS hold_device_time ($held ms held, $free unheld)"
else echo "FAIL hold_device_time: device_ms_per_step $held with --hold, $free without"; fails=1; fi
err_case launch_twice_range "LAUNCH_TWICE takes a whole number from 0 to 255" \
  bench --synthetic gemma4-e4b --type q8_0 --layers 2 -p 8 -n 3 -r 1 --set LAUNCH_TWICE=256
# LAUNCH_EMPTY=N runs an empty kernel in place of kind N - 1 (here 11: norm_fuse, which PoCL runs too):
# the step still runs; kinds that write indices other launches read are refused by name
bench launch_empty "synthetic gemma4-e4b q8_0 (2 layers)" "" \
  --synthetic gemma4-e4b --type q8_0 --layers 2 -p 8 -n 3 -r 1 --hold --set LAUNCH_EMPTY=11
err_case launch_empty_indices "setting 'LAUNCH_EMPTY=8': argmax writes indices" \
  bench --synthetic gemma4-e4b --type q8_0 --layers 2 -p 8 -n 3 -r 1 --set LAUNCH_EMPTY=8
err_case unknown_model "unknown synthetic model" bench --synthetic gemma4-7b --type q8_0
err_case unknown_type "unknown synthetic weight type" bench --synthetic gemma4-e2b --type q3_k
err_case not_bench "only for bench" generate --synthetic gemma4-e2b -p hi
err_case layers_too_many "exceeds" bench --synthetic gemma4-26b-a4b --layers 31
# a device tensor over the max allocation is refused at load, naming it (31B token_embd in bf16:
# 2,688 MiB; on PoCL only, where the limit above holds)
if ! $CLI devices | grep -q "\[GPU"; then
  err_case over_max_alloc "token_embd.weight.*max allocation 2048.0 MiB" bench --synthetic gemma4-31b --type bf16 --layers 1
fi
exit $fails
