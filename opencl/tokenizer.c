/* tokenizer.c — SentencePiece-style ("llama"/SPM) tokenizer matching llama.cpp's llama_tokenize()
 * and llama_token_to_piece() for the same vocabulary.
 *
 * Encoding, as llama.cpp does it:
 *  1. Special-token partitioning. Every CONTROL / USER_DEFINED / UNKNOWN token's text is searched
 *     for in the raw text, longest token first; each match splits the text into raw fragments
 *     and a token. USER_DEFINED tokens are always matched, CONTROL/UNKNOWN only with
 *     parse_special. Later (shorter) tokens only match inside what is still raw text.
 *     We walk a trie of the special texts once per text position and keep the deepest node
 *     reached (its ancestors are all specials starting there). Then, per token length from the
 *     longest down, we step those nodes up to that depth, order the hits by (token rank,
 *     position) and accept one iff none of its bytes are taken yet — exactly "lies inside a
 *     single raw fragment" of llama.cpp's fragment-list algorithm. Memory stays O(text).
 *     Equal-length specials are ordered by id; llama.cpp's std::sort leaves their order
 *     unspecified, which only matters for two equal-length specials that can overlap (none in
 *     Gemma's vocabulary).
 *  2. Each raw fragment: optional " " prefix (add_space_prefix, after BOS/start or a special
 *     token), ' ' -> U+2581, split into UTF-8 characters (length from the lead byte's high
 *     nibble only: a stray continuation byte is a 1-byte symbol, a bad lead byte swallows up to
 *     3 following bytes — even an escaped space), then repeatedly merge the adjacent pair whose concatenation is a
 *     vocabulary piece with the highest score (ties: leftmost), via a binary heap with lazy
 *     invalidation. Symbols that are not pieces fall back to <0xXX> byte tokens.
 * Decoding: NORMAL pieces with U+2581 -> ' ', BYTE tokens -> their byte, USER_DEFINED as text,
 * CONTROL/UNKNOWN as text only when rendering specials, UNUSED/UNDEFINED -> nothing.
 *
 * No global mutable state: everything per call lives on the stack or in per-call buffers. */
#include "tokenizer.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* token attribute bits (llama.cpp's llama_token_attr semantics) */
enum {
    A_UNKNOWN = 1u << 0, A_UNUSED = 1u << 1, A_NORMAL = 1u << 2, A_CONTROL = 1u << 3,
    A_USER = 1u << 4, A_BYTE = 1u << 5, A_LSTRIP = 1u << 6, A_RSTRIP = 1u << 7,
    A_EOG = 1u << 8
};

#define NONE_U32 0xffffffffu

typedef struct trie_node {
    uint32_t child;   /* first child, NONE_U32 if none */
    uint32_t sibling; /* next sibling, NONE_U32 if none */
    uint32_t parent;  /* NONE_U32 for the root */
    uint32_t depth;   /* bytes from the root */
    uint32_t rank;    /* index into special[] of the token ending here, NONE_U32 if none */
    unsigned char byte;
} trie_node;

struct tokenizer {
    uint32_t n;
    char *arena;          /* all piece bytes */
    uint64_t *off;        /* n offsets into arena */
    uint32_t *len;        /* n lengths */
    float *score;         /* n */
    uint16_t *attr;       /* n attribute bits */
    uint32_t *htab;       /* open addressing, piece -> id, NONE_U32 = empty */
    uint32_t hmask;
    uint32_t max_len;     /* longest piece in bytes */
    int32_t bos, eos, unk, pad;
    int add_bos, add_eos, add_space_prefix;
    int32_t byte_tok[256];
    uint32_t *special;    /* special token ids, longest first (ties: lower id first) */
    uint32_t n_special;
    uint32_t *group;      /* n_group + 1 starts in special[] of runs of equal length */
    uint32_t n_group;
    trie_node *trie;      /* node 0 is the root */
    uint32_t n_trie;
};

