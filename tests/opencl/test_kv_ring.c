/* test_kv_ring.c — the KV cache's block tables (opencl/kv.c): sliding-window layers in a ring of
 * blocks per sequence, full-attention layers paged on demand.
 *
 * test_ring_size: kv_ring_blocks against brute force: for every window and chunk size in a range
 *   and every start offset in a block, the keys a chunk needs at once (the window before its first
 *   token through its last token) fit the ring, and one block fewer would not fit for some offset.
 * test_tables: kv_reserve / kv_trim / kv_seq_free on several sequences: ring entry b is ring entry
 *   b % ring, no physical block is held twice, blocks come back on trim and free, a full pool fails
 *   and undoes cleanly.
 * test_fork_tables: kv_seq_fork and copy on write over random new / fork / grow / free operations
 *   on four slots: every block's count equals the table entries holding it (a ring's own entries),
 *   the blocks counted zero are exactly the free ones, the blocks a reserve writes into are its
 *   sequence's alone, each pending copy goes from a block to a new one of the same pool, a copy
 *   into a freed block is dropped, kv_sync empties the list, and everything is free at the end.
 * test_ring_attention: sequences several times the window long, prefilled in chunks of up to the
 *   ring's chunk size and then decoded 1-4 tokens per step, several at once in one batch (as
 *   engine_step builds it), a sequence freed and its slot reused mid-way. Each step reserves through
 *   kv.c and runs op_qkv_attention (qkv_rope + split-KV on PoCL; attn_decq, attn_dec, attn_fa or
 *   attn_flash on NVIDIA) on a sliding layer (ring) and a full layer; every output is checked
 *   against a float64 softmax over the keys each token may see, kept in host memory for the whole
 *   sequence (tolerance TOL_RED, TOL_MMA where the tensor-core kernels run). Unwritten cache slots
 *   hold NaN, so a read of a slot the ring does not hold shows. */
#include "kernels_fixture.h"
#include "kv_holders.h"

/* ------------------------------------------------------------------ ring size */

/* 1 if a ring of r blocks keeps the keys of a chunk of t tokens from first on, with the window w
 * before each: the cache slots (table entry (p / KV_BLOCK) % r, p % KV_BLOCK) of positions
 * [first - w + 1, first + t - 1] are all distinct */
static int ring_holds(uint32_t r, uint32_t w, uint32_t t, uint64_t first)
{
    static uint64_t owner[64 * KV_BLOCK];
    uint64_t lo = first + 1 > w ? first + 1 - w : 0;
    for (uint32_t i = 0; i < r * KV_BLOCK; i++) owner[i] = UINT64_MAX;
    for (uint64_t p = lo; p < first + t; p++) {
        uint64_t slot = (p / KV_BLOCK) % r * KV_BLOCK + p % KV_BLOCK;
        if (owner[slot] != UINT64_MAX) return 0;
        owner[slot] = p;
    }
    return 1;
}

static void test_ring_size(void)
{
    reseed(__func__);
    size_t bad = 0, loose = 0, pairs = 0;
    for (uint32_t w = 1; w <= 400; w += 3)
        for (uint32_t t = 1; t <= 200 && w + t < 60 * KV_BLOCK; t += 7, pairs++) {
            uint32_t r = kv_ring_blocks(w, t, 1u << 20), tight = 1;
            for (uint64_t first = 1000; first < 1000 + 2 * KV_BLOCK; first++) {
                bad += !ring_holds(r, w, t, first);
                tight &= r == 1 || !ring_holds(r - 1, w, t, first);
            }
            loose += !tight;
        }
    CHECK(bad == 0, "%zu (window, chunk, start) cases lose a key kv_ring_blocks' ring must keep", bad);
    CHECK(loose == 0, "%zu of %zu (window, chunk) pairs would fit a ring one block smaller", loose, pairs);
    CHECK(kv_ring_blocks(512, 2048, 8) == 8, "a ring is not capped at the context's blocks");
}

