/* matcher.c — the byte-level pushdown automaton over a compiled grammar. A state is a set of
 * threads (one per live anyOf alternative), each a stack of frames: the root, then one frame per
 * open value. g_step() is functional (src → dst) so the mask walk can keep one state per depth.
 * A value is pushed only where a finite completion still fits in G_MAX_STACK frames, so no
 * thread ever reaches a dead end: whatever prefix is accepted can be completed. The Gemma dialect
 * (grammar.h) differs in strings, keys, whitespace and the tool-call frame (K_*). */
#include "grammar.h"

#include <string.h>

enum {
    R_VAL, R_DONE,
    O_START, O_KEY, O_COLON, O_VAL, O_AFTER, O_NEXT,
    F_START, F_COLON, F_VAL, F_AFTER, F_NEXT, F_KEY,
    A_START, A_AFTER, A_NEXT,
    S_BODY, S_ESC, S_U,
    N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP,
    L_LIT,
    K_NAME, K_END, K_MORE,
};

typedef struct run { const grammar *g; g_state *s; uint32_t ti; } run;

static g_frame *top(run *r) { g_thread *t = &r->s->th[r->ti]; return &r->s->fr[t->base + t->depth - 1]; }
static uint32_t depth(run *r) { return r->s->th[r->ti].depth; }
static int fits(run *r, uint32_t node) { return depth(r) + r->g->nodes[node].min_depth <= G_MAX_STACK; }

static const g_lit *lit(const grammar *g, uint32_t i) { return &g->lits[i]; }
static int lit_byte(const grammar *g, uint32_t i, uint32_t pos) {
    return pos < g->lits[i].len ? (unsigned char)g->bytes[g->lits[i].off + pos] : -1;
}

/* within lits [lo, hi) sharing a prefix of pos bytes: the sub-range whose next byte is c */
static void lit_narrow(const grammar *g, uint32_t *lo, uint32_t *hi, uint32_t pos, int c) {
    uint32_t a = *lo, b = *hi;
    while (a < b) { uint32_t m = (a + b) / 2; if (lit_byte(g, m, pos) < c) a = m + 1; else b = m; }
    uint32_t s = a; b = *hi;
    while (a < b) { uint32_t m = (a + b) / 2; if (lit_byte(g, m, pos) <= c) a = m + 1; else b = m; }
    *lo = s; *hi = a;
}

/* within the calls' keys [lo, hi) (relative to first) sharing pos bytes: those whose next byte is c */
static void key_narrow(const grammar *g, const g_node *d, uint32_t *lo, uint32_t *hi, uint32_t pos, int c) {
    const g_prop *P = g->props + d->first;
#define KB(i) (pos < P[i].key_len ? (int)(unsigned char)g->bytes[P[i].key + pos] : -1)
    uint32_t a = *lo, b = *hi;
    while (a < b) { uint32_t m = (a + b) / 2; if (KB(m) < c) a = m + 1; else b = m; }
    uint32_t s = a; b = *hi;
    while (a < b) { uint32_t m = (a + b) / 2; if (KB(m) <= c) a = m + 1; else b = m; }
#undef KB
    *lo = s; *hi = a;
}

static int quote(const grammar *g) { return g->gemma ? G_BYTE_QUOTE : '"'; }

static int starts(const grammar *g, uint32_t node, int c) {
    const g_node *d = &g->nodes[node];
    switch (d->kind) {
    case G_LIT: { uint32_t lo = d->first, hi = d->first + d->count; lit_narrow(g, &lo, &hi, 0, c); return lo < hi; }
    case G_STR: return c == quote(g);
    case G_CALLS: return c == G_BYTE_CALL;
    case G_NUM: case G_INT: return c == '-' || (c >= '0' && c <= '9');
    case G_OBJ: case G_FOBJ: return c == '{';
    case G_ARR: return c == '[';
    }
    return 0;
}

