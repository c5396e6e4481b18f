#!/usr/bin/env python3
"""Convert a Hugging Face Gemma 4 *text* checkpoint to GGUF (arch "gemma4").

The output follows llama.cpp's layout for MODEL_ARCH.GEMMA4 exactly: tensor
names, ggml shapes, value transforms and metadata keys (see docs/GEMMA4.md for
the full list and the reasons).  Inputs:

  * a directory with config.json + *.safetensors (a Gemma4ForCausalLM text
    checkpoint or a Gemma4ForConditionalGeneration one; only the language model
    is converted), or
  * an in-memory transformers Gemma4ForCausalLM (convert_model()).

Output types: f32, f16, bf16, q8_0, q4_k.
  f16/bf16/q8_0 follow convert_hf_to_gguf.py: 1-D tensors, *_norm.weight,
  ffn_gate_inp.weight and tensors not ending in ".weight" stay F32; a q8_0
  tensor whose row length is not a multiple of 32 falls back to F16.
  q4_k emulates llama-quantize with a uniform Q4_K target (no Q4_K_M mixing):
  same exclusions; rows that are not a multiple of 256 fall back to Q5_0
  (llama.cpp's fallback for Q4_K), and to F16 if not a multiple of 32 either.
  The gguf package cannot quantize Q4_K, so this file carries its own Q4_K
  encoder (quantize_q4_k); every Q4_K tensor is decoded again with
  gguf.quants.dequantize and checked against the source.

Tokenizer metadata: with --synthetic-vocab (and always for the tiny fixtures)
a synthetic SentencePiece-style vocabulary (tokenizer.ggml.model "llama") that
carries every Gemma 4 control token; otherwise the checkpoint's tokenizer.json
is converted the way llama.cpp's Gemma4 converter does it (model "gemma4",
BPE merges, the seven "visible" tokens typed USER_DEFINED).
"""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

try:
    import gguf
    from gguf import GGMLQuantizationType as QT
except ImportError:  # pragma: no cover
    sys.exit("hf_to_gguf.py needs the 'gguf' package (pip install -r tools/requirements-hf.txt)")

ARCH = "gemma4"
QK_K = 256

# ---------------------------------------------------------------------------
# hyper-parameters
# ---------------------------------------------------------------------------


@dataclass
class Gemma4Hparams:
    """Everything the GGUF needs, resolved per layer from a Gemma4TextConfig dict."""
    n_layer: int
    n_embd: int
    n_vocab: int
    n_ctx: int
    n_head: int
    head_dim_swa: int
    head_dim_full: int
    n_kv_swa: int
    n_kv_full: int
    is_swa: list[bool]
    n_ff: list[int]
    n_ff_is_array: bool              # llama.cpp writes an array only when use_double_wide_mlp
    kv_is_array: bool                # llama.cpp writes an array only when num_global_key_value_heads is set
    n_kv_shared: int
    n_embd_per_layer: int
    n_vocab_per_layer: int
    n_expert: int
    n_expert_used: int
    n_ff_exp: int
    sliding_window: int
    rope_theta_full: float
    rope_theta_swa: float
    partial_rotary_full: float
    partial_rotary_swa: float
    final_logit_softcapping: float
    rms_eps: float
    attention_k_eq_v: bool
    tie_word_embeddings: bool
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def first_kv_shared(self) -> int:
        return self.n_layer - self.n_kv_shared

    def head_dim(self, il: int) -> int:
        return self.head_dim_swa if self.is_swa[il] else self.head_dim_full

    def n_kv(self, il: int) -> int:
        return self.n_kv_swa if self.is_swa[il] else self.n_kv_full

    def kv_source(self, il: int) -> int:
        """transformers' rule: a KV-shared layer reads the K/V of the last non-shared layer of its own type."""
        if il < self.first_kv_shared:
            return il
        for j in range(self.first_kv_shared - 1, -1, -1):
            if self.is_swa[j] == self.is_swa[il]:
                return j
        raise ValueError(f"layer {il}: no earlier layer of the same type to share K/V with")


def text_config(cfg: dict) -> dict:
    """Unwrap Gemma4Config.text_config when given a multimodal config."""
    return dict(cfg["text_config"]) if "text_config" in cfg else dict(cfg)


def _per_layer_override(cfg: dict, layer_types: list[str], key: str):
    """transformers >= 5.2x stores full-layer overrides in per_layer_config instead of global_* keys."""
    plc = cfg.get("per_layer_config") or {}
    vals = set()
    for il, t in enumerate(layer_types):
        if t != "full_attention":
            continue
        entry = plc.get(str(il), plc.get(il))
        if isinstance(entry, dict) and key in entry:
            vals.add(entry[key])
    if len(vals) > 1:
        raise ValueError(f"per_layer_config gives different {key} to full layers: {sorted(vals)}")
    return vals.pop() if vals else None


