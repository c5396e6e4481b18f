#!/usr/bin/env python3
"""Writes small broken or unsupported GGUF files for tests/suites/cli_errors.sh into DIR.

  make_bad_models.py DIR REAL_MODEL

Files: notgguf.bin, truncated.gguf (first 1 MB of the real model), arch_llama.gguf (valid GGUF, unknown
architecture), iq2.gguf (gemma3 metadata, a tensor of unsupported type IQ2_XXS), huge.gguf (a sparse
file whose tensors need more memory than any test device has; the data is never read), and copies of the
converter-made Gemma 4 Q4_K_M fixture (tests/fixtures/gemma4_dense_q4_k_m.gguf, written by llama.cpp's
convert_hf_to_gguf.py and llama-quantize) with one thing broken: g4_no_key.gguf (a required key renamed),
g4_shape.gguf (a norm of the wrong length), g4_type.gguf (a norm stored as F16), g4_no_merges.gguf
(tokenizer.ggml.merges renamed), g4_tokenizer.gguf (tokenizer.ggml.model "gemma9")."""
import os
import struct
import sys

import numpy as np
from gguf import GGUFWriter, GGMLQuantizationType

out, real = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)

with open(os.path.join(out, "notgguf.bin"), "wb") as f:
    f.write(b"this is not a model\n" * 100)
with open(real, "rb") as f, open(os.path.join(out, "truncated.gguf"), "wb") as g:
    g.write(f.read(1 << 20))


def gemma3_meta(w, arch="gemma3"):
    w.add_uint32(f"{arch}.block_count", 1)
    w.add_uint32(f"{arch}.embedding_length", 256)
    w.add_uint32(f"{arch}.attention.head_count", 1)
    w.add_uint32(f"{arch}.attention.head_count_kv", 1)
    w.add_uint32(f"{arch}.feed_forward_length", 256)
    w.add_uint32(f"{arch}.context_length", 128)
    w.add_uint32(f"{arch}.attention.key_length", 256)
    w.add_uint32(f"{arch}.attention.value_length", 256)
    w.add_string("tokenizer.ggml.model", "llama")
    toks = ["<pad>", "<eos>", "<bos>", "<unk>"] + [f"<0x{i:02X}>" for i in range(256)] + ["a", "b"]
    w.add_token_list(toks)
    w.add_token_scores([0.0] * len(toks))
    w.add_token_types([3, 3, 3, 2] + [6] * 256 + [1, 1])
    w.add_bos_token_id(2)
    w.add_eos_token_id(1)


w = GGUFWriter(os.path.join(out, "arch_llama.gguf"), "llama")
w.add_uint32("llama.block_count", 1)
w.add_tensor("token_embd.weight", np.zeros((4, 32), dtype=np.float32))
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()

w = GGUFWriter(os.path.join(out, "iq2.gguf"), "gemma3")
gemma3_meta(w)
raw = np.zeros((262, 66), dtype=np.uint8)  # 262 rows x 256 values of IQ2_XXS (66 bytes per block)
w.add_tensor("token_embd.weight", raw, raw_shape=(262, 66), raw_dtype=GGMLQuantizationType.IQ2_XXS)
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()

# huge: header declares a 64 GiB F32 tensor; the file is made sparse to that length
path = os.path.join(out, "huge.gguf")
w = GGUFWriter(path, "gemma3")
gemma3_meta(w)
n_rows = 64 * (1 << 30) // (256 * 4)
w.add_tensor_info("token_embd.weight", (n_rows, 256), np.dtype(np.float32), n_rows * 256 * 4)
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_ti_data_to_file(); w.close()
size = os.path.getsize(path)
align = (size + 31) // 32 * 32
os.truncate(path, align + n_rows * 256 * 4)


def patched(src, dst, find, after, new):
    """src with the bytes at (the first occurrence of find) + after replaced by new"""
    with open(src, "rb") as f:
        data = bytearray(f.read())
    at = data.find(find)
    if at < 0:
        sys.exit(f"make_bad_models.py: {find!r} not in {src}")
    data[at + after:at + after + len(new)] = new
    with open(os.path.join(out, dst), "wb") as f:
        f.write(data)


# a tensor-directory entry is the name, n_dims (u32), ne[] (u64 each), type (u32), offset (u64)
g4 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "gemma4_dense_q4_k_m.gguf")
key = b"gemma4.attention.key_length_swa"
patched(g4, "g4_no_key.gguf", key, len(key) - 1, b"x")
patched(g4, "g4_shape.gguf", b"blk.0.attn_q_norm.weight", 24 + 4, struct.pack("<Q", 16))
patched(g4, "g4_type.gguf", b"blk.2.ffn_norm.weight", 21 + 4 + 8, struct.pack("<I", int(GGMLQuantizationType.F16)))
patched(g4, "g4_no_merges.gguf", b"tokenizer.ggml.merges", 20, b"x")
model_key = b"tokenizer.ggml.model"
patched(g4, "g4_tokenizer.gguf", model_key + struct.pack("<IQ", 8, 6) + b"gemma4", len(model_key) + 12 + 5, b"9")
