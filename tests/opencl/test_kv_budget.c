/* test_kv_budget.c — what admission and sizing count on: kv_need (opencl/kv.c), kv_fit and the fit
 * report (opencl/fit.c), engine_fit_file against a loaded engine, and a full cache refused cleanly.
 *
 * test_need_bounds_usage: 400 random groups (prompt 1..300 tokens, 1..6 choices, 1..300 more tokens
 *   each) on caches with a full layer, sliding layers of two windows (rings of 2..18 blocks) and a
 *   layer reading another's cache, driven as the scheduler drives them: the prompt prefilled in
 *   chunks, n - 1 forks, then every choice grows a token at a time in a random order (copy on write
 *   as it comes). The blocks held of each pool never exceed kv_need's count; with one choice they
 *   reach it exactly (the count is the usage, not a guess), and with several the full pool reaches
 *   it too once every choice wrote past the prompt.
 * test_fit_plan: kv_fit by hand: given sequences get rings and whole contexts, and the room left
 *   beside them up to as many ring blocks again (the prefix cache's windows); sized ones are the
 *   room over (ring + ENGINE_FIT_TYPICAL tokens) capped; kv_tokens sets the full pool, and one below
 *   a context or beyond the room is an error naming kv_tokens; a room short of one sequence says so;
 *   a room short of every context keeps one whole context.
 * test_fit_file_matches_load: engine_fit_file (metadata and device facts only) against engine_load's
 *   own report for the 270M model, the Gemma 4 fixtures (sliding, shared-KV, MoE) and the Qwen 3.5 ones
 *   (recurrent state per sequence) under several options: the same pools, sequences, bytes per token, state
 *   and recommendation.
 * test_full_cache_step: with every block held, engine_step answers ENGINE_KV_FULL and changes nothing;
 *   the same item runs once blocks come back. */
#include "check.h"
#include "engine.h"
#include "fit.h"
#include "kv.h"
#include "runtime.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODEL_270M "models/gemma-3-270m-q4_k_m.gguf"

static cl_runtime RT;
static char err[512];
static uint64_t rs = 0x6b76627564676574ull;

static uint32_t irand(uint32_t n)
{
    rs = rs * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)((rs >> 33) % n);
}

static uint32_t held(const kv_cache *kv, int p) { return kv->pool[p].n_blocks - kv->pool[p].n_free; }

/* one group on kv: returns 0, or -1 when a reserve failed (the pools were too small: a test bug) */
static int drive_group(kv_cache *kv, uint32_t P, uint32_t T, uint32_t n, uint32_t chunk, uint32_t peak[KV_POOLS])
{
    int seqs[8];
    seqs[0] = kv_seq_new(kv);
    for (uint32_t len = 0; len < P;) { /* the prompt in chunks */
        uint32_t k = P - len < chunk ? P - len : chunk;
        if (kv_reserve(kv, seqs[0], len + k)) return -1;
        kv->seq_len[seqs[0]] = (int32_t)(len += k);
        for (int p = 0; p < KV_POOLS; p++) peak[p] = held(kv, p) > peak[p] ? held(kv, p) : peak[p];
    }
    for (uint32_t c = 1; c < n; c++) seqs[c] = kv_seq_fork(kv, seqs[0]);
    uint32_t left = n * (T - P);
    while (left) { /* a token at a time, the choices in a random order */
        int s = seqs[irand(n)];
        if ((uint32_t)kv->seq_len[s] == T) continue;
        if (kv_reserve(kv, s, (uint32_t)kv->seq_len[s] + 1)) return -1;
        kv->seq_len[s]++;
        left--;
        for (int p = 0; p < KV_POOLS; p++) peak[p] = held(kv, p) > peak[p] ? held(kv, p) : peak[p];
        if (irand(16) == 0 && kv_sync(kv, &RT, err, sizeof err)) return -1;
    }
    if (kv_sync(kv, &RT, err, sizeof err)) return -1;
    for (uint32_t c = 0; c < n; c++) kv_seq_free(kv, seqs[c]);
    return 0;
}

