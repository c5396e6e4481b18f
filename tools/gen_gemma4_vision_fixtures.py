#!/usr/bin/env python3
"""Build the tiny Gemma 4 vision fixtures (an mmproj GGUF) with llama.cpp's own converter, and their references.

docs/design-vision.md section 5, item 1-2. This script
  1. builds a tiny random transformers Gemma4ForConditionalGeneration (float32): its text part is the `dense`
     fixture of tools/gen_gemma4_fixtures.py rebuilt from the weight seed its golden records (checked tensor
     for tensor against tests/fixtures/gemma4_dense.gguf) with use_bidirectional_attention "vision" and the
     four multimodal tokens appended to the fixture vocabulary (their embedding rows random); its vision tower
     (VISION below: hidden 96, 2 layers, 4 heads of 24, MLP 136, patch 16, pooling 3, a 64-row position table,
     standardize with random bias/scale) has random weights, norms included; saves it with the tokenizer and a
     processor_config.json (the PIL image processor's fields; the converter reads image_mean/std from it); and
     the same model with use_clipped_linears on, each clamp at a random fraction of the largest value (below
     zero: the smallest) that its linear's input or output takes on the images unclamped;
  2. converts it with llama.cpp's convert_hf_to_gguf.py --mmproj (.cache/llama.cpp, its own gguf-py) to f32
     and f16: tests/fixtures/gemma4_vision_mmproj{,_f16}.gguf (the clipped one to f32:
     tests/fixtures/gemma4_vision_mmproj_clipped.gguf), and the text part (no --mmproj) to f32:
     .cache/gemma4_vision_text.gguf (the dense text model with the image tokens: checked equal to the dense
     fixture tensor for tensor, but for the four new embedding rows; not committed while only the loader
     needs a partner, for which tests/fixtures/gemma4_dense.gguf serves: every committed MB is one less for
     the GPU calls' 64 MiB);
  3. prepares IMAGES (Pillow-made, deterministic) with transformers' Gemma4ImageProcessorPil and runs the tower
     (get_image_features: all images in one padded batch) in transformers float32 and float64, and
     tools/ref_gemma4v.py (float64 numpy, reads only the GGUF) on each file; the float32 run must agree with
     the reference on the f32 file to HF_VS_REF_MAX relative to the rows' scale (asserted), the float64 run
     to HF64_VS_REF_MAX (asserted; its pooler and RoPE tables are float32, modeling_gemma4.py:672-692, :760);
     the clipped model likewise against the reference on its file, whose rows must differ from the unclipped
     ones by more than 1% (the clamps bite);
  4. writes tests/golden/gemma4_vision.json (images, sizes, token counts, hyperparameters, keys, tensors,
     agreement numbers, the binary's layout) and tests/golden/gemma4_vision.bin (the resized RGB8 pixels the
     processor patchified, positions, and float32 rows: patch embeddings, layer outputs, pooled,
     standardized and projected rows).

Run from the repository root (needs .venv-hf with pillow, and sh deploy/fetch_llama_ref.sh):
    .venv-hf/bin/python tools/gen_gemma4_vision_fixtures.py
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
from PIL import Image  # noqa: E402
from tokenizers import AddedToken, Tokenizer  # noqa: E402
from transformers import (Gemma4Config, Gemma4ForConditionalGeneration, Gemma4TextConfig,  # noqa: E402
                          Gemma4VisionConfig)
from transformers.models.gemma4.image_processing_pil_gemma4 import Gemma4ImageProcessorPil  # noqa: E402

import gemma4_fixture_vocab as fvocab  # noqa: E402
import gen_gemma4_fixtures as g4  # noqa: E402
from ref_gemma4 import Gemma4Model  # noqa: E402
from ref_gemma4v import Gemma4VisionModel  # noqa: E402

TARGET = "dense"
TARGET_GGUF = ROOT / "tests" / "fixtures" / "gemma4_dense.gguf"
FIX = ROOT / "tests" / "fixtures"
OUT = {"f32": FIX / "gemma4_vision_mmproj.gguf", "f16": FIX / "gemma4_vision_mmproj_f16.gguf",
       "clipped": FIX / "gemma4_vision_mmproj_clipped.gguf"}
TEXT_OUT = ROOT / ".cache" / "gemma4_vision_text.gguf"
GOLDEN = ROOT / "tests" / "golden" / "gemma4_vision.json"
BIN = ROOT / "tests" / "golden" / "gemma4_vision.bin"
SEED = 4401
HF_VS_REF_MAX = 2e-4       # transformers float32 vs float64 reference, max |delta| / max |row value|
HF64_VS_REF_MAX = 1e-5    # transformers' pooler and RoPE tables stay float32 in a float64 model
MM_TOKENS = ["<|image>", "<image|>", "<|image|>", "<|video|>"]     # boi, eoi, image, video (design 3.1)
VISION = dict(hidden_size=96, intermediate_size=136, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=4, head_dim=24, patch_size=16, pooling_kernel_size=3,
              position_embedding_size=64, standardize=True, use_clipped_linears=False, rms_norm_eps=1e-6)
CLAMPS = ("input_min", "input_max", "output_min", "output_max")
CLIP_FRACTION = (0.5, 0.9)  # a clamp sits at this fraction (random) of the largest value it sees unclamped
MAX_SOFT_TOKENS = 70       # the smallest budget transformers allows: 630 patches at most per image


def make_images() -> list[tuple[str, Image.Image]]:
    """Deterministic Pillow images: upscaled gradient, a tall noisy strip, and one already 48-aligned at the
    budget (the processor does not resize it)."""
    rng = np.random.default_rng(SEED + 7)
    yy, xx = np.mgrid[0:48, 0:64]
    grad = np.stack([xx * 4, yy * 5, (xx + yy) * 2], -1).astype(np.uint8)
    noise = rng.integers(0, 256, size=(130, 40, 3), dtype=np.uint8)
    yy, xx = np.mgrid[0:336, 0:432]
    mix = (np.stack([xx * 255 // 431, yy * 255 // 335, 128 + 0 * xx], -1)
           + rng.integers(-40, 41, size=(336, 432, 3))).clip(0, 255).astype(np.uint8)
    return [("grad_64x48", Image.fromarray(grad)), ("noise_40x130", Image.fromarray(noise)),
            ("mix_432x336", Image.fromarray(mix))]


def tokenizer_dir(td: Path) -> tuple[Path, int, dict[str, int]]:
    """The fixture vocabulary with the four multimodal tokens appended (new ids at the end)."""
    tokdir = td / "tokenizer"
    fvocab.write(tokdir)
    tk = Tokenizer.from_file(str(tokdir / "tokenizer.json"))
    n_base = tk.get_vocab_size()
    tk.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in MM_TOKENS])
    tk.save(str(tokdir / "tokenizer.json"))
    cfg = json.loads((tokdir / "tokenizer_config.json").read_text())
    cfg["extra_special_tokens"] += MM_TOKENS
    cfg |= {"boi_token": MM_TOKENS[0], "eoi_token": MM_TOKENS[1], "image_token": MM_TOKENS[2]}
    (tokdir / "tokenizer_config.json").write_text(json.dumps(cfg, indent=2, ensure_ascii=False) + "\n")
    ids = {t: tk.token_to_id(t) for t in MM_TOKENS}
    assert sorted(ids.values()) == list(range(n_base, n_base + 4)), ids
    return tokdir, n_base, ids


def target_seed() -> int:
    g = json.loads((ROOT / "tests" / "golden" / f"gemma4_{TARGET}.json").read_text())
    return int(g["generator"].split("weight seed ")[1].split(")")[0])


def make_model(n_base: int, ids: dict[str, int], clipped: bool = False) -> Gemma4ForConditionalGeneration:
    """The model; clipped: the same weights with use_clipped_linears on (clamps ±inf until set_clamps)."""
    text = g4.make_model(TARGET, target_seed(), n_base)
    names = g4.gguf_to_hf_names(Gemma4Model(str(TARGET_GGUF)), text)
    missing = set(Gemma4Model(str(TARGET_GGUF)).t) - set(names) - {"rope_freqs.weight"}
    if missing:
        sys.exit(f"the rebuilt {TARGET} model differs from {TARGET_GGUF.name} in {sorted(missing)}")
    tcfg = Gemma4TextConfig(vocab_size=n_base + len(MM_TOKENS), **g4.COMMON, **g4.VARIANTS[TARGET],
                            use_bidirectional_attention="vision")
    vcfg = Gemma4VisionConfig(**(VISION | {"use_clipped_linears": clipped}))
    cfg = Gemma4Config(text_config=tcfg, vision_config=vcfg, audio_config=None,
                       boi_token_id=ids["<|image>"], eoi_token_id=ids["<image|>"],
                       image_token_id=ids["<|image|>"], video_token_id=ids["<|video|>"])
    for c in (cfg, cfg.text_config, cfg.vision_config):
        c._attn_implementation = "eager"
    cfg.text_config._experts_implementation = "eager"
    torch.manual_seed(SEED)
    model = Gemma4ForConditionalGeneration(cfg).eval()
    rng = np.random.default_rng(SEED)
    sd = model.state_dict()
    tsd = text.state_dict()
    with torch.no_grad():
        for n, t in tsd.items():                       # the dense text model, unchanged
            if n == "lm_head.weight":
                continue
            dst = "model.language_model." + n[len("model."):]
            if n.endswith("embed_tokens.weight"):
                extra = rng.standard_normal((len(MM_TOKENS), t.shape[1])) * 0.3
                t = torch.cat([t, torch.from_numpy(extra.astype(np.float32))])
            sd[dst].copy_(t)
        for n in sorted(sd):                           # the vision tower and projector, random
            if not n.startswith(("model.vision_tower.", "model.embed_vision.")) or n.endswith(CLAMPS):
                continue                                   # clamps: set_clamps (the weights do not move)
            t = sd[n]
            if n.endswith("std_scale") or t.ndim == 1:
                v = rng.uniform(0.2, 1.8, size=t.shape)              # norms and the scale: far from 1 and 0
                if n.endswith("std_bias"):
                    v = rng.standard_normal(t.shape) * 2.0           # pooled rows are ~sqrt(96) x the layer's
            elif n.endswith("position_embedding_table"):
                v = rng.standard_normal(t.shape) * 0.5
            else:
                v = rng.standard_normal(t.shape) / np.sqrt(t.shape[-1])
            t.copy_(torch.from_numpy(np.asarray(v, dtype=np.float32)))
    assert torch.equal(model.lm_head.weight, model.model.language_model.embed_tokens.weight)
    return model


def processor() -> Gemma4ImageProcessorPil:
    return Gemma4ImageProcessorPil(max_soft_tokens=MAX_SOFT_TOKENS)


def save_hf(model, out: Path, tokdir: Path) -> None:
    model.save_pretrained(out)
    for f in tokdir.iterdir():
        (out / f.name).write_bytes(f.read_bytes())
    ip = processor().to_dict()
    ip["image_processor_type"] = "Gemma4ImageProcessorPil"
    (out / "processor_config.json").write_text(json.dumps(
        {"image_processor": ip, "image_seq_length": MAX_SOFT_TOKENS, "processor_class": "Gemma4Processor"},
        indent=2, default=str) + "\n")


def set_clamps(model, batch, rng: np.random.Generator) -> None:
    """Finite clamps on every vision linear that bite: each at a random fraction of the largest value (below
    zero: of the smallest) its input / output takes on the images with no clamps."""
    seen: dict = {}
    lins = {n: m for n, m in model.model.vision_tower.named_modules() if hasattr(m, "input_min")}

    def hook(name):
        def f(mod, a, o):
            seen[name] = (float(a[0].min()), float(a[0].max()), float(o.min()), float(o.max()))
        return f

    hs = [m.register_forward_hook(hook(n)) for n, m in lins.items()]
    with torch.no_grad():
        model.model.get_image_features(pixel_values=torch.from_numpy(batch["pixel_values"]),
                                       image_position_ids=torch.from_numpy(batch["image_position_ids"]))
    for h in hs:
        h.remove()
    with torch.no_grad():
        for n in sorted(lins):
            for c, v in zip(CLAMPS, seen[n]):
                getattr(lins[n], c).fill_(v * rng.uniform(*CLIP_FRACTION))


def convert(hf_dir: Path, out: dict[str, Path], text: bool) -> None:
    for t, path in out.items():
        g4.run([sys.executable, g4.LLAMA / "convert_hf_to_gguf.py", hf_dir, "--mmproj", "--outfile", path,
                "--outtype", "f32" if t == "clipped" else t], f"convert_hf_to_gguf.py --mmproj ({t})")
    if text:
        g4.run([sys.executable, g4.LLAMA / "convert_hf_to_gguf.py", hf_dir, "--outfile", TEXT_OUT, "--outtype", "f32"],
               "convert_hf_to_gguf.py (text) --outtype f32")


def check_text_gguf(n_base: int) -> None:
    """The converted text part is the dense fixture, tensor for tensor, plus the image tokens' embedding rows."""
    a, b = Gemma4Model(str(TEXT_OUT)), Gemma4Model(str(TARGET_GGUF))
    assert set(a.t) == set(b.t), set(a.t) ^ set(b.t)
    for n in a.t:
        x = a.t[n][:n_base] if n == "token_embd.weight" else a.t[n]
        assert np.array_equal(x, b.t[n]), n
    assert a.t["token_embd.weight"].shape[0] == n_base + len(MM_TOKENS)