/* ------------------------------------------------------------------ tables */

/* every held block of a pool once, ring entries aliasing their ring; returns the blocks held */
static uint32_t check_pool(const kv_cache *kv, int pi, const char *what)
{
    const kv_pool *p = &kv->pool[pi];
    char *seen = calloc(p->n_blocks, 1);
    uint32_t held = 0, dup = 0, alias = 0, range = 0;
    for (uint32_t s = 0; s < kv->n_seq; s++) {
        const int32_t *row = p->table + (size_t)s * kv->max_blocks;
        for (uint32_t b = 0; b < p->seq_blocks[s]; b++) {
            if (p->ring && b >= p->ring) { alias += row[b] != row[b % p->ring]; continue; }
            if (row[b] < 0 || (uint32_t)row[b] >= p->n_blocks) { range++; continue; }
            dup += seen[row[b]]++ != 0;
            held++;
        }
    }
    CHECK(dup == 0 && alias == 0 && range == 0, "%s: pool %d: %u blocks held twice, %u ring entries not aliasing "
          "their ring, %u out of range", what, pi, dup, alias, range);
    CHECK(held + p->n_free == p->n_blocks, "%s: pool %d: %u held + %u free != %u blocks", what, pi, held, p->n_free,
          p->n_blocks);
    free(seen);
    return held;
}

/* random growth of 3 sequences over pools of full_nb and ring_nb blocks; a reserve that fails is
 * undone and the sequence restarted, as engine_step and its caller would */
static void tables_walk(uint32_t full_nb, uint32_t ring_nb)
{
    const uint32_t dims[4] = { 64, 128, 0, 64 }, win[4] = { 40, 0, 40, 0 }; /* layer 2 reads layer 0's cache */
    kv_config c = { 4, dims, win, 3, 640, 24, ENGINE_KV_F16, NULL, NULL, 0, 0 };
    uint32_t ring = kv_ring_blocks(40, 24, 20), blocks[KV_POOLS] = { full_nb, ring_nb };
    kv_cache kv;
    if (kv_create(&kv, &RT, &c, blocks, err, sizeof err)) die("kv_create");
    CHECK(kv.layer_pool[0] == KV_RING && kv.layer_pool[1] == KV_FULL && kv.layer_pool[3] == KV_FULL &&
              kv.pool[KV_RING].ring == ring && kv.pool[KV_RING].n_blocks == ring_nb &&
              kv.pool[KV_FULL].n_blocks == full_nb && kv.pool[KV_FULL].ring == 0,
          "layer pools %d %d %d, pools of %u / %u blocks", kv.layer_pool[0], kv.layer_pool[1], kv.layer_pool[3],
          kv.pool[KV_FULL].n_blocks, kv.pool[KV_RING].n_blocks);
    int s0 = kv_seq_new(&kv), s1 = kv_seq_new(&kv), s2 = kv_seq_new(&kv);
    CHECK(s0 == 0 && s1 == 1 && s2 == 2 && kv_seq_new(&kv) == -1, "sequence slots %d %d %d", s0, s1, s2);
    uint32_t len[3] = { 0, 0, 0 }, fails = 0;
    for (int step = 0; step < 200 && !check_failures_here; step++) {
        int s = (int)irand(3);
        uint32_t n = 1 + irand(24), want = len[s] + n;
        if (want > 640) continue;
        uint32_t free0[KV_POOLS] = { kv.pool[KV_FULL].n_free, kv.pool[KV_RING].n_free };
        if (kv_reserve(&kv, s, want)) {
            kv_trim(&kv, s, len[s]);
            /* it failed because a pool had fewer free blocks than the growth needs, and the undo
             * gave back exactly what the attempt took */
            uint32_t b0 = (len[s] + KV_BLOCK - 1) / KV_BLOCK, b1 = (want + KV_BLOCK - 1) / KV_BLOCK;
            uint32_t ring_need = (b1 < ring ? b1 : ring) - (b0 < ring ? b0 : ring);
            CHECK(free0[KV_FULL] < b1 - b0 || free0[KV_RING] < ring_need, "reserve failed with %u / %u blocks free "
                  "for %u / %u", free0[KV_FULL], free0[KV_RING], b1 - b0, ring_need);
            CHECK(kv.pool[KV_FULL].n_free == free0[KV_FULL] && kv.pool[KV_RING].n_free == free0[KV_RING],
                  "undo left %u / %u free, had %u / %u", kv.pool[KV_FULL].n_free, kv.pool[KV_RING].n_free,
                  free0[KV_FULL], free0[KV_RING]);
            kv_seq_free(&kv, s);
            CHECK(kv_seq_new(&kv) == s, "freed slot %d not reused", s);
            len[s] = 0;
            fails++;
        } else {
            len[s] = want;
            kv.seq_len[s] = (int32_t)want;
        }
        check_pool(&kv, KV_FULL, "after a step");
        uint32_t held = check_pool(&kv, KV_RING, "after a step"), want_held = 0;
        for (int i = 0; i < 3; i++) {
            uint32_t b = (len[i] + KV_BLOCK - 1) / KV_BLOCK;
            want_held += b < ring ? b : ring;
        }
        CHECK(held == want_held, "ring pool holds %u blocks, sequences need %u", held, want_held);
    }
    CHECK(fails > 0, "the pools (%u / %u blocks) never ran out", full_nb, ring_nb);
    CHECK(kv_sync(&kv, &RT, err, sizeof err) == 0, "kv_sync: %s", err);
    for (int s = 0; s < 3; s++) kv_seq_free(&kv, s);
    CHECK(kv.pool[KV_FULL].n_free == full_nb && kv.pool[KV_RING].n_free == ring_nb,
          "blocks held after freeing every sequence: %u / %u", full_nb - kv.pool[KV_FULL].n_free,
          ring_nb - kv.pool[KV_RING].n_free);
    kv_destroy(&kv);
}

