/* vocab_trie.c — constraint_vocab: each token's bytes as the detokenizer appends them mid-text
 * (tokenizer_piece without special rendering; Gemma 4's <|"|>, <|tool_call>, <tool_call|> as the
 * single bytes G_BYTE_*), whether it is "plain" text of each kind of free text (enum g_text: taken
 * wholesale there), and preorder tries (all usable tokens; per kind the non-plain ones) for the
 * mask walk. */
#include "vocab_trie.h"

#include <stdlib.h>
#include <string.h>

#include "errf.h"

/* the control tokens of Gemma's call syntax, found by their text */
static const struct { const char *text; unsigned char byte; } call_tokens[] = {
    {G_QUOTE_TEXT, G_BYTE_QUOTE}, {"<|tool_call>", G_BYTE_CALL}, {"<tool_call|>", G_BYTE_END},
};
#define N_CALL_TOKENS (sizeof call_tokens / sizeof *call_tokens)

/* characters of a piece that is plain text of the kind (whole UTF-8 characters only), 0 if it is not */
static int plain_chars(const unsigned char *p, uint32_t n, enum g_text kind) {
    if (kind == G_TEXT_KEY) {
        for (uint32_t i = 0; i < n; i++) if (!G_IDENT(p[i])) return 0;
        return n > 255 ? 255 : (int)n;
    }
    if (kind == G_TEXT_GEMMA && memmem(p, n, G_QUOTE_TEXT, strlen(G_QUOTE_TEXT))) return 0;
    int chars = 0;
    for (uint32_t i = 0; i < n; chars++) {
        unsigned c = p[i];
        if (kind == G_TEXT_JSON ? c < 0x20 || c == '"' || c == '\\' : !c) return 0;
        if (c < 0x80) { i++; continue; }
        uint32_t need = c >= 0xc2 && c <= 0xdf ? 1 : c >= 0xe0 && c <= 0xef ? 2 : c >= 0xf0 && c <= 0xf4 ? 3 : 0;
        if (!need || i + need >= n) return 0; /* not a whole character */
        unsigned lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80, hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
        if (p[i + 1] < lo || p[i + 1] > hi) return 0;
        for (uint32_t k = 2; k <= need; k++) if (p[i + k] < 0x80 || p[i + k] > 0xbf) return 0;
        i += need + 1;
    }
    return chars > 255 ? 255 : chars;
}

typedef struct sort_ctx { const char *bytes; const uint32_t *off; const uint8_t *len; } sort_ctx;

