/* fuzz_tokenizer.c — libFuzzer harness for opencl/io/tokenizer*.c on real vocabularies: Gemma 3's
 * SentencePiece ("llama"), Gemma 4's BPE ("gemma4") and Qwen 3.5's byte-level BPE ("gpt2", "qwen35").
 *
 * Input: first byte = flags (bit 0: add_special, bit 3: Gemma 4, bit 4: Qwen 3.5), the rest = text. For both
 * parse_special settings it checks that
 *   - the count from a cap-0 call equals what a full call returns, every id is in range, and a
 *     call with a smaller cap writes the same prefix;
 *   - decoding with render_special gives the text back, up to U+2581 vs ' ' (a literal U+2581
 *     decodes to a space, and a bad UTF-8 lead byte can swallow an escaped space, which then
 *     decodes as raw U+2581 bytes — both llama.cpp behaviours); for Gemma 4 and Qwen the text as
 *     llama.cpp's code-point round trip leaves it (each byte that starts no sequence becomes
 *     U+FFFD, overlong forms their code point), recomputed here from the rules;
 *   - tokenizer_detokenize gives a length, writes no more than asked, and fails only on bad ids;
 * then it reads the input as int32 token ids (valid and not) and checks tokenizer_piece and the
 * streaming decoder: invalid ids are rejected, and stream output is always valid UTF-8; and it
 * streams the text as byte tokens (<0xXX>; Qwen: the byte's GPT-2 character): valid UTF-8 out,
 * equal to the text when that is valid.
 * Build and run: tests/suites/fuzz_tokenizer.sh. Vocabularies: $CLGEMMA_MODEL or the default
 * Gemma 3 model, $CLGEMMA_GEMMA4_VOCAB or llama.cpp's ggml-vocab-gemma-4.gguf in .cache, and
 * $CLGEMMA_QWEN35_VOCAB or its ggml-vocab-qwen35.gguf. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "tokenizer.h"
#include "tokenizer_gguf.h"
#include "tokenizer_int.h"
#include "tok_test.h"

static tokenizer *tok_spm, *tok_bpe, *tok_gpt2; /* loaded once; read-only afterwards */
static const tokenizer *tok;         /* the one this input uses */

static tokenizer *load(const char *env, const char *def) {
    const char *path = getenv(env);
    if (!path || !*path) path = def;
    char err[256];
    gguf_file *f;
    tokenizer *t;
    if (gguf_open(&f, path, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_tokenizer: cannot open %s: %s\n", path, err);
        exit(1);
    }
    if (tokenizer_from_gguf(&t, f, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_tokenizer: %s: %s\n", path, err);
        exit(1);
    }
    gguf_close(f);
    return t;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    tok_spm = load("CLGEMMA_MODEL", "models/gemma-3-270m-q4_k_m.gguf");
    tok_bpe = load("CLGEMMA_GEMMA4_VOCAB", ".cache/llama.cpp/models/ggml-vocab-gemma-4.gguf");
    tok_gpt2 = load("CLGEMMA_QWEN35_VOCAB", ".cache/llama.cpp/models/ggml-vocab-qwen35.gguf");
    return 0;
}

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "fuzz_tokenizer: %s:%d: %s\n", __FILE__, __LINE__, #c); abort(); } } while (0)

/* U+2581 -> ' ', in place; returns the new length */
static size_t norm(char *s, size_t n) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        if (i + 2 < n && s[i] == '\xe2' && s[i + 1] == '\x96' && s[i + 2] == '\x81') { s[o++] = ' '; i += 3; }
        else s[o++] = s[i++];
    }
    return o;
}

/* llama.cpp's code-point round trip (unicode_cpts_from_utf8, then back to UTF-8): the lead
 * byte's high bits give the length, continuation bytes are checked, overlong forms and
 * surrogates pass, anything else (and anything past U+10FFFF, where llama.cpp aborts) is one
 * U+FFFD per byte. out has room for 3 * len bytes; returns the length. */
static size_t cp_roundtrip(const unsigned char *s, size_t len, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        unsigned char c = s[i];
        size_t k = c < 0x80 ? 1 : c < 0xc0 ? 0 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : c < 0xf8 ? 4 : 0;
        uint32_t cp = k == 1 ? c : k ? (uint32_t)(c & (0x7f >> k)) : 0;
        for (size_t j = 1; j < k; j++) {
            if (i + j >= len || (s[i + j] & 0xc0) != 0x80) { k = 0; break; }
            cp = cp << 6 | (s[i + j] & 0x3f);
        }
        if (k == 0 || cp > 0x10ffff) { memcpy(out + o, "\xef\xbf\xbd", 3); o += 3; i++; continue; }
        if (cp < 0x80) out[o++] = (char)cp;
        else if (cp < 0x800) { out[o++] = (char)(0xc0 | cp >> 6); out[o++] = (char)(0x80 | (cp & 63)); }
        else if (cp < 0x10000) {
            out[o++] = (char)(0xe0 | cp >> 12); out[o++] = (char)(0x80 | (cp >> 6 & 63)); out[o++] = (char)(0x80 | (cp & 63));
        } else {
            out[o++] = (char)(0xf0 | cp >> 18); out[o++] = (char)(0x80 | (cp >> 12 & 63));
            out[o++] = (char)(0x80 | (cp >> 6 & 63)); out[o++] = (char)(0x80 | (cp & 63));
        }
        i += k;
    }
    return o;
}