static void test_tables(void)
{
    reseed(__func__);
    const uint32_t dims[4] = { 64, 128, 0, 64 }, win[4] = { 40, 0, 40, 0 };
    kv_config c = { 4, dims, win, 3, 640, 24, ENGINE_KV_F16, NULL, NULL, 0, 0 };
    kv_sizes sz = kv_plan(&c);
    uint32_t ring = kv_ring_blocks(40, 24, 20);
    CHECK(sz.ring_blocks == ring && sz.full_per_token == 2 * 2 * (128 + 64) &&
              sz.ring_per_seq == 2ull * 2 * 64 * ring * KV_BLOCK && sz.full_dim_max == 128 && sz.ring_dim_max == 64,
          "kv_plan: ring %u blocks, %llu bytes per token, %llu per sequence", sz.ring_blocks,
          (unsigned long long)sz.full_per_token, (unsigned long long)sz.ring_per_seq);
    tables_walk(30, 3 * ring);      /* the full pool runs out */
    tables_walk(3 * 20, 2 * ring);  /* the ring pool runs out */
    /* a window as long as the context is a full layer: no ring pool at all */
    const uint32_t wide[4] = { 640, 0, 640, 0 };
    kv_config c2 = { 4, dims, wide, 3, 640, 24, ENGINE_KV_F16, NULL, NULL, 0, 0 };
    kv_sizes s2z = kv_plan(&c2);
    CHECK(s2z.ring_blocks == 0 && s2z.ring_per_seq == 0 && s2z.full_per_token == 2 * 2 * (128 + 64 + 64),
          "window covering the context: ring %u blocks", s2z.ring_blocks);
}

/* ------------------------------------------------------------------ forks */

