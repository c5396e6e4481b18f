#!/usr/bin/env python3
"""gen_quant_golden.py — golden dequantization data for the weight kernels (tests/opencl/ops/test_kernels.c).

For every GGUF type the engine supports, builds a small matrix of raw GGUF block bytes and
dequantizes it with gguf-py (gguf.quants.dequantize: numpy code that mirrors llama.cpp's block
layouts, written independently of opencl/kernels/types.cl). The quantized payload (nibbles,
high bits, 6-bit scales, int8 scales) is random bytes, so every bit pattern of every field is
exercised; only the fp16 scale fields (d, dmin / m) are set to finite random halves, and the
float types get finite random values, so the expected output never holds inf or NaN.

Output: tests/golden/quant_blocks.bin, all integers little-endian uint32:

    magic    "CLGQ" (4 bytes)
    version  1
    count    number of entries
    count x entry:
        type       GGML type id (0 F32, 1 F16, 2 Q4_0, 3 Q4_1, 6 Q5_0, 7 Q5_1, 8 Q8_0,
                   12 Q4_K, 13 Q5_K, 14 Q6_K, 30 BF16)
        rows, cols matrix shape in values (cols is a multiple of 256)
        row_bytes  bytes per row in the GGUF type
        raw        rows * row_bytes bytes: the rows, back to back, as in a GGUF tensor
        expected   rows * cols float32: the dequantized matrix, row-major

Run with the project venv (numpy + gguf):  .venv/bin/python tools/gen_quant_golden.py
The seed is fixed, so the file is reproducible.
"""
import os
import struct
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants
from gguf.constants import GGML_QUANT_SIZES

# (type, rows, cols): different shapes per type, row counts prime (never a multiple of a
# work-group size), cols = 256 * m with m = 1..4
CASES = [
    (T.F32, 5, 256),
    (T.F16, 7, 512),
    (T.BF16, 11, 256),
    (T.Q8_0, 9, 512),
    (T.Q4_0, 13, 256),
    (T.Q4_1, 11, 512),
    (T.Q5_0, 7, 768),
    (T.Q5_1, 13, 256),
    (T.Q4_K, 19, 512),
    (T.Q5_K, 9, 768),
    (T.Q6_K, 5, 1024),
]

# byte offsets of the fp16 scale fields within one block
HALF_FIELDS = {
    T.Q8_0: [0],          # d
    T.Q4_0: [0],          # d
    T.Q4_1: [0, 2],       # d, m
    T.Q5_0: [0],          # d
    T.Q5_1: [0, 2],       # d, m
    T.Q4_K: [0, 2],       # d, dmin
    T.Q5_K: [0, 2],       # d, dmin
    T.Q6_K: [208],        # d (after ql[128], qh[64], scales[16])
}


def sane_halves(rng, n):
    """finite random fp16 values of either sign, magnitudes spread over ~3 decades"""
    mag = 10.0 ** rng.uniform(-3.0, -0.5, n)
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return (mag * sign).astype(np.float16)


def make_raw(rng, qtype, rows, cols):
    if qtype == T.F32:
        return rng.normal(0, 1, (rows, cols)).astype(np.float32).view(np.uint8).reshape(rows, -1)
    if qtype == T.F16:
        return rng.normal(0, 1, (rows, cols)).astype(np.float16).view(np.uint8).reshape(rows, -1)
    if qtype == T.BF16:
        f = rng.normal(0, 1, (rows, cols)).astype(np.float32)
        return (f.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8).reshape(rows, -1)
    block_size, type_size = GGML_QUANT_SIZES[qtype]
    nblk = rows * cols // block_size
    blocks = rng.integers(0, 256, (nblk, type_size), dtype=np.uint8)
    for off in HALF_FIELDS[qtype]:
        blocks[:, off:off + 2] = sane_halves(rng, nblk).view(np.uint8).reshape(nblk, 2)
    return blocks.reshape(rows, -1)


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out_path = os.path.join(root, "tests", "golden", "quant_blocks.bin")
    rng = np.random.default_rng(20240611)
    out = bytearray(b"CLGQ")
    out += struct.pack("<II", 1, len(CASES))
    for qtype, rows, cols in CASES:
        assert cols % 256 == 0
        raw = make_raw(rng, qtype, rows, cols)
        block_size, type_size = GGML_QUANT_SIZES[qtype]
        row_bytes = cols // block_size * type_size
        assert raw.shape == (rows, row_bytes), (qtype.name, raw.shape)
        exp = quants.dequantize(raw, qtype).astype(np.float32)
        assert exp.shape == (rows, cols), (qtype.name, exp.shape)
        assert np.all(np.isfinite(exp)), qtype.name
        out += struct.pack("<IIII", int(qtype), rows, cols, row_bytes)
        out += raw.tobytes()
        out += exp.astype("<f4").tobytes()
        print(f"{qtype.name:5s} {rows:3d} x {cols:4d}  row_bytes {row_bytes:5d}  "
              f"max|w| {float(np.max(np.abs(exp))):.4g}", file=sys.stderr)
    with open(out_path, "wb") as f:
        f.write(out)
    print(f"wrote {out_path}: {len(out)} bytes", file=sys.stderr)
    assert len(out) < 300 * 1024


if __name__ == "__main__":
    main()
