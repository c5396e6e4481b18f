/* kv.c — see kv.h.
 *
 * The prefix cache and sliding-window layers. A reused prefix of L tokens must give every later query
 * the keys it reads: in a full layer all of positions 0 .. L - 1 (the prefix's blocks), in a sliding
 * layer only L - window + 1 .. L - 1 (the widest window of the ring layers). So a sequence's ring
 * blocks are registered like its full blocks, chunk by chunk as the step runs (a long prefill wraps
 * its ring within one step), and when the ring comes round to a registered block the write goes to
 * a copy (copy on write: the old block's tail may still be in the window, as a ring shares a block
 * between entries); with no block free or evictable the table lets go of the block instead and the
 * write goes in place, so the cache never makes a step fail. A start on L tokens shares the
 * registered ring blocks holding that last window and takes fresh blocks for the ring's older entries
 * (no query reads them before they are written); where a window block is gone (evicted, given up),
 * the longest shorter prefix whose blocks are all there is reused, or none. Cached ring blocks live
 * in the ring pool's spare blocks (those no sequence's ring holds): the pools are sized as without
 * the cache. Eviction order: least recently released first; a released sequence gives its deepest
 * block first, so a chain loses its end before its start. */
#include "kv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const kv_type_row kv_types[ENGINE_KV_TYPES] = {
    [ENGINE_KV_F16] = { "f16", 64, "" }, /* kv.cl's default: the kernel tests' program, one binary cached */
    [ENGINE_KV_Q8_0] = { "q8_0", 34, "-DCLG_KV=1" },
    [ENGINE_KV_Q4_0] = { "q4", 18, "-DCLG_KV=2" },
};

int engine_kv_type_parse(const char *name)
{
    for (int t = 0; name && t < ENGINE_KV_TYPES; t++)
        if (!strcmp(name, kv_types[t].name)) return t;
    return name && !strcmp(name, "q4_0") ? ENGINE_KV_Q4_0 : -1; /* llama.cpp's name for it */
}

const char *engine_kv_type_name(int type) { return type >= 0 && type < ENGINE_KV_TYPES ? kv_types[type].name : "?"; }

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
        uint64_t b = 2 * kv_bytes(c->type, c->dims[l]); /* K and V */
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
    s.state_per_seq = state_per_seq(c->n_layer, c->state);
    s.state_ck_bytes = s.state_per_seq && c->state_rows ? c->state_ck * state_ck_bytes(c->n_layer, c->state,
                                                                                         c->state_rows) : 0;
    s.state_snap_bytes = s.state_per_seq * c->state_snaps;
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
    p->cached = malloc((n_blocks ? n_blocks : 1) * sizeof *p->cached);
    p->lru_prev = malloc((n_blocks ? n_blocks : 1) * sizeof *p->lru_prev);
    p->lru_next = malloc((n_blocks ? n_blocks : 1) * sizeof *p->lru_next);
    if (!p->table || !p->seq_blocks || !p->free_list || !p->refs || !p->cached || !p->lru_prev || !p->lru_next) {
        snprintf(err, errlen, "out of host memory for the KV cache");
        return -1;
    }
    for (uint32_t b = 0; b < n_blocks; b++) p->free_list[b] = (int32_t)(n_blocks - 1 - b);
    for (uint32_t b = 0; b < n_blocks; b++) p->cached[b] = -1;
    p->lru_head = p->lru_tail = -1;
    p->n_free = n_blocks;
    p->block_table = rt_alloc(rt, (size_t)n_seq * max_blocks * sizeof(int32_t), p->table, err, errlen);
    return p->block_table ? 0 : -1;
}

static void pool_destroy(kv_pool *p)
{
    if (p->block_table) clReleaseMemObject(p->block_table);
    free(p->table); free(p->seq_blocks); free(p->free_list); free(p->refs);
    free(p->cached); free(p->lru_prev); free(p->lru_next);
    memset(p, 0, sizeof *p);
}

