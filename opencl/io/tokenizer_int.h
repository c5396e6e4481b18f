/* tokenizer_int.h — the tokenizer's state and the encoder's work buffers, shared by tokenizer.c
 * (vocabulary, special tokens, encode driver), tokenizer_spm.c, tokenizer_bpe.c and
 * tokenizer_gpt2.c (one text fragment each) and tokenizer_decode.c. Not a public header. */
#ifndef CLGEMMA_TOKENIZER_INT_H
#define CLGEMMA_TOKENIZER_INT_H

#include <stddef.h>
#include <stdint.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tokenizer.h"

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

/* one BPE merge: (left, right) pieces -> rank (lower merges first) and the joined piece's id
 * (-1 when the joined text is no piece: it is then emitted as bytes and merges no further) */
typedef struct bpe_merge {
    uint32_t left, right; /* left == NONE_U32 marks an empty slot */
    uint32_t rank;
    int32_t result;
} bpe_merge;

/* a piece hash slot: the full hash spares most probes a look at the piece itself */
typedef struct tok_slot { uint32_t id, hash; } tok_slot; /* id NONE_U32: empty */

struct tokenizer {
    enum tok_model model;
    uint32_t n;
    char *arena;          /* all piece bytes */
    uint64_t *off;        /* n offsets into arena */
    uint32_t *len;        /* n lengths */
    float *score;         /* n */
    uint16_t *attr;       /* n attribute bits */
    tok_slot *htab;       /* open addressing, piece -> id */
    uint32_t hmask;
    uint32_t max_len;     /* longest piece in bytes */
    int32_t bos, eos, unk, pad;
    int add_bos, add_eos, add_space_prefix, clean_spaces;
    int32_t byte_tok[256];
    uint32_t *special;    /* special token ids, longest first (ties: lower id first) */
    uint32_t n_special;
    uint32_t *group;      /* n_group + 1 starts in special[] of runs of equal length */
    uint32_t n_group;
    trie_node *trie;      /* node 0 is the root */
    uint32_t n_trie;
    bpe_merge *merge;     /* open addressing on (left, right); NULL for SPM */
    uint32_t mmask;
    uint32_t n_merges;    /* distinct pairs */
    pcre2_code *pre_re;   /* TOK_MODEL_GPT2: the pre-tokenizer, compiled once (matching only reads it) */
    pcre2_match_context *pre_mc; /* and its match limits */
};

static inline const char *tok_piece_ptr(const tokenizer *t, uint32_t id) { return t->arena + t->off[id]; }

/* id of the piece a[0..na) b[0..nb) (b may be empty), or -1 */
int32_t tok_lookup2(const tokenizer *t, const char *a, size_t na, const char *b, size_t nb);
static inline int32_t tok_lookup(const tokenizer *t, const char *p, size_t n) { return tok_lookup2(t, p, n, p, 0); }

/* The same lookup in four steps, for load-time loops that keep many in flight: each step
 * prefetches what the next one reads (slot, then the candidate's offset, then its bytes), so
 * the cache misses of independent lookups overlap. */
typedef struct tok_probe { const char *a, *b; uint32_t na, nb, hash, slot, cand; } tok_probe;
void    tok_probe_start(const tokenizer *t, tok_probe *q, const char *a, size_t na, const char *b, size_t nb);
void    tok_probe_next(const tokenizer *t, tok_probe *q);
void    tok_probe_bytes(const tokenizer *t, const tok_probe *q);
int32_t tok_probe_end(const tokenizer *t, const tok_probe *q);

/* length of the UTF-8 character led by c, from its high nibble only (llama.cpp's
 * unicode_len_utf8: a stray continuation byte counts as one) */
static inline size_t tok_utf8_len_lead(unsigned char c) {
    static const unsigned char lut[16] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4 };
    return lut[c >> 4];
}

/* One code point at p[0..n) as llama.cpp's unicode_cpt_from_utf8 reads it (overlong forms and
 * surrogates pass, past U+10FFFF does not); its byte length, 0 when p[0] starts no sequence. */
size_t tok_cpt_decode(const char *p, size_t n, uint32_t *cp);
/* UTF-8 of cp (at most 4 bytes at o); returns the length */
size_t tok_cpt_encode(uint32_t cp, char *o);

/* GPT-2's bytes_to_unicode: the printable Latin-1 bytes stand for themselves, the other 68 (0x00-0x20,
 * 0x7f-0xa0, 0xad) become U+0100.. in byte order, so every byte is a visible character */
