"""`clgemma info` against a hand computation from the GGUF's own hyperparameters (tests/suites/cli_info.sh).

usage: cli_info_check.py NAME MODEL [clgemma info options...]

Runs build/clgemma info -m MODEL OPTIONS, reads its lines, and recomputes every figure from the
file (gguf-py) and the device's memory as the report states it, the way docs/ARCHITECTURE.md
("Memory") describes the sizing:
  * per layer, K and V of n_kv x head_dim values per token, 64 bytes per 32 values in f16, 34 in
    q8_0, 18 in q4 (--kv-type: llama.cpp's blocks, an f16 scale per 32 values); Gemma 3: every `sliding_window_pattern`-th
    layer (default 6) is full, the others slide; Gemma 4: the per-layer pattern, head_dim by kind, the
    last `shared_kv_layers` layers own no cache;
  * a sliding layer keeps a ring of ceil((window + chunk - 1) / 32) blocks, unless that spans the
    whole context (then it counts as full); chunk 512 on a device that is not a GPU;
  * the cache may take a third of what the weights (every tensor but per_layer_token_embd) leave;
  * sequences: --seqs, else the room over (ring + min(ctx, 2048) tokens), at most 4 off a GPU;
    every sequence gets a ring and a whole context when the room holds them, and the ring pool as
    many blocks again as what is left of the room holds (the prefix cache's windows).
Prints "PASS NAME" or "FAIL NAME: what differs"."""
import math
import re
import subprocess
import sys

import gguf

BLOCK = 32
BYTES_PER_32 = {"f16": 64, "q8_0": 34, "q4": 18, "q4_0": 18}
name, model, opts = sys.argv[1], sys.argv[2], sys.argv[3:]


def opt(flag, default):
    return int(opts[opts.index(flag) + 1]) if flag in opts else default


def field(r, key, default=None):
    f = r.fields.get(key)
    return default if f is None else f.contents()


out = subprocess.run(["build/clgemma", "info", "-m", model] + opts, capture_output=True, text=True)
lines = {ln[:13].strip(): ln[13:] for ln in out.stdout.splitlines()}
if out.returncode != 0:
    print(f"FAIL {name}: exit {out.returncode}: {out.stderr.strip()}")
    sys.exit(1)


def ints(key):  # the numbers after the name of the file or device, where the line has one
    text = lines[key].rsplit(": ", 1)[-1] if key == "model" else lines[key]
    return [int(x) for x in re.findall(r"\d+", text)]


r = gguf.GGUFReader(model)
arch = field(r, "general.architecture")
A = arch + "."
NL = field(r, A + "block_count")
train = field(r, A + "context_length")
window = field(r, A + "attention.sliding_window", 0)
if arch == "gemma3":
    n_kv = field(r, A + "attention.head_count_kv")
    hd = field(r, A + "attention.key_length")
    pattern = field(r, A + "attention.sliding_window_pattern", 6) or 1
    dims = [n_kv * hd] * NL
    slides = [window > 0 and l % pattern < pattern - 1 for l in range(NL)]
else:
    kv = field(r, A + "attention.head_count_kv")
    kv = kv if isinstance(kv, list) else [kv] * NL
    slides = field(r, A + "attention.sliding_window_pattern")
    hd_full, hd_swa = field(r, A + "attention.key_length"), field(r, A + "attention.key_length_swa")
    first_shared = NL - field(r, A + "attention.shared_kv_layers", 0)
    dims = [kv[l] * (hd_swa if slides[l] else hd_full) if l < first_shared else 0 for l in range(NL)]

device_bytes = int(re.search(r"(\d+) bytes", lines["device"]).group(1))
weights = sum(int(t.n_bytes) for t in r.tensors if t.name != "per_layer_token_embd.weight")
host = sum(int(t.n_bytes) for t in r.tensors if t.name == "per_layer_token_embd.weight")
ctx = min(opt("--ctx", min(train, 8192)), train)
kv_type = opts[opts.index("--kv-type") + 1] if "--kv-type" in opts else "f16"
chunk = opt("--max-batch", 512)
max_blocks = math.ceil(ctx / BLOCK)
ring = 0
full_b = slide_b = n_full = n_slide = 0
for l in range(NL):
    if not dims[l]:
        continue
    b = 2 * dims[l] * BYTES_PER_32[kv_type] // 32
    r_l = min(math.ceil((window + chunk - 1) / BLOCK), max_blocks)
    if slides[l] and r_l < max_blocks:
        ring, slide_b, n_slide = max(ring, r_l), slide_b + b, n_slide + 1
    else:
        full_b, n_full = full_b + b, n_full + 1
ring_seq = slide_b * ring * BLOCK
room = (device_bytes - weights) // 3
typ = math.ceil(min(ctx, 2048) / BLOCK) * BLOCK
seqs = opt("--seqs", 0) or max(1, min(4, room // (ring_seq + typ * full_b)))
rb = slide_b * BLOCK  # one ring block over the sliding layers
left = room - seqs * ring * rb - seqs * max_blocks * BLOCK * full_b
rings = seqs * ring + (min(left // rb, seqs * ring) if rb and left > 0 else 0)  # spare for cached windows
want = {
    "model": [NL, train],
    "weights": [weights, host],
    "context": [ctx, chunk],
    "kv full": [n_full, full_b],
    "kv sliding": [n_slide, window if n_slide else 0, slide_b, ring * BLOCK, ring_seq],
    "kv shared": [NL - n_full - n_slide],
    "kv room": [room],
    "room holds": [(room - ring_seq) // full_b, room // (ring_seq + max_blocks * BLOCK * full_b),
                   room // (ring_seq + typ * full_b), min(ctx, 2048)],
    "plan": [seqs, seqs * max_blocks * BLOCK, seqs * max_blocks, rings, BLOCK,
             seqs * max_blocks * BLOCK * full_b + rings * rb],
    "recommended": [ctx, max(1, min(4, room // (ring_seq + typ * full_b)))],
}
bad = [] if lines.get("kv type", "").strip() == {"q4_0": "q4"}.get(kv_type, kv_type) else \
    [f"kv type: {lines.get('kv type', '').strip()} != {kv_type}"]
for key, nums in want.items():
    got = ints(key)
    if key == "weights":  # "N bytes on the device (X MiB), H in host memory"
        got = [got[0], got[-1]]
    elif key == "kv room":
        got = got[:1]
    elif key == "plan":  # "... bytes (X MiB)": the exact count comes before the rounded one
        got = got[:6]
    if got[:len(nums)] != nums:
        bad.append(f"{key}: {got[:len(nums)]} != hand {nums} ({lines[key].strip()})")
print(f"FAIL {name}: " + "; ".join(bad) if bad else f"PASS {name} ({lines['plan'].strip()})")
sys.exit(1 if bad else 0)
