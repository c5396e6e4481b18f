#!/usr/bin/env python3
"""Float64 numpy reference forward for GGUF archs "qwen35" and "qwen35moe", from the GGUF file alone.

It reads only what the C engine reads (metadata keys and tensors as llama.cpp's converter writes them,
docs/design-qwen35.md section 2; quantized tensors dequantized with gguf.quants) and computes what transformers'
Qwen3_5 / Qwen3_5Moe modeling computes (section 1): gated-delta (GDN) layers and gated full-attention layers,
dense SwiGLU or MoE with a sigmoid-gated shared expert.

The GDN scan runs in two independent forms on every call, the token-by-token recurrence and the chunked form
(chunks of CHUNK tokens aligned to absolute positions), and raises if their outputs or final states differ by
more than SCAN_TOL.  A forward may continue a cache (dict) from an earlier call: conv history, delta state and
attention K/V per layer.

  python tools/ref_qwen35.py model.gguf --tokens 1537,872,198 [--greedy 8]
  python tools/ref_qwen35.py --golden tests/golden/qwen35_dense.json build/golden/qwen35_dense.logits

--golden writes the logits of a golden's sequences at every position, for the "ref:<type>" sets its "logits"
section's "reference" part names, in the layout described there (little-endian float32: set after set, sequence
after sequence, [position][vocab]).  `make test` makes them before the suites run; they are not committed.
"""
from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import numpy as np

try:
    import gguf
except ImportError:  # pragma: no cover
    sys.exit("ref_qwen35.py needs the 'gguf' package (pip install -r tools/requirements.txt)")
from ref_gemma4 import _field_value, cli  # noqa: E402  (the same GGUF metadata decoding and CLI)

CHUNK = 64           # llama.cpp's chunk length in the unfused graph (design section 0)
SCAN_TOL = 1e-10     # recurrent vs chunked scan, max |difference| of outputs and states


def silu(x):
    return x / (1.0 + np.exp(-x))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def softplus(x):
    return np.logaddexp(0.0, x)


def delta_recurrent(q, k, v, beta, g, S, rnd=None):
    """Gated delta rule token by token for one value head: q, k [T, dk], v [T, dv], beta, g [T], S [dk, dv];
    rnd, if given, is applied to S after every token (the drift test's negative control rounds it)."""
    o = np.empty_like(v)
    S = S.copy()
    for t in range(len(v)):
        S *= math.exp(g[t])
        delta = beta[t] * (v[t] - S.T @ k[t])
        S += np.outer(k[t], delta)
        if rnd is not None:
            S = rnd(S)
        o[t] = S.T @ q[t]
    return o, S