/* counts against the tables, the free list against the zero counts; returns the blocks held */
static uint32_t check_refs(const kv_cache *kv, int pi, const char *what)
{
    const kv_pool *p = &kv->pool[pi];
    uint32_t bad, held = 0, freed = 0, *cnt = kv_holders(kv, pi, &bad);
    for (uint32_t b = 0; b < p->n_blocks; b++) { bad += cnt[b] != p->refs[b]; held += cnt[b] > 0; }
    for (uint32_t i = 0; i < p->n_free; i++) freed += cnt[p->free_list[i]] == 0;
    CHECK(bad == 0 && freed == p->n_free && held + p->n_free == p->n_blocks, "%s: pool %d: %u counts or aliases wrong, "
          "%u of %u free blocks unheld, %u held", what, pi, bad, freed, p->n_free, held);
    free(cnt);
    return held;
}

static void test_fork_tables(void)
{
    reseed(__func__);
    const uint32_t dims[3] = { 64, 128, 64 }, win[3] = { 40, 0, 40 };
    kv_config c = { 3, dims, win, 4, 640, 24, ENGINE_KV_F16, NULL, NULL, 0, 0 };
    uint32_t ring = kv_ring_blocks(40, 24, 20), blocks[KV_POOLS] = { 50, 4 * ring };
    kv_cache kv;
    if (kv_create(&kv, &RT, &c, blocks, err, sizeof err)) die("kv_create");
    uint32_t forks = 0, grows = 0, copies = 0, dropped = 0;
    /* 600 operations, then on until each kind the final check asks for has happened (a random walk may
     * not drop a pending copy in 600: seed 3148454317) */
    for (int op = 0; (op < 600 || forks <= 20 || copies <= 20 || !dropped) && op < 20000 && !check_failures_here; op++) {
        int s = (int)irand(4), live = kv.seq_len[s] >= 0;
        uint32_t r = irand(10);
        char what[64];
        snprintf(what, sizeof what, "op %d", op);
        if (!live) {
            int src = (int)irand(4);
            int got = r < 6 && kv.seq_len[src] >= 0 ? kv_seq_fork(&kv, src) : kv_seq_new(&kv);
            CHECK(got >= 0, "%s: no slot", what);
            if (got >= 0 && r < 6 && kv.seq_len[src] >= 0) {
                CHECK(kv.seq_len[got] == kv.seq_len[src], "%s: fork length %d of %d", what, kv.seq_len[got],
                      kv.seq_len[src]);
                forks++;
            }
        } else if (r == 0) {
            uint32_t before = kv.n_copies;
            kv_seq_free(&kv, s);
            dropped += before - kv.n_copies;
        } else if (r == 1) {
            CHECK(kv_sync(&kv, &RT, err, sizeof err) == 0 && kv.n_copies == 0, "%s: kv_sync: %s", what, err);
        } else {
            uint32_t len = (uint32_t)kv.seq_len[s], want = len + 1 + irand(r < 5 ? 40 : 3);
            if (want > 640) { kv_seq_free(&kv, s); continue; }
            uint32_t before = kv.n_copies;
            if (kv_reserve(&kv, s, want)) {
                kv_trim(&kv, s, len);
                kv_seq_free(&kv, s); /* as the scheduler does with a step that found the cache full */
            } else {
                kv.seq_len[s] = (int32_t)want;
                grows++;
                for (int pi = 0; pi < KV_POOLS; pi++) { /* what the step writes is s's alone */
                    const kv_pool *p = &kv.pool[pi];
                    for (uint32_t b = len / KV_BLOCK; b <= (want - 1) / KV_BLOCK; b++) {
                        int32_t blk = p->table[(size_t)s * kv.max_blocks + b];
                        CHECK(p->refs[blk] == 1, "%s: sequence %d writes block %d (pool %d) held %u times", what, s,
                              blk, pi, p->refs[blk]);
                    }
                }
                for (uint32_t i = before; i < kv.n_copies; i++) {
                    const kv_copy *cp = &kv.copies[i];
                    CHECK(cp->src != cp->dst && kv.pool[cp->pool].refs[cp->dst] == 1 && kv.pool[cp->pool].refs[cp->src] >= 1,
                          "%s: copy %d -> %d in pool %d", what, cp->src, cp->dst, cp->pool);
                }
                copies += kv.n_copies - before;
            }
        }
        check_refs(&kv, KV_FULL, what);
        check_refs(&kv, KV_RING, what);
    }
    printf("  %u forks, %u reserves, %u copies on write, %u dropped with their block\n", forks, grows, copies, dropped);
    CHECK(forks > 20 && copies > 20 && dropped > 0, "the walk did not cover forks (%u), copies (%u), drops (%u)", forks,
          copies, dropped);
    for (int s = 0; s < 4; s++) kv_seq_free(&kv, s);
    CHECK(kv.pool[KV_FULL].n_free == 50 && kv.pool[KV_RING].n_free == 4 * ring && kv.n_copies == 0,
          "held at the end: %u full, %u ring, %u copies", 50 - kv.pool[KV_FULL].n_free, 4 * ring - kv.pool[KV_RING].n_free,
          kv.n_copies);
    kv_destroy(&kv);
}

