/* kv.c — see kv.h */
#include "kv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint32_t kv_ring_blocks(uint32_t window, uint32_t max_chunk, uint32_t max_blocks)
{
    /* a chunk's first query needs keys from window - 1 before it, its last key lands max_chunk - 1
     * after it: n positions at once. Position p sits in slot p mod (ring x KV_BLOCK) of the ring's
     * blocks, so n consecutive positions never share a slot when the ring holds n of them */
    uint64_t n = (uint64_t)window + (max_chunk ? max_chunk : 1) - 1;
    uint64_t r = (n + KV_BLOCK - 1) / KV_BLOCK;
    return r < max_blocks ? (uint32_t)r : max_blocks;
}

/* the pool of layer l: a window whose ring would span the whole context is a full layer */
static int layer_pool(const kv_config *c, uint32_t l, uint32_t max_blocks)
{
    uint32_t w = c->window ? c->window[l] : 0;
    return w && kv_ring_blocks(w, c->max_chunk, max_blocks) < max_blocks ? KV_RING : KV_FULL;
}

kv_sizes kv_plan(const kv_config *c)
{
    kv_sizes s = { 0 };
    uint32_t max_blocks = (c->n_ctx + KV_BLOCK - 1) / KV_BLOCK;
    uint64_t ring_per_tok = 0;
    for (uint32_t l = 0; l < c->n_layer; l++) {
        uint64_t b = 2ull * KV_ELEM_BYTES * c->dims[l]; /* K and V */
        if (!c->dims[l]) continue; /* reads another layer's cache */
        if (layer_pool(c, l, max_blocks) == KV_FULL) {
            s.full_per_token += b;
            s.full_layers++;
            if (c->dims[l] > s.full_dim_max) s.full_dim_max = c->dims[l];
        } else {
            uint32_t r = kv_ring_blocks(c->window[l], c->max_chunk, max_blocks);
            if (r > s.ring_blocks) s.ring_blocks = r; /* one ring for every window: the largest */
            if (c->dims[l] > s.ring_dim_max) s.ring_dim_max = c->dims[l];
            ring_per_tok += b;
            s.ring_layers++;
            if (c->window[l] > s.ring_window) s.ring_window = c->window[l];
        }
    }
    s.ring_per_seq = ring_per_tok * s.ring_blocks * KV_BLOCK;
    return s;
}

void kv_need(const kv_sizes *s, uint32_t n_prompt, uint32_t n_total, uint32_t n, uint32_t out[KV_POOLS])
{
    uint64_t shared = n_prompt / KV_BLOCK, all = ((uint64_t)n_total + KV_BLOCK - 1) / KV_BLOCK;
    uint64_t own = all > shared ? all - shared : 0, r = s->ring_blocks, full = shared + n * own;
    /* a ring: the prompt's whole blocks it still holds, plus each sequence's copies of the slots it writes */
    uint64_t ring = n <= 1 ? (all < r ? all : r) : (shared < r ? shared : r) + n * (own < r ? own : r);
    if (ring > (uint64_t)n * r) ring = (uint64_t)n * r; /* no sequence holds more than its ring */
    out[KV_FULL] = !s->full_layers ? 0 : full > UINT32_MAX ? UINT32_MAX : (uint32_t)full;
    out[KV_RING] = ring > UINT32_MAX ? UINT32_MAX : (uint32_t)ring;
}

static int pool_create(kv_pool *p, cl_runtime *rt, uint32_t n_seq, uint32_t max_blocks, uint32_t n_blocks,
                       uint32_t ring, char *err, size_t errlen)
{
    p->n_blocks = n_blocks;
    p->ring = ring;
    p->table = calloc((size_t)n_seq * max_blocks, sizeof *p->table);
    p->seq_blocks = calloc(n_seq, sizeof *p->seq_blocks);
    p->free_list = malloc((n_blocks ? n_blocks : 1) * sizeof *p->free_list);
    p->refs = calloc(n_blocks ? n_blocks : 1, sizeof *p->refs);
    if (!p->table || !p->seq_blocks || !p->free_list || !p->refs) {
        snprintf(err, errlen, "out of host memory for the KV cache");
        return -1;
    }
    for (uint32_t b = 0; b < n_blocks; b++) p->free_list[b] = (int32_t)(n_blocks - 1 - b);
    p->n_free = n_blocks;
    p->block_table = rt_alloc(rt, (size_t)n_seq * max_blocks * sizeof(int32_t), p->table, err, errlen);
    return p->block_table ? 0 : -1;
}

