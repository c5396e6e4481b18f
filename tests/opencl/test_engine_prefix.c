/* test_engine_prefix.c — automatic prefix caching through the engine API (engine_seq_new_prefix):
 * a prompt whose prefix an earlier sequence computed starts on that prefix's KV blocks and computes
 * only the rest, and its last token's logits are the cold prefill's.
 *
 * On the real Gemma 3 270M (models/gemma-3-270m-q4_k_m.gguf: sliding window 512; chunks of 32, so a
 * ring of 17 blocks = 544 tokens, and prompts of 600 tokens wrap it while they are prefilled) and
 * on the Gemma 4 fixture with sliding layers (tests/fixtures/gemma4_dense.gguf: window 8, chunks of
 * 16, a ring of one block). Forward chunks start at the same positions in a cold whole-prompt
 * prefill and in a warm one (block starts are chunk starts), so every comparison is one computation
 * made twice: rows within TOL_ROW, test_engine_fork's tolerance. The argument names the KV cache's
 * type (f16, the default; q8_0, q4): a warm start on quantized blocks, their copies on write and
 * ring copies must equal the cold run on the same type as well; a second argument "gemma4" runs
 * only the fixture (seconds instead of minutes: tests/suites/kv_quant.sh).
 *   test_prefix_hit: P prefilled cold (engine_seq_new, one step); a prompt of P's first block
 *     reuses nothing (its last token is computed), one of a block and a token reuses the block;
 *     two sequences on P's cached prefix (all of it in whole blocks but the last token) and one on
 *     Q, which shares a shorter prefix with P, step only their rest: each last row equals its cold
 *     prefill's (Q's cold prefill comes after, uncached).
 *   test_prefix_decode: those five sequences (blocks shared by up to four of them and the table)
 *     decode greedily in one batch, each warm one fed its cold twin's token: rows within TOL_ROW,
 *     the same greedy tokens, through the ring coming round to shared registered blocks.
 *   test_prefix_evict (Gemma 4 fixture): sequences of other prompts filling every slot take the
 *     pools' blocks (never failing while cached blocks can be evicted); P, started again, reuses
 *     only what is left (maybe nothing), with rows equal to the cold prefill's; at the end, with
 *     every sequence freed, every block is free or cached. */
#include "check.h"
#include "engine.h"
#include "logit_rows.h"
#include "tokenizer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL_ROW 1e-4 /* absolute: one row computed the same way twice (test_engine_fork) */

static engine *E;
static uint32_t V;
static char err[512];
static int NP, NSHARE, NDEC; /* prompt tokens; tokens Q shares with P; decode steps */
static int32_t *P, *Q;
static float *row[8];

static double max_diff(const float *a, const float *b) { return rows_max_diff(a, b, V); }
static int32_t argmax(const float *x) { return rows_argmax(x, V); }

static void step(engine_item *it, int n, const char *what)
{
    CHECK(engine_step(E, it, n, err, sizeof err) == 0, "%s: %s", what, err);
}

/* a sequence stepping toks[from, n) in one step, its last row into out */
static void prefill(int s, const int32_t *toks, int from, int n, float *out, const char *what)
{
    engine_item it = { .seq = s, .tokens = toks + from, .n_tokens = n - from, .logits = out };
    step(&it, 1, what);
}

static int cold(const int32_t *toks, int n, float *out, const char *what)
{
    int s = engine_seq_new(E);
    CHECK(s >= 0, "%s: no slot", what);
    if (s >= 0) prefill(s, toks, 0, n, out, what);
    return s;
}

static int warm(const int32_t *toks, int n, float *out, int *cached, const char *what)
{
    int s = engine_seq_new_prefix(E, toks, n, cached);
    CHECK(s >= 0 && engine_seq_len(E, s) == *cached, "%s: slot %d, %d cached, length %d", what, s, *cached,
          s >= 0 ? engine_seq_len(E, s) : -1);
    if (s >= 0) prefill(s, toks, *cached, n, out, what);
    return s;
}

static double worst; /* the largest difference seen */

static void same_row(const float *got, const float *want, const char *what)
{
    double d = max_diff(got, want);
    if (d > worst) worst = d;
    CHECK(d <= TOL_ROW && argmax(got) == argmax(want), "%s: max |delta| %.3g against the cold prefill, argmax %d / %d",
          what, d, argmax(got), argmax(want));
}

static int S_p, S_w1, S_w2, S_q, S_wq; /* the sequences test_prefix_decode goes on with */

