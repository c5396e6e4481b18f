/* test_tokenizer_qwen35.c — the "gpt2" tokenizer model (opencl/io/tokenizer_gpt2.c: byte-level BPE
 * after a pre-tokenizer regex) with the Qwen 3.5 and Qwen 2 pre-tokenizers, against llama.cpp.
 *
 * References, all llama.cpp's (fetched into .cache/llama.cpp by deploy/fetch_llama_ref.sh, run here
 * when missing):
 *  - models/ggml-vocab-qwen35.gguf and ggml-vocab-qwen2.gguf with their .inp/.out: llama.cpp's own
 *    tokenizer cases (tests/test-tokenizer-0: add_special = false, parse_special = false). Every
 *    case's ids must be exactly llama.cpp's, and detokenizing them must give the text back (a
 *    byte-level vocabulary loses nothing of valid UTF-8, and clean_spaces is off for Qwen);
 *  - the pre-tokenizer's words for inputs where the regex's details matter, derived by hand from
 *    llama.cpp's unicode_regex_split_custom_qwen35 / _qwen2 (src/unicode.cpp; each case says why),
 *    including the two places where PCRE2 on its own would differ: U+180E, which PCRE2's \s holds
 *    and llama.cpp's whitespace set does not, and code points assigned in Unicode 15, which
 *    PCRE2 10.42's tables lack.
 * Plus GPT-2's byte map, round trips of random text and refusals of bad tokenizer.ggml.pre values
 * (GGUF copies of the vocabulary written with gguf_write.c). */
#include "check.h"

#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "gguf.h"
#include "gguf_write.h"
#include "tokenizer.h"
#include "tokenizer_gguf.h"
#include "tokenizer_int.h"
#include "tok_test.h"

#define VOCAB35 ".cache/llama.cpp/models/ggml-vocab-qwen35.gguf"
#define VOCAB2 ".cache/llama.cpp/models/ggml-vocab-qwen2.gguf"

static tokenizer *q35, *q2;
static const tokenizer *tok; /* the one a llama.cpp case runs on */
static double load_ms, load_wall_ms;

/* ------------------------------------------------------------------ llama.cpp's cases */

typedef struct case_stats { int bad_ids, bad_detok, other_pre_differs; } case_stats;

static void llama_case(void *ctx, int k, const char *text, size_t l, const int32_t *want, int nw) {
    case_stats *st = ctx;
    int n;
    int32_t *got = encode_alloc(tok, text, l, 0, 0, &n);
    if (!got || !ids_eq(got, n, want, nw)) {
        st->bad_ids++;
        CHECK(0, "llama.cpp case %d ('%.*s') differs", k, (int)(l > 40 ? 40 : l), text);
        print_ids("want", want, nw);
        if (got) print_ids("got ", got, n);
    }
    free(got);
    size_t dl = 0;
    char *d = detok_alloc(tok, want, nw, 0, 0, &dl);
    if (!d || dl != l || memcmp(d, text, l)) {
        st->bad_detok++;
        CHECK(0, "llama.cpp case %d ('%.*s'): detokenize does not give the text back", k, (int)(l > 40 ? 40 : l), text);
    }
    free(d);
    /* the same vocabulary with the other pre-tokenizer: the cases must tell them apart */
    got = encode_alloc(tok == q35 ? q2 : q35, text, l, 0, 0, &n);
    st->other_pre_differs += !got || !ids_eq(got, n, want, nw);
    free(got);
}

static void run_cases(const tokenizer *t, const char *vocab, int expect) {
    case_stats st = { 0, 0, 0 };
    tok = t;
    int k = for_llama_cases(vocab, llama_case, &st);
    CHECK(k == expect, "%d llama.cpp cases in %s.inp/.out, expected %d", k, vocab, expect);
    printf("  %s: %d llama.cpp test-tokenizer-0 cases, %d ids differ, %d detokenize differ (%d differ with the other "
           "pre-tokenizer)\n", vocab, k, st.bad_ids, st.bad_detok, st.other_pre_differs);
}

static void test_qwen35_cases(void) { run_cases(q35, VOCAB35, 50); }
static void test_qwen2_cases(void) { run_cases(q2, VOCAB2, 46); }