static void check_detokenize(const int32_t *ids, int n) {
    int k = tokenizer_detokenize(tok, ids, n, 1, 1, NULL, 0);
    REQUIRE(k >= 0);
    char small[8] = { 0 };
    REQUIRE(tokenizer_detokenize(tok, ids, n, 0, 0, small, 4) >= 0);
}

static void check_encode(const char *text, size_t len, int add_special, int parse_special) {
    int n = tokenizer_encode(tok, text, len, add_special, parse_special, NULL, 0);
    REQUIRE(n >= 0);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(n + 1));
    REQUIRE(ids);
    REQUIRE(tokenizer_encode(tok, text, len, add_special, parse_special, ids, n) == n);
    uint32_t nv = tokenizer_n_vocab(tok);
    for (int i = 0; i < n; i++) REQUIRE(ids[i] >= 0 && (uint32_t)ids[i] < nv);
    if (n > 1) {
        int half = n / 2;
        int32_t *part = malloc(sizeof(int32_t) * (size_t)half);
        REQUIRE(part);
        REQUIRE(tokenizer_encode(tok, text, len, add_special, parse_special, part, half) == n);
        REQUIRE(memcmp(part, ids, sizeof(int32_t) * (size_t)half) == 0);
        free(part);
    }
    /* decode, skipping the BOS that add_special put there */
    int first = add_special && n > 0 && ids[0] == tokenizer_bos(tok) ? 1 : 0;
    size_t cap = 3 * len + 64, l = 0;
    char *out = malloc(cap);
    REQUIRE(out);
    for (int i = first; i < n; i++) {
        int k = tokenizer_piece(tok, ids[i], 1, out + l, (int)(cap - l));
        REQUIRE(k >= 0 && (size_t)k <= cap - l);
        l += (size_t)k;
    }
    char *want = malloc(3 * len + 1);
    REQUIRE(want);
    size_t wl = len;
    if (tokenizer_model(tok) != TOK_MODEL_SPM) wl = cp_roundtrip((const unsigned char *)text, len, want);
    else if (len) memcpy(want, text, len);
    wl = norm(want, wl);
    l = norm(out, l);
    REQUIRE(l == wl && memcmp(out, want, l) == 0);
    check_detokenize(ids, n);
    free(want); free(out); free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!size) {
        tok = tok_spm;
        check_encode("", 0, 1, 1);
        tok = tok_bpe;
        check_encode("", 0, 1, 1);
        tok = tok_gpt2;
        check_encode("", 0, 1, 1);
        return 0;
    }
    tok = data[0] & 16 ? tok_gpt2 : data[0] & 8 ? tok_bpe : tok_spm;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    int add_special = data[0] & 1;
    check_encode(text, len, add_special, 0);
    check_encode(text, len, add_special, 1);

    /* the bytes as token ids */
    size_t nid = size / 4;
    tok_stream s;
    tok_stream_init(&s, tok, data[0] & 2);
    uint32_t nv = tokenizer_n_vocab(tok);
    for (size_t i = 0; i < nid; i++) {
        int32_t id;
        memcpy(&id, data + 4 * i, 4);
        if (data[0] & 4) id = (int32_t)((uint32_t)id % (nv + 16)); /* mostly valid ids */
        int valid = id >= 0 && (uint32_t)id < nv;
        char buf[512];
        int k = tokenizer_piece(tok, id, data[0] & 2, buf, (int)sizeof buf);
        REQUIRE(valid ? k >= 0 && k <= (int)sizeof buf : k == -1);
        k = tok_stream_push(&s, id, buf, (int)sizeof buf);
        REQUIRE(valid ? k >= 0 : k == -1);
        if (k > 0) REQUIRE(valid_utf8((const unsigned char *)buf, (size_t)k));
    }
    char tail[8];
    int k = tok_stream_flush(&s, tail, sizeof tail);
    REQUIRE(k == 0 || (k == 3 && valid_utf8((const unsigned char *)tail, 3)));

    /* the text as byte tokens through the streaming decoder: always valid UTF-8, and exactly the
     * text when the text is valid UTF-8 */
    tok_stream_init(&s, tok, 0);
    char *out = malloc(3 * len + 8);
    REQUIRE(out);
    size_t l = 0;
    for (size_t i = 0; i < len; i++) {
        char name[8] = { 0 };
        if (tok == tok_gpt2) tok_cpt_encode(tok_gpt2_byte_cp((unsigned char)text[i]), name);
        else snprintf(name, sizeof name, "<0x%02X>", (unsigned char)text[i]);
        int32_t id = tokenizer_find(tok, name);
        REQUIRE(id >= 0);
        k = tok_stream_push(&s, id, out + l, (int)(3 * len + 8 - l));
        REQUIRE(k >= 0);
        l += (size_t)k;
    }
    k = tok_stream_flush(&s, out + l, (int)(3 * len + 8 - l));
    REQUIRE(k >= 0);
    l += (size_t)k;
    REQUIRE(valid_utf8((const unsigned char *)out, l));
    if (valid_utf8((const unsigned char *)text, len)) REQUIRE(l == len && memcmp(out, text, len) == 0);
    free(out);
    return 0;
}
