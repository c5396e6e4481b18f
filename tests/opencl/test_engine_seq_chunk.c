/* test_engine_seq_chunk.c — one sequence's tokens in one forward are capped at engine_fit.seq_chunk
 * (fit_seq_chunk: 512), so a sliding-window ring holds its window and 512 more whatever the forward's
 * size (opencl/fit.h), and a step whose prompts outgrow that is split into forwards that keep the
 * rings intact.
 *
 * On the Gemma 4 fixture (tests/fixtures/gemma4_dense.gguf: sliding window 8), prefix cache off:
 *   test_rings_and_rows: an engine with forwards of 2048 tokens whose sequences are sized from memory
 *     plans rings of 544 tokens (17 blocks: window 8 + 512 - 1, rounded up), not 2080; one step of two
 *     prompts (1,300 and 700 tokens) gives each prompt's last row as an engine with forwards of 64 tokens
 *     gives it prefilling each alone, within TOL and with the same greedy token, and so do 4 decode steps
 *     after. Without the cap the 1,300 tokens would go through one forward and overwrite their own ring:
 *     rows far off. An engine of 2 named sequences, whose rings of whole forwards fit easily, takes a
 *     prompt's 2,048 tokens in one forward (seq_chunk 2048) and gives the same rows.
 * TOL: the same rows through other batch shapes (test_engine_fork's TOL_PATH). */
#include "check.h"
#include "engine.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define FIXTURE "tests/fixtures/gemma4_dense.gguf"
#define TOL 5e-2
#define NA 1300
#define NB 700
#define NDEC 4

static char err[512];

static engine *load(int max_batch, int max_seqs)
{
    engine *e;
    engine_opts o = { .n_ctx = 2048, .max_seqs = max_seqs, .max_batch_tokens = max_batch, .no_prefix_cache = 1 };
    if (engine_load(&e, FIXTURE, &o, err, sizeof err)) { CHECK(0, "load (max batch %d): %s", max_batch, err); return NULL; }
    return e;
}

static int argmax(const float *x, uint32_t n)
{
    int b = 0;
    for (uint32_t i = 1; i < n; i++) if (x[i] > x[b]) b = (int)i;
    return b;
}

static double dist(const float *a, const float *b, uint32_t n)
{
    double d = 0;
    for (uint32_t i = 0; i < n; i++) if (fabs((double)a[i] - b[i]) > d) d = fabs((double)a[i] - b[i]);
    return d;
}

/* rows[s][0] the prompt's last row, rows[s][1 + k] decode step k's, fed dec[s][k]; pick: dec[s][k] is first set
 * to the greedy token of the row before it (the reference's run) */
static void run(engine *e, int together, int pick, const int32_t *const *prompts, const int *lens, int32_t dec[2][NDEC],
                float *rows[2][NDEC + 1], uint32_t V)
{
    int seq[2] = { engine_seq_new(e), engine_seq_new(e) };
    engine_item it[2] = { { 0 } };
    for (int s = 0; s < 2; s++) it[s] = (engine_item){ .seq = seq[s], .tokens = prompts[s], .n_tokens = lens[s], .logits = rows[s][0] };
    if (together) CHECK(engine_step(e, it, 2, err, sizeof err) == 0, "step of both prompts: %s", err);
    else for (int s = 0; s < 2; s++) CHECK(engine_step(e, &it[s], 1, err, sizeof err) == 0, "prompt %d: %s", s, err);
    for (int k = 0; k < NDEC; k++) {
        for (int s = 0; s < 2; s++) {
            if (pick) dec[s][k] = argmax(rows[s][k], V);
            it[s] = (engine_item){ .seq = seq[s], .tokens = &dec[s][k], .n_tokens = 1, .logits = rows[s][1 + k] };
        }
        CHECK(engine_step(e, it, 2, err, sizeof err) == 0, "decode %d: %s", k, err);
    }
    engine_seq_free(e, seq[0]);
    engine_seq_free(e, seq[1]);
}

static void test_rings_and_rows(void)
{
    engine *big = load(2048, 0), *whole = load(2048, 2), *ref = load(64, 2);
    if (!big || !whole || !ref) { engine_destroy(big); engine_destroy(whole); engine_destroy(ref); return; }
    const engine_fit *f = &engine_get_info(big)->fit, *fw = &engine_get_info(whole)->fit;
    CHECK(f->max_batch == 2048 && f->seq_chunk == 512 && f->ring_tokens == 544, "forwards %u, per sequence %u, ring %u",
          f->max_batch, f->seq_chunk, f->ring_tokens);
    CHECK(fw->seq_chunk == 2048, "2 named sequences: per sequence %u, ring %u", fw->seq_chunk, fw->ring_tokens);
    uint32_t V = engine_get_info(big)->n_vocab;
    static int32_t a[NA], b[NB];
    uint32_t x = 12345;
    for (int i = 0; i < NA; i++) { x = x * 1664525u + 1013904223u; a[i] = 3 + (int32_t)((x >> 8) % (V - 3)); }
    for (int i = 0; i < NB; i++) { x = x * 1664525u + 1013904223u; b[i] = 3 + (int32_t)((x >> 8) % (V - 3)); }
    const int32_t *prompts[2] = { a, b };
    int lens[2] = { NA, NB };
    float *want[2][NDEC + 1], *got[2][NDEC + 1];
    for (int s = 0; s < 2; s++)
        for (int k = 0; k <= NDEC; k++) { want[s][k] = malloc(V * sizeof(float)); got[s][k] = malloc(V * sizeof(float)); }
    /* the reference's greedy tokens drive both runs */
    int32_t dec[2][NDEC] = { { 0 } };
    run(ref, 0, 1, prompts, lens, dec, want, V);
    engine *under[2] = { big, whole };
    for (int u = 0; u < 2; u++) {
        run(under[u], 1, 0, prompts, lens, dec, got, V);
        double worst = 0;
        for (int s = 0; s < 2; s++)
            for (int k = 0; k <= NDEC; k++) {
                double d = dist(got[s][k], want[s][k], V);
                if (d > worst) worst = d;
                CHECK(d <= TOL && argmax(got[s][k], V) == argmax(want[s][k], V),
                      "%s: prompt %d row %d: |delta| %.4f, argmax %d vs %d", u ? "whole forwards" : "capped", s, k, d,
                      argmax(got[s][k], V), argmax(want[s][k], V));
            }
        printf("# %s: largest |delta| %.5f (TOL %.2f)\n", u ? "whole forwards" : "capped", worst, TOL);
    }
    for (int s = 0; s < 2; s++)
        for (int k = 0; k <= NDEC; k++) { free(want[s][k]); free(got[s][k]); }
    engine_destroy(big);
    engine_destroy(whole);
    engine_destroy(ref);
}

int main(void)
{
    RUN_TEST(test_rings_and_rows);
    CHECK_EXIT();
}