static void test_vocab_facts(void) {
    CHECK(tokenizer_model(q35) == TOK_MODEL_GPT2, "model %d", (int)tokenizer_model(q35));
    CHECK(tokenizer_n_vocab(q35) == 151936, "n_vocab %u", tokenizer_n_vocab(q35));
    CHECK(tokenizer_bos(q35) == 151643 && tokenizer_eos(q35) == 151643, "bos %d eos %d", tokenizer_bos(q35),
          tokenizer_eos(q35));
    static const char *const eog[] = { "<|endoftext|>", "<|im_end|>" };
    for (int i = 0; i < 2; i++)
        CHECK(tokenizer_is_eog(q35, tokenizer_find(q35, eog[i])) && tokenizer_is_control(q35, tokenizer_find(q35, eog[i])),
              "%s: end of generation", eog[i]);
    int32_t im = tokenizer_find(q35, "<|im_start|>");
    CHECK(im == 151644 && tokenizer_is_control(q35, im) && !tokenizer_is_eog(q35, im), "<|im_start|> %d", im);
    /* no BOS added (add_bos_token absent, gpt2's default), control text split only with parse_special */
    int32_t ids[8];
    int n = tokenizer_encode(q35, "<|im_start|>", 12, 1, 1, ids, 8);
    CHECK(n == 1 && ids[0] == im, "<|im_start|> with parse_special: %d ids", n);
    n = tokenizer_encode(q35, "<|im_start|>", 12, 1, 0, ids, 8);
    CHECK(n > 1, "<|im_start|> without parse_special: %d ids", n);
}

/* ------------------------------------------------------------------ GPT-2's byte map */

static void test_byte_map(void) {
    unsigned char seen[0x200] = { 0 };
    for (int b = 0; b < 256; b++) {
        uint32_t cp = tok_gpt2_byte_cp((unsigned char)b);
        CHECK(cp > 0x20 && cp < 0x200 && !seen[cp], "byte %#x -> U+%04X", b, cp);
        if (cp >= 0x200) continue;
        seen[cp] = 1;
        CHECK(tok_gpt2_cp_byte(cp) == b, "U+%04X -> %d, not byte %#x", cp, tok_gpt2_cp_byte(cp), b);
        /* every byte's character is a piece that decodes to the byte */
        char u[5] = { 0 }, out[4];
        tok_cpt_encode(cp, u);
        int32_t id = tokenizer_find(q35, u);
        CHECK(id >= 0 && tokenizer_piece(q35, id, 0, out, 4) == 1 && (unsigned char)out[0] == b, "byte %#x: piece", b);
    }
    /* GPT-2's table: printable Latin-1 stays, the rest in byte order from U+0100 */
    CHECK(tok_gpt2_byte_cp(' ') == 0x120 && tok_gpt2_byte_cp('\n') == 0x10a && tok_gpt2_byte_cp(0) == 0x100, "low bytes");
    CHECK(tok_gpt2_byte_cp(0x7f) == 0x121 && tok_gpt2_byte_cp(0xa0) == 0x142 && tok_gpt2_byte_cp(0xad) == 0x143, "high");
    CHECK(tok_gpt2_byte_cp('A') == 'A' && tok_gpt2_byte_cp(0xe9) == 0xe9, "printable bytes");
    static const uint32_t none[] = { 0, 0x20, 0x7f, 0xa0, 0xad, 0x144, 0x2581, 0x10ffff };
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++)
        CHECK(tok_gpt2_cp_byte(none[i]) == -1, "U+%04X stands for no byte", none[i]);
}

/* ------------------------------------------------------------------ the pre-tokenizer */

static char words[1024];
static size_t n_words;

static int record(tok_enc *e, const char *text, size_t off, size_t n) {
    (void)e;
    if (n_words + n + 1 >= sizeof words) return -1;
    if (n_words) words[n_words++] = '|';
    memcpy(words + n_words, text + off, n);
    n_words += n;
    words[n_words] = 0;
    return 0;
}