/* a fresh frame for node that has consumed its first byte c (starts() said yes) */
static g_frame begin(const grammar *g, uint32_t node, int c) {
    g_frame f = {.node = (uint16_t)node};
    const g_node *d = &g->nodes[node];
    switch (d->kind) {
    case G_LIT: {
        uint32_t lo = d->first, hi = d->first + d->count;
        lit_narrow(g, &lo, &hi, 0, c);
        f.st = L_LIT; f.a = lo; f.b = hi; f.m = 1;
        break;
    }
    case G_STR: f.st = S_BODY; break;
    case G_NUM: case G_INT:
        f.st = c == '-' ? N_MINUS : c == '0' ? N_ZERO : N_INT; f.a = c >= '1' && c <= '9'; break;
    case G_OBJ: f.st = O_START; break;
    case G_FOBJ: f.st = F_START; break;
    case G_ARR: f.st = A_START; break;
    case G_CALLS: f.st = K_NAME; f.a = 0; f.b = d->count; f.aux = 1; break;
    }
    return f;
}

static int lit_full(const grammar *g, const g_frame *f) { return lit(g, f->a)->len == f->m; }

static void pop(run *r) { r->s->th[r->ti].depth--; r->s->nf--; }

/* push the value of node starting with byte c; anyOf alternatives beyond the first go to new
 * threads at the end of the state. 0: no alternative can start with c here. */
static int value_start(run *r, uint32_t node, int c) {
    const grammar *g = r->g;
    const g_node *d = &g->nodes[node];
    uint32_t one = node;
    const uint32_t *alts = d->kind == G_ANYOF ? g->alts + d->first : &one;
    uint32_t n = d->kind == G_ANYOF ? d->count : 1, v[G_MAX_THREADS], nv = 0;
    for (uint32_t i = 0; i < n && nv < G_MAX_THREADS; i++)
        if (fits(r, alts[i]) && starts(g, alts[i], c)) v[nv++] = alts[i];
    if (!nv) return 0;
    g_state *s = r->s;
    g_thread t = s->th[r->ti]; /* last in the state: it grows in place */
    if (t.base + t.depth >= G_MAX_FRAMES) return 0;
    s->fr[t.base + t.depth] = begin(g, v[0], c);
    s->th[r->ti].depth++;
    s->nf++;
    for (uint32_t i = 1; i < nv; i++) { /* clones of the thread below the new frame, plus their alternative */
        if (s->nt >= G_MAX_THREADS || s->nf + t.depth + 1 > G_MAX_FRAMES) break;
        g_thread *ct = &s->th[s->nt++];
        ct->base = s->nf; ct->depth = t.depth + 1;
        memcpy(&s->fr[ct->base], &s->fr[t.base], t.depth * sizeof *s->fr);
        s->fr[ct->base + t.depth] = begin(g, v[i], c);
        s->nf += ct->depth;
    }
    return 1;
}

/* candidate keys of a declared object from property p on: bit i for property p+i */
static uint64_t key_mask(run *r, const g_node *d, uint32_t p) {
    const grammar *g = r->g;
    if (p >= d->count) return 0;
    const g_prop *P = g->props + d->first;
    uint32_t last = P[p].next_req < d->count ? P[p].next_req : d->count - 1;
    uint64_t m = 0;
    for (uint32_t i = p; i <= last; i++)
        if (fits(r, P[i].node)) m |= 1ull << (i - p); /* the object's frame is counted in depth */
    return m;
}

static int ws(const grammar *g, g_frame *f, int c) {
    if (c == ' ' && f->aux < G_WS_MAX && !g->gemma) { f->aux++; return 1; }
    return 0;
}

static int push_key(run *r) { /* a free object's key: an unconstrained string, its quote consumed */
    g_state *s = r->s;
    g_thread *t = &s->th[r->ti];
    if (t->depth + 1 > G_MAX_STACK || t->base + t->depth >= G_MAX_FRAMES) return 0;
    s->fr[t->base + t->depth] = (g_frame){.node = G_N_STR, .st = S_BODY};
    t->depth++; s->nf++;
    return 1;
}

static int is_digit(int c) { return c >= '0' && c <= '9'; }

/* Gemma string bytes: raw text but NUL and the text of <|"|> (f->m: its bytes just typed) */
static int gemma_text_byte(g_frame *f, int c) {
    static const char q[] = G_QUOTE_TEXT;
    if (!c) return 0;
    if (c >= 0x80) { f->m = 0; return 1; }
    f->m = c == q[f->m] ? f->m + 1 : c == q[0];
    return f->m < sizeof q - 1;
}

