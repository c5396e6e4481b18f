/* vocab_trie.h — the token byte strings of one tokenizer, classified and in tries, for the mask
 * walk (constrain.c). Internal to opencl/constrain/. */
#ifndef CLGEMMA_VOCAB_TRIE_H
#define CLGEMMA_VOCAB_TRIE_H

#include <stdint.h>

#include "constrain.h"
#include "grammar.h"

#define VT_MAX_LEN 255   /* longer tokens are never allowed in constrained output */
#define VT_PLAIN_R 16    /* plain-token masks kept for string rooms 0..VT_PLAIN_R characters */

/* a trie in preorder: a node's subtree is [i, end); its parent is the nearest earlier node one level up */
typedef struct vt_node {
    uint32_t end;
    int32_t tok;        /* first token whose bytes end here, or -1 (more in vt_trie.next_same) */
    uint8_t byte, depth;
} vt_node;

typedef struct vt_trie { vt_node *nodes; uint32_t n; } vt_trie;

/* one kind of free text's plain tokens (enum g_text): taken wholesale, whatever came before */
typedef struct vt_plain {
    uint8_t *charlen;          /* code points; 0: not plain */
    uint32_t *le;              /* (VT_PLAIN_R + 1) masks: plain tokens of at most r characters */
    int32_t *longer; uint32_t n_longer; /* plain tokens longer than VT_PLAIN_R characters */
    vt_trie nonplain;          /* the usable tokens that are not plain */
} vt_plain;


struct constraint_vocab {
    const tokenizer *tok;
    uint32_t n_vocab, words;   /* words: uint32 words of a mask */
    char *bytes;               /* every token's bytes */
    uint32_t *off; uint8_t *len;
    int32_t *next_same;        /* tokens with the same bytes, chained */
    int32_t *eog; uint32_t n_eog;
    uint32_t max_len;
    vt_trie all;               /* every usable token */
    vt_plain plain[G_TEXT_KINDS];
    int n_calls;               /* Gemma 4's tool-call control tokens found (3: calls can be constrained) */
};

#endif
