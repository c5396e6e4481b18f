/* vocab_trie.h — the token byte strings of one tokenizer, classified and in tries, for the mask
 * walk (constrain.c). Internal to opencl/constrain/. */
#ifndef CLGEMMA_VOCAB_TRIE_H
#define CLGEMMA_VOCAB_TRIE_H

#include <stdint.h>

#include "constrain.h"

#define VT_MAX_LEN 255   /* longer tokens are never allowed in constrained output */
#define VT_PLAIN_R 16    /* plain-token masks kept for string rooms 0..VT_PLAIN_R characters */

/* a trie in preorder: a node's subtree is [i, end); its parent is the nearest earlier node one level up */
typedef struct vt_node {
    uint32_t end;
    int32_t tok;        /* first token whose bytes end here, or -1 (more in vt_trie.next_same) */
    uint8_t byte, depth;
} vt_node;

typedef struct vt_trie { vt_node *nodes; uint32_t n; } vt_trie;

struct constraint_vocab {
    const tokenizer *tok;
    uint32_t n_vocab, words;   /* words: uint32 words of a mask */
    char *bytes;               /* every token's bytes */
    uint32_t *off; uint8_t *len;
    uint8_t *charlen;          /* plain tokens: code points; 0: not plain */
    int32_t *next_same;        /* tokens with the same bytes, chained */
    int32_t *eog; uint32_t n_eog;
    uint32_t max_len;
    vt_trie all, nonplain;     /* every usable token / those that are not plain string text */
    uint32_t *plain_le;        /* (VT_PLAIN_R + 1) masks: plain tokens of at most r characters */
    int32_t *long_plain; uint32_t n_long_plain; /* plain tokens longer than VT_PLAIN_R characters */
};

#endif
