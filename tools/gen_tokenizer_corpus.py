#!/usr/bin/env python3
"""Writes tests/golden/tokens_gemma4.json: llama.cpp's tokenization of a fixed corpus on the real
Gemma 4 vocabulary (tokenizer.ggml.model "gemma4"), used by tests/opencl/io/test_tokenizer_gemma4.c.

Reference: llama.cpp itself, through llama-cpp-python's low-level bindings (llama_tokenize,
llama_token_to_piece, llama_detokenize, llama_vocab_is_eog / _is_control; the common part in
tools/gen_tokenizer_ref.py) on the vocabulary-only
GGUF that llama.cpp ships for its own tokenizer tests (models/ggml-vocab-gemma-4.gguf, fetched by
deploy/fetch_llama_ref.sh). Run it in the reference venv (llama-cpp-python 0.3.36, which builds
that same llama.cpp):

    sh deploy/fetch_llama_ref.sh
    .venv-ref/bin/python tools/gen_tokenizer_corpus.py [vocab.gguf] [out.json]

The corpus is built here, deterministically (fixed lists, fixed random seeds; no clock, no
environment): plain text in many scripts, emoji with ZWJ / skin tones / flags / tags, code, runs
of spaces, tabs and newlines (past the longest newline piece), every special token of the
vocabulary in context, look-alikes of special tokens, characters that have no piece (byte
fallback), invalid UTF-8 (stray, truncated, overlong, surrogate), long words and long text,
numbers, whole chat-template renderings, llama.cpp's own .inp cases, and seeded random mixes.

Per case (bytes that are not valid UTF-8 are stored as "<field>_hex"):
  text            the input
  ids_special     llama_tokenize(add_special=True, parse_special=True)
  ids_plain       llama_tokenize(add_special=True, parse_special=False)
                  (add_special=False gives the same without the leading BOS: asserted here)
  pieces          concatenated llama_token_to_piece(ids_special, special=False)
  pieces_special  the same with special=True
  detok           llama_detokenize(ids_special, remove_special=False, unparse_special=False)
  detok_special   llama_detokenize(ids_special, remove_special=True, unparse_special=True)
  detok_plain     llama_detokenize(ids_plain, remove_special=True, unparse_special=False)
Whole vocabulary: n_vocab, bos, eos, add_bos, add_eos, the ids llama.cpp calls control and
end-of-generation, and FNV-1a-64 hashes over every token's piece (special False / True).

Left out on purpose, because llama.cpp aborts the process on them (check_abort() shows both):
  - 4-byte sequences above U+10FFFF (F4 90..BF xx xx, F5..F7 xx xx xx with continuation bytes):
    decoded to a code point its UTF-8 encoder rejects with a C++ exception that escapes
    llama_tokenize;
  - an overlong space (C0 A0, E0 80 A0, F0 80 80 A0) next to anything else on its line: spaces are
    escaped to U+2581 before the code-point round trip, which then turns the overlong form into a
    raw ' ', and the merge lookup asserts that no piece holds one (GGML_ASSERT in find_bpe_rank).
    A line that is only that space does not reach the assert and is kept.
"""
import json
import os
import random
import subprocess
import sys

import llama_cpp

from gen_tokenizer_ref import Vocab, version

VOCAB = sys.argv[1] if len(sys.argv) > 1 else ".cache/llama.cpp/models/ggml-vocab-gemma-4.gguf"
OUT = sys.argv[2] if len(sys.argv) > 2 else "tests/golden/tokens_gemma4.json"

# ------------------------------------------------------------------------------ corpus

LOREM = (
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut "
    "labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud exercitation ullamco "
    "laboris nisi ut aliquip ex ea commodo consequat. "
)

