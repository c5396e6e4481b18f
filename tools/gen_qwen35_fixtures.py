#!/usr/bin/env python3
"""Build the tiny Qwen 3.5 fixtures with llama.cpp's own converter and quantizer, and their references.

For each variant (dense, moe; see VARIANTS and docs/design-qwen35.md section 6.1) this script
  1. builds a tiny random-weight transformers Qwen3_5ForCausalLM / Qwen3_5MoeForCausalLM (float32; what
     transformers initialises to constants is randomized too: norm weights, gated-norm weights, A_log, dt_bias,
     the shared-expert gate) and saves it with save_pretrained next to the truncated real Qwen tokenizer of
     tools/qwen35_fixture_vocab.py;
  2. converts that directory with llama.cpp's convert_hf_to_gguf.py (.cache/llama.cpp, its own gguf-py, --no-mtp)
     to f32, bf16 and q8_0, and quantizes the bf16 file to Q4_K_M with llama.cpp's llama_model_quantize
     (tools/llamacpp_gemma4_ref.py in .venv-ref).  Only COMMITTED types go to tests/fixtures/qwen35_<variant>_<type>
     (the f32 file without suffix); the others are written to .cache/qwen35_fixtures/ and only serve the checks
     below (the tree the GPU machine receives must stay small: docs/design-qwen35.md section 6.1).
     The converter names the pre-tokenizer by hashing the token ids of a test text, which only the full
     vocabulary reproduces; a truncated one gets "qwen35" here after its split regex is checked to be Qwen's;
  3. checks each file's keys and tensors against the design (section 2) and computes references for three token
     sequences (8 random tokens and two hand-rendered chat prompts of 72-73 tokens: past one 64-token chunk):
       * tools/ref_qwen35.py (float64 numpy from the GGUF alone; recurrent and chunked scans asserted equal);
       * transformers float32 on the original weights and on each file's weights (dequantized and mapped back
         through the converter's transforms); asserted within HF_VS_REF_MAX of the float64 reference;
       * llama.cpp (llama-cpp-python 0.3.36, CPU) on each file: logits at every position, its own greedy
         continuation, and the logits after the reference's greedy tokens: where the reference's top-1/top-2
         margin exceeds twice llama.cpp's largest |delta logit| on that row, llama.cpp's argmax must be the
         reference's token (asserted); its tokenization of the chat texts must give the sequences;
  4. writes tests/golden/qwen35_<variant>.json and a small .logits: transformers' float32 logits on each committed
     file's weights at a few positions only (layout in the JSON's "logits" section).  The float64 reference's
     logits at every position are not committed: `make test` writes them to build/golden/qwen35_<variant>.logits
     with `tools/ref_qwen35.py --golden` (the layout is described in the same section).

Run from the repository root (needs .venv-hf, .venv-ref and .cache/llama.cpp):
    nice .venv-hf/bin/python tools/gen_qwen35_fixtures.py [dense] [moe]
"""
from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
LLAMA = ROOT / ".cache" / "llama.cpp"
REF_PY = ROOT / ".venv-ref" / "bin" / "python"
sys.path.insert(0, str(ROOT / "tools"))

import torch  # noqa: E402
from transformers import (Qwen3_5ForCausalLM, Qwen3_5MoeForCausalLM, Qwen3_5MoeTextConfig,  # noqa: E402
                          Qwen3_5TextConfig)

import qwen35_fixture_vocab as fvocab  # noqa: E402
from fixture_checks import (agree, generate, greedy_entries, hf_greedy_margins, llama_run, new_check, r6,  # noqa: E402
                            golden_files, write_golden, write_logits)
from gen_gemma4_fixtures import greedy, hf_logits, run  # noqa: E402  (model-independent helpers)
from ref_qwen35 import Qwen35Model  # noqa: E402

L, A = "linear_attention", "full_attention"
N_GREEDY = 16
TYPES = ("f32", "bf16", "q8_0", "q4_k_m")
COMMITTED = {"dense": ("bf16", "q4_k_m"), "moe": ("q8_0", "q4_k_m")}   # the files in tests/fixtures (section 6.1)
COMMITTED_MAX_BYTES = 6_000_000     # every committed qwen35 fixture and golden together
CACHE = ROOT / ".cache" / "qwen35_fixtures"
SUFFIX = {"f32": "", "bf16": "_bf16", "q8_0": "_q8_0", "q4_k_m": "_q4_k_m"}
GREEDY_MIN_GAP = 0.05        # transformers f32 greedy top-1/top-2 gap every fixture must have
ROUTER_MIN_GAP = 2e-3        # k-th vs (k+1)-th router logit gap (MoE)
HF_VS_REF_MAX = 1e-3         # transformers f32 vs float64 reference on the same weights (logits span about +-15)
HF64_VS_REF_MAX = 3e-4       # transformers float64 (its scan still runs in float32) vs the reference (moe 1.4e-4)

