#!/usr/bin/env python3
"""check_synth_mix.py - `clgemma synth` against llama.cpp itself (llama-cpp-python 0.3.36, llama.cpp
of October 2026: run with .venv-ref/bin/python; the float64 reference runs in .venv).

  .venv-ref/bin/python tools/check_synth_mix.py [--cli build/clgemma] [--vocab VOCAB.gguf]
        [--write-golden tests/golden/synth_gemma4_layout.json] [--skip-real] [--skip-run]

1. types, real shapes: for gemma4-e2b, -e4b, -26b-a4b and -31b at their full layer counts,
   `clgemma synth MODEL --mix bf16 --sparse` (the converter's layout, data left a hole) goes through
   llama_model_quantize with dry_run (what `llama-quantize --dry-run` does) for Q4_K_M, Q8_0 and
   --pure Q4_K_S; every tensor's target type in llama.cpp's log must equal the type
   `clgemma synth MODEL --mix q4_k_m|q8_0|q4_k --sparse` gives it, in the same order.
2. layout, test shapes: gemma4-tiny, -tiny-moe and -tiny-e are really quantized by llama.cpp from
   their --mix bf16 files; the output's whole header (metadata keys, value types, values and order;
   tensor names, types, shapes, offsets; file size) must equal `clgemma synth --mix` of the same
   shape (general.name aside). --write-golden saves llama.cpp's layouts for make test
   (tests/synth_gemma4_check.py).
3. run: llama.cpp loads each f32 / q8_0 / q4_k_m test-shape file written by clgemma synth and
   evaluates a prompt; its logits at every position are compared with tools/ref_gemma4.py (float64)
   on the same weights: within 3e-3 of the logit range for f32 weights (llama.cpp keeps K/V in f16
   as clgemma does), printed only for quantized weights (llama.cpp's CPU kernels round activations
   to 8 bits, which these random models amplify).
Prints one PASS/FAIL line per check; exit status 1 on any FAIL.
"""
import argparse
import ctypes
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import gguf_layout  # noqa: E402

import llama_cpp  # noqa: E402

REAL = ["gemma4-e2b", "gemma4-e4b", "gemma4-26b-a4b", "gemma4-31b"]
TINY = ["gemma4-tiny", "gemma4-tiny-moe", "gemma4-tiny-e"]
# mix: (llama_ftype, pure)
MIXES = {"q4_k_m": (15, False), "q8_0": (7, False), "q4_k": (14, True)}
TEXT = "The quick brown fox jumps over the lazy dog. 日本語 and code: for (i = 0; i < n; i++) s += a[i];"

_log = []


@llama_cpp.llama_log_callback
def _on_log(level, text, user):
    _log.append(text.decode("utf-8", "replace"))


llama_cpp.llama_log_set(_on_log, ctypes.c_void_p(0))
fails = 0


def result(name, why, detail=""):
    global fails
    if why:
        fails += 1
        print("FAIL %s: %s" % (name, why))
    else:
        print("PASS %s%s" % (name, " (%s)" % detail if detail else ""))
    sys.stdout.flush()


def synth(cli, vocab, model, mix, out, sparse=False):
    cmd = [cli, "synth", model, "-o", out, "--mix", mix, "--vocab", vocab] + (["--sparse"] if sparse else [])
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode:
        raise RuntimeError("clgemma synth %s %s: %s" % (model, mix, p.stderr.decode().strip()))
    return p.stderr.decode().strip()


def quantize(src, dst, ftype, pure, dry):
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype = ftype
    p.pure = pure
    p.dry_run = dry
    p.nthread = 2
    del _log[:]
    rc = llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(p))
    return rc, "".join(_log)


LINE = re.compile(r"\[\s*\d+/\s*\d+\]\s+(\S+)\s+- \[([^\]]*)\], type =\s*(\S+), size =\s*[\d.]+ MiB"
                  r"(?: ->\s*[\d.]+ MiB \((\S+)\))?")


def dry_run_types(log):
    """[(name, target type)] from llama_model_quantize's log, in its order"""
    return [(m.group(1), (m.group(4) or m.group(3)).upper()) for m in LINE.finditer(log)]


