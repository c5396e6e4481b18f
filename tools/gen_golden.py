#!/usr/bin/env python3
"""Writes tests/golden/gemma3_270m.json: reference outputs of the real Gemma 3 270M (Q4_K_M) model.

Two independent references:
  * llama.cpp through llama-cpp-python (CPU): tokenization, last-position logits, greedy continuations;
  * tools/ref_gemma3.py: a float64 numpy forward pass written from the model math.
The test (tests/golden_check.py) compares this project's engine against the file.

Run from the repository root (takes a few minutes, needs llama-cpp-python in .venv):
    OPENBLAS_NUM_THREADS=1 .venv/bin/python tools/gen_golden.py [--model models/gemma-3-270m-q4_k_m.gguf]
"""
import argparse
import hashlib
import json
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_gemma3 import Gemma3Ref  # noqa: E402

import llama_cpp  # noqa: E402
from llama_cpp import Llama  # noqa: E402

CHAT = "<start_of_turn>user\nWhy is the sky blue?<end_of_turn>\n<start_of_turn>model\n"

# (b) last-position logits. Short prompts (5-20 tokens) that also stress the tokenizer:
# special tokens, whitespace runs / tabs / newlines, digits, non-ASCII text.
LOGIT_PROMPTS = [
    ("capital", "The capital of France is"),
    ("chat_sky", CHAT),
    ("code_fib", "def fibonacci(n):\n    if n <"),
    ("mixed", "  Ünïcödé café\t123 😀\n\nok"),
    ("story", "Once upon a time, in a small village, there lived"),
]
# one long prompt (> sliding window of 512 tokens): the only case where the sliding-window mask and
# the choice of which layers are global change the result by a lot (see "sensitivity" in the file)
LONG_NAME = "long_window"
LONG_PROMPT = """\
The old lighthouse stood on a rocky point at the northern end of the island, where the cold current met the warmer water of the bay. For more than a century its keepers had climbed the spiral stairs every evening to light the lamp, polish the great glass lens, and record the weather in a leather book. The entries were short and plain: wind from the west, heavy rain after midnight, a fishing boat passed at dawn. Yet read together they told the story of a small community that depended on the sea for everything it had.
In the spring of 1911 a young engineer named Clara Weiss arrived with a crate of instruments and a letter from the harbor authority. She had been asked to measure the tides, map the shallow reefs, and decide whether the light should be moved to the higher cliff on the other side of the point. The keeper, a quiet man called Tomas, doubted that anything would come of it. Engineers had visited before, he said, and their reports had gathered dust in a drawer in the capital.
Clara worked through the summer. She rowed out to the reefs at low water, lowered a weighted line, and wrote down the depths in neat columns. In the afternoons she sat at the kitchen table and turned the numbers into charts, while Tomas mended nets and listened to the radio. Slowly the two of them became friends. He taught her the names of the currents, which the fishermen had used for generations, and she showed him how the moon and the sun pulled the water in patterns that could be predicted years in advance.
By September the charts were finished. They showed a narrow channel, deeper than anyone had believed, running close to the cliff. A ship that followed it would be safe even in a storm, but only if it could see a light placed exactly at its entrance. Clara recommended building a second, smaller tower on the cliff and keeping the old one as well, so that a captain could line up the two lights and steer between the rocks.
The harbor authority agreed, to the surprise of everyone on the island. Construction began the next year and took three summers, because materials could only be landed in calm weather. When the new light was finally lit, the whole village gathered on the cliff to watch. Tomas climbed the old tower at the same moment, and for the first time the two beams swept across the water together.
In the decades that followed, not a single ship was lost in the channel. The leather books continued, now in a different handwriting, and the charts Clara had drawn were copied into every atlas of the coast. Today both towers are automatic, but visitors still walk out to the point in the evening to see the lights come on, one after the other, as the sun goes down behind the hills and the fishing boats return to the harbor for the night."""

