#!/usr/bin/env python3
"""Writes the Hugging Face tokenizer files of the tiny Qwen 3.5 fixtures: a truncated real Qwen vocabulary.

The vocabulary comes from llama.cpp's models/ggml-vocab-qwen35.gguf (.cache/llama.cpp): 151,936 byte-level BPE
tokens and 151,387 merges with the qwen35 pre-tokenizer (docs/design-qwen35.md section 8 point 1: it is the Qwen2
token list, not the 248,320 of Qwen 3.5). A fixture cannot carry all of it (< 5 MB per file), so:

  * ids 0 .. N_REAL-1 are the real tokens at their real ids: the 256 byte symbols ("!" .. "Ń") and the first
    BPE pieces ("ĠĠ", "in", "Ġt", ...);
  * the merges are the real ones, in their real order, whose two operands and result are all kept;
  * the special tokens follow at ids N_REAL..: <|endoftext|>, <|im_start|>, <|im_end|> (the three the vocab file
    holds, CONTROL) and <tool_call>, </tool_call>, <tool_response>, </tool_response>, <think>, </think> (absent from
    the file, which has [PAD] there; added as Qwen3's tokenizer_config declares them: not special, so the converter
    types them USER_DEFINED).

Everything else is as in transformers' Qwen3_5Tokenizer (the class the config names): NFC normalizer, the qwen35 split regex of llama-vocab.cpp
(LLAMA_VOCAB_PRE_TYPE_QWEN35) then byte-level without its own regex, byte-level decoder, no BOS; and the real chat
template (models/templates/Qwen3.5-4B.jinja).

  qwen35_fixture_vocab.py OUT_DIR        (run with .venv-hf: needs gguf and tokenizers)
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import gguf
from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers
from tokenizers.models import BPE

ROOT = Path(__file__).resolve().parent.parent
LLAMA = ROOT / ".cache" / "llama.cpp"
VOCAB_GGUF = LLAMA / "models" / "ggml-vocab-qwen35.gguf"
TEMPLATE = LLAMA / "models" / "templates" / "Qwen3.5-4B.jinja"
N_REAL = 1536         # real ids kept as they are
SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
         r"|\s*[\r\n]+|\s+(?!\S)|\s+")
CONTROL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
NOT_SPECIAL = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>")


def real_vocab() -> tuple[list[str], list[str]]:
    f = gguf.GGUFReader(str(VOCAB_GGUF)).fields
    return f["tokenizer.ggml.tokens"].contents(), f["tokenizer.ggml.merges"].contents()


def truncated() -> dict:
    """The fixture vocabulary: tokens (id order, specials last), merges (pairs), specials (text -> special flag)."""
    tokens, merges = real_vocab()
    for t in CONTROL:
        assert t in tokens, t                     # the three control tokens must come from the file
    kept = tokens[:N_REAL]
    ids = set(kept)
    pairs = []
    for m in merges:
        a, b = m.split(" ", 1)
        if a in ids and b in ids and a + b in ids:
            pairs.append((a, b))
    specials = {t: True for t in CONTROL} | {t: False for t in NOT_SPECIAL}
    return {"tokens": kept + list(specials), "merges": pairs, "specials": specials}


def write(out: Path) -> dict:
    v = truncated()
    ids = {t: i for i, t in enumerate(v["tokens"][:N_REAL])}
    tk = Tokenizer(BPE(vocab=ids, merges=v["merges"], dropout=None, unk_token=None, fuse_unk=False,
                       byte_fallback=False, ignore_merges=False))
    tk.normalizer = normalizers.NFC()
    tk.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tk.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tk.add_special_tokens([AddedToken(t, special=s, normalized=False) for t, s in v["specials"].items()])
    for i, t in enumerate(v["tokens"]):
        assert tk.token_to_id(t) == i, (t, i, tk.token_to_id(t))
    out.mkdir(parents=True, exist_ok=True)
    tk.save(str(out / "tokenizer.json"))
    config = {
        "tokenizer_class": "Qwen3_5Tokenizer",
        "bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "unk_token": None,
        "add_bos_token": False, "add_prefix_space": False, "errors": "replace",
        "model_max_length": 262144, "clean_up_tokenization_spaces": False, "split_special_tokens": False,
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