static void seterr(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static uint32_t hash_bytes(const char *p, size_t n) {
    /* FNV-1a, 32 bit, then a final avalanche so linear probing sees well-mixed low bits */
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) { h ^= (unsigned char)p[i]; h *= 16777619u; }
    h ^= h >> 16; h *= 0x85ebca6bu; h ^= h >> 13;
    return h;
}

static inline const char *piece_ptr(const tokenizer *t, uint32_t id) { return t->arena + t->off[id]; }

static int32_t lookup(const tokenizer *t, const char *p, size_t n) {
    if (n > t->max_len) return -1;
    uint32_t i = hash_bytes(p, n) & t->hmask;
    for (;;) {
        uint32_t id = t->htab[i];
        if (id == NONE_U32) return -1;
        if (t->len[id] == n && memcmp(piece_ptr(t, id), p, n) == 0) return (int32_t)id;
        i = (i + 1) & t->hmask;
    }
}

static int is_space_c(unsigned char c) { /* isspace() in the "C" locale */
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* names llama.cpp treats as end-of-generation; it forces CONTROL on them (e.g. Gemma's "</s>",
 * which the GGUF marks USER_DEFINED, becomes USER_DEFINED|CONTROL). Not replicated: its
 * CONTROL promotion of FIM texts ("<PRE>", "<|fim_prefix|>", ...), which depends on whether the
 * GGUF names FIM ids. */
static const char *const eog_names[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    ("<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"), "[e~[",
};
/* llama.cpp always renders these (gpt-oss) and so makes them USER_DEFINED */
static const char *const always_user_names[] = { "<|channel|>", "<|message|>", "<|start|>", "<|constrain|>" };

static uint16_t type_to_attr(int32_t type) {
    switch (type) {
    case TOK_UNKNOWN: return A_UNKNOWN;
    case TOK_UNUSED: return A_UNUSED;
    case TOK_NORMAL: return A_NORMAL;
    case TOK_CONTROL: return A_CONTROL;
    case TOK_USER_DEFINED: return A_USER;
    case TOK_BYTE: return A_BYTE;
    default: return 0; /* UNDEFINED and anything unknown */
    }
}

static int cmp_special(const void *a, const void *b, void *ctx) {
    const tokenizer *t = ctx;
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    if (t->len[x] != t->len[y]) return t->len[x] > t->len[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

static int build_trie(tokenizer *t) {
    size_t total = 1;
    for (uint32_t r = 0; r < t->n_special; r++) total += t->len[t->special[r]];
    if (total > NONE_U32 - 1) return -1;
    t->trie = malloc(total * sizeof *t->trie);
    if (!t->trie) return -1;
    t->trie[0] = (trie_node){ NONE_U32, NONE_U32, NONE_U32, 0, NONE_U32, 0 };
    t->n_trie = 1;
    for (uint32_t r = 0; r < t->n_special; r++) {
        uint32_t id = t->special[r];
        const unsigned char *p = (const unsigned char *)piece_ptr(t, id);
        uint32_t node = 0;
        for (uint32_t i = 0; i < t->len[id]; i++) {
            uint32_t c = t->trie[node].child;
            while (c != NONE_U32 && t->trie[c].byte != p[i]) c = t->trie[c].sibling;
            if (c == NONE_U32) {
                c = t->n_trie++;
                t->trie[c] = (trie_node){ NONE_U32, t->trie[node].child, node, i + 1, NONE_U32, p[i] };
                t->trie[node].child = c;
            }
            node = c;
        }
        t->trie[node].rank = r; /* pieces are unique, so one token per node */
    }
    t->group = malloc(((size_t)t->n_special + 1) * sizeof *t->group);
    if (!t->group) return -1;
    t->n_group = 0;
    for (uint32_t r = 0; r < t->n_special; r++)
        if (r == 0 || t->len[t->special[r]] != t->len[t->special[r - 1]]) t->group[t->n_group++] = r;
    t->group[t->n_group] = t->n_special;
    return 0;
}

void tokenizer_destroy(tokenizer *t) {
    if (!t) return;
    free(t->arena); free(t->off); free(t->len); free(t->score); free(t->attr);
    free(t->htab); free(t->special); free(t->group); free(t->trie);
    free(t);
}

int tokenizer_create(tokenizer **out, const tokenizer_vocab *v, char *err, size_t errlen) {
    if (!out) { seterr(err, errlen, "tokenizer_create: no output pointer"); return -1; }
    *out = NULL;
    if (!v || !v->pieces || !v->piece_lens) { seterr(err, errlen, "tokenizer_create: no vocabulary"); return -1; }
    if (v->n == 0 || v->n > (uint32_t)INT32_MAX / 2) {
        seterr(err, errlen, "tokenizer_create: bad vocabulary size %u", v->n);
        return -1;
    }
    const uint32_t n = v->n;
    const int32_t sid[4] = { v->bos, v->eos, v->unk, v->pad };
    static const char *const sname[4] = { "bos", "eos", "unk", "pad" };
    for (int i = 0; i < 4; i++)
        if (sid[i] < -1 || sid[i] >= (int64_t)n) {
            seterr(err, errlen, "tokenizer_create: %s id %d out of range (n_vocab %u)", sname[i], sid[i], n);
            return -1;
        }
    if (v->add_bos && v->bos < 0) { seterr(err, errlen, "tokenizer_create: add_bos set but no bos token"); return -1; }
    if (v->add_eos && v->eos < 0) { seterr(err, errlen, "tokenizer_create: add_eos set but no eos token"); return -1; }

    tokenizer *t = calloc(1, sizeof *t);
    if (!t) { seterr(err, errlen, "tokenizer_create: out of memory"); return -1; }
    t->n = n;
    t->bos = v->bos; t->eos = v->eos; t->unk = v->unk; t->pad = v->pad;
    t->add_bos = !!v->add_bos; t->add_eos = !!v->add_eos; t->add_space_prefix = !!v->add_space_prefix;

    /* arena size: empty pieces become "[EMPTY_<id>]" as in llama.cpp */
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t l = v->piece_lens[i];
        if (l && !v->pieces[i]) { seterr(err, errlen, "tokenizer_create: piece %u has no bytes", i); goto fail; }
        total += l ? l : 24;
    }
    t->arena = malloc(total ? total : 1);
    t->off = malloc((size_t)n * sizeof *t->off);
    t->len = malloc((size_t)n * sizeof *t->len);
    t->score = malloc((size_t)n * sizeof *t->score);
    t->attr = malloc((size_t)n * sizeof *t->attr);
    uint32_t hcap = 1024;
    while (hcap < 2 * n) hcap <<= 1;
    t->htab = malloc((size_t)hcap * sizeof *t->htab);
    if (!t->arena || !t->off || !t->len || !t->score || !t->attr || !t->htab) {
        seterr(err, errlen, "tokenizer_create: out of memory");
        goto fail;
    }
    t->hmask = hcap - 1;
    memset(t->htab, 0xff, (size_t)hcap * sizeof *t->htab);

    uint64_t pos = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t l = v->piece_lens[i];
        t->off[i] = pos;
        if (l) {
            memcpy(t->arena + pos, v->pieces[i], l);
        } else {
            l = (uint32_t)snprintf(t->arena + pos, 24, "[EMPTY_%u]", i);
        }
        t->len[i] = l;
        pos += l;
        if (l > t->max_len) t->max_len = l;
        t->score[i] = v->scores ? v->scores[i] : 0.0f;
        t->attr[i] = v->types ? type_to_attr(v->types[i]) : A_NORMAL;

        uint32_t h = hash_bytes(t->arena + t->off[i], l) & t->hmask;
        for (;;) {
            uint32_t o = t->htab[h];
            if (o == NONE_U32) { t->htab[h] = i; break; }
            if (t->len[o] == l && memcmp(piece_ptr(t, o), piece_ptr(t, i), l) == 0) {
                seterr(err, errlen, "tokenizer_create: tokens %u and %u have the same text", o, i);
                goto fail;
            }
            h = (h + 1) & t->hmask;
        }
    }

    /* llama.cpp's load-time attribute fix-ups that depend only on token text */
    for (size_t k = 0; k < sizeof eog_names / sizeof eog_names[0]; k++) {
        int32_t id = lookup(t, eog_names[k], strlen(eog_names[k]));
        if (id >= 0) t->attr[id] |= A_CONTROL | A_EOG;
    }
    for (size_t k = 0; k < sizeof always_user_names / sizeof always_user_names[0]; k++) {
        int32_t id = lookup(t, always_user_names[k], strlen(always_user_names[k]));
        if (id >= 0) t->attr[id] = A_USER;
    }
    if (t->eos >= 0) t->attr[t->eos] |= A_EOG;
    for (uint32_t i = 0; i < n; i++)
        if ((t->attr[i] & A_CONTROL) && memmem(piece_ptr(t, i), t->len[i], "unused", 6))
            t->attr[i] |= A_UNUSED;

    /* byte fallback: "<0xXX>", else the single byte as a piece (as llama.cpp's byte_to_token) */
    for (int b = 0; b < 256; b++) {
        char buf[7];
        snprintf(buf, sizeof buf, "<0x%02X>", b);
        int32_t id = lookup(t, buf, 6);
        if (id < 0 && b != 0) { buf[0] = (char)b; id = lookup(t, buf, 1); }
        t->byte_tok[b] = id;
    }

    /* special tokens: matched in raw text before the SPM pass */
    t->n_special = 0;
    for (uint32_t i = 0; i < n; i++)
        if (t->attr[i] & (A_CONTROL | A_USER | A_UNKNOWN)) t->n_special++;
    t->special = malloc((size_t)(t->n_special ? t->n_special : 1) * sizeof *t->special);
    if (!t->special) { seterr(err, errlen, "tokenizer_create: out of memory"); goto fail; }
    for (uint32_t i = 0, k = 0; i < n; i++)
        if (t->attr[i] & (A_CONTROL | A_USER | A_UNKNOWN)) t->special[k++] = i;
    qsort_r(t->special, t->n_special, sizeof *t->special, cmp_special, t);
    if (build_trie(t)) { seterr(err, errlen, "tokenizer_create: out of memory"); goto fail; }

    *out = t;
    return 0;
fail:
    tokenizer_destroy(t);
    return -1;
}

int tokenizer_set_strip(tokenizer *t, int32_t id, int lstrip, int rstrip) {
    if (!t || id < 0 || (uint32_t)id >= t->n) return -1;
    t->attr[id] = (uint16_t)((t->attr[id] & ~(A_LSTRIP | A_RSTRIP)) | (lstrip ? A_LSTRIP : 0) | (rstrip ? A_RSTRIP : 0));
    return 0;
}

uint32_t tokenizer_n_vocab(const tokenizer *t) { return t ? t->n : 0; }
int32_t tokenizer_bos(const tokenizer *t) { return t ? t->bos : -1; }
int32_t tokenizer_eos(const tokenizer *t) { return t ? t->eos : -1; }

int32_t tokenizer_find(const tokenizer *t, const char *piece) {
    if (!t || !piece) return -1;
    return lookup(t, piece, strlen(piece));
}

int tokenizer_is_control(const tokenizer *t, int32_t id) {
    if (!t || id < 0 || (uint32_t)id >= t->n) return 0;
    return (t->attr[id] & A_CONTROL) != 0;
}

int tokenizer_is_eog(const tokenizer *t, int32_t id) {
    if (!t || id < 0 || (uint32_t)id >= t->n) return 0;
    return (t->attr[id] & A_EOG) != 0;
}

/* ---------------------------------------------------------------- encoding */

typedef struct sym { int32_t prev, next; uint32_t off, n; } sym;
typedef struct bigram { float score; int32_t left, right; uint32_t size; } bigram;

typedef struct enc {
    const tokenizer *t;
    int32_t *ids;
    int cap;
    int64_t count;
    /* work buffers, grown as needed and freed at the end of the call */
    char *esc; size_t esc_cap;
    sym *syms; size_t syms_cap;
    bigram *heap; size_t heap_cap; size_t heap_n;
} enc;

static void emit(enc *e, int32_t id) {
    if (e->count < e->cap) e->ids[e->count] = id;
    e->count++;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

/* heap order: higher score first, then lower left index (llama.cpp's comparator) */
static inline int bg_before(const bigram *a, const bigram *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static void heap_push(enc *e, bigram b) {
    size_t i = e->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!bg_before(&b, &e->heap[p])) break;
        e->heap[i] = e->heap[p];
        i = p;
    }
    e->heap[i] = b;
}

static bigram heap_pop(enc *e) {
    bigram top = e->heap[0];
    bigram last = e->heap[--e->heap_n];
    size_t i = 0, n = e->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && bg_before(&e->heap[c + 1], &e->heap[c])) c++;
        if (!bg_before(&e->heap[c], &last)) break;
        e->heap[i] = e->heap[c];
        i = c;
    }
    if (n) e->heap[i] = last;
    return top;
}

