#!/usr/bin/env python3
"""Float64 numpy reference of the Gemma 4 vision tower ("gemma4v" mmproj GGUF), from the GGUF file alone.

It reads only what the C engine reads (the clip.* keys and the v.* / mm.* tensors; F16 tensors widened with
gguf.quants) and follows transformers' math, docs/design-vision.md 1.3 (not clip.cpp's, 2.3: tanh GELU, not
quick GELU): from one image's prepared patches (transformers' pixel_values rows, (row, col, channel) order,
values in [0, 1]) and their (x, y) positions to the projected rows that replace the text embeddings.

Defaults that the file does not carry are transformers': pooling kernel 3, RoPE theta 100 (design 2.1).

  python tools/ref_gemma4v.py mmproj.gguf      (prints the hyperparameters; the generator imports it)
"""
from __future__ import annotations

import math
import sys

import numpy as np

try:
    import gguf
except ImportError:  # pragma: no cover
    sys.exit("ref_gemma4v.py needs the 'gguf' package (pip install -r tools/requirements-hf.txt)")

from ref_gemma4 import _field_value, read_tensors

POOL_K = 3          # Gemma4VisionConfig.pooling_kernel_size, not in the GGUF
ROPE_THETA = 100.0  # Gemma4VisionConfig.default_theta, not in the GGUF


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def rms(x: np.ndarray, w: np.ndarray | None, eps: float) -> np.ndarray:
    y = x / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
    return y if w is None else y * w


