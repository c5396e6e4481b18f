#!/bin/sh
# `clgemma info` (issue 20 item 6): the fit report read from the file's metadata and the device's
# memory, nothing loaded. tests/cli_info_check.py recomputes every figure from the GGUF's
# hyperparameters; the literal lines below are the same arithmetic written out by hand. A model that
# does not fit is a report with exit status 1 and one stderr line saying so.
cd "$(dirname "$0")/../.." || exit 1
M=models/gemma-3-270m-q4_k_m.gguf
G4=tests/fixtures/gemma4_dense.gguf
CLI=build/clgemma
PY=.venv/bin/python
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0
. tests/lib/err_case.sh
check() { $PY tests/cli_info_check.py "$@" || fails=1; }
has() { # name, file, fixed text
  if grep -qF -- "$3" "$2"; then echo "PASS $1"; else echo "FAIL $1: no '$3' in: $(cat "$2")"; fails=1; fi
}

check info_gemma3_default "$M"
check info_gemma3_ctx_seqs "$M" --ctx 1024 --seqs 3
check info_gemma4_dense "$G4"
check info_gemma4_dense_small "$G4" --ctx 256 --seqs 2 --max-batch 64
check info_gemma4_shared_kv tests/fixtures/gemma4_e.gguf --ctx 512
check info_gemma3_kv_q8_0 "$M" --kv-type q8_0
check info_gemma3_kv_q4 "$M" --ctx 4096 --kv-type q4
check info_gemma4_kv_q4_0 "$G4" --ctx 256 --seqs 2 --kv-type q4_0

# Gemma 3 270M: 18 layers, 1 KV head x 256 dims, K and V in halves: 2 x 2 x 256 = 1024 bytes per layer
# and token; every 6th layer full (5, 11, 17), window 512 + chunk 512 - 1 = 1023 keys = 32 blocks of 32
$CLI info -m "$M" > "$tmp/g3" 2>&1
has info_gemma3_full_bytes "$tmp/g3" "kv full      3 layers: 3072 bytes per token"
has info_gemma3_ring "$tmp/g3" "kv sliding   15 layers, window 512: 15360 bytes per token of a ring of 1024 tokens, 15728640 bytes per sequence"
# at --ctx 1024 the ring would hold the whole context: every layer is full, 18 x 1024 bytes
$CLI info -m "$M" --ctx 1024 > "$tmp/g3c" 2>&1
has info_gemma3_ring_spans_context "$tmp/g3c" "kv full      18 layers: 18432 bytes per token"
# Gemma 4 fixture: layers 0, 1 slide (2 KV heads x 32) = 256 bytes each, layer 2 full (1 x 64) = 256;
# window 8 + chunk 512 - 1 = 519 keys = 17 blocks = 544 tokens, x 512 bytes = 278528 per sequence
$CLI info -m "$G4" > "$tmp/g4" 2>&1
has info_gemma4_full_bytes "$tmp/g4" "kv full      1 layers: 256 bytes per token"
has info_gemma4_ring "$tmp/g4" "kv sliding   2 layers, window 8: 512 bytes per token of a ring of 544 tokens, 278528 bytes per sequence"

# a quantized cache (--kv-type): per 32 values q8_0 keeps 32 int8 and an f16 scale (34 bytes), q4 16
# bytes of nibbles and the scale (18) where f16 takes 64: 3 full layers x 2 x 256 x 34 / 32 = 1632
# bytes per token, x 18 / 32 = 864; the same room holds 64 / 34 = 1.88x and 64 / 18 = 3.56x the tokens
$CLI info -m "$M" --kv-type q8_0 > "$tmp/g3q8" 2>&1
$CLI info -m "$M" --kv-type q4 > "$tmp/g3q4" 2>&1
has info_gemma3_kv_q8_0_bytes "$tmp/g3q8" "kv full      3 layers: 1632 bytes per token"
has info_gemma3_kv_q4_bytes "$tmp/g3q4" "kv full      3 layers: 864 bytes per token"
has info_gemma3_kv_q8_0_ring "$tmp/g3q8" "kv sliding   15 layers, window 512: 8160 bytes per token of a ring of 1024 tokens, 8355840 bytes per sequence"
room() { sed -n 's/^room holds   \([0-9]*\) tokens.*/\1/p' "$1"; }
f16=$(room "$tmp/g3"); q8=$(room "$tmp/g3q8"); q4=$(room "$tmp/g3q4")
if [ -n "$f16" ] && [ $((q8 * 100 / f16)) -ge 185 ] && [ $((q4 * 100 / f16)) -ge 340 ]; then
  echo "PASS info_kv_type_room_tokens ($f16 f16, $q8 q8_0, $q4 q4)"
else echo "FAIL info_kv_type_room_tokens: $f16 f16, $q8 q8_0, $q4 q4 tokens"; fails=1; fi

# does not fit: a report all the same, then one line on stderr and exit status 1
$PY tools/make_bad_models.py "$tmp" "$M" >/dev/null 2>&1 || { echo "FAIL info_bad_models: could not make them"; fails=1; }
err_case info_weights_do_not_fit "does not fit" info -m "$tmp/huge.gguf"
if grep -q "^plan         does not fit: model needs" "$tmp/out" && grep -q "^recommended  none" "$tmp/out"; then
  echo "PASS info_weights_do_not_fit_report"; else echo "FAIL info_weights_do_not_fit_report: $(cat "$tmp/out")"; fails=1; fi
err_case info_kv_tokens_do_not_fit "kv_tokens" info -m "$M" --kv-tokens 1000000000
err_case info_kv_tokens_below_context "one context" info -m "$M" --ctx 4096 --kv-tokens 1024
err_case info_seqs_range "--seqs" info -m "$M" --seqs 0
err_case info_kv_type_unknown "--kv-type" info -m "$M" --kv-type q5
err_case info_needs_model "-m FILE" info
err_case info_not_gguf "magic" info -m "$tmp/notgguf.bin"
exit $fails
