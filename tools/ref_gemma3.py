#!/usr/bin/env python3
"""Independent float64 numpy reference forward pass of Gemma 3, read straight from a GGUF file.

Written from the model math (transformers' models/gemma3/modeling_gemma3.py and llama.cpp's gemma3
graph + hparam loader), not from this project's engine. Every quantized weight is dequantized with
gguf.quants.dequantize and all arithmetic is done in float64, so the result is the "exact" output
of the quantized weights; llama.cpp differs from it by its own rounding (Q8_0 activations in its CPU
matmuls, f16 KV cache, f16 GELU table, ...).

Model math (with the source that fixes each point):
  * x0 = token_embd[id] * sqrt(n_embd)                      (llama.cpp: ggml_scale(inpL, sqrtf(n_embd)))
  * RMSNorm(x, w) = x / sqrt(mean(x^2) + eps) * w          GGUF norm weights already hold Gemma's "1 + w"
    (convert_hf_to_gguf.py Gemma3Model adds 1 to every *norm.weight), eps = attention.layer_norm_rms_epsilon.
  * per layer: h = attn_norm(x); q = Wq h, k = Wk h, v = Wv h (reshaped to heads of head_dim = key_length);
    q, k RMS-normed per head with attn_q_norm / attn_k_norm (same eps), then RoPE NEOX style
    (pairs (i, i + d/2), theta_i = pos * base^(-2i/d)); q *= f_attention_scale; softmax(q k^T + mask) v;
    GQA: query head h uses kv head h // (n_head / n_head_kv).
  * f_attention_scale = 1/sqrt(head_dim), except llama.cpp's 27B case (62 layers): 1/sqrt(n_embd/n_head).
  * layer kinds: llama.cpp's gemma3 loader calls set_swa_pattern(6) -> layer i is sliding iff i % 6 < 5,
    i.e. global iff i % 6 == 5 (layers 5, 11, 17 of 18). That loader does not read a pattern key; if a
    file has gemma3.attention.sliding_window_pattern it is honored here (a scalar period P -> global
    iff i % P == P - 1; an array -> per-layer flags, true = sliding). No sliding_window key -> no SWA.
    Sliding layers: key position j visible from query position p iff 0 <= p - j < sliding_window
    (llama.cpp is_masked_swa: masked iff p1 - p0 >= n_swa), RoPE base 10000 (llama.cpp hard-codes
    rope_freq_base_train_swa = 10000 for gemma3; a gemma3.rope.freq_base_swa key is honored here),
    no RoPE scaling. Global layers: causal, RoPE base
    gemma3.rope.freq_base, freq_scale = 1/gemma3.rope.scaling.factor if the scaling type is linear.
  * o = Wo attn; x = x + post_attention_norm(o); h = ffn_norm(x);
    f = Wdown( gelu_tanh(Wgate h) * (Wup h) ); x = x + post_ffw_norm(f)
  * logits = output(=token_embd when there is no output.weight) @ output_norm(x);
    final logit softcapping c*tanh(logits/c) only if gemma3.final_logit_softcapping exists.

Usage as a library:
    m = Gemma3Ref("models/gemma-3-270m-q4_k_m.gguf")
    logits = m.logits([2, 651, ...])          # [T, n_vocab], float64, logits at every position
    ids = m.greedy(prompt_ids, 32)            # greedy continuation with an incremental KV cache
Command line:
    python tools/ref_gemma3.py MODEL.gguf ID ID ...   -> prints top-5 of the last position
"""
import math
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

ARCH = "gemma3"


def _field(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    v = f.contents()
    return v


def gelu_tanh(x):
    c = x.dtype.type
    return c(0.5) * x * (c(1.0) + np.tanh(c(math.sqrt(2.0 / math.pi)) * (x + c(0.044715) * x * x * x)))


def rms_norm(x, w, eps):
    # x [..., n]; w [n]
    return (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + x.dtype.type(eps)) * w).astype(x.dtype)


def rope_neox(x, pos, base, freq_scale):
    # x [T, H, d]; pos [T]; rotates pairs (i, i + d/2)
    d = x.shape[-1]
    half = d // 2
    inv = base ** (-2.0 * np.arange(half, dtype=np.float64) / d)
    ang = (np.asarray(pos, dtype=np.float64) * freq_scale)[:, None] * inv[None, :]  # [T, half]
    c = np.cos(ang)[:, None, :]
    s = np.sin(ang)[:, None, :]
    x1 = x[..., :half]
    x2 = x[..., half:]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)


