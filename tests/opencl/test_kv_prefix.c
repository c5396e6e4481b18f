/* test_kv_prefix.c — the KV cache's prefix cache (opencl/kv.c, opencl/prefix.c) on the device's real
 * buffers, without a model: each position's K and V slot gets a marker, the chain hash of the tokens
 * through that position, so a block holding the right keys for a prefix is one holding that
 * prefix's markers, and a reused block, a copy made on write or a ring slot overwritten too early
 * shows as a wrong marker. One sliding layer (window 70, chunks of 24: a ring of 3 blocks) and one
 * full layer.
 *   test_prefix_reuse: a prompt written in chunks and freed, then prompts sharing 300, 100, 65, 64
 *     and 0 of its tokens start on the longest whole-block prefix that leaves the last token out
 *     (288, 96, 64, 32, 0), holding its markers; after other prompts evict the first one's ring
 *     blocks, a start reuses only what still has every block its window needs.
 *   test_prefix_steal: a ring pool no larger than one sequence's ring: the ring comes round to its
 *     registered blocks with no block free, and the table gives them up instead of failing.
 *   test_prefix_walk: 2,000 random starts (prompts sharing prefixes of three documents), steps of
 *     up to 6 chunks (a step's blocks registered chunk by chunk, before the ring comes round to
 *     them), some aborted mid-way (their writes garbage, their registrations taken back; one chunk
 *     in, the step goes again), chunks,
 *     decode tokens, forks, frees on four slots over small pools, so blocks are evicted, shared,
 *     copied on write and stolen. After every operation: each block's count is its holders (a
 *     ring's own entries) + 1 while the table names it, the free list is the blocks counted zero,
 *     the eviction order is exactly the blocks only the table holds, every entry's blocks name it
 *     back, and every block the table names holds that prefix's markers; after every step the keys
 *     each query of it reads hold the sequence's markers (full layer: all before it; ring: the
 *     window); a failed reserve happens only where a pool has no free or evictable block. */
#include "check.h"
#include "kv.h"
#include "kv_holders.h"
#include "runtime.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { NSEQ = 4, WIN = 70, CHUNK = 24, CTX = 640, NTOK = 50, NDOC = 3 };

static cl_runtime RT;
static char err[512];
static uint64_t rs;