def check_types(cli, vocab, tmp):
    for model in REAL:
        src = os.path.join(tmp, model + "-bf16.gguf")
        synth(cli, vocab, model, "bf16", src, sparse=True)
        for mix, (ftype, pure) in MIXES.items():
            name = "types.%s.%s" % (model, mix)
            rc, log = quantize(src, os.path.join(tmp, "none.gguf"), ftype, pure, dry=True)
            want = dry_run_types(log)
            ours = os.path.join(tmp, model + "-" + mix + ".gguf")
            synth(cli, vocab, model, mix, ours, sparse=True)
            got = [(n, gguf_layout.TYPE_NAMES[t]) for n, t, _, _ in gguf_layout.read(ours).tensors]
            why = "llama_model_quantize returned %d" % rc if rc else ""
            if not why and len(want) != len(got):
                why = "llama.cpp lists %d tensors, clgemma synth %d" % (len(want), len(got))
            for (wn, wt), (gn, gt) in zip(want, got):
                if not why and (wn, wt) != (gn, gt):
                    why = "llama.cpp: %s %s, clgemma synth: %s %s" % (wn, wt, gn, gt)
            hist = {}
            for _, t in got:
                hist[t] = hist.get(t, 0) + 1
            result(name, why, "%d tensors equal: %s" % (len(got), ", ".join("%s %d" % kv for kv in sorted(hist.items()))))
            os.remove(ours)
        os.remove(src)


def layout_json(L):
    kv = [[k, vt, et, None if k.startswith("tokenizer.") or k == "general.name" else v]
          for k, vt, et, v, _, _ in L.kvs]
    return {"kv": kv, "tensors": [[n, t, ne, off] for n, t, ne, off in L.tensors], "size": L.size}


def check_layouts(cli, vocab, tmp, golden):
    for model in TINY:
        src = os.path.join(tmp, model + "-bf16.gguf")
        synth(cli, vocab, model, "bf16", src)
        for mix, (ftype, pure) in MIXES.items():
            name = "layout.%s.%s" % (model, mix)
            ref = os.path.join(tmp, model + "-" + mix + "-llama.gguf")
            rc, log = quantize(src, ref, ftype, pure, dry=False)
            if rc:
                result(name, "llama_model_quantize returned %d: %s" % (rc, log[-300:]))
                continue
            ours = os.path.join(tmp, model + "-" + mix + ".gguf")
            synth(cli, vocab, model, mix, ours)
            want, got = layout_json(gguf_layout.read(ref)), layout_json(gguf_layout.read(ours))
            why = ""
            for i, (w, g) in enumerate(zip(want["kv"], got["kv"])):
                if w != g and not why:
                    why = "pair %d: llama.cpp %s, clgemma synth %s" % (i, w, g)
            for i, (w, g) in enumerate(zip(want["tensors"], got["tensors"])):
                if w != g and not why:
                    why = "tensor %d: llama.cpp %s, clgemma synth %s" % (i, w, g)
            if not why and (len(want["kv"]), len(want["tensors"]), want["size"]) != \
                    (len(got["kv"]), len(got["tensors"]), got["size"]):
                why = "llama.cpp: %d pairs, %d tensors, %d bytes; clgemma synth: %d, %d, %d" % (
                    len(want["kv"]), len(want["tensors"]), want["size"], len(got["kv"]), len(got["tensors"]), got["size"])
            if not why and gguf_layout.kv_bytes(gguf_layout.read(ref), "tokenizer.") != \
                    gguf_layout.kv_bytes(gguf_layout.read(ours), "tokenizer."):
                why = "tokenizer.* pairs differ"
            result(name, why, "%d pairs, %d tensors, %d bytes equal" % (len(got["kv"]), len(got["tensors"]), got["size"]))
            if mix in ("q8_0", "q4_k_m"):
                golden[model + "/" + mix] = want
            os.remove(ref)
            os.remove(ours)
        os.remove(src)


REF_SNIPPET = r"""
import sys, numpy as np
sys.path.insert(0, sys.argv[1])
import ref_gemma4
m = ref_gemma4.Gemma4Model(sys.argv[2])
ids = [int(x) for x in sys.argv[3].split(",")]
np.save(sys.argv[4], m.forward(ids))
"""