PY_CODE = (
    "def fib(n: int) -> int:\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"
    "    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n\n\n"
    "if __name__ == '__main__':\n    print([fib(i) for i in range(10)])  # 0 1 1 2 3 5\n"
)
C_CODE = (
    "#include <stdio.h>\n\nint main(void)\n{\n\tfor (int i = 0; i < 10; i++) {\n"
    "\t\tprintf(\"%d\\n\", i);\t// tab inside\n\t}\n\treturn 0;\n}\n"
)
JS_CODE = "const f = async (x) => { await fetch(`/api/${x}?q=1&r=2`); return x?.y ?? [] };\n"
JSON_TEXT = '{"name": "clgemma", "tokens": [1, 2, 3], "nested": {"ok": true, "v": null, "s": "a\\"b"}}'
HTML = "<!DOCTYPE html>\n<html><head><title>T</title></head>\n<body><p class=\"x\">Hi &amp; bye</p></body></html>"
SQL = "SELECT id, name FROM users WHERE age >= 18 AND name LIKE 'A%' ORDER BY id DESC LIMIT 10;"
SHELL = "for f in *.txt; do wc -l \"$f\" | awk '{print $1}' >> out.log 2>&1; done"
RUST = "fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n    println!(\"{:?}\", v);\n}\n"
MARKDOWN = "# Title\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n- item **bold** _it_ `code`\n> quote\n"
LATEX = r"\begin{equation} E = mc^2 \quad \int_0^\infty e^{-x^2}\,dx = \frac{\sqrt{\pi}}{2} \end{equation}"
YAML = "server:\n  port: 8080\n  hosts:\n    - a.example.com\n    - b.example.com\n"
DIFF = "--- a/x.c\n+++ b/x.c\n@@ -1,3 +1,3 @@\n-int x = 1;\n+int x = 2;\n \n"

CHAT = (
    "<bos><|turn>system\nYou are a helpful assistant.<turn|>\n<|turn>user\nWhat is 2+2?<turn|>\n"
    "<|turn>model\n4<turn|>\n<|turn>user\nAnd 3+3?<turn|>\n<|turn>model\n"
)
CHAT_THINK = "<|turn>system\n<|think|>Be brief.<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n<|channel>thought\nThe user greets.<channel|>Hello!<turn|>\n"
CHAT_TOOLS = (
    "<|turn>system\n<|tool>declaration:get_weather{description:<|\"|>Get the weather<|\"|>,"
    "parameters:{properties:{city:{type:<|\"|>STRING<|\"|>}},required:[<|\"|>city<|\"|>],"
    "type:<|\"|>OBJECT<|\"|>}}<tool|><turn|>\n<|turn>user\nWeather in Paris?<turn|>\n<|turn>model\n"
    "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>}<tool_call|><|tool_response>"
    "response:get_weather{temperature:21,unit:<|\"|>C<|\"|>}<tool_response|>It is 21 C in Paris.<turn|>\n"
)

