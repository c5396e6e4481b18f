#!/usr/bin/env python3
"""check_synth_convert.py - `clgemma synth --mix bf16|f32` against llama.cpp's own converter.

  .venv-hf/bin/python tools/check_synth_convert.py [--cli build/clgemma] [--vocab VOCAB.gguf]

For each test shape (gemma4-tiny, gemma4-tiny-moe, gemma4-tiny-e) a transformers Gemma4ForCausalLM
of the same configuration (random weights) is saved and converted by llama.cpp's
convert_hf_to_gguf.py (.cache/llama.cpp, from deploy/fetch_llama_ref.sh) with --outtype bf16 and
f32; its metadata (keys, value types, values and order; general.name and the converter's
general.size_label aside) and its tensors (names, ggml types, shapes) must equal
`clgemma synth SHAPE --mix bf16|f32`'s. Two things are left out of the conversion: the vocabulary
(set_vocab is skipped: the tokenizer.* keys of synth files are a byte copy of VOCAB, checked by
tests/synth_gemma4_check.py) and the order of the tensors (the converter follows the checkpoint's,
synth llama-quantize's). transformers builds no K/V weights for KV-shared layers while published
checkpoints carry them (its _keys_to_ignore_on_load_unexpected drops them on load), so the K/V
tensors of shared layers that synth writes are expected to be missing from the conversion.
Prints one PASS/FAIL line per shape and type.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import gguf_layout  # noqa: E402

LLAMA = os.path.join(ROOT, ".cache", "llama.cpp")
# the configurations of synth_gguf.c's test shapes, as transformers spells them
COMMON = dict(vocab_size=262144, vocab_size_per_layer_input=262144, hidden_size=256, num_attention_heads=2,
              head_dim=128, global_head_dim=256, sliding_window=16, max_position_embeddings=4096,
              final_logit_softcapping=30.0, tie_word_embeddings=True)
SW, FU = "sliding_attention", "full_attention"
SHAPES = {
    "gemma4-tiny": dict(num_hidden_layers=6, num_key_value_heads=2, num_global_key_value_heads=1,
                        attention_k_eq_v=True, intermediate_size=512, hidden_size_per_layer_input=0,
                        layer_types=[SW, SW, FU] * 2),
    "gemma4-tiny-moe": dict(num_hidden_layers=4, num_key_value_heads=2, num_global_key_value_heads=1,
                            attention_k_eq_v=True, intermediate_size=352, enable_moe_block=True, num_experts=16,
                            top_k_experts=4, moe_intermediate_size=96, hidden_size_per_layer_input=0,
                            layer_types=[SW, FU] * 2),
    "gemma4-tiny-e": dict(num_hidden_layers=4, num_key_value_heads=1, intermediate_size=256,
                          use_double_wide_mlp=True, hidden_size_per_layer_input=64, num_kv_shared_layers=2,
                          layer_types=[SW, FU] * 2),
}
CONVERT = r"""
import sys
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[1] + "/gguf-py")
import convert_hf_to_gguf
import conversion.gemma
conversion.gemma.Gemma4Model.set_vocab = lambda self: None  # the vocabulary is synth's byte copy
sys.argv = ["convert_hf_to_gguf.py", sys.argv[2], "--outfile", sys.argv[3], "--outtype", sys.argv[4]]
convert_hf_to_gguf.main()
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "clgemma"))
    ap.add_argument("--vocab", default=os.path.join(LLAMA, "models", "ggml-vocab-gemma-4.gguf"))
    a = ap.parse_args()
    import torch
    from transformers import Gemma4ForCausalLM, Gemma4TextConfig
    fails = 0
    with tempfile.TemporaryDirectory() as tmp:
        for shape, cfg in SHAPES.items():
            hf = os.path.join(tmp, shape)
            torch.manual_seed(0)
            Gemma4ForCausalLM(Gemma4TextConfig(**COMMON, **cfg)).save_pretrained(hf, safe_serialization=True)
            # the converter only counts the tokens of tokenizer.json (to trim token_embd)
            with open(os.path.join(hf, "tokenizer.json"), "w") as f:
                json.dump({"model": {"vocab": {"t%d" % i: i for i in range(262144)}}, "added_tokens": []}, f)
            for mix in ("bf16", "f32"):
                conv, ours = os.path.join(tmp, "conv.gguf"), os.path.join(tmp, "ours.gguf")
                p = subprocess.run([sys.executable, "-c", CONVERT, LLAMA, hf, conv, mix], stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT)
                q = subprocess.run([a.cli, "synth", shape, "-o", ours, "--mix", mix, "--vocab", a.vocab],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                why = ""
                if p.returncode:
                    why = "convert_hf_to_gguf.py failed: %s" % p.stdout.decode()[-300:]
                elif q.returncode:
                    why = "clgemma synth failed: %s" % q.stderr.decode().strip()
                else:
                    A, B = gguf_layout.read(conv), gguf_layout.read(ours)
                    ka = [kv[:4] for kv in A.kvs if kv[0] not in ("general.name", "general.size_label")]
                    kb = [kv[:4] for kv in B.kvs if not kv[0].startswith("tokenizer.") and kv[0] != "general.name"]
                    ta = {n: (t, ne) for n, t, ne, _ in A.tensors}
                    tb = {n: (t, ne) for n, t, ne, _ in B.tensors}
                    first_shared = cfg["num_hidden_layers"] - cfg.get("num_kv_shared_layers", 0)
                    decoys = {n for n in tb if gguf_layout.layer_of(n) >= first_shared and
                              n.split(".", 2)[2] in ("attn_k.weight", "attn_v.weight", "attn_k_norm.weight")}
                    if ka != kb:
                        diff = next((x, y) for x, y in zip(ka + [None], kb + [None]) if x != y)
                        why = "metadata differs: converter %s, synth %s" % diff
                    elif set(ta) != set(tb) - decoys:
                        why = "tensors only in the conversion: %s; only in synth: %s" % (
                            sorted(set(ta) - set(tb)), sorted(set(tb) - decoys - set(ta)))
                    else:
                        bad = [(n, ta[n], tb[n]) for n in ta if ta[n] != tb[n]]
                        why = "type/shape differs: %s" % bad[:3] if bad else ""
                    detail = "%d keys, %d tensors equal (+%d K/V weights of shared layers only in synth)" % (
                        len(ka), len(ta), len(decoys))
                name = "convert.%s.%s" % (shape, mix)
                if why:
                    fails += 1
                    print("FAIL %s: %s" % (name, why))
                else:
                    print("PASS %s (%s)" % (name, detail))
                sys.stdout.flush()
    print("%d failed" % fails)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