def delta_chunked(q, k, v, beta, g, S, pos0, chunk=CHUNK):
    """The same scan in chunks: inside a chunk starting from S0, with G the cumulative log decay,
    S_t = e^{G_t} S0 + sum_{j<=t} e^{G_t-G_j} k_j d_j^T, so the updates d solve the unit lower-triangular system
    (I + L) d = beta (v - e^{G} k S0) with L[t,j] = beta_t e^{G_t-G_j} k_t.k_j (j < t); chunk edges at multiples
    of `chunk` in absolute position (pos0 = position of row 0)."""
    T = len(v)
    o = np.empty_like(v)
    S = S.copy()
    edges = sorted({0, T} | {c - pos0 for c in range((pos0 // chunk + 1) * chunk, pos0 + T, chunk)})
    for a, b in zip(edges[:-1], edges[1:]):
        qc, kc, vc, bc = q[a:b], k[a:b], v[a:b], beta[a:b]
        G = np.cumsum(g[a:b])
        decay = np.exp(G[:, None] - G[None, :])                     # e^{G_t - G_j}
        lower = np.tril(np.ones((b - a, b - a), dtype=bool), -1)
        L = np.where(lower, bc[:, None] * decay * (kc @ kc.T), 0.0)
        rhs = bc[:, None] * (vc - np.exp(G)[:, None] * (kc @ S))
        d = np.linalg.solve(np.eye(b - a) + L, rhs)
        causal = np.tril(np.ones((b - a, b - a), dtype=bool))
        o[a:b] = np.exp(G)[:, None] * (qc @ S) + np.where(causal, decay * (qc @ kc.T), 0.0) @ d
        S = math.exp(G[-1]) * S + (np.exp(G[-1] - G)[:, None] * kc).T @ d
    return o, S


class Qwen35Model:
    def __init__(self, path: str):
        r = gguf.GGUFReader(path)
        self.kv = {k: _field_value(f) for k, f in r.fields.items() if not k.startswith("GGUF.")}
        self.arch = self.kv["general.architecture"]
        if self.arch not in ("qwen35", "qwen35moe"):
            raise ValueError(f"not a qwen35/qwen35moe GGUF: {self.arch}")
        # numpy shapes are ggml's ne reversed: [rows][columns]
        self.t = {t.name: np.asarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float64)
                  .reshape([int(x) for x in t.shape][::-1]) for t in r.tensors}
        self.types = {t.name: t.tensor_type.name for t in r.tensors}
        k = lambda s, d=None: self.kv.get(f"{self.arch}.{s}", d)
        self.n_layer = int(k("block_count")) - int(k("nextn_predict_layers", 0) or 0)    # MTP blocks follow the trunk
        self.n_embd = int(k("embedding_length"))
        self.n_head = int(k("attention.head_count"))
        self.n_head_kv = int(k("attention.head_count_kv"))
        self.hd = int(k("attention.key_length"))
        assert int(k("attention.value_length")) == self.hd
        self.n_rot = int(k("rope.dimension_count"))
        self.theta = float(k("rope.freq_base"))
        self.eps = float(k("attention.layer_norm_rms_epsilon"))
        rec = k("attention.recurrent_layers")
        if rec is None:                                             # llama.cpp's fallback: the interval rule
            n = int(k("full_attention_interval", 4))
            rec = [(i + 1) % n != 0 for i in range(self.n_layer)]
        self.recurrent = [bool(x) for x in rec[: self.n_layer]]
        self.kc = int(k("ssm.conv_kernel"))
        self.dk = int(k("ssm.state_size"))
        self.hk = int(k("ssm.group_count"))
        self.hv = int(k("ssm.time_step_rank"))
        self.dv = int(k("ssm.inner_size")) // self.hv
        self.n_expert = int(k("expert_count", 0) or 0)
        self.n_expert_used = int(k("expert_used_count", 0) or 0)
        self.out_w = self.t.get("output.weight", self.t["token_embd.weight"])
        self.scan_max_diff = 0.0                                    # largest recurrent-vs-chunked difference seen
        self.state_round = None     # a function applied to each head's state after every token (then no chunked form)

    # --- primitives -------------------------------------------------------
    def rms(self, x, w=None):
        y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps)
        return y * w if w is not None else y

    def rope(self, x, pos):
        """NEOX rope on the first n_rot dims: pair (i, i + n_rot/2), angle pos * theta^(-2i/n_rot); x [T, heads, hd]."""
        half = self.n_rot // 2
        inv = self.theta ** (-2.0 * np.arange(half, dtype=np.float64) / self.n_rot)
        ang = pos[:, None].astype(np.float64) * inv[None, :]
        c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        x = x.copy()
        a, b = x[..., :half].copy(), x[..., half:self.n_rot].copy()
        x[..., :half] = a * c - b * s
        x[..., half:self.n_rot] = b * c + a * s
        return x

    # --- mixers -------------------------------------------------------------
    def gdn(self, il, h, st, pos0, trace):
        t, b = self.t, f"blk.{il}."
        T = len(h)
        Hk, Hv, dk, dv, Kc = self.hk, self.hv, self.dk, self.dv, self.kc
        mixed = h @ t[b + "attn_qkv.weight"].T                      # [T, Dc]: q, k, then v (value heads tiled)
        z = (h @ t[b + "attn_gate.weight"].T).reshape(T, Hv, dv)
        beta = sigmoid(h @ t[b + "ssm_beta.weight"].T)              # [T, Hv]
        g = t[b + "ssm_a"] * softplus(h @ t[b + "ssm_alpha.weight"].T + t[b + "ssm_dt.bias"])   # ssm_a = -exp(A_log)
        w = t[b + "ssm_conv1d.weight"]                              # [Dc, Kc]
        hist = st.get("conv", np.zeros((Kc - 1, mixed.shape[1])))
        xin = np.concatenate([hist, mixed])                         # the previous Kc-1 inputs, then this run
        conv = sum(xin[j:j + T] * w[:, j] for j in range(Kc))
        st["conv"] = xin[-(Kc - 1):]
        y = silu(conv)
        q = y[:, : Hk * dk].reshape(T, Hk, dk)
        k = y[:, Hk * dk: 2 * Hk * dk].reshape(T, Hk, dk)
        v = y[:, 2 * Hk * dk:].reshape(T, Hv, dv)
        q = q / np.sqrt(np.sum(q * q, -1, keepdims=True) + 1e-6) / math.sqrt(dk)
        k = k / np.sqrt(np.sum(k * k, -1, keepdims=True) + 1e-6)
        S0 = st.get("ssm", np.zeros((Hv, dk, dv)))
        o = np.empty((T, Hv, dv))
        S1 = np.empty_like(S0)
        for hh in range(Hv):
            kh = hh % Hk                                            # the converter's tiled value-head order
            o_r, S_r = delta_recurrent(q[:, kh], k[:, kh], v[:, hh], beta[:, hh], g[:, hh], S0[hh], self.state_round)
            if self.state_round is not None:                        # no chunked form rounds per token
                o[:, hh], S1[hh] = o_r, S_r
                continue
            o_c, S_c = delta_chunked(q[:, kh], k[:, kh], v[:, hh], beta[:, hh], g[:, hh], S0[hh], pos0)
            diff = max(float(np.abs(o_r - o_c).max()), float(np.abs(S_r - S_c).max()))
            self.scan_max_diff = max(self.scan_max_diff, diff)
            if diff > SCAN_TOL:
                raise AssertionError(f"layer {il} head {hh}: recurrent vs chunked scan differ by {diff:.3e}")
            o[:, hh], S1[hh] = o_r, S_r
        st["ssm"] = S1
        if trace is not None:
            trace.setdefault("gdn_g", []).append(g.copy())
        o = self.rms(o, t[b + "ssm_norm.weight"]) * silu(z)        # gated norm: weight as is, SiLU(z)
        return o.reshape(T, Hv * dv) @ t[b + "ssm_out.weight"].T

    def attention(self, il, h, st, pos):
        t, b = self.t, f"blk.{il}."
        T, nh, nkv, hd = len(h), self.n_head, self.n_head_kv, self.hd
        qg = (h @ t[b + "attn_q.weight"].T).reshape(T, nh, 2 * hd)  # per head: query then gate
        q, gate = qg[..., :hd], qg[..., hd:].reshape(T, nh * hd)
        q = self.rope(self.rms(q, t[b + "attn_q_norm.weight"]), pos)
        k = self.rope(self.rms((h @ t[b + "attn_k.weight"].T).reshape(T, nkv, hd), t[b + "attn_k_norm.weight"]), pos)
        v = (h @ t[b + "attn_v.weight"].T).reshape(T, nkv, hd)
        if "k" in st:
            k, v = np.concatenate([st["k"], k]), np.concatenate([st["v"], v])
        st["k"], st["v"] = k, v
        kpos = np.arange(len(k))
        mask = kpos[None, :] <= pos[:, None]
        grp = nh // nkv
        att = np.empty((T, nh, hd))
        for hh in range(nh):
            s = (q[:, hh] @ k[:, hh // grp].T) / math.sqrt(hd)
            s = np.where(mask, s, -np.inf)
            s = np.exp(s - s.max(-1, keepdims=True))
            att[:, hh] = (s / s.sum(-1, keepdims=True)) @ v[:, hh // grp]
        return (att.reshape(T, nh * hd) * sigmoid(gate)) @ t[b + "attn_output.weight"].T

    def ffn(self, il, h, trace):
        t, b = self.t, f"blk.{il}."
        if self.n_expert == 0:
            return (silu(h @ t[b + "ffn_gate.weight"].T) * (h @ t[b + "ffn_up.weight"].T)) @ t[b + "ffn_down.weight"].T
        logits = h @ t[b + "ffn_gate_inp.weight"].T                  # [T, E]
        p = np.exp(logits - logits.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        order = np.argsort(-logits, axis=-1, kind="stable")
        top = order[:, : self.n_expert_used]
        if trace is not None and self.n_expert_used < self.n_expert:
            srt = np.take_along_axis(logits, order, -1)
            gap = srt[:, self.n_expert_used - 1] - srt[:, self.n_expert_used]
            trace["router_gap_pos"] = np.minimum(trace.get("router_gap_pos", np.inf), gap)
        wt = np.take_along_axis(p, top, -1)
        wt /= wt.sum(-1, keepdims=True)
        gw, uw, dw = t[b + "ffn_gate_exps.weight"], t[b + "ffn_up_exps.weight"], t[b + "ffn_down_exps.weight"]
        out = np.zeros_like(h)
        for ti in range(len(h)):
            for j, e in enumerate(top[ti]):
                out[ti] += wt[ti, j] * (dw[e] @ (silu(gw[e] @ h[ti]) * (uw[e] @ h[ti])))
        shared = (silu(h @ t[b + "ffn_gate_shexp.weight"].T) * (h @ t[b + "ffn_up_shexp.weight"].T)) \
            @ t[b + "ffn_down_shexp.weight"].T
        gate = sigmoid(h @ t[b + "ffn_gate_inp_shexp.weight"].reshape(-1))
        return out + gate[:, None] * shared

    # --- forward ------------------------------------------------------------
    def forward(self, tokens, cache=None, trace=None) -> np.ndarray:
        """Logits [T, n_vocab] for tokens at positions cache["n"].. (0 without a cache); the cache is updated."""
        t = self.t
        cache = {} if cache is None else cache
        pos0 = cache.get("n", 0)
        tok = np.asarray(tokens, dtype=np.int64)
        pos = np.arange(pos0, pos0 + len(tok))
        x = t["token_embd.weight"][tok].copy()                      # no embedding scale
        for il in range(self.n_layer):
            st = cache.setdefault(il, {})
            h = self.rms(x, t[f"blk.{il}.attn_norm.weight"])        # (1 + w) baked in by the converter
            x = x + (self.gdn(il, h, st, pos0, trace) if self.recurrent[il] else self.attention(il, h, st, pos))
            x = x + self.ffn(il, self.rms(x, t[f"blk.{il}.post_attention_norm.weight"]), trace)
            if trace is not None:
                trace.setdefault("layer_out", []).append(x.copy())
        cache["n"] = pos0 + len(tok)
        return self.rms(x, t["output_norm.weight"]) @ self.out_w.T

    def greedy(self, tokens, n: int) -> list[int]:
        cache: dict = {}
        row = self.forward(tokens, cache)[-1]
        out = []
        for _ in range(n):
            out.append(int(np.argmax(row)))
            row = self.forward([out[-1]], cache)[-1]
        return out


def write_golden_logits(golden_path: str, out: str) -> None:
    """The "reference" logits of a golden (see the module docstring), written atomically to out."""
    root = Path(__file__).resolve().parent.parent
    golden = json.loads(Path(golden_path).read_text())
    spec = golden["logits"]["reference"]
    blobs = []
    for name in spec["sets"]:
        kind, t = name.split(":", 1)
        assert kind == "ref", name
        m = Qwen35Model(str(root / golden["gguf"][t]))
        blobs += [m.forward(seq["tokens"]).astype("<f4").reshape(-1) for seq in golden["sequences"]]
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    tmp = f"{out}.tmp"
    np.concatenate(blobs).tofile(tmp)
    os.replace(tmp, out)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--golden"]:
        if len(argv) != 3:
            sys.exit("usage: ref_qwen35.py --golden GOLDEN.json OUT.logits")
        write_golden_logits(argv[1], argv[2])
        return 0
    return cli(Qwen35Model, __doc__, argv, after=lambda m: print(
        f"recurrent vs chunked scan: max |diff| {m.scan_max_diff:.3e} (limit {SCAN_TOL:g})"))


if __name__ == "__main__":
    sys.exit(main())
