#!/bin/sh
# clgemma synth for Qwen 3.6: GGUF files of the reported shapes in llama.cpp's qwen35 / qwen35moe layout, with
# ggml-vocab-qwen35.gguf (deploy/fetch_llama_ref.sh) padded to 248,320 tokens:
#   27B and 35B-A3B at full shape, q4_k_m / q8_0 / bf16, --sparse (header only): tests/synth_qwen35_check.py
#     (keys in the converter's order as the tiny converted fixtures hold them, each layer's tensor names and
#     shapes, the types of the Q4_K_M rule table derived from llama-quant.cpp, the padded vocabulary); a
#     file checked against another mix's table fails
#   both at --layers 4 (sparse): clgemma info reads them (trained context, recurrent state per sequence)
#   qwen35-tiny and qwen35-tiny-moe (same structure, width 256) at q4_k_m with data: the same checks, then
#     clgemma logits gives finite, not constant logits and a short bench runs
# Also: bad --mix and --layers give one line and exit 1.
cd "$(dirname "$0")/../.." || exit 1
CLI=build/clgemma
ref=$(sh deploy/fetch_llama_ref.sh) || { echo "FAIL synth_qwen35: deploy/fetch_llama_ref.sh could not fetch llama.cpp's reference"; exit 1; }
VOCAB=$ref/models/ggml-vocab-qwen35.gguf
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0
check() { python3 tests/synth_qwen35_check.py "$@" || fails=1; }

for model in qwen35-27b qwen35-35b-a3b; do
  for mix in q4_k_m q8_0 bf16; do
    f=$tmp/$model-$mix.gguf
    if $CLI synth $model -o "$f" --mix $mix --vocab "$VOCAB" --sparse 2>"$tmp/err"; then
      echo "PASS $model/$mix.synth ($(sed 's/.*GiB in/in/; s/(.*types:/types:/' "$tmp/err"))"
      check "$f" --mix $mix --vocab "$VOCAB" --label $model/$mix
    else
      echo "FAIL $model/$mix.synth: $(cat "$tmp/err")"; fails=1
    fi
    [ $mix = q4_k_m ] && { python3 tests/synth_qwen35_check.py "$f" --mix q8_0 --vocab "$VOCAB" >/dev/null 2>&1 &&
      { echo "FAIL $model.negative: a Q4_K_M file passed the q8_0 table"; fails=1; } || echo "PASS $model.negative"; }
    rm -f "$f"
  done
  f=$tmp/$model-4.gguf
  $CLI synth $model -o "$f" --layers 4 --vocab "$VOCAB" --sparse 2>/dev/null
  if $CLI info -m "$f" >"$tmp/info" 2>&1 && grep -q "trained context 262144" "$tmp/info" &&
     grep -q "of recurrent state per sequence" "$tmp/info"; then
    echo "PASS $model.info ($(grep '^state' "$tmp/info" | sed 's/, whatever.*//; s/^state *//'))"
  else echo "FAIL $model.info: $(head -c 400 "$tmp/info")"; fails=1; fi
  rm -f "$f"
done

for model in qwen35-tiny qwen35-tiny-moe; do
  f=$tmp/$model.gguf
  if ! $CLI synth $model -o "$f" --vocab "$VOCAB" 2>"$tmp/err"; then echo "FAIL $model.synth: $(cat "$tmp/err")"; fails=1; continue; fi
  check "$f" --mix q4_k_m --vocab "$VOCAB" --label $model
  if $CLI logits -m "$f" -p "The capital of France is" -o "$tmp/l.f32" 2>"$tmp/err" &&
     python3 -c "
import math, struct, sys
d = open(sys.argv[1], 'rb').read(); v = struct.unpack('<%df' % (len(d) // 4), d)
sys.exit(not (len(v) == 248320 and all(map(math.isfinite, v)) and max(v) - min(v) > 1e-3))" "$tmp/l.f32"
  then echo "PASS $model.logits (248,320 finite)"
  else echo "FAIL $model.logits: $(tail -c 300 "$tmp/err")"; fails=1; fi
  if $CLI bench -m "$f" -p 64 -n 8 >"$tmp/bench" 2>"$tmp/err" && grep -q decode_tok_s "$tmp/bench"; then
    echo "PASS $model.bench"
  else echo "FAIL $model.bench: $(tail -c 300 "$tmp/err")"; fails=1; fi
  rm -f "$f"
done

. tests/lib/err_case.sh
err_case q35_unknown_mix "unknown --mix" synth qwen35-tiny -o "$tmp/x.gguf" --mix q3_k --vocab "$VOCAB"
err_case q35_too_many_layers "has 1..64 layers" synth qwen35-27b --layers 65 -o "$tmp/x.gguf" --vocab "$VOCAB"
exit $fails
