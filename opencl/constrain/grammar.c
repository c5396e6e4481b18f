/* grammar.c — the grammar builder shared by schema.c and tools.c: growable node, property,
 * alternative, literal and byte arrays, the first error with its prefix, the builtin nodes, and
 * the finishing pass (anyOf/$ref flattened, the frames a finite value needs). */
#include "grammar.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint32_t gb_fail(g_build *b, const char *fmt, ...) {
    if (!b->failed && b->errlen) { /* the first error is the one the client needs */
        int n = snprintf(b->err, b->errlen, "%s", b->where ? b->where : "");
        if (n >= 0 && (size_t)n < b->errlen) {
            va_list ap; va_start(ap, fmt);
            vsnprintf(b->err + n, b->errlen - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    b->failed = 1;
    return G_NONE;
}

int gb_grow(void **p, uint32_t *cap, uint32_t need, size_t elem) {
    if (need <= *cap) return 0;
    uint32_t n = *cap ? *cap * 2 : 64;
    while (n < need) n *= 2;
    void *q = realloc(*p, (size_t)n * elem);
    if (!q) return -1;
    *p = q; *cap = n;
    return 0;
}

uint32_t gb_node(g_build *b, enum g_kind kind) {
    grammar *g = b->g;
    if (g->n_nodes >= G_MAX_NODES) return gb_fail(b, "schema has more than %d nodes", G_MAX_NODES);
    if (gb_grow((void **)&g->nodes, &b->cap_nodes, g->n_nodes + 1, sizeof *g->nodes)) return gb_fail(b, "out of memory");
    g_node *n = &g->nodes[g->n_nodes];
    memset(n, 0, sizeof *n);
    n->kind = (uint8_t)kind; n->max = G_NONE; n->items = G_NONE; n->target = G_NONE; n->min_depth = 255;
    return g->n_nodes++;
}

uint32_t gb_bytes(g_build *b, const void *s, size_t len) {
    grammar *g = b->g;
    if (g->n_bytes + len > G_MAX_LIT_BYTES) return gb_fail(b, "enum, const and key texts exceed %d bytes", G_MAX_LIT_BYTES);
    if (gb_grow((void **)&g->bytes, &b->cap_bytes, g->n_bytes + (uint32_t)len + 1, 1)) return gb_fail(b, "out of memory");
    if (len) memcpy(g->bytes + g->n_bytes, s, len);
    uint32_t off = g->n_bytes;
    g->n_bytes += (uint32_t)len;
    return off;
}

/* n elements of src appended to the array *p of *len elements; the index of the first */
static uint32_t append(g_build *b, void **p, uint32_t *len, uint32_t *cap, const void *src, uint32_t n, size_t elem) {
    if (gb_grow(p, cap, *len + n + 1, elem)) return gb_fail(b, "out of memory");
    if (n) memcpy((char *)*p + *len * elem, src, n * elem);
    *len += n;
    return *len - n;
}

uint32_t gb_alts(g_build *b, const uint32_t *a, uint32_t n) {
    return append(b, (void **)&b->g->alts, &b->g->n_alts, &b->cap_alts, a, n, sizeof *a);
}

uint32_t gb_props(g_build *b, const g_prop *p, uint32_t n) {
    return append(b, (void **)&b->g->props, &b->g->n_props, &b->cap_props, p, n, sizeof *p);
}

uint32_t gb_lit(g_build *b, uint32_t off, uint32_t len) {
    g_lit l = {off, len};
    return append(b, (void **)&b->g->lits, &b->g->n_lits, &b->cap_lits, &l, 1, sizeof l);
}

/* any value, string, number, false/null/true, any object, any array: the same texts in both dialects */
int gb_start(g_build *b, grammar *g, int gemma, const char *where, char *err, size_t errlen) {
    memset(g, 0, sizeof *g);
    *b = (g_build){.g = g, .where = where, .err = err, .errlen = errlen};
    if (errlen) err[0] = 0;
    g->gemma = gemma;
    uint32_t any = gb_node(b, G_ANYOF), str = gb_node(b, G_STR), num = gb_node(b, G_NUM);
    static const char *const tfn[] = {"false", "null", "true"}; /* sorted, as G_LIT wants */
    uint32_t first = b->g->n_lits;
    for (int i = 0; i < 3; i++) gb_lit(b, gb_bytes(b, tfn[i], strlen(tfn[i])), (uint32_t)strlen(tfn[i]));
    uint32_t lit = gb_node(b, G_LIT), fobj = gb_node(b, G_FOBJ), arr = gb_node(b, G_ARR);
    if (b->failed || any != G_N_ANY || str != G_N_STR || num != G_N_NUM || lit != G_N_TFN ||
        fobj != G_N_FOBJ || arr != G_N_ARR) { gb_fail(b, "out of memory"); return -1; }
    g->nodes[G_N_TFN].first = first; g->nodes[G_N_TFN].count = 3;
    uint32_t alts[5] = {G_N_FOBJ, G_N_ARR, G_N_STR, G_N_NUM, G_N_TFN};
    uint32_t a = gb_alts(b, alts, 5);
    if (a == G_NONE) return -1;
    g->nodes[G_N_ANY].first = a; g->nodes[G_N_ANY].count = 5;
    g->nodes[G_N_ARR].items = G_N_ANY;
    return 0;
}

/* anyOf and $ref nodes become flat lists of concrete nodes, so the matcher expands one level */
static void flatten_visit(const grammar *g, uint32_t n, uint8_t *seen, uint32_t *out, uint32_t *k) {
    if (seen[n]) return;
    seen[n] = 1;
    const g_node *d = &g->nodes[n];
    if (d->kind == G_REF) flatten_visit(g, d->target, seen, out, k);
    else if (d->kind == G_ANYOF)
        for (uint32_t i = 0; i < d->count; i++) flatten_visit(g, g->alts[d->first + i], seen, out, k);
    else out[(*k)++] = n;
}

/* frames a finite value of node i needs, given the current estimates of the others */
static uint32_t need(const grammar *g, const g_node *d) {
    uint32_t m = 1;
    if (d->kind == G_ANYOF) {
        m = 255;
        for (uint32_t j = 0; j < d->count; j++)
            if (g->nodes[g->alts[d->first + j]].min_depth < m) m = g->nodes[g->alts[d->first + j]].min_depth;
    } else if (d->kind == G_OBJ) {
        for (uint32_t j = 0; j < d->count; j++) {
            const g_prop *p = &g->props[d->first + j];
            if (p->next_req == j && 1u + g->nodes[p->node].min_depth > m) m = 1u + g->nodes[p->node].min_depth;
        }
    } else if (d->kind == G_ARR) {
        for (uint32_t j = 0; j < d->min && j <= d->count; j++) {
            uint32_t it = j < d->count ? g->alts[d->first + j] : d->items;
            if (it != G_NONE && 1u + g->nodes[it].min_depth > m) m = 1u + g->nodes[it].min_depth;
        }
    } else if (d->kind == G_CALLS) { /* one call of the cheapest function */
        uint32_t best = 255;
        for (uint32_t j = 0; j < d->count; j++)
            if (g->nodes[g->props[d->first + j].node].min_depth < best) best = g->nodes[g->props[d->first + j].node].min_depth;
        m = 1 + best;
    }
    return m > 255 ? 255 : m;
}

int gb_finish(g_build *b, uint32_t root) {
    grammar *g = b->g;
    if (b->failed || root == G_NONE) return -1;
    g->root = root;
    uint32_t n = g->n_nodes;
    uint8_t *seen = malloc(n);
    uint32_t *out = malloc(n * sizeof *out);
    if (!seen || !out) { free(seen); free(out); gb_fail(b, "out of memory"); return -1; }
    for (uint32_t i = 0; i < n; i++) {
        if (g->nodes[i].kind != G_REF && g->nodes[i].kind != G_ANYOF) continue;
        memset(seen, 0, n);
        uint32_t k = 0;
        flatten_visit(g, i, seen, out, &k);
        uint32_t first = gb_alts(b, out, k);
        if (first == G_NONE) break;
        g->nodes[i].kind = G_ANYOF; g->nodes[i].first = first; g->nodes[i].count = k;
    }
    free(seen); free(out);
    if (b->failed) return -1;
    for (int changed = 1; changed;) { /* from above to the fixpoint */
        changed = 0;
        for (uint32_t i = 0; i < n; i++) {
            uint32_t m = need(g, &g->nodes[i]);
            if (m < g->nodes[i].min_depth) { g->nodes[i].min_depth = (uint8_t)m; changed = 1; }
        }
    }
    if (g->nodes[g->root].min_depth + 1 > G_MAX_STACK) {
        gb_fail(b, "schema admits no value of finite size within %d levels of nesting", G_MAX_STACK - 1);
        return -1;
    }
    return 0;
}

void grammar_free(grammar *g) {
    free(g->nodes); free(g->props); free(g->alts); free(g->lits); free(g->bytes);
    memset(g, 0, sizeof *g);
}