# (c) greedy continuations: candidates in order of preference; the first N_GREEDY_KEEP that pass
# the robustness filter are kept. The first three kept are also decoded together as one batch
# (their prompt lengths differ: 15, 12 and 10 tokens).
GREEDY_CANDIDATES = [
    ("chat_sky", CHAT),
    ("evens", "2, 4, 6, 8,"),
    ("html", "<html>\n<head>\n<title>"),
    ("count", "1, 2, 3, 4, 5,"),
    ("tens", "10, 20, 30, 40,"),
    ("colors", "red, green, blue, red, green, blue,"),
    ("chat_hello", "<start_of_turn>user\nHello! Who are you?<end_of_turn>\n<start_of_turn>model\n"),
    ("capital", "The capital of France is"),
    ("tokyo", "Question: What is the capital of Japan?\nAnswer:"),
]
N_GREEDY_KEEP = 6
N_GEN = 32
N_TOP = 64
N_RANDOM = 192
SEED = 20250301
# a continuation step whose top-2 logit gap is below this, in either reference, makes the prompt
# too fragile to be an exact golden: llama.cpp's own top-2 gaps differ from exact arithmetic by up
# to ~0.2 on this model (measured: "def add(a, b):\n    return" 0.212 vs 0.003; "The capital of
# France is" 0.031 vs 0.005 and the two references diverge at step 15; "The planets of the solar
# system are" diverges at step 0). The candidates below are ordered so that robust ones come first.
MIN_GREEDY_GAP = 0.25
MIN_TOP1_GAP = 0.25  # same for the top-1 check of the logit prompts
TOLERANCE = 0.35     # max |engine - ref_logits| on the stored ids; justified in the file

CI = {  # what tests/golden_check.py runs by default (<= 12 CLI invocations); GOLDEN_ALL=1 runs all
    "tokenize": ["chat_sky", "mixed"],
    "logits": ["capital", "chat_sky", "code_fib", "mixed", "story", LONG_NAME],
}


def erf_approx(x):
    # Abramowitz & Stegun 7.1.26, |error| < 1.5e-7: enough for a sensitivity estimate
    s = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t
               + 0.254829592) * t * np.exp(-a * a)
    return s * y