static void try_bigram(enc *e, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const sym *l = &e->syms[left], *r = &e->syms[right];
    uint32_t size = l->n + r->n;
    int32_t id = lookup(e->t, e->esc + l->off, size); /* l and r are adjacent in esc */
    if (id < 0) return;
    heap_push(e, (bigram){ e->t->score[id], left, right, size });
}

static void emit_symbol(enc *e, const sym *s) {
    const tokenizer *t = e->t;
    int32_t id = lookup(t, e->esc + s->off, s->n);
    if (id >= 0) { emit(e, id); return; }
    for (uint32_t j = 0; j < s->n; j++) {
        int32_t b = t->byte_tok[(unsigned char)e->esc[s->off + j]];
        if (b < 0) b = t->unk; /* llama.cpp throws here; a vocab without byte tokens is rare */
        if (b >= 0) emit(e, b);
    }
}

static size_t utf8_len_lead(unsigned char c) {
    static const unsigned char lut[16] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4 };
    return lut[c >> 4];
}

/* SPM pass over one raw fragment. Returns -1 on allocation failure. */
static int spm_fragment(enc *e, const char *text, size_t len, int space_prefix) {
    size_t spaces = space_prefix ? 1 : 0;
    for (size_t i = 0; i < len; i++) spaces += text[i] == ' ';
    size_t elen = len + (space_prefix ? 1 : 0) + 2 * spaces;
    if (grow((void **)&e->esc, &e->esc_cap, elen + 1, 1)) return -1;
    size_t o = 0;
    if (space_prefix) { memcpy(e->esc, "\xe2\x96\x81", 3); o = 3; }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') { memcpy(e->esc + o, "\xe2\x96\x81", 3); o += 3; }
        else e->esc[o++] = text[i];
    }
    if (o == 0) return 0;

    /* one symbol per UTF-8 character (by lead byte; truncated at the end) */
    if (grow((void **)&e->syms, &e->syms_cap, o, sizeof(sym))) return -1;
    int32_t ns = 0;
    for (size_t p = 0; p < o;) {
        size_t l = utf8_len_lead((unsigned char)e->esc[p]);
        if (l > o - p) l = o - p;
        e->syms[ns] = (sym){ ns - 1, p + l == o ? -1 : ns + 1, (uint32_t)p, (uint32_t)l };
        ns++;
        p += l;
    }
    /* each merge pushes at most two bigrams: n-1 seeds + 2(n-1) */
    if (grow((void **)&e->heap, &e->heap_cap, 3 * (size_t)ns + 1, sizeof(bigram))) return -1;
    e->heap_n = 0;
    for (int32_t i = 1; i < ns; i++) try_bigram(e, i - 1, i);
    while (e->heap_n) {
        bigram b = heap_pop(e);
        sym *l = &e->syms[b.left], *r = &e->syms[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue; /* stale */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) e->syms[r->next].prev = b.left;
        try_bigram(e, l->prev, b.left);
        try_bigram(e, b.left, l->next);
    }
    for (int32_t i = 0; i >= 0; i = e->syms[i].next) emit_symbol(e, &e->syms[i]);
    return 0;
}