static void test_need_bounds_usage(void)
{
    const uint32_t dims[5] = { 64, 32, 0, 64, 32 }, win[5][5] = {
        { 0, 40, 40, 100, 40 }, { 0, 8, 8, 8, 0 }, { 0, 500, 500, 0, 100 } };
    uint32_t over[KV_POOLS] = { 0 }, loose1 = 0, loose_full = 0, groups = 0;
    for (int cfg = 0; cfg < 3 && !check_failures_here; cfg++) {
        uint32_t chunk = 8 + 24 * (uint32_t)cfg;
        kv_config c = { 5, dims, win[cfg], 6, 640, chunk, ENGINE_KV_F16, NULL, NULL, 0, 0 };
        kv_sizes s = kv_plan(&c);
        uint32_t blocks[KV_POOLS] = { 6 * 20, 6 * (s.ring_blocks ? s.ring_blocks : 1) };
        kv_cache kv;
        if (kv_create(&kv, &RT, &c, blocks, err, sizeof err)) { CHECK(0, "kv_create: %s", err); return; }
        for (int g = 0; g < 140 && !check_failures_here; g++, groups++) {
            uint32_t P = 1 + irand(300), n = 1 + irand(6), T = P + 1 + irand(640 - P > 300 ? 300 : 640 - P);
            uint32_t need[KV_POOLS], peak[KV_POOLS] = { 0, 0 };
            kv_need(&kv.sizes, P, T, n, need);
            if (drive_group(&kv, P, T, n, chunk, peak)) { CHECK(0, "group P %u T %u n %u: a reserve failed", P, T, n); break; }
            for (int p = 0; p < KV_POOLS; p++)
                if (peak[p] > need[p]) {
                    over[p]++;
                    CHECK(0, "cfg %d: P %u T %u n %u: pool %d held %u blocks, kv_need says %u", cfg, P, T, n, p, peak[p],
                          need[p]);
                }
            loose1 += n == 1 && (peak[KV_FULL] != need[KV_FULL] || peak[KV_RING] != need[KV_RING]);
            loose_full += peak[KV_FULL] != need[KV_FULL];
            CHECK(held(&kv, KV_FULL) == 0 && held(&kv, KV_RING) == 0, "blocks left after the group");
        }
        kv_destroy(&kv);
    }
    CHECK(loose1 == 0, "%u single-choice groups held less than kv_need's count", loose1);
    CHECK(loose_full == 0, "%u groups held fewer full blocks than kv_need's count", loose_full);
    printf("%u groups, none over the count\n", groups);
}

