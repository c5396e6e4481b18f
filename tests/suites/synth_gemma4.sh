#!/bin/sh
# clgemma synth: Gemma 4 GGUF files with llama.cpp's layout, the real vocabulary and random weights.
# For a dense (sliding/full layers, K=V), an MoE (16 experts, the fallback types of rows that are no
# whole number of 256-blocks) and an E shape (per-layer embeddings, KV sharing with the unused K/V
# weights a checkpoint carries, double-wide MLP), each at q8_0 and q4_k_m, with
# ggml-vocab-gemma-4.gguf (deploy/fetch_llama_ref.sh):
#   synth       `clgemma synth` writes it (time and MB/s on the PASS line)
#   layout ...  tests/synth_gemma4_check.py: the header equals what llama-quantize wrote for the same
#               shape (golden from llama.cpp itself), gguf-py dequantizes every block finite, and
#               clgemma loads the file as it is: logits within tolerance of the float64 reference
#               tools/ref_gemma4.py on the same weights, greedy decoding of a few tokens
# Also: the same seed gives the same bytes; bad arguments, a full disk and a write that fails half way
# give one line on stderr and exit 1, and leave no partial file.
cd "$(dirname "$0")/../.." || exit 1
CLI=build/clgemma
PY=.venv/bin/python
GOLDEN=tests/golden/synth_gemma4_layout.json
ref=$(sh deploy/fetch_llama_ref.sh) || { echo "FAIL synth_gemma4: deploy/fetch_llama_ref.sh could not fetch llama.cpp's reference"; exit 1; }
VOCAB=$ref/models/ggml-vocab-gemma-4.gguf
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0
SHORT="Hello"
LONG="The quick brown fox jumps over the lazy dog. 日本語のテキスト, then code: for (int i = 0; i < n; i++) sum += a[i];"

for model in gemma4-tiny gemma4-tiny-moe gemma4-tiny-e; do
  for mix in q8_0 q4_k_m; do
    f=$tmp/$model-$mix.gguf
    if $CLI synth $model -o "$f" --mix $mix --vocab "$VOCAB" 2>"$tmp/err"; then
      echo "PASS $model/$mix.synth ($(cat "$tmp/err"))"
      $PY tests/synth_gemma4_check.py "$f" $model/$mix --vocab "$VOCAB" --golden $GOLDEN --cli $CLI \
        --text "$SHORT" --text "$LONG" || fails=1
    else
      echo "FAIL $model/$mix.synth: $(cat "$tmp/err")"; fails=1
    fi
    rm -f "$f"
  done
done

# a seed fixes every byte; another seed changes the weights, not the layout
$CLI synth gemma4-tiny-moe -o "$tmp/a.gguf" --mix q4_k --seed 5 --vocab "$VOCAB" 2>/dev/null &&
  $CLI synth gemma4-tiny-moe -o "$tmp/b.gguf" --mix q4_k --seed 5 --vocab "$VOCAB" 2>/dev/null &&
  $CLI synth gemma4-tiny-moe -o "$tmp/c.gguf" --mix q4_k --seed 6 --vocab "$VOCAB" 2>/dev/null
if ! cmp -s "$tmp/a.gguf" "$tmp/b.gguf"; then echo "FAIL seed: the same seed wrote different files"; fails=1
elif cmp -s "$tmp/a.gguf" "$tmp/c.gguf"; then echo "FAIL seed: another seed wrote the same file"; fails=1
elif [ "$(stat -c %s "$tmp/a.gguf")" != "$(stat -c %s "$tmp/c.gguf")" ]; then echo "FAIL seed: sizes differ"; fails=1
else echo "PASS seed (same seed: same bytes; seed 6: other weights, same size)"; fi
rm -f "$tmp/a.gguf" "$tmp/b.gguf" "$tmp/c.gguf"

if $CLI synth --help 2>"$tmp/err" && grep -q "clgemma synth MODEL" "$tmp/err"; then echo "PASS help"
else echo "FAIL help: clgemma synth --help: $(head -c 300 "$tmp/err")"; fails=1; fi

. tests/lib/err_case.sh
printf 'not a gguf' > "$tmp/notgguf.bin"
err_case unknown_model "unknown model" synth gemma4-7b -o "$tmp/x.gguf" --vocab "$VOCAB"
err_case unknown_mix "unknown --mix" synth gemma4-tiny -o "$tmp/x.gguf" --mix q3_k --vocab "$VOCAB"
err_case no_model "needs a MODEL" synth -o "$tmp/x.gguf"
err_case no_output "needs -o" synth gemma4-tiny
err_case too_many_layers "has 1..6 layers" synth gemma4-tiny --layers 7 -o "$tmp/x.gguf" --vocab "$VOCAB"
err_case missing_vocab "No such file" synth gemma4-tiny -o "$tmp/x.gguf" --vocab "$tmp/none.gguf"
err_case bad_vocab "vocabulary" synth gemma4-tiny -o "$tmp/x.gguf" --vocab "$tmp/notgguf.bin"
err_case unwritable "cannot create" synth gemma4-tiny -o "$tmp/no/such/dir/x.gguf" --vocab "$VOCAB"
[ -w /dev/full ] && err_case disk_full "No space left" synth gemma4-tiny -o /dev/full --vocab "$VOCAB"
# a write that fails half way (a file size limit of a few MiB) removes the partial file
(trap '' XFSZ; ulimit -f 4096; err_case file_too_large "File too large" synth gemma4-tiny -o "$tmp/part.gguf" \
  --vocab "$VOCAB"; exit $fails) || fails=1
if [ -e "$tmp/part.gguf" ]; then echo "FAIL partial_removed: $tmp/part.gguf left behind"; fails=1
else echo "PASS partial_removed"; fi
err_case extra_model "one MODEL" synth gemma4-tiny gemma4-31b -o "$tmp/x.gguf"
exit $fails
