#!/usr/bin/env python3
"""gguf_layout.py - the header of a GGUF file (metadata pairs, tensor table, offsets) read with
struct alone, fast even for the real Gemma 4 vocabulary (gguf-py's GGUFReader takes tens of
seconds to parse its 777k strings), and a copy of a file without its tokenizer.* pairs.

  python tools/gguf_layout.py FILE.gguf             pairs (key, type, short value) and tensors
  python tools/gguf_layout.py FILE.gguf --strip OUT  OUT = FILE without tokenizer.* pairs

Used by tests/synth_gemma4_check.py and tools/check_synth_mix.py. Needs only the standard library.
"""
import struct
import sys

VT_NAMES = ["U8", "I8", "U16", "I16", "U32", "I32", "F32", "BOOL", "STRING", "ARRAY", "U64", "I64", "F64"]
SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
TYPE_NAMES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 9: "Q8_1", 10: "Q2_K",
              11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 15: "Q8_K", 30: "BF16"}
BLOCK = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34), 9: (32, 36),
         10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 15: (256, 292), 30: (1, 2)}


class Layout:
    """kvs: [(key, vtype, etype or None, value, start, end)] (value None for string arrays and long
    arrays); tensors: [(name, type, ne list, offset)]; data_start; alignment; size"""


def read(path, head_bytes=64 << 20):
    with open(path, "rb") as f:
        buf = f.read(head_bytes)
        f.seek(0, 2)
        size = f.tell()
    if buf[:4] != b"GGUF":
        raise ValueError("%s: not a GGUF file" % path)
    version, n_t, n_kv = struct.unpack_from("<IQQ", buf, 4)
    pos = 24

    def skip(vt, pos):
        if vt == 8:
            n, = struct.unpack_from("<Q", buf, pos)
            return pos + 8 + n
        if vt == 9:
            et, n = struct.unpack_from("<IQ", buf, pos)
            pos += 12
            if et in SCALAR:
                return pos + struct.calcsize(SCALAR[et]) * n
            for _ in range(n):
                pos = skip(et, pos)
            return pos
        return pos + struct.calcsize(SCALAR[vt])

    L = Layout()
    L.version, L.kvs, L.tensors, L.size = version, [], [], size
    for _ in range(n_kv):
        start = pos
        n, = struct.unpack_from("<Q", buf, pos)
        key = buf[pos + 8:pos + 8 + n].decode()
        pos += 8 + n
        vt, = struct.unpack_from("<I", buf, pos)
        pos += 4
        etype, value = None, None
        if vt == 8:
            n, = struct.unpack_from("<Q", buf, pos)
            value = buf[pos + 8:pos + 8 + n].decode("utf-8", "replace")
        elif vt == 9:
            etype, n = struct.unpack_from("<IQ", buf, pos)
            if etype in SCALAR and n <= 4096:
                value = list(struct.unpack_from("<%d%s" % (n, SCALAR[etype][1]), buf, pos + 12))
        else:
            value, = struct.unpack_from(SCALAR[vt], buf, pos)
        pos = skip(vt, pos)
        L.kvs.append((key, vt, etype, value, start, pos))
    L.table_start = pos
    for _ in range(n_t):
        n, = struct.unpack_from("<Q", buf, pos)
        name = buf[pos + 8:pos + 8 + n].decode()
        pos += 8 + n
        nd, = struct.unpack_from("<I", buf, pos)
        ne = list(struct.unpack_from("<%dQ" % nd, buf, pos + 4))
        pos += 4 + 8 * nd
        t, off = struct.unpack_from("<IQ", buf, pos)
        pos += 12
        L.tensors.append((name, t, ne, off))
    L.table_end = pos
    L.alignment = next((int(v) for k, _, _, v, _, _ in L.kvs if k == "general.alignment"), 32)
    L.data_start = (pos + L.alignment - 1) // L.alignment * L.alignment
    L.raw = buf
    return L


def layer_of(name):
    """llama.cpp's weight_name_comparer key: the N of "blk.N.", or -1"""
    if name.startswith("blk."):
        part = name.split(".")[1]
        if part.isdigit():
            return int(part)
    return -1


def nbytes(t, ne):
    blk, size = BLOCK[t]
    rows = 1
    for d in ne[1:]:
        rows *= d
    return ne[0] // blk * size * rows


def kv_bytes(L, key_prefix):
    """the raw bytes of every pair whose key starts with key_prefix, in file order"""
    return b"".join(L.raw[s:e] for k, _, _, _, s, e in L.kvs if k.startswith(key_prefix))


def strip(path, out, prefix="tokenizer."):
    """out = path without the pairs whose key starts with prefix; tensor data byte for byte"""
    L = read(path)
    keep = [kv for kv in L.kvs if not kv[0].startswith(prefix)]
    h = b"GGUF" + struct.pack("<IQQ", L.version, len(L.tensors), len(keep))
    h += b"".join(L.raw[s:e] for _, _, _, _, s, e in keep) + L.raw[L.table_start:L.table_end]
    h += b"\0" * ((-len(h)) % L.alignment)
    with open(path, "rb") as f, open(out, "wb") as o:
        o.write(h)
        f.seek(L.data_start)
        while True:
            c = f.read(64 << 20)
            if not c:
                break
            o.write(c)


def main():
    if len(sys.argv) == 4 and sys.argv[2] == "--strip":
        strip(sys.argv[1], sys.argv[3])
        return
    L = read(sys.argv[1])
    for k, vt, et, v, _, _ in L.kvs:
        t = VT_NAMES[vt] + ("[%s]" % VT_NAMES[et] if et is not None else "")
        print("%-48s %-14s %s" % (k, t, repr(v)[:80] if v is not None else "..."))
    for name, t, ne, off in L.tensors:
        print("%-40s %-5s %-24s %d" % (name, TYPE_NAMES.get(t, t), ne, off))


if __name__ == "__main__":
    main()