CHATS = (    # rendered by hand in the Qwen 3.5 template's format (thinking off: an empty think block)
    "<|im_start|>system\nYou are a helpful assistant. Answer in one short paragraph.<|im_end|>\n<|im_start|>user\n"
    "What is the capital of France, and why did the river matter to the city?<|im_end|>\n<|im_start|>assistant\n"
    "<think>\n\n</think>\n\n",
    "<|im_start|>user\nMy tomatoes get too much water.<|im_end|>\n<|im_start|>assistant\n<think>\nWet soil.\n"
    "</think>\n\nRaise the bed and add sand.<|im_end|>\n<|im_start|>user\nAnd the roses? They have black "
    "spots.<|im_end|>\n<|im_start|>assistant\n",
)

COMMON = dict(
    hidden_size=128, num_hidden_layers=4, layer_types=[L, L, A, L], num_attention_heads=4,
    num_key_value_heads=2, head_dim=32, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=64,
    linear_value_head_dim=64, linear_conv_kernel_dim=4, max_position_embeddings=4096, rms_norm_eps=1e-6,
    tie_word_embeddings=False, hidden_act="silu",
    rope_parameters={"rope_type": "default", "rope_theta": 10_000_000.0, "partial_rotary_factor": 0.25},
)
VARIANTS = {
    # like 27B: dense SwiGLU (rows of 128: llama-quantize's fallback types)
    "dense": dict(intermediate_size=128),
    # like 35B-A3B: 4 experts top-2 (8 is special-cased by llama-quant) and a sigmoid-gated shared expert
    # and tied embeddings (no output.weight: the engine's fallback to token_embd; 0.4 MB less committed)
    "moe": dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64, shared_expert_intermediate_size=64,
                tie_word_embeddings=True),
}
DESCRIPTION = {
    "dense": "27B-like: layers [GDN, GDN, attention, GDN] (explicit layer_types, no interval pattern), GDN 2 key / "
             "4 value heads x 64 (V-head reorder), attention 4 q / 2 kv x 32 with output gate, partial RoPE 8 of 32, "
             "dense SwiGLU 128",
    "moe": "35B-A3B-like: the dense trunk with every FFN MoE: 4 experts (top-2) of 64 and a sigmoid-gated shared "
           "expert of 64; tied embeddings (no output.weight)",
}
SEEDS = {"dense": 4301, "moe": 8002}     # the 8-token sequence from SEEDS + 1e6; weight seeds from SEEDS up (step 100)


# ---- the HF model ----------------------------------------------------------------------------------------

def model_class(name):
    return (Qwen3_5MoeForCausalLM, Qwen3_5MoeTextConfig) if name == "moe" else (Qwen3_5ForCausalLM, Qwen3_5TextConfig)