static inline uint32_t tok_gpt2_byte_cp(unsigned char b) {
    if (b <= 0x20) return 0x100u + b;
    if (b >= 0x7f && b <= 0xa0) return 0x100u + 33 + (b - 0x7fu);
    if (b == 0xad) return 0x100u + 67;
    return b;
}
/* its inverse: the byte code point cp stands for, or -1 */
static inline int tok_gpt2_cp_byte(uint32_t cp) {
    if (cp < 0x100) return cp <= 0x20 || (cp >= 0x7f && cp <= 0xa0) || cp == 0xad ? -1 : (int)cp;
    if (cp < 0x100 + 33) return (int)(cp - 0x100);
    if (cp < 0x100 + 67) return (int)(cp - 0x100 - 33 + 0x7f);
    return cp == 0x100 + 67 ? 0xad : -1;
}

/* ------------------------------------------------------------ encoder work state */

typedef struct tok_sym { int32_t prev, next; uint32_t off, n; int32_t id; } tok_sym;
/* a candidate merge of adjacent symbols; higher score first, then lower left index (SPM: the
 * joined piece's score; BPE: minus the merge rank, exact in a double) */
typedef struct tok_bigram { double score; int32_t left, right; uint32_t size; int32_t id; } tok_bigram;

typedef struct tok_enc {
    const tokenizer *t;
    int32_t *ids;
    int cap;
    int64_t count;
    /* work buffers, grown as needed and freed at the end of the call */
    char *esc; size_t esc_cap;
    char *norm; size_t norm_cap;
    char *word; size_t word_cap;
    tok_sym *syms; size_t syms_cap;
    tok_bigram *heap; size_t heap_cap; size_t heap_n;
} tok_enc;

void tok_emit(tok_enc *e, int32_t id);
int  tok_grow(void **p, size_t *cap, size_t need, size_t elem);
void tok_heap_push(tok_enc *e, tok_bigram b);
tok_bigram tok_heap_pop(tok_enc *e);

/* Symbols for the characters of buf[off, off + n) (lengths by lead byte, the last one cut at
 * the end), each with its piece id when with_ids, else -1. Returns the count, -1 on failure. */
int32_t tok_split_chars(tok_enc *e, const char *buf, uint32_t off, uint32_t n, int with_ids);
/* Joins adjacent symbols 0..ns-1, best candidate first, until none is left; try_pair pushes
 * the candidate (if any) for two adjacent live symbols. -1 on allocation failure. */
int tok_merge_all(tok_enc *e, int32_t ns, void (*try_pair)(tok_enc *, int32_t, int32_t));

/* One raw (non-special) fragment each; -1 on allocation failure (gpt2: or a failed match). */
int tok_spm_fragment(tok_enc *e, const char *text, size_t len, int space_prefix);
int tok_bpe_fragment(tok_enc *e, const char *text, size_t len);
int tok_gpt2_fragment(tok_enc *e, const char *text, size_t len);
/* steps 1 and 2 of tok_gpt2_fragment: the words of text, in order, each as text[off, off + n) of the
 * round-tripped text (e->norm); stops at the first non-zero return. -1 on failure. */
typedef int tok_word_fn(tok_enc *e, const char *text, size_t off, size_t n);
int tok_gpt2_words(tok_enc *e, const char *text, size_t len, tok_word_fn *word);

/* Builds t->merge from v's merge lines (pieces must already be in t). -1 with a message. */
int tok_bpe_build(tokenizer *t, const tokenizer_vocab *v, char *err, size_t errlen);
/* Compiles the pre-tokenizer of a gpt2 model into t->pre_re. -1 with a message. */
int tok_gpt2_build(tokenizer *t, enum tok_pre pre, char *err, size_t errlen);

/* llama.cpp's code-point round trip of text into e->norm (see tokenizer_bpe.c), with raw ' '
 * bytes escaped to U+2581 when escape_spaces. Returns the length, -1 on allocation failure. */
int64_t tok_cpt_roundtrip(tok_enc *e, const char *text, size_t len, int escape_spaces);
/* Ranked merges over the characters of buf[off, off + n), then the pieces' ids out (a symbol
 * that is no piece as its bytes' byte_tok, dropping bytes without one). -1 on failure. */
int tok_bpe_word(tok_enc *e, const char *buf, uint32_t off, uint32_t n);

#endif
