/* constrain.c — one sequence's constraint: the compiled grammar, the matcher state, and the mask
 * walk over the vocabulary trie (depth-first, one matcher state per trie depth, a subtree pruned
 * as soon as its prefix is rejected). In free text (a string's body, a bare key), plain tokens of
 * that kind are allowed from precomputed masks and only its non-plain trie is walked. */
#include "constrain.h"

#include <stdlib.h>
#include <string.h>

#include "errf.h"
#include "grammar.h"
#include "vocab_trie.h"

struct constraint {
    const constraint_vocab *v;
    grammar g;
    g_state cur;
    g_state *walk;   /* max_len + 1 states: one per trie depth */
    int ended;       /* an end-of-generation token was accepted */
    int32_t think_open, think_close; /* constraint_allow_thought's tokens, -1: none */
    int phase;       /* PH_FIRST: a thought may open; PH_THOUGHT: inside it; PH_GRAMMAR */
};

enum { PH_FIRST, PH_THOUGHT, PH_GRAMMAR };

/* c's grammar compiled: the rest of it */
static int start(constraint **out, constraint *c, char *err, size_t errlen) {
    c->walk = malloc(((size_t)c->v->max_len + 2) * sizeof *c->walk); /* one per trie depth, two at least */
    if (!c->walk) { constraint_destroy(c); return errf(err, errlen, "out of memory"); }
    g_state_init(&c->cur, &c->g);
    c->think_open = c->think_close = -1;
    c->phase = PH_GRAMMAR;
    *out = c;
    return 0;
}

void constraint_allow_thought(constraint *c, int32_t open, int32_t close) {
    uint32_t n = c->v->n_vocab;
    if (open < 0 || close < 0 || (uint32_t)open >= n || (uint32_t)close >= n) return;
    c->think_open = open;
    c->think_close = close;
    c->phase = PH_FIRST;
}

static int is_eog(const constraint_vocab *v, int32_t token);

/* inside a thought: every token but the end of generation (the constrained part must still come) */
static int thought_mask(const constraint_vocab *v, uint32_t *bits) {
    memset(bits, 0xff, v->words * sizeof *bits);
    if (v->n_vocab % 32) bits[v->words - 1] = (1u << (v->n_vocab % 32)) - 1;
    for (uint32_t i = 0; i < v->n_eog; i++) bits[v->eog[i] / 32] &= ~(1u << (v->eog[i] % 32));
    return (int)(v->n_vocab - v->n_eog);
}

int constraint_create_json(constraint **out, const constraint_vocab *v, const char *schema_json, size_t len,
                           char *err, size_t errlen) {
    *out = NULL;
    constraint *c = calloc(1, sizeof *c);
    if (!c) return errf(err, errlen, "out of memory");
    c->v = v;
    if (grammar_compile(&c->g, schema_json, len, "response_format.json_schema.schema: ", err, errlen)) { free(c); return -1; }
    return start(out, c, err, errlen);
}

int constraint_create_tool_calls(constraint **out, const constraint_vocab *v, const char *tools_json, size_t len,
                                 const char *only, int parallel, char *err, size_t errlen) {
    *out = NULL;
    if (v->n_calls < 3)
        return errf(err, errlen, "tool_choice cannot be enforced: the model's vocabulary lacks Gemma 4's tool-call tokens");
    constraint *c = calloc(1, sizeof *c);
    if (!c) return errf(err, errlen, "out of memory");
    c->v = v;
    if (grammar_compile_tools(&c->g, tools_json, len, only, parallel, err, errlen)) { free(c); return -1; }
    return start(out, c, err, errlen);
}

void constraint_destroy(constraint *c) {
    if (!c) return;
    grammar_free(&c->g);
    free(c->walk);
    free(c);
}

static void set_token(const constraint_vocab *v, uint32_t *bits, int32_t t) {
    for (; t >= 0; t = v->next_same[t]) bits[t / 32] |= 1u << (t % 32);
}

/* every token of trie t whose bytes the state accepts */
static void walk(constraint *c, const vt_trie *t, uint32_t *bits) {
    const grammar *g = &c->g;
    g_state_copy(&c->walk[0], &c->cur);
    for (uint32_t i = 0; i < t->n;) {
        const vt_node *nd = &t->nodes[i];
        if (!g_step(g, &c->walk[nd->depth - 1], nd->byte, &c->walk[nd->depth])) { i = nd->end; continue; }
        if (nd->tok >= 0) set_token(c->v, bits, nd->tok);
        i++;
    }
}

/* clears the tokens whose bytes begin with s: after the first bytes of G_QUOTE_TEXT they would complete it */
static void drop_prefixed(const constraint_vocab *v, const char *s, uint32_t n, uint32_t *bits) {
    const vt_trie *t = &v->all;
    uint32_t i = 0, end = t->n;
    for (uint32_t d = 0; d < n; d++) {
        while (i < end && t->nodes[i].byte != (uint8_t)s[d]) i = t->nodes[i].end; /* the siblings at depth d + 1 */
        if (i >= end) return;
        end = t->nodes[i].end;
        if (d + 1 < n) i++;
    }
    for (; i < end; i++)
        for (int32_t k = t->nodes[i].tok; k >= 0; k = v->next_same[k]) bits[k / 32] &= ~(1u << (k % 32));
}

