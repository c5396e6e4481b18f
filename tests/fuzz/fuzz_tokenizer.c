/* fuzz_tokenizer.c — libFuzzer harness for opencl/tokenizer.c on the real Gemma vocabulary.
 *
 * Input: first byte = flags (bit 0: add_special), the rest = text. For both parse_special
 * settings it checks that
 *   - the count from a cap-0 call equals what a full call returns, every id is in range, and a
 *     call with a smaller cap writes the same prefix;
 *   - decoding with render_special gives the text back, up to U+2581 vs ' ' (a literal U+2581
 *     decodes to a space, and a bad UTF-8 lead byte can swallow an escaped space, which then
 *     decodes as raw U+2581 bytes — both llama.cpp behaviours);
 * then it reads the input as int32 token ids (valid and not) and checks tokenizer_piece and the
 * streaming decoder: invalid ids are rejected, and stream output is always valid UTF-8; and it
 * streams the text as <0xXX> byte tokens: valid UTF-8 out, equal to the text when that is valid.
 * Build and run: tests/suites/fuzz_tokenizer.sh. Vocabulary: $CLGEMMA_MODEL or the default. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "tokenizer.h"
#include "tokenizer_gguf.h"

static tokenizer *tok; /* loaded once; read-only afterwards */

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    const char *path = getenv("CLGEMMA_MODEL");
    if (!path || !*path) path = "models/gemma-3-270m-q4_k_m.gguf";
    char err[256];
    gguf_file *f;
    if (gguf_open(&f, path, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_tokenizer: cannot open %s: %s (run make model)\n", path, err);
        exit(1);
    }
    if (tokenizer_from_gguf(&tok, f, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_tokenizer: %s\n", err);
        exit(1);
    }
    gguf_close(f);
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

static int valid_utf8(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t need = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
        if (!need || i + need > n) return 0;
        for (size_t k = 1; k < need; k++) if ((s[i + k] & 0xc0) != 0x80) return 0;
        if ((c == 0xe0 && s[i + 1] < 0xa0) || (c == 0xed && s[i + 1] > 0x9f) ||
            (c == 0xf0 && s[i + 1] < 0x90) || (c == 0xf4 && s[i + 1] > 0x8f)) return 0;
        i += need;
    }
    return 1;
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
    char *want = malloc(len + 1);
    REQUIRE(want);
    if (len) memcpy(want, text, len);
    size_t wl = norm(want, len);
    l = norm(out, l);
    REQUIRE(l == wl && memcmp(out, want, l) == 0);
    free(want); free(out); free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!size) {
        check_encode("", 0, 1, 1);
        return 0;
    }
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

    /* the text as <0xXX> byte tokens through the streaming decoder: always valid UTF-8, and
     * exactly the text when the text is valid UTF-8 */
    tok_stream_init(&s, tok, 0);
    char *out = malloc(3 * len + 8);
    REQUIRE(out);
    size_t l = 0;
    for (size_t i = 0; i < len; i++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", (unsigned char)text[i]);
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