PLAIN = [
    ("empty", ""),
    ("space", " "),
    ("hello", "Hello world"),
    ("hello_lead", " Hello world"),
    ("hello_trail", "Hello world "),
    ("hello_punct", "Hello, world! How are you?"),
    ("clean_spaces", "Hello , world ! Is it ? Yes . I 'm sure , it 's fine . We 're here , they 've gone , you 'll see , I 'd go , don 't ."),
    ("clean_quote", "a ' b '' c ' d 'x ' ' ' e"),
    ("clean_edges", " ?! ., ' '' 's 'm 're 've 'll 'd 't"),
    ("sentence", "The quick brown fox jumps over the lazy dog."),
    ("contractions", "I've been 'told he's there, 'RE you sure? 'M not sure I'll make it, 'D you like some tea? We'Ve a'lL"),
    ("numbers", "3.14159 2718281828 1,000,000 -42 0x1F 1e-9 12345678901234567890"),
    ("numbers2", "1 12 123 1234 12345 123456 1234567 12345678 123456789 1234567890"),
    ("dates", "2026-10-31T23:59:59Z, 31/10/2026, Oct 31 2026, 11:59 p.m."),
    ("money", "$1,234.56 €99,99 £5 ¥1000 ₹250 ₿0.001 -$0.01"),
    ("fractions", "½ ¼ ¾ ⅓ ⅔ ⅛ 1/2 3⁄4 x² y³ H₂O"),
    ("chinese", "我爱北京天安门。今天天气很好，我们去公园散步吧！"),
    ("chinese_trad", "繁體中文測試：這是一個句子。"),
    ("japanese", "日本語のテキストです。カタカナとひらがな、そして漢字。"),
    ("korean", "안녕하세요, 만나서 반갑습니다. 한국어 토큰화 테스트입니다."),
    ("cjk_fullwidth", "ＡＢＣ１２３！？　全角スペース"),
    ("cjk_ext_b", "𠀀𠀁𠀂 rare 𪚥 characters 𡃁"),
    ("cjk_punct", "「引用」『二重』【括弧】〈山〉《書名》・…—～"),
    ("arabic", "مرحبا بالعالم، هذا اختبار للنص العربي."),
    ("hebrew", "שלום עולם! זהו מבחן של טקסט בעברית."),
    ("devanagari", "नमस्ते दुनिया, यह एक परीक्षण है।"),
    ("thai", "สวัสดีชาวโลก นี่คือการทดสอบ"),
    ("khmer", "កាន់តែពិសេសអាចខលចេញ"),
    ("georgian", "გამარჯობა მსოფლიო"),
    ("armenian", "Բարեւ աշխարհ"),
    ("greek", "Γειά σου Κόσμε, αβγδεζηθ ΑΒΓΔ"),
    ("cyrillic", "Привет, мир! Съешь же ещё этих мягких французских булок."),
    ("bulgarian", "нещо на Български"),
    ("vietnamese", "Cửa Việt, Tiếng Việt có dấu: ắ ằ ẳ ẵ ặ"),
    ("tamil", "வணக்கம் உலகம்"),
    ("amharic", "ሰላም ልዑል"),
    ("tibetan", "བཀྲ་ཤིས་བདེ་ལེགས།"),
    ("mongolian", "ᠮᠣᠩᠭᠣᠯ ᠪᠢᠴᠢᠭ"),
    ("math", "∀x∈ℝ: x²≥0 ∧ ∑ᵢ aᵢ ≤ ∏ⱼ bⱼ ⇒ ∫∮∇×F = 0 ≠ ∞ ≈ π"),
    ("ipa", "ˈfəʊnətɪk ˌtræn.skrɪpʃən ʃ ʒ ŋ θ ð"),
    ("box", "┌──┬──┐\n│ab│cd│\n└──┴──┘ ░▒▓█"),
    ("braille", "⠓⠑⠇⠇⠕ ⠺⠕⠗⠇⠙"),
    ("music", "𝄞 𝄢 ♩ ♪ ♫ ♬ 𝅘𝅥𝅮"),
    ("linear_b", "𐀀𐀁𐀂 and 𓀀𓀁 hieroglyphs 𒀀 cuneiform"),
    ("private_use", "\ue000\uf8ff\U000f0000 private"),
    ("nonchars", "\ufffe\uffff\ufdd0 nonchar"),
    ("emoji", "I love 🍕 and 🎉! 😀😃😄 🫠🫡"),
    ("emoji_zwj", "Family: 👨‍👩‍👧‍👦, woman technologist: 👩🏽‍💻, rainbow flag: 🏳️‍🌈"),
    ("emoji_zwj2", "🧑‍🤝‍🧑 👩‍❤️‍💋‍👨 🐻‍❄️ 😶‍🌫️ ❤️‍🔥 🧔🏿‍♂️"),
    ("emoji_flags", "Flags: 🇯🇵 🇺🇸 🇩🇪 🇧🇷 🏴󠁧󠁢󠁳󠁣󠁴󠁿 🏴󠁧󠁢󠁥󠁮󠁧󠁿"),
    ("emoji_keycap", "1️⃣ 2️⃣ #️⃣ *️⃣ ©️ ®️ ™️"),
    ("emoji_skin", "👋🏻👋🏼👋🏽👋🏾👋🏿"),
    ("emoji_llama", " this is 🦙.cpp 🦙🦙"),
    ("mixed_scripts", "Hello世界Привет🌍مرحبا नमस्ते 123 abc"),
    ("mixed_scripts2", "apple工作1314151天～ 東京Tokyo東京 ΑθήναAthens"),
    ("combining", "e\u0301 a\u0300\u0323 Z\u0351\u0352\u0353 n\u0303"),
    ("lone_combining", "\u0301"),
    ("zalgo", "Z̴̡̢̛̗̘̙̜̝̞̟̠̤̥̦̩̪̫̬̭̮̯̰̱̲̳̹̺̻̼͇͈͉͍͎̀́̂̃̄̅̆̇̈̉̊̋̌̍̎̏̐̑̒̓̔̽̾̿̀́͂̓̈́͆͊͋͌̕̚ͅ"),
    ("unusual_spaces", "a\u00a0b\u2009c\u200bd\u3000e\u2028f\u2029g\u0085h\ufeffi"),
    ("u2581", "\u2581lower one eighth\u2581block \u2581\u2581 _ __"),
    ("u2581_only", "\u2581"),
    ("crlf", "line one\r\nline two\r\n\r\nend"),
    ("cr_only", "a\rb\r\rc"),
    ("vt_ff", "a\x0bb\x0cc\x1fd\x7fe"),
    ("nul", "a\x00b\x00\x00c"),
    ("ctrl_chars", "".join(chr(c) for c in range(1, 32))),
    ("ascii_all", "".join(chr(c) for c in range(32, 127))),
    ("latin1_all", "".join(chr(c) for c in range(0xa0, 0x100))),
    ("tabs", "\t\tindented\t\t\t\tfour"),
    ("mixed_ws", "a \n b\t\tc \t \n\n  d"),
    ("ws_soup", "\n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n     \n"),
    ("trailing_nl", "text\n"),
    ("leading_nl", "\ntext"),
    ("nl_text_nl", "\n\nHello\n\n\nWorld\n\n\n\n"),
    ("space_nl", " \n \n "),
    ("long_word", "Pneumonoultramicroscopicsilicovolcanoconiosis " + "x" * 300),
    ("german_long", "Donaudampfschifffahrtselektrizitätenhauptbetriebswerkbauunterbeamtengesellschaft"),
    ("aaa_1000", "a" * 1000),
    ("url", "https://example.com/path/to/resource?query=value&other=123#fragment_with-dashes.and.dots"),
    ("email", "first.last+tag@sub.example.co.uk, <mailto:x@y.z>"),
    ("base64", "SGVsbG8gV29ybGQhIFRoaXMgaXMgYSBiYXNlNjQgZW5jb2RlZCBzdHJpbmcu" * 4 + "=="),
    ("hex", "0123456789abcdef" * 16),
    ("uuid", "550e8400-e29b-41d4-a716-446655440000"),
    ("punct_runs", "!!!!!! ?????? ...... ------======= ''''''``````\"\"\"\""),
    ("brackets", "((([[[{{{<<<>>>}}}]]])))"),
    ("python", PY_CODE),
    ("c_tabs", C_CODE),
    ("js", JS_CODE),
    ("json", JSON_TEXT),
    ("html", HTML),
    ("sql", SQL),
    ("shell", SHELL),
    ("rust", RUST),
    ("markdown", MARKDOWN),
    ("latex", LATEX),
    ("yaml", YAML),
    ("diff", DIFF),
    ("lorem_long", LOREM * 30),
    ("cjk_long", "我爱北京天安门。" * 200),
    ("multiline_long", ("line of text number\n" * 150) + ("\n" * 40) + "end"),
    ("chat", CHAT),
    ("chat_think", CHAT_THINK),
    ("chat_tools", CHAT_TOOLS),
]

