/* tokenizer.c — the vocabulary (pieces, attributes, piece -> id hash), special-token partitioning
 * and the encode driver shared by the llama.cpp tokenizer models we serve: "llama" (SPM,
 * tokenizer_spm.c), "gemma4" (BPE, tokenizer_bpe.c) and "gpt2" (byte-level BPE, tokenizer_gpt2.c).
 * Decoding is in tokenizer_decode.c.
 *
 * Encoding, as llama.cpp's llama_vocab::impl::tokenize() does it:
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
 *     the Gemma vocabularies).
 *  2. BOS when add_special and the vocab adds it, then each raw fragment through the model's
 *     fragment encoder (SPM: with a " " prefix after the start or a special token when
 *     add_space_prefix), special tokens as they are, then EOS when the vocab adds it.
 *
 * No global mutable state: everything per call lives on the stack or in per-call buffers. */
#include "tokenizer_int.h"
#include "errf.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* FNV-1a, 32 bit, over a then b, then a final avalanche so linear probing sees well-mixed low bits */
static uint32_t hash_bytes2(const char *a, size_t na, const char *b, size_t nb) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < na; i++) { h ^= (unsigned char)a[i]; h *= 16777619u; }
    for (size_t i = 0; i < nb; i++) { h ^= (unsigned char)b[i]; h *= 16777619u; }
    h ^= h >> 16; h *= 0x85ebca6bu; h ^= h >> 13;
    return h;
}

static int piece_is(const tokenizer *t, uint32_t id, const char *a, size_t na, const char *b, size_t nb) {
    if (t->len[id] != na + nb) return 0;
    const char *p = tok_piece_ptr(t, id);
    return memcmp(p, a, na) == 0 && (nb == 0 || memcmp(p + na, b, nb) == 0);
}

/* the chain of hash h from slot i on: id of the piece a b, or -1 */
static int32_t probe_from(const tokenizer *t, uint32_t i, uint32_t h, const char *a, size_t na, const char *b, size_t nb) {
    for (;; i = (i + 1) & t->hmask) {
        uint32_t id = t->htab[i].id;
        if (id == NONE_U32) return -1;
        if (t->htab[i].hash == h && piece_is(t, id, a, na, b, nb)) return (int32_t)id;
    }
}

int32_t tok_lookup2(const tokenizer *t, const char *a, size_t na, const char *b, size_t nb) {
    if (na + nb > t->max_len) return -1;
    uint32_t h = hash_bytes2(a, na, b, nb);
    return probe_from(t, h & t->hmask, h, a, na, b, nb);
}

void tok_probe_start(const tokenizer *t, tok_probe *q, const char *a, size_t na, const char *b, size_t nb) {
    *q = (tok_probe){ a, b, (uint32_t)na, (uint32_t)nb, 0, NONE_U32, NONE_U32 };
    if (na + nb > t->max_len) return;
    q->hash = hash_bytes2(a, na, b, nb);
    q->slot = q->hash & t->hmask;
    __builtin_prefetch(&t->htab[q->slot]);
}

void tok_probe_next(const tokenizer *t, tok_probe *q) {
    if (q->slot == NONE_U32) return;
    for (uint32_t i = q->slot;; i = (i + 1) & t->hmask) {
        uint32_t id = t->htab[i].id;
        if (id == NONE_U32) { q->slot = NONE_U32; return; }
        if (t->htab[i].hash == q->hash) {
            q->slot = i;
            q->cand = id;
            __builtin_prefetch(&t->off[id]);
            __builtin_prefetch(&t->len[id]);
            return;
        }
    }
}

void tok_probe_bytes(const tokenizer *t, const tok_probe *q) {
    if (q->cand != NONE_U32) __builtin_prefetch(tok_piece_ptr(t, q->cand));
}

int32_t tok_probe_end(const tokenizer *t, const tok_probe *q) {
    if (q->slot == NONE_U32) return -1;
    if (piece_is(t, q->cand, q->a, q->na, q->b, q->nb)) return (int32_t)q->cand;
    return probe_from(t, (q->slot + 1) & t->hmask, q->hash, q->a, q->na, q->b, q->nb);
}

