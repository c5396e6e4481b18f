#!/usr/bin/env python3
"""Build the tiny Gemma 4 reference fixtures and their golden outputs.

For each variant (dense, moe, e) this script
  1. builds a tiny random-weight transformers Gemma4ForCausalLM (float32) with every
     feature of that variant switched on, all weights drawn from a fixed-seed numpy RNG
     (norm weights, layer scalars and router scales randomized too);
  2. converts it with tools/hf_to_gguf.py to tests/fixtures/gemma4_<variant>.gguf (f32)
     plus _q8_0 and _q4_k copies;
  3. records with transformers (eager attention, float32) the logits at every position
     of three token sequences (one longer than the sliding window) and 8-token greedy
     continuations;
  4. re-reads every GGUF with gguf.GGUFReader and runs tools/ref_gemma4.py (float64 numpy,
     GGUF only): the f32 GGUF must match transformers (float32: max |d| <= 2e-4; float64
     transformers run in float64: <= 1e-4; it still computes RMSNorm, softmax and the RoPE
     tables in float32 internally, so that residue is float32 rounding), and the reference logits of the quantized GGUFs are stored too;
  5. writes tests/golden/gemma4_<variant>.json.

Run from the repository root:  .venv-hf/bin/python tools/gen_gemma4_fixtures.py
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import torch  # noqa: E402
from transformers import Gemma4ForCausalLM, Gemma4TextConfig  # noqa: E402

import hf_to_gguf as conv  # noqa: E402
from ref_gemma4 import Gemma4Model  # noqa: E402

S, F = "sliding_attention", "full_attention"
N_VOCAB = 512
WINDOW = 8
SEQ_LENS = (8, 19, 37)          # 8 == window, the other two run past it
N_GREEDY = 8
OUT_TYPES = ("f32", "q8_0", "q4_k")

COMMON = dict(
    vocab_size=N_VOCAB, max_position_embeddings=2048, rms_norm_eps=1e-6, sliding_window=WINDOW,
    final_logit_softcapping=30.0, tie_word_embeddings=True, hidden_activation="gelu_pytorch_tanh",
    pad_token_id=0, bos_token_id=2, eos_token_id=1,
    rope_parameters={F: {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1_000_000.0},
                     S: {"rope_type": "default", "rope_theta": 10_000.0}},
)

VARIANTS = {
    # like 31B: K=V on full layers, fewer KV heads and twice the head dim on full layers
    "dense": dict(hidden_size=256, intermediate_size=16, num_hidden_layers=4, layer_types=[S, F, S, F],
                  num_attention_heads=2, num_key_value_heads=2, head_dim=32,
                  global_head_dim=64, num_global_key_value_heads=1, attention_k_eq_v=True,
                  hidden_size_per_layer_input=0, num_kv_shared_layers=0),
    # like 26B-A4B: dense MLP + 8 experts top-2 in every layer, K=V on full layers
    "moe": dict(hidden_size=128, intermediate_size=32, num_hidden_layers=4, layer_types=[S, F, S, F],
                num_attention_heads=2, num_key_value_heads=2, head_dim=32,
                global_head_dim=64, num_global_key_value_heads=1, attention_k_eq_v=True,
                enable_moe_block=True, num_experts=8, top_k_experts=2, moe_intermediate_size=16,
                hidden_size_per_layer_input=0, num_kv_shared_layers=0),
    # like E2B: per-layer embeddings, last 2 layers share K/V, double-wide MLP on the shared layers
    "e": dict(hidden_size=128, intermediate_size=32, num_hidden_layers=5, layer_types=[S, S, F, S, F],
              num_attention_heads=2, num_key_value_heads=1, head_dim=32, global_head_dim=64,
              attention_k_eq_v=False, hidden_size_per_layer_input=32, vocab_size_per_layer_input=N_VOCAB,
              num_kv_shared_layers=2, use_double_wide_mlp=True),
}
SEEDS = {"dense": 4101, "moe": 4102, "e": 4103}


def make_model(name: str, seed: int):
    cfg = Gemma4TextConfig(**COMMON, **VARIANTS[name])
    cfg._attn_implementation = "eager"
    cfg._experts_implementation = "eager"      # the plain per-expert loop of Gemma4TextExperts.forward
    torch.manual_seed(seed)
    model = Gemma4ForCausalLM(cfg).eval()
    model.config._attn_implementation = "eager"
    model.config._experts_implementation = "eager"
    randomize(model, np.random.default_rng(seed))
    return model, cfg


def randomize(model: Gemma4ForCausalLM, rng: np.random.Generator) -> None:
    """Overwrite every parameter/buffer of the state dict deterministically."""
    sd = model.state_dict()
    with torch.no_grad():
        for name in sorted(sd):
            if name == "lm_head.weight":
                continue                                    # tied to embed_tokens
            t = sd[name]
            if name.endswith(("embed_tokens.weight", "embed_tokens_per_layer.weight")):
                v = rng.standard_normal(t.shape)
            elif name.endswith("router.proj.weight"):
                v = rng.standard_normal(t.shape) * 2.0      # decisive routing (large top-k margins)
            elif t.ndim == 1 or name.endswith("layer_scalar"):
                v = rng.uniform(0.2, 1.8, size=t.shape)     # norms, scalars, router scales: far from 1 and 0
            else:
                v = rng.standard_normal(t.shape) / np.sqrt(t.shape[-1])
            t.copy_(torch.from_numpy(np.asarray(v, dtype=np.float32)))


def decoy_shared_kv(hp: conv.Gemma4Hparams, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Real E-series checkpoints carry k_proj/v_proj/k_norm on KV-shared layers (transformers ignores
    them on load).  Put random ones into the GGUF so an engine that wrongly uses them fails."""
    extra = {}
    for il in range(hp.first_kv_shared, hp.n_layer):
        hd, nkv = hp.head_dim(il), hp.n_kv(il)
        p = f"model.layers.{il}.self_attn."
        extra[p + "k_proj.weight"] = (rng.standard_normal((nkv * hd, hp.n_embd)) / np.sqrt(hp.n_embd)).astype(np.float32)
        extra[p + "v_proj.weight"] = (rng.standard_normal((nkv * hd, hp.n_embd)) / np.sqrt(hp.n_embd)).astype(np.float32)
        extra[p + "k_norm.weight"] = rng.uniform(0.2, 1.8, size=(hd,)).astype(np.float32)
    return extra