# look-alikes of special tokens: text, never a special token
LOOKALIKES = [
    "< |turn>", "<|Turn>", "<|turn >", "<||turn>", "<|turn", "turn|>", "<turn>", "<|turn|>", "<<|turn>>",
    "<0x41>", "<0xZZ>", "<0x4>", "[EMPTY_0]", "<unused0>", "<unused99>", "<start_of_turn>", "<end_of_turn>",
    "<s>", "</s>", "x</s>y", "<|im_end|>", "<|endoftext|>", "<EOS>", "<Eos>", "<eos", "eos>", "< eos>",
    "<|tool_call >", "<tool_call|", "<|\"|", "|\"|>", "<|channel", "channel|>", "<image>", "<|image|>",
]

def llama_cpts(b):
    """(code point, byte length) pairs as llama.cpp's unicode_cpts_from_utf8 decodes b."""
    out, i = [], 0
    while i < len(b):
        c = b[i]
        k = 1 if c < 0x80 else 0 if c < 0xC0 else 2 if c < 0xE0 else 3 if c < 0xF0 else 4 if c < 0xF8 else 0
        cp = c if k == 1 else (c & (0x7F >> k)) if k else 0
        for j in range(1, k):
            if i + j >= len(b) or b[i + j] & 0xC0 != 0x80:
                k = 0
                break
            cp = cp << 6 | (b[i + j] & 0x3F)
        if k == 0:
            out.append((0xFFFD, 1))
            i += 1
        else:
            out.append((cp, k))
            i += k
    return out