static void test_fit_plan(void)
{
    /* 4 layers: full 64 + 128 wide, a sliding one of 64 (window 100), one reading another's */
    const uint32_t dims[4] = { 64, 128, 64, 0 }, win[4] = { 0, 0, 100, 0 };
    kv_config c = { 4, dims, win, 3, 1024, 128, ENGINE_KV_F16, NULL, NULL, 0, 0 };
    kv_sizes s = kv_plan(&c);
    uint64_t fb = 2 * kv_bytes(ENGINE_KV_F16, 64 + 128) * KV_BLOCK, R = (100 + 128 - 1 + 31) / 32;
    uint64_t rb = 2 * kv_bytes(ENGINE_KV_F16, 64) * KV_BLOCK;
    CHECK(s.full_layers == 2 && s.ring_layers == 1 && s.ring_blocks == R && s.full_per_token * KV_BLOCK == fb &&
          s.ring_per_seq == R * rb, "kv_plan: %u full, %u ring layers, ring %u", s.full_layers, s.ring_layers,
          s.ring_blocks);
    kv_fit_in in = { c, 1ull << 30, 1ull << 30, 0, 256, 128 };
    kv_fit_plan p;
    /* the room to spare doubles the ring pool (cached windows), no more */
    CHECK(kv_fit(&in, &p, err, sizeof err) == 0 && p.n_seq == 3 && p.blocks[KV_FULL] == 3 * 32 &&
          p.blocks[KV_RING] == 6 * R && p.bytes == 3 * 32 * fb + 6 * R * rb,
          "given sequences: %u seqs, %u / %u blocks (%s)", p.n_seq, p.blocks[KV_FULL], p.blocks[KV_RING], err);
    in.room = 3 * R * rb + 3 * 32 * fb + 2 * rb + 7;
    CHECK(kv_fit(&in, &p, err, sizeof err) == 0 && p.blocks[KV_RING] == 3 * R + 2 && p.blocks[KV_FULL] == 3 * 32,
          "two blocks to spare: %u / %u blocks (%s)", p.blocks[KV_FULL], p.blocks[KV_RING], err);
    /* sized: room / (ring + 1024 tokens: the context is below ENGINE_FIT_TYPICAL) */
    in.c.n_seq = 0;
    in.room = 10 * (R * rb + 32 * fb) + 5;
    CHECK(kv_fit(&in, &p, err, sizeof err) == 0 && p.n_seq == 10 && p.blocks[KV_FULL] == 10 * 32 &&
          p.blocks[KV_RING] == 10 * R, "sized: %u seqs, %u / %u blocks (%s)", p.n_seq, p.blocks[KV_FULL],
          p.blocks[KV_RING], err);
    in.seq_cap = 7;
    CHECK(kv_fit(&in, &p, err, sizeof err) == 0 && p.n_seq == 7, "capped: %u seqs", p.n_seq);
    /* kv_tokens: the full pool, and the sequences sized from it */
    in.seq_cap = 256;
    in.kv_tokens = 3000;
    CHECK(kv_fit(&in, &p, err, sizeof err) == 0 && p.blocks[KV_FULL] == (3000 + 31) / 32 && p.n_seq == 94 / 32,
          "kv_tokens: %u blocks, %u seqs (%s)", p.blocks[KV_FULL], p.n_seq, err);
    in.kv_tokens = 1000;
    CHECK(kv_fit(&in, &p, err, sizeof err) == -1 && strstr(err, "kv_tokens") && strstr(err, "one context"),
          "kv_tokens below a context: '%s'", err);
    in.kv_tokens = 1u << 30;
    CHECK(kv_fit(&in, &p, err, sizeof err) == -1 && strstr(err, "kv_tokens") && strstr(err, "MiB"),
          "kv_tokens beyond the room: '%s'", err);
    /* a room short of one sequence; then one short of every context but one */
    in.kv_tokens = 0;
    in.c.n_seq = 3;
    in.room = R * rb + 31 * fb;
    CHECK(kv_fit(&in, &p, err, sizeof err) == -1 && strstr(err, "not enough device memory"), "short room: '%s'", err);
    in.room = 3 * R * rb + 32 * fb + 40 * fb;
    CHECK(kv_fit(&in, &p, err, sizeof err) == 0 && p.blocks[KV_RING] == 3 * R && p.blocks[KV_FULL] == 72,
          "room for one context and some: %u / %u blocks", p.blocks[KV_FULL], p.blocks[KV_RING]);
    in.room = 2 * R * rb + 32 * fb;
    CHECK(kv_fit(&in, &p, err, sizeof err) == 0 && p.blocks[KV_RING] == 2 * R && p.blocks[KV_FULL] == 32,
          "rings for two of three sequences: %u / %u blocks", p.blocks[KV_FULL], p.blocks[KV_RING]);
    /* one buffer caps a pool */
    in.room = 1ull << 30;
    in.max_alloc = 40ull * KV_BLOCK * kv_bytes(ENGINE_KV_F16, 128);
    CHECK(kv_fit(&in, &p, err, sizeof err) == 0 && p.blocks[KV_FULL] == 40, "max allocation: %u blocks",
          p.blocks[KV_FULL]);
}

/* the planned figures of two reports */
static int same_plan(const engine_fit *a, const engine_fit *b, char *why, size_t cap)
{
#define SAME(x) if (a->x != b->x) return snprintf(why, cap, #x " %llu / %llu", (unsigned long long)a->x, \
                                                  (unsigned long long)b->x), 0
    SAME(fits); SAME(n_seq); SAME(full_blocks); SAME(ring_blocks); SAME(kv_tokens); SAME(kv_bytes);
    SAME(full_layers); SAME(sliding_layers); SAME(shared_layers); SAME(window); SAME(full_token_bytes);
    SAME(sliding_token_bytes); SAME(ring_tokens); SAME(ring_seq_bytes); SAME(weight_bytes); SAME(host_weight_bytes);
    SAME(kv_room); SAME(n_ctx); SAME(max_batch); SAME(seqs_at_ctx); SAME(seqs_typical); SAME(rec_ctx);
    SAME(rec_seqs); SAME(room_tokens); SAME(state_seq_bytes);