/* ------------------------------------------------------------------ attention through the ring */

enum { NSEQ = 3, NL = 2, HD = 256, NH = 2, NKV = 1, WIN = 40, CHUNK = 20, CTX = 640 };

typedef struct ref_seq {
    int live;
    uint32_t len, target;         /* tokens so far; prefill until this many, then decode */
    double *k[NL], *v[NL];        /* [CTX][NKV][HD] the keys and values as the cache stores them (half) */
} ref_seq;

/* float64 softmax attention of one query row over positions [lo, pos] */
static void ring_ref(const ref_seq *r, int l, const double *q, int pos, int lo, uint32_t kh, double *out)
{
    double s[CTX], mx = -INFINITY, den = 0;
    for (int j = lo; j <= pos; j++) {
        const double *k = r->k[l] + ((size_t)j * NKV + kh) * HD;
        double d = 0;
        for (int i = 0; i < HD; i++) d += q[i] * k[i];
        s[j] = d * 0.0625;
        if (s[j] > mx) mx = s[j];
    }
    for (int i = 0; i < HD; i++) out[i] = 0;
    for (int j = lo; j <= pos; j++) {
        double e = exp(s[j] - mx);
        den += e;
        const double *v = r->v[l] + ((size_t)j * NKV + kh) * HD;
        for (int i = 0; i < HD; i++) out[i] += e * v[i];
    }
    for (int i = 0; i < HD; i++) out[i] /= den;
}