typedef struct hit { uint32_t rank, pos; } hit;

/* Special-token partitioning. On return mark[i] is 0 for raw text, 1 for bytes removed by
 * lstrip/rstrip, 2 for the first byte of a matched token (its id in tok_at[i]), 3 for the rest
 * of a matched token. Returns 1 if anything matched, 0 if nothing did, -1 on allocation failure. */
static int partition(const tokenizer *t, const unsigned char *s, size_t len, int parse_special,
                     unsigned char **mark_out, int32_t **tok_at_out) {
    uint32_t *cand_pos = NULL, *cand_node = NULL, *cnt = NULL;
    hit *hits = NULL, *sorted = NULL;
    unsigned char *mark = NULL;
    int32_t *tok_at = NULL;
    size_t ncand = 0, cand_cap = 0;
    int rc = -1, any = 0;
    const trie_node *tr = t->trie;

    /* deepest trie node reached from every position that starts some special's prefix */
    for (size_t p = 0; p < len; p++) {
        uint32_t node = 0, best = 0;
        for (size_t i = p; i < len; i++) {
            uint32_t c = tr[node].child;
            while (c != NONE_U32 && tr[c].byte != s[i]) c = tr[c].sibling;
            if (c == NONE_U32) break;
            node = c;
            if (tr[node].rank != NONE_U32) best = node; /* deepest node that ends a special */
        }
        if (best == 0) continue;
        if (ncand == cand_cap) {
            size_t c1 = cand_cap, c2 = cand_cap;
            if (grow((void **)&cand_pos, &c1, ncand + 1, sizeof *cand_pos) ||
                grow((void **)&cand_node, &c2, ncand + 1, sizeof *cand_node)) goto out;
            cand_cap = c1 < c2 ? c1 : c2;
        }
        cand_pos[ncand] = (uint32_t)p;
        cand_node[ncand] = best;
        ncand++;
    }
    if (ncand == 0) { rc = 0; goto out; }

    hits = malloc(ncand * sizeof *hits);
    sorted = malloc(ncand * sizeof *sorted);
    mark = calloc(len, 1);
    tok_at = malloc(len * sizeof *tok_at);
    if (!hits || !sorted || !mark || !tok_at) goto out;

    for (uint32_t g = 0; g < t->n_group; g++) {
        uint32_t lo = t->group[g], hi = t->group[g + 1];
        uint32_t L = t->len[t->special[lo]];
        size_t nh = 0, kept = 0;
        /* step every candidate's node up to depth L; a special of length L ends there or not.
         * Candidates whose first byte is taken can never match again and are dropped. */
        for (size_t k = 0; k < ncand; k++) {
            if (mark[cand_pos[k]]) continue;
            uint32_t node = cand_node[k];
            while (tr[node].depth > L) node = tr[node].parent;
            cand_pos[kept] = cand_pos[k];
            cand_node[kept++] = node;
            uint32_t r = tr[node].rank;
            if (tr[node].depth != L || r == NONE_U32) continue;
            if (!parse_special && (t->attr[t->special[r]] & (A_CONTROL | A_UNKNOWN))) continue;
            hits[nh++] = (hit){ r, cand_pos[k] };
        }
        ncand = kept;
        if (nh == 0) continue;
        const hit *order = hits;
        if (hi - lo > 1) { /* stable counting sort by rank: positions stay ascending per token */
            uint32_t *c = realloc(cnt, ((size_t)(hi - lo) + 1) * sizeof *c);
            if (!c) goto out;
            cnt = c;
            memset(cnt, 0, ((size_t)(hi - lo) + 1) * sizeof *cnt);
            for (size_t k = 0; k < nh; k++) cnt[hits[k].rank - lo + 1]++;
            for (uint32_t r = 0; r < hi - lo; r++) cnt[r + 1] += cnt[r];
            for (size_t k = 0; k < nh; k++) sorted[cnt[hits[k].rank - lo]++] = hits[k];
            order = sorted;
        }
        for (size_t k = 0; k < nh; k++) {
            uint32_t id = t->special[order[k].rank];
            size_t p = order[k].pos, l = L, i;
            for (i = 0; i < l && !mark[p + i]; i++) {}
            if (i < l) continue; /* overlaps a taken byte: not inside one raw fragment */
            mark[p] = 2;
            memset(mark + p + 1, 3, l - 1);
            tok_at[p] = (int32_t)id;
            any = 1;
            if (t->attr[id] & A_LSTRIP)
                for (size_t q = p; q > 0 && !mark[q - 1] && is_space_c(s[q - 1]); q--) mark[q - 1] = 1;
            if (t->attr[id] & A_RSTRIP)
                for (size_t q = p + l; q < len && !mark[q] && is_space_c(s[q]); q++) mark[q] = 1;
        }
    }
    rc = any;
out:
    free(cand_pos); free(cand_node); free(cnt); free(hits); free(sorted);
    if (rc == 1) { *mark_out = mark; *tok_at_out = tok_at; }
    else { free(mark); free(tok_at); }
    return rc;
}