int kv_create(kv_cache *kv, cl_runtime *rt, const kv_config *c, const uint32_t blocks[KV_POOLS], char *err,
              size_t errlen)
{
    memset(kv, 0, sizeof *kv);
    kv->n_layer = c->n_layer;
    kv->n_seq = c->n_seq;
    kv->type = c->type;
    kv->max_blocks = (c->n_ctx + KV_BLOCK - 1) / KV_BLOCK;
    kv->sizes = kv_plan(c);
    kv->k = calloc(c->n_layer, sizeof *kv->k);
    kv->v = calloc(c->n_layer, sizeof *kv->v);
    kv->layer_pool = calloc(c->n_layer, 1);
    kv->dims = malloc(c->n_layer * sizeof *kv->dims);
    kv->seq_len = malloc(c->n_seq * sizeof *kv->seq_len);
    kv->copies = malloc(((size_t)blocks[KV_FULL] + blocks[KV_RING] + 1) * sizeof *kv->copies);
    kv->chain = calloc(c->n_seq, sizeof *kv->chain);
    kv->part = calloc((size_t)c->n_seq * KV_BLOCK, sizeof *kv->part);
    kv->chain_at = calloc(c->n_seq, sizeof *kv->chain_at);
    kv->part_at = calloc((size_t)c->n_seq * KV_BLOCK, sizeof *kv->part_at);
    kv->walk = malloc((kv->max_blocks + 1) * sizeof *kv->walk);
    kv->last_entry = malloc(c->n_seq * sizeof *kv->last_entry);
    kv->snap_log = malloc(c->n_seq * sizeof *kv->snap_log);
    if (!kv->k || !kv->v || !kv->layer_pool || !kv->dims || !kv->seq_len || !kv->copies || !kv->chain || !kv->part ||
        !kv->chain_at || !kv->part_at || !kv->walk || !kv->last_entry || !kv->snap_log) {
        snprintf(err, errlen, "out of host memory for the KV cache");
        kv_destroy(kv);
        return -1;
    }
    for (uint32_t s = 0; s < c->n_seq; s++) kv->seq_len[s] = kv->last_entry[s] = -1;
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
        size_t bytes = (size_t)kv->pool[kv->layer_pool[l]].n_blocks * KV_BLOCK * kv_bytes(c->type, c->dims[l]);
        kv->k[l] = rt_alloc(rt, bytes, NULL, err, errlen);
        kv->v[l] = kv->k[l] ? rt_alloc(rt, bytes, NULL, err, errlen) : NULL;
        if (!kv->v[l]) { kv_destroy(kv); return -1; }
        kv->bytes += 2 * bytes;
    }
    if (kv->sizes.state_per_seq) {
        if (state_create(&kv->state, rt, c->n_layer, c->state, c->state_rows, c->n_seq, c->state_ck, c->state_snaps,
                         err, errlen)) {
            kv_destroy(kv);
            return -1;
        }
        kv->bytes += kv->state->bytes;
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
    free(kv->chain); free(kv->part); free(kv->chain_at); free(kv->part_at); free(kv->walk); free(kv->log);
    free(kv->last_entry); free(kv->snap_log);
    prefix_destroy(&kv->prefix);
    state_destroy(kv->state);
    memset(kv, 0, sizeof *kv);
}

_Static_assert(KV_POOLS == PREFIX_POOLS, "a prefix entry has a block per pool");

int kv_prefix_on(kv_cache *kv, uint64_t seed, char *err, size_t errlen)
{
    /* one entry per block at most: an entry that loses its last block goes */
    if (prefix_create(&kv->prefix, kv->pool[KV_FULL].n_blocks + kv->pool[KV_RING].n_blocks, KV_BLOCK)) {
        snprintf(err, errlen, "out of host memory for the prefix cache");
        return -1;
    }
    kv->seed = seed;
    return 0;
}

