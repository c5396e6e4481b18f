#!/usr/bin/env python3
"""Float64 numpy reference of the Gemma 4 MTP drafter (GGUF arch "gemma4-assistant") beside its target.

It reads only the two GGUF files (the drafter's and the target's, through tools/ref_gemma4.py) and follows
docs/design-mtp-drafter.md section 1.3: one drafter step takes a token, the target's normed hidden row of
the position before, and the target's K/V of its last sliding and last full KV layer; it returns the
drafter's logits (no soft-capping) and the next step's hidden row (post-projection).

  python tools/ref_gemma4_assistant.py drafter.gguf target.gguf --tokens 2,17,300 [--steps 4]
"""
from __future__ import annotations

import argparse
import math
import sys

import numpy as np

sys.path.insert(0, __import__("os").path.dirname(__file__))
import gguf  # noqa: E402

from ref_gemma4 import Gemma4Model, _field_value  # noqa: E402

ARCH = "gemma4-assistant"


class Gemma4AssistantModel(Gemma4Model):
    def __init__(self, path: str):  # noqa: D107 (the target's reader, another architecture's keys)
        r = gguf.GGUFReader(path)
        self.kv = {k: _field_value(f) for k, f in r.fields.items() if not k.startswith("GGUF.")}
        if self.kv["general.architecture"] != ARCH:
            raise ValueError(f"not a {ARCH} GGUF: {self.kv['general.architecture']}")
        self.t, self.types = {}, {}
        for t in r.tensors:
            ne = [int(x) for x in t.shape]
            a = gguf.quants.dequantize(t.data, t.tensor_type)
            self.t[t.name] = np.asarray(a, dtype=np.float64).reshape(list(reversed(ne)))
            self.types[t.name] = t.tensor_type.name
        k = lambda s, d=None: self.kv.get(f"{ARCH}.{s}", d)
        self.n_layer = int(k("block_count"))
        self.n_embd = int(k("embedding_length"))
        self.n_embd_out = int(k("embedding_length_out"))
        self.n_nextn = int(k("nextn_predict_layers", 0))
        self.n_head = self._per_layer(k("attention.head_count"))
        self.n_head_kv = self._per_layer(k("attention.head_count_kv"))
        self.is_swa = [bool(x) for x in self._per_layer(k("attention.sliding_window_pattern"))]
        self.hd_full = int(k("attention.key_length"))
        self.hd_swa = int(k("attention.key_length_swa"))
        self.n_rot_full = int(k("rope.dimension_count"))
        self.n_rot_swa = int(k("rope.dimension_count_swa"))
        self.theta_full = float(k("rope.freq_base"))
        self.theta_swa = float(k("rope.freq_base_swa"))
        self.window = int(k("attention.sliding_window"))
        self.eps = float(k("attention.layer_norm_rms_epsilon"))
        self.rope_freqs = self.t.get("rope_freqs.weight")

    def sources(self, target: Gemma4Model) -> dict[bool, int]:
        """The target layer whose K/V each layer type reads: the KV layer its last layer of that type uses."""
        out = {}
        for il in range(target.n_layer - 1, -1, -1):
            out.setdefault(target.is_swa[il], target.kv_source(il))
        return out

    def step(self, target: Gemma4Model, kv, h, token: int, pos: int, swa_keys: int):
        """One drafter step at position pos: kv = the target's trace["kv"] over positions 0 .. pos-1, h = its
        normed hidden row at pos-1 (or the previous step's h_next); sliding layers see the newest swa_keys
        keys. Returns (logits [n_vocab], h_next [n_embd_out])."""
        t = self.t
        src = self.sources(target)
        e = target.t["token_embd.weight"][token] * math.sqrt(target.n_embd)
        x = t["nextn.pre_projection.weight"] @ np.concatenate([e, h])
        p = np.array([pos])
        for il in range(self.n_layer):
            b = f"blk.{il}."
            swa = self.is_swa[il]
            hd = self.hd_swa if swa else self.hd_full
            nh = self.n_head[il]
            k, v = kv[src[swa]]                                      # [n, nkv, hd]
            if swa:
                k, v = k[-swa_keys:], v[-swa_keys:]
            assert k.shape[2] == hd and nh % k.shape[1] == 0, (il, k.shape, nh, hd)
            a = self.rms(x, t[b + "attn_norm.weight"])
            q = (t[b + "attn_q.weight"] @ a).reshape(1, nh, hd)
            q = self.rope(self.rms(q, t[b + "attn_q_norm.weight"]), p,
                          self.n_rot_swa if swa else self.n_rot_full,
                          self.theta_swa if swa else self.theta_full, None if swa else self.rope_freqs)[0]
            grp = nh // k.shape[1]
            att = np.empty((nh, hd))
            for hh in range(nh):
                s = k[:, hh // grp, :] @ q[hh]                       # attention scale 1.0
                s = np.exp(s - s.max())
                att[hh] = (s / s.sum()) @ v[:, hh // grp, :]
            x = x + self.rms(t[b + "attn_output.weight"] @ att.reshape(-1), t[b + "post_attention_norm.weight"])
            a = self.rms(x, t[b + "ffn_norm.weight"])
            mlp = t[b + "ffn_down.weight"] @ (self.gelu(t[b + "ffn_gate.weight"] @ a) * (t[b + "ffn_up.weight"] @ a))
            x = x + self.rms(mlp, t[b + "post_ffw_norm.weight"])
            x = x * t[b + "layer_output_scale.weight"][0]
        hn = self.rms(x, t["output_norm.weight"])
        return t["token_embd.weight"] @ hn, t["nextn.post_projection.weight"] @ hn

    def draft(self, target: Gemma4Model, tokens, n_steps: int, swa_keys: int | None = None, follow=None):
        """n_steps greedy drafts after tokens (the target's greedy token first, at position len(tokens));
        follow: feed these tokens instead of the drafter's own argmax. Returns (t0, drafted, logits rows)."""
        tr: dict = {}
        t0 = int(np.argmax(target.forward(tokens, trace=tr)[-1]))
        h, tok, rows, out = tr["h_norm"][-1], t0, [], []
        for j in range(n_steps):
            lg, h = self.step(target, tr["kv"], h, tok, len(tokens), swa_keys or self.window + 1)
            rows.append(lg)
            out.append(int(np.argmax(lg)))
            tok = follow[j] if follow is not None else out[-1]
        return t0, out, np.asarray(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("drafter")
    ap.add_argument("target")
    ap.add_argument("--tokens", required=True, help="comma separated token ids (the context)")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--swa-keys", type=int, default=0, help="sliding keys seen (default: window + 1)")
    a = ap.parse_args(argv)
    d, tg = Gemma4AssistantModel(a.drafter), Gemma4Model(a.target)
    toks = [int(x) for x in a.tokens.split(",") if x.strip()]
    t0, out, rows = d.draft(tg, toks, a.steps, a.swa_keys or None)
    print(f"target's next token {t0}; drafted {out}")
    for j, row in enumerate(rows):
        top = np.argsort(-row)[:5]
        print(f"step {j}: " + " ".join(f"{i}:{row[i]:.4f}" for i in top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