def resized_rgb(pv: np.ndarray, pos: np.ndarray, p: int) -> np.ndarray:
    """The processor's resized RGB8 image back from its patches (values are exactly v/255)."""
    gw, gh = int(pos[:, 0].max()) + 1, int(pos[:, 1].max()) + 1
    img = pv.reshape(gh, gw, p, p, 3).transpose(0, 2, 1, 3, 4).reshape(gh * p, gw * p, 3)
    rgb = np.rint(img.astype(np.float64) * 255.0).astype(np.uint8)
    assert np.array_equal((rgb.astype(np.float64) * (1 / 255)).astype(np.float32), img), "pixel values are not v/255"
    return rgb


def hf_tower(model, batch, dtype) -> tuple[list[np.ndarray], list[np.ndarray], dict]:
    """Projected rows per image, and (image 0 of the batch) per-layer hidden states via hooks."""
    m = model.to(dtype)
    vt = m.model.vision_tower
    cap: dict = {"layers": [], "pooled": None}
    hooks = [layer.register_forward_hook(lambda mod, a, o: cap["layers"].append(o.detach().clone()))
             for layer in vt.encoder.layers]
    hooks.append(vt.patch_embedder.register_forward_hook(lambda mod, a, o: cap.__setitem__("embd", o.detach().clone())))
    hooks.append(vt.pooler.register_forward_hook(lambda mod, a, o: cap.__setitem__("pooled", o[0].detach().clone())))
    with torch.no_grad():
        out = m.model.get_image_features(pixel_values=torch.from_numpy(batch["pixel_values"]).to(dtype),
                                         image_position_ids=torch.from_numpy(batch["image_position_ids"]))
    for h in hooks:
        h.remove()
    proj = [x.double().numpy() for x in out.pooler_output]
    std, off = [], 0
    for s in proj:
        std.append(out.last_hidden_state[off:off + len(s)].double().numpy())
        off += len(s)
    return proj, std, cap