def rope_interleaved(x, pos, base, freq_scale):
    # GPT-J / "normal" llama.cpp rope: pairs (2i, 2i+1) -- the wrong style for Gemma
    d = x.shape[-1]
    inv = base ** (-2.0 * np.arange(d // 2, dtype=np.float64) / d)
    ang = (np.asarray(pos, dtype=np.float64) * freq_scale)[:, None] * inv[None, :]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = x0 * c - x1 * s
    out[..., 1::2] = x1 * c + x0 * s
    return out


def mutations(ref):
    """Plausible implementation mistakes, each as (name, setup, undo) on the float64 reference."""
    saved = {}

    def setter(**kw):
        def do():
            for k, v in kw.items():
                saved[k] = getattr(ref, k)
                setattr(ref, k, v)
        return do

    def undo():
        for k, v in saved.items():
            setattr(ref, k, v)
        saved.clear()

    norms = ("attn_norm", "q_norm", "k_norm", "post_attn_norm", "ffn_norm", "post_ffw_norm")
    plus_one = [{k: (v + 1.0 if k in norms else v) for k, v in L.items()} for L in ref.layers]
    return [
        ("rope_base_1e4_on_global_layers", setter(rope_base=10000.0), undo),
        ("rope_base_1e6_on_local_layers", setter(rope_base_swa=1e6), undo),
        ("global_layers_at_i%6==0", setter(is_swa=[i % 6 != 0 for i in range(ref.n_layer)]), undo),
        ("no_sliding_window", setter(n_swa=1 << 30), undo),
        ("attn_scale_1/sqrt(n_embd/n_head)", setter(attn_scale=1.0 / math.sqrt(ref.n_embd / ref.n_head)),
         undo),
        ("rms_eps_1e-5", setter(eps=1e-5), undo),
        ("rope_interleaved_pairs", setter(rope=rope_interleaved), undo),
        ("gelu_erf_instead_of_tanh", setter(act=lambda x: 0.5 * x * (1.0 + erf_approx(x / math.sqrt(2.0)))),
         undo),
        ("norm_weights_plus_1_again", setter(layers=plus_one,
                                             output_norm=ref.output_norm + 1.0), undo),
    ]


def llama_last_logits(llm, ids):
    llm.reset()
    llm.eval(ids)
    p = llm._ctx.get_logits_ith(-1)
    return np.ctypeslib.as_array(p, shape=(llm.n_vocab(),)).astype(np.float64).copy()


def top2_gap(lg):
    i = np.argpartition(-lg, 2)[:2]
    a, b = sorted(lg[i], reverse=True)
    return float(a - b)


def llama_greedy_sampler(llm, ids, n):
    """Greedy through llama-cpp-python's own sampler chain, every penalty/filter switched off."""
    llm.reset()
    out = []
    for tok in llm.generate(ids, top_k=1, top_p=1.0, min_p=0.0, typical_p=1.0, temp=0.0,
                            repeat_penalty=1.0, frequency_penalty=0.0, presence_penalty=0.0,
                            tfs_z=1.0, mirostat_mode=0, penalize_nl=False, reset=True):
        out.append(int(tok))
        if len(out) == n:
            break
    return out


def llama_greedy_argmax(llm, ids, n):
    """Greedy by argmax over llama.cpp's raw logits; also returns the top-2 gap at each step."""
    llm.reset()
    llm.eval(ids)
    out, gaps = [], []
    for step in range(n):
        lg = np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(llm.n_vocab(),))
        nxt = int(np.argmax(lg))
        gaps.append(top2_gap(lg.astype(np.float64)))
        out.append(nxt)
        if step + 1 < n:
            llm.eval([nxt])
    return out, gaps


def r4(x):
    return [round(float(v), 4) for v in x]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="models/gemma-3-270m-q4_k_m.gguf")
    ap.add_argument("--out", default="tests/golden/gemma3_270m.json")
    args = ap.parse_args()

    t0 = time.time()
    h = hashlib.sha256()
    with open(args.model, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    model_sha = h.hexdigest()
    # n_ctx=512 as specified for the short prompts; the long prompt needs a larger context
    llm = Llama(model_path=args.model, n_ctx=512, logits_all=False, n_threads=2, seed=0, verbose=False)
    llm_long = Llama(model_path=args.model, n_ctx=1024, logits_all=False, n_threads=2, seed=0, verbose=False)
    ref = Gemma3Ref(args.model)
    ref32 = ref.as_float32(kv_f16=True)
    n_vocab = llm.n_vocab()
    assert n_vocab == ref.n_vocab
    vocab = llm._model.vocab
    eog = sorted(i for i in range(n_vocab) if llama_cpp.llama_vocab_is_eog(vocab, i))
    print(f"loaded in {time.time() - t0:.1f}s; hparams {ref.describe()}; eog ids {eog}", flush=True)

    def tok(text):
        return [int(t) for t in llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)]

    muts = mutations(ref)

    # ---------------- (b) logits (+ the long prompt) ----------------
    logit_cases = []
    worst = 0.0
    for k, (name, text) in enumerate(LOGIT_PROMPTS + [(LONG_NAME, LONG_PROMPT)]):
        ids = tok(text)
        if name == LONG_NAME:
            assert len(ids) > ref.n_swa + 32, len(ids)
            lc = llama_last_logits(llm_long, ids)
        else:
            assert 5 <= len(ids) <= 20, (name, len(ids))
            lc = llama_last_logits(llm, ids)
        npl = ref.forward(ids, last_only=True)[-1]
        e32 = ref32.forward(ids, last_only=True)[-1].astype(np.float64)
        order = np.argsort(-lc)
        top = order[:N_TOP]
        rng = np.random.default_rng(SEED + k)
        rest = np.setdiff1d(np.arange(n_vocab), top)
        rnd = np.sort(rng.choice(rest, size=N_RANDOM, replace=False))
        sel = np.concatenate([top, rnd])
        d_full = float(np.max(np.abs(lc - npl)))
        d_sel = float(np.max(np.abs(lc[sel] - npl[sel])))
        d32 = float(np.max(np.abs(e32[sel] - npl[sel])))
        top1_l, top1_n = int(order[0]), int(np.argmax(npl))
        gap_l, gap_n = top2_gap(lc), top2_gap(npl)
        assert top1_l == top1_n, f"{name}: llama.cpp top-1 {top1_l} != numpy top-1 {top1_n}"
        assert min(gap_l, gap_n) >= MIN_TOP1_GAP, f"{name}: top-1 near tie ({gap_l:.3f}, {gap_n:.3f})"
        assert int(np.argmax(e32)) == top1_n
        sens = {}
        for mname, do, undo in muts:
            do()
            try:
                ml = ref.forward(ids, last_only=True)[-1]
            finally:
                undo()
            sens[mname] = {"maxdiff": round(float(np.max(np.abs(ml[sel] - npl[sel]))), 4),
                           "top1": int(np.argmax(ml))}
        worst = max(worst, d_sel)
        case = {
            "name": name, "prompt": text, "n_tokens": len(ids), "ids": ids,
            "logit_ids": [int(i) for i in sel],
            "llama_logits": r4(lc[sel]),
            "ref_logits": r4(npl[sel]),
            "llama_top1": top1_l, "ref_top1": top1_n,
            "top1_gap_llama": round(gap_l, 4), "top1_gap_ref": round(gap_n, 4),
            "maxdiff_llama_vs_ref_stored": round(d_sel, 4),
            "maxdiff_llama_vs_ref_full_vocab": round(d_full, 4),
            "maxdiff_f32_f16kv_emulation_vs_ref_stored": round(d32, 4),
            "logit_range_llama": [round(float(lc.min()), 3), round(float(lc.max()), 3)],
            "logit_range_ref": [round(float(npl.min()), 3), round(float(npl.max()), 3)],
            "sensitivity": sens,
        }
        logit_cases.append(case)
        print(f"[logits] {name:11s} n={len(ids):3d} top1={top1_l} gap={gap_l:.3f} llama-vs-ref stored="
              f"{d_sel:.4f} full={d_full:.4f}  f32/f16kv-vs-ref={d32:.4f} range=[{lc.min():.2f},"
              f"{lc.max():.2f}] ({time.time() - t0:.0f}s)", flush=True)
        print("         sensitivity: " + ", ".join(f"{m}={v['maxdiff']:.3f}" for m, v in sens.items()),
              flush=True)

    # ---------------- (c) greedy ----------------
    greedy_cases, rejected = [], []
    for name, text in GREEDY_CANDIDATES:
        if len(greedy_cases) >= N_GREEDY_KEEP:
            break
        ids = tok(text)
        s_ids = llama_greedy_sampler(llm, ids, N_GEN)
        a_ids, a_gaps = llama_greedy_argmax(llm, ids, N_GEN)
        r_ids, r_gaps = ref.greedy(ids, N_GEN, return_gaps=True)
        why = []
        if s_ids != a_ids:
            why.append("llama sampler != llama argmax")
        if r_ids != a_ids:
            first = next(i for i, (x, y) in enumerate(zip(r_ids, a_ids)) if x != y)
            why.append(f"numpy differs from llama.cpp at step {first}")
        if set(a_ids) & set(eog):
            why.append("end-of-generation token inside the continuation")
        g = min(min(a_gaps), min(r_gaps))
        if g < MIN_GREEDY_GAP:
            why.append(f"near tie: min top-2 gap {g:.3f}")
        text_out = llm.detokenize(a_ids).decode("utf-8", "replace")
        print(f"[greedy] {name:10s} n={len(ids):2d} min gap llama={min(a_gaps):.3f} ref={min(r_gaps):.3f} "
              f"{'OK' if not why else 'REJECTED: ' + '; '.join(why)} ({time.time() - t0:.0f}s)\n"
              f"         {text_out!r}", flush=True)
        if why:
            rejected.append({"name": name, "prompt": text, "why": "; ".join(why),
                             "min_top2_gap_llama": round(min(a_gaps), 4),
                             "min_top2_gap_ref": round(min(r_gaps), 4)})
            continue
        greedy_cases.append({
            "name": name, "prompt": text, "ids": ids, "greedy_ids": a_ids, "text": text_out,
            "ref_greedy_matches": r_ids == a_ids,
            "min_top2_gap_llama": round(min(a_gaps), 4), "min_top2_gap_ref": round(min(r_gaps), 4),
        })
    assert len(greedy_cases) >= 5, f"only {len(greedy_cases)} robust greedy prompts"
    batch = [c["name"] for c in greedy_cases[:3]]

    emu = max(c["maxdiff_f32_f16kv_emulation_vs_ref_stored"] for c in logit_cases)
    assert TOLERANCE >= 10 * emu, (TOLERANCE, emu)
    golden = {
        "model": os.path.basename(args.model),
        "model_sha256": model_sha,
        "generator": "tools/gen_golden.py (llama.cpp via llama-cpp-python %s, CPU; float64 numpy "
                     "reference tools/ref_gemma3.py)" % llama_cpp.__version__,
        "hparams": ref.describe(),
        "eog_ids": eog,
        "tokenize": "add_bos=True, special=True: <bos>=2 first; special tokens such as <start_of_turn>=105 "
                    "and <end_of_turn>=106 are recognized in the text",
        "ci": dict(CI, greedy=batch, batch=batch),
        "logits": {
            "n_vocab": n_vocab,
            "ids_rule": f"logit_ids = top {N_TOP} ids of llama.cpp's last-position logits (descending), "
                        f"then {N_RANDOM} ids drawn uniformly from the rest with numpy "
                        f"default_rng({SEED} + case index), sorted",
            "tolerance": TOLERANCE,
            "tolerance_rule": (
                "an engine passes a case when max |engine - ref_logits| over logit_ids <= tolerance, its "
                "full-vocabulary argmax equals ref_top1 (= llama_top1) and every logit is finite. "
                "ref_logits = float64 numpy forward pass on the dequantized weights (exact arithmetic). "
                "Why %.2f and not 2x llama.cpp's difference: llama.cpp's CPU backend quantizes matmul "
                "activations to Q8_0/Q8_K, which on this model moves last-position logits by up to %.2f "
                "(stored ids) from exact arithmetic; a tolerance that wide (2x = %.1f) would accept real "
                "math errors, whose effects on the same ids are listed per case under 'sensitivity' "
                "(e.g. rope base 1e4 on global layers, wrong global-layer pattern, eps 1e-5 on short "
                "prompts: 0.4-2 logits). An engine doing float32 arithmetic with a float16 KV cache -- "
                "this project's design -- was emulated (ref.as_float32(kv_f16=True)) at <= %.4f from "
                "exact, so the tolerance leaves > 10x margin for reduction order, native math "
                "functions and f16 GELU/softmax shortcuts. An engine that adopts Q8 activation "
                "quantization would need this file regenerated with a wider, re-justified tolerance. "
                "GELU tanh-vs-erf is below any usable tolerance (see sensitivity) and is not tested "
                "here." % (TOLERANCE, worst, 2 * worst, emu)),
            "measured_max_llama_vs_ref_stored": round(worst, 4),
            "measured_max_f32_f16kv_emulation_vs_ref_stored": round(emu, 4),
            "cases": logit_cases,
        },
        "greedy": {
            "n": N_GEN,
            "rule": "greedy (argmax, no penalties, no early stop) continuation of n tokens; must match "
                    "exactly. A prompt is kept only if llama.cpp's sampler (temp 0, top_k 1, "
                    "repeat/frequency/presence penalties off), argmax over llama.cpp's logits and the "
                    "numpy reference all agree on the n tokens, the top-2 logit gap is >= "
                    f"{MIN_GREEDY_GAP} at every step in both references, and no end-of-generation id "
                    "occurs in the continuation. 'batch' lists three prompts of different lengths that "
                    "are also decoded together in one batch.",
            "min_gap_required": MIN_GREEDY_GAP,
            "cases": greedy_cases,
            "rejected_candidates": rejected,
            "batch": batch,
        },
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(golden, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {args.out} ({os.path.getsize(args.out)} bytes); tolerance {TOLERANCE}; llama-vs-ref "
          f"worst {worst:.4f}; f32/f16kv emulation worst {emu:.4f}; total {time.time() - t0:.0f}s")


if __name__ == "__main__":
    main()
