#!/usr/bin/env python3
"""Fixtures for tests/opencl/test_image_prep.c and seeds for tests/fuzz/fuzz_image.c.

References come from Pillow and numpy only, never from clgemma:
  * decode: Pillow's Image.open + transformers' convert_to_rgb (image_transforms.py:759-783: an RGB image as
    it is, anything else converted to RGBA and alpha_composite'd onto opaque white, then RGB), for JPEG, PNG,
    WebP and GIF (the first frame of an animation); the GIF and WebP files Pillow cannot write come from
    tools/image_writers.py, and Pillow decodes those too.
  * size rule: get_aspect_ratio_preserving_size of transformers' image_processing_gemma4.py:33-84, written
    out below as docs/design-vision.md 1.2 step 1 quotes it (the transformers source was not at hand).
  * resize: Pillow's Image.resize((w, h), Image.BICUBIC), as Gemma4ImageProcessorPil does
    (image_processing_pil_gemma4.py:176-200), skipped when the size already matches (:183-184).
  * rescale / patchify / positions: image_processing_gemma4.py:241 (x * 1/255 in float64, stored float32),
    :88-99 (convert_image_to_patches: [3, H, W] -> [N, p*p*3], permute(1, 3, 2, 4, 0)), :250-258 (positions).

Writes OUT_DIR (default build/data/image_prep/: images, manifest cases.txt, resized references as lossless
PNG, sampled float rows, positions) and, with --seeds, tests/fuzz/corpus_image/ (small seeds, committed).
`make test` runs it before the tests (.venv has pillow and numpy, pinned in tools/requirements.txt): the
references are computed by Pillow at test time rather than committed, as 4.8 MB of them would crowd the
64 MiB a GPU call carries. Run: .venv/bin/python tools/gen_image_prep_fixtures.py [OUT_DIR] [--seeds].
Deterministic.
"""
import io
import math
import os
import shutil
import sys

import numpy as np
from PIL import Image

from image_writers import gif, webp_anim, webp_frame_chunks

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "build", "data", "image_prep")
SEEDS = os.path.join(ROOT, "tests", "fuzz", "corpus_image")
P, K = 16, 3
ROWS_KEPT = 24  # about this many patch rows of pixel_values are stored per case (all of them: megabytes)


