#!/usr/bin/env python3
"""The reference for the engine's text forward with image rows: Gemma 4 logits of prompts holding images.

docs/design-vision.md section 5, item 2 (the logits). This script
  1. builds the tiny Gemma4ForConditionalGeneration of tools/gen_gemma4_vision_fixtures.py (make_model: the
     `dense` fixture's text model + the four multimodal tokens 869..872 + the random vision tower; unclipped)
     twice, float32 eager, the same weights (asserted): one with use_bidirectional_attention "vision" (the
     saved config's; with mm_token_type_ids given, the sliding layers let each image's tokens see one another,
     design 3.3), one with it None (plain causal masks);
  2. runs CASES (below) through each: the images prepared by transformers' Gemma4ImageProcessorPil at
     MAX_SOFT_TOKENS 70 (the generator's processor(); one processor call per prompt, the prompt's images
     together), the placeholder positions holding image_token_id 871 (transformers looks up pad there and
     scatters the projected rows unscaled, design 3.2), mm_token_type_ids 1 at those positions and 0 elsewhere
     (transformers' forward builds the block mask only when it is given: modeling_gemma4.py:2480-2487).
     BOI / EOI are STAND-INS: two ordinary ids of the 869-token dense vocabulary (STANDIN_TEXT), because the
     engine test runs the committed f32 dense GGUF (tests/fixtures/gemma4_dense.gguf), which lacks 869..872;
     the rows depend only on the ids' embeddings, so the engine given the same ids must give the same logits.
     Logits: the first 869 vocabulary columns (the softcap is elementwise, so they do not depend on the four
     extra embedding rows), every position (image positions included). Checked: the two masks give logits
     differing by more than MIN_MASK_DELTA inside / after the images (the mask bites: 60+ image tokens, sliding
     window 8) and equal before the first image; the same models in float64 (the floor of a tolerance);
  3. converts the saved model's text part with llama.cpp's convert_hf_to_gguf.py --outtype q8_0 (as the
     generator converts it to f32): tests/fixtures/gemma4_vision_text_q8_0.gguf, the dense text model WITH the
     real tokens <|image> <image|> <|image|> <|video|> (869..872) and the chat template, for API end-to-end
     tests (checked: the tokens, the template, every tensor but the norms Q8_0, < 1.5 MB); the case
     real_ids_q8 (one_image's layout with the real ids 869 / 870, bidirectional) gives its reference: HF
     float32 on the original weights (what the q8_0 file approximates) and, for information, HF float32 on the
     q8_0 file's dequantized weights;
  4. writes tests/golden/gemma4_vision_text.json (cases, tokens with -1 at image positions, image offsets,
     agreement numbers, the binary's layout) and tests/golden/gemma4_vision_text.bin.

Storage (the .bin must stay < 2 MB; 869 float32 columns are 3,476 bytes a row): the bidirectional rows (the
mode of this fixture's config, the new mask path) are float32; the causal rows and real_ids_q8's rows are
float16 (rounding <= 2^-11 relative, <= 0.0078 absolute below |32|: the logits are softcapped at 30; recorded
per set as max_abs_storage), which is well below the tolerances those rows are for (causal: the mask switch
and the causal path, already tested on text; q8_0: >= 0.1). one_image is stored at every position; the
others from their first image's offset (rows before it are the same text prefix in both modes, asserted).

Run from the repository root (needs .venv-hf and sh deploy/fetch_llama_ref.sh):
    .venv-hf/bin/python tools/gen_gemma4_vision_text_golden.py
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import torch  # noqa: E402
import transformers  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

import gen_gemma4_fixtures as g4  # noqa: E402
import gen_gemma4_vision_fixtures as vf  # noqa: E402
from ref_gemma4 import Gemma4Model  # noqa: E402

FIX = ROOT / "tests" / "fixtures"
Q8_OUT = FIX / "gemma4_vision_text_q8_0.gguf"
MMPROJ = vf.OUT["f32"]
GOLDEN = ROOT / "tests" / "golden" / "gemma4_vision_text.json"
BIN = ROOT / "tests" / "golden" / "gemma4_vision_text.bin"
N_COLS = 869                 # the dense vocabulary: the columns the engine on gemma4_dense.gguf produces
STANDIN_TEXT = ("<", ">")   # BOI / EOI stand-ins: ordinary single-character tokens of the dense vocabulary
MIN_MASK_DELTA = 0.05        # bidirectional vs causal, max |delta| over positions from the first image on
HF32_VS_HF64_MAX = 1e-3      # float32 vs float64, max |logit delta| (softcap 30; measured 2.7e-4)
MAX_BIN = 2_000_000
MAX_Q8 = 1_500_000
IMG = "@"                    # in CASES: an image (name follows)
CASES = [  # (name, segments): text (tokenized, no special tokens), ("boi",), (IMG, image), ("eoi",)
    ("one_image", ["What is in it", ("boi",), (IMG, "grad_64x48"), ("eoi",), " The image shows"]),
    ("two_images", ["Compare these", ("boi",), (IMG, "grad_64x48"), ("eoi",), " and this",
                    ("boi",), (IMG, "noise_40x130"), ("eoi",), " They differ"]),
    ("image_first", [("boi",), (IMG, "mix_432x336"), ("eoi",), " Why"]),
]


def build_tokens(segments, tk: Tokenizer, boi: int, eoi: int, n_soft: dict[str, int]) -> tuple[list[int], list[dict]]:
    """BOS + the segments; image positions as -1, the images as {image, offset, n}."""
    toks, imgs = [2], []
    for s in segments:
        if isinstance(s, str):
            ids = tk.encode(s, add_special_tokens=False).ids
            assert ids and max(ids) < N_COLS, (s, ids)
            toks += ids
        elif s[0] == "boi":
            toks.append(boi)
        elif s[0] == "eoi":
            toks.append(eoi)
        else:
            imgs.append({"image": s[1], "offset": len(toks), "n": n_soft[s[1]]})
            toks += [-1] * n_soft[s[1]]
    return toks, imgs


def forward(model, toks: list[int], imgs: list[dict], images: dict, proc, image_id: int, dtype,
            mm_types: bool = True) -> np.ndarray:
    """Logits [n][N_COLS] (float64 copy of the model's dtype), mm_token_type_ids given (unless not mm_types)."""
    batch = {k: np.asarray(v) for k, v in proc([images[i["image"]] for i in imgs], return_tensors="np").items()}
    assert [int(x) for x in batch["num_soft_tokens_per_image"]] == [i["n"] for i in imgs]
    ids = torch.tensor([[image_id if t < 0 else t for t in toks]])
    mm = (ids == image_id).long()
    with torch.no_grad():
        out = model(input_ids=ids, pixel_values=torch.from_numpy(batch["pixel_values"]).to(dtype),
                    image_position_ids=torch.from_numpy(batch["image_position_ids"]),
                    mm_token_type_ids=mm if mm_types else None)
    lg = out.logits[0]
    assert lg.dtype == dtype and lg.shape[0] == len(toks)
    return lg[:, :N_COLS].double().numpy()


def set_mode(model, bidir: bool):
    tc = model.config.get_text_config()
    tc.use_bidirectional_attention = "vision" if bidir else None
    assert model.model.config.get_text_config().use_bidirectional_attention == tc.use_bidirectional_attention
    return model


def load_gguf_weights(model, ref_f32: Gemma4Model, ref_q: Gemma4Model) -> None:
    """Replace the text model's weights by the dequantized ones of ref_q (names found on the f32 file)."""
    lm = model.model.language_model
    names = g4.gguf_to_hf_names(ref_f32, lm)
    missing = set(ref_f32.t) - set(names) - {"rope_freqs.weight"}
    assert not missing, sorted(missing)
    sd = lm.state_dict()
    with torch.no_grad():
        for g, n in names.items():
            assert ref_q.t[g].shape == tuple(sd[n].shape), (g, n)
            sd[n].copy_(torch.from_numpy(ref_q.t[g].astype(np.float32)))
    assert torch.equal(model.lm_head.weight, lm.embed_tokens.weight)


def check_q8(path: Path, n_base: int, ids: dict[str, int]) -> dict:
    r = Gemma4Model(str(path))
    toks = r.kv["tokenizer.ggml.tokens"]
    assert len(toks) == n_base + len(vf.MM_TOKENS) and r.t["token_embd.weight"].shape[0] == len(toks)
    for t in vf.MM_TOKENS:
        assert toks[ids[t]] == t, (t, ids[t], toks[ids[t]])
    tmpl = r.kv.get("tokenizer.chat_template", "")
    assert "<|image|>" in tmpl and "<|turn>" in tmpl, "no chat template (or one without images)"
    types = sorted(set(r.types.values()))
    q8 = [n for n, t in r.types.items() if t == "Q8_0"]
    assert "token_embd.weight" in q8 and all(r.t[n].ndim == 1 for n, t in r.types.items() if t != "Q8_0"), r.types
    size = path.stat().st_size
    assert size < MAX_Q8, size
    return {"file": str(path.relative_to(ROOT)), "bytes": size, "tensor_types": types, "n_q8_0": len(q8),
            "n_vocab": len(toks), "multimodal_tokens": {t: ids[t] for t in vf.MM_TOKENS}, "chat_template": True}


def main() -> int:
    torch.set_num_threads(2)
    images = dict(vf.make_images())
    proc = vf.processor()
    n_soft = {n: int(proc([im], return_tensors="np")["num_soft_tokens_per_image"][0]) for n, im in images.items()}
    with tempfile.TemporaryDirectory() as td:
        td = Path(td)
        tokdir, n_base, ids = vf.tokenizer_dir(td)
        assert n_base == N_COLS
        tk = Tokenizer.from_file(str(tokdir / "tokenizer.json"))
        bidir = vf.make_model(n_base, ids)
        causal = set_mode(vf.make_model(n_base, ids), False)
        assert bidir.config.get_text_config().use_bidirectional_attention == "vision"
        sa, sb = bidir.state_dict(), causal.state_dict()
        assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa), "make_model is not deterministic"
        hf_dir = td / "gemma-4-tiny-vision"
        vf.save_hf(bidir, hf_dir, tokdir)
        f32_text = td / "text_f32.gguf"
        for out, t in ((f32_text, "f32"), (Q8_OUT, "q8_0")):
            g4.run([sys.executable, g4.LLAMA / "convert_hf_to_gguf.py", hf_dir, "--outfile", out, "--outtype", t],
                   f"convert_hf_to_gguf.py (text) --outtype {t}")
        ref_f32 = Gemma4Model(str(f32_text))
    dense = Gemma4Model(str(vf.TARGET_GGUF))
    assert set(ref_f32.t) == set(dense.t)
    for n in dense.t:       # the converted text part is the dense fixture but for the four new embedding rows
        assert np.array_equal(ref_f32.t[n][:n_base] if n == "token_embd.weight" else ref_f32.t[n], dense.t[n]), n
    q8_info = check_q8(Q8_OUT, n_base, ids)

    boi_s, eoi_s = (tk.token_to_id(t) for t in STANDIN_TEXT)
    assert boi_s is not None and eoi_s is not None and max(boi_s, eoi_s) < N_COLS
    image_id = ids["<|image|>"]
    modes = {"bidirectional": bidir, "causal": causal}

    cases = []
    for name, segs in CASES:
        toks, imgs = build_tokens(segs, tk, boi_s, eoi_s, n_soft)
        cases.append({"name": name, "ids": "standin", "toks": toks, "imgs": imgs,
                      "first_row": 0 if name == "one_image" else imgs[0]["offset"],
                      "lg": {m: forward(mdl, toks, imgs, images, proc, image_id, torch.float32)
                             for m, mdl in modes.items()}})
    one = next(c for c in cases if c["name"] == "one_image")
    # "vision" without mm_token_type_ids is transformers' causal path: the causal model's logits, exactly
    assert np.array_equal(forward(bidir, one["toks"], one["imgs"], images, proc, image_id, torch.float32, False),
                          one["lg"]["causal"])
    toks_r, imgs_r = build_tokens(CASES[0][1], tk, ids["<|image>"], ids["<image|>"], n_soft)
    real = {"name": "real_ids_q8", "ids": "real", "toks": toks_r, "imgs": imgs_r, "first_row": imgs_r[0]["offset"],
            "lg": {"bidirectional": forward(bidir, toks_r, imgs_r, images, proc, image_id, torch.float32)}}
    assert len(toks_r) == len(one["toks"])

    # float64: the same models
    for c in cases + [real]:
        c["lg64"] = {}
    for m, mdl in modes.items():
        mdl.double()
        for c in cases + ([real] if m == "bidirectional" else []):
            c["lg64"][m] = forward(mdl, c["toks"], c["imgs"], images, proc, image_id, torch.float64)
        mdl.float()
    # the real-ids prompt on the q8_0 file's weights (information: what quantizing the weights moves)
    load_gguf_weights(bidir, ref_f32, Gemma4Model(str(Q8_OUT)))
    real["lg"]["bidirectional_q8_weights"] = forward(bidir, toks_r, imgs_r, images, proc, image_id, torch.float32)

    blobs: list[bytes] = []
    offset = 0
    out_cases = []
    check = {"max_abs_hf32_vs_hf64": 0.0, "min_max_abs_bidir_vs_causal": float("inf")}
    for c in cases + [real]:
        first = c["first_row"]
        entry = {"name": c["name"], "ids": c["ids"], "n_tokens": len(c["toks"]), "tokens": c["toks"],
                 "images": c["imgs"], "first_row": first, "sets": {}}
        img0 = c["imgs"][0]["offset"]
        if "causal" in c["lg"]:
            a, b = c["lg"]["bidirectional"], c["lg"]["causal"]
            d_before = float(np.abs(a[:img0] - b[:img0]).max())
            d_after = float(np.abs(a[img0:] - b[img0:]).max())
            assert d_before <= 1e-6, (c["name"], d_before)
            assert d_after > MIN_MASK_DELTA, (c["name"], d_after)
            ends = [i["offset"] + i["n"] for i in c["imgs"]]
            d_text_after = float(np.abs(a[ends[0]:] - b[ends[0]:]).max())
            entry["max_abs_bidir_vs_causal"] = d_after
            entry["max_abs_bidir_vs_causal_before_first_image"] = d_before
            entry["max_abs_bidir_vs_causal_after_first_image_end"] = d_text_after
            check["min_max_abs_bidir_vs_causal"] = min(check["min_max_abs_bidir_vs_causal"], d_after)
        for s, lg in c["lg"].items():
            dt = "f32" if (s == "bidirectional" and c["ids"] == "standin") else "f16"
            rows = np.ascontiguousarray(lg[first:], dtype="<f4" if dt == "f32" else "<f2")
            rec = {"dtype": dt, "offset": offset, "n_rows": int(rows.shape[0]), "bytes": rows.nbytes,
                   "max_abs_storage": float(np.abs(rows.astype(np.float64) - lg[first:]).max())}
            if s in c["lg64"]:
                rec["max_abs_f32_vs_f64"] = float(np.abs(lg - c["lg64"][s]).max())
                check["max_abs_hf32_vs_hf64"] = max(check["max_abs_hf32_vs_hf64"], rec["max_abs_f32_vs_f64"])
            else:
                rec["max_abs_vs_bidirectional"] = float(np.abs(lg - c["lg"]["bidirectional"]).max())
                rec["max_abs_vs_bidirectional_from_first_row"] = float(
                    np.abs(lg[first:] - c["lg"]["bidirectional"][first:]).max())
            rec["min"], rec["max"] = float(lg.min()), float(lg.max())
            top2 = np.sort(lg[-1])[-2:]
            rec["argmax_last"], rec["gap_last"] = int(lg[-1].argmax()), float(top2[1] - top2[0])
            entry["sets"][s] = rec
            blobs.append(rows.tobytes())
            offset += rows.nbytes
        out_cases.append(entry)
    assert check["max_abs_hf32_vs_hf64"] <= HF32_VS_HF64_MAX, check
    assert offset < MAX_BIN, offset
    lo = min(c["lg"]["bidirectional"].min() for c in cases)
    hi = max(c["lg"]["bidirectional"].max() for c in cases)
    check["logit_range"] = float(hi - lo)
    check["max_abs_q8_weights_vs_original"] = out_cases[-1]["sets"]["bidirectional_q8_weights"][
        "max_abs_vs_bidirectional"]

    BIN.write_bytes(b"".join(blobs))
    tc = bidir.config.get_text_config()
    golden = {
        "generator": f"tools/gen_gemma4_vision_text_golden.py (the model of tools/gen_gemma4_vision_fixtures.py: "
                     f"vision seed {vf.SEED}, text: the {vf.TARGET} fixture's seed {vf.target_seed()}): transformers "
                     f"{transformers.__version__} (torch {torch.__version__.split('+')[0]}) float32 eager, "
                     "llama.cpp convert_hf_to_gguf.py --outtype q8_0 (llama-cpp-python 0.3.36 sdist)",
        "gguf": {"text_f32": str(vf.TARGET_GGUF.relative_to(ROOT)), "mmproj": str(MMPROJ.relative_to(ROOT)),
                 "text_q8_0": str(Q8_OUT.relative_to(ROOT))},
        "vision_golden": str(vf.GOLDEN.relative_to(ROOT)),
        "n_cols": N_COLS,
        "token_ids": {"bos": 2, "pad": int(tc.pad_token_id), "boi_standin": boi_s, "eoi_standin": eoi_s,
                      "standin_text": list(STANDIN_TEXT), "boi": ids["<|image>"], "eoi": ids["<image|>"],
                      "image": image_id, "video": ids["<|video|>"]},
        "hparams": {"sliding_window": int(tc.sliding_window), "layer_types": list(tc.layer_types),
                    "use_bidirectional_attention": "vision", "final_logit_softcapping":
                    float(tc.final_logit_softcapping), "max_soft_tokens": vf.MAX_SOFT_TOKENS},
        "images": [{"name": n, "n_tokens": n_soft[n]} for n in images],
        "q8_0_file": q8_info,
        "cases": out_cases,
        "bin": {"file": str(BIN.relative_to(ROOT)),
                "format": "little-endian rows [n_rows][n_cols] at each set's byte offset, dtype f32 or f16 (IEEE "
                          "half); row i is the logits of position first_row + i; cases one after another, each "
                          "case's sets in the order listed",
                "bytes": offset},
        "about": {
            "tokens": "the input ids; -1 at the image positions (transformers got image_token_id there, looked up "
                      "pad and scattered the image's projected rows, unscaled); images[k].offset = the position of "
                      "its first soft token, n = its soft tokens (transformers' processor, max_soft_tokens 70)",
            "ids": "standin: BOI / EOI are token_ids.boi_standin / eoi_standin (ordinary ids of the 869-token dense "
                   "vocabulary, run by gemma4_dense.gguf); real: 869 / 870 (gemma4_vision_text_q8_0.gguf's vocabulary)",
            "bidirectional": "transformers float32, use_bidirectional_attention 'vision' with mm_token_type_ids (1 "
                             "at image positions): sliding layers let an image's tokens see all of that image",
            "causal": "the same weights, use_bidirectional_attention None: plain causal masks",
            "bidirectional_q8_weights": "transformers float32 with the q8_0 file's weights dequantized "
                                        "(information: the quantization's own effect)",
            "max_abs_f32_vs_f64": "transformers float32 vs the same model in float64, every position",
            "max_abs_storage": "max |stored value - float32 logit| over the stored rows (0 for f32)",
            "max_abs_bidir_vs_causal": "max over positions from the first image on; before it the modes are equal",
            "min / max": "over every position of the set (stored or not)",
            "argmax_last / gap_last": "the greedy token after the prompt and its margin over the runner-up",
        },
        "check": check | {"thresholds": {"hf32_vs_hf64_max": HF32_VS_HF64_MAX, "min_mask_delta": MIN_MASK_DELTA}},
    }
    GOLDEN.write_text(json.dumps(golden, indent=1) + "\n")
    summary = {c["name"]: {s: {k: r[k] for k in r if k.startswith("max_abs")} | {"n": r["n_rows"], "dt": r["dtype"]}
                           for s, r in c["sets"].items()} | {k: c[k] for k in c if k.startswith("max_abs_bidir")}
               for c in out_cases}
    print(json.dumps(summary, indent=1))
    print(f"check {check}; bin {offset} B; q8_0 {q8_info['bytes']} B {q8_info['tensor_types']}; "
          f"soft tokens {n_soft}; standins {boi_s} {eoi_s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