def aborts(b):
    """Inputs on which llama.cpp aborts (see the docstring)."""
    cps = llama_cpts(b)
    if any(cp > 0x10FFFF for cp, _ in cps):
        return True
    line = []
    for cp, k in cps + [(0x0A, 1)]:
        if cp == 0x0A:
            if len(line) > 1 and any(c == 0x20 and n > 1 for c, n in line):
                return True
            line = []
        else:
            line.append((cp, k))
    return False


INVALID = [
    ("bad_ff", b"\xff"),
    ("bad_fe_ff", b"a\xfe\xffb"),
    ("bad_lone_cont", b"x\x80y\xbfz"),
    ("bad_cont_run", b"\x80\x81\x82\x83 \xbf\xbf"),
    ("bad_trunc2", b"ab\xc3"),
    ("bad_trunc3", b"ab\xe2\x82"),
    ("bad_trunc4", b"ab\xf0\x9f\x98"),
    ("bad_trunc_mid", b"\xe2\x82x\xf0\x9fy\xc3z"),
    ("bad_lead_space", b"\xc3 x \xe2 \x82 y"),
    ("bad_lead_nl", b"\xc3\n\xe2\n\n\xf0\n"),
    ("bad_overlong_nul", b"a\xc0\x80b"),
    ("bad_overlong_slash", b"\xc0\xaf\xe0\x80\xaf\xf0\x80\x80\xaf"),
    ("bad_overlong_space", b"\xc0\xa0"),
    ("bad_overlong_space_line", b"a b\n\xe0\x80\xa0\nc"),
    ("bad_overlong_nl", b"a\xc0\x8ab\xc0\x8a\xc0\x8a\nc"),
    ("bad_overlong_a", b"\xc1\x81\xc1\xbf"),
    ("bad_surrogates", b"\xed\xa0\x80\xed\xbf\xbf\xed\xa0\xbd\xed\xb8\x80"),
    ("max_cp", b"\xf4\x8f\xbf\xbf end"),
    ("bad_f8_ff", b"\xf8\x88\x80\x80\x80 \xfc\x84\x80\x80\x80\x80 \xfe \xff"),
    ("bad_f5_short", b"\xf5\x80 \xf6 \xf7\x80\x80"),
    ("bad_mixed", b"\xff\xfeok\xc3\x28\xe2\x82\xf0\x9f\x98\x80\x80\xed\xa0\x80end\xc3"),
    ("bad_in_special", b"<|turn>\xffuser\xc3<turn|>\xe2\x82"),
    ("bad_special_split", b"<|tu\xffrn><tu\x80rn|>"),
    ("bad_u2581_split", b"\xe2\x96 \x81\xe2\x96\x81\xe2"),
    ("bad_latin1", "café naïve Ærø".encode("latin-1")),
    ("bad_cp1252", "“smart quotes” – dash €".encode("cp1252")),
    ("bad_utf16", "hello".encode("utf-16")),
]