int tokenizer_encode(const tokenizer *t, const char *text, size_t len, int add_special,
                     int parse_special, int32_t *ids, int cap) {
    if (!t || (!text && len) || cap < 0 || (!ids && cap > 0) || len > (size_t)INT_MAX / 4) return -1;
    enc e = { .t = t, .ids = ids, .cap = cap };
    unsigned char *mark = NULL;
    int32_t *tok_at = NULL;
    int rc = -1;

    if (add_special && t->add_bos) emit(&e, t->bos);
    if (len) {
        int pr = partition(t, (const unsigned char *)text, len, parse_special, &mark, &tok_at);
        if (pr < 0) goto out;
        int prev_special = 1; /* the start counts as "after a special token" */
        size_t p = 0;
        while (p < len) {
            if (mark && mark[p] == 2) {
                emit(&e, tok_at[p]);
                p += t->len[tok_at[p]];
                prev_special = 1;
            } else if (mark && mark[p] == 1) {
                p++;
            } else {
                size_t q = p + 1;
                if (mark) while (q < len && mark[q] == 0) q++;
                else q = len;
                if (spm_fragment(&e, text + p, q - p, t->add_space_prefix && prev_special)) goto out;
                prev_special = 0;
                p = q;
            }
        }
    }
    if (add_special && t->add_eos) emit(&e, t->eos);
    rc = e.count > INT_MAX ? -1 : (int)e.count;
out:
    free(mark); free(tok_at); free(e.esc); free(e.syms); free(e.heap);
    return rc;
}

