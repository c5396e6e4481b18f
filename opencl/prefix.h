/* prefix.h — the prefix cache's index: an entry names the contents of one whole KV block (the keys
 * and values of its KV_BLOCK positions, which depend on every token before them) by the hash chain
 * of the tokens up to the block's end, seeded with the model, and records which block of each KV
 * pool holds them. Host only, no OpenCL: kv.c owns the blocks, their counts and their eviction.
 *
 * A lookup gives the entry whose parent (the chain through the block before) and own tokens equal
 * the caller's, so a wrong hit needs two different prefixes with one 64-bit chain hash. Entries are
 * chained per hash bucket; the table holds at most cap of them (kv.c: one per block of its pools,
 * as an entry without a block is removed). */
#ifndef CLGEMMA_PREFIX_H
#define CLGEMMA_PREFIX_H

#include <stddef.h>
#include <stdint.h>

#define PREFIX_POOLS 2 /* kv.h's KV_POOLS: full-attention blocks, sliding-window ring blocks */

typedef struct prefix_entry {
    uint64_t hash, parent;       /* the chain through this block; through the block before (the seed first) */
    int32_t blk[PREFIX_POOLS];   /* per pool the block holding the contents (-1: none) */
    int32_t snap;                /* the recurrent state's snapshot at the block's end (kv.c, state.h; -1: none) */
    int32_t next;                /* the next entry of its bucket, or of the free list */
} prefix_entry;

typedef struct prefix_table {
    uint32_t block, cap, n;      /* tokens per entry; entries at most; in use */
    prefix_entry *e;
    int32_t *tokens;             /* [cap][block]: each entry's own tokens */
    int32_t *bucket;             /* [mask + 1]: first entry of each bucket, -1 none */
    uint64_t mask;
    int32_t free_head;
} prefix_table;

/* cap 0 makes an empty table that holds nothing (the cache off). 0, or -1 out of memory. */
int  prefix_create(prefix_table *t, uint32_t cap, uint32_t block);
void prefix_destroy(prefix_table *t);
/* the chain one block further: parent's hash extended by the block's n tokens */
uint64_t prefix_hash(uint64_t parent, const int32_t *tokens, uint32_t n);
/* a chain's seed: the hash of n bytes that name the model */
uint64_t prefix_seed(const void *bytes, size_t n);
/* the entry continuing parent with these block tokens, or -1 */
int32_t prefix_find(const prefix_table *t, uint64_t parent, const int32_t *tokens);
/* a new entry (no block yet) continuing parent with these tokens; -1 when the table is full */
int32_t prefix_add(prefix_table *t, uint64_t parent, const int32_t *tokens);
void prefix_remove(prefix_table *t, int32_t i);

#endif
