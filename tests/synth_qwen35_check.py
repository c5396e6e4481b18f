"""Checks a `clgemma synth qwen35-*` file against what llama.cpp's converter and llama-quantize write.

    synth_qwen35_check.py FILE --mix MIX --vocab VOCAB.gguf [--trunk N]

* keys: the arch's keys of the tiny converted fixture (tests/fixtures/qwen35_{dense,moe}_*.gguf, the same mix
  family) in the same order, plus nextn_predict_layers (the MTP block the fixtures were converted without);
* tensors: every layer holds the fixture's names for its kind (gated-delta, attention; the MTP block: attention
  plus nextn.*), with shapes from the file's own keys;
* types: the Q4_K_M rule table derived from llama.cpp's llama-quant.cpp (docs/design-qwen35.md 2.3), written
  out here independently of the C code: F32 for 1-D tensors, ssm_conv1d and the routers; output Q6_K;
  attn_qkv / attn_v (attn_v-like: one counter) and ffn_down* Q6_K on use_more_bits(layer, blocks), else Q4_K;
  every other matrix Q4_K. q8_0 / bf16: every matrix Q8_0 / BF16;
* vocabulary: VOCAB's tokens then "[PADi]" UNUSED up to 248,320.
Prints one PASS/FAIL line per check; exits 1 on a failure."""
import argparse
import os
import re
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import gguf_layout  # noqa: E402  (struct alone: gguf-py takes a minute over 248k tokens)

FIX = {("qwen35", True): "tests/fixtures/qwen35_dense_q4_k_m.gguf", ("qwen35", False): "tests/fixtures/qwen35_dense_bf16.gguf",
       ("qwen35moe", True): "tests/fixtures/qwen35_moe_q4_k_m.gguf", ("qwen35moe", False): "tests/fixtures/qwen35_moe_q8_0.gguf"}
F32_PARTS = ("ssm_conv1d", "ffn_gate_inp")
MAT = {"q4_k_m": "Q4_K", "q8_0": "Q8_0", "bf16": "BF16"}


def more_bits(i, n):
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


class File:
    """keys (in order) with values, tensors as (name, type name, ne)"""

    def __init__(self, path):
        self.L = gguf_layout.read(path)
        self.keys = [k[0] for k in self.L.kvs]
        self.kv = {k[0]: k for k in self.L.kvs}
        self.tensors = [(n, gguf_layout.TYPE_NAMES[t], ne) for n, t, ne, _ in self.L.tensors]

    def value(self, key):
        _, vt, et, v, start, end = self.kv[key]
        return [bool(x) for x in v] if et == 7 else v

    def strings(self, key):
        """a string array's values (bytes)"""
        _, _, _, _, start, end = self.kv[key]
        buf, pos = self.L.raw, start
        n, = struct.unpack_from("<Q", buf, pos)
        pos += 8 + n + 4 + 12
        out = []
        while pos < end:
            n, = struct.unpack_from("<Q", buf, pos)
            out.append(bytes(buf[pos + 8:pos + 8 + n]))
            pos += 8 + n
        return out

    def last_int(self, key):
        """an i32 array's last value"""
        return struct.unpack_from("<i", self.L.raw, self.kv[key][5] - 4)[0]


def expected_type(name, n_dims, mix, n_blocks):
    if n_dims < 2 or not name.endswith("weight") or "_norm.weight" in name or any(p in name for p in F32_PARTS):
        return "F32"
    if mix != "q4_k_m":
        return MAT[mix]
    if name == "output.weight":
        return "Q6_K"
    m = re.match(r"blk\.(\d+)\.(.*)", name)
    part = m.group(2) if m else name
    if part in ("attn_qkv.weight", "attn_v.weight") or part.startswith("ffn_down"):
        return "Q6_K" if more_bits(int(m.group(1)), n_blocks) else "Q4_K"
    return "Q4_K"


