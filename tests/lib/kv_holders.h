/* kv_holders.h — the holders of each block of a KV pool as the block tables say (test_kv_ring,
 * test_kv_prefix): per block, the live sequences whose table holds it, a ring's own entries once. */
#ifndef CLGEMMA_KV_HOLDERS_H
#define CLGEMMA_KV_HOLDERS_H
#include <stdlib.h>
#include "kv.h"

/* a calloc'd count per block of pool pi; *bad gets the ring entries not aliasing their ring entry */
static inline uint32_t *kv_holders(const kv_cache *kv, int pi, uint32_t *bad)
{
    const kv_pool *p = &kv->pool[pi];
    uint32_t *cnt = calloc(p->n_blocks ? p->n_blocks : 1, sizeof *cnt);
    *bad = 0;
    for (uint32_t s = 0; s < kv->n_seq; s++) {
        if (kv->seq_len[s] < 0) continue;
        const int32_t *row = p->table + (size_t)s * kv->max_blocks;
        for (uint32_t b = 0; b < p->seq_blocks[s]; b++) {
            if (p->ring && b >= p->ring) { *bad += row[b] != row[b % p->ring]; continue; }
            cnt[row[b]]++;
        }
    }
    return cnt;
}

#endif
