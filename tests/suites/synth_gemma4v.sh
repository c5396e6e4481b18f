#!/bin/sh
# clgemma synth gemma4v-*: Gemma 4 vision projectors (mmproj) with llama.cpp's converter layout and random
# weights, and clgemma vbench on them (docs/design-vision.md 2, 6):
#   layout.tiny, layout.tiny-e  the header equals that of the projector llama.cpp's converter wrote for the same
#                  tower (tests/fixtures/gemma4_vision_mmproj_f16.gguf at f16; _clipped.gguf, clamps on every
#                  product, at f32): keys with their order, types and values, tensor names, order, shapes and types
#                  (general.name and its labels, and the position table's rows, aside)
#   shape.*        the reported towers at full size (--sparse: header only): the keys, the projection of the
#                  paired text model's width, the tensor count and types
#   pair.*         vbench loads the projector beside `clgemma synth gemma4-tiny` / `gemma4-tiny-e` (the real
#                  vocabulary), encodes 70-token images alone and two at once and steps 1-image prompts; it fails
#                  unless the logits after the image are finite
#   llama.*        llama.cpp's own mtmd (.venv-ref) loads the same pair, reads vbench's PNG as exactly 70 tokens
#                  and encodes it to finite rows of the text width (when .venv-ref is there)
#   errors         a projector of another width is refused by the pair check; a text mix, too many layers: one line
cd "$(dirname "$0")/../.." || exit 1
CLI=build/clgemma
ref=$(sh deploy/fetch_llama_ref.sh) || { echo "FAIL synth_gemma4v: deploy/fetch_llama_ref.sh could not fetch llama.cpp's reference"; exit 1; }
VOCAB=$ref/models/ggml-vocab-gemma-4.gguf
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0

# layout NAME SYNTH FIXTURE: the two headers, equal but for the names and the position table's rows
layout() {
  if python3 - "$2" "$3" <<'PY'; then echo "PASS layout.$1"; else fails=1; fi
import sys
sys.path.insert(0, "tools")
import gguf_layout
a, b = (gguf_layout.read(p) for p in sys.argv[1:3])
skip = {"general.name", "general.finetune", "general.basename", "general.size_label"}
ka = [k[:4] for k in a.kvs if k[0] not in skip]
kb = [k[:4] for k in b.kvs if k[0] not in skip]
rows = lambda L: [(n, t, ne[:1] + ne[2:] if n == "v.position_embd.weight" else ne) for n, t, ne, _ in L.tensors]
ta, tb = rows(a), rows(b)
bad = [f"key {x} != {y}" for x, y in zip(ka, kb) if x != y] + [f"tensor {x} != {y}" for x, y in zip(ta, tb) if x != y]
if len(ka) != len(kb) or len(ta) != len(tb):
    bad.append(f"{len(ka)} keys / {len(ta)} tensors, the converter's {len(kb)} / {len(tb)}")
if bad:
    print(f"FAIL layout.{sys.argv[1].split('/')[-1]}: " + "; ".join(bad[:4]))
    sys.exit(1)
PY
}

