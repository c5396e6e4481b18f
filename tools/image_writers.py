"""GIF and WebP files Pillow cannot write, assembled by hand for tools/gen_image_prep_fixtures.py: a GIF whose
first frame has a local palette, an offset, a box past the screen, indices past its palette or no palette at
all; an animated WebP whose first frame is smaller than the canvas. Pillow then decodes them for the
references, so these writers only have to make valid files, not match anything."""
import struct

import numpy as np


def lzw_literal(idx, min_size=8):
    """GIF LZW data of literal codes only, with a clear code before the table would widen the codes:
    valid for every decoder, no compression needed for fixtures this small"""
    clear, eoi, width = 1 << min_size, (1 << min_size) + 1, min_size + 1
    run = (1 << min_size) - 3
    codes = []
    for i, v in enumerate(idx):
        if i % run == 0:
            codes.append(clear)
        codes.append(int(v))
    codes.append(eoi)
    acc = nbits = 0
    out = bytearray()
    for c in codes:
        acc |= c << nbits
        nbits += width
        while nbits >= 8:
            out.append(acc & 255)
            acc >>= 8
            nbits -= 8
    if nbits:
        out.append(acc & 255)
    return bytes(out)


def _sub_blocks(b):
    return b"".join(bytes([len(b[i:i + 255])]) + b[i:i + 255] for i in range(0, len(b), 255)) + b"\0"


def _palette(pal):
    """(bits, bytes): a GIF colour table holds 2**bits entries; the unused ones are black"""
    pal = np.asarray(pal, np.uint8).reshape(-1, 3)
    bits = max(1, (len(pal) - 1).bit_length())
    p = np.zeros((1 << bits, 3), np.uint8)
    p[:len(pal)] = pal
    return bits, p.tobytes()


def gif(screen, frames, gpal=None, background=0):
    """GIF89a: screen (w, h), an optional global palette, frames of dicts with idx (h x w uint8 indices) and
    optionally x, y, lpal (local palette), trns (transparent index), interlace"""
    flags, table = 0, b""
    if gpal is not None:
        bits, table = _palette(gpal)
        flags = 0x80 | (bits - 1) << 4 | (bits - 1)
    out = b"GIF89a" + struct.pack("<HHBBB", screen[0], screen[1], flags, background, 0) + table
    for f in frames:
        a = np.asarray(f["idx"], np.uint8)
        h, w = a.shape
        t = f.get("trns")
        if t is not None or "delay" in f:
            out += b"\x21\xf9\x04" + struct.pack("<BHB", 1 if t is not None else 0, f.get("delay", 10), t or 0) + b"\0"
        lflags, ltable = 0, b""
        if f.get("lpal") is not None:
            bits, ltable = _palette(f["lpal"])
            lflags = 0x80 | (bits - 1)
        rows = np.arange(h)
        if f.get("interlace"):
            lflags |= 0x40
            rows = np.concatenate([np.arange(0, h, 8), np.arange(4, h, 8), np.arange(2, h, 4), np.arange(1, h, 2)])
        out += b"," + struct.pack("<HHHHB", f.get("x", 0), f.get("y", 0), w, h, lflags) + ltable
        out += b"\x08" + _sub_blocks(lzw_literal(a[rows].ravel()))
    return out + b";"


def _chunk(tag, data):
    return tag + struct.pack("<I", len(data)) + data + (b"\0" if len(data) % 2 else b"")


def webp_frame_chunks(webp):
    """the bitstream chunks of a still WebP (VP8 / VP8L, or VP8X's ALPH + VP8), for an ANMF chunk"""
    assert webp[:4] == b"RIFF" and webp[8:12] == b"WEBP"
    body = webp[12:]
    if body[:4] == b"VP8X":
        body = body[18:]
    return body


def webp_anim(canvas, frames, alpha):
    """an animated WebP: canvas (w, h), frames of (x, y, w, h, chunks) with even x, y; alpha sets the
    VP8X alpha flag, which is what decides whether Pillow opens the file as RGBA or RGBX"""
    cw, ch = canvas
    vp8x = struct.pack("<B3x", 0x02 | (0x10 if alpha else 0)) + (cw - 1).to_bytes(3, "little") + \
        (ch - 1).to_bytes(3, "little")
    body = _chunk(b"VP8X", vp8x) + _chunk(b"ANIM", struct.pack("<IH", 0xffffffff, 0))
    for x, y, w, h, chunks in frames:
        head = b"".join(v.to_bytes(3, "little") for v in (x // 2, y // 2, w - 1, h - 1, 100))
        body += _chunk(b"ANMF", head + b"\x02" + chunks)  # 0x02: no blending, no disposal
    return b"RIFF" + struct.pack("<I", 4 + len(body)) + b"WEBP" + body