def resolve_hparams(cfg_in: dict) -> Gemma4Hparams:
    cfg = text_config(cfg_in)
    n_layer = int(cfg["num_hidden_layers"])
    layer_types = list(cfg.get("layer_types") or [])
    if not layer_types:
        layer_types = ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(n_layer)]
    if len(layer_types) != n_layer:
        raise ValueError("layer_types length != num_hidden_layers")
    if layer_types[-1] != "full_attention":   # transformers forces this
        layer_types[-1] = "full_attention"
    is_swa = [t == "sliding_attention" for t in layer_types]

    head_dim_swa = int(cfg.get("head_dim", 256))
    head_dim_full = cfg.get("global_head_dim")
    if head_dim_full is None:
        head_dim_full = _per_layer_override(cfg, layer_types, "head_dim")
    if head_dim_full is None:
        head_dim_full = 512                   # transformers' default for global_head_dim
    head_dim_full = int(head_dim_full)

    k_eq_v = bool(cfg.get("attention_k_eq_v", False))
    n_kv_swa = int(cfg.get("num_key_value_heads", 4))
    n_kv_glob = cfg.get("num_global_key_value_heads")
    if n_kv_glob is None:
        n_kv_glob = _per_layer_override(cfg, layer_types, "num_key_value_heads")
    # transformers applies num_global_key_value_heads only when attention_k_eq_v is set;
    # llama.cpp writes it whenever it is present.  The real checkpoints never disagree.
    if n_kv_glob is not None and not k_eq_v and int(n_kv_glob) != n_kv_swa:
        raise ValueError("num_global_key_value_heads set without attention_k_eq_v: transformers and llama.cpp disagree")
    n_kv_full = int(n_kv_glob) if (n_kv_glob is not None and k_eq_v) else n_kv_swa

    n_kv_shared = int(cfg.get("num_kv_shared_layers") or 0)
    first_shared = n_layer - n_kv_shared
    n_ff0 = int(cfg["intermediate_size"])
    double = bool(cfg.get("use_double_wide_mlp", False))
    n_ff = [n_ff0 * (2 if (double and il >= first_shared) else 1) for il in range(n_layer)]

    rp = cfg.get("rope_parameters") or {}
    rp_full = rp.get("full_attention") or {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1e6}
    rp_swa = rp.get("sliding_attention") or {"rope_type": "default", "rope_theta": 1e4}
    if rp_full.get("rope_type", "default") not in ("proportional", "default"):
        raise ValueError(f"unsupported full-attention rope_type {rp_full.get('rope_type')!r}")
    if float(rp_full.get("factor", 1.0)) != 1.0:
        raise ValueError("proportional RoPE with factor != 1 has no llama.cpp representation")
    if rp_swa.get("rope_type", "default") != "default":
        raise ValueError(f"unsupported sliding rope_type {rp_swa.get('rope_type')!r}")
    partial_full = float(rp_full.get("partial_rotary_factor", 1.0)) if rp_full.get("rope_type") == "proportional" else 1.0
    partial_swa = float(cfg.get("partial_rotary_factor", rp_swa.get("partial_rotary_factor", 1.0)))

    enable_moe = bool(cfg.get("enable_moe_block", False))
    ple = int(cfg.get("hidden_size_per_layer_input") or 0)
    softcap = cfg.get("final_logit_softcapping")
    return Gemma4Hparams(
        n_layer=n_layer, n_embd=int(cfg["hidden_size"]), n_vocab=int(cfg["vocab_size"]),
        n_ctx=int(cfg.get("max_position_embeddings", 131072)), n_head=int(cfg["num_attention_heads"]),
        head_dim_swa=head_dim_swa, head_dim_full=head_dim_full, n_kv_swa=n_kv_swa, n_kv_full=n_kv_full,
        is_swa=is_swa, n_ff=n_ff, n_ff_is_array=double,
        kv_is_array=(n_kv_glob is not None) or (n_kv_full != n_kv_swa),
        n_kv_shared=n_kv_shared, n_embd_per_layer=ple,
        n_vocab_per_layer=int(cfg.get("vocab_size_per_layer_input") or cfg["vocab_size"]),
        n_expert=int(cfg.get("num_experts") or 0) if enable_moe else 0,
        n_expert_used=int(cfg.get("top_k_experts") or 0) if enable_moe else 0,
        n_ff_exp=int(cfg.get("moe_intermediate_size") or cfg.get("expert_intermediate_size") or 0) if enable_moe else 0,
        sliding_window=int(cfg.get("sliding_window", 512)),
        rope_theta_full=float(rp_full.get("rope_theta", 1e6)), rope_theta_swa=float(rp_swa.get("rope_theta", 1e4)),
        partial_rotary_full=partial_full, partial_rotary_swa=partial_swa,
        final_logit_softcapping=float(softcap) if softcap else 0.0,
        rms_eps=float(cfg.get("rms_norm_eps", 1e-6)), attention_k_eq_v=k_eq_v,
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", True)), raw=cfg,
    )