int kv_seq_new(kv_cache *kv)
{
    for (uint32_t s = 0; s < kv->n_seq; s++)
        if (kv->seq_len[s] < 0) {
            kv->seq_len[s] = 0;
            kv->chain[s] = kv->chain_at[s] = kv->seed;
            if (kv->state) state_release(kv->state, (int)s); /* zeroed by the forward at position 0 */
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

/* the eviction order: blocks only the prefix table holds, the least recently released at the head */
static void lru_push(kv_pool *p, int32_t b)
{
    p->lru_prev[b] = p->lru_tail;
    p->lru_next[b] = -1;
    if (p->lru_tail >= 0) p->lru_next[p->lru_tail] = b;
    else p->lru_head = b;
    p->lru_tail = b;
    p->n_lru++;
}

static void lru_unlink(kv_pool *p, int32_t b)
{
    if (p->lru_prev[b] >= 0) p->lru_next[p->lru_prev[b]] = p->lru_next[b];
    else p->lru_head = p->lru_next[b];
    if (p->lru_next[b] >= 0) p->lru_prev[p->lru_next[b]] = p->lru_prev[b];
    else p->lru_tail = p->lru_prev[b];
    p->n_lru--;
}

/* one holder more; a block the table held alone leaves the eviction order */
static void block_hold(kv_pool *p, int32_t b)
{
    if (p->cached[b] >= 0 && p->refs[b] == 1) lru_unlink(p, b);
    p->refs[b]++;
}

/* one holder fewer; the last one returns the block, and a copy still pending into it is moot; a block
 * left to the prefix table alone joins the end of the eviction order */
static void block_put(kv_cache *kv, int pi, int32_t b)
{
    kv_pool *p = &kv->pool[pi];
    if (--p->refs[b]) {
        if (p->refs[b] == 1 && p->cached[b] >= 0) lru_push(p, b);
        return;
    }
    p->free_list[p->n_free++] = b;
    for (uint32_t i = 0; i < kv->n_copies; i++)
        if (kv->copies[i].pool == pi && kv->copies[i].dst == b) {
            memmove(&kv->copies[i], &kv->copies[i + 1], (kv->n_copies - i - 1) * sizeof *kv->copies);
            kv->n_copies--;
            break;
        }
}

/* the prefix table lets go of block b: its entry loses it (and goes when it holds no other block) */
static void uncache(kv_cache *kv, int pi, int32_t b)
{
    kv_pool *p = &kv->pool[pi];
    int32_t ei = p->cached[b];
    prefix_entry *e = &kv->prefix.e[ei];
    e->blk[pi] = -1;
    if (e->blk[KV_FULL] < 0 && e->blk[KV_RING] < 0) {
        if (e->snap >= 0) state_snapshot_drop(kv->state, e->snap); /* its prefix is gone: the state with it */
        e->snap = -1;
        prefix_remove(&kv->prefix, ei);
    }
    if (p->refs[b] == 1) lru_unlink(p, b);
    p->cached[b] = -1;
    block_put(kv, pi, b);
}

/* a block for one holder: a free one, else the head of the eviction order; -1 when neither is left */
static int32_t block_take(kv_cache *kv, int pi)
{
    kv_pool *p = &kv->pool[pi];
    if (p->n_free == 0 && p->lru_head >= 0) uncache(kv, pi, p->lru_head);
    if (p->n_free == 0) return -1;
    int32_t b = p->free_list[--p->n_free];
    p->refs[b] = 1;
    return b;
}

void kv_trim(kv_cache *kv, int seq, uint32_t len)
{
    uint32_t keep = (len + KV_BLOCK - 1) / KV_BLOCK;
    for (int i = 0; i < KV_POOLS; i++) {
        kv_pool *p = &kv->pool[i];
        if (!p->table) continue;
        int32_t *row = p->table + (size_t)seq * kv->max_blocks;
        while (p->seq_blocks[seq] > keep) { /* the deepest first: a chain's end is evicted before its start */
            uint32_t b = --p->seq_blocks[seq];
            if (!p->ring || b < p->ring) block_put(kv, i, row[b]); /* entries past the ring alias it */
            row[b] = 0;
        }
    }
}

int kv_truncate(kv_cache *kv, int seq, uint32_t len, const int32_t *tokens)
{
    uint32_t old = (uint32_t)kv->seq_len[seq];
    if (kv->seq_len[seq] < 0 || len >= old) return -1;
    /* a ring holds window + spare keys: dropping more than the spare would leave ring blocks holding keys
     * of positions past len where the window before len needs older ones */
    const kv_pool *r = &kv->pool[KV_RING];
    uint64_t ring = (uint64_t)r->ring * KV_BLOCK;
    if (r->table && old > ring && ring < (uint64_t)kv->sizes.ring_window + (old - len) + KV_BLOCK) return -1;
    kv_trim(kv, seq, len);
    if (kv->prefix.cap && len / KV_BLOCK < old / KV_BLOCK) { /* a whole block went: its chain with it */
        uint64_t h = kv->seed;
        for (uint32_t b = 0; b < len / KV_BLOCK; b++) h = prefix_hash(h, tokens + (size_t)b * KV_BLOCK, KV_BLOCK);
        kv->chain[seq] = h;
        memcpy(kv->part + (size_t)seq * KV_BLOCK, tokens + (size_t)(len / KV_BLOCK) * KV_BLOCK,
               (len % KV_BLOCK) * sizeof *kv->part);
    }
    kv_commit(kv, seq, len);
    return 0;
}

void kv_seq_free(kv_cache *kv, int seq)
{
    if (seq < 0 || (uint32_t)seq >= kv->n_seq || kv->seq_len[seq] < 0) return;
    kv_trim(kv, seq, 0);
    kv->seq_len[seq] = -1;
    if (kv->state) state_release(kv->state, seq);
}

int kv_has_state(const kv_cache *kv) { return kv->state != NULL; }

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
            if (!p->ring || b < p->ring) block_hold(p, row[b]);
        }
        p->seq_blocks[dst] = p->seq_blocks[src];
        mark_dirty(p, dst);
    }
    if (kv->state) state_fork(kv->state, src, dst);
    kv->chain[dst] = kv->chain[src];
    memcpy(kv->part + (size_t)dst * KV_BLOCK, kv->part + (size_t)src * KV_BLOCK, KV_BLOCK * sizeof *kv->part);
    kv_commit(kv, dst, (uint32_t)kv->seq_len[src]);
    return dst;
}