/* feed byte c to the thread; 0 when it dies */
static int feed(run *r, int c) {
    const grammar *g = r->g;
    for (;;) {
        g_frame *f = top(r);
        const g_node *d = &g->nodes[f->node];
        switch (f->st) {
        case R_VAL: f->st = R_DONE; return value_start(r, f->node, c);
        case R_DONE: return 0;
        /* ---- declared objects: a = next property (O_KEY: first candidate), b = key bytes so far */
        case O_START: case O_NEXT: case O_AFTER:
            if (f->st == O_NEXT && ws(g, f, c)) return 1;
            if (c == '}' && f->st != O_NEXT) {
                if (f->a < d->count && g->props[d->first + f->a].next_req < d->count) return 0;
                pop(r); return 1;
            }
            if (c == ',' && f->st == O_AFTER) {
                if (!key_mask(r, d, f->a)) return 0;
                f->st = O_NEXT; f->aux = 0; return 1;
            }
            if (f->st != O_AFTER && (c == '"' || g->gemma)) {
                f->m = key_mask(r, d, f->a);
                if (!f->m) return 0;
                f->st = O_KEY; f->b = 0;
                if (g->gemma) continue; /* a bare key: c is its first byte */
                return 1;
            }
            return 0;
        case O_KEY: {
            const g_prop *P = g->props + d->first + f->a;
            uint64_t m = 0;
            for (uint64_t bits = f->m; bits; bits &= bits - 1) {
                int i = __builtin_ctzll(bits);
                if (P[i].key_len > f->b && (unsigned char)g->bytes[P[i].key + f->b] == c) m |= 1ull << i;
            }
            if (!m && c == (g->gemma ? ':' : '"')) { /* the key ends; an escaped quote continues a JSON key (never where another one ends) */
                for (uint64_t bits = f->m; bits; bits &= bits - 1)
                    if (P[__builtin_ctzll(bits)].key_len == f->b) m |= bits & -bits;
                if (!m) return 0;
                f->a += (uint32_t)__builtin_ctzll(m);
                if (g->gemma) { f->st = O_VAL; f->aux = 0; } /* bare keys end at their colon */
                else f->st = O_COLON;
                return 1;
            }
            if (!m) return 0;
            f->m = m; f->b++; return 1;
        }
        case O_COLON: if (c != ':') return 0; f->st = O_VAL; f->aux = 0; return 1;
        case O_VAL: {
            if (ws(g, f, c)) return 1;
            uint32_t child = g->props[d->first + f->a].node;
            f->a++; f->st = O_AFTER;
            return value_start(r, child, c);
        }
        /* ---- objects with any keys */
        case F_START: case F_NEXT: case F_AFTER:
            if (f->st == F_NEXT && ws(g, f, c)) return 1;
            if (c == '}' && f->st != F_NEXT) { pop(r); return 1; }
            if (c == ',' && f->st == F_AFTER) {
                if (depth(r) + 1 > G_MAX_STACK) return 0;
                f->st = F_NEXT; f->aux = 0; return 1;
            }
            if (f->st == F_AFTER) return 0;
            if (!g->gemma) { if (c != '"') return 0; f->st = F_COLON; return push_key(r); }
            if (!G_IDENT(c) || depth(r) + 1 > G_MAX_STACK) return 0;
            f->st = F_KEY; f->a = 1; return 1;
        case F_KEY: /* a bare key (Gemma): a = bytes so far */
            if (G_IDENT(c) && f->a < G_MAX_NAME) { f->a++; return 1; }
            if (c != ':') return 0;
            f->st = F_VAL; f->aux = 0; return 1;
        case F_COLON: if (c != ':') return 0; f->st = F_VAL; f->aux = 0; return 1;
        case F_VAL:
            if (ws(g, f, c)) return 1;
            f->st = F_AFTER;
            return value_start(r, G_N_ANY, c);
        /* ---- arrays: a = items so far */
        case A_START: case A_NEXT: case A_AFTER: {
            if (f->st == A_NEXT && ws(g, f, c)) return 1;
            uint32_t item = f->a < d->count ? g->alts[d->first + f->a] : d->items;
            if (c == ']' && f->st != A_NEXT) {
                if (f->a < d->min) return 0;
                pop(r); return 1;
            }
            if (c == ',' && f->st == A_AFTER) {
                if ((d->max != G_NONE && f->a >= d->max) || item == G_NONE || !fits(r, item)) return 0;
                f->st = A_NEXT; f->aux = 0; return 1;
            }
            if (f->st == A_AFTER || item == G_NONE || (d->max != G_NONE && f->a >= d->max)) return 0;
            f->a++; f->st = A_AFTER;
            return value_start(r, item, c);
        }
        /* ---- strings: a = characters so far, aux = UTF-8 continuation bytes due, b = range of the next one */
        case S_BODY:
            if (f->aux) {
                static const unsigned char lo[5] = {0x80, 0xa0, 0x80, 0x90, 0x80}, hi[5] = {0xbf, 0xbf, 0x9f, 0xbf, 0x8f};
                if (c < lo[f->b] || c > hi[f->b]) return 0;
                f->b = 0; f->aux--; return 1;
            }
            if (c == quote(g)) { if (f->a < d->min) return 0; pop(r); return 1; }
            if ((c < 0x20 && !g->gemma) || (c >= 0x80 && c < 0xc2) || c > 0xf4) return 0;
            if (d->max != G_NONE && f->a >= d->max) return 0;
            if (g->gemma && !gemma_text_byte(f, c)) return 0;
            f->a++;
            if (c == '\\' && !g->gemma) { f->st = S_ESC; return 1; }
            if (c >= 0xc2) {
                f->aux = c < 0xe0 ? 1 : c < 0xf0 ? 2 : 3;
                f->b = c == 0xe0 ? 1 : c == 0xed ? 2 : c == 0xf0 ? 3 : c == 0xf4 ? 4 : 0;
            }
            return 1;
        case S_ESC:
            if (c == 'u') { f->st = S_U; f->b = 0; f->m = 0; return 1; }
            if (!c || !strchr("\"\\/bfnrt", c)) return 0;
            f->st = S_BODY; return 1;
        case S_U: {
            int h = is_digit(c) ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10 : -1;
            if (h < 0) return 0;
            f->m = f->m * 16 + (uint64_t)h;
            if (++f->b == 2 && f->m >= 0xd8 && f->m <= 0xdf) return 0; /* no surrogates: a lone one is not text */
            if (f->b == 4) f->st = S_BODY;
            return 1;
        }
        /* ---- numbers: a = digits of the current part */
        case N_MINUS:
            if (c == '0') { f->st = N_ZERO; return 1; }
            if (is_digit(c)) { f->st = N_INT; f->a = 1; return 1; }
            return 0;
        case N_ZERO: case N_INT: case N_FRAC: case N_EXP:
            if (is_digit(c) && f->st != N_ZERO) {
                if (f->a >= (f->st == N_EXP ? G_EXP_DIGITS : G_NUM_DIGITS)) return 0;
                f->a++; return 1;
            }
            if (d->kind == G_NUM && c == '.' && (f->st == N_ZERO || f->st == N_INT)) { f->st = N_DOT; f->a = 0; return 1; }
            if (d->kind == G_NUM && (c == 'e' || c == 'E') && f->st != N_EXP) { f->st = N_E; f->a = 0; return 1; }
            pop(r); continue; /* the number ended before c */
        case N_DOT: if (!is_digit(c)) return 0; f->st = N_FRAC; f->a = 1; return 1;
        case N_E: case N_ESIGN:
            if (f->st == N_E && (c == '+' || c == '-')) { f->st = N_ESIGN; return 1; }
            if (!is_digit(c)) return 0;
            f->st = N_EXP; f->a = 1; return 1;
        /* ---- literals: lits [a, b) share the first m bytes */
        case L_LIT: {
            uint32_t lo = f->a + lit_full(g, f), hi = f->b;
            lit_narrow(g, &lo, &hi, (uint32_t)f->m, c);
            if (lo == hi) {
                if (!lit_full(g, f)) return 0;
                pop(r); continue;
            }
            f->a = lo; f->b = hi; f->m++;
            if (hi - lo == 1 && lit_full(g, f)) pop(r);
            return 1;
        }
        /* ---- tool calls: aux = calls so far; K_NAME: keys [a, b) share the first m bytes */
        case K_NAME: {
            uint32_t lo = f->a, hi = f->b;
            key_narrow(g, d, &lo, &hi, (uint32_t)f->m, c);
            if (lo < hi) { f->a = lo; f->b = hi; f->m++; return 1; }
            const g_prop *p = &g->props[d->first + f->a];
            if (p->key_len != f->m || c != '{') return 0; /* after the whole name, the arguments object */
            f->st = K_END;
            return value_start(r, p->node, c);
        }
        case K_END:
            if (c != G_BYTE_END) return 0;
            if (f->aux >= d->max) pop(r);
            else f->st = K_MORE;
            return 1;
        case K_MORE:
            if (c != G_BYTE_CALL) { pop(r); continue; } /* the calls ended before c */
            f->aux++; f->st = K_NAME; f->a = 0; f->b = d->count; f->m = 0;
            return 1;
        }
        return 0;
    }
}

