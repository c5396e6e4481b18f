#!/usr/bin/env python3
"""Float64 numpy reference forward for GGUF arch "gemma4", from the GGUF file alone.

It reads only what the C engine reads (metadata keys and tensors; quantized
tensors are dequantized with gguf.quants) and follows docs/GEMMA4.md step by
step, so a match with transformers proves the GGUF carries everything needed.

  python tools/ref_gemma4.py model.gguf --tokens 2,17,300 [--greedy 8]
"""
from __future__ import annotations

import argparse
import math
import sys

import numpy as np

try:
    import gguf
except ImportError:  # pragma: no cover
    sys.exit("ref_gemma4.py needs the 'gguf' package (pip install -r tools/requirements-hf.txt)")


def read_tensors(r):
    """every tensor of a GGUFReader dequantized by gguf-py to float64 in numpy order, and its type name"""
    t, types = {}, {}
    for x in r.tensors:
        ne = [int(v) for v in x.shape]
        t[x.name] = np.asarray(gguf.quants.dequantize(x.data, x.tensor_type), dtype=np.float64).reshape(list(reversed(ne)))
        types[x.name] = x.tensor_type.name
    return t, types


def _field_value(f):
    """Decode a GGUFReader field into a python scalar / str / list."""
    T = gguf.GGUFValueType
    if f.types[0] == T.ARRAY:
        sub = f.types[1] if len(f.types) > 1 else None
        if sub == T.STRING:
            return [bytes(f.parts[i]).decode("utf-8") for i in f.data]
        return [f.parts[i].tolist()[0] for i in f.data]
    if f.types[0] == T.STRING:
        return bytes(f.parts[f.data[0]]).decode("utf-8")
    return f.parts[f.data[0]].tolist()[0]


