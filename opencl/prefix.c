/* prefix.c — see prefix.h */
#include "prefix.h"

#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t x) /* splitmix64's finalizer: every input bit moves every output bit */
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

uint64_t prefix_hash(uint64_t parent, const int32_t *tokens, uint32_t n)
{
    uint64_t h = mix(parent ^ 0x9e3779b97f4a7c15ull);
    for (uint32_t i = 0; i < n; i++) h = mix(h + (uint32_t)tokens[i]);
    return h;
}

uint64_t prefix_seed(const void *bytes, size_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)bytes)[i]) * 1099511628211ull;
    return mix(h);
}

int prefix_create(prefix_table *t, uint32_t cap, uint32_t block)
{
    memset(t, 0, sizeof *t);
    t->block = block;
    t->free_head = -1;
    if (!cap) return 0;
    uint64_t nb = 1;
    while (nb < cap) nb <<= 1; /* about one entry per bucket when full */
    t->e = malloc((size_t)cap * sizeof *t->e);
    t->tokens = malloc((size_t)cap * block * sizeof *t->tokens);
    t->bucket = malloc(nb * sizeof *t->bucket);
    if (!t->e || !t->tokens || !t->bucket) { prefix_destroy(t); return -1; }
    t->cap = cap;
    t->mask = nb - 1;
    for (uint64_t b = 0; b < nb; b++) t->bucket[b] = -1;
    for (uint32_t i = 0; i < cap; i++) t->e[i].next = i + 1 < cap ? (int32_t)(i + 1) : -1;
    t->free_head = 0;
    return 0;
}

void prefix_destroy(prefix_table *t)
{
    free(t->e); free(t->tokens); free(t->bucket);
    memset(t, 0, sizeof *t);
    t->free_head = -1;
}

int32_t prefix_find(const prefix_table *t, uint64_t parent, const int32_t *tokens)
{
    if (!t->cap) return -1;
    uint64_t h = prefix_hash(parent, tokens, t->block);
    for (int32_t i = t->bucket[h & t->mask]; i >= 0; i = t->e[i].next)
        if (t->e[i].hash == h && t->e[i].parent == parent &&
            !memcmp(t->tokens + (size_t)i * t->block, tokens, t->block * sizeof *tokens))
            return i;
    return -1;
}

int32_t prefix_add(prefix_table *t, uint64_t parent, const int32_t *tokens)
{
    if (t->free_head < 0) return -1;
    int32_t i = t->free_head;
    prefix_entry *e = &t->e[i];
    t->free_head = e->next;
    e->hash = prefix_hash(parent, tokens, t->block);
    e->parent = parent;
    for (int p = 0; p < PREFIX_POOLS; p++) e->blk[p] = -1;
    e->snap = -1;
    memcpy(t->tokens + (size_t)i * t->block, tokens, t->block * sizeof *tokens);
    e->next = t->bucket[e->hash & t->mask];
    t->bucket[e->hash & t->mask] = i;
    t->n++;
    return i;
}

void prefix_remove(prefix_table *t, int32_t i)
{
    int32_t *at = &t->bucket[t->e[i].hash & t->mask];
    while (*at != i) at = &t->e[*at].next;
    *at = t->e[i].next;
    t->e[i].next = t->free_head;
    t->free_head = i;
    t->n--;
}