/* table entry e of seq (a ring entry in a ring pool) becomes a block seq alone holds: a shared one is
 * replaced by a new block, its contents copied at the next kv_sync; with no block to take, one the
 * prefix table shares is left to seq (written in place); -1 when neither can be */
static int make_own(kv_cache *kv, int pi, int seq, uint32_t e)
{
    kv_pool *p = &kv->pool[pi];
    int32_t *row = p->table + (size_t)seq * kv->max_blocks, old = row[e];
    if (p->refs[old] == 1) return 0;
    int32_t nb = block_take(kv, pi);
    if (nb < 0) {
        if (p->refs[old] != 2 || p->cached[old] < 0) return -1;
        uncache(kv, pi, old);
        return 0;
    }
    block_put(kv, pi, old);
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
                int32_t nb = block_take(kv, i);
                if (nb < 0) return -1;
                row[b] = nb;
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

/* ---- the prefix cache ---- */

/* the first block of a prefix of len tokens that a ring layer's query at position len reads */
static uint32_t ring_first(const kv_cache *kv, uint32_t len)
{
    uint32_t w = kv->sizes.ring_window; /* the keys a reused prefix must keep */
    return len + 1 > w ? (len + 1 - w) / KV_BLOCK : 0;
}

/* block b of seq, just completed by writes through entry last: registered under the chain through it
 * in each pool where the table has no block for it yet (a ring block only while the ring still holds
 * b); logged, so kv_abort can take it back */
static void block_register(kv_cache *kv, int seq, uint32_t b, uint32_t last)
{
    const int32_t *toks = kv->part + (size_t)seq * KV_BLOCK;
    uint64_t parent = kv->chain[seq];
    int32_t ei = prefix_find(&kv->prefix, parent, toks);
    if (ei < 0) ei = prefix_add(&kv->prefix, parent, toks);
    kv->chain[seq] = prefix_hash(parent, toks, KV_BLOCK);
    kv->last_entry[seq] = ei;
    if (ei < 0) return;
    prefix_entry *e = &kv->prefix.e[ei];
    for (int i = 0; i < KV_POOLS; i++) {
        kv_pool *p = &kv->pool[i];
        if (!p->table || e->blk[i] >= 0 || (p->ring && b + p->ring <= last)) continue;
        int32_t blk = p->table[(size_t)seq * kv->max_blocks + (p->ring ? b % p->ring : b)];
        if (p->cached[blk] >= 0) continue; /* it names another prefix: not one this sequence wrote */
        if (kv->n_log == kv->log_cap) {
            uint32_t cap = kv->log_cap ? 2 * kv->log_cap : 64;
            kv_reg *g = realloc(kv->log, cap * sizeof *g);
            if (!g) continue; /* unlogged, it could not be taken back: not registered */
            kv->log = g;
            kv->log_cap = cap;
        }
        kv->log[kv->n_log++] = (kv_reg){ i, blk, ei };
        e->blk[i] = blk;
        p->cached[blk] = ei;
        p->refs[blk]++;
    }
    if (e->blk[KV_FULL] < 0 && e->blk[KV_RING] < 0) {
        prefix_remove(&kv->prefix, ei); /* a new entry: no snapshot yet */
        kv->last_entry[seq] = -1;
    }
}

void kv_snapshot(kv_cache *kv, int seq)
{
    int32_t ei = kv->last_entry[seq], gone;
    if (!kv->state || !kv->state->n_snap || ei < 0 || kv->n_snap_log == kv->n_seq) return;
    prefix_entry *e = &kv->prefix.e[ei];
    if (e->hash != kv->chain[seq] || e->snap >= 0) return; /* not the block ending here; or kept already */
    e->snap = state_snapshot(kv->state, seq, ei, &gone);
    if (gone >= 0) kv->prefix.e[gone].snap = -1;
    kv->snap_log[kv->n_snap_log++] = ei;
}

void kv_written(kv_cache *kv, int seq, const int32_t *tokens, uint32_t from, uint32_t to)
{
    if (!kv->prefix.cap || to <= from) return;
    int32_t *part = kv->part + (size_t)seq * KV_BLOCK;
    for (uint32_t p = from; p < to; p++) {
        part[p % KV_BLOCK] = tokens[p - from];
        if (p % KV_BLOCK == KV_BLOCK - 1) block_register(kv, seq, p / KV_BLOCK, (to - 1) / KV_BLOCK);
    }
}

int kv_own(kv_cache *kv, int seq, uint32_t from, uint32_t to)
{
    for (int i = 0; i < KV_POOLS && to > from; i++) {
        kv_pool *p = &kv->pool[i];
        if (!p->table) continue;
        uint32_t b0 = from / KV_BLOCK, b1 = (to - 1) / KV_BLOCK;
        if (p->ring && b1 - b0 >= p->ring) b0 = b1 + 1 - p->ring;
        for (uint32_t b = b0; b <= b1; b++)
            if (make_own(kv, i, seq, p->ring ? b % p->ring : b)) return -1;
    }
    return 0;
}

void kv_commit(kv_cache *kv, int seq, uint32_t len)
{
    kv->seq_len[seq] = (int32_t)len;
    kv->chain_at[seq] = kv->chain[seq];
    memcpy(kv->part_at + (size_t)seq * KV_BLOCK, kv->part + (size_t)seq * KV_BLOCK, KV_BLOCK * sizeof *kv->part);
}

void kv_step_begin(kv_cache *kv) { kv->n_log = kv->n_snap_log = 0; }

void kv_abort(kv_cache *kv)
{
    for (uint32_t i = kv->n_log; i-- > 0;) { /* a logged block may have been let go of, or named anew since */
        const kv_reg *g = &kv->log[i];
        if (kv->pool[g->pool].cached[g->block] == g->entry) uncache(kv, g->pool, g->block);
    }
    kv->n_log = 0;
    for (uint32_t i = 0; i < kv->n_snap_log; i++) { /* a failed step's state is not one to reuse */
        prefix_entry *e = &kv->prefix.e[kv->snap_log[i]];
        if (e->snap >= 0) state_snapshot_drop(kv->state, e->snap);
        e->snap = -1;
    }
    kv->n_snap_log = 0;
    memcpy(kv->chain, kv->chain_at, kv->n_seq * sizeof *kv->chain);
    memcpy(kv->part, kv->part_at, (size_t)kv->n_seq * KV_BLOCK * sizeof *kv->part);
}

/* the longest k <= m for which the table holds every block the walk's first k need: all of the full
 * pool's, and the ring's that a later query reads */
static uint32_t usable_blocks(const kv_cache *kv, uint32_t m)
{
    int full = kv->pool[KV_FULL].table != NULL, ring = kv->pool[KV_RING].table != NULL;
    uint32_t best = 0, run = 0; /* run: where the ring blocks present through block k - 1 begin */
    for (uint32_t k = 1; k <= m; k++) {
        const prefix_entry *e = &kv->prefix.e[kv->walk[k - 1]];
        if (full && e->blk[KV_FULL] < 0) break;
        if (ring && e->blk[KV_RING] < 0) run = k;
        if (!ring || run <= ring_first(kv, k * KV_BLOCK)) best = k;
    }
    return best;
}

/* the ring entries [first, k) of a sequence starting on k blocks and, of them, the registered ones
 * it shares from *shared on */
static void ring_span(const kv_cache *kv, uint32_t k, uint32_t *first, uint32_t *shared)
{
    uint32_t r = kv->pool[KV_RING].ring;
    *first = k > r ? k - r : 0;
    *shared = ring_first(kv, k * KV_BLOCK);
    if (*shared < *first) *shared = *first;
}

/* 1 when the ring pool has the fresh blocks a start on k blocks takes beside the registered ones */
static int ring_room(const kv_cache *kv, uint32_t k)
{
    const kv_pool *p = &kv->pool[KV_RING];
    if (!p->table) return 1;
    uint32_t first, shared, busy = 0;
    ring_span(kv, k, &first, &shared);
    for (uint32_t b = shared; b < k; b++) busy += p->refs[kv->prefix.e[kv->walk[b]].blk[KV_RING]] == 1;
    return p->n_free + p->n_lru - busy >= shared - first;
}

/* seq (new) takes the walk's first k blocks: the full layers' all, the ring's last entries, registered
 * where a query reads them and fresh before (ring_room said there are enough) */
static void attach(kv_cache *kv, int seq, uint32_t k)
{
    kv->chain[seq] = kv->prefix.e[kv->walk[k - 1]].hash;
    for (int i = 0; i < KV_POOLS; i++) { /* the registered blocks first, out of the eviction order */
        kv_pool *p = &kv->pool[i];
        if (!p->table) continue;
        int32_t *row = p->table + (size_t)seq * kv->max_blocks;
        uint32_t first = 0, shared = 0;
        if (p->ring) ring_span(kv, k, &first, &shared);
        for (uint32_t b = shared; b < k; b++) {
            int32_t blk = kv->prefix.e[kv->walk[b]].blk[i];
            block_hold(p, blk);
            row[p->ring ? b % p->ring : b] = blk;
        }
        for (uint32_t b = first; b < shared; b++) row[b % p->ring] = block_take(kv, i);
        for (uint32_t b = p->ring; p->ring && b < k; b++) row[b] = row[b % p->ring];
        p->seq_blocks[seq] = k;
        mark_dirty(p, seq);
    }
    kv_commit(kv, seq, k * KV_BLOCK);
}

int kv_seq_new_prefix(kv_cache *kv, const int32_t *tokens, uint32_t n, uint32_t *cached)
{
    *cached = 0;
    int seq = kv_seq_new(kv);
    if (seq < 0 || !kv->prefix.cap || n < 2) return seq;
    uint32_t m = 0, max_k = (n - 1) / KV_BLOCK; /* the last token is computed: its logits are the point */
    if (max_k > kv->max_blocks) max_k = kv->max_blocks;
    for (uint64_t h = kv->seed; m < max_k; m++) {
        int32_t ei = prefix_find(&kv->prefix, h, tokens + (size_t)m * KV_BLOCK);
        if (ei < 0) break;
        kv->walk[m] = ei;
        h = kv->prefix.e[ei].hash;
    }
    uint32_t k = usable_blocks(kv, m);
    while (kv->state && k && kv->prefix.e[kv->walk[k - 1]].snap < 0) k--; /* the state too: a snapshot at the end */
    if (!k || !ring_room(kv, k)) return seq;
    attach(kv, seq, k);
    if (kv->state) state_from_snapshot(kv->state, kv->prefix.e[kv->walk[k - 1]].snap, seq);
    *cached = k * KV_BLOCK;
    return seq;
}

int kv_sync(kv_cache *kv, cl_runtime *rt, char *err, size_t errlen)
{
    if (kv->state && state_sync(kv->state, rt, err, errlen)) return -1;
    for (uint32_t c = 0; c < kv->n_copies; c++) { /* in order, before anything this step writes */
        const kv_copy *cp = &kv->copies[c];
        for (uint32_t l = 0; l < kv->n_layer; l++) {
            if (!kv->k[l] || kv->layer_pool[l] != cp->pool) continue;
            size_t bb = (size_t)KV_BLOCK * kv_bytes(kv->type, kv->dims[l]); /* quants and scales alike */
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
    return (kv_view){ kv->k[l], kv->pool[kv->layer_pool[l]].block_table, kv->max_blocks, KV_BLOCK, kv->type };
}

kv_view kv_layer_v(const kv_cache *kv, uint32_t l)
{
    return (kv_view){ kv->v[l], kv->pool[kv->layer_pool[l]].block_table, kv->max_blocks, KV_BLOCK, kv->type };
}