/* set bits of a mask: SWAR on 64-bit pairs, since builds without -mpopcnt make __builtin_popcount a
 * libgcc call per word (half a mask's time on a 262k vocabulary) */
static int count_bits(const uint32_t *bits, uint32_t words) {
    uint64_t total = 0;
    for (uint32_t w = 0; w < words; w += 2) {
        uint64_t x = bits[w] | (w + 1 < words ? (uint64_t)bits[w + 1] << 32 : 0);
        x = x - ((x >> 1) & 0x5555555555555555ull);
        x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
        x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
        total += (x * 0x0101010101010101ull) >> 56;
    }
    return (int)total;
}

int constraint_mask(constraint *c, uint32_t *bits) {
    const constraint_vocab *v = c->v;
    if (c->phase == PH_THOUGHT) return thought_mask(v, bits);
    memset(bits, 0, v->words * sizeof *bits);
    if (!c->ended) {
        uint32_t room, quoted;
        int kind = g_free_text(&c->g, &c->cur, &room, &quoted);
        if (kind >= 0) {
            const vt_plain *p = &v->plain[kind];
            uint32_t r = room < VT_PLAIN_R ? room : VT_PLAIN_R;
            memcpy(bits, p->le + (size_t)r * v->words, v->words * sizeof *bits);
            for (uint32_t i = 0; i < p->n_longer && room > VT_PLAIN_R; i++) {
                int32_t t = p->longer[i];
                if (p->charlen[t] <= room) bits[t / 32] |= 1u << (t % 32);
            }
            if (quoted) drop_prefixed(v, G_QUOTE_TEXT + quoted, (uint32_t)strlen(G_QUOTE_TEXT) - quoted, bits);
            walk(c, &p->nonplain, bits);
        } else {
            walk(c, &v->all, bits);
        }
        if (g_complete(&c->g, &c->cur))
            for (uint32_t i = 0; i < v->n_eog; i++) bits[v->eog[i] / 32] |= 1u << (v->eog[i] % 32);
    }
    if (c->phase == PH_FIRST) bits[c->think_open / 32] |= 1u << (c->think_open % 32);
    int n = count_bits(bits, v->words);
    return n ? n : -1;
}

/* the state after bytes (in the walk scratch), or NULL when they are rejected */
static const g_state *advance(constraint *c, const char *bytes, size_t n) {
    g_state *a = &c->walk[0], *b = &c->walk[1];
    g_state_copy(a, &c->cur);
    for (size_t i = 0; i < n; i++) {
        if (!g_step(&c->g, a, (unsigned char)bytes[i], b)) return NULL;
        g_state *t = a; a = b; b = t;
    }
    return a;
}

int constraint_accept_bytes(constraint *c, const char *bytes, size_t n) {
    if (c->ended) return n ? -1 : 0;
    const g_state *s = advance(c, bytes, n);
    if (!s) return -1;
    g_state_copy(&c->cur, s);
    return 0;
}

static int is_eog(const constraint_vocab *v, int32_t token) {
    for (uint32_t i = 0; i < v->n_eog; i++)
        if (v->eog[i] == token) return 1;
    return 0;
}

int constraint_allows(constraint *c, int32_t token) {
    const constraint_vocab *v = c->v;
    if (c->ended || token < 0 || (uint32_t)token >= v->n_vocab) return 0;
    if (c->phase == PH_THOUGHT) return !is_eog(v, token);
    if (c->phase == PH_FIRST && token == c->think_open) return 1;
    if (is_eog(v, token)) return g_complete(&c->g, &c->cur);
    return v->len[token] && advance(c, v->bytes + v->off[token], v->len[token]) != NULL;
}

int constraint_accept(constraint *c, int32_t token) {
    const constraint_vocab *v = c->v;
    if (c->ended || token < 0 || (uint32_t)token >= v->n_vocab) return -1;
    if (c->phase == PH_THOUGHT) {
        if (is_eog(v, token)) return -1;
        if (token == c->think_close) c->phase = PH_GRAMMAR;
        return 0;
    }
    if (c->phase == PH_FIRST && token == c->think_open) { c->phase = PH_THOUGHT; return 0; }
    c->phase = PH_GRAMMAR;
    if (is_eog(v, token)) {
        if (!g_complete(&c->g, &c->cur)) return -1;
        c->ended = 1;
        return 0;
    }
    if (!v->len[token]) return -1; /* control, empty or too long: never allowed */
    return constraint_accept_bytes(c, v->bytes + v->off[token], v->len[token]);
}

int constraint_complete(const constraint *c) {
    return c->ended || (c->phase != PH_THOUGHT && g_complete(&c->g, &c->cur));
}