/* the words of text (len bytes), joined by '|' */
static void expect_words(const tokenizer *t, const char *name, const char *text, size_t len, const char *want) {
    tok_enc e = { .t = t };
    n_words = 0;
    words[0] = 0;
    int rc = tok_gpt2_words(&e, text, len, record);
    free(e.norm); free(e.esc);
    CHECK(rc == 0 && strcmp(words, want) == 0, "%s: words '%s', llama.cpp's '%s'", name, words, want);
}
#define W(t, name, text, want) expect_words(t, name, text, sizeof text - 1, want)

static void test_pre_tokenizer(void) {
    W(q35, "plain", "Hello world", "Hello| world");
    /* contractions come first, any case; a digit is a word by itself; a lone space before a digit
     * is the last branch's \s+; a space before an apostrophe is the punctuation run's */
    W(q35, "contractions", "I'm 123 don'T 'LL'Re'x", "I|'m| |1|2|3| don|'T| '|LL|'Re|'x");
    W(q35, "digits", "abc123def", "abc|1|2|3|def");
    /* qwen35 keeps combining marks in letter runs; qwen2 starts a word at the mark (the mark is the
     * optional non-letter before \p{L}+) and leaves a trailing one to the punctuation branch */
    W(q35, "marks qwen35", "a\xcc\x81" "b c\xcc\x81", "a\xcc\x81" "b| c\xcc\x81");
    W(q2, "marks qwen2", "a\xcc\x81" "b c\xcc\x81", "a|\xcc\x81" "b| c|\xcc\x81");
    /* U+0085 is whitespace: it ends the punctuation run; of two before a letter the first is
     * \s+(?!\S) and the second the letter word's prefix */
    W(q35, "NEL", "!\xc2\x85\xc2\x85x", "!|\xc2\x85|\xc2\x85x");
    /* U+180E is no whitespace for llama.cpp (PCRE2's \s would end the run at it) */
    W(q35, "U+180E", "!\xe1\xa0\x8e ", "!\xe1\xa0\x8e| ");
    /* whitespace up to the last newline, then a space as the next word's prefix */
    W(q35, "newlines", "  \n\n x", "  \n\n| x");
    W(q35, "crlf", "\r\n\r\n  \t", "\r\n\r\n|  \t");
    W(q35, "trailing spaces", "x   ", "x|   ");
    W(q35, "punctuation", "a...\n\nb ...x?!\r\n\n", "a|...\n\n|b| ...|x|?!\r\n\n");
    /* Unicode 15: U+31350 (CJK extension H) and U+11F04 (Kawi) are letters, U+11F50 a digit, U+0CF3
     * a mark, as in llama.cpp's tables (PCRE2 10.42 knows none of them) */
    W(q35, "unicode 15", "a\xf0\xb1\x8d\x90\xf0\x91\xbc\x84 \xf0\x91\xbd\x90 a\xe0\xb3\xb3",
      "a\xf0\xb1\x8d\x90\xf0\x91\xbc\x84| |\xf0\x91\xbd\x90| a\xe0\xb3\xb3");
    /* a surrogate (llama.cpp accepts it) is a non-letter before a letter run */
    W(q35, "surrogate", "\xed\xa0\x80" "a", "\xed\xa0\x80" "a");
    /* an invalid byte became U+FFFD (a symbol); an overlong space became ' ' */
    W(q35, "invalid", "a\xff b\xc0\xa0x", "a|\xef\xbf\xbd| b| x");
}

/* ------------------------------------------------------------------ round trips */

static void test_round_trip(void) {
    static const char *const pool[] = {
        "a", "Z", "0", "7", " ", " ", " ", "\n", "\r", "\t", "'", "'s", "!", "...", "<|im_start|>", "<|im_end|>",
        "\xc2\x85", "\xc2\xa0", "\xe3\x80\x80", "\xe2\x80\xa8", "\xcc\x81", "\xe4\xb8\xad", "\xf0\x9f\x98\x80",
        "\xe2\x80\x8d", "\xe1\xa0\x8e", "\xf0\x91\xbc\x84", "\xf4\x8f\xbf\xbf", "\xc3\xa9", "\xd0\x96", "[PAD151646]",
    };
    const size_t np = sizeof pool / sizeof pool[0];
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    int bad = 0;
    for (int c = 0; c < 2000 && bad < 5; c++) {
        char text[512];
        size_t l = 0;
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        int parts = (int)(seed >> 59) + 1;
        for (int k = 0; k < parts * 2; k++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            const char *p = pool[(seed >> 33) % np];
            memcpy(text + l, p, strlen(p));
            l += strlen(p);
        }
        const tokenizer *t = c & 1 ? q2 : q35;
        for (int special = 0; special < 2; special++) {
            int n;
            size_t dl = 0;
            int32_t *ids = encode_alloc(t, text, l, 0, special, &n);
            char *d = ids ? detok_alloc(t, ids, n, 0, special, &dl) : NULL;
            if (!d || dl != l || memcmp(d, text, l)) {
                bad++;
                CHECK(0, "round trip of '%.*s' (parse_special %d): '%.*s'", (int)l, text, special, (int)dl, d ? d : "");
            }
            free(ids); free(d);
        }
    }
}