static void test_prefix_hit(void)
{
    engine_kv_stats kv;
    engine_kv_usage(E, &kv);
    int block = (int)kv.block_tokens, c, want = (NP - 1) / block * block, want_q = NSHARE / block * block;
    S_p = cold(P, NP, row[0], "P cold");
    /* the last token is always computed: a one-block prompt reuses nothing, one more token reuses the block */
    int s1 = engine_seq_new_prefix(E, P, block, &c), s2;
    CHECK(s1 >= 0 && c == 0, "a prompt of one cached block reused %d tokens", c);
    engine_seq_free(E, s1);
    s2 = warm(P, block + 1, row[5], &c, "a block and a token");
    s1 = cold(P, block + 1, row[6], "a block and a token, cold");
    CHECK(c == block, "a block and a token: %d reused", c);
    same_row(row[5], row[6], "a block and a token");
    engine_seq_free(E, s1);
    engine_seq_free(E, s2);
    S_w1 = warm(P, NP, row[1], &c, "P warm");
    CHECK(c == want, "P warm: %d tokens reused, want %d", c, want);
    same_row(row[1], row[0], "P warm");
    S_w2 = warm(P, NP, row[2], &c, "P warm again");
    CHECK(c == want, "P warm again: %d tokens reused, want %d", c, want);
    same_row(row[2], row[0], "P warm again");
    S_wq = warm(Q, NP, row[4], &c, "Q warm");
    CHECK(c == want_q, "Q warm (%d tokens shared with P): %d reused, want %d", NSHARE, c, want_q);
    S_q = cold(Q, NP, row[3], "Q cold");
    same_row(row[4], row[3], "Q warm");
    printf("  P: %d of %d tokens reused twice, Q: %d (%d shared)\n", want, NP, want_q, NSHARE);
}

static void test_prefix_decode(void)
{
    /* P's cold sequence leads its warm twins, Q's cold one its warm twin */
    int seqs[5] = { S_p, S_w1, S_w2, S_q, S_wq }, lead[5] = { 0, 0, 0, 3, 3 }, checked = 0;
    int32_t tok[5];
    tok[0] = tok[1] = tok[2] = argmax(row[0]);
    tok[3] = tok[4] = argmax(row[3]);
    for (int st = 0; st < NDEC && !check_failures_here; st++) {
        engine_item it[5];
        for (int i = 0; i < 5; i++) it[i] = (engine_item){ .seq = seqs[i], .tokens = &tok[i], .n_tokens = 1, .logits = row[i] };
        char what[64];
        snprintf(what, sizeof what, "decode step %d", st);
        step(it, 5, what);
        for (int i = 0; i < 5; i++) {
            if (lead[i] == i) continue;
            double d = max_diff(row[i], row[lead[i]]);
            if (d > worst) worst = d;
            CHECK(d <= TOL_ROW && argmax(row[i]) == argmax(row[lead[i]]), "%s: warm sequence %d differs from its cold "
                  "twin by %.3g, greedy %d / %d", what, i, d, argmax(row[i]), argmax(row[lead[i]]));
            checked++;
        }
        for (int i = 0; i < 5; i++) tok[i] = argmax(row[lead[i]]);
    }
    printf("  %d decode rows held to their cold twins; positions up to %d\n", checked, engine_seq_len(E, S_p));
    for (int i = 0; i < 5; i++) engine_seq_free(E, seqs[i]);
    engine_kv_stats kv;
    engine_kv_usage(E, &kv);
    CHECK(kv.full_free == kv.full_blocks && kv.ring_free == kv.ring_blocks && kv.full_cached > 0 &&
          (kv.ring_blocks == 0 || kv.ring_cached > 0), "with no sequence: %u of %u full blocks free (%u cached), %u of "
          "%u ring (%u cached)", kv.full_free, kv.full_blocks, kv.full_cached, kv.ring_free, kv.ring_blocks,
          kv.ring_cached);
}

