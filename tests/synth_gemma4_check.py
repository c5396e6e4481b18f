#!/usr/bin/env python3
"""Checks one file written by `clgemma synth` (run by tests/suites/synth_gemma4.sh).

  synth_gemma4_check.py FILE.gguf KEY --vocab VOCAB.gguf --golden tests/golden/synth_gemma4_layout.json
                        --cli build/clgemma --text TEXT [--text TEXT ...]

Prints one PASS/FAIL line per check, named KEY.check (KEY = "model/mix"):
  layout     the header equals llama.cpp's: every metadata key, its value type and value, in
             order, and the tensor table (names, ggml types, shapes, offsets) and file size, as
             llama-quantize wrote them when it quantized `clgemma synth MODEL --mix bf16` of the
             same shape (tests/golden/synth_gemma4_layout.json, made by tools/check_synth_mix.py
             with llama.cpp itself); general.name aside, which names the mix
  tokenizer  the tokenizer.* pairs are byte for byte those of VOCAB (the real Gemma 4 vocabulary)
  dequant    gguf-py (GGUFReader + gguf.quants) reads every tensor and dequantizes every block:
             no NaN/inf (rope_freqs' 1e30 "never rotate" divisors are finite), and the types it
             reports are the layout's. gguf-py needs ~30 s to parse the vocabulary's 777k strings,
             so it reads a copy without the tokenizer.* pairs (tools/gguf_layout.py --strip: the
             other bytes are the file's, and the tokenizer check covers the rest)
  logits     clgemma loads FILE itself, unmodified; for each TEXT its last-position logits
             (`clgemma logits`, ids from `clgemma tokenize`) against the float64 reference
             tools/ref_gemma4.py on the same weights. Tolerance TOL_REL x (max - min of the
             reference logits): the engine keeps K/V in half precision, which moves these logits
             by ~3e-4 of their range (measured: see the PASS lines)
  generate   `clgemma generate -n 4 --ids` (greedy) decodes tokens one at a time; each must be a
             reference argmax within the same tolerance at its position (near-ties may go either way)
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
import gguf_layout  # noqa: E402
import ref_gemma4  # noqa: E402

TOL_REL = 3e-3
N_GEN = 4


def result(key, check, why, ok_detail=""):
    if why:
        print("FAIL %s.%s: %s" % (key, check, why))
    else:
        print("PASS %s.%s%s" % (key, check, " (%s)" % ok_detail if ok_detail else ""))
    sys.stdout.flush()
    return not why


def check_layout(L, want):
    got_kv = [[k, vt, et, None if k.startswith("tokenizer.") or k == "general.name" else v]
              for k, vt, et, v, _, _ in L.kvs]
    for i, (g, w) in enumerate(zip(got_kv, want["kv"])):
        if g[:3] != w[:3]:
            return "pair %d is %s %s[%s], llama.cpp has %s %s[%s]" % (i, g[0], g[1], g[2], w[0], w[1], w[2])
        if isinstance(w[3], float) and isinstance(g[3], float):
            if not math.isclose(g[3], w[3], rel_tol=1e-7):
                return "%s = %r, llama.cpp has %r" % (g[0], g[3], w[3])
        elif g[3] != w[3]:
            return "%s = %r, llama.cpp has %r" % (g[0], g[3], w[3])
    if len(got_kv) != len(want["kv"]):
        return "%d metadata pairs, llama.cpp has %d" % (len(got_kv), len(want["kv"]))
    got_t = [[n, t, ne, off] for n, t, ne, off in L.tensors]
    for i, (g, w) in enumerate(zip(got_t, want["tensors"])):
        if g != w:
            return "tensor %d is %s, llama.cpp has %s" % (i, g, w)
    if len(got_t) != len(want["tensors"]):
        return "%d tensors, llama.cpp has %d" % (len(got_t), len(want["tensors"]))
    if L.size != want["size"]:
        return "file of %d bytes, llama.cpp's has %d" % (L.size, want["size"])
    return ""


def check_dequant(m, L):
    types = {n: gguf_layout.TYPE_NAMES[t] for n, t, _, _ in L.tensors}
    if sorted(m.types) != sorted(types):
        return "gguf-py lists other tensors than the header"
    for name, a in m.t.items():
        if m.types[name] != types[name]:
            return "%s: gguf-py says %s, the header %s" % (name, m.types[name], types[name])
        if not np.isfinite(a).all():
            return "%s (%s): %d NaN/inf values" % (name, types[name], int((~np.isfinite(a)).sum()))
    return ""


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(cmd[:2]), p.returncode, p.stderr.decode()[-300:]))
    return p.stdout.decode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("key")
    ap.add_argument("--vocab", required=True)
    ap.add_argument("--golden", required=True)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--text", action="append", required=True)
    a = ap.parse_args()
    k = a.key
    ok = True
    L = gguf_layout.read(a.file)
    want = json.load(open(a.golden))["layouts"].get(k)
    ok &= result(k, "layout", "no golden layout for %s" % k if want is None else check_layout(L, want),
                 "%d pairs, %d tensors, %d bytes as llama-quantize" % (len(L.kvs), len(L.tensors), L.size))
    V = gguf_layout.read(a.vocab)
    tok = gguf_layout.kv_bytes(L, "tokenizer.")
    ok &= result(k, "tokenizer", "" if tok == gguf_layout.kv_bytes(V, "tokenizer.") else
                 "tokenizer.* pairs differ from %s" % a.vocab, "%d bytes as the vocabulary" % len(tok))
    with tempfile.TemporaryDirectory() as tmp:
        twin = os.path.join(tmp, "weights.gguf")
        gguf_layout.strip(a.file, twin)
        m = ref_gemma4.Gemma4Model(twin)
        ok &= result(k, "dequant", check_dequant(m, L), "%d tensors finite" % len(m.t))
        # ids of each text; greedy tokens after the last one; one reference forward per text (the
        # last over its ids and the generated tokens, which also gives its last-position logits)
        why, gen, detail, worst_gen = "", [], [], 0.0
        refs = []
        try:
            ids = [[int(x) for x in run([a.cli, "tokenize", "-m", a.file, "-p", t]).split()] for t in a.text]
            gen = [int(x) for x in run([a.cli, "generate", "-m", a.file, "-p", a.text[-1], "-n", str(N_GEN),
                                        "--ids"]).split()]
            for i, t in enumerate(a.text):
                trace = {}
                refs.append(m.forward(ids[i] + (gen if i == len(a.text) - 1 else []), trace))
                gap = trace.get("router_gap")
                out = os.path.join(tmp, "logits%d.f32" % i)
                run([a.cli, "logits", "-m", a.file, "-p", t, "-o", out])
                got = np.fromfile(out, dtype=np.float32).astype(np.float64)
                ref = refs[i][len(ids[i]) - 1]
                tol = TOL_REL * float(ref.max() - ref.min())
                d = float(np.abs(got - ref).max()) if got.shape == ref.shape else math.inf
                detail.append("%d tokens |d| %.2e (tol %.2e%s)" % (len(ids[i]), d, tol,
                              ", router gap %.1e" % gap if gap is not None else ""))
                if d > tol and not why:
                    why = "text %d (%d tokens): max |logit - ref| %.3g > %.3g" % (i, len(ids[i]), d, tol)
        except RuntimeError as e:
            why = str(e)
        ok &= result(k, "logits", why, "; ".join(detail))
        why = "no token generated" if not gen else ""
        for j, t in enumerate(gen if refs else []):
            row = refs[-1][len(ids[-1]) - 1 + j]
            tol = TOL_REL * float(row.max() - row.min())
            worst_gen = max(worst_gen, float(row.max() - row[t]))
            if row[t] < row.max() - tol and not why:
                why = "step %d: token %d has ref logit %.4f, the ref argmax %d has %.4f" % (
                    j, t, row[t], int(row.argmax()), row.max())
        ok &= result(k, "generate", why, "%s; worst ref-argmax deficit %.2e" % (gen, worst_gen))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