def make_sequences(rng: np.random.Generator, vocab: conv.Vocab) -> list[list[int]]:
    first_piece = vocab.tokens.index("<0xFF>") + 1
    seqs = []
    for i, n in enumerate(SEQ_LENS):
        body = rng.integers(first_piece, N_VOCAB, size=n - 1).tolist()
        if i == 1:      # a chat-shaped opening: <bos><|turn>user\n...
            nl = vocab.tokens.index("<0x0A>")
            body[:2] = [vocab.id("<|turn>"), nl]
        seqs.append([vocab.bos] + [int(x) for x in body])
    return seqs


def hf_logits(model, tokens) -> np.ndarray:
    with torch.no_grad():
        out = model(input_ids=torch.tensor([tokens]), use_cache=False)
    return out.logits[0].double().numpy()


def hf_greedy(model, tokens, n) -> tuple[list[int], float]:
    seq, out, margin = list(tokens), [], float("inf")
    for _ in range(n):
        lg = hf_logits(model, seq)[-1]
        top2 = np.sort(lg)[-2:]
        margin = min(margin, float(top2[1] - top2[0]))
        nxt = int(np.argmax(lg))
        out.append(nxt)
        seq.append(nxt)
    return out, margin


def router_margin(model, tokens) -> float | None:
    """Smallest gap between the k-th and (k+1)-th router *logit* over all tokens and MoE layers
    (the quantity float rounding would have to overcome to change the expert choice)."""
    if not model.config.enable_moe_block:
        return None
    gaps = []

    def hook(mod, args, out):
        logits = out.double()
        srt = torch.sort(logits, dim=-1, descending=True).values
        k = model.config.top_k_experts
        gaps.append(float((srt[:, k - 1] - srt[:, k]).min()))

    hs = [layer.router.proj.register_forward_hook(hook) for layer in model.model.layers]
    hf_logits(model, tokens)
    for h in hs:
        h.remove()
    return min(gaps)