static void test_ring_attention(void)
{
    reseed(__func__);
    const uint32_t dims[NL] = { NKV * HD, NKV * HD }, win[NL] = { WIN, 0 };
    kv_config c = { NL, dims, win, NSEQ, CTX, CHUNK, ENGINE_KV_F16, NULL, NULL, 0, 0 };
    kv_cache kv;
    uint32_t max_blocks = CTX / KV_BLOCK;
    uint32_t blocks[KV_POOLS] = { NSEQ * max_blocks, NSEQ * kv_ring_blocks(WIN, CHUNK, max_blocks) };
    if (kv_create(&kv, &RT, &c, blocks, err, sizeof err)) die("kv_create");
    uint32_t ring = kv.pool[KV_RING].ring;
    CHECK(ring > 0 && ring < max_blocks && kv.layer_pool[0] == KV_RING, "no ring (%u blocks)", ring);
    for (int l = 0; l < NL; l++) { /* unwritten slots hold NaN */
        size_t bytes = (size_t)kv.pool[kv.layer_pool[l]].n_blocks * KV_BLOCK * NKV * HD * 2;
        poison16(kv.k[l], bytes);
        poison16(kv.v[l], bytes);
    }
    const uint32_t max_tok = NSEQ * CHUNK;
    float eps = 1e-6f, *freq = make_freq(HD, 1e4), qw[HD], kw[HD];
    for (int i = 0; i < HD; i++) { qw[i] = 1.0f + 0.5f * nrand(); kw[i] = 1.0f + 0.5f * nrand(); }
    size_t part_elems = (size_t)max_tok * NH * HD * (CTX / OPS_ATTN_MIN_CHUNK + 1);
    cl_mem Q = dbuf((size_t)max_tok * NH * HD * 4, NULL), KR = dbuf((size_t)max_tok * NKV * HD * 4, NULL),
           VR = dbuf((size_t)max_tok * NKV * HD * 4, NULL), QW = dbuf(sizeof qw, qw), KW = dbuf(sizeof kw, kw),
           F = dbuf(HD / 2 * 4, freq), P = dbuf(max_tok * 4, NULL), S = dbuf(max_tok * 4, NULL),
           PA = dbuf(part_elems * 4, NULL), PM = dbuf(part_elems / HD * 2 * 4, NULL),
           OUT = dbuf((size_t)max_tok * NH * HD * 4, NULL);
    uint32_t *zero = calloc(part_elems / HD, 4);
    cl_mem CNT = dbuf(part_elems / HD * 4, zero);
    free(zero);
    float *q = malloc((size_t)max_tok * NH * HD * 4), *k = malloc((size_t)max_tok * NKV * HD * 4),
          *v = malloc((size_t)max_tok * NKV * HD * 4), *out = malloc((size_t)max_tok * NH * HD * 4), one[HD];
    double *ref = malloc((size_t)max_tok * NH * HD * 8), *qf = malloc((size_t)max_tok * NH * HD * 8),
           *fk = malloc((size_t)max_tok * NKV * HD * 8), *fv = malloc((size_t)max_tok * NKV * HD * 8);
    float *gk = malloc((size_t)max_tok * NKV * HD * 4), *gv = malloc((size_t)max_tok * NKV * HD * 4);
    size_t cache_bytes[NL];
    for (int l = 0; l < NL; l++) cache_bytes[l] = (size_t)kv.pool[kv.layer_pool[l]].n_blocks * KV_BLOCK * NKV * HD * 2;
    uint16_t *cache_k = malloc(cache_bytes[1] > cache_bytes[0] ? cache_bytes[1] : cache_bytes[0]),
             *cache_v = malloc(cache_bytes[1] > cache_bytes[0] ? cache_bytes[1] : cache_bytes[0]);
    for (int i = 0; i < HD; i++) one[i] = 1;
    ref_seq rs_[NSEQ];
    memset(rs_, 0, sizeof rs_);
    for (int s = 0; s < NSEQ; s++)
        for (int l = 0; l < NL; l++) {
            rs_[s].k[l] = malloc(sizeof(double) * CTX * NKV * HD);
            rs_[s].v[l] = malloc(sizeof(double) * CTX * NKV * HD);
        }
    int32_t pos[NSEQ * CHUNK], seq[NSEQ * CHUNK];
    uint32_t steps = 0, wraps = 0, decode_multi = 0, max_len = 0, reused = 0;
    for (int round = 0; round < 400 && !check_failures_here; round++) {
        /* sequences: start where a slot is free; the longest leaves mid-way once */
        for (int s = 0; s < NSEQ; s++)
            if (!rs_[s].live) {
                int got = kv_seq_new(&kv);
                CHECK(got >= 0, "no free sequence slot");
                if (got < 0) break;
                rs_[got].live = 1;
                rs_[got].len = 0;
                rs_[got].target = 5 * WIN + irand(3 * WIN); /* then decode towards CTX */
            }
        if (round == 150) {
            int s = 0;
            for (int i = 1; i < NSEQ; i++) if (rs_[i].len > rs_[s].len) s = i;
            kv_seq_free(&kv, s);
            rs_[s].live = 0;
            reused++;
            continue;
        }
        /* a batch: each live sequence (random subset) with a prefill chunk or 1-4 decode tokens */
        uint32_t T = 0, max_pos = 0, runs_long = 0;
        int order[NSEQ] = { 0, 1, 2 };
        shuffle(order, NSEQ);
        for (int i = 0; i < NSEQ; i++) {
            int s = order[i];
            ref_seq *r = &rs_[s];
            if (!r->live || irand(4) == 0) continue;
            uint32_t n = r->len < r->target ? 1 + irand(CHUNK) : 1 + irand(4);
            if (r->len < r->target && irand(3) == 0) n = CHUNK;
            if (r->len + n > CTX) { kv_seq_free(&kv, s); r->live = 0; continue; }
            if (kv_reserve(&kv, s, r->len + n)) { CHECK(0, "kv_reserve failed at %u + %u", r->len, n); break; }
            if (n >= OPS_FLASH_MIN_RUN) runs_long = 1;
            if (r->len >= r->target && n > 1) decode_multi++;
            for (uint32_t j = 0; j < n; j++, T++) {
                pos[T] = (int32_t)(r->len + j);
                seq[T] = s;
                if ((uint32_t)pos[T] > max_pos) max_pos = (uint32_t)pos[T];
            }
        }
        if (check_failures_here) break;
        if (T == 0) continue;
        if (kv_sync(&kv, &RT, err, sizeof err)) die("kv_sync");
        dwrite(P, pos, T * 4);
        dwrite(S, seq, T * 4);
        for (int l = 0; l < NL; l++) {
            fill_rows(q, T * NH, HD);
            fill_rows(k, T * NKV, HD);
            fill_rows(v, T * NKV, HD);
            /* layer 0: Gemma 4 sliding (Q/K norms with weights, V normed); layer 1: Gemma 3 full (V raw) */
            int vn = l == 0 ? 2 : 0;
            dwrite(Q, q, (size_t)T * NH * HD * 4);
            dwrite(KR, k, (size_t)T * NKV * HD * 4);
            dwrite(VR, v, (size_t)T * NKV * HD * 4);
            kv_view kk = kv_layer_k(&kv, l), vv = kv_layer_v(&kv, l);
            attn_layer al = { NH, NKV, HD, (int)win[l], 0.0625f, 0.0f, &kk, &vv };
            attn_batch ab = { Q, OUT, P, S, seq, T, max_pos, PA, PM, CNT, part_elems, HD, NULL, 0 };
            qkv_raw raw = { KR, VR, QW, KW, F, 1, vn, eps, HD };
            poison(OUT, (size_t)T * NH * HD * 4);
            OPOK(op_qkv_attention(&O, &raw, &ab, &al));
            dread(OUT, out, (size_t)T * NH * HD * 4);
            /* the fresh keys and values where the host table puts them, against float64 (TOL_HALF);
             * as read they join the history the reference attends over, so a later overwrite of a
             * slot still in some token's window shows as a wrong output */
            const kv_pool *pool = &kv.pool[kv.layer_pool[l]];
            dread(kv.k[l], cache_k, cache_bytes[l]);
            dread(kv.v[l], cache_v, cache_bytes[l]);
            for (uint32_t t = 0; t < T; t++) {
                ref_seq *r = &rs_[seq[t]];
                for (uint32_t h = 0; h < NH; h++)
                    norm_rope_ref(q + ((size_t)t * NH + h) * HD, qw, 1, 1, eps, freq, HD, HD, pos[t],
                                  qf + ((size_t)t * NH + h) * HD);
                size_t blk = (size_t)pool->table[(size_t)seq[t] * kv.max_blocks + (uint32_t)pos[t] / KV_BLOCK];
                for (uint32_t h = 0; h < NKV; h++) {
                    size_t o = ((size_t)t * NKV + h) * HD, at = ((size_t)pos[t] * NKV + h) * HD;
                    size_t slot = ((blk * NKV + h) * KV_BLOCK + (uint32_t)pos[t] % KV_BLOCK) * HD;
                    norm_rope_ref(k + o, kw, 1, 1, eps, freq, HD, HD, pos[t], fk + o);
                    norm_rope_ref(v + o, one, vn != 0, 0, eps, NULL, HD, 0, 0, fv + o);
                    for (int i = 0; i < HD; i++) {
                        r->k[l][at + i] = h2d(cache_k[slot + i]);
                        r->v[l][at + i] = h2d(cache_v[slot + i]);
                        gk[o + i] = (float)r->k[l][at + i];
                        gv[o + i] = (float)r->v[l][at + i];
                    }
                }
            }
            char what[200];
            snprintf(what, sizeof what, "step %u layer %d (%s): %u tokens, positions up to %u, ring of %u blocks",
                     steps, l, l ? "full" : "sliding", T, max_pos, ring);
            char w2[240];
            snprintf(w2, sizeof w2, "%s: fresh K in the cache", what);
            check_close(w2, gk, fk, (size_t)T * NKV * HD, TOL_HALF);
            snprintf(w2, sizeof w2, "%s: fresh V in the cache", what);
            check_close(w2, gv, fv, (size_t)T * NKV * HD, TOL_HALF);
            for (uint32_t t = 0; t < T; t++) {
                int lo = l == 0 && pos[t] - WIN + 1 > 0 ? pos[t] - WIN + 1 : 0;
                for (uint32_t h = 0; h < NH; h++)
                    ring_ref(&rs_[seq[t]], l, qf + ((size_t)t * NH + h) * HD, pos[t], lo, h / (NH / NKV),
                             ref + ((size_t)t * NH + h) * HD);
            }
            double tol = runs_long && ops_flash_ok(&O, NH, NKV, HD, ENGINE_KV_F16) ? TOL_MMA : TOL_RED;
            check_close(what, out, ref, (size_t)T * NH * HD, tol);
        }
        for (uint32_t t = 0; t < T; t++) {
            ref_seq *r = &rs_[seq[t]];
            if ((uint32_t)pos[t] + 1 > r->len) r->len = (uint32_t)pos[t] + 1;
            kv.seq_len[seq[t]] = (int32_t)r->len;
            if (r->len > max_len) max_len = r->len;
        }
        steps++;
    }
    wraps = max_len / (ring * KV_BLOCK);
    printf("  %u steps, longest sequence %u tokens (window %d, ring %u tokens: %u wraps), %u multi-token decode "
           "runs, %u slot reused\n", steps, max_len, WIN, ring * KV_BLOCK, wraps, decode_multi, reused);
    CHECK(max_len >= 5 * WIN && wraps >= 2 && decode_multi > 0, "the walk did not cover the ring (%u tokens, %u wraps)",
          max_len, wraps);
    for (int s = 0; s < NSEQ; s++)
        for (int l = 0; l < NL; l++) { free(rs_[s].k[l]); free(rs_[s].v[l]); }
    free(q); free(k); free(v); free(out); free(ref); free(qf); free(freq); free(fk); free(fv); free(gk); free(gv);
    free(cache_k); free(cache_v);
    cl_mem all[] = { Q, KR, VR, QW, KW, F, P, S, PA, PM, OUT, CNT };
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) clReleaseMemObject(all[i]);
    kv_destroy(&kv);
}

int main(void)
{
    if (fixture_setup()) return 1;
    fflush(stdout);
    RUN_TEST(test_ring_size);
    RUN_TEST(test_tables);
    RUN_TEST(test_fork_tables);
    RUN_TEST(test_ring_attention);
    fixture_teardown();
    CHECK_EXIT();
}