def layer_parts(f):
    parts = {}
    for name, _, _ in f.tensors:
        m = re.match(r"blk\.(\d+)\.(.*)", name)
        if m:
            parts.setdefault(int(m.group(1)), set()).add(m.group(2))
    return parts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--mix", required=True)
    ap.add_argument("--vocab", required=True)
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    r = File(a.file)
    arch = r.value("general.architecture")
    fx = File(FIX[(arch, a.mix != "bf16")])
    fails = []

    def case(name, problems):
        label = f"{a.label}.{name}" if a.label else name
        print(f"FAIL {label}: " + "; ".join(problems[:6]) if problems else f"PASS {label}")
        fails.extend(problems)

    # the model's keys: the fixture's in its order, with nextn_predict_layers; tokenizer.*: the vocabulary's
    vocab = File(a.vocab)
    ours = [k for k in r.keys if not k.startswith("tokenizer.")]
    theirs = [k for k in fx.keys if not k.startswith("tokenizer.") and k != "general.size_label"]
    extra = [k for k in ours if k not in theirs]
    missing = [k for k in theirs if k not in ours]
    problems = [f"extra {extra}"] * (extra != [f"{arch}.nextn_predict_layers"]) + [f"missing {missing}"] * bool(missing)
    if [k for k in ours if k in theirs] != theirs:
        problems.append("order differs from the converter's")
    if [k for k in r.keys if k.startswith("tokenizer.")] != [k for k in vocab.keys if k.startswith("tokenizer.")]:
        problems.append("tokenizer keys differ from the vocabulary's")
    case("keys", problems)

    A = arch + "."
    nb, mtp = r.value(A + "block_count"), r.value(A + "nextn_predict_layers")
    H, hd = r.value(A + "embedding_length"), r.value(A + "attention.key_length")
    nh, nkv = r.value(A + "attention.head_count"), r.value(A + "attention.head_count_kv")
    hk, hv, dk = r.value(A + "ssm.group_count"), r.value(A + "ssm.time_step_rank"), r.value(A + "ssm.state_size")
    rec = r.value(A + "attention.recurrent_layers")
    toks = r.strings("tokenizer.ggml.tokens")
    V, dc = len(toks), 2 * hk * dk + hv * dk
    problems = []
    if list(rec) != [i < nb - mtp and (i + 1) % 4 != 0 for i in range(nb)]:
        problems.append(f"recurrent_layers {rec}")
    fparts, oparts = layer_parts(fx), layer_parts(r)
    frec = fx.value(A + "attention.recurrent_layers")
    gdn = next(fparts[i] for i in range(len(frec)) if frec[i])
    att = next(fparts[i] for i in range(len(frec)) if not frec[i])
    nextn = {"nextn.eh_proj.weight", "nextn.enorm.weight", "nextn.hnorm.weight", "nextn.shared_head_norm.weight"}
    for i in range(nb):
        want = (gdn if rec[i] else att) | (nextn if i >= nb - mtp else set())
        if oparts.get(i) != want:
            problems.append(f"blk.{i}: {sorted(oparts.get(i, set()) ^ want)}")
    shapes = {"token_embd.weight": [H, V], "output.weight": [H, V], "attn_qkv.weight": [H, dc],
              "ssm_conv1d.weight": [4, dc], "ssm_out.weight": [hv * dk, H], "attn_q.weight": [H, 2 * nh * hd],
              "attn_k.weight": [H, nkv * hd], "attn_output.weight": [nh * hd, H], "ssm_alpha.weight": [H, hv],
              "nextn.eh_proj.weight": [2 * H, H]}
    for name, _, ne in r.tensors:
        part = re.sub(r"^blk\.\d+\.", "", name)
        if part in shapes and ne != shapes[part]:
            problems.append(f"{name} {ne} != {shapes[part]}")
    case("tensors", problems)

    bad = [f"{n} {t} != {e}" for n, t, ne in r.tensors if t != (e := expected_type(n, len(ne), a.mix, nb))]
    counts = {}
    for _, t, _ in r.tensors:
        counts[t] = counts.get(t, 0) + 1
    case("types (" + ", ".join(f"{t} {c}" for t, c in sorted(counts.items())) + ")", bad)

    vt = vocab.strings("tokenizer.ggml.tokens")
    problems = [f"{V} tokens"] * (V != 248320)
    if toks[:len(vt)] != vt:
        problems.append("the vocabulary's tokens differ")
    if toks[len(vt):] != [b"[PAD%d]" % i for i in range(len(vt), V)]:
        problems.append("padding is not [PADi]")
    if r.last_int("tokenizer.ggml.token_type") != 5:
        problems.append("padding not UNUSED")
    case("vocab", problems)
    sys.exit(1 if fails else 0)


main()