def check_dir_path(model, fixture: Path, name: str, decoys: set[str]) -> None:
    """save_pretrained -> hf_to_gguf.py CLI (safetensors directory path) must reproduce the fixture
    written from the in-memory model: same metadata, same tensors bit for bit (minus the decoys)."""
    import tempfile
    import gguf
    from ref_gemma4 import _field_value
    with tempfile.TemporaryDirectory() as td:
        model.save_pretrained(td)
        out = Path(td) / "out.gguf"
        assert conv.main([td, "--outfile", str(out), "--outtype", "f32", "--synthetic-vocab", "--name", name]) == 0
        a, b = gguf.GGUFReader(str(fixture)), gguf.GGUFReader(str(out))
        ka = {k: _field_value(f) for k, f in a.fields.items() if not k.startswith("GGUF.")}
        kb = {k: _field_value(f) for k, f in b.fields.items() if not k.startswith("GGUF.")}
        assert ka == kb, [k for k in set(ka) | set(kb) if ka.get(k) != kb.get(k)]
        ta = {t.name: t for t in a.tensors}
        tb = {t.name: t for t in b.tensors}
        decoy_names = {conv.gguf_name(d) for d in decoys}
        assert set(ta) - set(tb) == decoy_names and not set(tb) - set(ta), (set(ta) ^ set(tb))
        for n, t in tb.items():
            assert t.tensor_type == ta[n].tensor_type and list(t.shape) == list(ta[n].shape), n
            assert np.array_equal(np.asarray(t.data), np.asarray(ta[n].data)), n


def check_hf_tokenizer_path() -> None:
    """Exercise the real-checkpoint tokenizer path of hf_to_gguf.py (tokenizer.json -> model "gemma4"):
    build a HF fast BPE tokenizer (byte fallback, Gemma 4 specials) from the synthetic vocabulary,
    convert it with hf_vocab() and check token types, merges and the written GGUF keys."""
    import tempfile
    import gguf
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers
    from transformers import PreTrainedTokenizerFast
    from ref_gemma4 import _field_value
    v = conv.synthetic_spm_vocab(N_VOCAB)
    ids = {t: i for i, t in enumerate(v.tokens)}
    merges = []
    for t in v.tokens[ids["<0xFF>"] + 1:]:
        for k in range(1, len(t)):
            a, b = t[:k], t[k:]
            if len(t) > 1 and a in ids and b in ids and max(ids[a], ids[b]) < ids[t]:
                merges.append((a, b))
                break
    tk = Tokenizer(models.BPE(vocab=ids, merges=merges, byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    tk.normalizer = normalizers.Replace(" ", "\u2581")
    tk.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()])
    specials = [t for t, _ in conv.GEMMA4_SPECIALS]
    tk.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    fast = PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<bos>", eos_token="<eos>", unk_token="<unk>",
                                   pad_token="<pad>", mask_token="<mask>", extra_special_tokens=specials[5:])
    TT = gguf.TokenType
    with tempfile.TemporaryDirectory() as td:
        fast.save_pretrained(td)
        hv = conv.hf_vocab(Path(td))
        assert hv.model == "gemma4" and hv.tokens == v.tokens and len(hv.merges) == len(merges), (hv.model, len(hv.merges))
        for t, kind in conv.GEMMA4_SPECIALS:
            want = TT.USER_DEFINED if kind == "visible" else TT.CONTROL     # LlamaHfVocab types <unk> CONTROL too
            assert hv.types[ids[t]] == want, (t, hv.types[ids[t]])
        assert all(hv.types[ids[f"<0x{b:02X}>"]] == TT.BYTE for b in range(256))
        assert (hv.bos, hv.eos, hv.unk, hv.pad) == (2, 1, 3, 0)
        model, _ = make_model("dense", SEEDS["dense"])
        out = Path(td) / "tok.gguf"
        conv.convert_model(model, hv, out, "f32")
        r = gguf.GGUFReader(str(out))
        kv = {k: _field_value(f) for k, f in r.fields.items() if k.startswith("tokenizer.")}
        assert kv["tokenizer.ggml.model"] == "gemma4" and len(kv["tokenizer.ggml.merges"]) == len(merges)
        assert kv["tokenizer.ggml.add_bos_token"] is True and kv["tokenizer.ggml.add_space_prefix"] is False
    print(f"hf tokenizer path ok: {len(merges)} merges, visible tokens USER_DEFINED")


def r6(a) -> list:
    return np.round(np.asarray(a, dtype=np.float64), 6).tolist()


