#!/usr/bin/env python3
"""Writes tests/golden/tokens.json: llama.cpp's tokenization of a fixed corpus on the real
Gemma 3 vocabulary, used by tests/opencl/io/test_tokenizer.c to check opencl/io/tokenizer.c.

Uses llama.cpp's llama_tokenize / llama_token_to_piece through tools/gen_tokenizer_ref.py
(llama-cpp-python's low-level bindings; see there why not the high-level API).

    .venv-ref/bin/python tools/gen_golden_tokens.py [model.gguf] [out.json]

Per case: ids for add_special=True with parse_special=True ("ids_special") and False
("ids_plain"); the concatenated llama_token_to_piece() of ids_special with special=False
("decode") and special=True ("decode_special"); llama_detokenize() of ids_special with
remove_special and unparse_special both False ("detok") and both True ("detok_special"), and of
ids_special without its BOS ("detok_nobos": add_space_prefix strips the first piece's space);
"roundtrip": whether the decode of ids_plain (render_special=False, BOS dropped) equals the text. Plus FNV-1a-64 hashes over every token's
piece, so the test covers all 262144 pieces without storing them.
"""
import json
import os
import sys

from gen_tokenizer_ref import Vocab, version

MODEL = sys.argv[1] if len(sys.argv) > 1 else "models/gemma-3-270m-q4_k_m.gguf"
OUT = sys.argv[2] if len(sys.argv) > 2 else "tests/golden/tokens.json"

LONG_EN = (
    "The quick brown fox jumps over the lazy dog. " * 3
    + "In 1969, Apollo 11 landed on the Moon; Neil Armstrong said: \"That's one small step for "
    "[a] man, one giant leap for mankind.\" Tokenizers split text into sub-word units, e.g. "
    "'unbelievably' -> 'un' + 'believ' + 'ably', and fall back to bytes for unseen characters."
)

C_CODE = (
    "#include <stdio.h>\n\nint main(void)\n{\n\tfor (int i = 0; i < 10; i++) {\n"
    "\t\tprintf(\"%d\\n\", i);\t// tab inside\n\t}\n\treturn 0;\n}\n"
)

PY_CODE = (
    "def fib(n: int) -> int:\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"
    "    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n\n"
    "if __name__ == '__main__':\n    print([fib(i) for i in range(10)])\n"
)

