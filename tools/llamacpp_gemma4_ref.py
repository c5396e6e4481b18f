#!/usr/bin/env python3
"""llama.cpp's side of the tiny Gemma 4 fixtures (run with .venv-ref: llama-cpp-python 0.3.36, CPU).

  llamacpp_gemma4_ref.py quantize IN.gguf OUT.gguf q4_k_m     llama-quantize's Q4_K_M mix (llama_model_quantize)
  llamacpp_gemma4_ref.py run MODEL.gguf JOB.json OUT.json      logits, greedy and tokenization, as JSON

JOB.json: {"sequences": [[ids...], ...], "greedy": N, "texts": ["...", ...]}. OUT.json holds, per sequence,
the logits at every position (llama.cpp evaluates the whole sequence with logits for all tokens) and N greedy
tokens appended one at a time (argmax of the last logits, llama.cpp's own KV cache), and per text the ids of
llama.cpp's tokenizer (no BOS added: the chat template writes <bos> itself; special tokens parsed), all from the file alone.
"""
from __future__ import annotations

import ctypes
import json
import sys

import numpy as np

import llama_cpp

FTYPES = {"q4_k_m": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M}


def quantize(src: str, dst: str, kind: str) -> None:
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype = FTYPES[kind]
    p.nthread = 1
    rc = llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(p))
    if rc != 0:
        sys.exit(f"llama_model_quantize failed ({rc})")


def run(model: str, job_path: str, out_path: str) -> None:
    job = json.load(open(job_path))
    longest = max(len(s) for s in job["sequences"]) + job["greedy"]
    llm = llama_cpp.Llama(model_path=model, n_ctx=max(64, longest), n_batch=512, n_ubatch=512, logits_all=True,
                          n_threads=1, n_threads_batch=1, verbose=False, seed=0)
    out = {"sequences": [], "tokenized": []}
    for toks in job["sequences"]:
        llm.reset()
        llm.eval(toks)
        logits = np.array(llm.scores[: len(toks)], dtype=np.float64)
        greedy = []
        for _ in range(job["greedy"]):
            nxt = int(np.argmax(llm.scores[llm.n_tokens - 1]))
            greedy.append(nxt)
            llm.eval([nxt])
        out["sequences"].append({"logits": logits.tolist(), "greedy": greedy})
    for text in job.get("texts", []):
        out["tokenized"].append(llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))
    json.dump(out, open(out_path, "w"))


if __name__ == "__main__":
    a = sys.argv[1:]
    if len(a) == 4 and a[0] == "quantize":
        quantize(a[1], a[2], a[3])
    elif len(a) == 4 and a[0] == "run":
        run(a[1], a[2], a[3])
    else:
        sys.exit(__doc__)