/* ---------------------------------------------------------------- decoding */

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* byte of a BYTE token: hex digits at text[3..4], as strtol(substr(3, 2), 16) would read them */
static unsigned char token_byte(const tokenizer *t, uint32_t id) {
    const char *p = piece_ptr(t, id);
    uint32_t l = t->len[id];
    int v = 0;
    for (uint32_t i = 3; i < 5 && i < l && hexval(p[i]) >= 0; i++) v = v * 16 + hexval(p[i]);
    return (unsigned char)v;
}

int tokenizer_piece(const tokenizer *t, int32_t id, int render_special, char *buf, int cap) {
    if (!t || id < 0 || (uint32_t)id >= t->n || cap < 0 || (!buf && cap > 0)) return -1;
    uint16_t a = t->attr[id];
    const char *p = piece_ptr(t, id);
    uint32_t l = t->len[id];
    if (a & (A_CONTROL | A_UNKNOWN)) {
        if (!render_special) return 0;
    } else if (a & A_USER) {
        /* as is */
    } else if (a & A_NORMAL) {
        int n = 0;
        for (uint32_t i = 0; i < l;) {
            char c;
            if (i + 2 < l && p[i] == '\xe2' && p[i + 1] == '\x96' && p[i + 2] == '\x81') { c = ' '; i += 3; }
            else c = p[i++];
            if (n < cap) buf[n] = c;
            n++;
        }
        return n;
    } else if (a & A_BYTE) {
        if (cap > 0) buf[0] = (char)token_byte(t, (uint32_t)id);
        return 1;
    } else {
        return 0; /* UNUSED / UNDEFINED render as nothing */
    }
    if (l > INT_MAX) return -1;
    if (cap > 0) memcpy(buf, p, (size_t)cap < l ? (size_t)cap : l);
    return (int)l;
}

