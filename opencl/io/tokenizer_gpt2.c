/* tokenizer_gpt2.c — llama.cpp's "gpt2" tokenizer model (byte-level BPE, llm_tokenizer_bpe_session
 * with byte_encode) for the pre-tokenizers in pre_regex[] below: Qwen 2 ("qwen2") and Qwen 3.5
 * ("qwen35").
 *
 * One raw fragment (special tokens are already split off by tokenizer.c):
 *  1. llama.cpp's code-point round trip (tokenizer_bpe.c; no space escape).
 *  2. The pre-tokenizer regex splits it into words. llama.cpp runs hand-written splitters for these
 *     patterns (unicode_regex_split_custom_qwen2 / _qwen35) over its own Unicode tables; we run the
 *     patterns themselves through PCRE2 (UTF + UCP), with \s and \S spelt out as llama.cpp's
 *     whitespace set (U+0085 is in it, U+180E is not, unlike PCRE2's \s). Letters, marks and
 *     numbers come from PCRE2's Unicode tables (10.42: Unicode 14), llama.cpp's from a newer
 *     Unicode: code points assigned since can split differently. A surrogate code point (which
 *     llama.cpp accepts) is matched as U+FFFD, a character of the same class and length, since PCRE2
 *     refuses it.
 *  3. Each word's bytes become GPT-2's visible characters (tok_gpt2_byte_cp), then ranked merges
 *     join them (tok_bpe_word); a symbol that is no piece falls back to one-byte pieces of its
 *     encoded bytes, as llama.cpp does (a byte without one is dropped). */
#include "tokenizer_int.h"
#include "errf.h"

#include <string.h>

/* Inside a [...] class: llama.cpp's unicode_set_whitespace, and its letters, marks and numbers:
 * \p{L}, \p{M}, \p{N} plus the code points Unicode 15.0 / 15.1 assigned, which llama.cpp's
 * tables hold and PCRE2 10.42's (Unicode 14) do not (Kawi, CJK extensions H and I, ...; listed
 * from a comparison of both over every code point; a newer PCRE2 already has them). */
#define WS "\\t-\\r \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}"
#define LET "\\p{L}" \
    "\\x{1123f}-\\x{11240}\\x{11f02}\\x{11f04}-\\x{11f10}\\x{11f12}-\\x{11f33}\\x{1342f}" \
    "\\x{13441}-\\x{13446}\\x{1b132}\\x{1b155}\\x{1df25}-\\x{1df2a}\\x{1e030}-\\x{1e06d}" \
    "\\x{1e4d0}-\\x{1e4eb}\\x{2b739}\\x{2ebf0}-\\x{2ee5d}\\x{31350}-\\x{323af}"
#define MARK "\\p{M}" \
    "\\x{cf3}\\x{ece}\\x{10efd}-\\x{10eff}\\x{11241}\\x{11f00}-\\x{11f01}\\x{11f03}" \
    "\\x{11f34}-\\x{11f3a}\\x{11f3e}-\\x{11f42}\\x{13440}\\x{13447}-\\x{13455}\\x{1e08f}" \
    "\\x{1e4ec}-\\x{1e4ef}"
#define NUM "\\p{N}" \
    "\\x{11f50}-\\x{11f59}\\x{1d2c0}-\\x{1d2d3}\\x{1e4f0}-\\x{1e4f9}"
/* llama.cpp's "(?i:'s|'t|'re|'ve|'m|'ll|'d)" as it writes it for std::regex */
#define CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
/* \s*[\r\n]+|\s+(?!\S)|\s+ */
#define WS_TAIL "[" WS "]*[\\r\\n]+|[" WS "]+(?![^" WS "])|[" WS "]+"

static const char *const pre_regex[] = {
    [TOK_PRE_QWEN2] = CONTRACTIONS "|[^\\r\\n" LET NUM "]?[" LET "]+|[" NUM "]| ?[^" WS LET NUM "]+[\\r\\n]*|" WS_TAIL,
    [TOK_PRE_QWEN35] = CONTRACTIONS "|[^\\r\\n" LET NUM "]?[" LET MARK "]+|[" NUM "]| ?[^" WS LET MARK NUM "]+[\\r\\n]*|"
                       WS_TAIL,
};