# ---------------------------------------------------------------------------
# tensor names
# ---------------------------------------------------------------------------

# HF suffix under "model.layers.{i}." -> GGUF name under "blk.{i}."
LAYER_MAP = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "post_attention_layernorm.weight": "post_attention_norm.weight",
    "pre_feedforward_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
    "post_feedforward_layernorm.weight": "post_ffw_norm.weight",
    "post_feedforward_layernorm_1.weight": "post_ffw_norm_1.weight",
    "post_feedforward_layernorm_2.weight": "post_ffw_norm_2.weight",
    "pre_feedforward_layernorm_2.weight": "pre_ffw_norm_2.weight",
    "router.proj.weight": "ffn_gate_inp.weight",
    "router.scale": "ffn_gate_inp.scale",
    "router.per_expert_scale": "ffn_down_exps.scale",
    "experts.gate_up_proj": "ffn_gate_up_exps.weight",
    "experts.down_proj": "ffn_down_exps.weight",
    "layer_scalar": "layer_output_scale.weight",
    "per_layer_input_gate.weight": "inp_gate.weight",
    "per_layer_projection.weight": "proj.weight",
    "post_per_layer_input_norm.weight": "post_norm.weight",
}
GLOBAL_MAP = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
    "model.embed_tokens_per_layer.weight": "per_layer_token_embd.weight",
    "model.per_layer_model_projection.weight": "per_layer_model_proj.weight",
    "model.per_layer_projection_norm.weight": "per_layer_proj_norm.weight",
}
# tensors the text model does not use (vision/audio towers, projectors)
SKIP_RE = re.compile(r"(vision_tower|audio_tower|embed_vision|embed_audio|multi_modal_projector)")


def canonical_hf_name(name: str) -> str | None:
    """Strip the multimodal prefix; return None for non-language-model tensors."""
    if SKIP_RE.search(name):
        return None
    name = name.replace("model.language_model.", "model.")
    if name.startswith("language_model."):
        name = name[len("language_model."):]
    return name


def gguf_name(hf: str) -> str:
    if hf in GLOBAL_MAP:
        return GLOBAL_MAP[hf]
    m = re.match(r"model\.layers\.(\d+)\.(.+)$", hf)
    if m and m.group(2) in LAYER_MAP:
        return f"blk.{m.group(1)}.{LAYER_MAP[m.group(2)]}"
    raise KeyError(f"no GGUF name for HF tensor {hf!r}")


def check_against_gguf_tensor_map(names: list[tuple[str, str]], n_layer: int) -> None:
    """Cross-check our table with gguf-py's TensorNameMap for MODEL_ARCH.GEMMA4 (where it knows the name)."""
    tmap = gguf.get_tensor_name_map(gguf.MODEL_ARCH.GEMMA4, n_layer)
    for hf, ours in names:
        base, dot, suffix = ours.rpartition(".")
        theirs = tmap.get_name(hf.rsplit(".", 1)[0] if hf.endswith((".weight", ".bias")) else hf)
        if theirs is None:
            continue            # scales/extra tensors: llama.cpp handles these in the model class
        if theirs != base:
            raise AssertionError(f"name table disagrees with gguf-py for {hf}: ours {base}, gguf-py {theirs}")


# ---------------------------------------------------------------------------
# quantization
# ---------------------------------------------------------------------------

OUT_TYPES = {
    "f32": (QT.F32, gguf.LlamaFileType.ALL_F32),
    "f16": (QT.F16, gguf.LlamaFileType.MOSTLY_F16),
    "bf16": (QT.BF16, gguf.LlamaFileType.MOSTLY_BF16),
    "q8_0": (QT.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0),
    "q4_k": (QT.Q4_K, gguf.LlamaFileType.MOSTLY_Q4_K_S),
}


def choose_type(name: str, shape: tuple[int, ...], out_type: str) -> QT:
    """Per-tensor storage type (shape is the numpy shape; shape[-1] is ggml ne[0])."""
    if len(shape) <= 1 or name.endswith("_norm.weight") or not name.endswith(".weight"):
        return QT.F32
    if name.endswith("ffn_gate_inp.weight"):   # router stays F32 in convert and in llama-quantize
        return QT.F32
    target = OUT_TYPES[out_type][0]
    ne0 = shape[-1]
    if target == QT.Q8_0 and ne0 % 32:
        return QT.F16                         # convert_hf_to_gguf's QuantError fallback
    if target == QT.Q4_K and ne0 % QK_K:
        return QT.Q5_0 if ne0 % 32 == 0 else QT.F16   # llama-quantize's fallback for Q4_K
    return target