static int by_bytes(const void *a, const void *b, void *ctx) {
    const sort_ctx *s = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint32_t lx = s->len[x], ly = s->len[y], n = lx < ly ? lx : ly;
    int r = memcmp(s->bytes + s->off[x], s->bytes + s->off[y], n);
    if (r) return r;
    if (lx != ly) return lx < ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* the preorder trie of the sorted ids */
static int build_trie(constraint_vocab *v, const int32_t *ids, uint32_t n, vt_trie *t, int chain) {
    uint32_t cap = 1024, path[VT_MAX_LEN + 1];
    t->nodes = malloc(cap * sizeof *t->nodes);
    t->n = 0;
    if (!t->nodes) return -1;
    uint32_t open = 0; /* depth of the current path */
    const char *prev = NULL; uint32_t prev_len = 0;
    for (uint32_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        const char *s = v->bytes + v->off[id];
        uint32_t len = v->len[id], l = 0;
        while (prev && l < len && l < prev_len && s[l] == prev[l]) l++;
        while (open > l) t->nodes[path[open--]].end = t->n; /* close the previous path below the common prefix */
        for (uint32_t d = l; d < len; d++) {
            if (t->n == cap) {
                vt_node *q = realloc(t->nodes, (size_t)cap * 2 * sizeof *q);
                if (!q) return -1;
                t->nodes = q; cap *= 2;
            }
            t->nodes[t->n] = (vt_node){0, -1, (uint8_t)s[d], (uint8_t)(d + 1)};
            path[++open] = t->n++;
        }
        vt_node *end = &t->nodes[path[len]];
        if (end->tok < 0) end->tok = id;
        else if (chain) { int32_t k = end->tok; while (v->next_same[k] >= 0) k = v->next_same[k]; v->next_same[k] = id; }
        prev = s; prev_len = len;
    }
    while (open > 0) t->nodes[path[open--]].end = t->n;
    return 0;
}

/* the token's bytes in piece: its length, or 0 when it is never allowed */
static int token_bytes(const tokenizer *tok, int32_t i, const int32_t *call_ids, char *piece, int cap) {
    for (size_t k = 0; k < N_CALL_TOKENS; k++)
        if (call_ids[k] == i) { piece[0] = (char)call_tokens[k].byte; return 1; }
    if (tokenizer_is_control(tok, i)) return 0; /* never in constrained text */
    int k = tokenizer_piece(tok, i, 0, piece, cap);
    if (k <= 0 || k > VT_MAX_LEN) return 0; /* empty pieces would let the output stall */
    for (int j = 0; j < k; j++) /* byte tokens of what stands for the control tokens */
        if ((unsigned char)piece[j] >= G_BYTE_QUOTE && (unsigned char)piece[j] <= G_BYTE_END) return 0;
    return k;
}

static int plain_alloc(vt_plain *p, uint32_t n, uint32_t words) {
    p->charlen = calloc(n, 1);
    p->le = calloc((size_t)(VT_PLAIN_R + 1) * words, sizeof *p->le);
    p->longer = malloc(n * sizeof *p->longer);
    return p->charlen && p->le && p->longer ? 0 : -1;
}

/* token i of k bytes into the kind's plain class, or into np */
static void classify(constraint_vocab *v, vt_plain *p, enum g_text kind, int32_t i, const char *piece, int k,
                     int32_t *np, uint32_t *n_np) {
    int ch = plain_chars((const unsigned char *)piece, (uint32_t)k, kind);
    p->charlen[i] = (uint8_t)ch;
    if (!ch) { np[(*n_np)++] = i; return; }
    for (int r = ch; r <= VT_PLAIN_R; r++) p->le[(size_t)r * v->words + (uint32_t)i / 32] |= 1u << (i % 32);
    if (ch > VT_PLAIN_R) p->longer[p->n_longer++] = i;
}

int constraint_vocab_create(constraint_vocab **out, const tokenizer *tok, char *err, size_t errlen) {
    *out = NULL;
    if (!tok) return errf(err, errlen, "constraint_vocab_create: no tokenizer");
    constraint_vocab *v = calloc(1, sizeof *v);
    if (!v) return errf(err, errlen, "out of memory");
    v->tok = tok;
    v->n_vocab = tokenizer_n_vocab(tok);
    v->words = (v->n_vocab + 31) / 32;
    uint32_t n = v->n_vocab, total = 0, cap = 1 << 20;
    v->off = malloc(n * sizeof *v->off);
    v->len = calloc(n, 1);
    v->next_same = malloc(n * sizeof *v->next_same);
    v->eog = malloc(n * sizeof *v->eog);
    v->bytes = malloc(cap);
    int32_t *ids = malloc(n * sizeof *ids), *np[G_TEXT_KINDS] = {0};
    uint32_t n_ids = 0, n_np[G_TEXT_KINDS] = {0};
    int ok = v->off && v->len && v->next_same && v->eog && v->bytes && ids;
    for (int d = 0; d < G_TEXT_KINDS; d++)
        ok = ok && (np[d] = malloc(n * sizeof **np)) && !plain_alloc(&v->plain[d], n, v->words);
    if (!ok) goto oom;
    int32_t call_ids[N_CALL_TOKENS];
    for (size_t k = 0; k < N_CALL_TOKENS; k++) {
        call_ids[k] = tokenizer_find(tok, call_tokens[k].text);
        v->n_calls += call_ids[k] >= 0 && !tokenizer_is_eog(tok, call_ids[k]);
    }
    char piece[1024];
    for (uint32_t i = 0; i < n; i++) {
        v->next_same[i] = -1;
        v->off[i] = total;
        if (tokenizer_is_eog(tok, (int32_t)i)) { v->eog[v->n_eog++] = (int32_t)i; continue; }
        int k = token_bytes(tok, (int32_t)i, call_ids, piece, sizeof piece);
        if (!k) continue;
        if (total + (uint32_t)k > cap) {
            char *q = realloc(v->bytes, cap * 2);
            if (!q) goto oom;
            v->bytes = q; cap *= 2;
        }
        memcpy(v->bytes + total, piece, (size_t)k);
        total += (uint32_t)k;
        v->len[i] = (uint8_t)k;
        if ((uint32_t)k > v->max_len) v->max_len = (uint32_t)k;
        ids[n_ids++] = (int32_t)i;
        for (int d = 0; d < G_TEXT_KINDS; d++) classify(v, &v->plain[d], (enum g_text)d, (int32_t)i, piece, k, np[d], &n_np[d]);
    }
    sort_ctx sc = {v->bytes, v->off, v->len};
    qsort_r(ids, n_ids, sizeof *ids, by_bytes, &sc);
    if (build_trie(v, ids, n_ids, &v->all, 1)) goto oom;
    for (int d = 0; d < G_TEXT_KINDS; d++) {
        qsort_r(np[d], n_np[d], sizeof *np[d], by_bytes, &sc);
        /* equal bytes mean equal class, so every trie ends a string at the same first id: chain once */
        if (build_trie(v, np[d], n_np[d], &v->plain[d].nonplain, 0)) goto oom;
    }
    free(ids);
    for (int d = 0; d < G_TEXT_KINDS; d++) free(np[d]);
    *out = v;
    return 0;
oom:
    free(ids);
    for (int d = 0; d < G_TEXT_KINDS; d++) free(np[d]);
    constraint_vocab_destroy(v);
    return errf(err, errlen, "constraint_vocab_create: out of memory");
}

void constraint_vocab_destroy(constraint_vocab *v) {
    if (!v) return;
    free(v->off); free(v->len); free(v->next_same); free(v->eog); free(v->bytes); free(v->all.nodes);
    for (int d = 0; d < G_TEXT_KINDS; d++) {
        vt_plain *p = &v->plain[d];
        free(p->charlen); free(p->le); free(p->longer); free(p->nonplain.nodes);
    }
    free(v);
}

uint32_t constraint_vocab_n(const constraint_vocab *v) { return v->n_vocab; }