def relmax(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


def main() -> int:
    torch.set_num_threads(2)
    images = make_images()
    proc = processor()
    batch = {k: np.asarray(v) for k, v in proc([im for _, im in images], return_tensors="np").items()}
    with tempfile.TemporaryDirectory() as td:
        td = Path(td)
        tokdir, n_base, ids = tokenizer_dir(td)
        model = make_model(n_base, ids)
        clipped = make_model(n_base, ids, clipped=True)
        set_clamps(clipped, batch, np.random.default_rng(SEED + 11))
        save_hf(model, td / "gemma-4-tiny-vision", tokdir)
        save_hf(clipped, td / "gemma-4-tiny-vision-clipped", tokdir)
        convert(td / "gemma-4-tiny-vision", {t: OUT[t] for t in ("f32", "f16")}, True)
        convert(td / "gemma-4-tiny-vision-clipped", {"clipped": OUT["clipped"]}, False)
    refs = {t: Gemma4VisionModel(str(p)) for t, p in OUT.items()}
    check_text_gguf(n_base)
    assert refs["f32"].proj_dim == Gemma4Model(str(TEXT_OUT)).n_embd
    assert sum(n.endswith(CLAMPS) for n in refs["clipped"].t) == 4 * 7 * VISION["num_hidden_layers"]
    p = VISION["patch_size"]
    proj32, std32, cap32 = hf_tower(model, batch, torch.float32)
    proj64, std64, cap64 = hf_tower(model, batch, torch.float64)
    model.float()
    projc, _, _ = hf_tower(clipped, batch, torch.float32)

    check = {"rel_hf32_vs_ref_f32": 0.0, "rel_hf64_vs_ref_f32": 0.0, "rel_hf32_vs_ref_f16": 0.0,
             "rel_ref_f16_vs_ref_f32": 0.0, "rel_pooled_hf32_vs_ref_f32": 0.0, "rel_std_hf32_vs_ref_f32": 0.0,
             "rel_clipped_hf32_vs_ref": 0.0, "rel_clipped_vs_unclipped_min": float("inf")}
    blobs: list[np.ndarray] = []
    layout: list[dict] = []

    def put(name: str, a: np.ndarray, dtype: str) -> None:
        a = np.ascontiguousarray(a, dtype={"u8": np.uint8, "i32": "<i4", "f32": "<f4"}[dtype])
        off = sum(b.nbytes for b in blobs)
        blobs.append(a)
        layout.append({"name": name, "dtype": dtype, "shape": list(a.shape), "offset": off})

    out_images = []
    for i, (name, im) in enumerate(images):
        n_tok = int(batch["num_soft_tokens_per_image"][i])
        valid = (batch["image_position_ids"][i] != -1).all(-1)
        pv, pos = batch["pixel_values"][i][valid], batch["image_position_ids"][i][valid]
        assert valid.sum() == n_tok * 9 and np.all(~valid[valid.sum():]), name
        rgb = resized_rgb(pv, pos, p)
        traces = {}
        rows = {}
        for t, ref in refs.items():
            traces[t] = {}
            rows[t] = ref.encode(pv.astype(np.float64), pos, trace=traces[t])
        check["rel_hf32_vs_ref_f32"] = max(check["rel_hf32_vs_ref_f32"], relmax(proj32[i], rows["f32"]))
        check["rel_hf64_vs_ref_f32"] = max(check["rel_hf64_vs_ref_f32"], relmax(proj64[i], rows["f32"]))
        check["rel_hf32_vs_ref_f16"] = max(check["rel_hf32_vs_ref_f16"], relmax(proj32[i], rows["f16"]))
        check["rel_clipped_hf32_vs_ref"] = max(check["rel_clipped_hf32_vs_ref"], relmax(projc[i], rows["clipped"]))
        check["rel_clipped_vs_unclipped_min"] = min(check["rel_clipped_vs_unclipped_min"],
                                                    relmax(rows["clipped"], rows["f32"]))
        check["rel_ref_f16_vs_ref_f32"] = max(check["rel_ref_f16_vs_ref_f32"], relmax(rows["f16"], rows["f32"]))
        check["rel_std_hf32_vs_ref_f32"] = max(check["rel_std_hf32_vs_ref_f32"],
                                               relmax(std32[i], traces["f32"]["standardized"]))
        gh, gw = rgb.shape[0] // p, rgb.shape[1] // p
        entry = {"name": name, "width": im.width, "height": im.height, "resized_width": rgb.shape[1],
                 "resized_height": rgb.shape[0], "grid_w": gw, "grid_h": gh, "n_patches": int(valid.sum()),
                 "n_tokens": n_tok}
        put(f"{name}.source_rgb", np.asarray(im), "u8")
        put(f"{name}.resized_rgb", rgb, "u8")
        put(f"{name}.pos", pos, "i32")
        pooled32 = cap32["pooled"][i][:n_tok].double().numpy()       # valid cells come first (row-major)
        check["rel_pooled_hf32_vs_ref_f32"] = max(check["rel_pooled_hf32_vs_ref_f32"],
                                                  relmax(pooled32, traces["f32"]["pooled"]))
        put(f"{name}.pooled", pooled32, "f32")
        put(f"{name}.standardized", std32[i], "f32")
        put(f"{name}.projected", proj32[i], "f32")
        put(f"{name}.ref_projected", rows["f32"], "f32")
        put(f"{name}.clipped_projected", projc[i], "f32")
        if i == 0:
            put(f"{name}.embd", cap32["embd"][i][valid].numpy(), "f32")
            for il, h in enumerate(cap32["layers"]):
                put(f"{name}.layer{il}", h[i][valid].numpy(), "f32")
        out_images.append(entry)
    assert check["rel_hf32_vs_ref_f32"] <= HF_VS_REF_MAX, check
    assert check["rel_hf64_vs_ref_f32"] <= HF64_VS_REF_MAX, check
    assert check["rel_clipped_hf32_vs_ref"] <= HF_VS_REF_MAX, check
    assert check["rel_clipped_vs_unclipped_min"] > 0.01, check      # the clamps bite on every image

    BIN.write_bytes(b"".join(b.tobytes() for b in blobs))
    r = refs["f32"]
    golden = {
        "generator": f"tools/gen_gemma4_vision_fixtures.py (vision seed {SEED}, text: the {TARGET} fixture's seed "
                     f"{target_seed()}): transformers {__import__('transformers').__version__} float32 eager, "
                     "llama.cpp convert_hf_to_gguf.py --mmproj (llama-cpp-python 0.3.36 sdist)",
        "gguf": {t: str(pth.relative_to(ROOT)) for t, pth in OUT.items()} | {"text": str(TEXT_OUT.relative_to(ROOT))},
        "file_bytes": {t: pth.stat().st_size for t, pth in OUT.items()} | {"text": TEXT_OUT.stat().st_size},
        "tensor_types": {t: ref.types for t, ref in refs.items()},
        "keys": {k: v for k, v in r.kv.items() if k.startswith(("clip.", "general.architecture", "general.type"))},
        "hf_vision_config": {k: v for k, v in model.config.vision_config.to_dict().items()
                             if k not in ("transformers_version", "architectures", "dtype", "torch_dtype")},
        "token_ids": {"boi": ids["<|image>"], "eoi": ids["<image|>"], "image": ids["<|image|>"],
                      "video": ids["<|video|>"], "n_vocab": n_base + len(MM_TOKENS)},
        "hparams": {"n_embd": r.n_embd, "n_layer": r.n_layer, "n_head": r.n_head, "head_dim": r.hd, "n_ff": r.n_ff,
                    "patch_size": r.patch, "pool_k": 3, "rope_theta": 100.0, "n_pos": r.n_pos,
                    "projection_dim": r.proj_dim, "eps": r.eps},
        "processor": {"class": "Gemma4ImageProcessorPil", "max_soft_tokens": MAX_SOFT_TOKENS},
        "images": out_images,
        "bin": {"file": str(BIN.relative_to(ROOT)), "format": "little-endian arrays at the byte offsets below; "
                "rgb [h][w][3]; pos [N][2] (x, y); rows [n][dim]",
                "arrays": layout,
                "about": {"resized_rgb": "the image the processor patchified: pixel_values = rgb/255 in (row, col, "
                          "channel) patch order, patches row-major",
                          "pooled": "transformers float32: the pooler's k x k average x sqrt(Hv), before standardize",
                          "standardized": "transformers float32: the vision tower's output (after std_bias/scale)",
                          "projected": "transformers float32: the rows that replace the text embeddings",
                          "ref_projected": "tools/ref_gemma4v.py float64 on the f32 file",
                          "clipped_projected": "transformers float32 with use_clipped_linears (the clipped file: "
                                               "the same weights, finite clamps that bite)",
                          "embd/layerN": "transformers float32, image 0 only: patch embeddings + positions, and "
                                         "each encoder layer's output"}},
        "check": check | {"thresholds": {"hf_vs_ref_max": HF_VS_REF_MAX, "hf64_vs_ref_max": HF64_VS_REF_MAX},
                          "note": "max |delta| / max |reference row value| over every row of every image"},
    }
    GOLDEN.write_text(json.dumps(golden, indent=1, default=float) + "\n")
    sizes = {t: pth.stat().st_size for t, pth in OUT.items()} | {"text": TEXT_OUT.stat().st_size,
                                                                 "bin": BIN.stat().st_size}
    print(f"tokens {[e['n_tokens'] for e in out_images]}; {check}; sizes {sizes}")
    assert all(v < 5_000_000 for v in sizes.values()), sizes
    return 0


if __name__ == "__main__":
    sys.exit(main())