def _f16_round(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float16).astype(np.float32)


def quantize_q4_k(data: np.ndarray) -> np.ndarray:
    """Encode float data (last dim % 256 == 0) as ggml Q4_K blocks (144 bytes per 256 values).

    Block layout: f16 d, f16 dmin, 12 bytes of packed 6-bit (scale, min) pairs for
    the eight 32-value sub-blocks, 128 bytes of 4-bit quants; value = d*sc*q - dmin*m.
    Each sub-block gets an affine fit (min clamped to <= 0) refined by a few rounds of
    least squares, then scales/mins are quantized to 6 bits against the super-block d/dmin.
    """
    x = np.asarray(data, dtype=np.float32)
    assert x.shape[-1] % QK_K == 0, x.shape
    lead = x.shape[:-1]
    blocks = x.reshape(-1, 8, 32).astype(np.float64)
    nb = blocks.shape[0]
    lo = np.minimum(blocks.min(axis=-1), 0.0)
    hi = blocks.max(axis=-1)
    scale = (hi - lo) / 15.0
    mn = -lo
    for _ in range(4):
        safe = np.where(scale > 0, scale, 1.0)
        q = np.clip(np.rint((blocks + mn[..., None]) / safe[..., None]), 0, 15)
        # least squares for x ~ scale*q - mn
        qm = q.mean(-1)
        xm = blocks.mean(-1)
        var = ((q - qm[..., None]) ** 2).sum(-1)
        cov = ((q - qm[..., None]) * (blocks - xm[..., None])).sum(-1)
        new_scale = np.where(var > 0, cov / np.where(var > 0, var, 1.0), scale)
        new_mn = new_scale * qm - xm
        ok = (new_scale > 0) & (new_mn >= 0)
        scale = np.where(ok, new_scale, scale)
        mn = np.where(ok, new_mn, mn)
    d = _f16_round(scale.max(-1) / 63.0).astype(np.float64)
    dmin = _f16_round(mn.max(-1) / 63.0).astype(np.float64)
    sc = np.clip(np.rint(scale / np.where(d > 0, d, 1.0)[:, None]), 0, 63).astype(np.uint8)
    m = np.clip(np.rint(mn / np.where(dmin > 0, dmin, 1.0)[:, None]), 0, 63).astype(np.uint8)
    eff_scale = d[:, None] * sc
    eff_min = dmin[:, None] * m
    safe = np.where(eff_scale > 0, eff_scale, 1.0)
    q = np.clip(np.rint((blocks + eff_min[..., None]) / safe[..., None]), 0, 15).astype(np.uint8)
    q = np.where(eff_scale[..., None] > 0, q, 0).astype(np.uint8)

    packed = np.zeros((nb, 12), dtype=np.uint8)
    packed[:, 0:4] = sc[:, 0:4] | ((sc[:, 4:8] >> 4) << 6)
    packed[:, 4:8] = m[:, 0:4] | ((m[:, 4:8] >> 4) << 6)
    packed[:, 8:12] = (sc[:, 4:8] & 0x0F) | ((m[:, 4:8] & 0x0F) << 4)
    qs = (q[:, 0::2, :] | (q[:, 1::2, :] << 4)).reshape(nb, 128)   # group g: sub-blocks 2g (low), 2g+1 (high)
    out = np.concatenate([
        d.astype(np.float16).view(np.uint8).reshape(nb, 2),
        dmin.astype(np.float16).view(np.uint8).reshape(nb, 2),
        packed, qs], axis=1)
    return out.reshape(*lead, (x.shape[-1] // QK_K) * 144)


def encode(data: np.ndarray, qtype: QT) -> np.ndarray:
    data = np.ascontiguousarray(data, dtype=np.float32)
    if qtype == QT.F32:
        return data
    if qtype == QT.F16:
        return data.astype(np.float16)
    if qtype == QT.Q4_K:
        enc = quantize_q4_k(data)
        back = gguf.quants.dequantize(enc, QT.Q4_K).reshape(data.shape)
        err = np.abs(back - data).max()
        bound = 0.2 * (np.abs(data).max() + 1e-12)
        if not np.isfinite(err) or err > bound:
            raise AssertionError(f"Q4_K round trip error {err} exceeds {bound}")
        return enc
    return gguf.quants.quantize(data, qtype)


# ---------------------------------------------------------------------------
# vocabulary
# ---------------------------------------------------------------------------

# Gemma 4 control tokens, in the order they are placed in the synthetic vocabulary.
# "visible" ones are USER_DEFINED in llama.cpp's Gemma4 converter so that they are
# rendered on detokenization and the chat parser can see them.
GEMMA4_SPECIALS = [
    ("<pad>", "control"), ("<eos>", "control"), ("<bos>", "control"), ("<unk>", "unknown"), ("<mask>", "control"),
    ("<|turn>", "control"), ("<turn|>", "control"), ("<|think|>", "control"),
    ("<|channel>", "visible"), ("<channel|>", "visible"),
    ("<|tool>", "control"), ("<tool|>", "control"),
    ("<|tool_call>", "visible"), ("<tool_call|>", "visible"),
    ("<|tool_response>", "visible"), ("<tool_response|>", "visible"), ('<|"|>', "visible"),
    ("<|image>", "control"), ("<image|>", "control"), ("<|audio>", "control"), ("<audio|>", "control"),
    ("<|image|>", "control"), ("<|audio|>", "control"), ("<|video|>", "control"),
]
VISIBLE_TOKENS = {t for t, k in GEMMA4_SPECIALS if k == "visible"}

# Our own compact rendering of the documented Gemma 4 chat format (not the official template text):
# optional system turn (with <|think|> when thinking is on), user/model turns, prior model turns
# stripped of their thought channel, generation prompt with an empty thought channel when thinking is off.
CHAT_TEMPLATE = (
    "{{- bos_token -}}"
    "{%- set think = enable_thinking is defined and enable_thinking -%}"
    "{%- set msgs = messages -%}"
    "{%- set has_sys = messages and messages[0]['role'] in ['system', 'developer'] -%}"
    "{%- if think or has_sys -%}"
    "{{- '<|turn>system\\n' -}}{%- if think -%}{{- '<|think|>\\n' -}}{%- endif -%}"
    "{%- if has_sys -%}{{- messages[0]['content'] | trim -}}{%- set msgs = messages[1:] -%}{%- endif -%}"
    "{{- '<turn|>\\n' -}}"
    "{%- endif -%}"
    "{%- for m in msgs -%}"
    "{%- set role = 'model' if m['role'] == 'assistant' else m['role'] -%}"
    "{%- set text = m['content'] | trim -%}"
    "{%- if role == 'model' and '<channel|>' in text -%}{%- set text = text.split('<channel|>')[-1] | trim -%}{%- endif -%}"
    "{{- '<|turn>' + role + '\\n' + text + '<turn|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|turn>model\\n' -}}"
    "{%- if not think -%}{{- '<|channel>thought\\n<channel|>' -}}{%- endif -%}{%- endif -%}"
)

_CORPUS = (
    "the quick brown fox jumps over the lazy dog. a model reads tokens and writes tokens. "
    "hello world, this is a small test of the gemma four tokenizer with some words: "
    "attention layers share keys and values; experts route each token to the best two. "
    "what is the water formula? it is h2o. 1 2 3 4 5 6 7 8 9 10 100 2024. "
    "The Model and The User talk in turns. Thinking happens in a channel before the answer.\n"
)


@dataclass
class Vocab:
    tokens: list[str]
    scores: list[float]
    types: list[int]
    model: str = "llama"
    pre: str = "default"
    merges: list[str] = field(default_factory=list)
    bos: int = 2
    eos: int = 1
    unk: int = 3
    pad: int = 0
    eot: int | None = None
    add_bos: bool = True
    add_eos: bool = False
    add_space_prefix: bool = False
    chat_template: str | None = CHAT_TEMPLATE

    def id(self, text: str) -> int:
        return self.tokens.index(text)


def synthetic_spm_vocab(n_vocab: int = 512) -> Vocab:
    """Tiny SPM vocabulary: Gemma 4 specials, 256 byte tokens, then pieces learnt by BPE merges on a
    small corpus.  Scores are -merge_rank, so the llama.cpp SPM tokenizer (which merges the highest
    scoring adjacent pair first) reproduces the merge order.  Every intermediate piece is in the vocab."""
    TT = gguf.TokenType
    tokens, scores, types = [], [], []
    for text, kind in GEMMA4_SPECIALS:
        tokens.append(text)
        scores.append(0.0)
        types.append({"control": TT.CONTROL, "unknown": TT.UNKNOWN, "visible": TT.USER_DEFINED}[kind])
    for b in range(256):
        tokens.append(f"<0x{b:02X}>")
        scores.append(0.0)
        types.append(TT.BYTE)
    words = [("\u2581" + w) for w in _CORPUS.replace("\n", " \n ").split(" ") if w]
    seqs = [list(w) for w in words]
    pieces: list[str] = []
    seen = set()
    for w in seqs:                      # single characters first
        for ch in w:
            if ch not in seen:
                seen.add(ch)
                pieces.append(ch)
    while len(tokens) + len(pieces) < n_vocab:
        counts: dict[tuple[str, str], int] = {}
        for s in seqs:
            for a, b in zip(s, s[1:]):
                counts[(a, b)] = counts.get((a, b), 0) + 1
        if not counts:
            break
        (a, b), _ = max(counts.items(), key=lambda kv: (kv[1], -len(kv[0][0] + kv[0][1]), kv[0]))
        merged = a + b
        pieces.append(merged)
        for s in seqs:
            i = 0
            while i < len(s) - 1:
                if s[i] == a and s[i + 1] == b:
                    s[i:i + 2] = [merged]
                else:
                    i += 1
    i = 0
    while len(tokens) + len(pieces) < n_vocab:     # corpus exhausted: pad with distinct unused pieces
        pieces.append(f"<unused{i}>")
        i += 1
    for rank, p in enumerate(pieces[: n_vocab - len(tokens)]):
        tokens.append(p)
        unused = p.startswith("<unused")
        scores.append(-1000.0 if unused else -float(rank))
        types.append(TT.UNUSED if unused else TT.NORMAL)
    v = Vocab(tokens=tokens, scores=scores, types=[int(t) for t in types])
    v.eot = v.id("<turn|>")
    assert len(v.tokens) == n_vocab and len(set(v.tokens)) == n_vocab
    return v


def hf_vocab(model_dir: Path) -> Vocab:
    """Real checkpoint: tokenizer.json -> tokenizer model "gemma4" the way llama.cpp converts it."""
    hv = gguf.LlamaHfVocab(model_dir)
    tokens, scores, types = [], [], []
    for text, score, toktype in hv.all_tokens():
        s = text.decode("utf-8")
        tokens.append(s)
        scores.append(float(score))
        types.append(int(gguf.TokenType.USER_DEFINED) if s in VISIBLE_TOKENS else int(toktype))
    sv = gguf.SpecialVocab(model_dir, load_merges=True)
    ids = sv.special_token_ids
    tmpl = sv.chat_template if isinstance(sv.chat_template, str) else None
    if tmpl is None and (model_dir / "chat_template.jinja").is_file():
        tmpl = (model_dir / "chat_template.jinja").read_text(encoding="utf-8")
    return Vocab(tokens=tokens, scores=scores, types=types, model="gemma4", pre="default",
                 merges=list(sv.merges), bos=ids.get("bos", 2), eos=ids.get("eos", 1),
                 unk=ids.get("unk", 3), pad=ids.get("pad", 0), eot=ids.get("eot"),
                 chat_template=tmpl)


# ---------------------------------------------------------------------------
# conversion
# ---------------------------------------------------------------------------


def rope_freqs(hp: Gemma4Hparams) -> np.ndarray:
    """Frequency factors for the full-attention layers: ggml NEOX rope over the whole head with
    theta_i = pos * base^(-2i/head_dim) / factor_i; factor 1e30 freezes the un-rotated pairs."""
    n_rot_pairs = int(hp.head_dim_full * hp.partial_rotary_full / 2)
    n_unrot = hp.head_dim_full // 2 - n_rot_pairs
    return np.array([1.0] * n_rot_pairs + [1e30] * n_unrot, dtype=np.float32)


def build_tensors(hp: Gemma4Hparams, state: dict[str, np.ndarray]) -> list[tuple[str, np.ndarray]]:
    """Map and transform HF tensors (numpy, float32) to (gguf_name, numpy array in ggml order reversed)."""
    out: list[tuple[str, np.ndarray]] = []
    pairs: list[tuple[str, str]] = []
    embed = None
    for raw_name, arr in state.items():
        hf = canonical_hf_name(raw_name)
        if hf is None:
            continue
        if hf == "lm_head.weight":
            continue                            # handled below (tied weights are dropped)
        name = gguf_name(hf)
        a = np.asarray(arr, dtype=np.float32)
        if name == "token_embd.weight":
            embed = a
        if name.endswith("layer_output_scale.weight"):
            a = a.reshape(1)
        # K/V tensors of KV-shared layers, when a checkpoint carries them, are written as llama.cpp does
        # (its loader marks them optional and the graph never reads them).
        # Gemma 4 RMSNorm multiplies by the stored weight directly: no +1 shift (unlike Gemma 1-3)
        out.append((name, a))
        pairs.append((hf, name))
    lm = None
    for raw_name, arr in state.items():
        if canonical_hf_name(raw_name) == "lm_head.weight":
            lm = np.asarray(arr, dtype=np.float32)
    if lm is not None and not hp.tie_word_embeddings and not (embed is not None and np.array_equal(lm, embed)):
        out.append(("output.weight", lm))
        pairs.append(("lm_head.weight", "output.weight"))
    out.append(("rope_freqs.weight", rope_freqs(hp)))
    check_against_gguf_tensor_map(pairs, hp.n_layer)
    validate_shapes(hp, dict(out))
    order = {n: i for i, n in enumerate(n for n, _ in out)}
    return sorted(out, key=lambda t: _sort_key(t[0], order))


def _sort_key(name: str, order: dict[str, int]):
    m = re.match(r"blk\.(\d+)\.", name)
    return (1, int(m.group(1)), order[name]) if m else (0 if name != "output_norm.weight" else 2, 0, order[name])


def validate_shapes(hp: Gemma4Hparams, t: dict[str, np.ndarray]) -> None:
    """Assert every tensor has the ggml shape llama.cpp's gemma4 loader requests (numpy shape = reversed ne)."""
    H, V = hp.n_embd, hp.n_vocab

    def want(name, *ne, optional=False):
        if name not in t:
            if optional:
                return
            raise AssertionError(f"missing tensor {name}")
        got = tuple(reversed(t[name].shape))
        if got != tuple(ne):
            raise AssertionError(f"{name}: ne {got}, expected {ne}")

    want("token_embd.weight", H, V)
    want("output_norm.weight", H)
    want("output.weight", H, V, optional=True)
    want("rope_freqs.weight", hp.head_dim_full // 2)
    P, L = hp.n_embd_per_layer, hp.n_layer
    if P:
        want("per_layer_token_embd.weight", P * L, hp.n_vocab_per_layer)
        want("per_layer_model_proj.weight", H, P * L)
        want("per_layer_proj_norm.weight", P)
    for il in range(L):
        b = f"blk.{il}."
        hd, nkv, nh = hp.head_dim(il), hp.n_kv(il), hp.n_head
        has_kv = il < hp.first_kv_shared
        want(b + "attn_norm.weight", H)
        want(b + "attn_q.weight", H, hd * nh)
        want(b + "attn_k.weight", H, hd * nkv, optional=not has_kv)
        if hp.attention_k_eq_v and not hp.is_swa[il]:
            if b + "attn_v.weight" in t:
                raise AssertionError(f"{b}attn_v.weight present on a K=V layer")
        else:
            want(b + "attn_v.weight", H, hd * nkv, optional=not has_kv)
        want(b + "attn_output.weight", hd * nh, H)
        want(b + "attn_q_norm.weight", hd)
        want(b + "attn_k_norm.weight", hd, optional=not has_kv)
        want(b + "post_attention_norm.weight", H)
        want(b + "layer_output_scale.weight", 1)
        want(b + "ffn_norm.weight", H)
        want(b + "ffn_gate.weight", H, hp.n_ff[il])
        want(b + "ffn_up.weight", H, hp.n_ff[il])
        want(b + "ffn_down.weight", hp.n_ff[il], H)
        want(b + "post_ffw_norm.weight", H)
        if hp.n_expert:
            E, F = hp.n_expert, hp.n_ff_exp
            want(b + "ffn_gate_inp.weight", H, E)
            want(b + "ffn_gate_inp.scale", H)
            want(b + "ffn_down_exps.scale", E)
            want(b + "pre_ffw_norm_2.weight", H)
            want(b + "post_ffw_norm_1.weight", H)
            want(b + "post_ffw_norm_2.weight", H)
            want(b + "ffn_gate_up_exps.weight", H, 2 * F, E)
            want(b + "ffn_down_exps.weight", F, H, E)
        if P:
            want(b + "inp_gate.weight", H, P)
            want(b + "proj.weight", P, H)
            want(b + "post_norm.weight", H)


def write_metadata(w: "gguf.GGUFWriter", hp: Gemma4Hparams, vocab: Vocab, out_type: str, name: str) -> None:
    w.add_name(name)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_file_type(int(OUT_TYPES[out_type][1]))
    # TextModel.set_gguf_parameters + Gemma3Model + Gemma4Model, final values (later writes win there)
    w.add_block_count(hp.n_layer)
    w.add_context_length(hp.n_ctx)
    w.add_embedding_length(hp.n_embd)
    w.add_feed_forward_length(hp.n_ff if hp.n_ff_is_array else hp.n_ff[0])
    w.add_head_count(hp.n_head)
    if hp.kv_is_array:
        w.add_head_count_kv([hp.n_kv(il) for il in range(hp.n_layer)])
    else:
        w.add_head_count_kv(hp.n_kv_swa)
    w.add_rope_freq_base(hp.rope_theta_full)
    w.add_rope_freq_base_swa(hp.rope_theta_swa)
    w.add_layer_norm_rms_eps(hp.rms_eps)
    if hp.n_expert:
        w.add_expert_count(hp.n_expert)
        w.add_expert_used_count(hp.n_expert_used)
        w.add_expert_feed_forward_length(hp.n_ff_exp)
    w.add_key_length(hp.head_dim_full)
    w.add_value_length(hp.head_dim_full)
    w.add_key_length_swa(hp.head_dim_swa)
    w.add_value_length_swa(hp.head_dim_swa)
    if hp.final_logit_softcapping:
        w.add_final_logit_softcapping(hp.final_logit_softcapping)
    w.add_sliding_window(hp.sliding_window)
    w.add_shared_kv_layers(hp.n_kv_shared)
    w.add_embedding_length_per_layer_input(hp.n_embd_per_layer)
    w.add_sliding_window_pattern(list(hp.is_swa))
    w.add_rope_dimension_count(hp.head_dim_full)
    w.add_rope_dimension_count_swa(int(hp.head_dim_swa * hp.partial_rotary_swa))
    # tokenizer
    w.add_tokenizer_model(vocab.model)
    w.add_tokenizer_pre(vocab.pre)
    w.add_token_list(vocab.tokens)
    w.add_token_scores(vocab.scores)
    w.add_token_types(vocab.types)
    if vocab.merges:
        w.add_token_merges(vocab.merges)
    w.add_bos_token_id(vocab.bos)
    w.add_eos_token_id(vocab.eos)
    w.add_unk_token_id(vocab.unk)
    w.add_pad_token_id(vocab.pad)
    if vocab.eot is not None:
        w.add_eot_token_id(vocab.eot)
    w.add_add_bos_token(vocab.add_bos)
    w.add_add_eos_token(vocab.add_eos)
    w.add_add_space_prefix(vocab.add_space_prefix)
    if vocab.chat_template:
        w.add_chat_template(vocab.chat_template)


def convert(hp: Gemma4Hparams, state: dict[str, np.ndarray], vocab: Vocab, out_path: str | Path,
            out_type: str = "f32", name: str = "gemma4") -> dict[str, str]:
    """Write the GGUF; returns {tensor name: ggml type name} for the record."""
    if out_type not in OUT_TYPES:
        raise ValueError(f"unknown output type {out_type!r}; choose from {sorted(OUT_TYPES)}")
    if len(vocab.tokens) != hp.n_vocab:
        raise ValueError(f"vocab has {len(vocab.tokens)} tokens, model has {hp.n_vocab}")
    tensors = build_tensors(hp, state)
    w = gguf.GGUFWriter(str(out_path), ARCH)
    write_metadata(w, hp, vocab, out_type, name)
    types: dict[str, str] = {}
    for tname, a in tensors:
        qt = choose_type(tname, a.shape, out_type)
        enc = encode(a, qt)
        if qt in (QT.F32, QT.F16):
            w.add_tensor(tname, enc)
        else:
            w.add_tensor(tname, enc, raw_shape=enc.shape, raw_dtype=qt)
        types[tname] = qt.name
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return types


def convert_model(model, vocab: Vocab, out_path, out_type="f32", name="gemma4", extra_state=None):
    """In-memory transformers Gemma4ForCausalLM -> GGUF."""
    cfg = model.config.to_dict()
    hp = resolve_hparams(cfg)
    state = {k: v.detach().float().cpu().numpy() for k, v in model.state_dict().items()}
    if extra_state:
        state.update(extra_state)
    return convert(hp, state, vocab, out_path, out_type, name)


def load_safetensors_dir(model_dir: Path) -> dict[str, np.ndarray]:
    from safetensors import safe_open
    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors in {model_dir}")
    state = {}
    for f in files:
        with safe_open(str(f), framework="pt") as sf:   # pt handles bf16
            for k in sf.keys():
                if canonical_hf_name(k) is None:
                    continue
                state[k] = sf.get_tensor(k).float().numpy()
    return state


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir", type=Path, help="directory with config.json and *.safetensors")
    ap.add_argument("--outfile", type=Path, required=True)
    ap.add_argument("--outtype", choices=sorted(OUT_TYPES), default="f32")
    ap.add_argument("--synthetic-vocab", action="store_true",
                    help="write the tiny synthetic SPM vocabulary instead of converting tokenizer.json")
    ap.add_argument("--name", default=None)
    a = ap.parse_args(argv)
    cfg = json.loads((a.model_dir / "config.json").read_text())
    hp = resolve_hparams(cfg)
    vocab = synthetic_spm_vocab(hp.n_vocab) if a.synthetic_vocab else hf_vocab(a.model_dir)
    state = load_safetensors_dir(a.model_dir)
    types = convert(hp, state, vocab, a.outfile, a.outtype, a.name or a.model_dir.name)
    counts: dict[str, int] = {}
    for t in types.values():
        counts[t] = counts.get(t, 0) + 1
    print(f"wrote {a.outfile}: {len(types)} tensors, types {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