/* ---------------------------------------------------------------- state */

void g_state_init(g_state *s, const grammar *g) {
    s->nt = 1; s->nf = 1;
    s->th[0] = (g_thread){0, 1};
    s->fr[0] = (g_frame){.node = (uint16_t)g->root, .st = R_VAL};
}

void g_state_copy(g_state *dst, const g_state *src) {
    dst->nt = src->nt; dst->nf = src->nf;
    memcpy(dst->th, src->th, src->nt * sizeof *src->th);
    memcpy(dst->fr, src->fr, src->nf * sizeof *src->fr);
}

static int same_thread(const g_state *s, uint32_t i, uint32_t j) {
    const g_thread *a = &s->th[i], *b = &s->th[j];
    return a->depth == b->depth && !memcmp(&s->fr[a->base], &s->fr[b->base], a->depth * sizeof *s->fr);
}

int g_step(const grammar *g, const g_state *src, unsigned char c, g_state *dst) {
    dst->nt = 0; dst->nf = 0;
    for (uint32_t i = 0; i < src->nt; i++) {
        const g_thread *t = &src->th[i];
        if (dst->nt >= G_MAX_THREADS || dst->nf + t->depth + 1 > G_MAX_FRAMES) break;
        uint32_t ti = dst->nt++;
        dst->th[ti] = (g_thread){dst->nf, t->depth};
        memcpy(&dst->fr[dst->nf], &src->fr[t->base], t->depth * sizeof *src->fr);
        dst->nf += t->depth;
        run r = {g, dst, ti};
        if (!feed(&r, c)) { dst->nt = (uint16_t)ti; dst->nf = dst->th[ti].base; }
    }
    if (dst->nt > 1) { /* alternatives that have become the same are one */
        g_state tmp;
        uint32_t k = 0;
        tmp.nf = 0;
        for (uint32_t i = 0; i < dst->nt; i++) {
            int dup = 0;
            for (uint32_t j = 0; j < i && !dup; j++) dup = same_thread(dst, i, j);
            if (dup) continue;
            tmp.th[k] = (g_thread){tmp.nf, dst->th[i].depth};
            memcpy(&tmp.fr[tmp.nf], &dst->fr[dst->th[i].base], dst->th[i].depth * sizeof *dst->fr);
            tmp.nf += dst->th[i].depth;
            k++;
        }
        tmp.nt = (uint16_t)k;
        if (k != dst->nt) g_state_copy(dst, &tmp);
    }
    return dst->nt > 0;
}