for m in gemma4v-tiny gemma4v-tiny-e; do
  case $m in gemma4v-tiny) mix=f16 fix=tests/fixtures/gemma4_vision_mmproj_f16.gguf ;;
             *) mix=f32 fix=tests/fixtures/gemma4_vision_mmproj_clipped.gguf ;; esac
  if $CLI synth $m -o "$tmp/$m.gguf" --mix $mix 2>"$tmp/err"; then layout ${m#gemma4v-} "$tmp/$m.gguf" $fix
  else echo "FAIL layout.${m#gemma4v-}: $(cat "$tmp/err")"; fails=1; fi
done

# shape.MODEL EMBD LAYERS HEADS FF PROJ TENSORS TYPES: the reported towers' keys and tensor table
shape() {
  f=$tmp/$1.gguf
  if ! $CLI synth $1 -o "$f" --sparse 2>"$tmp/err"; then echo "FAIL shape.$1: $(cat "$tmp/err")"; fails=1; return; fi
  got=$(python3 - "$f" <<'PY'
import sys
sys.path.insert(0, "tools")
import gguf_layout
L = gguf_layout.read(sys.argv[1])
kv = {k[0]: k[3] for k in L.kvs}
v = "clip.vision."
types = sorted({gguf_layout.TYPE_NAMES[t] for _, t, _, _ in L.tensors})
print(kv[v + "embedding_length"], kv[v + "block_count"], kv[v + "attention.head_count"], kv[v + "feed_forward_length"],
      kv[v + "projection_dim"], len(L.tensors), ",".join(types))
PY
)
  want="$2 $3 $4 $5 $6 $7 $8"
  if [ "$got" = "$want" ]; then echo "PASS shape.$1 ($got)"; else echo "FAIL shape.$1: $got, expected $want"; fails=1; fi
  rm -f "$f"
}
# 31B / 26B: 27 layers of 13 tensors, the projection, patches, positions, std bias and scale; E: 16 layers with
# four clamps on each of 7 products, no standardize
shape gemma4v-31b 1152 27 16 4304 5376 356 F16,F32
shape gemma4v-26b-a4b 1152 27 16 4304 2816 356 F16,F32
shape gemma4v-e4b 768 16 12 3072 2560 659 F16,F32
shape gemma4v-e2b 768 16 12 3072 1536 659 F16,F32

# the pairs: vbench on PoCL-sized runs (one repetition, two images at once)
for p in tiny tiny-e; do
  if ! $CLI synth gemma4-$p -o "$tmp/text-$p.gguf" --mix q8_0 --vocab "$VOCAB" 2>"$tmp/err"; then
    echo "FAIL pair.$p: $(cat "$tmp/err")"; fails=1; continue
  fi
  [ -f "$tmp/gemma4v-$p.gguf" ] || $CLI synth gemma4v-$p -o "$tmp/gemma4v-$p.gguf" 2>/dev/null
  if $CLI vbench -m "$tmp/text-$p.gguf" --mmproj "$tmp/gemma4v-$p.gguf" --image-tokens 70 -r 1 -b 2 \
       -o "$tmp/vb.json" --save-images "$tmp/img" >"$tmp/out" 2>"$tmp/err" &&
     grep -q '^| 70 | 480x336 (70) |' "$tmp/out" && grep -q '"ttft_ms"' "$tmp/vb.json" &&
     grep -q 'logits after an image finite' "$tmp/err"; then
    echo "PASS pair.$p ($(grep '^| 70' "$tmp/out"))"
  else
    echo "FAIL pair.$p: $(tail -n 2 "$tmp/err") $(cat "$tmp/out")"; fails=1
  fi
done

if [ -x .venv-ref/bin/python ] && [ -f "$tmp/img/vbench-70-0.png" ]; then
  .venv-ref/bin/python tools/check_synth_mmproj.py "$tmp/text-tiny.gguf" "$tmp/gemma4v-tiny.gguf" \
    "$tmp/img/vbench-70-0.png" 70 --bidirectional 1 >"$tmp/out" 2>&1
  rc=$?
  sed 's/^\(PASS\|FAIL\) /\1 llama./' "$tmp/out" | grep -E '^(PASS|FAIL) '
  [ $rc -eq 0 ] || { fails=1; grep -qE '^FAIL ' "$tmp/out" || echo "FAIL llama: $(tail -n 3 "$tmp/out")"; }
else
  echo "PASS llama (skipped: no .venv-ref)"
fi

. tests/lib/err_case.sh
$CLI synth gemma4v-e2b --layers 1 --sparse -o "$tmp/e2b.gguf" 2>/dev/null
err_case pair_width "projection_dim 1536 is not the text model's embedding width 256" \
  vbench -m "$tmp/text-tiny.gguf" --mmproj "$tmp/e2b.gguf" --image-tokens 70 -r 1 -b 1
err_case text_mix "unknown --mix 'q8_0' for a vision projector" synth gemma4v-tiny --mix q8_0 -o "$tmp/x.gguf"
err_case too_many_layers "has 1..27 layers" synth gemma4v-31b --layers 28 -o "$tmp/x.gguf"
err_case bad_budget "give up to 5 of 70, 140, 280, 560, 1120" vbench --image-tokens 100 --save-images "$tmp/img"
err_case no_mmproj "needs -m FILE and --mmproj FILE" vbench -m "$tmp/text-tiny.gguf"
exit $fails
