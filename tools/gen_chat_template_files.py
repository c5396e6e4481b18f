#!/usr/bin/env python3
"""Copies of a GGUF file that differ only in tokenizer.chat_template, for tests/suites/chat_template.sh.

    gen_chat_template_files.py SRC.gguf OUTDIR CORPUS.json

Writes into OUTDIR, each a byte-for-byte copy of SRC except for that one key (the tensor data is moved to
stay aligned; tensor offsets are relative to it):
  known_<name>.gguf   each template text of CORPUS.json (tests/golden/chat_gemma4.json or chat_gemma3.json)
  unknown.gguf        a valid jinja2 template clgemma does not know
  broken.gguf         a template jinja2 cannot parse (an {% if %} never closed, on line 3)
  none.gguf           no tokenizer.chat_template at all
  nonstring.gguf      tokenizer.chat_template stored as a uint32
"""
import json
import os
import struct
import sys

from gguf import GGUFReader

KEY = "tokenizer.chat_template"
UNKNOWN = ("{{ bos_token }}{% for m in messages %}<|turn>{{ m['role'] }}\n{{ m['content'] | trim }}<turn|>\n"
           "{% endfor %}{% if add_generation_prompt %}<|turn>model\n{% endif %}")
BROKEN = "{{ bos_token }}\n{% for m in messages %}{{ m['content'] }}{% endfor %}\n{% if add_generation_prompt %}<|turn>model\n"


def field_bytes(value):
    k = KEY.encode()
    head = struct.pack("<Q", len(k)) + k
    if value is None:
        return b""
    if isinstance(value, int):
        return head + struct.pack("<I", 4) + struct.pack("<I", value)
    v = value.encode("utf-8")
    return head + struct.pack("<I", 8) + struct.pack("<Q", len(v)) + v


def rewrite(src, dst, value):
    r = GGUFReader(src)
    raw = open(src, "rb").read()
    kv = [f for f in r.fields.values() if not f.name.startswith("GGUF.")]
    end_of = lambda f: f.offset + sum(p.nbytes for p in f.parts)
    old = r.fields.get(KEY)
    if old is not None:
        start, stop = old.offset, end_of(old)
    else:
        start = stop = max(end_of(f) for f in kv)
    infos_end = max(end_of(t.field) for t in r.tensors) if r.tensors else max(end_of(f) for f in kv)
    n_kv = len(kv) - (old is not None) + (value is not None)
    head = bytearray(raw[:start] + field_bytes(value) + raw[stop:infos_end])
    struct.pack_into("<Q", head, 16, n_kv)  # magic, version, tensor count, then the kv count
    align = int(r.fields["general.alignment"].parts[-1][0]) if "general.alignment" in r.fields else 32
    head += b"\0" * (-len(head) % align)
    with open(dst, "wb") as f:
        f.write(head)
        f.write(raw[r.data_offset:])


def main():
    src, out, corpus = sys.argv[1], sys.argv[2], sys.argv[3]
    os.makedirs(out, exist_ok=True)
    with open(corpus, encoding="utf-8") as f:
        templates = json.load(f)["templates"]
    for name, t in templates.items():
        rewrite(src, os.path.join(out, f"known_{name}.gguf"), t["text"])
    rewrite(src, os.path.join(out, "unknown.gguf"), UNKNOWN)
    rewrite(src, os.path.join(out, "broken.gguf"), BROKEN)
    rewrite(src, os.path.join(out, "none.gguf"), None)
    rewrite(src, os.path.join(out, "nonstring.gguf"), 7)


if __name__ == "__main__":
    main()