static int is_space_c(unsigned char c) { /* isspace() in the "C" locale */
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* names llama.cpp treats as end-of-generation; it forces CONTROL on them (e.g. Gemma 3's "</s>",
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

/* llama.cpp's end-of-generation exceptions: when every "present" text is an EOG token, "drop"
 * stops being one and gets attributes "attr" (gpt-oss / solar-open "<|end|>"; Gemma 4 and
 * PLaMo, whose "</s>" is ordinary text) */
static const struct { const char *present[2]; const char *drop; uint16_t attr; } eog_drops[] = {
    { { "<|return|>", "<|call|>" }, "<|end|>", A_USER },
    { { "<|return|>", "<|calls|>" }, "<|end|>", A_USER },
    { { "<|call|>", "<|flush|>" }, "<|end|>", A_USER },
    { { "<|calls|>", "<|flush|>" }, "<|end|>", A_USER },
    { { "<|tool_response>", NULL }, "</s>", A_NORMAL },
    { { "<|plamo:eos|>", NULL }, "</s>", A_NORMAL },
};

static int32_t find_eog(const tokenizer *t, const char *name) {
    int32_t id = tok_lookup(t, name, strlen(name));
    return id >= 0 && (t->attr[id] & A_EOG) ? id : -1;
}

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
        const unsigned char *p = (const unsigned char *)tok_piece_ptr(t, id);
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
    free(t->htab); free(t->special); free(t->group); free(t->trie); free(t->merge);
    pcre2_code_free(t->pre_re);
    pcre2_match_context_free(t->pre_mc);
    free(t);
}

/* llama.cpp's load-time attribute fix-ups that depend only on token text */
static void fix_attributes(tokenizer *t) {
    for (size_t k = 0; k < sizeof eog_names / sizeof eog_names[0]; k++) {
        int32_t id = tok_lookup(t, eog_names[k], strlen(eog_names[k]));
        if (id >= 0) t->attr[id] |= A_CONTROL | A_EOG;
    }
    for (size_t k = 0; k < sizeof always_user_names / sizeof always_user_names[0]; k++) {
        int32_t id = tok_lookup(t, always_user_names[k], strlen(always_user_names[k]));
        if (id >= 0) t->attr[id] = A_USER;
    }
    if (t->eos >= 0) t->attr[t->eos] |= A_EOG;
    for (size_t k = 0; k < sizeof eog_drops / sizeof eog_drops[0]; k++) {
        int32_t drop = find_eog(t, eog_drops[k].drop);
        int all = drop >= 0;
        for (int j = 0; j < 2 && all; j++)
            all = !eog_drops[k].present[j] || find_eog(t, eog_drops[k].present[j]) >= 0;
        if (all) t->attr[drop] = eog_drops[k].attr;
    }
    for (uint32_t i = 0; i < t->n; i++)
        if ((t->attr[i] & A_CONTROL) && memmem(tok_piece_ptr(t, i), t->len[i], "unused", 6))
            t->attr[i] |= A_UNUSED;
}

int tokenizer_create(tokenizer **out, const tokenizer_vocab *v, char *err, size_t errlen) {
    if (!out) { errf(err, errlen, "tokenizer_create: no output pointer"); return -1; }
    *out = NULL;
    if (!v || !v->pieces || !v->piece_lens) { errf(err, errlen, "tokenizer_create: no vocabulary"); return -1; }
    if (v->model != TOK_MODEL_SPM && v->model != TOK_MODEL_GEMMA4 && v->model != TOK_MODEL_GPT2) {
        errf(err, errlen, "tokenizer_create: unknown model %d", (int)v->model);
        return -1;
    }
    if (v->n == 0 || v->n > (uint32_t)INT32_MAX / 2) {
        errf(err, errlen, "tokenizer_create: bad vocabulary size %u", v->n);
        return -1;
    }
    if (v->n_merges && (!v->merges || !v->merge_lens)) {
        errf(err, errlen, "tokenizer_create: %u merges without their text", v->n_merges);
        return -1;
    }
    const uint32_t n = v->n;
    const int32_t sid[4] = { v->bos, v->eos, v->unk, v->pad };
    static const char *const sname[4] = { "bos", "eos", "unk", "pad" };
    for (int i = 0; i < 4; i++)
        if (sid[i] < -1 || sid[i] >= (int64_t)n) {
            errf(err, errlen, "tokenizer_create: %s id %d out of range (n_vocab %u)", sname[i], sid[i], n);
            return -1;
        }
    if (v->add_bos && v->bos < 0) { errf(err, errlen, "tokenizer_create: add_bos set but no bos token"); return -1; }
    if (v->add_eos && v->eos < 0) { errf(err, errlen, "tokenizer_create: add_eos set but no eos token"); return -1; }

    tokenizer *t = calloc(1, sizeof *t);
    if (!t) { errf(err, errlen, "tokenizer_create: out of memory"); return -1; }
    t->model = v->model;
    t->n = n;
    t->bos = v->bos; t->eos = v->eos; t->unk = v->unk; t->pad = v->pad;
    t->add_bos = !!v->add_bos; t->add_eos = !!v->add_eos; t->add_space_prefix = !!v->add_space_prefix;
    t->clean_spaces = !!v->clean_spaces;

    /* arena size: empty pieces become "[EMPTY_<id>]" as in llama.cpp */
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t l = v->piece_lens[i];
        if (l && !v->pieces[i]) { errf(err, errlen, "tokenizer_create: piece %u has no bytes", i); goto fail; }
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
        errf(err, errlen, "tokenizer_create: out of memory");
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

        uint32_t h = hash_bytes2(t->arena + t->off[i], l, NULL, 0);
        for (uint32_t k = h & t->hmask;; k = (k + 1) & t->hmask) {
            uint32_t o = t->htab[k].id;
            if (o == NONE_U32) { t->htab[k] = (tok_slot){ i, h }; break; }
            if (t->htab[k].hash == h && t->len[o] == l && memcmp(tok_piece_ptr(t, o), tok_piece_ptr(t, i), l) == 0) {
                errf(err, errlen, "tokenizer_create: tokens %u and %u have the same text", o, i);
                goto fail;
            }
        }
    }
    fix_attributes(t);

    /* byte fallback: "<0xXX>"; SPM also takes the single byte as a piece (llama.cpp's
     * byte_to_token), BPE without a GPT-2 byte map only the hex form, gpt2 only the single byte
     * (of the byte-encoded text: llama.cpp's fallback there) */
    for (int b = 0; b < 256; b++) {
        char buf[7];
        snprintf(buf, sizeof buf, "<0x%02X>", b);
        if (t->model == TOK_MODEL_GPT2) buf[0] = (char)b;
        int32_t id = tok_lookup(t, buf, t->model == TOK_MODEL_GPT2 ? 1 : 6);
        if (id < 0 && b != 0 && t->model == TOK_MODEL_SPM) { buf[0] = (char)b; id = tok_lookup(t, buf, 1); }
        t->byte_tok[b] = id;
    }

    /* special tokens: matched in raw text before the model's own pass */
    t->n_special = 0;
    for (uint32_t i = 0; i < n; i++)
        if (t->attr[i] & (A_CONTROL | A_USER | A_UNKNOWN)) t->n_special++;
    t->special = malloc((size_t)(t->n_special ? t->n_special : 1) * sizeof *t->special);
    if (!t->special) { errf(err, errlen, "tokenizer_create: out of memory"); goto fail; }
    for (uint32_t i = 0, k = 0; i < n; i++)
        if (t->attr[i] & (A_CONTROL | A_USER | A_UNKNOWN)) t->special[k++] = i;
    qsort_r(t->special, t->n_special, sizeof *t->special, cmp_special, t);
    if (build_trie(t)) { errf(err, errlen, "tokenizer_create: out of memory"); goto fail; }

    if (t->model != TOK_MODEL_SPM && tok_bpe_build(t, v, err, errlen)) goto fail;
    if (t->model == TOK_MODEL_GPT2 && tok_gpt2_build(t, v->pre, err, errlen)) goto fail;

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
enum tok_model tokenizer_model(const tokenizer *t) { return t ? t->model : TOK_MODEL_SPM; }
int32_t tokenizer_bos(const tokenizer *t) { return t ? t->bos : -1; }
int32_t tokenizer_eos(const tokenizer *t) { return t ? t->eos : -1; }

int32_t tokenizer_find(const tokenizer *t, const char *piece) {
    if (!t || !piece) return -1;
    return tok_lookup(t, piece, strlen(piece));
}

int tokenizer_is_control(const tokenizer *t, int32_t id) {
    if (!t || id < 0 || (uint32_t)id >= t->n) return 0;
    return (t->attr[id] & A_CONTROL) != 0;
}

int tokenizer_is_eog(const tokenizer *t, int32_t id) {
    if (!t || id < 0 || (uint32_t)id >= t->n) return 0;
    return (t->attr[id] & A_EOG) != 0;
}

/* ---------------------------------------------------------------- encoder state */

void tok_emit(tok_enc *e, int32_t id) {
    if (e->count < e->cap) e->ids[e->count] = id;
    e->count++;
}

int tok_grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

static inline int bg_before(const tok_bigram *a, const tok_bigram *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

void tok_heap_push(tok_enc *e, tok_bigram b) {
    size_t i = e->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!bg_before(&b, &e->heap[p])) break;
        e->heap[i] = e->heap[p];
        i = p;
    }
    e->heap[i] = b;
}

