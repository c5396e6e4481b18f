#!/usr/bin/env python3
"""Writes small valid GGUF files into tests/fuzz/corpus_gguf/ as seeds for tests/fuzz/fuzz_gguf.c.

Plain struct packing from the GGUF spec, no dependencies, deterministic output (the seeds are
committed; rerun after changing this file). If the gguf package (gguf-py, llama.cpp's own
reader) is importable, each seed is also read back with it, so the seeds are checked by an
implementation other than ours.

    python3 tools/make_gguf_seeds.py [outdir]
"""
import os
import struct
import sys

U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
          BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}
# ggml types used here: (id, block elements, block bytes)
GGML = {"F32": (0, 1, 4), "F16": (1, 1, 2), "Q4_0": (2, 32, 18), "Q8_0": (8, 32, 34),
        "Q4_K": (12, 256, 144), "Q6_K": (14, 256, 210), "BF16": (30, 1, 2), "I8": (24, 1, 1)}


def s(text):
    b = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(b)) + b


def value(vtype, v):
    """Encoded value (without its type tag). Arrays are (elem_type, [items])."""
    if vtype == STRING:
        return s(v)
    if vtype == ARRAY:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(value(et, x) for x in items)
    return struct.pack(SCALAR[vtype], v)


def gguf(kvs, tensors=(), version=3, alignment=32):
    """kvs: [(key, type, value)]; tensors: [(name, ggml type name, ne list)].
    Tensor data is laid out in order, each aligned; bytes are a simple counter pattern."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for key, vt, v in kvs:
        out += s(key) + struct.pack("<I", vt) + value(vt, v)
    pad = lambda n: (alignment - n % alignment) % alignment
    offs, off = [], 0
    for name, tname, ne in tensors:
        tid, blck, bsize = GGML[tname]
        nbytes = ne[0] // blck * bsize
        for d in ne[1:]:
            nbytes *= d
        offs.append((off, nbytes))
        out += s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        out += struct.pack("<IQ", tid, off)
        off += nbytes + pad(nbytes)
    if tensors:
        out += b"\0" * pad(len(out))
        data = bytearray()
        for i, (o, n) in enumerate(offs):
            data += b"\0" * (o - len(data))
            data += bytes((o + k + i) & 0xFF for k in range(n))
        out += bytes(data)
    return out


def seeds():
    yield "header_only.gguf", gguf([])
    yield "v2_header_only.gguf", gguf([], version=2)
    yield "all_types.gguf", gguf([
        ("general.architecture", STRING, "gemma3"),
        ("t.u8", U8, 200), ("t.i8", I8, -5), ("t.u16", U16, 60000), ("t.i16", I16, -30000),
        ("t.u32", U32, 4000000000), ("t.i32", I32, -2000000000), ("t.f32", F32, 1.5),
        ("t.bool", BOOL, True), ("t.u64", U64, 1 << 40), ("t.i64", I64, -(1 << 40)),
        ("t.f64", F64, -2.25), ("t.u64max", U64, (1 << 64) - 1), ("t.str", STRING, "hello"),
        ("t.empty", STRING, ""),
        ("t.arr_i32", ARRAY, (I32, [1, -2, 3])), ("t.arr_f32", ARRAY, (F32, [0.25, -1000.0])),
        ("t.arr_bool", ARRAY, (BOOL, [True, False])), ("t.arr_u64", ARRAY, (U64, [7])),
        ("t.arr_empty", ARRAY, (U32, [])),
        ("t.arr_str", ARRAY, (STRING, ["a", "", "\u2581the", "c\0c"])),
        ("t.nested", ARRAY, (ARRAY, [(I16, [1, 2]), (I16, [3])])),
        ("t.nested3", ARRAY, (ARRAY, [(ARRAY, [(STRING, ["x", "yz"])]), (ARRAY, [])])),
    ])
    yield "tensors.gguf", gguf(
        [("general.architecture", STRING, "llama"), ("general.alignment", U32, 32)],
        [("a.f32", "F32", [4, 3]), ("b.q4_k", "Q4_K", [256, 2]), ("c.q8_0", "Q8_0", [64]),
         ("d.f16", "F16", [8, 2, 2]), ("e.q6_k", "Q6_K", [256, 1, 1, 1]),
         ("f.q4_0", "Q4_0", [32, 2]), ("g.bf16", "BF16", [2]), ("h.empty", "F32", [0, 4])])
    yield "v2_align64.gguf", gguf(
        [("general.alignment", U32, 64), ("general.name", STRING, "v2")],
        [("x", "F32", [8]), ("y", "I8", [3]), ("z", "Q8_0", [32, 1])], version=2, alignment=64)
    vocab = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "\u2581the", "\u2581a", "\n", "<start_of_turn>",
             "<end_of_turn>", "user", "model"] + ["tok%d" % i for i in range(20)]
    kvs = [("general.architecture", STRING, "gemma3"), ("general.name", STRING, "tiny"),
           ("general.tags", ARRAY, (STRING, ["gemma3", "text-generation"])),
           ("gemma3.context_length", U32, 128), ("gemma3.embedding_length", U32, 32),
           ("gemma3.block_count", U32, 1), ("gemma3.feed_forward_length", U32, 64),
           ("gemma3.attention.head_count", U32, 2), ("gemma3.attention.head_count_kv", U32, 1),
           ("gemma3.attention.layer_norm_rms_epsilon", F32, 1e-6),
           ("gemma3.rope.freq_base", F32, 1e6), ("tokenizer.ggml.model", STRING, "llama"),
           ("tokenizer.ggml.tokens", ARRAY, (STRING, vocab)),
           ("tokenizer.ggml.scores", ARRAY, (F32, [-float(i) for i in range(len(vocab))])),
           ("tokenizer.ggml.token_type", ARRAY, (I32, [3] * 5 + [1] * (len(vocab) - 5))),
           ("tokenizer.ggml.bos_token_id", U32, 2), ("tokenizer.ggml.add_bos_token", BOOL, True),
           ("general.quantization_version", U32, 2), ("general.file_type", U32, 15)]
    yield "gemma_like.gguf", gguf(kvs, [
        ("token_embd.weight", "Q8_0", [32, len(vocab)]), ("output_norm.weight", "F32", [32]),
        ("blk.0.attn_q.weight", "Q4_0", [32, 32]), ("blk.0.ffn_down.weight", "Q4_0", [64, 32]),
        ("blk.0.attn_norm.weight", "F32", [32])])

    # an mmproj as llama.cpp's converter writes it for Gemma 4 (docs/design-vision.md 2.1-2.2), one layer, 8 wide
    yield "clip_like.gguf", gguf(
        [("general.architecture", STRING, "clip"), ("general.type", STRING, "mmproj"),
         ("general.file_type", U32, 1), ("clip.has_vision_encoder", BOOL, True),
         ("clip.vision.projection_dim", U32, 16), ("clip.vision.image_size", U32, 224),
         ("clip.vision.patch_size", U32, 2), ("clip.vision.embedding_length", U32, 8),
         ("clip.vision.feed_forward_length", U32, 12), ("clip.vision.block_count", U32, 1),
         ("clip.vision.attention.head_count", U32, 2),
         ("clip.vision.image_mean", ARRAY, (F32, [0.0, 0.0, 0.0])),
         ("clip.vision.image_std", ARRAY, (F32, [1.0, 1.0, 1.0])),
         ("clip.vision.projector_type", STRING, "gemma4v"),
         ("clip.vision.attention.layer_norm_epsilon", F32, 1e-6), ("general.quantization_version", U32, 2)],
        [("mm.input_projection.weight", "F16", [8, 16]), ("v.blk.0.ln1.weight", "F32", [8]),
         ("v.blk.0.attn_q.weight", "F16", [8, 8]), ("v.blk.0.attn_q_norm.weight", "F32", [4]),
         ("v.blk.0.ffn_down.weight", "F16", [12, 8]), ("v.patch_embd.weight", "F16", [2, 2, 3, 8]),
         ("v.position_embd.weight", "F32", [8, 4, 2]), ("v.std_bias", "F32", [8]), ("v.std_scale", "F32", [8])])


def verify_with_gguf_py(path, blob):
    try:
        from gguf import GGUFReader  # llama.cpp's gguf-py, if installed
    except ImportError:
        return "unchecked"
    r = GGUFReader(path)
    n_t = struct.unpack_from("<Q", blob, 8)[0]
    assert len(r.tensors) == n_t, (path, len(r.tensors), n_t)
    return "ok (gguf-py: %d fields, %d tensors)" % (len(r.fields), len(r.tensors))


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "tests", "fuzz", "corpus_gguf")
    os.makedirs(outdir, exist_ok=True)
    total = 0
    for name, blob in seeds():
        path = os.path.join(outdir, name)
        with open(path, "wb") as f:
            f.write(blob)
        total += len(blob)
        print("%-22s %6d bytes  %s" % (name, len(blob), verify_with_gguf_py(path, blob)))
    print("total %d bytes" % total)


if __name__ == "__main__":
    main()