def size_rule(height, width, max_soft_tokens):
    """get_aspect_ratio_preserving_size (image_processing_gemma4.py:33-84); None where it raises."""
    max_patches = max_soft_tokens * K * K
    total_px = height * width
    target_px = max_patches * P * P
    factor = math.sqrt(target_px / total_px)
    ideal_height = factor * height
    ideal_width = factor * width
    side_mult = K * P
    target_height = int(math.floor(ideal_height / side_mult)) * side_mult
    target_width = int(math.floor(ideal_width / side_mult)) * side_mult
    if target_height == 0 and target_width == 0:
        return None
    max_side_length = (max_patches // K ** 2) * side_mult
    if target_height == 0:
        target_height = side_mult
        target_width = min(int(math.floor(width / height)) * side_mult, max_side_length)
    elif target_width == 0:
        target_width = side_mult
        target_height = min(int(math.floor(height / width)) * side_mult, max_side_length)
    if target_height * target_width > target_px:
        return None
    return target_height, target_width


def convert_to_rgb(im):
    """transformers image_transforms.convert_to_rgb"""
    if im.mode == "RGB":
        return im
    rgba = im.convert("RGBA")
    background = Image.new("RGBA", rgba.size, (255, 255, 255))
    return Image.alpha_composite(background, rgba).convert("RGB")


def pattern(w, h, seed):
    """sharp edges, rings and noise: every tap of the filter matters, yet PNG still compresses it"""
    rng = np.random.RandomState(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = np.sin((x * x + y * y) / (7.0 * max(w, h))) * 100
    chk = ((x // 9 + y // 13) % 2) * 80
    img = np.stack([r + chk + 120, 255 * x / max(w - 1, 1), 255 * y / max(h - 1, 1) - chk], axis=-1)
    img += rng.randint(-3, 4, size=img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def encode(im, fmt, **kw):
    b = io.BytesIO()
    im.save(b, fmt, **kw)
    return b.getvalue()


def images():
    """(file name, encoded bytes)"""
    rng = np.random.RandomState(23)
    out = []
    rgba = np.dstack([pattern(37, 91, 1), rng.randint(0, 256, size=(91, 37)).astype(np.uint8)])
    rgba[0, :, 3] = 0
    rgba[1, :, 3] = 255
    out.append(("rgba_37x91.png", encode(Image.fromarray(rgba, "RGBA"), "PNG")))
    out.append(("gray_50x50.png", encode(Image.fromarray(pattern(50, 50, 2)[:, :, 0], "L"), "PNG")))
    la = np.dstack([pattern(29, 31, 3)[:, :, 1], rng.randint(0, 256, size=(31, 29)).astype(np.uint8)])
    out.append(("gray_alpha_29x31.png", encode(Image.fromarray(la, "LA"), "PNG")))
    pal = Image.fromarray(pattern(64, 40, 4)).quantize(colors=37, dither=Image.Dither.NONE)
    out.append(("palette_64x40.png", encode(pal, "PNG")))
    out.append(("palette_trns_45x23.png",
                encode(Image.fromarray(pattern(45, 23, 5)).quantize(colors=16, dither=Image.Dither.NONE),
                       "PNG", transparency=3)))
    out.append(("rgb_small_20x30.png", encode(Image.fromarray(pattern(20, 30, 6)), "PNG")))
    out.append(("rgb_interlaced_41x27.png", png_raw(pattern(41, 27, 7), 8, interlace=True)))
    # Pillow writes 16-bit RGB only through raw bytes: big-endian 48-bit pixels
    rgb16 = (pattern(33, 17, 8).astype(np.uint16) * 257 + rng.randint(0, 200, size=(17, 33, 3))).astype(">u2")
    out.append(("rgb16_33x17.png", png16(rgb16)))
    out.append(("rgb_large_520x400.png", encode(Image.fromarray(pattern(520, 400, 9)), "PNG", optimize=True)))
    out.append(("rgb_wide_900x12.png", encode(Image.fromarray(pattern(900, 12, 10)), "PNG")))
    out.append(("rgb_fit_384x384.png", encode(Image.fromarray(pattern(384, 384, 11)), "PNG")))  # 70: no resize
    out.append(("photo_320x240.jpg", encode(Image.fromarray(pattern(320, 240, 12)), "JPEG", quality=90)))
    out.append(("photo_gray_77x55.jpg", encode(Image.fromarray(pattern(77, 55, 13)[:, :, 0], "L"), "JPEG")))
    out.append(("photo_progressive_63x44.jpg",
                encode(Image.fromarray(pattern(63, 44, 14)), "JPEG", progressive=True, quality=80)))
    return out + webp_images(rng) + gif_images(rng)


def webp_images(rng):
    """Pillow's encoder (its bundled libwebp) for the still files; animations with a first frame
    smaller than the canvas by hand (Pillow's encoder always starts on a whole-canvas key frame)"""
    out = []
    out.append(("webp_lossy_83x61.webp", encode(Image.fromarray(pattern(83, 61, 30)), "WEBP", quality=80)))
    out.append(("webp_lossy_odd_17x9.webp", encode(Image.fromarray(pattern(17, 9, 31)), "WEBP", quality=50)))
    out.append(("webp_lossless_57x43.webp", encode(Image.fromarray(pattern(57, 43, 32)), "WEBP", lossless=True)))
    rgba = np.dstack([pattern(49, 37, 33), rng.randint(0, 256, size=(37, 49)).astype(np.uint8)])
    rgba[0, :, 3] = 0
    rgba[1, :, 3] = 255
    out.append(("webp_alpha_lossy_49x37.webp", encode(Image.fromarray(rgba, "RGBA"), "WEBP", quality=70)))
    out.append(("webp_alpha_lossless_49x37.webp", encode(Image.fromarray(rgba, "RGBA"), "WEBP", lossless=True)))
    frames = [Image.fromarray(pattern(40, 30, 34 + i)) for i in range(3)]
    out.append(("webp_anim_40x30.webp", encode(frames[0], "WEBP", save_all=True, append_images=frames[1:],
                                                duration=100, lossless=True)))
    out.append(("webp_anim_lossy_40x30.webp", encode(frames[0], "WEBP", save_all=True, append_images=frames[1:],
                                                      duration=100, quality=75)))
    aframes = [Image.fromarray(np.dstack([pattern(40, 30, 38 + i), rgba[:30, :40, 3]]), "RGBA") for i in range(2)]
    out.append(("webp_anim_alpha_lossy_40x30.webp", encode(aframes[0], "WEBP", save_all=True,
                                                            append_images=aframes[1:], duration=100, quality=75)))
    first = webp_frame_chunks(encode(Image.fromarray(rgba[:20, :24], "RGBA"), "WEBP", lossless=True))
    second = webp_frame_chunks(encode(Image.fromarray(pattern(60, 50, 37)), "WEBP", lossless=True))
    for name, alpha in [("webp_anim_offset_60x50.webp", True), ("webp_anim_offset_noalpha_60x50.webp", False)]:
        out.append((name, webp_anim((60, 50), [(10, 6, 24, 20, first), (0, 0, 60, 50, second)], alpha)))
    return out


def gif_images(rng):
    """Pillow's encoder (real LZW) where it can write the case, image_writers.gif where it cannot: Pillow
    gives a first frame no local palette, no offset and always at least a gray-ramp palette"""
    out = []
    quant = Image.fromarray(pattern(64, 40, 40)).quantize(colors=57, dither=Image.Dither.NONE)
    out.append(("gif_global_64x40.gif", encode(quant, "GIF", interlace=False)))
    out.append(("gif_interlaced_45x37.gif",
                encode(Image.fromarray(pattern(45, 37, 41)).quantize(colors=200, dither=Image.Dither.NONE), "GIF")))
    out.append(("gif_trns_33x29.gif", encode(Image.fromarray(pattern(33, 29, 42)).quantize(
        colors=16, dither=Image.Dither.NONE), "GIF", transparency=3, interlace=False)))
    frames = [Image.fromarray(pattern(36, 28, 43 + i)).quantize(colors=32, dither=Image.Dither.NONE) for i in range(3)]
    out.append(("gif_anim_36x28.gif", encode(frames[0], "GIF", save_all=True, append_images=frames[1:],
                                             duration=100, loop=0)))
    gpal = rng.randint(0, 256, size=(16, 3))
    lpal = rng.randint(0, 256, size=(64, 3))
    idx = rng.randint(0, 16, size=(20, 30)).astype(np.uint8)
    out.append(("gif_local_30x20.gif", gif((30, 20), [{"idx": rng.randint(0, 64, size=(20, 30)), "lpal": lpal}],
                                           gpal=gpal)))
    out.append(("gif_local_interlaced_30x20.gif",
                gif((30, 20), [{"idx": rng.randint(0, 64, size=(20, 30)), "lpal": lpal, "interlace": True}])))
    # a first frame smaller than the screen: Pillow fills around it with index 0 (not the background
    # index), or with the transparent index when the frame has one
    small = rng.randint(0, 16, size=(11, 17))
    out.append(("gif_offset_40x30.gif", gif((40, 30), [{"idx": small, "x": 5, "y": 7}], gpal=gpal, background=9)))
    out.append(("gif_offset_trns_40x30.gif",
                gif((40, 30), [{"idx": small, "x": 5, "y": 7, "trns": 2}], gpal=gpal, background=9)))
    out.append(("gif_offset_anim_40x30.gif", gif((40, 30), [{"idx": small, "x": 23, "y": 19, "trns": 4, "delay": 5},
                                                           {"idx": idx, "x": 0, "y": 0}], gpal=gpal)))
    # a first frame past the screen: Pillow grows the image to hold it
    out.append(("gif_past_screen_24x19.gif", gif((20, 10), [{"idx": small, "x": 7, "y": 8}], gpal=gpal)))
    # indices past the palette (black), no palette (the index as gray), a gray-ramp palette (dropped:
    # gray again, even past its end) and a gray-ramp local one (Pillow falls back to the global)
    wild = rng.randint(0, 256, size=(9, 14))
    out.append(("gif_past_palette_14x9.gif", gif((14, 9), [{"idx": wild, "trns": int(wild[0, 0])}], gpal=gpal[:4])))
    out.append(("gif_no_palette_14x9.gif", gif((14, 9), [{"idx": wild}])))
    ramp = np.repeat(np.arange(8)[:, None], 3, axis=1)
    out.append(("gif_ramp_14x9.gif", gif((14, 9), [{"idx": wild}], gpal=ramp)))
    out.append(("gif_local_ramp_14x9.gif", gif((14, 9), [{"idx": wild, "lpal": ramp}], gpal=gpal)))
    return out


def png16(a):
    """a 16-bit RGB PNG written by hand (Pillow cannot save one)"""
    return png_raw(a.astype(">u2"), 16)


def png_raw(a, depth, interlace=False):
    """an RGB PNG written by hand: IHDR, one IDAT (filter 0 rows; Adam7 passes if interlace), IEND"""
    import struct
    import zlib
    h, w, _ = a.shape
    passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
    raw = b""
    for x0, y0, dx, dy in passes if interlace else [(0, 0, 1, 1)]:
        sub = a[y0::dy, x0::dx]
        if sub.shape[0] and sub.shape[1]:
            raw += b"".join(b"\0" + sub[y].tobytes() for y in range(sub.shape[0]))

    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, 2, 0, 0, int(interlace)))
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def prep(rgb, mst):
    """Gemma4ImageProcessorPil on one RGB image: resized uint8, pixel_values, positions"""
    im = Image.fromarray(rgb, "RGB")
    th, tw = size_rule(im.height, im.width, mst)
    if (tw, th) != im.size:
        im = im.resize((tw, th), Image.BICUBIC)
    resized = np.asarray(im)
    x = (resized.astype(np.float64) * (1 / 255)).astype(np.float32).transpose(2, 0, 1)  # [3, H, W]
    gh, gw = th // P, tw // P
    patches = x.reshape(3, gh, P, gw, P).transpose(1, 3, 2, 4, 0).reshape(gh * gw, P * P * 3)
    i = np.arange(gh * gw)
    pos = np.stack([i % gw, i // gw], axis=-1).astype(np.int32)
    return resized, patches, pos


def main():
    global OUT
    dirs = [a for a in sys.argv[1:] if not a.startswith("--")]
    if dirs:
        OUT = os.path.abspath(dirs[0])
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    lines = ["# written by tools/gen_image_prep_fixtures.py; see test_image_prep.c for the line kinds"]
    decoded = {}
    for name, data in images():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
        rgb = np.asarray(convert_to_rgb(Image.open(io.BytesIO(data))))
        decoded[name] = rgb
        h, w, _ = rgb.shape
        if name.startswith("rgb_fit"):
            continue  # a large raw reference for no gain: the other PNGs pin the decoder
        ref = name.rsplit(".", 1)[0] + ".rgb"
        rgb.tofile(os.path.join(OUT, ref))
        lines.append(f"decode {name} {w} {h} {ref}")
    # preprocessing from the decoded PNGs (the C side decodes them bit-exactly: the decode cases say so)
    for name, msts in [("rgba_37x91.png", [70]), ("gray_50x50.png", [140]), ("palette_64x40.png", [70]),
                       ("rgb_small_20x30.png", [1120]), ("rgb_interlaced_41x27.png", [560]),
                       ("rgb_large_520x400.png", [70, 140]), ("rgb_wide_900x12.png", [70, 280]),
                       ("rgb_fit_384x384.png", [70]), ("rgb16_33x17.png", [140])]:
        for mst in msts:
            resized, patches, pos = prep(decoded[name], mst)
            th, tw, _ = resized.shape
            n = patches.shape[0]
            stem = f"{name.rsplit('.', 1)[0]}_{mst}"
            Image.fromarray(resized, "RGB").save(os.path.join(OUT, stem + "_resized.png"), optimize=True)
            stride = max(1, n // ROWS_KEPT)
            patches[::stride].tofile(os.path.join(OUT, stem + "_rows.f32"))
            pos.tofile(os.path.join(OUT, stem + "_pos.i32"))
            lines.append(f"prep {name} {mst} {tw} {th} {tw // P} {th // P} {n} {n // (K * K)} "
                         f"{stem}_resized.png {stem}_rows.f32 {stride} {stem}_pos.i32")
    # Pillow's resize alone, one axis at a time and both, down and up
    for name, (w, h) in [("rgb_large_520x400.png", (520, 61)), ("rgb_large_520x400.png", (77, 400)),
                         ("rgb_large_520x400.png", (33, 29)), ("rgb_interlaced_41x27.png", (41, 100)),
                         ("rgb_interlaced_41x27.png", (200, 27)), ("rgb_wide_900x12.png", (900, 5)),
                         ("rgba_37x91.png", (1, 1))]:
        stem = f"{name.rsplit('.', 1)[0]}_{w}x{h}"
        Image.fromarray(decoded[name], "RGB").resize((w, h), Image.BICUBIC).save(os.path.join(OUT, stem + ".png"))
        lines.append(f"resize {name} {w} {h} {stem}.png")
    sizes = [(1, 1), (1, 2), (2, 1), (1, 10000), (10000, 1), (17, 400), (400, 17), (1000, 1), (1, 1000),
             (48, 48), (224, 224), (1024, 768), (768, 1024), (1920, 1080), (4000, 3000), (16384, 16384),
             (16384, 1), (1, 16384), (37, 91), (91, 37), (96, 48), (3, 5000), (5000, 3), (47, 47), (49, 49),
             (7000, 5), (5, 7000), (100000, 1), (1, 100000)]
    rng = np.random.RandomState(5)
    sizes += [(int(a), int(b)) for a, b in rng.randint(1, 6000, size=(150, 2))]
    sizes += [(int(a), int(b)) for a, b in rng.randint(1, 60, size=(60, 2))]
    for w, h in sizes:
        for mst in (70, 140, 280, 560, 1120):
            r = size_rule(h, w, mst)
            lines.append(f"size {w} {h} {mst} " + (f"{r[1]} {r[0]}" if r else "error"))
    with open(os.path.join(OUT, "cases.txt.part"), "w") as f:
        f.write("\n".join(lines) + "\n")

    # fuzz seeds: small files of every kind the decoder takes or refuses
    os.replace(os.path.join(OUT, "cases.txt.part"), os.path.join(OUT, "cases.txt"))  # last: make's target
    if "--seeds" not in sys.argv[1:]:
        return
    shutil.rmtree(SEEDS, ignore_errors=True)
    os.makedirs(SEEDS)
    small = Image.fromarray(pattern(13, 9, 20))
    seeds = {
        "rgb.png": encode(small, "PNG"),
        "rgba.png": encode(small.convert("RGBA"), "PNG"),
        "gray.png": encode(small.convert("L"), "PNG"),
        "la.png": encode(small.convert("LA"), "PNG"),
        "bw.png": encode(small.convert("1"), "PNG"),
        "pal.png": encode(small.quantize(colors=5), "PNG", transparency=1),
        "interlaced.png": png_raw(np.asarray(small), 8, interlace=True),
        "rgb16.png": png16(np.asarray(small).astype(">u2") * 257),
        "base.jpg": encode(small, "JPEG"),
        "prog.jpg": encode(small, "JPEG", progressive=True),
        "gray.jpg": encode(small.convert("L"), "JPEG"),
        "cmyk.jpg": encode(small.convert("CMYK"), "JPEG"),
        "444.jpg": encode(small, "JPEG", subsampling=0),
        "422.jpg": encode(small, "JPEG", subsampling=1),
    }
    srgba = np.dstack([np.asarray(small), np.arange(13 * 9, dtype=np.uint8).reshape(9, 13) * 2])
    chunks = webp_frame_chunks(encode(Image.fromarray(srgba[:6, :8], "RGBA"), "WEBP", lossless=True))
    sidx = np.arange(13 * 9).reshape(9, 13) % 7
    spal = np.asarray(small).reshape(-1, 3)[:8]
    seeds.update({
        "lossy.webp": encode(small, "WEBP", quality=60),
        "lossless.webp": encode(small, "WEBP", lossless=True),
        "alpha_lossy.webp": encode(Image.fromarray(srgba, "RGBA"), "WEBP", quality=60),
        "alpha_lossless.webp": encode(Image.fromarray(srgba, "RGBA"), "WEBP", lossless=True),
        "anim.webp": encode(small, "WEBP", save_all=True, append_images=[small.transpose(Image.Transpose.FLIP_LEFT_RIGHT)],
                            duration=50, quality=60),
        "anim_offset.webp": webp_anim((13, 9), [(2, 2, 8, 6, chunks)], True),
        "global.gif": encode(small.quantize(colors=8), "GIF", interlace=False),
        "interlaced.gif": encode(Image.fromarray(pattern(20, 18, 21)).quantize(colors=8), "GIF"),
        "trns.gif": encode(small.quantize(colors=8), "GIF", transparency=2),
        "anim.gif": encode(small.quantize(colors=8), "GIF", save_all=True,
                           append_images=[small.transpose(Image.Transpose.FLIP_LEFT_RIGHT).quantize(colors=8)]),
        "local_offset.gif": gif((16, 12), [{"idx": sidx, "x": 2, "y": 1, "lpal": spal, "trns": 3, "interlace": True}],
                                gpal=spal[::-1]),
        "no_palette.gif": gif((13, 9), [{"idx": sidx}]),
    })
    seeds["trunc.png"] = seeds["rgb.png"][:60]
    seeds["trunc.jpg"] = seeds["base.jpg"][: len(seeds["base.jpg"]) // 2]
    seeds["trunc.webp"] = seeds["lossless.webp"][: len(seeds["lossless.webp"]) // 2]
    seeds["trunc.gif"] = seeds["global.gif"][: len(seeds["global.gif"]) // 2]
    for name, data in seeds.items():
        with open(os.path.join(SEEDS, name), "wb") as f:
            f.write(data)
    # a few fixtures as seeds too: transparency kinds Pillow writes only at these settings
    for name, data in images():
        if name in ("palette_trns_45x23.png", "gray_alpha_29x31.png"):
            with open(os.path.join(SEEDS, name), "wb") as f:
                f.write(data)


if __name__ == "__main__":
    main()