def check_run(cli, vocab, tmp, ref_py):
    for model in TINY:
        for mix in ("f32", "q8_0", "q4_k_m"):
            name = "llama_run.%s.%s" % (model, mix)
            f = os.path.join(tmp, model + "-" + mix + ".gguf")
            synth(cli, vocab, model, mix, f)
            try:
                llm = llama_cpp.Llama(model_path=f, n_ctx=256, n_batch=256, logits_all=True, verbose=False,
                                      n_threads=2)
            except Exception as e:  # llama.cpp refused the file
                result(name, "llama.cpp does not load it: %s: %s" % (e, "".join(_log)[-400:]))
                os.remove(f)
                continue
            ids = llm.tokenize(TEXT.encode(), add_bos=True, special=True)
            llm.eval(ids)
            got = np.array(llm.scores[:len(ids)], dtype=np.float64)
            del llm
            twin = f + ".weights"
            gguf_layout.strip(f, twin)
            out = os.path.join(tmp, "ref.npy")
            p = subprocess.run([ref_py, "-c", REF_SNIPPET, HERE, twin, ",".join(map(str, ids)), out],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            os.remove(f)
            os.remove(twin)
            if p.returncode:
                result(name, "ref_gemma4.py failed: %s" % p.stderr.decode()[-300:])
                continue
            ref = np.load(out)
            rng = float(ref.max() - ref.min())
            d = np.abs(got - ref).max(axis=1)
            same = int((got.argmax(1) == ref.argmax(1)).sum())
            # f32 weights: llama.cpp's CPU products are float (K/V in f16, as clgemma's), so the same
            # function to ~5e-4 of the range; quantized weights: its kernels round the activations to
            # 8 bits (Q8_0 / Q8_K), which these random models amplify (and near-tied routers flip), so
            # those runs only show that llama.cpp loads and runs the file, with the distance printed
            why = "" if np.isfinite(got).all() else "NaN/inf in llama.cpp's logits"
            if not why and mix == "f32" and d.max() > 3e-3 * rng:
                why = "max |llama.cpp - ref| %.3g over %d positions > 3e-3 of the range %.2f" % (d.max(), len(ids), rng)
            result(name, why, "llama.cpp loads and runs it: %d positions, max |llama.cpp - ref_gemma4| %.2e "
                   "(median over positions %.2e), range %.2f, same argmax at %d/%d" % (
                       len(ids), d.max(), float(np.median(d)), rng, same, len(ids)))


def write_golden(path, golden):
    """one metadata pair or tensor per line"""
    src = ("llama-cpp-python 0.3.36 (llama.cpp of October 2026) llama_model_quantize of `clgemma synth MODEL "
           "--mix bf16` (tools/check_synth_mix.py); kv rows: key, GGUF value type, element type, value "
           "(tokenizer.* and general.name values null); tensor rows: name, ggml type, ne, data offset")
    with open(path, "w") as f:
        f.write('{"source": %s,\n"layouts": {\n' % json.dumps(src))
        for i, (key, L) in enumerate(golden.items()):
            f.write('%s: {"size": %d,\n"kv": [\n' % (json.dumps(key), L["size"]))
            f.write(",\n".join(json.dumps(r, ensure_ascii=False) for r in L["kv"]))
            f.write('],\n"tensors": [\n')
            f.write(",\n".join(json.dumps(r) for r in L["tensors"]))
            f.write("]}%s\n" % ("," if i + 1 < len(golden) else ""))
        f.write("}}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "clgemma"))
    ap.add_argument("--vocab", default=os.path.join(ROOT, ".cache", "llama.cpp", "models", "ggml-vocab-gemma-4.gguf"))
    ap.add_argument("--ref-python", default=os.path.join(ROOT, ".venv", "bin", "python"))
    ap.add_argument("--write-golden")
    ap.add_argument("--skip-real", action="store_true")
    ap.add_argument("--skip-run", action="store_true")
    ap.add_argument("--tmp", default=None, help="scratch directory (default: a new one under /tmp)")
    a = ap.parse_args()
    golden = {}
    with tempfile.TemporaryDirectory(dir=a.tmp) as tmp:
        if not a.skip_real:
            check_types(a.cli, a.vocab, tmp)
        check_layouts(a.cli, a.vocab, tmp, golden)
        if not a.skip_run:
            check_run(a.cli, a.vocab, tmp, a.ref_python)
    if a.write_golden and not fails:
        write_golden(a.write_golden, golden)
        print("wrote %s" % a.write_golden)
    print("%d failed" % fails)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