class Gemma3Ref:
    def __init__(self, path):
        self.dtype = np.float64  # as_float32() gives a float32 copy (engine emulation)
        self.kv_f16 = False      # True: K and V rounded to float16 as they enter the cache
        self.act = gelu_tanh     # replaceable (used by tools/gen_golden.py's sensitivity study)
        self.rope = rope_neox
        r = GGUFReader(path)
        arch = _field(r, "general.architecture")
        if arch != ARCH:
            raise ValueError(f"{path}: architecture {arch!r}, expected {ARCH!r}")
        k = lambda name, default=None: _field(r, f"{ARCH}.{name}", default)
        self.n_layer = int(k("block_count"))
        self.n_embd = int(k("embedding_length"))
        self.n_head = int(k("attention.head_count"))
        self.n_head_kv = int(k("attention.head_count_kv", self.n_head))
        self.head_dim = int(k("attention.key_length", self.n_embd // self.n_head))
        self.head_dim_v = int(k("attention.value_length", self.head_dim))
        self.n_ff = int(k("feed_forward_length"))
        self.eps = float(k("attention.layer_norm_rms_epsilon"))
        self.n_swa = int(k("attention.sliding_window", 0) or 0)
        self.rope_base = float(k("rope.freq_base", 10000.0))
        self.rope_base_swa = float(k("rope.freq_base_swa", 10000.0))
        scaling_type = k("rope.scaling.type", "none")
        factor = k("rope.scaling.factor", None)
        self.rope_freq_scale = 1.0
        if factor is not None and float(factor) != 0.0:
            if scaling_type not in ("linear", None):
                raise ValueError(f"unsupported rope scaling type {scaling_type!r}")
            self.rope_freq_scale = 1.0 / float(factor)
        self.final_softcap = k("final_logit_softcapping", None)
        if k("attn_logit_softcapping", None) is not None:
            raise ValueError("attention logit softcapping is not part of Gemma 3")
        # which layers use the sliding window
        pattern = k("attention.sliding_window_pattern", None)
        if self.n_swa == 0:
            self.is_swa = [False] * self.n_layer
        elif pattern is None:
            self.is_swa = [i % 6 < 5 for i in range(self.n_layer)]
        elif isinstance(pattern, (list, tuple)):
            self.is_swa = [bool(v) for v in pattern][: self.n_layer]
        else:
            p = int(pattern)
            self.is_swa = [p == 0 or i % p < p - 1 for i in range(self.n_layer)]
        if self.n_layer == 62:  # llama.cpp LLM_TYPE_27B special case (gemma_pytorch config)
            self.attn_scale = 1.0 / math.sqrt(self.n_embd / self.n_head)
        else:
            self.attn_scale = 1.0 / math.sqrt(self.head_dim)

        t = {tt.name: tt for tt in r.tensors}

        def W(name, shape=None):
            tt = t[name]
            a = dequantize(tt.data, tt.tensor_type).astype(np.float64)
            if shape is not None:
                a = a.reshape(shape)
            return a

        self.tok_embd = W("token_embd.weight")  # [n_vocab, n_embd]
        self.n_vocab = self.tok_embd.shape[0]
        self.output = W("output.weight") if "output.weight" in t else self.tok_embd
        self.output_norm = W("output_norm.weight")
        self.layers = []
        for i in range(self.n_layer):
            p = f"blk.{i}."
            L = {
                "attn_norm": W(p + "attn_norm.weight"),
                "wq": W(p + "attn_q.weight"),  # [n_head*hd, n_embd]
                "wk": W(p + "attn_k.weight"),
                "wv": W(p + "attn_v.weight"),
                "q_norm": W(p + "attn_q_norm.weight"),
                "k_norm": W(p + "attn_k_norm.weight"),
                "wo": W(p + "attn_output.weight"),  # [n_embd, n_head*hd]
                "post_attn_norm": W(p + "post_attention_norm.weight"),
                "ffn_norm": W(p + "ffn_norm.weight"),
                "gate": W(p + "ffn_gate.weight"),
                "up": W(p + "ffn_up.weight"),
                "down": W(p + "ffn_down.weight"),
                "post_ffw_norm": W(p + "post_ffw_norm.weight"),
            }
            assert L["wq"].shape == (self.n_head * self.head_dim, self.n_embd), L["wq"].shape
            assert L["wk"].shape == (self.n_head_kv * self.head_dim, self.n_embd)
            assert L["wo"].shape == (self.n_embd, self.n_head * self.head_dim_v)
            assert L["gate"].shape == (self.n_ff, self.n_embd)
            self.layers.append(L)

    def as_float32(self, kv_f16=True):
        """A copy computing in float32 (weights and activations), K/V cached as float16 when kv_f16:
        an emulation of an engine with f32 arithmetic and a half-precision KV cache."""
        import copy
        c = copy.copy(self)
        f = lambda a: a.astype(np.float32)
        c.dtype = np.float32
        c.kv_f16 = kv_f16
        c.tok_embd = f(self.tok_embd)
        c.output = c.tok_embd if self.output is self.tok_embd else f(self.output)
        c.output_norm = f(self.output_norm)
        c.layers = [{k: f(v) for k, v in L.items()} for L in self.layers]
        return c

    def describe(self):
        return {
            "n_layer": self.n_layer, "n_embd": self.n_embd, "n_head": self.n_head,
            "n_head_kv": self.n_head_kv, "head_dim": self.head_dim, "n_ff": self.n_ff,
            "n_vocab": self.n_vocab, "rms_eps": self.eps, "sliding_window": self.n_swa,
            "global_layers": [i for i, s in enumerate(self.is_swa) if not s],
            "rope_base_global": self.rope_base, "rope_base_sliding": self.rope_base_swa,
            "rope_freq_scale_global": self.rope_freq_scale, "attn_scale": self.attn_scale,
            "embd_scale": math.sqrt(self.n_embd), "final_logit_softcapping": self.final_softcap,
        }

    def new_cache(self):
        return [{"k": np.zeros((0, self.n_head_kv, self.head_dim), self.dtype),
                 "v": np.zeros((0, self.n_head_kv, self.head_dim_v), self.dtype)}
                for _ in range(self.n_layer)]

    def forward(self, ids, cache=None, last_only=False):
        """Runs tokens `ids` at positions len(cache)...; returns logits [T, n_vocab] (or [1, n_vocab])."""
        if cache is None:
            cache = self.new_cache()
        ids = np.asarray(ids, dtype=np.int64)
        T = len(ids)
        p0 = cache[0]["k"].shape[0]
        pos = np.arange(p0, p0 + T)
        dt = self.dtype
        x = self.tok_embd[ids] * dt(math.sqrt(self.n_embd))  # [T, n_embd]
        grp = self.n_head // self.n_head_kv
        for il, L in enumerate(self.layers):
            swa = self.is_swa[il]
            h = rms_norm(x, L["attn_norm"], self.eps)
            q = (h @ L["wq"].T).reshape(T, self.n_head, self.head_dim)
            kk = (h @ L["wk"].T).reshape(T, self.n_head_kv, self.head_dim)
            v = (h @ L["wv"].T).reshape(T, self.n_head_kv, self.head_dim_v)
            q = rms_norm(q, L["q_norm"], self.eps)
            kk = rms_norm(kk, L["k_norm"], self.eps)
            base = self.rope_base_swa if swa else self.rope_base
            fs = 1.0 if swa else self.rope_freq_scale
            q = (self.rope(q, pos, base, fs) * self.attn_scale).astype(dt)
            kk = self.rope(kk, pos, base, fs).astype(dt)
            if self.kv_f16:
                kk = kk.astype(np.float16).astype(dt)
                v = v.astype(np.float16).astype(dt)
            c = cache[il]
            c["k"] = np.concatenate([c["k"], kk], axis=0)
            c["v"] = np.concatenate([c["v"], v], axis=0)
            K, V = c["k"], c["v"]
            kpos = np.arange(K.shape[0])
            diff = pos[:, None] - kpos[None, :]  # [T, Tk]
            allowed = diff >= 0
            if swa:
                allowed &= diff < self.n_swa
            out = np.empty((T, self.n_head, self.head_dim_v), dt)
            for hh in range(self.n_head):
                kvh = hh // grp
                s = q[:, hh, :] @ K[:, kvh, :].T  # [T, Tk]
                s = np.where(allowed, s, -np.inf)
                s = s - s.max(axis=1, keepdims=True)
                e = np.exp(s)
                e /= e.sum(axis=1, keepdims=True)
                out[:, hh, :] = e @ V[:, kvh, :]
            o = out.reshape(T, -1) @ L["wo"].T
            x = x + rms_norm(o, L["post_attn_norm"], self.eps)
            h = rms_norm(x, L["ffn_norm"], self.eps)
            f = (self.act(h @ L["gate"].T) * (h @ L["up"].T)) @ L["down"].T
            x = x + rms_norm(f, L["post_ffw_norm"], self.eps)
        if last_only:
            x = x[-1:]
        x = rms_norm(x, self.output_norm, self.eps)
        logits = x @ self.output.T
        if self.final_softcap:
            cap = float(self.final_softcap)
            logits = cap * np.tanh(logits / cap)
        return logits

    def logits(self, ids):
        """Logits at every position of `ids` (a fresh sequence starting at position 0)."""
        return self.forward(ids)

    def greedy(self, prompt_ids, n, return_gaps=False):
        """Greedy continuation of n tokens; optionally also the top1-top2 logit gap at each step."""
        cache = self.new_cache()
        lg = self.forward(prompt_ids, cache, last_only=True)[-1]
        out, gaps = [], []
        for step in range(n):
            top2 = np.argpartition(-lg, 2)[:2]
            top2 = top2[np.argsort(-lg[top2])]
            nxt = int(top2[0])
            gaps.append(float(lg[top2[0]] - lg[top2[1]]))
            out.append(nxt)
            if step + 1 < n:
                lg = self.forward([nxt], cache, last_only=True)[-1]
        return (out, gaps) if return_gaps else out


def main(argv):
    if len(argv) < 3:
        print(__doc__)
        return 2
    m = Gemma3Ref(argv[1])
    ids = [int(a) for a in argv[2:]]
    lg = m.logits(ids)[-1]
    top = np.argsort(-lg)[:5]
    print(m.describe())
    for i in top:
        print(int(i), float(lg[i]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
