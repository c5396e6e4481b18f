/* tokenizer_bpe.c — llama.cpp's "gemma4" tokenizer model: BPE with ranked merges over
 * SentencePiece-style text (LLAMA_VOCAB_PRE_TYPE_GEMMA4 in llama_vocab / llm_tokenizer_bpe_session),
 * and the parts the byte-level "gpt2" model (tokenizer_gpt2.c) shares with it: the merge table,
 * the code-point round trip (step 1 without the escape) and the merging of one word (steps 3, 4).
 *
 * One raw fragment (special tokens are already split off by tokenizer.c):
 *  1. ' ' -> U+2581, and the text goes through llama.cpp's code-point round trip
 *     (unicode_cpts_from_utf8, then unicode_cpt_to_utf8): the lead byte's high bits give the
 *     length and continuation bytes are checked, but overlong forms and surrogates are accepted
 *     (so "\xc0\x8a" becomes "\n"); a byte that starts no such sequence becomes U+FFFD.
 *     Sequences above U+10FFFF (F4 90.. to F7 ..) make llama.cpp throw from its C API (an abort
 *     in practice); we treat their lead byte as invalid (U+FFFD) instead. An overlong space
 *     comes out as a raw ' ' (spaces were escaped before), on which llama.cpp's merge lookup
 *     asserts when it has a neighbour; here it is just a symbol no merge names.
 *  2. The pre-tokenizer "[^\n]+|[\n]+": runs of newlines and runs of anything else. A run of
 *     newlines that is itself a piece is that token (llama.cpp PR 21343).
 *  3. Per run: one symbol per character, then repeatedly join the adjacent pair with the
 *     lowest merge rank (ties: leftmost) — a heap with lazy invalidation. Pieces and merges are
 *     handled by id: a merge names two pieces and yields the piece of their joined text.
 *  4. A symbol that is no piece falls back to its bytes' <0xXX> tokens (a byte without one is
 *     dropped, as in llama.cpp).
 * The merge table is a hash on (left id, right id) built once at load. */
#include "tokenizer_int.h"
#include "errf.h"

#include <stdlib.h>
#include <string.h>

static inline uint32_t pair_hash(uint32_t a, uint32_t b) {
    uint64_t k = ((uint64_t)a << 32) | b; /* murmur3's 64-bit finaliser */
    k ^= k >> 33; k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33; k *= 0xc4ceb9fe1a85ec53ull;
    k ^= k >> 33;
    return (uint32_t)k;
}

static const bpe_merge *merge_find(const tokenizer *t, uint32_t a, uint32_t b) {
    for (uint32_t i = pair_hash(a, b) & t->mmask;; i = (i + 1) & t->mmask) {
        const bpe_merge *m = &t->merge[i];
        if (m->left == NONE_U32) return NULL;
        if (m->left == a && m->right == b) return m;
    }
}

/* a piece's text for an error message: at most 24 bytes, control bytes as '?' */
static const char *show(const char *p, size_t n, char buf[32]) {
    size_t k = n < 24 ? n : 24, o = 0;
    for (size_t i = 0; i < k; i++) buf[o++] = (unsigned char)p[i] < 0x20 || p[i] == 0x7f ? '?' : p[i];
    if (k < n) { memcpy(buf + o, "...", 3); o += 3; }
    buf[o] = 0;
    return buf;
}

/* one merge line on its way through the batched lookups */
typedef struct mline { tok_probe a, b, ab; uint32_t rank; } mline;