static void pool_destroy(kv_pool *p)
{
    if (p->block_table) clReleaseMemObject(p->block_table);
    free(p->table); free(p->seq_blocks); free(p->free_list); free(p->refs);
    memset(p, 0, sizeof *p);
}

int kv_create(kv_cache *kv, cl_runtime *rt, const kv_config *c, const uint32_t blocks[KV_POOLS], char *err,
              size_t errlen)
{
    memset(kv, 0, sizeof *kv);
    kv->n_layer = c->n_layer;
    kv->n_seq = c->n_seq;
    kv->max_blocks = (c->n_ctx + KV_BLOCK - 1) / KV_BLOCK;
    kv->sizes = kv_plan(c);
    kv->k = calloc(c->n_layer, sizeof *kv->k);
    kv->v = calloc(c->n_layer, sizeof *kv->v);
    kv->layer_pool = calloc(c->n_layer, 1);
    kv->dims = malloc(c->n_layer * sizeof *kv->dims);
    kv->seq_len = malloc(c->n_seq * sizeof *kv->seq_len);
    kv->copies = malloc(((size_t)blocks[KV_FULL] + blocks[KV_RING] + 1) * sizeof *kv->copies);
    if (!kv->k || !kv->v || !kv->layer_pool || !kv->dims || !kv->seq_len || !kv->copies) {
        snprintf(err, errlen, "out of host memory for the KV cache");
        kv_destroy(kv);
        return -1;
    }
    for (uint32_t s = 0; s < c->n_seq; s++) kv->seq_len[s] = -1;
    memcpy(kv->dims, c->dims, c->n_layer * sizeof *kv->dims);
    int used[KV_POOLS] = { 0, 0 };
    for (uint32_t l = 0; l < c->n_layer; l++) {
        kv->layer_pool[l] = (uint8_t)layer_pool(c, l, kv->max_blocks);
        used[kv->layer_pool[l]] |= c->dims[l] != 0;
    }
    for (int p = 0; p < KV_POOLS; p++) {
        if (!used[p]) continue;
        if (pool_create(&kv->pool[p], rt, c->n_seq, kv->max_blocks, blocks[p], p == KV_RING ? kv->sizes.ring_blocks : 0,
                        err, errlen)) {
            kv_destroy(kv);
            return -1;
        }
        kv->bytes += (uint64_t)c->n_seq * kv->max_blocks * sizeof(int32_t);
    }
    for (uint32_t l = 0; l < c->n_layer; l++) {
        if (c->dims[l] == 0) continue; /* layers that reuse another layer's KV own none */
        size_t bytes = (size_t)kv->pool[kv->layer_pool[l]].n_blocks * KV_BLOCK * c->dims[l] * KV_ELEM_BYTES;
        kv->k[l] = rt_alloc(rt, bytes, NULL, err, errlen);
        kv->v[l] = kv->k[l] ? rt_alloc(rt, bytes, NULL, err, errlen) : NULL;
        if (!kv->v[l]) { kv_destroy(kv); return -1; }
        kv->bytes += 2 * bytes;
    }
    return 0;
}

void kv_destroy(kv_cache *kv)
{
    for (uint32_t l = 0; l < kv->n_layer; l++) {
        if (kv->k && kv->k[l]) clReleaseMemObject(kv->k[l]);
        if (kv->v && kv->v[l]) clReleaseMemObject(kv->v[l]);
    }
    for (int p = 0; p < KV_POOLS; p++) pool_destroy(&kv->pool[p]);
    free(kv->k); free(kv->v); free(kv->layer_pool); free(kv->dims); free(kv->seq_len); free(kv->copies);
    memset(kv, 0, sizeof *kv);
}

