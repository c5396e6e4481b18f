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

# does not fit: a report all the same, then one line on stderr and exit status 1
$PY tools/make_bad_models.py "$tmp" "$M" >/dev/null 2>&1 || { echo "FAIL info_bad_models: could not make them"; fails=1; }
err_case info_weights_do_not_fit "does not fit" info -m "$tmp/huge.gguf"
if grep -q "^plan         does not fit: model needs" "$tmp/out" && grep -q "^recommended  none" "$tmp/out"; then
  echo "PASS info_weights_do_not_fit_report"; else echo "FAIL info_weights_do_not_fit_report: $(cat "$tmp/out")"; fails=1; fi
err_case info_kv_tokens_do_not_fit "kv_tokens" info -m "$M" --kv-tokens 1000000000
err_case info_kv_tokens_below_context "one context" info -m "$M" --ctx 4096 --kv-tokens 1024
err_case info_seqs_range "--seqs" info -m "$M" --seqs 0
err_case info_needs_model "-m FILE" info
err_case info_not_gguf "magic" info -m "$tmp/notgguf.bin"
exit $fails