static void test_prefix_evict(void)
{
    const engine_info *in = engine_get_info(E);
    engine_kv_stats kv0, kv;
    engine_kv_usage(E, &kv0);
    int nseq = 8, len = (int)in->n_ctx - 32, seqs[8];
    int32_t *fill = malloc((size_t)len * sizeof *fill);
    uint64_t rs = 0xf111;
    for (int i = 0; i < nseq; i++) {
        for (int k = 0; k < len; k++) {
            rs = rs * 6364136223846793005ull + 1442695040888963407ull;
            fill[k] = k == 0 ? P[0] : 3 + (int32_t)((rs >> 33) % 757);
        }
        seqs[i] = engine_seq_new(E);
        CHECK(seqs[i] >= 0, "filler %d: no slot", i);
        if (seqs[i] < 0) break;
        engine_item it = { .seq = seqs[i], .tokens = fill, .n_tokens = len };
        step(&it, 1, "filler"); /* never "KV cache full" while cached blocks may go */
    }
    engine_kv_usage(E, &kv);
    printf("  %d fillers of %d tokens: %u of %u full blocks cached before, %u after\n", nseq, len, kv0.full_cached,
           kv0.full_blocks, kv.full_cached);
    for (int i = 0; i < nseq; i++) engine_seq_free(E, seqs[i]);
    int c, s = warm(P, NP, row[1], &c, "P after the fillers");
    int t = cold(P, NP, row[0], "P cold after the fillers");
    same_row(row[1], row[0], "P after the fillers");
    CHECK(c < (NP - 1) / (int)kv.block_tokens * (int)kv.block_tokens, "P reused %d tokens after its blocks were "
          "evicted", c);
    printf("  P after the fillers: %d tokens reused\n", c);
    engine_seq_free(E, s);
    engine_seq_free(E, t);
    s = warm(P, NP, row[1], &c, "P once more");
    CHECK(c == (NP - 1) / (int)kv.block_tokens * (int)kv.block_tokens, "P once more: %d tokens reused", c);
    same_row(row[1], row[0], "P once more");
    engine_seq_free(E, s);
    engine_kv_usage(E, &kv);
    CHECK(kv.full_free == kv.full_blocks && kv.ring_free == kv.ring_blocks, "with no sequence: %u of %u full blocks "
          "free, %u of %u ring", kv.full_free, kv.full_blocks, kv.ring_free, kv.ring_blocks);
    free(fill);
}

static int run_model(const char *path, const engine_opts *o, int np, int nshare, int ndec, int evict)
{
    if (engine_load(&E, path, o, err, sizeof err)) {
        printf("FAIL engine_prefix_load: %s: %s\n", path, err);
        return 1;
    }
    const engine_info *in = engine_get_info(E);
    V = in->n_vocab;
    NP = np;
    NSHARE = nshare;
    NDEC = ndec;
    printf("%s: ring of %u tokens, prompts of %d\n", path, in->kv_ring_tokens, np);
    P = malloc((size_t)np * sizeof *P);
    Q = malloc((size_t)np * sizeof *Q);
    uint64_t rs = 0x5eed;
    for (int i = 0; i < np; i++) {
        rs = rs * 6364136223846793005ull + 1442695040888963407ull;
        P[i] = i == 0 ? tokenizer_bos(engine_tokenizer(E)) : 3 + (int32_t)((rs >> 33) % (V < 760 ? V - 3 : 757));
        rs = rs * 6364136223846793005ull + 1442695040888963407ull;
        Q[i] = i < nshare ? P[i] : 3 + (int32_t)((rs >> 33) % (V < 760 ? V - 3 : 757));
    }
    for (int i = 0; i < 8; i++) row[i] = malloc(V * sizeof(float));
    RUN_TEST(test_prefix_hit);
    RUN_TEST(test_prefix_decode);
    if (evict) RUN_TEST(test_prefix_evict);
    printf("  largest |delta| of a warm row against its cold twin: %.3g\n", worst);
    worst = 0;
    for (int i = 0; i < 8; i++) free(row[i]);
    free(P);
    free(Q);
    engine_destroy(E);
    return 0;
}

int main(int argc, char **argv)
{
    int kv_type = argc > 1 ? engine_kv_type_parse(argv[1]) : ENGINE_KV_F16, all = argc < 3 || !strcmp(argv[2], "all");
    if (kv_type < 0 || (argc > 2 && !all && strcmp(argv[2], "gemma4"))) {
        printf("FAIL engine_prefix_args: usage: test_engine_prefix [f16|q8_0|q4 [all|gemma4]]\n");
        return 1;
    }
    printf("KV cache: %s\n", engine_kv_type_name(kv_type));
    engine_opts g3 = { .n_ctx = 768, .max_seqs = 6, .max_batch_tokens = 32, .kv_type = kv_type };
    engine_opts g4 = { .n_ctx = 512, .max_seqs = 8, .max_batch_tokens = 16, .kv_type = kv_type };
    int rc = all ? run_model("models/gemma-3-270m-q4_k_m.gguf", &g3, 600, 400, 12, 0) : 0;
    rc |= run_model("tests/fixtures/gemma4_dense.gguf", &g4, 200, 100, 100, 1);
    if (rc) return 1;
    CHECK_EXIT();
}