int kv_seq_new(kv_cache *kv)
{
    for (uint32_t s = 0; s < kv->n_seq; s++)
        if (kv->seq_len[s] < 0) {
            kv->seq_len[s] = 0;
            for (int p = 0; p < KV_POOLS; p++)
                if (kv->pool[p].table) kv->pool[p].seq_blocks[s] = 0;
            return (int)s;
        }
    return -1;
}

static void mark_dirty(kv_pool *p, int seq)
{
    uint32_t s = (uint32_t)seq, none = p->dirty_lo >= p->dirty_hi;
    p->dirty_lo = none || s < p->dirty_lo ? s : p->dirty_lo;
    p->dirty_hi = none || s >= p->dirty_hi ? s + 1 : p->dirty_hi;
}

static int32_t block_take(kv_pool *p)
{
    int32_t b = p->free_list[--p->n_free];
    p->refs[b] = 1;
    return b;
}

/* one holder fewer; the last one returns the block, and a copy still pending into it is moot */
static void block_put(kv_cache *kv, int pi, int32_t b)
{
    kv_pool *p = &kv->pool[pi];
    if (--p->refs[b]) return;
    p->free_list[p->n_free++] = b;
    for (uint32_t i = 0; i < kv->n_copies; i++)
        if (kv->copies[i].pool == pi && kv->copies[i].dst == b) {
            memmove(&kv->copies[i], &kv->copies[i + 1], (kv->n_copies - i - 1) * sizeof *kv->copies);
            kv->n_copies--;
            break;
        }
}

void kv_trim(kv_cache *kv, int seq, uint32_t len)
{
    uint32_t keep = (len + KV_BLOCK - 1) / KV_BLOCK;
    for (int i = 0; i < KV_POOLS; i++) {
        kv_pool *p = &kv->pool[i];
        if (!p->table) continue;
        int32_t *row = p->table + (size_t)seq * kv->max_blocks;
        while (p->seq_blocks[seq] > keep) {
            uint32_t b = --p->seq_blocks[seq];
            if (!p->ring || b < p->ring) block_put(kv, i, row[b]); /* entries past the ring alias it */
            row[b] = 0;
        }
    }
}

void kv_seq_free(kv_cache *kv, int seq)
{
    if (seq < 0 || (uint32_t)seq >= kv->n_seq || kv->seq_len[seq] < 0) return;
    kv_trim(kv, seq, 0);
    kv->seq_len[seq] = -1;
}

int kv_seq_fork(kv_cache *kv, int src)
{
    int dst = kv_seq_new(kv);
    if (dst < 0) return -1;
    for (int i = 0; i < KV_POOLS; i++) {
        kv_pool *p = &kv->pool[i];
        if (!p->table) continue;
        const int32_t *from = p->table + (size_t)src * kv->max_blocks;
        int32_t *row = p->table + (size_t)dst * kv->max_blocks;
        for (uint32_t b = 0; b < p->seq_blocks[src]; b++) {
            row[b] = from[b];
            if (!p->ring || b < p->ring) p->refs[row[b]]++;
        }
        p->seq_blocks[dst] = p->seq_blocks[src];
        mark_dirty(p, dst);
    }
    kv->seq_len[dst] = kv->seq_len[src];
    return dst;
}

/* table entry e of seq (a ring entry in a ring pool) becomes a block seq alone holds: a shared one is
 * replaced by a new block, its contents copied at the next kv_sync; -1 when the pool has none free */
static int make_own(kv_cache *kv, int pi, int seq, uint32_t e)
{
    kv_pool *p = &kv->pool[pi];
    int32_t *row = p->table + (size_t)seq * kv->max_blocks, old = row[e];
    if (p->refs[old] == 1) return 0;
    if (p->n_free == 0) return -1;
    int32_t nb = block_take(p);
    p->refs[old]--;
    kv->copies[kv->n_copies++] = (kv_copy){ pi, old, nb };
    for (uint32_t b = e; b < p->seq_blocks[seq]; b += p->ring ? p->ring : kv->max_blocks) row[b] = nb;
    mark_dirty(p, seq);
    return 0;
}