# (name, text, special_text): special_text marks strings that contain control/special token
# text, for which decode(encode(s)) need not give s back.
CORPUS = [
    ("empty", "", False),
    ("hello", "Hello world", False),
    ("hello_punct", "Hello, world! How are you?", False),
    ("lead_space", " Hello", False),
    ("lead_spaces3", "   leading three", False),
    ("trail_space", "trailing ", False),
    ("trail_spaces5", "trailing five     ", False),
    ("single_space", " ", False),
    ("long_english", LONG_EN, False),
    ("numbers", "3.14159 2718281828 1,000,000 -42 0x1F 1e-9 12345678901234567890", False),
    ("chinese", "我爱北京天安门。今天天气很好，我们去公园散步吧！", False),
    ("japanese", "日本語のテキストです。カタカナとひらがな、そして漢字。", False),
    ("korean", "안녕하세요, 만나서 반갑습니다. 한국어 토큰화 테스트입니다.", False),
    ("cjk_ext_b", "𠀀𠀁𠀂 rare 𪚥 characters 𡃁", False),
    ("linear_b", "𐀀𐀁𐀂 and 𓀀𓀁 hieroglyphs", False),
    ("emoji", "I love 🍕 and 🎉! 😀😃😄 🫠🫡", False),
    ("emoji_zwj", "Family: 👨‍👩‍👧‍👦, woman technologist: 👩🏽‍💻, rainbow flag: 🏳️‍🌈", False),
    ("emoji_flags", "Flags: 🇯🇵 🇺🇸 🇩🇪 🇧🇷 🏴󠁧󠁢󠁳󠁣󠁴󠁿", False),
    ("arabic", "مرحبا بالعالم، هذا اختبار للنص العربي.", False),
    ("hebrew", "שלום עולם! זהו מבחן של טקסט בעברית.", False),
    ("python", PY_CODE, False),
    ("c_tabs", C_CODE, False),
    ("lone_combining", "\u0301", False),
    ("combining_seq", "e\u0301 a\u0300\u0323 Z\u0351\u0352\u0353", False),
    ("unusual", "\u2581lower one eighth\u2581block \u00a0nbsp \u200bzwsp \ufeffbom \u2028ls", False),
    ("long_word", "Pneumonoultramicroscopicsilicovolcanoconiosis " + "x" * 120, False),
    ("german_long", "Donaudampfschifffahrtselektrizitätenhauptbetriebswerkbauunterbeamtengesellschaft", False),
    ("crlf", "line one\r\nline two\r\n\r\nend", False),
    ("mixed_ws", "a \n b\t\tc \t \n\n  d", False),
    ("tabs", "\t\tindented\t\t\t\tfour", False),
    ("html", "<table><tr><td>cell</td></tr></table> <b>bold</b> <div>x</div> <s>strike</s>", False),
    ("sentinel_s_end", "x</s>y and </s>", True),
    ("html_more", "<h1>Title</h1>\n<p>Para <em>em</em> <code>c</code></p>", False),
    ("chat_turn", "<start_of_turn>user\nHi<end_of_turn>\n", True),
    ("chat_full", "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n4<end_of_turn>\n", True),
    ("bos_text", "<bos>", True),
    ("bos_in_text", "abc<bos>def<eos>ghi", True),
    ("unused0", "<unused0>", True),
    ("unused_many", "<unused0><unused99> <unused6241>", True),
    ("specials_misc", "<pad><unk><mask>[multimodal]<start_of_image><end_of_image>", True),
    ("byte_token_text", "<0x41><0x0A>", True),
    ("special_adjacent_spaces", "  <start_of_turn>  model  <end_of_turn>  ", True),
    ("url", "https://example.com/path?query=value&x=1#frag", False),
    ("math", "∑_{i=1}^{n} i² = n(n+1)/2, ∀x∈ℝ: x² ≥ 0, π ≈ 3.14", False),
    ("cyrillic_greek", "Привет мир! Γειά σου Κόσμε!", False),
    ("thai_hindi", "สวัสดีครับ नमस्ते दुनिया", False),
    ("repeat_chars", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa ==========================================", False),
    ("json", "{\"key\": [1, 2, {\"nested\": null}], \"ok\": true}", False),
]

# runs of spaces, newlines and tabs of length 1..20 plus a few beyond the 31-long user-defined tokens
for n in list(range(1, 21)) + [31, 32, 33, 40, 62, 63, 70]:
    CORPUS.append((f"spaces_{n}", "x" + " " * n + "y", False))
    CORPUS.append((f"newlines_{n}", "x" + "\n" * n + "y", False))
for n in (1, 2, 3, 5, 8, 20, 31, 32, 40):
    CORPUS.append((f"tabs_{n}", "x" + "\t" * n + "y", False))
    CORPUS.append((f"only_spaces_{n}", " " * n, False))
    CORPUS.append((f"only_newlines_{n}", "\n" * n, False))

# Invalid UTF-8 (beyond the required corpus): stored as hex. SPM splits symbols by lead byte
# only, so a bad lead byte swallows the next bytes, including an escaped space (U+2581), which
# then comes back as raw "\xe2\x96\x81" bytes: llama.cpp does not round-trip these either.
BINARY = [
    ("bin_bad_leads", b"\xff\xfe ok \xc3\x28 \xe2\x82 \xf0\x9f\x98 \x80\x80 \xed\xa0\x80 end\xc3"),
    ("bin_truncated_end", b"abc \xf0\x9f"),
    ("bin_lone_cont", b"\x80 \xbf\n\x80\x80\x80"),
    ("bin_nul", b"a\x00b \x00 <start_of_turn>\x00"),
]

# text for which llama.cpp legitimately does not round-trip: U+2581 decodes to a space, and a
# bad lead byte swallows an escaped space (see BINARY)
NO_ROUNDTRIP = {"unusual", "bin_bad_leads"}


def main():
    if not os.path.exists(MODEL):
        sys.exit(f"{MODEL} missing: run make model")
    ref = Vocab(MODEL)
    n_vocab = ref.n_vocab
    tokenize, piece, fnv_pieces = ref.tokenize, ref.piece, ref.fnv_pieces

    names = set()
    cases = []
    for name, text, special_text in CORPUS + [(n, b, b"<start_of_turn>" in b) for n, b in BINARY]:
        assert name not in names, name
        names.add(name)
        b = text if isinstance(text, bytes) else text.encode("utf-8")
        ids_special = tokenize(b, True, True)
        ids_plain = tokenize(b, True, False)
        dec = b"".join(piece(i, False) for i in ids_special)
        dec_sp = b"".join(piece(i, True) for i in ids_special)
        dec_plain = b"".join(piece(i, False) for i in ids_plain)
        det, det_sp = ref.detokenize(ids_special, False, False), ref.detokenize(ids_special, True, True)
        det_nb = ref.detokenize(ids_special[1:], False, False)
        roundtrip = dec_plain == b
        if not special_text and name not in NO_ROUNDTRIP:
            assert roundtrip, (name, dec_plain, b)
        if isinstance(text, bytes):  # binary case: every byte string as hex
            cases.append({
                "name": name,
                "text_hex": b.hex(),
                "special_text": special_text,
                "roundtrip": roundtrip,
                "ids_special": ids_special,
                "ids_plain": ids_plain,
                "decode_hex": dec.hex(),
                "decode_special_hex": dec_sp.hex(),
                "detok_hex": det.hex(),
                "detok_special_hex": det_sp.hex(),
                "detok_nobos_hex": det_nb.hex(),
            })
            continue
        cases.append({
            "name": name,
            "text": text,
            "special_text": special_text,
            "roundtrip": roundtrip,
            "ids_special": ids_special,
            "ids_plain": ids_plain,
            "decode": dec.decode("utf-8"),
            "decode_special": dec_sp.decode("utf-8"),
            "detok": det.decode("utf-8"),
            "detok_special": det_sp.decode("utf-8"),
            "detok_nobos": det_nb.decode("utf-8"),
        })

    out = {
        "model": os.path.basename(MODEL),
        "generator": version(),
        "n_vocab": n_vocab,
        "bos": ref.bos,
        "eos": ref.eos,
        "pieces_fnv1a64": fnv_pieces(False),
        "pieces_special_fnv1a64": fnv_pieces(True),
        "cases": cases,
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w", encoding="ascii") as f:
        # one case per line: small diffs, and the C reader stays simple
        f.write("{\n")
        for k in ("model", "generator", "n_vocab", "bos", "eos", "pieces_fnv1a64", "pieces_special_fnv1a64"):
            f.write(f" {json.dumps(k)}: {json.dumps(out[k])},\n")
        f.write(' "cases": [\n')
        for i, c in enumerate(cases):
            f.write("  " + json.dumps(c, ensure_ascii=True, separators=(", ", ": ")))
            f.write(",\n" if i + 1 < len(cases) else "\n")
        f.write(" ]\n}\n")
    ref.close()
    print(f"wrote {OUT}: {len(cases)} cases, n_vocab {n_vocab}")


if __name__ == "__main__":
    main()