#undef SAME
    return 1;
}

static void test_fit_file_matches_load(void)
{
    static const char *files[] = { MODEL_270M, "tests/fixtures/gemma4_dense.gguf", "tests/fixtures/gemma4_e.gguf",
                                   "tests/fixtures/gemma4_moe_q4_k_m.gguf", "tests/fixtures/qwen35_dense_q4_k_m.gguf",
                                   "tests/fixtures/qwen35_moe_q4_k_m.gguf" };
    static const engine_opts opts[] = { { .n_ctx = 256 }, { .n_ctx = 1024, .max_seqs = 3 },
                                        { .n_ctx = 512, .max_seqs = 6, .kv_tokens = 1024, .max_batch_tokens = 64 } };
    for (size_t f = 0; f < sizeof files / sizeof *files; f++)
        for (size_t o = 0; o < sizeof opts / sizeof *opts; o++) {
            engine_fit want;
            engine *e;
            char why[160];
            if (engine_fit_file(files[f], &opts[o], &want, err, sizeof err)) { CHECK(0, "%s: %s", files[f], err); continue; }
            CHECK(want.fits, "%s opts %zu: does not fit: %s", files[f], o, want.why);
            if (engine_load(&e, files[f], &opts[o], err, sizeof err)) { CHECK(0, "%s: load: %s", files[f], err); continue; }
            const engine_info *in = engine_get_info(e);
            CHECK(same_plan(&want, &in->fit, why, sizeof why), "%s opts %zu: file / load: %s", files[f], o, why);
            CHECK(in->fit.n_seq == (opts[o].max_seqs ? (uint32_t)opts[o].max_seqs : FIT_SEQS_OTHER) ||
                  in->fit.is_gpu, "%s: %u sequences", files[f], in->fit.n_seq);
            engine_kv_stats st;
            engine_kv_usage(e, &st);
            CHECK(st.full_blocks == in->fit.full_blocks && st.ring_blocks == in->fit.ring_blocks,
                  "%s: pools %u / %u, report %u / %u", files[f], st.full_blocks, st.ring_blocks, in->fit.full_blocks,
                  in->fit.ring_blocks);
            engine_destroy(e);
        }
}

static void test_full_cache_step(void)
{
    engine *e;
    engine_opts o = { .n_ctx = 64, .max_seqs = 2, .kv_tokens = 64 };
    if (engine_load(&e, MODEL_270M, &o, err, sizeof err)) { CHECK(0, "load: %s", err); return; }
    int32_t toks[48];
    for (int i = 0; i < 48; i++) toks[i] = 2 + i;
    int a = engine_seq_new(e), b = engine_seq_new(e);
    engine_item ia = { .seq = a, .tokens = toks, .n_tokens = 48 }, ib = { .seq = b, .tokens = toks, .n_tokens = 30 };
    engine_kv_blocks need;
    engine_kv_need(e, 48, 0, 1, &need);
    CHECK(need.full == 2 && need.ring == 0, "need of 48 tokens: %u / %u", need.full, need.ring);
    CHECK(engine_step(e, &ia, 1, err, sizeof err) == 0, "first sequence: %s", err);
    int rc = engine_step(e, &ib, 1, err, sizeof err);
    CHECK(rc == ENGINE_KV_FULL && strstr(err, "KV cache full"), "second sequence: %d '%s'", rc, err);
    CHECK(engine_seq_len(e, b) == 0 && engine_seq_len(e, a) == 48, "lengths %d %d", engine_seq_len(e, a),
          engine_seq_len(e, b));
    engine_seq_free(e, a);
    CHECK(engine_step(e, &ib, 1, err, sizeof err) == 0 && engine_seq_len(e, b) == 30, "after a free: %s", err);
    engine_destroy(e);
}

int main(void)
{
    check_current = "setup";
    if (rt_create(&RT, NULL, 0, err, sizeof err)) { printf("FAIL setup: rt_create: %s\n", err); return 1; }
    RUN_TEST(test_need_bounds_usage);
    RUN_TEST(test_fit_plan);
    RUN_TEST(test_fit_file_matches_load);
    RUN_TEST(test_full_cache_step);
    rt_destroy(&RT);
    CHECK_EXIT();
}