def build_corpus(specials, fallback_chars, inp_cases):
    cases = [(n, s.encode()) for n, s in PLAIN]
    # runs of whitespace: the newline pieces stop at 31, longer runs go through merges
    for k in [1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 32, 33, 40, 63, 64, 65, 100]:
        cases.append((f"spaces_{k}", b" " * k))
        cases.append((f"nl_{k}", b"\n" * k))
    for k in [1, 2, 3, 4, 8, 16, 31, 32, 33, 50]:
        cases.append((f"tabs_{k}", b"\t" * k))
        cases.append((f"crlf_{k}", b"\r\n" * k))
        cases.append((f"words_spaces_{k}", b"a" + b" " * k + b"b" + b" " * k))
        cases.append((f"words_nl_{k}", b"a" + b"\n" * k + b"b" + b"\n" * k))
        cases.append((f"indent_{k}", b"\n" + b" " * k + b"x\n" + b"\t" * k + b"y"))
    # every special token of the vocabulary in context
    for i, sp in enumerate(specials):
        cases.append((f"special_{i}_alone", sp))
        cases.append((f"special_{i}_ctx", b"Hi " + sp + b" there" + sp + b"\n"))
        cases.append((f"special_{i}_tight", b"x" + sp + sp + b"y"))
        cases.append((f"special_{i}_partial", sp[:-1] + b" " + sp[1:]))
    for i, s in enumerate(LOOKALIKES):
        cases.append((f"lookalike_{i}", s.encode()))
    cases.append(("specials_all", b"".join(specials)))
    cases.append(("specials_spaced", b" \n ".join(specials)))
    # characters without a piece: byte fallback
    for i, ch in enumerate(fallback_chars):
        cases.append((f"fallback_{i}", ch.encode() + b" x" + ch.encode() * 2))
    cases.append(("fallback_all", "".join(fallback_chars).encode()))
    cases.extend(INVALID)
    # every byte 0x80..0xff alone between letters (lead bytes swallow nothing here)
    for b in range(0x80, 0x100, 8):
        cases.append((f"byte_{b:02x}", bytes(b"a" + bytes([b + k for k in range(8)]) + b" z")))
    for i, s in enumerate(inp_cases):
        cases.append((f"llama_inp_{i}", s))
    # seeded random mixes of fragments, then seeded random bytes
    rng = random.Random(20261031)
    pool = ["a", "b", "the", " ", "  ", "\n", "\n\n", "\t", "\r\n", "我", "爱", "😀", "👩‍💻", "é", "e\u0301",
            "▁", "_", "<", ">", "|", "<|", "|>", "'", "'s", ".", ",", "?", "!", "1", "23", "456", "ß", "ﬁ",
            "\u200d", "\ufe0f", "\U0001F3FD", "ا", "ש", "ก"]
    pool_b = [p.encode() for p in pool] + list(specials) + [b"\xff", b"\xc3", b"\xe2\x82", b"\x80", b"\xc0\x8a"]
    i = 0
    while i < 80:
        b = b"".join(rng.choice(pool_b) for _ in range(rng.randint(1, 40)))
        if aborts(b):
            continue
        cases.append((f"random_mix_{i}", b))
        i += 1
    i = 0
    while i < 25:
        b = bytes(rng.randrange(256) for _ in range(rng.randint(1, 48)))
        if aborts(b):
            continue
        cases.append((f"random_bytes_{i}", b))
        i += 1
    names = [n for n, _ in cases]
    assert len(names) == len(set(names)), "duplicate case names"
    assert not any(aborts(b) for _, b in cases)
    return cases


def read_inp(path):
    raw = open(path, "rb").read()
    return raw.split(b"\n__ggml_vocab_test__\n")


def check_abort(vocab_path, text):
    """Exit status of llama_tokenize(text) in a child process (the inputs we leave out abort)."""
    code = ("import llama_cpp,sys\np=llama_cpp.llama_model_default_params();p.vocab_only=True\n"
            "m=llama_cpp.llama_model_load_from_file(sys.argv[1].encode(),p)\n"
            "v=llama_cpp.llama_model_get_vocab(m)\nb=(llama_cpp.llama_token*64)()\nt=bytes.fromhex(sys.argv[2])\n"
            "print(llama_cpp.llama_tokenize(v,t,len(t),b,64,False,False))\n")
    r = subprocess.run([sys.executable, "-c", code, vocab_path, text.hex()], capture_output=True)
    return r.returncode


# ------------------------------------------------------------------------------ reference