/* pieces that stand for no byte decode as llama.cpp's llama_decode_text writes them */
static void test_unknown_byte_piece(void) {
    static const char *const pieces[] = { "a", "b", "\xe2\x96\x81x" }; /* U+2581 is no GPT-2 byte */
    static const char *const merges[] = { "a b" };
    const uint32_t lens[] = { 1, 1, 4 }, mlens[] = { 3 };
    tokenizer_vocab v = { .model = TOK_MODEL_GPT2, .pre = TOK_PRE_QWEN35, .n = 3, .pieces = pieces, .piece_lens = lens,
                          .bos = -1, .eos = -1, .unk = -1, .pad = -1, .n_merges = 1, .merges = merges, .merge_lens = mlens };
    tokenizer *t = NULL;
    char err[256] = "", buf[64];
    CHECK(tokenizer_create(&t, &v, err, sizeof err) == 0, "create: %s", err);
    if (!t) return;
    int n = tokenizer_piece(t, 2, 0, buf, sizeof buf);
    static const char want[] = "[UNK_BYTE_0xe29681\xe2\x96\x81x]x";
    CHECK(n == (int)sizeof want - 1 && !memcmp(buf, want, sizeof want - 1), "piece '%.*s'", n < 0 ? 0 : n, buf);
    CHECK(tokenizer_piece(t, 2, 0, buf, 5) == n && !memcmp(buf, want, 5), "piece with a small cap");
    /* "a b" merges into no piece: its bytes' one-byte pieces; 'c' has none and is dropped, as in
     * llama.cpp */
    int32_t ids[4];
    n = tokenizer_encode(t, "abc", 3, 0, 0, ids, 4);
    CHECK(n == 2 && ids[0] == 0 && ids[1] == 1, "'abc' in a vocabulary without 'ab' or 'c': %d ids", n);
    v.pre = (enum tok_pre)9;
    tokenizer *u = NULL;
    CHECK(tokenizer_create(&u, &v, err, sizeof err) == -1 && strstr(err, "pre-tokenizer 9"), "bad pre: '%s'", err);
    tokenizer_destroy(u);
    tokenizer_destroy(t);
}

/* ------------------------------------------------------------------ refusals */

/* A copy of the qwen35 vocabulary with tokenizer.ggml.pre set to pre (NULL: left out); returns
 * tokenizer_load's status and message. */
static int load_with_pre(const char *pre, char *err, size_t errlen) {
    char why[256] = "", path[] = "/tmp/clgemma-qwen-pre-XXXXXX";
    gguf_file *f = NULL;
    if (gguf_open(&f, VOCAB35, why, sizeof why)) { snprintf(err, errlen, "open: %s", why); return -2; }
    gguf_writer *w = gguf_writer_create(0);
    for (size_t i = 0; i < gguf_kv_count(f); i++) {
        const gguf_kv *kv = gguf_kv_at(f, i);
        if (!gguf_str_eq(kv->key, "tokenizer.ggml.pre")) gguf_w_kv(w, kv);
        else if (pre) gguf_w_str(w, "tokenizer.ggml.pre", pre);
    }
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    int rc = fd >= 0 && gguf_w_open(w, path) == 0 && gguf_w_close(w, why, sizeof why) == 0 ? 0 : -2;
    gguf_writer_destroy(w);
    gguf_close(f);
    if (rc) { snprintf(err, errlen, "write %s: %s", path, why); unlink(path); return rc; }
    tokenizer *t = NULL;
    rc = tokenizer_load(&t, path, err, errlen);
    tokenizer_destroy(t);
    unlink(path);
    return rc;
}

