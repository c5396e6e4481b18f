/* kv.c — see kv.h */
#include "kv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int kv_create(kv_cache *kv, cl_runtime *rt, uint32_t n_layer, const uint32_t *kv_dims, uint32_t n_seq,
              uint32_t n_ctx, uint32_t n_blocks, char *err, size_t errlen)
{
    memset(kv, 0, sizeof *kv);
    kv->n_layer = n_layer;
    kv->n_seq = n_seq;
    kv->max_blocks = (n_ctx + KV_BLOCK - 1) / KV_BLOCK;
    kv->n_blocks = n_blocks;
    kv->k = calloc(n_layer, sizeof *kv->k);
    kv->v = calloc(n_layer, sizeof *kv->v);
    kv->table = calloc((size_t)n_seq * kv->max_blocks, sizeof *kv->table);
    kv->seq_blocks = calloc(n_seq, sizeof *kv->seq_blocks);
    kv->seq_len = malloc(n_seq * sizeof *kv->seq_len);
    kv->free_list = malloc(n_blocks * sizeof *kv->free_list);
    if (!kv->k || !kv->v || !kv->table || !kv->seq_blocks || !kv->seq_len || !kv->free_list) {
        snprintf(err, errlen, "out of host memory for the KV cache");
        kv_destroy(kv);
        return -1;
    }
    for (uint32_t s = 0; s < n_seq; s++) kv->seq_len[s] = -1;
    for (uint32_t b = 0; b < n_blocks; b++) kv->free_list[b] = (int32_t)(n_blocks - 1 - b);
    kv->n_free = n_blocks;
    for (uint32_t l = 0; l < n_layer; l++) {
        if (kv_dims[l] == 0) continue; /* layers that reuse another layer's KV own none */
        size_t bytes = (size_t)n_blocks * KV_BLOCK * kv_dims[l] * 2;
        kv->k[l] = rt_alloc(rt, bytes, NULL, err, errlen);
        kv->v[l] = kv->k[l] ? rt_alloc(rt, bytes, NULL, err, errlen) : NULL;
        if (!kv->v[l]) { kv_destroy(kv); return -1; }
        kv->bytes += 2 * bytes;
    }
    kv->block_table = rt_alloc(rt, (size_t)n_seq * kv->max_blocks * sizeof(int32_t), kv->table, err, errlen);
    if (!kv->block_table) { kv_destroy(kv); return -1; }
    return 0;
}

void kv_destroy(kv_cache *kv)
{
    for (uint32_t l = 0; l < kv->n_layer; l++) {
        if (kv->k && kv->k[l]) clReleaseMemObject(kv->k[l]);
        if (kv->v && kv->v[l]) clReleaseMemObject(kv->v[l]);
    }
    if (kv->block_table) clReleaseMemObject(kv->block_table);
    free(kv->k); free(kv->v); free(kv->table); free(kv->seq_blocks); free(kv->seq_len); free(kv->free_list);
    memset(kv, 0, sizeof *kv);
}

int kv_seq_new(kv_cache *kv)
{
    for (uint32_t s = 0; s < kv->n_seq; s++)
        if (kv->seq_len[s] < 0) { kv->seq_len[s] = 0; kv->seq_blocks[s] = 0; return (int)s; }
    return -1;
}

void kv_trim(kv_cache *kv, int seq, uint32_t len)
{
    uint32_t keep = (len + KV_BLOCK - 1) / KV_BLOCK;
    int32_t *row = kv->table + (size_t)seq * kv->max_blocks;
    while (kv->seq_blocks[seq] > keep) {
        kv->free_list[kv->n_free++] = row[--kv->seq_blocks[seq]];
        row[kv->seq_blocks[seq]] = 0;
    }
}

void kv_seq_free(kv_cache *kv, int seq)
{
    if (seq < 0 || (uint32_t)seq >= kv->n_seq || kv->seq_len[seq] < 0) return;
    kv_trim(kv, seq, 0);
    kv->seq_len[seq] = -1;
}

int kv_reserve(kv_cache *kv, int seq, uint32_t new_len)
{
    uint32_t need = (new_len + KV_BLOCK - 1) / KV_BLOCK;
    if (need > kv->max_blocks) return -1;
    int32_t *row = kv->table + (size_t)seq * kv->max_blocks;
    while (kv->seq_blocks[seq] < need) {
        if (kv->n_free == 0) return -1;
        row[kv->seq_blocks[seq]++] = kv->free_list[--kv->n_free];
        kv->dirty = 1;
    }
    return 0;
}

int kv_sync(kv_cache *kv, cl_runtime *rt, char *err, size_t errlen)
{
    if (!kv->dirty) return 0;
    /* blocking: the host table may change before a non-blocking copy would run */
    cl_int e = clEnqueueWriteBuffer(rt->q, kv->block_table, CL_TRUE, 0,
                                    (size_t)kv->n_seq * kv->max_blocks * sizeof(int32_t), kv->table, 0, NULL, NULL);
    if (e != CL_SUCCESS) { snprintf(err, errlen, "KV block table upload: %s", rt_errstr(e)); return -1; }
    kv->dirty = 0;
    return 0;
}

kv_view kv_layer_k(const kv_cache *kv, uint32_t l)
{
    return (kv_view){ kv->k[l], kv->block_table, kv->max_blocks, KV_BLOCK };
}

kv_view kv_layer_v(const kv_cache *kv, uint32_t l)
{
    return (kv_view){ kv->v[l], kv->block_table, kv->max_blocks, KV_BLOCK };
}