int g_complete(const grammar *g, const g_state *s) {
    for (uint32_t i = 0; i < s->nt; i++) {
        const g_thread *t = &s->th[i];
        const g_frame *f = &s->fr[t->base + t->depth - 1];
        if (t->depth == 1 && f->st == R_DONE) return 1;
        if (t->depth == 2 && (f->st == N_ZERO || f->st == N_INT || f->st == N_FRAC || f->st == N_EXP)) return 1;
        if (t->depth == 2 && f->st == L_LIT && lit_full(g, f)) return 1;
        if (t->depth == 2 && f->st == K_MORE) return 1;
    }
    return 0;
}

int g_free_text(const grammar *g, const g_state *s, uint32_t *room, uint32_t *quoted) {
    if (s->nt != 1) return -1;
    const g_frame *f = &s->fr[s->th[0].base + s->th[0].depth - 1];
    *quoted = 0;
    if (f->st == F_KEY || ((f->st == F_START || f->st == F_NEXT) && g->gemma && s->th[0].depth + 1 <= G_MAX_STACK)) {
        *room = G_MAX_NAME - (f->st == F_KEY ? f->a : 0);
        return G_TEXT_KEY;
    }
    if (f->st != S_BODY || f->aux) return -1;
    uint32_t mx = g->nodes[f->node].max;
    *room = mx == G_NONE ? G_NONE : mx - f->a;
    if (!g->gemma) return G_TEXT_JSON;
    *quoted = (uint32_t)f->m; /* (JSON keeps escape digits in m) */
    return G_TEXT_GEMMA;
}