/* ---------------------------------------------------------------- streaming */

void tok_stream_init(tok_stream *s, const tokenizer *t, int render_special) {
    memset(s, 0, sizeof *s);
    s->t = t;
    s->render_special = render_special;
}

/* Expected total length of a sequence starting with lead byte c, 0 if c cannot start one. */
static int utf8_need(unsigned char c) {
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) return 2;
    if (c >= 0xe0 && c <= 0xef) return 3;
    if (c >= 0xf0 && c <= 0xf4) return 4;
    return 0;
}

/* whether c may follow the pending bytes pend[0..n) (n >= 1) */
static int utf8_cont_ok(const unsigned char *pend, int n, unsigned char c) {
    if (c < 0x80 || c > 0xbf) return 0;
    if (n == 1) {
        switch (pend[0]) {
        case 0xe0: return c >= 0xa0;
        case 0xed: return c <= 0x9f;
        case 0xf0: return c >= 0x90;
        case 0xf4: return c <= 0x8f;
        default: return 1;
        }
    }
    return 1;
}

typedef struct sink { char *out; int cap; int n; } sink;

static void sink_put(sink *k, const void *p, int n) {
    if (k->out && k->n + n <= k->cap) memcpy(k->out + k->n, p, (size_t)n);
    k->n += n;
}