/* adds the block's merges to the table; a repeated pair keeps its first rank */
static int insert_block(tokenizer *t, mline *ml, uint32_t k, char *err, size_t errlen) {
    int32_t ia[64], ib[64];
    for (uint32_t j = 0; j < k; j++) {
        ia[j] = tok_probe_end(t, &ml[j].a);
        ib[j] = tok_probe_end(t, &ml[j].b);
        if (ia[j] >= 0 && ib[j] >= 0) __builtin_prefetch(&t->merge[pair_hash((uint32_t)ia[j], (uint32_t)ib[j]) & t->mmask]);
    }
    for (uint32_t j = 0; j < k; j++) {
        if (ia[j] < 0 || ib[j] < 0) {
            const tok_probe *q = ia[j] < 0 ? &ml[j].a : &ml[j].b;
            char sa[32];
            errf(err, errlen, "tokenizer.ggml.merges[%u]: '%s' is not in tokenizer.ggml.tokens", ml[j].rank,
                   show(q->a, q->na, sa));
            return -1;
        }
        uint32_t a = (uint32_t)ia[j], b = (uint32_t)ib[j], i = pair_hash(a, b) & t->mmask;
        while (t->merge[i].left != NONE_U32 && !(t->merge[i].left == a && t->merge[i].right == b))
            i = (i + 1) & t->mmask;
        if (t->merge[i].left != NONE_U32) continue;
        t->merge[i] = (bpe_merge){ a, b, ml[j].rank, tok_probe_end(t, &ml[j].ab) };
        t->n_merges++;
    }
    return 0;
}

int tok_bpe_build(tokenizer *t, const tokenizer_vocab *v, char *err, size_t errlen) {
    const uint32_t nm = v->n_merges;
    if (nm > (1u << 30)) { errf(err, errlen, "tokenizer.ggml.merges: %u merges is too many", nm); return -1; }
    uint32_t cap = 1024;
    while (cap < 2 * nm) cap <<= 1;
    t->merge = malloc((size_t)cap * sizeof *t->merge);
    if (!t->merge) { errf(err, errlen, "tokenizer.ggml.merges: out of memory"); return -1; }
    memset(t->merge, 0xff, (size_t)cap * sizeof *t->merge);
    t->mmask = cap - 1;
    t->n_merges = 0;
    /* blocks of 64 lines: every lookup of a block advances one step before any takes the next,
     * so a block's cache misses overlap (3x faster load of the Gemma 4 merges) */
    mline ml[64];
    for (uint32_t r0 = 0; r0 < nm; r0 += 64) {
        uint32_t k = nm - r0 < 64 ? nm - r0 : 64;
        for (uint32_t j = 0; j < k; j++) {
            uint32_t r = r0 + j;
            const char *s = v->merges[r];
            size_t l = v->merge_lens[r];
            if (l && !s) { errf(err, errlen, "tokenizer.ggml.merges[%u]: no text", r); return -1; }
            /* "left right", split at the first space after the first byte (as llama.cpp does) */
            const char *sp = l > 1 ? memchr(s + 1, ' ', l - 1) : NULL;
            if (!sp) {
                char sa[32];
                errf(err, errlen, "tokenizer.ggml.merges[%u]: '%s' is not two pieces separated by a space", r,
                       show(s ? s : "", l, sa));
                return -1;
            }
            size_t na = (size_t)(sp - s), nb = l - na - 1;
            ml[j].rank = r;
            tok_probe_start(t, &ml[j].a, s, na, NULL, 0);
            tok_probe_start(t, &ml[j].b, sp + 1, nb, NULL, 0);
            tok_probe_start(t, &ml[j].ab, s, na, sp + 1, nb);
        }
        for (uint32_t j = 0; j < k; j++) {
            tok_probe_next(t, &ml[j].a); tok_probe_next(t, &ml[j].b); tok_probe_next(t, &ml[j].ab);
        }
        for (uint32_t j = 0; j < k; j++) {
            tok_probe_bytes(t, &ml[j].a); tok_probe_bytes(t, &ml[j].b); tok_probe_bytes(t, &ml[j].ab);
        }
        if (insert_block(t, ml, k, err, errlen)) return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- encoding */

size_t tok_cpt_decode(const char *s, size_t n, uint32_t *cp) {
    const unsigned char *p = (const unsigned char *)s;
    unsigned char c = p[0];
    if (!(c & 0x80)) { *cp = c; return 1; }
    if (!(c & 0x40)) return 0;
    size_t len = !(c & 0x20) ? 2 : !(c & 0x10) ? 3 : !(c & 0x08) ? 4 : 0;
    if (len == 0 || len > n) return 0;
    uint32_t v = c & (0x7fu >> len);
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80) return 0;
        v = v << 6 | (p[i] & 0x3fu);
    }
    if (v > 0x10ffff) return 0; /* llama.cpp throws (see the top of the file) */
    *cp = v;
    return len;
}