def make_model(name: str, seed: int, n_vocab: int, tok):
    cls, cfg_cls = model_class(name)
    cfg = cfg_cls(vocab_size=n_vocab, pad_token_id=tok.convert_tokens_to_ids("<|endoftext|>"),
                  eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"), **(COMMON | VARIANTS[name]))
    cfg._attn_implementation = "eager"
    cfg._experts_implementation = "eager"
    torch.manual_seed(seed)
    model = cls(cfg).eval()
    rng = np.random.default_rng(seed)
    H = cfg.hidden_size
    with torch.no_grad():
        for n, t in sorted(model.state_dict().items()):
            if n.endswith("embed_tokens.weight") and cfg.tie_word_embeddings:
                v = rng.standard_normal(t.shape) * 3.0 / np.sqrt(H)   # the output matrix too (see lm_head)
            elif n.endswith("embed_tokens.weight"):
                v = rng.standard_normal(t.shape)
            elif n == "lm_head.weight":
                v = rng.standard_normal(t.shape) * 3.0 / np.sqrt(H)   # logits of a few units: clear greedy margins
            elif n.endswith("linear_attn.norm.weight"):
                v = rng.uniform(0.2, 1.8, size=t.shape)               # gated norm, used as is
            elif n.endswith("norm.weight"):
                v = rng.uniform(-0.8, 0.8, size=t.shape)              # zero-centred (1 + w) norms
            elif n.endswith("A_log"):
                v = np.log(rng.uniform(0.02, 2.0, size=t.shape))      # decays from slow to fast
            elif n.endswith("dt_bias"):
                v = rng.uniform(-3.0, 1.0, size=t.shape)
            elif n.endswith("mlp.gate.weight"):
                v = rng.standard_normal(t.shape) * 8.0 / np.sqrt(H)   # decisive routing (large top-k margins)
            elif n.endswith("shared_expert_gate.weight"):
                v = rng.standard_normal(t.shape) * 2.0 / np.sqrt(H)
            else:
                v = rng.standard_normal(t.shape) / np.sqrt(t.shape[-1])
            t.copy_(torch.from_numpy(np.asarray(v, dtype=np.float32)))
    return model


def router_gap(model, tokens) -> float | None:
    """Smallest gap between the k-th and (k+1)-th router logit over the layers and positions (MoE only)."""
    if not hasattr(model.config, "num_experts"):
        return None
    k, gaps = model.config.num_experts_per_tok, []
    hooks = [layer.mlp.gate.register_forward_hook(
        lambda m, i, o: gaps.append(float(np.min(-np.diff(np.sort(o[0].double().numpy(), -1)[:, ::-1][:, k - 1:k + 1])))))
        for layer in model.model.layers]
    hf_logits(model, tokens)
    for h in hooks:
        h.remove()
    return min(gaps)


def margins_ok(model, seqs) -> bool:
    for si, toks in enumerate(seqs):
        g, gaps = greedy(lambda s: hf_logits(model, s), toks, N_GREEDY)
        rg = router_gap(model, toks + g)
        if min(gaps) < GREEDY_MIN_GAP or (rg is not None and rg < ROUTER_MIN_GAP):
            print(f"sequence {si}: greedy gap {min(gaps):.3g}, router gap {rg}", flush=True)
            return False
    return True


# ---- GGUF weights back into the HF model (the converter's transforms inverted) -----------------------------

def unreorder(a: np.ndarray, axis: int, hk: int, r: int, d: int) -> np.ndarray:
    """Tiled value-head order (as in the GGUF) back to transformers' grouped order along one axis."""
    a = np.moveaxis(a, axis, 0)
    rest = a.shape[1:]
    a = a.reshape(r, hk, d, *rest).swapaxes(0, 1).reshape(hk * r * d, *rest)
    return np.moveaxis(a, 0, axis)


def hf_state_from_gguf(ref: Qwen35Model, model) -> dict[str, np.ndarray]:
    c = model.config
    hk, hv, dk, dv = ref.hk, ref.hv, ref.dk, ref.dv
    r = hv // hk
    t = ref.t
    sd = {"model.embed_tokens.weight": t["token_embd.weight"], "lm_head.weight": ref.out_w,
          "model.norm.weight": t["output_norm.weight"] - 1}
    for il in range(c.num_hidden_layers):
        b, p = f"blk.{il}.", f"model.layers.{il}."
        sd[p + "input_layernorm.weight"] = t[b + "attn_norm.weight"] - 1
        sd[p + "post_attention_layernorm.weight"] = t[b + "post_attention_norm.weight"] - 1
        if ref.recurrent[il]:
            la = p + "linear_attn."
            qkv = t[b + "attn_qkv.weight"]
            sd[la + "in_proj_qkv.weight"] = np.concatenate([qkv[: 2 * hk * dk], unreorder(qkv[2 * hk * dk:], 0, hk, r, dv)])
            sd[la + "in_proj_z.weight"] = unreorder(t[b + "attn_gate.weight"], 0, hk, r, dv)
            sd[la + "in_proj_b.weight"] = unreorder(t[b + "ssm_beta.weight"], 0, hk, r, 1)
            sd[la + "in_proj_a.weight"] = unreorder(t[b + "ssm_alpha.weight"], 0, hk, r, 1)
            conv = t[b + "ssm_conv1d.weight"]
            sd[la + "conv1d.weight"] = np.concatenate([conv[: 2 * hk * dk], unreorder(conv[2 * hk * dk:], 0, hk, r, dv)])[:, None, :]
            sd[la + "dt_bias"] = unreorder(t[b + "ssm_dt.bias"], 0, hk, r, 1)
            sd[la + "A_log"] = np.log(-unreorder(t[b + "ssm_a"], 0, hk, r, 1))
            sd[la + "norm.weight"] = t[b + "ssm_norm.weight"]
            sd[la + "out_proj.weight"] = unreorder(t[b + "ssm_out.weight"], 1, hk, r, dv)
        else:
            sa = p + "self_attn."
            for g, h in (("attn_q", "q_proj"), ("attn_k", "k_proj"), ("attn_v", "v_proj"), ("attn_output", "o_proj")):
                sd[sa + h + ".weight"] = t[b + g + ".weight"]
            sd[sa + "q_norm.weight"] = t[b + "attn_q_norm.weight"] - 1
            sd[sa + "k_norm.weight"] = t[b + "attn_k_norm.weight"] - 1
        m = p + "mlp."
        if ref.n_expert:
            sd[m + "gate.weight"] = t[b + "ffn_gate_inp.weight"]
            sd[m + "experts.gate_up_proj"] = np.concatenate([t[b + "ffn_gate_exps.weight"], t[b + "ffn_up_exps.weight"]], 1)
            sd[m + "experts.down_proj"] = t[b + "ffn_down_exps.weight"]
            sd[m + "shared_expert_gate.weight"] = t[b + "ffn_gate_inp_shexp.weight"].reshape(1, -1)
            for w in ("gate", "up", "down"):
                sd[m + f"shared_expert.{w}_proj.weight"] = t[b + f"ffn_{w}_shexp.weight"]
        else:
            for w in ("gate", "up", "down"):
                sd[m + f"{w}_proj.weight"] = t[b + f"ffn_{w}.weight"]
    return sd


def with_weights(model, sd: dict[str, np.ndarray]):
    cls, _ = model_class("moe" if hasattr(model.config, "num_experts") else "dense")
    m = cls(model.config).eval()
    own = m.state_dict()
    assert set(own) == set(sd), set(own) ^ set(sd)
    with torch.no_grad():
        for n, a in sd.items():
            assert tuple(own[n].shape) == a.shape, (n, own[n].shape, a.shape)
            own[n].copy_(torch.from_numpy(a.astype(np.float32)))
    return m


# ---- llama.cpp's converter and quantizer -------------------------------------------------------------------

CONVERT = """
import json, runpy, sys
llama, regex = sys.argv[1:3]
sys.path.insert(0, llama)
from conversion.base import TextModel
orig = TextModel.get_vocab_base_pre
def pre(self, tokenizer):
    try:
        return orig(self, tokenizer)
    except NotImplementedError:      # truncated vocabulary: the hash cannot match; accept only Qwen's split regex
        spec = json.loads(tokenizer.backend_tokenizer.pre_tokenizer.__getstate__())
        assert spec["pretokenizers"][0]["pattern"]["Regex"] == regex, spec
        return "qwen35"
TextModel.get_vocab_base_pre = pre
sys.argv = [llama + "/convert_hf_to_gguf.py"] + sys.argv[3:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def convert(hf_dir: Path, paths: dict[str, Path]) -> None:
    for t in ("f32", "bf16", "q8_0"):
        run([sys.executable, "-c", CONVERT, LLAMA, fvocab.SPLIT, hf_dir, "--outfile", paths[t], "--outtype", t, "--no-mtp"],
            f"convert_hf_to_gguf.py --outtype {t}")
    run([REF_PY, ROOT / "tools" / "llamacpp_gemma4_ref.py", "quantize", paths["bf16"], paths["q4_k_m"], "q4_k_m"],
        "llama_model_quantize Q4_K_M")


def check_file(ref: Qwen35Model, model, kind: str) -> None:
    """The keys and tensor shapes of design section 2 (asserted)."""
    c, kv, a = model.config, ref.kv, ref.arch
    moe = hasattr(c, "num_experts")
    assert a == ("qwen35moe" if moe else "qwen35"), a
    want = {"block_count": c.num_hidden_layers, "embedding_length": c.hidden_size,
            "attention.head_count": c.num_attention_heads, "attention.head_count_kv": c.num_key_value_heads,
            "attention.key_length": c.head_dim, "attention.value_length": c.head_dim,
            "ssm.conv_kernel": c.linear_conv_kernel_dim, "ssm.state_size": c.linear_key_head_dim,
            "ssm.group_count": c.linear_num_key_heads, "ssm.time_step_rank": c.linear_num_value_heads,
            "ssm.inner_size": c.linear_num_value_heads * c.linear_value_head_dim,
            "attention.recurrent_layers": [x == L for x in c.layer_types], "full_attention_interval": 4,
            "rope.dimension_count": int(c.head_dim * 0.25), "rope.dimension_sections": [11, 11, 10, 0]}
    if moe:
        want |= {"expert_count": c.num_experts, "expert_used_count": c.num_experts_per_tok,
                 "expert_feed_forward_length": c.moe_intermediate_size,
                 "expert_shared_feed_forward_length": c.shared_expert_intermediate_size}
    else:
        want["feed_forward_length"] = c.intermediate_size
    for k, v in want.items():
        got = kv.get(f"{a}.{k}")
        assert got == v or (isinstance(v, list) and got is not None and [type(x)(y) for x, y in zip(v, got)] == v), (kind, k, got, v)
    assert kv["tokenizer.ggml.model"] == "gpt2" and kv["tokenizer.ggml.pre"] == "qwen35", kind
    assert "nextn_predict_layers" not in {k.split(".", 1)[1] for k in kv if k.startswith(a + ".")}, kind
    H, V = c.hidden_size, c.vocab_size
    hk, hv, dk, dv, Kc = ref.hk, ref.hv, ref.dk, ref.dv, ref.kc
    Dc, nh, nkv, hd = 2 * hk * dk + hv * dv, c.num_attention_heads, c.num_key_value_heads, c.head_dim
    shapes = {"token_embd.weight": (V, H), "output_norm.weight": (H,)}
    if not c.tie_word_embeddings:
        shapes["output.weight"] = (V, H)
    for il in range(c.num_hidden_layers):
        b = f"blk.{il}."
        shapes |= {b + "attn_norm.weight": (H,), b + "post_attention_norm.weight": (H,)}
        if ref.recurrent[il]:
            shapes |= {b + "attn_qkv.weight": (Dc, H), b + "attn_gate.weight": (hv * dv, H), b + "ssm_beta.weight": (hv, H),
                       b + "ssm_alpha.weight": (hv, H), b + "ssm_conv1d.weight": (Dc, Kc), b + "ssm_dt.bias": (hv,),
                       b + "ssm_a": (hv,), b + "ssm_norm.weight": (dv,), b + "ssm_out.weight": (H, hv * dv)}
        else:
            shapes |= {b + "attn_q.weight": (2 * nh * hd, H), b + "attn_k.weight": (nkv * hd, H),
                       b + "attn_v.weight": (nkv * hd, H), b + "attn_output.weight": (H, nh * hd),
                       b + "attn_q_norm.weight": (hd,), b + "attn_k_norm.weight": (hd,)}
        if moe:
            E, Fe, Fs = c.num_experts, c.moe_intermediate_size, c.shared_expert_intermediate_size
            shapes |= {b + "ffn_gate_inp.weight": (E, H), b + "ffn_gate_exps.weight": (E, Fe, H),
                       b + "ffn_up_exps.weight": (E, Fe, H), b + "ffn_down_exps.weight": (E, H, Fe),
                       b + "ffn_gate_inp_shexp.weight": (1, H), b + "ffn_gate_shexp.weight": (Fs, H),
                       b + "ffn_up_shexp.weight": (Fs, H), b + "ffn_down_shexp.weight": (H, Fs)}
        else:
            F = c.intermediate_size
            shapes |= {b + "ffn_gate.weight": (F, H), b + "ffn_up.weight": (F, H), b + "ffn_down.weight": (H, F)}
    got = {n: a.shape for n, a in ref.t.items()}
    assert set(got) == set(shapes), (kind, sorted(set(got) ^ set(shapes)))
    for n, s in shapes.items():
        ok = got[n] == s or (n.endswith("ffn_gate_inp_shexp.weight") and got[n] == (H,))   # llama-quantize drops ne1 = 1
        assert ok, (kind, n, got[n], s)


# ---- one variant -------------------------------------------------------------------------------------------

def sequences(tok, rng: np.random.Generator) -> list[list[int]]:
    seqs = [[int(x) for x in rng.integers(256, fvocab.N_REAL, size=8)]]
    for text in CHATS:
        seqs.append(tok(text, add_special_tokens=False)["input_ids"])
    assert all(64 < len(s) <= 80 for s in seqs[1:]), [len(s) for s in seqs]
    return seqs


def build_variant(name: str, tokdir: Path, tok) -> dict:
    n_vocab = len(tok)
    seqs = sequences(tok, np.random.default_rng(SEEDS[name] + 1_000_000))
    seed = SEEDS[name]
    while True:
        model = make_model(name, seed, n_vocab, tok)
        if margins_ok(model, seqs):
            break
        print(f"{name}: seed {seed} has a near tie, trying {seed + 100}", flush=True)
        seed += 100
    fixtures = ROOT / "tests" / "fixtures"
    CACHE.mkdir(parents=True, exist_ok=True)
    paths = {t: (fixtures if t in COMMITTED[name] else CACHE) / f"qwen35_{name}{SUFFIX[t]}.gguf" for t in TYPES}
    with tempfile.TemporaryDirectory() as td:
        td = Path(td)
        hf_dir = td / f"qwen3.5-tiny-{name}"
        model.save_pretrained(hf_dir)
        for f in tokdir.iterdir():
            shutil.copy(f, hf_dir / f.name)
        convert(hf_dir, paths)
        refs = {t: Qwen35Model(str(paths[t])) for t in TYPES}
        for t in TYPES:
            check_file(refs[t], model, t)
        ref_greedy = {t: [refs[t].greedy(s, N_GREEDY) for s in seqs] for t in TYPES}
        llama = {t: llama_run(paths[t], seqs + [s + g for s, g in zip(seqs, ref_greedy[t])], list(CHATS), N_GREEDY, td)
                 for t in TYPES}
        print(f"{name}: converted and ran llama.cpp", flush=True)
    for t in TYPES:
        assert llama[t]["tokenized"] == seqs[1:], (name, t)

    # the f32 file mapped back must be the original model (up to the float32 rounding of 1 + w - 1 and log(exp))
    sd0, sd_f32 = model.state_dict(), hf_state_from_gguf(refs["f32"], model)
    weights_roundtrip = max(float(np.abs(sd0[n].double().numpy() - a).max()) for n, a in sd_f32.items())
    assert weights_roundtrip < 1e-6, weights_roundtrip
    hf_on = {t: (model if t == "f32" else with_weights(model, hf_state_from_gguf(refs[t], model))) for t in TYPES}
    model64 = with_weights(model, sd_f32).double()

    logits = {f"hf:{t}": [] for t in TYPES} | {f"ref:{t}": [] for t in TYPES}
    check = new_check(TYPES) | {"max_abs_scan_recurrent_vs_chunked": 0.0, "weights_roundtrip_f32": weights_roundtrip,
                                "llama_greedy_equal_ref": {t: 0 for t in TYPES}}
    agree(name, TYPES, refs, hf_on, model64, seqs, llama, logits, check, HF_VS_REF_MAX, hf_logits)
    check["max_abs_scan_recurrent_vs_chunked"] = max(refs[t].scan_max_diff for t in TYPES)
    assert check["max_abs_hf64_vs_ref_f32"] <= HF64_VS_REF_MAX, check
    hf_greedy = hf_greedy_margins(model, seqs, N_GREEDY, check, lambda s: hf_logits(model, s), router_gap)
    seq_out = greedy_entries(name, TYPES, refs, seqs, list(CHATS), hf_greedy, ref_greedy, llama, check, N_GREEDY)

    kept = COMMITTED[name]
    positions = [hf_positions(len(s)) for s in seqs]
    bin_path = ROOT / "tests" / "golden" / f"qwen35_{name}.logits"
    hf_sets = write_logits({f"hf:{t}": [logits[f"hf:{t}"][si][p] for si, p in enumerate(positions)] for t in kept},
                           bin_path)
    ref_path = ROOT / "build" / "golden" / f"qwen35_{name}.logits"
    ref_sets = [f"ref:{t}" for t in kept]
    trace: dict = {}
    refs["f32"].forward(seqs[0], trace=trace)
    c = model.config
    golden = {
        "variant": name,
        "description": DESCRIPTION[name],
        "generator": f"tools/gen_qwen35_fixtures.py (weight seed {seed}): transformers "
                     f"{__import__('transformers').__version__}, llama.cpp convert_hf_to_gguf.py --no-mtp + "
                     "llama_model_quantize (llama-cpp-python 0.3.36 sdist)",
        **golden_files({t: paths[t] for t in kept}, refs, tokdir, n_vocab, fvocab.N_REAL,
                       "tools/qwen35_fixture_vocab.py", c),
        "checked_not_committed": {t: str(paths[t].relative_to(ROOT)) for t in TYPES if t not in kept},
        "hparams": {"n_layer": refs["f32"].n_layer, "n_embd": c.hidden_size, "n_vocab": n_vocab,
                    "recurrent": refs["f32"].recurrent, "ssm": {"hk": refs["f32"].hk, "hv": refs["f32"].hv,
                    "dk": refs["f32"].dk, "dv": refs["f32"].dv, "conv_kernel": refs["f32"].kc},
                    "value_head_uses_k_head": "h mod hk (the converter's tiled order)"},
        "n_greedy": N_GREEDY,
        "sequences": seq_out,
        "logits": {
            "reference": {
                "file": str(ref_path.relative_to(ROOT)),
                "made_by": f"make {ref_path.relative_to(ROOT)} (before make test's suites): .venv/bin/python "
                           f"tools/ref_qwen35.py --golden tests/golden/qwen35_{name}.json {ref_path.relative_to(ROOT)}",
                "format": "little-endian float32; the sets below one after another, each holding the sequences one "
                          "after another, each [position][vocab] at every position of the sequence's tokens",
                "sets": ref_sets,
            },
            "transformers": {
                "file": str(bin_path.relative_to(ROOT)),
                "format": "little-endian float32; the sets below one after another, each holding the sequences one "
                          "after another, each [row][vocab] for the rows at positions[sequence] only",
                "sets": hf_sets,
                "positions": positions,
            },
            "about": {
                "hf:<type>": "transformers float32 (eager) on the <type> file's weights (for f32 the original "
                             "weights; otherwise dequantized by gguf-py, the converter's transforms inverted)",
                "ref:<type>": "tools/ref_qwen35.py float64 on the <type> file, weights dequantized by gguf-py",
            },
        },
        "check": check | {
            "thresholds": {"greedy_min_gap": GREEDY_MIN_GAP, "router_min_gap": ROUTER_MIN_GAP,
                           "hf_vs_ref_max": HF_VS_REF_MAX, "hf64_vs_ref_max": HF64_VS_REF_MAX},
            "note": "max |delta logit| over every position of all sequences, for all four types (those not in "
                    "gguf were written to .cache and checked, not committed); llama.cpp (CPU) rounds activations "
                    "for bf16 and quantized weights, hence its larger deltas; llama_greedy_steps_checked: greedy "
                    "steps (of llama_greedy_steps_total) where the reference's top-2 margin exceeded twice "
                    "llama.cpp's max |delta| on that row, so that its argmax had to be (and was) the reference's "
                    "token; llama_greedy_equal_ref: summed over sequences, the length of the prefix of llama.cpp's "
                    "own greedy continuation equal to the reference's",
        },
        "trace_seq0": {
            "note": "float64 reference on the f32 file for sequences[0]: every layer's output, [position][dim]",
            "layer_out": [r6(x) for x in trace["layer_out"]],
        },
    }
    extra = (f"scan {check['max_abs_scan_recurrent_vs_chunked']:.1e}; "
             f"llama greedy equal {check['llama_greedy_equal_ref']}; ")
    return write_golden(golden, ROOT / "tests" / "golden" / f"qwen35_{name}.json", {t: paths[t] for t in kept},
                        bin_path, name, seed, extra)


def hf_positions(n: int) -> list[int]:
    """The rows of transformers' logits kept in the golden: the first row of each later 64-token chunk and the last
    two rows (the last one only for a sequence inside the first chunk)."""
    return list(range(64, n - 2, 64)) + ([n - 2, n - 1] if n > 64 else [n - 1])


def main() -> int:
    rc = generate(VARIANTS, fvocab.write, build_variant, None)
    files = [ROOT / "tests" / "fixtures" / f"qwen35_{v}{SUFFIX[t]}.gguf" for v, ts in COMMITTED.items() for t in ts]
    files += [ROOT / "tests" / "golden" / f"qwen35_{v}{e}" for v in COMMITTED for e in (".json", ".logits")]
    total = sum(f.stat().st_size for f in files if f.exists())
    print(f"committed qwen35 files: {total} bytes (limit {COMMITTED_MAX_BYTES})", flush=True)
    assert total <= COMMITTED_MAX_BYTES, total
    return rc


if __name__ == "__main__":
    sys.exit(main())
