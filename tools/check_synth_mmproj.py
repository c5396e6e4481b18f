#!/usr/bin/env python3
"""check_synth_mmproj.py - a `clgemma synth gemma4v-*` projector through llama.cpp's own mtmd (llama-cpp-python
0.3.36, llama.cpp of October 2026: run with .venv-ref/bin/python), on the CPU:

  .venv-ref/bin/python tools/check_synth_mmproj.py TEXT.gguf MMPROJ.gguf IMAGE.png TOKENS [--bidirectional 0|1]

llama.cpp loads the text model and the projector beside it (its gemma4v loader: keys, tensor names, shapes and
types), takes the PNG with --image-min-tokens = --image-max-tokens = TOKENS as llama-mtmd-cli would, and encodes
it. Checks: the image is one chunk of exactly TOKENS soft tokens (the bench's image sizes need no resize on
llama.cpp's side either), the encoder's rows are finite and of the text model's width, and mtmd's attention
choice for the chunk (bidirectional for the 31B / 26B widths, causal for E2B / E4B) is the one given.
Prints one PASS/FAIL line per check and the encode time; exit status 1 on any FAIL.
"""
import argparse
import ctypes
import math
import sys
import time

import llama_cpp
from llama_cpp import mtmd_cpp as mtmd

fails = 0


def check(name, ok, detail):
    global fails
    print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}")
    fails += 0 if ok else 1


@llama_cpp.llama_log_callback
def _quiet(level, text, user):
    pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("text")
    ap.add_argument("mmproj")
    ap.add_argument("image")
    ap.add_argument("tokens", type=int)
    ap.add_argument("--bidirectional", type=int, choices=(0, 1))
    a = ap.parse_args()
    llama_cpp.llama_log_set(_quiet, ctypes.c_void_p(0))
    mtmd.mtmd_helper_log_set(_quiet, ctypes.c_void_p(0))
    llama_cpp.llama_backend_init()
    mp = llama_cpp.llama_model_default_params()
    mp.n_gpu_layers = 0
    model = llama_cpp.llama_model_load_from_file(a.text.encode(), mp)
    if not model:
        check("text_load", False, f"llama.cpp cannot load {a.text}")
        return 1
    cp = mtmd.mtmd_context_params_default()
    cp.use_gpu = False
    cp.print_timings = False
    cp.warmup = False
    cp.n_threads = 2
    cp.image_min_tokens = a.tokens
    cp.image_max_tokens = a.tokens
    ctx = mtmd.mtmd_init_from_file(a.mmproj.encode(), model, cp)
    check("mmproj_load", bool(ctx), f"llama.cpp's mtmd {'loads' if ctx else 'refuses'} {a.mmproj}")
    if not ctx:
        return 1
    bmp = mtmd.mtmd_helper_bitmap_init_from_file(ctx, a.image.encode(), False)
    if not bmp:
        check("image_load", False, f"mtmd cannot read {a.image}")
        return 1
    chunks = mtmd.mtmd_input_chunks_init()
    marker = mtmd.mtmd_default_marker()
    prompt = marker + b"What does it show?"
    text = mtmd.mtmd_input_text(text=prompt, text_len=len(prompt), add_special=True, parse_special=True)
    bitmaps = (mtmd.mtmd_bitmap_p_ctypes * 1)(bmp)
    rc = mtmd.mtmd_tokenize(ctx, chunks, ctypes.byref(text), bitmaps, 1)
    if rc != 0:
        check("tokenize", False, f"mtmd_tokenize returned {rc}")
        return 1
    image = [mtmd.mtmd_input_chunks_get(chunks, i) for i in range(mtmd.mtmd_input_chunks_size(chunks))]
    image = [c for c in image if mtmd.mtmd_input_chunk_get_type(c) == mtmd.MTMD_INPUT_CHUNK_TYPE_IMAGE]
    n = mtmd.mtmd_input_chunk_get_n_tokens(image[0]) if len(image) == 1 else -1
    check("tokens", n == a.tokens, f"{len(image)} image chunk(s), {n} soft tokens (asked {a.tokens})")
    if n < 0:
        return 1
    if a.bidirectional is not None:
        nc = bool(mtmd.mtmd_decode_use_non_causal(ctx, image[0]))
        check("attention", nc == bool(a.bidirectional), f"mtmd decodes the image {'non-causal' if nc else 'causal'}")
    t0 = time.perf_counter()
    rc = mtmd.mtmd_encode_chunk(ctx, image[0])
    dt = time.perf_counter() - t0
    width = llama_cpp.llama_model_n_embd(model)
    out = mtmd.mtmd_get_output_embd(ctx)
    rows = [out[i] for i in range(n * width)] if rc == 0 and out else []
    bad = sum(1 for x in rows if not math.isfinite(x))
    rms = math.sqrt(sum(x * x for x in rows) / len(rows)) if rows and not bad else float("nan")
    check("encode", rc == 0 and rows and not bad,
          f"{n} rows of {width}: {bad} not finite, rms {rms:.3g}; {dt * 1e3:.0f} ms on the CPU")
    mtmd.mtmd_input_chunks_free(chunks)
    mtmd.mtmd_bitmap_free(bmp)
    mtmd.mtmd_free(ctx)
    llama_cpp.llama_model_free(model)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