class Gemma4Model:
    def __init__(self, path: str):
        r = gguf.GGUFReader(path)
        self.kv = {k: _field_value(f) for k, f in r.fields.items() if not k.startswith("GGUF.")}
        arch = self.kv["general.architecture"]
        if arch != "gemma4":
            raise ValueError(f"not a gemma4 GGUF: {arch}")
        self.t, self.types = read_tensors(r)
        k = lambda s, d=None: self.kv.get(f"gemma4.{s}", d)
        self.n_layer = int(k("block_count"))
        self.n_embd = int(k("embedding_length"))
        self.n_head = self._per_layer(k("attention.head_count"))
        self.n_head_kv = self._per_layer(k("attention.head_count_kv"))
        self.n_ff = self._per_layer(k("feed_forward_length"))
        self.is_swa = [bool(x) for x in self._per_layer(k("attention.sliding_window_pattern"))]
        self.hd_full = int(k("attention.key_length"))
        self.hd_swa = int(k("attention.key_length_swa"))
        assert int(k("attention.value_length")) == self.hd_full and int(k("attention.value_length_swa")) == self.hd_swa
        self.n_rot_full = int(k("rope.dimension_count"))
        self.n_rot_swa = int(k("rope.dimension_count_swa"))
        self.theta_full = float(k("rope.freq_base"))
        self.theta_swa = float(k("rope.freq_base_swa"))
        self.window = int(k("attention.sliding_window"))
        self.eps = float(k("attention.layer_norm_rms_epsilon"))
        self.softcap = float(k("final_logit_softcapping", 0.0) or 0.0)
        self.n_kv_shared = int(k("attention.shared_kv_layers", 0) or 0)
        self.n_ple = int(k("embedding_length_per_layer_input", 0) or 0)
        self.n_expert = int(k("expert_count", 0) or 0)
        self.n_expert_used = int(k("expert_used_count", 0) or 0)
        self.first_shared = self.n_layer - self.n_kv_shared
        self.rope_freqs = self.t.get("rope_freqs.weight")
        self.out_w = self.t.get("output.weight", self.t["token_embd.weight"])

    def _per_layer(self, v):
        return list(v) if isinstance(v, list) else [v] * self.n_layer

    def kv_source(self, il: int) -> int:
        """Layers >= n_layer - shared_kv_layers reuse the K/V of the last earlier non-shared layer of the same type."""
        if il < self.first_shared:
            return il
        for j in range(self.first_shared - 1, -1, -1):
            if self.is_swa[j] == self.is_swa[il]:
                return j
        raise ValueError(f"layer {il} has no KV source")

    # --- primitives -------------------------------------------------------
    def rms(self, x, w=None):
        y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps)
        return y * w if w is not None else y

    @staticmethod
    def gelu(x):
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))

    def rope(self, x, pos, n_rot, theta, ff):
        """ggml NEOX rope: pair (i, i + n_rot/2), angle pos * theta^(-2i/n_rot) / ff[i]; x: [T, heads, hd]."""
        half = n_rot // 2
        i = np.arange(half, dtype=np.float64)
        inv = theta ** (-2.0 * i / n_rot)
        if ff is not None:
            inv = inv / ff[:half]
        ang = pos[:, None].astype(np.float64) * inv[None, :]          # [T, half]
        c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        x = x.copy()
        a, b = x[..., :half].copy(), x[..., half:n_rot].copy()
        x[..., :half] = a * c - b * s
        x[..., half:n_rot] = b * c + a * s
        return x

    # --- forward ------------------------------------------------------------
    def forward(self, tokens, trace=None) -> np.ndarray:
        """Logits [T, n_vocab] for one sequence (positions 0..T-1, causal)."""
        t = self.t
        tok = np.asarray(tokens, dtype=np.int64)
        T, H = len(tok), self.n_embd
        pos = np.arange(T)
        x = t["token_embd.weight"][tok] * math.sqrt(H)
        if trace is not None:
            trace["inp_scaled"] = x.copy()
        ple = None
        if self.n_ple:
            P, L = self.n_ple, self.n_layer
            tok_part = t["per_layer_token_embd.weight"][tok].reshape(T, L, P) * math.sqrt(P)
            proj = (x @ t["per_layer_model_proj.weight"].T) / math.sqrt(H)
            proj = self.rms(proj.reshape(T, L, P), t["per_layer_proj_norm.weight"])
            ple = (proj + tok_part) / math.sqrt(2.0)
        kv_cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        causal = pos[:, None] >= pos[None, :]
        for il in range(self.n_layer):
            b = f"blk.{il}."
            swa = self.is_swa[il]
            hd = self.hd_swa if swa else self.hd_full
            nh, nkv = self.n_head[il], self.n_head_kv[il]
            n_rot = self.n_rot_swa if swa else self.n_rot_full
            theta = self.theta_swa if swa else self.theta_full
            ff = None if swa else self.rope_freqs

            h = self.rms(x, t[b + "attn_norm.weight"])
            q = (h @ t[b + "attn_q.weight"].T).reshape(T, nh, hd)
            q = self.rope(self.rms(q, t[b + "attn_q_norm.weight"]), pos, n_rot, theta, ff)
            if il < self.first_shared:
                kraw = (h @ t[b + "attn_k.weight"].T).reshape(T, nkv, hd)
                vraw = (h @ t[b + "attn_v.weight"].T).reshape(T, nkv, hd) if b + "attn_v.weight" in t else kraw
                k = self.rope(self.rms(kraw, t[b + "attn_k_norm.weight"]), pos, n_rot, theta, ff)
                v = self.rms(vraw)                                  # V norm has no weight
                kv_cache[il] = (k, v)
            else:
                k, v = kv_cache[self.kv_source(il)]
                assert k.shape[1] == nkv and k.shape[2] == hd
            mask = causal & ((pos[:, None] - pos[None, :] < self.window) if swa else True)
            grp = nh // nkv
            att = np.empty((T, nh, hd))
            for hh in range(nh):
                kh, vh = k[:, hh // grp, :], v[:, hh // grp, :]
                s = q[:, hh, :] @ kh.T                              # attention scale is 1.0
                s = np.where(mask, s, -np.inf)
                s = np.exp(s - s.max(axis=-1, keepdims=True))
                s /= s.sum(axis=-1, keepdims=True)
                att[:, hh, :] = s @ vh
            o = att.reshape(T, nh * hd) @ t[b + "attn_output.weight"].T
            x = x + self.rms(o, t[b + "post_attention_norm.weight"])

            h = self.rms(x, t[b + "ffn_norm.weight"])
            mlp = (self.gelu(h @ t[b + "ffn_gate.weight"].T) * (h @ t[b + "ffn_up.weight"].T)) @ t[b + "ffn_down.weight"].T
            if b + "ffn_gate_inp.weight" in t:
                mlp = self.rms(mlp, t[b + "post_ffw_norm_1.weight"])
                r = self.rms(x) * t[b + "ffn_gate_inp.scale"] / math.sqrt(H)
                logits = r @ t[b + "ffn_gate_inp.weight"].T               # [T, E]
                p = np.exp(logits - logits.max(-1, keepdims=True))
                p /= p.sum(-1, keepdims=True)
                order = np.argsort(-p, axis=-1, kind="stable")
                top = order[:, : self.n_expert_used]
                if trace is not None and self.n_expert_used < self.n_expert:
                    srt = np.take_along_axis(logits, order, -1)       # gap in router logits, per position
                    gap = srt[:, self.n_expert_used - 1] - srt[:, self.n_expert_used]
                    trace["router_gap"] = min(trace.get("router_gap", math.inf), float(gap.min()))
                    trace["router_gap_pos"] = np.minimum(trace.get("router_gap_pos", np.inf), gap)
                w = np.take_along_axis(p, top, -1)
                w = w / w.sum(-1, keepdims=True) * t[b + "ffn_down_exps.scale"][top]
                h2 = self.rms(x, t[b + "pre_ffw_norm_2.weight"])
                gu_w, dn_w = t[b + "ffn_gate_up_exps.weight"], t[b + "ffn_down_exps.weight"]   # [E,2F,H], [E,H,F]
                F = gu_w.shape[1] // 2
                moe = np.zeros((T, H))
                for ti in range(T):
                    for j in range(self.n_expert_used):
                        e = top[ti, j]
                        gu = gu_w[e] @ h2[ti]
                        moe[ti] += w[ti, j] * (dn_w[e] @ (self.gelu(gu[:F]) * gu[F:]))
                mlp = mlp + self.rms(moe, t[b + "post_ffw_norm_2.weight"])
            x = x + self.rms(mlp, t[b + "post_ffw_norm.weight"])

            if ple is not None:
                g = self.gelu(x @ t[b + "inp_gate.weight"].T) * ple[:, il, :]
                x = x + self.rms(g @ t[b + "proj.weight"].T, t[b + "post_norm.weight"])
            if b + "layer_output_scale.weight" in t:
                x = x * t[b + "layer_output_scale.weight"][0]
            if trace is not None:
                trace.setdefault("layer_out", []).append(x.copy())
        x = self.rms(x, t["output_norm.weight"])
        if trace is not None:                 # what an MTP drafter reads (tools/ref_gemma4_assistant.py)
            trace["kv"], trace["h_norm"] = kv_cache, x.copy()
        logits = x @ self.out_w.T
        if self.softcap:
            logits = np.tanh(logits / self.softcap) * self.softcap
        return logits

    def greedy(self, tokens, n: int) -> list[int]:
        seq = list(tokens)
        out = []
        for _ in range(n):
            nxt = int(np.argmax(self.forward(seq)[-1]))
            out.append(nxt)
            seq.append(nxt)
        return out


def cli(model_cls, doc: str, argv=None, after=None) -> int:
    """The reference CLI: top-5 logits at every position of --tokens, optionally greedy tokens; after(model) last."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("gguf")
    ap.add_argument("--tokens", required=True, help="comma separated token ids")
    ap.add_argument("--greedy", type=int, default=0, help="also print N greedy continuation tokens")
    a = ap.parse_args(argv)
    m = model_cls(a.gguf)
    toks = [int(x) for x in a.tokens.split(",") if x.strip()]
    lg = m.forward(toks)
    for i, row in enumerate(lg):
        top = np.argsort(-row)[:5]
        print(f"pos {i:3d} tok {toks[i]:6d} argmax {top[0]:6d} top5 " + " ".join(f"{j}:{row[j]:.4f}" for j in top))
    if a.greedy:
        print("greedy:", m.greedy(toks, a.greedy))
    if after is not None:
        after(m)
    return 0


def main(argv=None) -> int:
    return cli(Gemma4Model, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