def main():
    if not os.path.exists(VOCAB):
        sys.exit(f"{VOCAB} missing: run sh deploy/fetch_llama_ref.sh")
    ref = Vocab(VOCAB)
    vocab, n_vocab, bos = ref.vocab, ref.n_vocab, ref.bos
    tokenize, detok = ref.tokenize, ref.detokenize

    texts = [llama_cpp.llama_vocab_get_text(vocab, i) for i in range(n_vocab)]
    attrs = [llama_cpp.llama_vocab_get_attr(vocab, i) for i in range(n_vocab)]
    ctrl_user_unk = (1 << 3) | (1 << 4) | (1 << 0)
    specials = sorted({texts[i] for i in range(n_vocab) if attrs[i] & ctrl_user_unk})
    pieces = set(texts)
    fallback = []
    for lo, hi in [(0x80, 0x800), (0x800, 0x10000), (0x10000, 0x30000)]:
        for cp in range(lo, hi):
            if 0xD800 <= cp < 0xE000:
                continue
            if chr(cp).encode() not in pieces and ("\u2581" + chr(cp)).encode() not in pieces:
                fallback.append(chr(cp))
                break
    rng = random.Random(7)
    extra = [chr(cp) for cp in range(0x10000, 0x30000) if chr(cp).encode() not in pieces]
    fallback += rng.sample(extra, 8)

    inp = ".cache/llama.cpp/models/ggml-vocab-gemma-4.gguf.inp"
    corpus = build_corpus(specials, fallback, read_inp(inp) if os.path.exists(inp) else [])

    def field(d, key, b):
        try:
            d[key] = b.decode("utf-8")
        except UnicodeDecodeError:
            d[key + "_hex"] = b.hex()

    out_cases = []
    for name, b in corpus:
        ids_sp = tokenize(b, True, True)
        ids_pl = tokenize(b, True, False)
        assert ids_sp[:1] == [bos] and ids_pl[:1] == [bos]
        assert tokenize(b, False, True) == ids_sp[1:] and tokenize(b, False, False) == ids_pl[1:]
        c = {"name": name}
        field(c, "text", b)
        c["ids_special"] = ids_sp
        c["ids_plain"] = ids_pl
        field(c, "pieces", ref.pieces(ids_sp, False))
        field(c, "pieces_special", ref.pieces(ids_sp, True))
        field(c, "detok", detok(ids_sp, False, False))
        field(c, "detok_special", detok(ids_sp, True, True))
        field(c, "detok_plain", detok(ids_pl, True, False))
        out_cases.append(c)

    golden = {
        "generator": "tools/gen_tokenizer_corpus.py, " + version(),
        "vocab": os.path.basename(VOCAB),
        "n_vocab": n_vocab,
        "bos": bos,
        "eos": ref.eos,
        "add_bos": bool(llama_cpp.llama_vocab_get_add_bos(vocab)),
        "add_eos": bool(llama_cpp.llama_vocab_get_add_eos(vocab)),
        "control_ids": [i for i in range(n_vocab) if llama_cpp.llama_vocab_is_control(vocab, i)],
        "eog_ids": [i for i in range(n_vocab) if llama_cpp.llama_vocab_is_eog(vocab, i)],
        "pieces_fnv1a64": ref.fnv_pieces(False),
        "pieces_special_fnv1a64": ref.fnv_pieces(True),
        "cases": out_cases,
    }
    ref.close()
    # one case per line: readable diffs, compact ids
    with open(OUT, "w", encoding="utf-8") as f:
        cases = golden.pop("cases")
        head = json.dumps(golden, ensure_ascii=False, separators=(",", ":"))
        f.write(head[:-1] + ',"cases":[\n')
        f.write(",\n".join(json.dumps(c, ensure_ascii=False, separators=(",", ":")) for c in cases))
        f.write("\n]}\n")
    rc = [check_abort(VOCAB, t) for t in (b"\xf4\x90\x80\x80", b"a\xc0\xa0b", b"\xc0\xa0")]
    assert rc[0] != 0 and rc[1] != 0 and rc[2] == 0, rc
    print(f"wrote {OUT}: {len(out_cases)} cases, {os.path.getsize(OUT)} bytes; llama.cpp exit status on "
          f"U+110000 {rc[0]}, on an overlong space in a word {rc[1]} (both left out), alone {rc[2]}")


if __name__ == "__main__":
    main()