size_t tok_cpt_encode(uint32_t cp, char *o) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xc0 | cp >> 6); o[1] = (char)(0x80 | (cp & 63)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | cp >> 12); o[1] = (char)(0x80 | (cp >> 6 & 63)); o[2] = (char)(0x80 | (cp & 63));
        return 3;
    }
    o[0] = (char)(0xf0 | cp >> 18); o[1] = (char)(0x80 | (cp >> 12 & 63));
    o[2] = (char)(0x80 | (cp >> 6 & 63)); o[3] = (char)(0x80 | (cp & 63));
    return 4;
}

/* Step 1 into e->norm. With escape_spaces a raw ' ' byte is escaped; a space that was an
 * overlong form stays ' ' (llama.cpp escapes before it decodes). */
int64_t tok_cpt_roundtrip(tok_enc *e, const char *text, size_t len, int escape_spaces) {
    if (tok_grow((void **)&e->norm, &e->norm_cap, 3 * len + 4, 1)) return -1; /* a byte grows to 3 at most */
    char *o = e->norm;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t k = tok_cpt_decode(text + i, len - i, &cp);
        if (k == 0) { memcpy(o, "\xef\xbf\xbd", 3); o += 3; i++; continue; }
        if (k == 1 && cp == ' ' && escape_spaces) { memcpy(o, "\xe2\x96\x81", 3); o += 3; }
        else o += tok_cpt_encode(cp, o);
        i += k;
    }
    return o - e->norm;
}

static void try_merge(tok_enc *e, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const tok_sym *l = &e->syms[left], *r = &e->syms[right];
    if (l->id < 0 || r->id < 0) return; /* merges only name pieces */
    const bpe_merge *m = merge_find(e->t, (uint32_t)l->id, (uint32_t)r->id);
    if (!m) return;
    tok_heap_push(e, (tok_bigram){ -(double)m->rank, left, right, l->n + r->n, m->result });
}

/* steps 3 and 4 (gpt2 models too, whose byte_tok are their one-byte pieces) */
int tok_bpe_word(tok_enc *e, const char *buf, uint32_t off, uint32_t n) {
    const tokenizer *t = e->t;
    int32_t ns = tok_split_chars(e, buf, off, n, 1);
    if (ns < 0 || tok_merge_all(e, ns, try_merge)) return -1;
    for (int32_t i = 0; i >= 0; i = e->syms[i].next) {
        const tok_sym *s = &e->syms[i];
        if (s->id >= 0) { tok_emit(e, s->id); continue; }
        for (uint32_t j = 0; j < s->n; j++) {
            int32_t b = t->byte_tok[(unsigned char)buf[s->off + j]];
            if (b >= 0) tok_emit(e, b);
        }
    }
    return 0;
}

int tok_bpe_fragment(tok_enc *e, const char *text, size_t len) {
    int64_t n = tok_cpt_roundtrip(e, text, len, 1);
    if (n < 0) return -1;
    const char *s = e->norm;
    for (int64_t p = 0; p < n;) {
        int nl = s[p] == '\n';
        int64_t q = p + 1;
        while (q < n && (s[q] == '\n') == nl) q++;
        int32_t id = nl ? tok_lookup(e->t, s + p, (size_t)(q - p)) : -1;
        if (id >= 0) tok_emit(e, id);
        else if (tok_bpe_word(e, s, (uint32_t)p, (uint32_t)(q - p))) return -1;
        p = q;
    }
    return 0;
}