/* Feeds bytes through the UTF-8 assembler in pend/npend, writing complete characters (and
 * U+FFFD for each maximal invalid subpart) to k. */
static void utf8_feed(unsigned char *pend, int *npend, const unsigned char *p, int n, sink *k) {
    static const unsigned char fffd[3] = { 0xef, 0xbf, 0xbd };
    for (int i = 0; i < n;) {
        unsigned char c = p[i];
        if (*npend == 0) {
            int need = utf8_need(c);
            if (need == 0) sink_put(k, fffd, 3);
            else if (need == 1) sink_put(k, &c, 1);
            else pend[(*npend)++] = c;
            i++;
            continue;
        }
        if (!utf8_cont_ok(pend, *npend, c)) {
            sink_put(k, fffd, 3); /* the pending prefix can never complete; reprocess c */
            *npend = 0;
            continue;
        }
        pend[(*npend)++] = c;
        i++;
        if (*npend == utf8_need(pend[0])) {
            sink_put(k, pend, *npend);
            *npend = 0;
        }
    }
}

int tok_stream_push(tok_stream *s, int32_t id, char *out, int cap) {
    if (!s || !s->t || cap < 0 || (!out && cap > 0)) return -1;
    char small[64];
    char *piece = small;
    int n = tokenizer_piece(s->t, id, s->render_special, small, (int)sizeof small);
    if (n < 0) return -1;
    if (n > (int)sizeof small) {
        piece = malloc((size_t)n);
        if (!piece) return -1;
        tokenizer_piece(s->t, id, s->render_special, piece, n);
    }
    /* dry run on a copy of the state to learn the size; commit only if it fits */
    unsigned char pend[8];
    int npend = s->npend;
    memcpy(pend, s->pend, sizeof pend);
    sink k = { NULL, 0, 0 };
    utf8_feed(pend, &npend, (const unsigned char *)piece, n, &k);
    int rc = -1;
    if (k.n <= cap) {
        k = (sink){ out, cap, 0 };
        utf8_feed(s->pend, &s->npend, (const unsigned char *)piece, n, &k);
        rc = k.n;
    }
    if (piece != small) free(piece);
    return rc;
}

int tok_stream_flush(tok_stream *s, char *out, int cap) {
    if (!s || cap < 0 || (!out && cap > 0)) return -1;
    if (s->npend == 0) return 0;
    if (cap < 3) return -1;
    memcpy(out, "\xef\xbf\xbd", 3);
    s->npend = 0;
    return 3;
}