def margins_ok(model, vocab, seed) -> bool:
    """Reject weight draws whose expert choice or greedy argmax is a near tie anywhere in the golden
    sequences, so that an engine with ordinary float32 rounding cannot legitimately disagree."""
    rng = np.random.default_rng(seed + 1_000_000)
    for toks in make_sequences(rng, vocab):
        greedy, gm = hf_greedy(model, toks, N_GREEDY)
        rm = router_margin(model, toks + greedy)
        if gm < 0.05 or (rm is not None and rm < 2e-3):
            return False
    return True


def build_variant(name: str) -> dict:
    vocab = conv.synthetic_spm_vocab(N_VOCAB)
    seed = SEEDS[name]
    while True:
        model, cfg = make_model(name, seed)
        if margins_ok(model, vocab, seed):
            break
        print(f"{name}: seed {seed} has a near tie, trying {seed + 100}")
        seed += 100
    rng = np.random.default_rng(seed + 2_000_000)
    hp = conv.resolve_hparams(model.config.to_dict())
    extra = decoy_shared_kv(hp, rng) if hp.n_kv_shared else None

    fixtures = ROOT / "tests" / "fixtures"
    fixtures.mkdir(parents=True, exist_ok=True)
    paths, types = {}, {}
    for ot in OUT_TYPES:
        suffix = "" if ot == "f32" else f"_{ot}"
        p = fixtures / f"gemma4_{name}{suffix}.gguf"
        types[ot] = conv.convert_model(model, vocab, p, ot, name=f"gemma4-tiny-{name}", extra_state=extra)
        paths[ot] = str(p.relative_to(ROOT))

    check_dir_path(model, ROOT / paths["f32"], f"gemma4-tiny-{name}", set(extra or ()))
    seqs = make_sequences(np.random.default_rng(seed + 1_000_000), vocab)
    model64 = Gemma4ForCausalLM(cfg).eval()
    model64.load_state_dict(model.state_dict())
    model64 = model64.double()

    refs = {ot: Gemma4Model(str(ROOT / paths[ot])) for ot in OUT_TYPES}
    # the llama.cpp KV-reuse shortcut must pick the same donor as transformers on this fixture
    for il in range(hp.first_kv_shared, hp.n_layer):
        assert hp.kv_source(il) == hp.first_kv_shared - (2 if hp.is_swa[il] else 1), (name, il)
    sequences, ref_logits = [], {ot: [] for ot in OUT_TYPES}
    diff32 = diff64 = 0.0
    greedy_margin = float("inf")
    rmargin = float("inf")
    for toks in seqs:
        lg32 = hf_logits(model, toks)
        lg64 = hf_logits(model64, toks)
        greedy, gm = hf_greedy(model, toks, N_GREEDY)
        greedy_margin = min(greedy_margin, gm)
        rm = router_margin(model, toks + greedy)
        if rm is not None:
            rmargin = min(rmargin, rm)
        for ot in OUT_TYPES:
            ref_logits[ot].append(refs[ot].forward(toks))
        diff32 = max(diff32, float(np.abs(ref_logits["f32"][-1] - lg32).max()))
        diff64 = max(diff64, float(np.abs(ref_logits["f32"][-1] - lg64).max()))
        ref_greedy = refs["f32"].greedy(toks, N_GREEDY)
        assert ref_greedy == greedy, (name, ref_greedy, greedy)
        sequences.append({"tokens": toks, "logits": r6(lg32), "greedy": greedy,
                          "greedy_ref": {ot: (greedy if ot == "f32" else refs[ot].greedy(toks, N_GREEDY))
                                         for ot in OUT_TYPES}})
    assert diff32 <= 2e-4, (name, diff32)
    assert diff64 <= 1e-4, (name, diff64)
    qdiff = {ot: max(float(np.abs(a - b).max()) for a, b in zip(ref_logits[ot], ref_logits["f32"]))
             for ot in OUT_TYPES if ot != "f32"}

    trace: dict = {}
    refs["f32"].forward(seqs[0], trace=trace)
    ref_router_gap = {}
    if hp.n_expert:
        for ot in OUT_TYPES:
            tr: dict = {}
            for toks in seqs:
                refs[ot].forward(toks, trace=tr)
            ref_router_gap[ot] = tr["router_gap"]
    golden = {
        "variant": name,
        "description": {
            "dense": "31B-like: sliding+full layers, full layers with 2x head dim, 1 KV head and K=V, proportional partial RoPE",
            "moe": "26B-A4B-like: every layer has the dense MLP plus 8 experts (top-2), router scales, per-expert scales, K=V full layers",
            "e": "E2B-like: per-layer embeddings, last 2 layers reuse K/V of layers 1 (sliding) and 2 (full), double-wide MLP on them; "
                 "the GGUF also carries unused random attn_k/attn_v/attn_k_norm on the shared layers (as real checkpoints do)",
        }[name],
        "generator": "tools/gen_gemma4_fixtures.py (transformers eager float32, weight seed %d)" % seed,
        "gguf": paths,
        "tensor_types": types,
        "hf_config": {k: v for k, v in model.config.to_dict().items()
                      if k not in ("transformers_version", "architectures", "dtype", "torch_dtype")},
        "hparams": {
            "n_layer": hp.n_layer, "n_embd": hp.n_embd, "n_vocab": hp.n_vocab, "n_head": hp.n_head,
            "head_dim_swa": hp.head_dim_swa, "head_dim_full": hp.head_dim_full,
            "n_kv_per_layer": [hp.n_kv(i) for i in range(hp.n_layer)], "is_swa": hp.is_swa,
            "n_ff_per_layer": hp.n_ff, "n_kv_shared": hp.n_kv_shared,
            "kv_source_per_layer": [hp.kv_source(i) for i in range(hp.n_layer)],
            "n_embd_per_layer": hp.n_embd_per_layer, "n_expert": hp.n_expert,
            "n_expert_used": hp.n_expert_used, "n_ff_exp": hp.n_ff_exp, "sliding_window": hp.sliding_window,
            "attention_k_eq_v": hp.attention_k_eq_v, "final_logit_softcapping": hp.final_logit_softcapping,
        },
        "sequences": sequences,
        "ref_logits": {ot: [r6(x) for x in ref_logits[ot]] for ot in OUT_TYPES if ot != "f32"},
        "check": {
            "max_abs_ref_f32_vs_transformers_f32": diff32,
            "max_abs_ref_f32_vs_transformers_f64": diff64,
            "max_abs_ref_quant_vs_ref_f32": qdiff,
            "min_greedy_top1_top2_gap": greedy_margin,
            "min_router_topk_logit_gap": None if rmargin == float("inf") else rmargin,
            "min_router_topk_logit_gap_ref": ref_router_gap or None,
        },
        "trace_seq0": {
            "note": "float64 reference on the f32 GGUF for sequences[0]: scaled input embeddings and the output "
                    "of every layer (after layer_output_scale), [position][dim]",
            "inp_scaled": r6(trace["inp_scaled"]),
            "layer_out": [r6(x) for x in trace["layer_out"]],
        },
        "notes": [
            "logits: transformers float32 eager, every position, after final softcapping; rounded to 1e-6",
            "ref_logits.<type>: tools/ref_gemma4.py (float64) on the dequantized <type> GGUF",
            "greedy: 8 argmax tokens appended one at a time (full recompute each step)",
        ],
    }
    out = ROOT / "tests" / "golden" / f"gemma4_{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(golden, separators=(",", ":")) + "\n")
    sizes = {ot: os.path.getsize(ROOT / paths[ot]) for ot in OUT_TYPES}
    sizes["golden"] = out.stat().st_size
    print(f"{name}: ref-vs-hf32 {diff32:.3e}  ref-vs-hf64 {diff64:.3e}  quant {qdiff}  "
          f"greedy gap {greedy_margin:.3g}  router gap {golden['check']['min_router_topk_logit_gap']}  sizes {sizes}")
    return sizes


def main() -> int:
    torch.set_num_threads(1)
    check_hf_tokenizer_path()
    names = sys.argv[1:] or list(VARIANTS)
    total = 0
    for name in names:
        sizes = build_variant(name)
        assert sizes["f32"] < 2_000_000, sizes
        assert sum(sizes.values()) < 5_000_000, sizes
        total += sum(sizes.values())
    print(f"total bytes: {total}")
    if set(names) == set(VARIANTS):
        assert total < 15_000_000, total
    return 0


if __name__ == "__main__":
    sys.exit(main())
