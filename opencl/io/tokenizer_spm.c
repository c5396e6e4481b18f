/* tokenizer_spm.c — one raw text fragment through llama.cpp's SPM ("llama" model) session:
 * optional " " prefix (add_space_prefix, after BOS/start or a special token), ' ' -> U+2581,
 * split into UTF-8 characters (length from the lead byte's high nibble only: a stray
 * continuation byte is a 1-byte symbol, a bad lead byte swallows up to 3 following bytes — even
 * an escaped space), then repeatedly merge the adjacent pair whose concatenation is a
 * vocabulary piece with the highest score (ties: leftmost), via a binary heap with lazy
 * invalidation. Symbols that are not pieces fall back to <0xXX> byte tokens. */
#include "tokenizer_int.h"

#include <string.h>

static void try_bigram(tok_enc *e, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const tok_sym *l = &e->syms[left], *r = &e->syms[right];
    uint32_t size = l->n + r->n;
    int32_t id = tok_lookup(e->t, e->esc + l->off, size); /* l and r are adjacent in esc */
    if (id < 0) return;
    tok_heap_push(e, (tok_bigram){ e->t->score[id], left, right, size, id });
}

static void emit_symbol(tok_enc *e, const tok_sym *s) {
    const tokenizer *t = e->t;
    int32_t id = tok_lookup(t, e->esc + s->off, s->n);
    if (id >= 0) { tok_emit(e, id); return; }
    for (uint32_t j = 0; j < s->n; j++) {
        int32_t b = t->byte_tok[(unsigned char)e->esc[s->off + j]];
        if (b < 0) b = t->unk; /* llama.cpp throws here; a vocab without byte tokens is rare */
        if (b >= 0) tok_emit(e, b);
    }
}

int tok_spm_fragment(tok_enc *e, const char *text, size_t len, int space_prefix) {
    size_t spaces = space_prefix ? 1 : 0;
    for (size_t i = 0; i < len; i++) spaces += text[i] == ' ';
    size_t elen = len + (space_prefix ? 1 : 0) + 2 * spaces;
    if (tok_grow((void **)&e->esc, &e->esc_cap, elen + 1, 1)) return -1;
    size_t o = 0;
    if (space_prefix) { memcpy(e->esc, "\xe2\x96\x81", 3); o = 3; }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') { memcpy(e->esc + o, "\xe2\x96\x81", 3); o += 3; }
        else e->esc[o++] = text[i];
    }
    if (o == 0) return 0;

    int32_t ns = tok_split_chars(e, e->esc, 0, (uint32_t)o, 0);
    if (ns < 0 || tok_merge_all(e, ns, try_bigram)) return -1;
    for (int32_t i = 0; i >= 0; i = e->syms[i].next) emit_symbol(e, &e->syms[i]);
    return 0;
}
