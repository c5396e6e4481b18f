#!/usr/bin/env python3
"""Writes the Hugging Face tokenizer files of the tiny Gemma 4 fixtures: a truncated real Gemma 4 vocabulary.

The real vocabulary (262,144 tokens, 514,906 merges) comes from llama.cpp's models/ggml-vocab-gemma-4.gguf
(.cache/llama.cpp, deploy/fetch_llama_ref.sh). A fixture cannot carry all of it (< 5 MB per file), so:

  * ids 0 .. N_REAL-1 are the real tokens at their real ids: <pad> <eos> <bos> <unk> <mask>, the control
    and tool tokens (<|tool> 46 ... <|"|> 52, <|think|> 98, <|channel> 100, <channel|> 101, <|turn> 105,
    <turn|> 106), runs of newlines and of "▁", HTML tags, the 256 byte tokens <0x00>..<0xFF> (238..493)
    and the first BPE pieces ("▁t", "in", "▁the", ...);
  * the real single-character tokens that those pieces are spelt with, and printable ASCII (real ids 236743
    and up: "▁", "e", "t", ...), follow at ids N_REAL.., in their real order, so that every kept piece can be
    reached;
  * the merges are the real ones, in their real order, whose two operands and result are all kept.

Everything else is as in google/gemma-4: a BPE model with byte fallback, the normalizer/pre-tokenizer/decoder
of transformers' GemmaTokenizer (" " -> "▁"; split merged with previous; "▁" -> " ", byte fallback, fuse),
the real special tokens (all CONTROL except the seven llama.cpp's converter types USER_DEFINED), no
add_*_token keys and no post-processor (llama.cpp's converter writes add_bos_token itself), and the real chat
template (models/templates/google-gemma-4-31B-it.jinja).  The multimodal tokens (<|image> 255999 ...) are not
kept.

  gemma4_fixture_vocab.py OUT_DIR        (run with .venv-hf: needs gguf and tokenizers)
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import gguf
from tokenizers import AddedToken, Tokenizer, decoders, normalizers, pre_tokenizers
from tokenizers.models import BPE

ROOT = Path(__file__).resolve().parent.parent
LLAMA = ROOT / ".cache" / "llama.cpp"
VOCAB_GGUF = LLAMA / "models" / "ggml-vocab-gemma-4.gguf"
TEMPLATE = LLAMA / "models" / "templates" / "google-gemma-4-31B-it.jinja"
N_REAL = 768          # real ids kept as they are
FIRST_PIECE = 494     # the first BPE piece after the byte tokens
CONTROL, USER_DEFINED = int(gguf.TokenType.CONTROL), int(gguf.TokenType.USER_DEFINED)


def real_vocab() -> tuple[list[str], list[int], list[str]]:
    r = gguf.GGUFReader(str(VOCAB_GGUF))
    f = r.fields
    return (f["tokenizer.ggml.tokens"].contents(), f["tokenizer.ggml.token_type"].contents(),
            f["tokenizer.ggml.merges"].contents())


def truncated() -> dict:
    """The fixture vocabulary: tokens (id order), real_ids, specials (id -> text), merges (pairs)."""
    tokens, types, merges = real_vocab()
    real_id = {t: i for i, t in enumerate(tokens)}
    spelt = {c for t in tokens[FIRST_PIECE:N_REAL] for c in t} | {chr(c) for c in range(0x21, 0x7f)}
    chars = sorted((c for c in spelt if real_id.get(c, 0) >= N_REAL), key=real_id.__getitem__)
    kept = tokens[:N_REAL] + chars
    ids = {t: i for i, t in enumerate(kept)}
    pairs = []
    for m in merges:
        a, b = m.split(" ", 1)
        if a in ids and b in ids and a + b in ids:
            pairs.append((a, b))
    specials = {i: tokens[i] for i in range(N_REAL) if types[i] in (CONTROL, USER_DEFINED)}
    return {"tokens": kept, "real_ids": [real_id[t] for t in kept], "specials": specials, "merges": pairs}


def write(out: Path) -> dict:
    v = truncated()
    ids = {t: i for i, t in enumerate(v["tokens"])}
    tk = Tokenizer(BPE(vocab=ids, merges=v["merges"], unk_token="<unk>", fuse_unk=True, byte_fallback=True,
                       dropout=None))
    tk.normalizer = normalizers.Replace(" ", "\u2581")
    tk.pre_tokenizer = pre_tokenizers.Split(" ", behavior="merged_with_previous", invert=False)
    tk.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()])
    tk.add_special_tokens([AddedToken(t, special=True, normalized=False) for _, t in sorted(v["specials"].items())])
    out.mkdir(parents=True, exist_ok=True)
    tk.save(str(out / "tokenizer.json"))
    named = {"<pad>", "<eos>", "<bos>", "<unk>", "<mask>"}
    config = {
        "tokenizer_class": "GemmaTokenizer",
        "bos_token": "<bos>", "eos_token": "<eos>", "unk_token": "<unk>", "pad_token": "<pad>", "mask_token": "<mask>",
        "extra_special_tokens": [t for _, t in sorted(v["specials"].items()) if t not in named],
        "model_max_length": 1000000000000000019884624838656,
        "padding_side": "left",
        "clean_up_tokenization_spaces": False,
        "spaces_between_special_tokens": False,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")
    (out / "chat_template.jinja").write_text(TEMPLATE.read_text(encoding="utf-8"), encoding="utf-8")
    return v


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    v = write(Path(sys.argv[1]))
    print(f"{len(v['tokens'])} tokens ({N_REAL} at their real ids), {len(v['merges'])} merges, "
          f"{len(v['specials'])} special tokens")