tok_bigram tok_heap_pop(tok_enc *e) {
    tok_bigram top = e->heap[0];
    tok_bigram last = e->heap[--e->heap_n];
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

int32_t tok_split_chars(tok_enc *e, const char *buf, uint32_t off, uint32_t n, int with_ids) {
    if (tok_grow((void **)&e->syms, &e->syms_cap, n, sizeof(tok_sym))) return -1;
    int32_t ns = 0;
    for (uint32_t p = off, end = off + n; p < end;) {
        uint32_t l = (uint32_t)tok_utf8_len_lead((unsigned char)buf[p]);
        if (l > end - p) l = end - p;
        int32_t id = with_ids ? tok_lookup(e->t, buf + p, l) : -1;
        e->syms[ns] = (tok_sym){ ns - 1, p + l == end ? -1 : ns + 1, p, l, id };
        ns++;
        p += l;
    }
    return ns;
}

int tok_merge_all(tok_enc *e, int32_t ns, void (*try_pair)(tok_enc *, int32_t, int32_t)) {
    /* each merge pushes at most two bigrams: n-1 seeds + 2(n-1) */
    if (tok_grow((void **)&e->heap, &e->heap_cap, 3 * (size_t)ns + 1, sizeof(tok_bigram))) return -1;
    e->heap_n = 0;
    for (int32_t i = 1; i < ns; i++) try_pair(e, i - 1, i);
    while (e->heap_n) {
        tok_bigram b = tok_heap_pop(e);
        tok_sym *l = &e->syms[b.left], *r = &e->syms[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue; /* stale */
        l->n += r->n;
        l->id = b.id;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) e->syms[r->next].prev = b.left;
        try_pair(e, l->prev, b.left);
        try_pair(e, b.left, l->next);
    }
    return 0;
}

/* ---------------------------------------------------------------- special tokens */

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
            if (tok_grow((void **)&cand_pos, &c1, ncand + 1, sizeof *cand_pos) ||
                tok_grow((void **)&cand_node, &c2, ncand + 1, sizeof *cand_node)) goto out;
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

/* ---------------------------------------------------------------- encoding */

static int fragment(tok_enc *e, const char *text, size_t len, int after_special) {
    const tokenizer *t = e->t;
    if (t->model == TOK_MODEL_GEMMA4) return tok_bpe_fragment(e, text, len);
    if (t->model == TOK_MODEL_GPT2) return tok_gpt2_fragment(e, text, len);
    return tok_spm_fragment(e, text, len, t->add_space_prefix && after_special);
}

int tokenizer_encode(const tokenizer *t, const char *text, size_t len, int add_special,
                     int parse_special, int32_t *ids, int cap) {
    if (!t || (!text && len) || cap < 0 || (!ids && cap > 0) || len > (size_t)INT_MAX / 4) return -1;
    tok_enc e = { .t = t, .ids = ids, .cap = cap };
    unsigned char *mark = NULL;
    int32_t *tok_at = NULL;
    int rc = -1;

    if (add_special && t->add_bos) tok_emit(&e, t->bos);
    if (len) {
        int pr = partition(t, (const unsigned char *)text, len, parse_special, &mark, &tok_at);
        if (pr < 0) goto out;
        int prev_special = 1; /* the start counts as "after a special token" */
        size_t p = 0;
        while (p < len) {
            if (mark && mark[p] == 2) {
                tok_emit(&e, tok_at[p]);
                p += t->len[tok_at[p]];
                prev_special = 1;
            } else if (mark && mark[p] == 1) {
                p++;
            } else {
                size_t q = p + 1;
                if (mark) while (q < len && mark[q] == 0) q++;
                else q = len;
                if (fragment(&e, text + p, q - p, prev_special)) goto out;
                prev_special = 0;
                p = q;
            }
        }
    }
    if (add_special && t->add_eos) tok_emit(&e, t->eos);
    rc = e.count > INT_MAX ? -1 : (int)e.count;
out:
    free(mark); free(tok_at); free(e.esc); free(e.norm); free(e.word); free(e.syms); free(e.heap);
    return rc;
}