static uint32_t irand(uint32_t n)
{
    uint64_t z = (rs += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (uint32_t)((z ^ (z >> 31)) % n);
}

/* the marker of position p of a token stream: the chain through its whole blocks, extended by the
 * tokens of p's block through p */
static uint32_t marker(uint64_t seed, const int32_t *toks, uint32_t p)
{
    uint64_t h = seed;
    uint32_t b = p / KV_BLOCK;
    for (uint32_t i = 0; i < b; i++) h = prefix_hash(h, toks + (size_t)i * KV_BLOCK, KV_BLOCK);
    return (uint32_t)prefix_hash(h, toks + (size_t)b * KV_BLOCK, p % KV_BLOCK + 1);
}

/* host mirrors of the two layers' K and V: one uint32 (two halves) per slot */
static uint32_t *mir[2][2];

static void mirror_read(kv_cache *kv)
{
    for (int l = 0; l < 2; l++) {
        size_t bytes = (size_t)kv->pool[kv->layer_pool[l]].n_blocks * KV_BLOCK * 4;
        cl_mem m[2] = { kv->k[l], kv->v[l] };
        for (int kvi = 0; kvi < 2; kvi++)
            clEnqueueReadBuffer(RT.q, m[kvi], CL_TRUE, 0, bytes, mir[l][kvi], 0, NULL, NULL);
    }
}

static void mirror_write(kv_cache *kv)
{
    for (int l = 0; l < 2; l++) {
        size_t bytes = (size_t)kv->pool[kv->layer_pool[l]].n_blocks * KV_BLOCK * 4;
        cl_mem m[2] = { kv->k[l], kv->v[l] };
        for (int kvi = 0; kvi < 2; kvi++)
            clEnqueueWriteBuffer(RT.q, m[kvi], CL_TRUE, 0, bytes, mir[l][kvi], 0, NULL, NULL);
    }
}

/* the slot of position p of seq in layer l */
static size_t slot(const kv_cache *kv, int l, int seq, uint32_t p)
{
    const kv_pool *pl = &kv->pool[kv->layer_pool[l]];
    uint32_t e = p / KV_BLOCK;
    return (size_t)pl->table[(size_t)seq * kv->max_blocks + e] * KV_BLOCK + p % KV_BLOCK;
}

/* the keys a query at position q reads hold seq's markers: layer 0 (ring) the window, layer 1 all
 * before q; positions [from, q] of the window are checked */
static int check_reads(const kv_cache *kv, int seq, const int32_t *toks, uint32_t q, uint32_t upto, const char *what)
{
    int bad = 0;
    for (int l = 0; l < 2; l++) {
        uint32_t lo = l == 0 && q + 1 > WIN ? q + 1 - WIN : 0;
        for (uint32_t p = lo; p < upto && !bad; p++) {
            uint32_t want = marker(kv->seed, toks, p);
            size_t s = slot(kv, l, seq, p);
            if (mir[l][0][s] != want || mir[l][1][s] != want) {
                CHECK(0, "%s: sequence %d, layer %d (%s), position %u (query at %u): marker %08x / %08x, want %08x", what,
                      seq, l, l ? "full" : "ring", p, q, mir[l][0][s], mir[l][1][s], want);
                bad = 1;
            }
        }
    }
    return bad;
}

static void write_markers(const kv_cache *kv, int seq, const int32_t *toks, uint32_t from, uint32_t to)
{
    for (uint32_t p = from; p < to; p++)
        for (int l = 0; l < 2; l++) {
            size_t s = slot(kv, l, seq, p);
            mir[l][0][s] = mir[l][1][s] = marker(kv->seed, toks, p);
        }
}

/* the blocks of pool pi a growth of seq to new_len must take: its new entries, and a copy of each
 * block it writes that another sequence holds (one the table alone shares with it costs nothing: the
 * copy leaves the old block evictable, or, with none to take, the table gives it up) */
static uint32_t must_take(const kv_cache *kv, int pi, int seq, uint32_t new_len)
{
    const kv_pool *p = &kv->pool[pi];
    uint32_t len = (uint32_t)kv->seq_len[seq], have = p->seq_blocks[seq], need = (new_len + KV_BLOCK - 1) / KV_BLOCK;
    uint32_t r = p->ring ? p->ring : kv->max_blocks, own = have < r ? have : r, n = 0;
    for (uint32_t b = have; b < need && b < r; b++) n++;
    uint32_t b0 = len / KV_BLOCK, b1 = (new_len - 1) / KV_BLOCK;
    if (b1 - b0 >= r) b0 = b1 + 1 - r;
    for (uint32_t b = b0; b <= b1; b++) {
        if (b % r >= own) continue; /* new this step */
        int32_t blk = p->table[(size_t)seq * kv->max_blocks + b % r];
        n += p->refs[blk] > 2 || (p->refs[blk] == 2 && p->cached[blk] < 0);
    }
    return n;
}

/* one step of seq: tokens [len, len + n) written as the forward's chunks write them (kv_own and a sync
 * before each chunk, its keys, then its first query reads its window, kv_written after), committed;
 * -1 when the reserve failed or, with abort_after >= 0, that many chunks in (undone, as engine_step
 * undoes either) */
static int step_abort(kv_cache *kv, int seq, const int32_t *toks, uint32_t n, int abort_after, const char *what)
{
    uint32_t len = (uint32_t)kv->seq_len[seq];
    int short_of = 0; /* a pool has fewer free and evictable blocks than the step must take */
    for (int i = 0; i < KV_POOLS; i++) short_of |= kv->pool[i].table && must_take(kv, i, seq, len + n) >
                                                   kv->pool[i].n_free + kv->pool[i].n_lru;
    int rc = kv_reserve(kv, seq, len + n);
    CHECK((rc != 0) == short_of, "%s: reserve %s with %u + %u full and %u + %u ring blocks free + evictable for %u / %u",
          what, rc ? "failed" : "went through", kv->pool[KV_FULL].n_free, kv->pool[KV_FULL].n_lru,
          kv->pool[KV_RING].n_free, kv->pool[KV_RING].n_lru, must_take(kv, KV_FULL, seq, len + n),
          must_take(kv, KV_RING, seq, len + n));
    if (rc) {
        kv_trim(kv, seq, len);
        return -1;
    }
    kv_step_begin(kv);
    int chunks = 0;
    for (uint32_t c = len; c < len + n; c += CHUNK, chunks++) {
        uint32_t e = c + CHUNK < len + n ? c + CHUNK : len + n;
        if (chunks == abort_after) { /* a device error: what it wrote is garbage, what it registered taken back */
            mirror_read(kv);
            for (uint32_t p = len; p < c; p++)
                for (int l = 0; l < 2; l++) mir[l][0][slot(kv, l, seq, p)] = mir[l][1][slot(kv, l, seq, p)] = 0xdeadbeefu;
            mirror_write(kv);
            kv_abort(kv);
            kv_trim(kv, seq, len);
            return -1;
        }
        CHECK(kv_own(kv, seq, c, e) == 0, "%s: kv_own failed at %u", what, c);
        CHECK(kv_sync(kv, &RT, err, sizeof err) == 0, "%s: kv_sync: %s", what, err);
        mirror_read(kv);
        write_markers(kv, seq, toks, c, e);
        check_reads(kv, seq, toks, c, e, what);
        mirror_write(kv);
        kv_written(kv, seq, toks + c, c, e);
    }
    kv_commit(kv, seq, len + n);
    return 0;
}

static int step(kv_cache *kv, int seq, const int32_t *toks, uint32_t n, const char *what)
{
    return step_abort(kv, seq, toks, n, -1, what);
}

/* counts, free list, eviction order and table against each other; every block the table names holds
 * its prefix's markers */
static void check_tables(const kv_cache *kv, const char *what)
{
    for (int pi = 0; pi < KV_POOLS; pi++) {
        const kv_pool *p = &kv->pool[pi];
        if (!p->table) continue;
        uint32_t bad, zero = 0, only = 0, lru = 0, names = 0, content = 0, *cnt = kv_holders(kv, pi, &bad);
        for (uint32_t b = 0; b < p->n_blocks; b++) {
            int32_t e = p->cached[b];
            if (e >= 0) {
                cnt[b]++;
                names += kv->prefix.e[e].blk[pi] != (int32_t)b;
                const int32_t *t = kv->prefix.tokens + (size_t)e * KV_BLOCK;
                int l = pi == KV_RING ? 0 : 1;
                for (uint32_t i = 0; i < KV_BLOCK; i++) {
                    uint32_t want = (uint32_t)prefix_hash(kv->prefix.e[e].parent, t, i + 1);
                    content += mir[l][0][(size_t)b * KV_BLOCK + i] != want || mir[l][1][(size_t)b * KV_BLOCK + i] != want;
                }
            }
            bad += cnt[b] != p->refs[b];
            zero += p->refs[b] == 0;
            only += e >= 0 && p->refs[b] == 1;
        }
        for (uint32_t i = 0; i < p->n_free; i++) bad += p->refs[p->free_list[i]] != 0 || p->cached[p->free_list[i]] >= 0;
        for (int32_t b = p->lru_head, prev = -1; b >= 0 && lru <= p->n_blocks; prev = b, b = p->lru_next[b], lru++)
            bad += p->lru_prev[b] != prev || p->cached[b] < 0 || p->refs[b] != 1;
        CHECK(bad == 0 && zero == p->n_free && only == lru && lru == p->n_lru && names == 0 && content == 0,
              "%s: pool %d: %u counts, aliases or links wrong, %u blocks unheld for %u free, %u only in the table for "
              "%u in the eviction order (n_lru %u), %u not named back, %u slots not their prefix's", what, pi, bad, zero,
              p->n_free, only, lru, p->n_lru, names, content);
        free(cnt);
    }
    uint32_t entries = 0, empty = 0, back = 0;
    for (uint64_t h = 0; h <= kv->prefix.mask && kv->prefix.cap; h++)
        for (int32_t i = kv->prefix.bucket[h]; i >= 0; i = kv->prefix.e[i].next) {
            const prefix_entry *e = &kv->prefix.e[i];
            entries++;
            empty += e->blk[KV_FULL] < 0 && e->blk[KV_RING] < 0;
            for (int pi = 0; pi < KV_POOLS; pi++) back += e->blk[pi] >= 0 && kv->pool[pi].cached[e->blk[pi]] != i;
        }
    CHECK(entries == kv->prefix.n && empty == 0 && back == 0, "%s: %u entries listed for %u, %u without a block, %u "
          "blocks not naming their entry", what, entries, kv->prefix.n, empty, back);
}

static void make_kv(kv_cache *kv, uint32_t full_nb, uint32_t ring_nb)
{
    static const uint32_t dims[2] = { 2, 2 }, win[2] = { WIN, 0 };
    kv_config c = { 2, dims, win, NSEQ, CTX, CHUNK, ENGINE_KV_F16, NULL, NULL, 0, 0 };
    uint32_t blocks[KV_POOLS] = { full_nb, ring_nb };
    if (kv_create(kv, &RT, &c, blocks, err, sizeof err) || kv_prefix_on(kv, 0x5eedull, err, sizeof err)) {
        printf("FAIL kv_create: %s\n", err);
        exit(1);
    }
    for (int l = 0; l < 2; l++)
        for (int kvi = 0; kvi < 2; kvi++) {
            size_t n = (size_t)blocks[kv->layer_pool[l]] * KV_BLOCK;
            mir[l][kvi] = realloc(mir[l][kvi], n * 4);
            memset(mir[l][kvi], 0xff, n * 4);
        }
    mirror_write(kv);
}

/* a new sequence on the longest usable prefix of toks[0, n), its reads checked */
static int start(kv_cache *kv, const int32_t *toks, uint32_t n, uint32_t *cached, const char *what)
{
    int s = kv_seq_new_prefix(kv, toks, n, cached);
    CHECK(s >= 0, "%s: no slot", what);
    if (s < 0) return s;
    CHECK(*cached % KV_BLOCK == 0 && (*cached == 0 || *cached < n) && kv->seq_len[s] == (int32_t)*cached,
          "%s: %u cached of %u, seq_len %d", what, *cached, n, kv->seq_len[s]);
    mirror_read(kv);
    if (*cached) check_reads(kv, s, toks, *cached, *cached, what);
    return s;
}

/* toks[from, to) in steps of up to CHUNK */
static int prefill(kv_cache *kv, int s, const int32_t *toks, uint32_t to, const char *what)
{
    while ((uint32_t)kv->seq_len[s] < to) {
        uint32_t n = to - (uint32_t)kv->seq_len[s];
        if (step(kv, s, toks, n < CHUNK ? n : CHUNK, what)) return -1;
    }
    return 0;
}

static int32_t doc[NDOC][CTX];

static void test_prefix_reuse(void)
{
    kv_cache kv;
    make_kv(&kv, 60, 40);
    uint32_t got;
    int a = start(&kv, doc[0], 300, &got, "first prompt");
    CHECK(got == 0, "an empty cache reused %u tokens", got);
    prefill(&kv, a, doc[0], 300, "first prompt");
    kv_seq_free(&kv, a);
    check_tables(&kv, "first prompt freed");
    int32_t t[CTX];
    const struct { uint32_t shared, n, want; } cases[] = {
        { 300, 300, 288 }, { 100, 120, 96 }, { 65, 65, 64 }, { 64, 64, 32 }, { 31, 200, 0 }, { 300, 33, 32 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        memcpy(t, doc[0], sizeof t);
        for (uint32_t p = cases[i].shared; p < CTX; p++) t[p] = doc[1][p];
        char what[64];
        snprintf(what, sizeof what, "%u shared of %u", cases[i].shared, cases[i].n);
        int s = start(&kv, t, cases[i].n, &got, what);
        CHECK(got == cases[i].want, "%s: %u reused, want %u", what, got, cases[i].want);
        prefill(&kv, s, t, cases[i].n + 40 < CTX ? cases[i].n + 40 : CTX, what);
        kv_seq_free(&kv, s);
        check_tables(&kv, what);
    }
    /* other prompts take the ring pool: the first prompt's ring blocks go, least recently released first */
    for (int d = 1; d < NDOC; d++)
        for (int r = 0; r < 3; r++) {
            int s = start(&kv, doc[d], 10, &got, "other prompt");
            prefill(&kv, s, doc[d], 200 + 100 * (uint32_t)r, "other prompt");
            kv_seq_free(&kv, s);
        }
    check_tables(&kv, "after the ring evictions");
    int s = start(&kv, doc[0], 300, &got, "after the ring evictions");
    CHECK(got < 288, "reused %u tokens though the ring blocks were evicted", got);
    printf("  after the ring evictions: %u tokens reused (full blocks kept, ring blocks gone)\n", got);
    prefill(&kv, s, doc[0], 400, "after the ring evictions");
    kv_seq_free(&kv, s);
    check_tables(&kv, "end");
    kv_destroy(&kv);
}

static void test_prefix_steal(void)
{
    kv_cache kv;
    uint32_t ring = kv_ring_blocks(WIN, CHUNK, CTX / KV_BLOCK), got;
    make_kv(&kv, 60, ring);
    int s = start(&kv, doc[2], 500, &got, "steal");
    CHECK(prefill(&kv, s, doc[2], 500, "steal") == 0, "a ring pool of one ring failed a sequence the table shares it with");
    check_tables(&kv, "steal");
    CHECK(kv.pool[KV_RING].n_free == 0 && kv.pool[KV_RING].n_lru == 0, "ring pool: %u free, %u evictable",
          kv.pool[KV_RING].n_free, kv.pool[KV_RING].n_lru);
    kv_seq_free(&kv, s);
    s = start(&kv, doc[2], 500, &got, "steal, again");
    printf("  one ring's pool: %u tokens reused\n", got);
    prefill(&kv, s, doc[2], 520, "steal, again");
    kv_seq_free(&kv, s);
    check_tables(&kv, "steal end");
    kv_destroy(&kv);
}

static void test_prefix_walk(void)
{
    kv_cache kv;
    uint32_t ring = kv_ring_blocks(WIN, CHUNK, CTX / KV_BLOCK);
    make_kv(&kv, 45, NSEQ * ring + 4);
    static int32_t toks[NSEQ][CTX];
    uint32_t prompt[NSEQ], target[NSEQ], starts = 0, reused = 0, forks = 0, fails = 0, hits = 0, aborts = 0,
             retries = 0;
    for (int op = 0; starts < 2000 && op < 100000 && !check_failures_here; op++) {
        int s = (int)irand(NSEQ);
        char what[64];
        snprintf(what, sizeof what, "op %d", op);
        if (kv.seq_len[s] < 0) {
            int src = (int)irand(NSEQ);
            if (irand(4) == 0 && kv.seq_len[src] > 0) { /* a fork, going its own way after a few tokens */
                int f = kv_seq_fork(&kv, src);
                uint32_t len = (uint32_t)kv.seq_len[src];
                memcpy(toks[f], toks[src], sizeof toks[f]);
                for (uint32_t p = len + irand(3); p < CTX; p++) toks[f][p] = (int32_t)irand(NTOK);
                prompt[f] = len;
                target[f] = len + irand(CTX - len + 1);
                forks++;
            } else {
                int d = (int)irand(NDOC);
                uint32_t x = irand(3) ? CTX : irand(CTX), got;
                int32_t t[CTX];
                for (uint32_t p = 0; p < CTX; p++) t[p] = p < x ? doc[d][p] : (int32_t)irand(NTOK);
                uint32_t n = 1 + irand(CTX - 1);
                int f = start(&kv, t, n, &got, what);
                if (f < 0) break;
                memcpy(toks[f], t, sizeof t);
                prompt[f] = n;
                target[f] = n + irand(CTX - n + 1);
                starts++;
                reused += got;
                hits += got > 0;
            }
        } else if (irand(16) == 0 || (uint32_t)kv.seq_len[s] >= target[s]) {
            kv_seq_free(&kv, s);
        } else {
            uint32_t len = (uint32_t)kv.seq_len[s], n = len < prompt[s] ? 1 + irand(irand(4) ? CHUNK : 6 * CHUNK)
                                                                  : 1 + irand(4);
            if (len < prompt[s] && n > prompt[s] - len) n = prompt[s] - len;
            if (len + n > target[s]) n = target[s] - len;
            int abort_after = n > CHUNK && irand(16) == 0 ? 1 + (int)irand((n - 1) / CHUNK) : -1;
            int rc = step_abort(&kv, s, toks[s], n, abort_after, what);
            if (rc && abort_after == 1) { /* one chunk in: the ring lost nothing, the step goes again */
                check_tables(&kv, what);
                rc = step(&kv, s, toks[s], n, what);
                retries++;
            }
            if (rc) { kv_seq_free(&kv, s); fails++; }
            aborts += abort_after > 0;
        }
        check_tables(&kv, what);
    }
    printf("  %u starts (%u on a cached prefix, %u tokens reused), %u forks, %u failed steps, %u aborted mid-way (%u "
           "gone again), %u table entries\n", starts, hits, reused, forks, fails, aborts, retries, kv.prefix.n);
    CHECK(hits > 100 && forks > 100 && fails > 0 && aborts > 10 && retries > 5, "the walk did not cover reuse (%u), "
          "forks (%u), full pools or aborts (%u), aborted steps (%u), steps gone again (%u)", hits, forks, fails, aborts,
          retries);
    for (int s = 0; s < NSEQ; s++) kv_seq_free(&kv, s);
    check_tables(&kv, "all freed");
    CHECK(kv.pool[KV_FULL].n_free + kv.pool[KV_FULL].n_lru == kv.pool[KV_FULL].n_blocks &&
          kv.pool[KV_RING].n_free + kv.pool[KV_RING].n_lru == kv.pool[KV_RING].n_blocks,
          "blocks held with no sequence: full %u of %u, ring %u of %u",
          kv.pool[KV_FULL].n_blocks - kv.pool[KV_FULL].n_free - kv.pool[KV_FULL].n_lru, kv.pool[KV_FULL].n_blocks,
          kv.pool[KV_RING].n_blocks - kv.pool[KV_RING].n_free - kv.pool[KV_RING].n_lru, kv.pool[KV_RING].n_blocks);
    kv_destroy(&kv);
}

int main(void)
{
    const char *seed = getenv("CLGEMMA_TEST_SEED");
    uint64_t s0 = seed && *seed ? strtoull(seed, NULL, 0) : (uint64_t)time(NULL);
    printf("seed %llu (replay: CLGEMMA_TEST_SEED=%llu)\n", (unsigned long long)s0, (unsigned long long)s0);
    rs = s0;
    if (rt_create(&RT, NULL, 0, err, sizeof err)) { printf("FAIL setup: rt_create: %s\n", err); return 1; }
    for (int d = 0; d < NDOC; d++)
        for (int p = 0; p < CTX; p++) doc[d][p] = (int32_t)irand(NTOK);
    RUN_TEST(test_prefix_reuse);
    RUN_TEST(test_prefix_steal);
    RUN_TEST(test_prefix_walk);
    for (int l = 0; l < 2; l++) { free(mir[l][0]); free(mir[l][1]); }
    rt_destroy(&RT);
    CHECK_EXIT();
}