int tok_gpt2_build(tokenizer *t, enum tok_pre pre, char *err, size_t errlen) {
    if ((unsigned)pre >= sizeof pre_regex / sizeof pre_regex[0] || !pre_regex[pre]) {
        errf(err, errlen, "tokenizer_create: unknown pre-tokenizer %d for a gpt2 model", (int)pre);
        return -1;
    }
    int code;
    PCRE2_SIZE at;
    t->pre_re = pcre2_compile((PCRE2_SPTR)pre_regex[pre], PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &code, &at, NULL);
    if (!t->pre_re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(code, msg, sizeof msg);
        errf(err, errlen, "tokenizer_create: pre-tokenizer regex at %zu: %s", (size_t)at, (const char *)msg);
        return -1;
    }
    pcre2_jit_compile(t->pre_re, PCRE2_JIT_COMPLETE); /* without JIT support matching interprets */
    /* no step limit: the default (10M) refuses a whitespace run of 10M characters, which
     * \s*[\r\n]+ backtracks over once; the work stays linear in the text */
    t->pre_mc = pcre2_match_context_create(NULL);
    if (!t->pre_mc) {
        errf(err, errlen, "tokenizer_create: out of memory");
        return -1;
    }
    pcre2_set_match_limit(t->pre_mc, UINT32_MAX);
    return 0;
}

/* step 3 for the word text[off, off + n) */
static int word(tok_enc *e, const char *text, size_t off, size_t n) {
    if (tok_grow((void **)&e->word, &e->word_cap, 2 * n + 1, 1)) return -1; /* a byte grows to 2 at most */
    size_t o = 0;
    for (size_t i = 0; i < n; i++) o += tok_cpt_encode(tok_gpt2_byte_cp((unsigned char)text[off + i]), e->word + o);
    return tok_bpe_word(e, e->word, 0, (uint32_t)o);
}

int tok_gpt2_words(tok_enc *e, const char *text, size_t len, tok_word_fn *word) {
    int64_t n = tok_cpt_roundtrip(e, text, len, 0);
    if (n <= 0) return (int)n;
    const char *s = e->norm, *subj = s;
    for (int64_t i = 0; i + 2 < n; i++) {
        if ((unsigned char)s[i] != 0xed || (unsigned char)s[i + 1] < 0xa0) continue;
        if (subj == s) { /* the first surrogate: match on a copy */
            if (tok_grow((void **)&e->esc, &e->esc_cap, (size_t)n, 1)) return -1;
            memcpy(e->esc, s, (size_t)n);
            subj = e->esc;
        }
        memcpy(e->esc + i, "\xef\xbf\xbd", 3);
    }
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    if (!md) return -1;
    int rc = 0;
    for (size_t pos = 0; pos < (size_t)n && rc == 0;) {
        /* the round trip left valid UTF-8: no need to check it again per match */
        int m = pcre2_match(e->t->pre_re, (PCRE2_SPTR)subj, (size_t)n, pos, PCRE2_NO_UTF_CHECK, md, e->t->pre_mc);
        size_t start = (size_t)n, end = (size_t)n;
        if (m >= 0) {
            const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            start = ov[0];
            end = ov[1] > start ? ov[1] : start + tok_utf8_len_lead((unsigned char)s[start]);
            if (end > (size_t)n) end = (size_t)n;
        } else if (m != PCRE2_ERROR_NOMATCH) {
            rc = -1; /* a resource limit: no ids rather than wrong ones */
            break;
        }
        if (start > pos) rc = word(e, s, pos, start - pos); /* unmatched text is a word too (llama.cpp) */
        if (rc == 0 && end > start) rc = word(e, s, start, end - start);
        pos = end;
    }
    pcre2_match_data_free(md);
    return rc;
}

int tok_gpt2_fragment(tok_enc *e, const char *text, size_t len) { return tok_gpt2_words(e, text, len, word); }