class Gemma4VisionModel:
    def __init__(self, path: str):
        r = gguf.GGUFReader(path)
        self.kv = {k: _field_value(f) for k, f in r.fields.items() if not k.startswith("GGUF.")}
        if self.kv.get("general.architecture") != "clip":
            raise ValueError(f"not an mmproj GGUF: {self.kv.get('general.architecture')}")
        proj = self.kv.get("clip.vision.projector_type", self.kv.get("clip.projector_type"))
        if proj != "gemma4v":
            raise ValueError(f"projector type {proj!r} is not gemma4v")
        self.t, self.types = read_tensors(r)
        k = lambda s: self.kv[f"clip.vision.{s}"]
        self.n_embd = int(k("embedding_length"))
        self.n_layer = int(k("block_count"))
        self.n_head = int(k("attention.head_count"))
        self.n_ff = int(k("feed_forward_length"))
        self.patch = int(k("patch_size"))
        self.eps = float(k("attention.layer_norm_epsilon"))
        self.proj_dim = int(k("projection_dim"))
        self.hd = self.n_embd // self.n_head
        self.pos_table = self.t["v.position_embd.weight"]          # [2][Ppos][Hv]
        self.n_pos = self.pos_table.shape[1]
        p = self.patch
        # v.patch_embd is a conv kernel [Hv][3][p][p]; transformers' patch rows are (row, col, channel)
        w = self.t["v.patch_embd.weight"].reshape(self.n_embd, 3, p, p)
        self.patch_w = w.transpose(0, 2, 3, 1).reshape(self.n_embd, p * p * 3)

    def _linear(self, x: np.ndarray, name: str) -> np.ndarray:
        """y = W x with the clamps of use_clipped_linears when the file carries them (design 2.2)."""
        lo, hi = self.t.get(name + ".input_min"), self.t.get(name + ".input_max")
        if lo is not None:
            x = np.clip(x, lo[0], hi[0])
        y = x @ self.t[name + ".weight"].T
        lo, hi = self.t.get(name + ".output_min"), self.t.get(name + ".output_max")
        if lo is not None:
            y = np.clip(y, lo[0], hi[0])
        return y

    def _rope2d(self, x: np.ndarray, px: np.ndarray, py: np.ndarray) -> np.ndarray:
        """Axial RoPE: first half of each head rotated by x, second by y, NEOX pairing inside each half."""
        half = self.hd // 2
        inv = 1.0 / ROPE_THETA ** (np.arange(0, half, 2, dtype=np.float64) / half)     # hd/4 frequencies
        out = np.empty_like(x)
        for part, pos in ((0, px), (1, py)):
            seg = x[:, :, part * half:(part + 1) * half]
            ang = pos[:, None].astype(np.float64) * inv[None, :]                         # [N][hd/4]
            cos = np.concatenate([np.cos(ang)] * 2, -1)[:, None, :]
            sin = np.concatenate([np.sin(ang)] * 2, -1)[:, None, :]
            a, b = seg[..., :half // 2], seg[..., half // 2:]
            out[:, :, part * half:(part + 1) * half] = seg * cos + np.concatenate([-b, a], -1) * sin
        return out

    def encode(self, patches: np.ndarray, pos: np.ndarray, trace: dict | None = None) -> np.ndarray:
        """patches [N][3p²] in [0, 1], pos [N][2] = (x, y) of one image (no padding rows) -> [N/k²][projection_dim]."""
        t, eps, nh, hd = self.t, self.eps, self.n_head, self.hd
        x = np.asarray(patches, dtype=np.float64)
        px, py = pos[:, 0].astype(np.int64), pos[:, 1].astype(np.int64)
        if px.max() >= self.n_pos or py.max() >= self.n_pos:
            raise ValueError(f"patch grid {px.max() + 1}x{py.max() + 1} exceeds the position table ({self.n_pos})")
        h = (2.0 * (x - 0.5)) @ self.patch_w.T + self.pos_table[0][px] + self.pos_table[1][py]
        if trace is not None:
            trace["embd"] = h.copy()
            trace["layer_out"] = []
        n = h.shape[0]
        for il in range(self.n_layer):
            b = f"v.blk.{il}."
            a = rms(h, t[b + "ln1.weight"], eps)
            q = rms(self._linear(a, b + "attn_q").reshape(n, nh, hd), t[b + "attn_q_norm.weight"], eps)
            k = rms(self._linear(a, b + "attn_k").reshape(n, -1, hd), t[b + "attn_k_norm.weight"], eps)
            v = rms(self._linear(a, b + "attn_v").reshape(n, -1, hd), None, eps)
            q, k = self._rope2d(q, px, py), self._rope2d(k, px, py)
            rep = nh // k.shape[1]
            k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
            s = np.einsum("qhd,khd->hqk", q, k)                    # scaling 1.0, bidirectional over the image
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            o = np.einsum("hqk,khd->qhd", s, v).reshape(n, nh * hd)
            h = h + rms(self._linear(o, b + "attn_out"), t[b + "attn_post_norm.weight"], eps)
            f = rms(h, t[b + "ln2.weight"], eps)
            f = self._linear(gelu_tanh(self._linear(f, b + "ffn_gate")) * self._linear(f, b + "ffn_up"), b + "ffn_down")
            h = h + rms(f, t[b + "ffn_post_norm.weight"], eps)
            if trace is not None:
                trace["layer_out"].append(h.copy())
        gw = int(px.max()) + 1
        cell = px // POOL_K + (gw // POOL_K) * (py // POOL_K)     # row-major k x k cells (Gemma4VisionPooler)
        n_out = n // (POOL_K * POOL_K)
        pooled = np.zeros((n_out, self.n_embd))
        np.add.at(pooled, cell, h / (POOL_K * POOL_K))
        pooled *= math.sqrt(self.n_embd)
        if trace is not None:
            trace["pooled"] = pooled.copy()
        if "v.std_bias" in t:
            pooled = (pooled - t["v.std_bias"]) * t["v.std_scale"]
        if trace is not None:
            trace["standardized"] = pooled.copy()
        return rms(pooled, None, eps) @ t["mm.input_projection.weight"].T


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    m = Gemma4VisionModel(sys.argv[1])
    print(f"Hv {m.n_embd}, {m.n_layer} layers, {m.n_head} heads x {m.hd}, F {m.n_ff}, patch {m.patch}, "
          f"Ppos {m.n_pos}, projection_dim {m.proj_dim}, eps {m.eps}, standardize {'v.std_bias' in m.t}")