int kv_reserve(kv_cache *kv, int seq, uint32_t new_len)
{
    uint32_t need = (new_len + KV_BLOCK - 1) / KV_BLOCK, len = kv->seq_len[seq] > 0 ? (uint32_t)kv->seq_len[seq] : 0;
    if (need > kv->max_blocks) return -1;
    for (int i = 0; i < KV_POOLS; i++) {
        kv_pool *p = &kv->pool[i];
        if (!p->table) continue;
        int32_t *row = p->table + (size_t)seq * kv->max_blocks;
        while (p->seq_blocks[seq] < need) {
            uint32_t b = p->seq_blocks[seq];
            if (p->ring && b >= p->ring) {
                row[b] = row[b % p->ring]; /* the ring block that held the keys one ring earlier */
            } else {
                if (p->n_free == 0) return -1;
                row[b] = block_take(p);
            }
            p->seq_blocks[seq]++;
            mark_dirty(p, seq);
        }
        if (new_len <= len) continue;
        /* the blocks positions [len, new_len) go to: each of a ring's at most once */
        uint32_t b0 = len / KV_BLOCK, b1 = (new_len - 1) / KV_BLOCK;
        if (p->ring && b1 - b0 >= p->ring) b0 = b1 + 1 - p->ring;
        for (uint32_t b = b0; b <= b1; b++)
            if (make_own(kv, i, seq, p->ring ? b % p->ring : b)) return -1;
    }
    return 0;
}

int kv_sync(kv_cache *kv, cl_runtime *rt, char *err, size_t errlen)
{
    for (uint32_t c = 0; c < kv->n_copies; c++) { /* in order, before anything this step writes */
        const kv_copy *cp = &kv->copies[c];
        for (uint32_t l = 0; l < kv->n_layer; l++) {
            if (!kv->k[l] || kv->layer_pool[l] != cp->pool) continue;
            size_t bb = (size_t)KV_BLOCK * kv->dims[l] * KV_ELEM_BYTES;
            cl_int e = clEnqueueCopyBuffer(rt->q, kv->k[l], kv->k[l], cp->src * bb, cp->dst * bb, bb, 0, NULL, NULL);
            if (e == CL_SUCCESS)
                e = clEnqueueCopyBuffer(rt->q, kv->v[l], kv->v[l], cp->src * bb, cp->dst * bb, bb, 0, NULL, NULL);
            if (e != CL_SUCCESS) { snprintf(err, errlen, "KV block copy: %s", rt_errstr(e)); return -1; }
        }
    }
    kv->n_copies = 0;
    for (int i = 0; i < KV_POOLS; i++) {
        kv_pool *p = &kv->pool[i];
        if (p->dirty_lo >= p->dirty_hi) continue;
        /* the changed sequences' rows; blocking: the host table may change before a non-blocking copy would run */
        size_t row = (size_t)kv->max_blocks * sizeof(int32_t);
        cl_int e = clEnqueueWriteBuffer(rt->q, p->block_table, CL_TRUE, p->dirty_lo * row,
                                        (p->dirty_hi - p->dirty_lo) * row,
                                        p->table + (size_t)p->dirty_lo * kv->max_blocks, 0, NULL, NULL);
        if (e != CL_SUCCESS) { snprintf(err, errlen, "KV block table upload: %s", rt_errstr(e)); return -1; }
        p->dirty_lo = p->dirty_hi = 0;
    }
    return 0;
}

kv_view kv_layer_k(const kv_cache *kv, uint32_t l)
{
    return (kv_view){ kv->k[l], kv->pool[kv->layer_pool[l]].block_table, kv->max_blocks, KV_BLOCK };
}

kv_view kv_layer_v(const kv_cache *kv, uint32_t l)
{
    return (kv_view){ kv->v[l], kv->pool[kv->layer_pool[l]].block_table, kv->max_blocks, KV_BLOCK };
}