static void test_bad_pre(void) {
    char err[512] = "";
    CHECK(load_with_pre("qwen35", err, sizeof err) == 0, "the copy itself: %s", err);
    static const struct { const char *pre, *want; } bad[] = {
        { "llama3", "tokenizer.ggml.pre 'llama3' unsupported for tokenizer.ggml.model 'gpt2' (known: 'qwen2', " },
        { "", "tokenizer.ggml.pre '' unsupported" },
        { NULL, "tokenizer.ggml.pre missing (tokenizer.ggml.model 'gpt2' needs it; known: 'qwen2'" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        int rc = load_with_pre(bad[i].pre, err, sizeof err);
        CHECK(rc == -1 && strstr(err, bad[i].want) && !strchr(err, '\n'),
              "pre %s: want '%s', got rc %d '%s'", bad[i].pre ? bad[i].pre : "(none)", bad[i].want, rc, err);
    }
}

/* ------------------------------------------------------------------ cost */

static void test_timing(void) {
    const double scale = TT_TIME_SCALE;
    printf("  load 151936 tokens + 151387 merges: %.1f ms cpu (%.1f ms wall)\n", load_ms, load_wall_ms);
    CHECK(load_ms < 500 * scale, "tokenizer_from_gguf took %.1f ms", load_ms);
    const size_t len = 1 << 18;
    char *text = malloc(len);
    int32_t *ids = malloc(sizeof(int32_t) * (len + 8));
    static const char mix[] = "The quick brown fox, 1234 times: \xe4\xb8\xad\xe6\x96\x87 caf\xc3\xa9 don't!\n\t  ";
    const struct { const char *what; int fill; } runs[] = {
        { "text mix", 0 }, { "one long word", 'a' }, { "spaces", ' ' }, { "newlines", '\n' }, { "punctuation", '!' },
        { "digits", '7' }, { "invalid bytes", 0xff },
    };
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        for (size_t i = 0; i < len; i++) text[i] = runs[r].fill ? (char)runs[r].fill : mix[i % (sizeof mix - 1)];
        double t0 = cpu_ms(), w0 = wall_ms();
        int n = tokenizer_encode(q35, text, len, 0, 0, ids, (int)len + 8);
        double dt = cpu_ms() - t0, dw = wall_ms() - w0;
        CHECK(n > 0, "%s: encode failed", runs[r].what);
        double mbs = len / 1048576.0 / (dt / 1e3);
        /* a floor against quadratic blowups, not a benchmark */
        CHECK(mbs > 0.5 / scale, "%s: %.2f MB/s", runs[r].what, mbs);
        printf("  encode %-14s %7zu bytes -> %7d ids  %7.1f ms cpu (%.1f wall)  %.1f MB/s\n", runs[r].what, len, n, dt,
               dw, mbs);
    }
    free(text); free(ids);
}

int main(void) {
    check_current = "test_tokenizer_qwen35_setup";
    if ((access(VOCAB35, R_OK) != 0 || access(VOCAB2, R_OK) != 0) && system("sh deploy/fetch_llama_ref.sh > /dev/null") != 0) {
        printf("FAIL test_tokenizer_qwen35_setup: %s missing and sh deploy/fetch_llama_ref.sh failed\n", VOCAB35);
        return 1;
    }
    double ms2, wall2;
    if (load_timed(VOCAB35, check_current, &q35, &load_ms, &load_wall_ms) || load_timed(VOCAB2, check_current, &q2, &ms2, &wall2))
        return 1;
    RUN_TEST(test_qwen35_cases);
    RUN_TEST(test_qwen2_cases);
    RUN_TEST(test_vocab_facts);
    RUN_TEST(test_byte_map);
    RUN_TEST(test_pre_tokenizer);
    RUN_TEST(test_round_trip);
    RUN_TEST(test_unknown_byte_piece);
    RUN_TEST(test_bad_pre);
    RUN_TEST(test_timing);
    tokenizer_destroy(q35);
    tokenizer_destroy(q2);
    CHECK_EXIT();
}
