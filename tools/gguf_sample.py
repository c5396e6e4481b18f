#!/usr/bin/env python3
"""Ship a large GGUF to the GPU machine as a small sample, and grow it back there.

  tools/gguf_sample.py shrink MODEL.gguf OUT.sample [--keep BYTES]
  tools/gguf_sample.py grow OUT.sample MODEL.gguf

shrink keeps the file's header (metadata, vocabulary, tensor table) and the first BYTES (default 32 KiB, in whole blocks) of
every tensor; grow writes a file of the original size whose tensors repeat their kept bytes. Shapes, types,
vocabulary and the layout are the original's, so speed is too (values repeat, which only matters to outputs:
use the grown file for timing, never for goldens). The one-call transfer limit is 64 MiB; the Gemma 3 270M
file (253 MB) samples to about 11 MB. Uses gguf-py from the llama.cpp reference (.cache/llama.cpp) or pip
to read the header when shrinking; grow needs only the standard library.
"""
import json
import struct
import sys


def shrink(src, dst, keep):
    sys.path.insert(0, ".cache/llama.cpp/gguf-py")
    import gguf  # noqa: E402  (the reference's reader)

    r = gguf.GGUFReader(src)
    tensors = sorted(r.tensors, key=lambda t: t.data_offset)
    start = tensors[0].data_offset if tensors else 0
    with open(src, "rb") as f:
        head = f.read(start)
        parts, table = [], []
        for t in tensors:
            n = int(t.n_bytes)
            f.seek(t.data_offset)
            unit = gguf.GGML_QUANT_SIZES[t.tensor_type][1]  # whole blocks, so repeats stay valid blocks
            b = f.read(min(n, max(unit, keep // unit * unit)))
            table.append([t.data_offset, n, len(b)])
            parts.append(b)
        f.seek(0, 2)
        size = f.tell()
    meta = json.dumps({"size": size, "head": len(head), "tensors": table}).encode()
    with open(dst, "wb") as o:
        o.write(struct.pack("<Q", len(meta)) + meta + head + b"".join(parts))


def grow(src, dst):
    with open(src, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        meta = json.loads(f.read(n))
        head = f.read(meta["head"])
        with open(dst, "wb") as o:
            o.truncate(meta["size"])
            o.write(head)
            for off, total, kept in meta["tensors"]:
                b = f.read(kept)
                o.seek(off)
                reps, rest = divmod(total, kept)
                chunk = b * max(1, (1 << 24) // kept)
                done = 0
                while done + len(chunk) <= reps * kept:
                    o.write(chunk)
                    done += len(chunk)
                o.write(b * ((reps * kept - done) // kept) + b[:rest])


if __name__ == "__main__":
    a = sys.argv[1:]
    if len(a) >= 3 and a[0] == "shrink":
        keep = int(a[4]) if len(a) >= 5 and a[3] == "--keep" else 32 << 10
        shrink(a[1], a[2], keep)
    elif len(a) == 3 and a[0] == "grow":
        grow(a[1], a[2])
    else:
        sys.exit("usage: gguf_sample.py shrink MODEL OUT [--keep BYTES] | grow SAMPLE MODEL")
