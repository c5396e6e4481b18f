/* kv.h — paged KV cache: per layer a pool of fixed-size blocks on the device (half precision),
 * and per sequence a table of the blocks holding its positions. Blocks are handed out on demand
 * and returned when a sequence is freed. */
#ifndef CLGEMMA_KV_H
#define CLGEMMA_KV_H

#include "runtime.h"
#include "ops.h"

#define KV_BLOCK 32

typedef struct kv_cache {
    uint32_t n_layer, n_seq, max_blocks, n_blocks;  /* max_blocks per sequence; n_blocks in the pool */
    cl_mem *k, *v;            /* per layer: [n_blocks][n_kv][KV_BLOCK][head_dim] half */
    cl_mem block_table;       /* [n_seq][max_blocks] int */
    int32_t *table;           /* host copy */
    uint32_t *seq_blocks;     /* blocks held per sequence */
    int32_t *seq_len;         /* tokens per sequence; -1 = slot free */
    int32_t *free_list;
    uint32_t n_free;
    int dirty;
    uint64_t bytes;
} kv_cache;

int  kv_create(kv_cache *kv, cl_runtime *rt, uint32_t n_layer, const uint32_t *kv_dims /* n_kv*head_dim per layer */,
               uint32_t n_seq, uint32_t n_ctx, uint32_t n_blocks, char *err, size_t errlen);
void kv_destroy(kv_cache *kv);
int  kv_seq_new(kv_cache *kv);
void kv_seq_free(kv_cache *kv, int seq);
/* makes room for positions [0, new_len) of seq; returns -1 when the pool is exhausted */
int  kv_reserve(kv_cache *kv, int seq, uint32_t new_len);
/* gives back blocks beyond len (undo of a failed reserve) */
void kv_trim(kv_cache *kv, int seq, uint32_t len);
/* uploads the block table if it changed */
int  kv_sync(kv_cache *kv, cl_runtime *rt, char *err, size_t errlen);
kv_view kv_layer_k(const kv_cache *kv, uint32_t l);
kv_view kv_layer_v(const kv_cache *kv, uint32_t l);

#endif
