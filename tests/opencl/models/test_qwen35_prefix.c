/* test_qwen35_prefix.c — the prefix cache on a model with a recurrent state (docs/design-qwen35.md 3.5): the state
 * kept as a snapshot at the last block boundary of each prompt item (engine_opts.state_snapshots), on the prefix
 * entry of the block ending there; a new sequence starts on the longest cached prefix whose end has a snapshot.
 * Tiny Qwen 3.5 fixtures (tests/fixtures/qwen35_*.gguf), blocks of 32 tokens.
 *   test_prefix_hit: a 110-token prompt prefilled in one step keeps the state at 96; the same prompt again starts
 *     on 96 cached tokens and its rows equal the cold prefill's (TOL: engine vs engine, test_qwen35's); a prompt
 *     sharing 70 tokens has blocks at 32 and 64 but no snapshot there: nothing reused; the first prompt fed in
 *     steps of 40 keeps states at 32 and 64 too, and then the 70-token sharer starts on 64 with its cold rows
 *     (cold: the same engine, whose prefill also ends a forward at the snapshot, and an engine without snapshots
 *     prefilling in one forward).
 *   test_prefix_evict: two snapshots for three prompts: the least recently used goes (its prompt reuses nothing,
 *     the others 32 tokens with the cold rows); without snapshots nothing is reused. */
#include "check.h"
#include "engine.h"
#include "logit_rows.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL 5e-3 /* test_qwen35's TOL_DECODE: float engines; rounding ones: rows_engine_tol */

static const char *files[] = { "tests/fixtures/qwen35_dense_bf16.gguf", "tests/fixtures/qwen35_moe_q8_0.gguf" };
static char err[1024];

static engine *load(const char *path, int snapshots)
{
    engine_opts o = { .n_ctx = 256, .max_seqs = 4, .state_snapshots = snapshots };
    engine *e = NULL;
    CHECK(engine_load(&e, path, &o, err, sizeof err) == 0, "%s: %s", path, err);
    return e;
}

static void make_tokens(int32_t *tok, int n, uint32_t seed)
{
    for (int i = 0; i < n; i++) tok[i] = (int32_t)((seed + (uint32_t)i * 2654435761u) % 1500u);
}

/* tok[0, n) from a new sequence on its cached prefix in steps of `step` tokens (0: one step); the cached length,
 * the last row in last; -1 on a failed step */
static int run(engine *e, const int32_t *tok, int n, int step, float *last)
{
    int cached = -1, s = engine_seq_new_prefix(e, tok, n, &cached), rc = 0;
    for (int t = cached; !rc && t < n;) {
        int k = step && n - t > step ? step : n - t;
        engine_item it = { .seq = s, .tokens = tok + t, .n_tokens = k, .logits = last };
        rc = engine_step(e, &it, 1, err, sizeof err);
        t += k;
    }
    engine_seq_free(e, s);
    return rc ? -1 : cached;
}

/* the last row of tok[0, n) from a sequence that reuses nothing */
static int cold_row(engine *e, const int32_t *tok, int n, float *row)
{
    int s = engine_seq_new(e);
    engine_item it = { .seq = s, .tokens = tok, .n_tokens = n, .logits = row };
    int rc = engine_step(e, &it, 1, err, sizeof err);
    engine_seq_free(e, s);
    return rc;
}

static void test_prefix_hit(void)
{
    for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
        engine *e = load(files[f], 4);
        if (!e) continue;
        CHECK(engine_get_info(e)->state_snapshots == 4, "%d snapshots", engine_get_info(e)->state_snapshots);
        uint32_t V = engine_get_info(e)->n_vocab;
        int32_t a[120], b[90];
        make_tokens(a, 120, 5);
        memcpy(b, a, 70 * sizeof *b);
        make_tokens(b + 70, 20, 9);
        float *cold = malloc(sizeof(float) * V), *got = malloc(sizeof(float) * V);
        double worst = 0;
        CHECK(run(e, a, 110, 0, cold) == 0, "the first prompt reused a prefix");
        CHECK(run(e, a, 110, 0, got) == 96, "the same prompt: not 96 tokens reused");
        worst = fmax(worst, rows_max_diff(got, cold, V));
        CHECK(run(e, b, 90, 0, got) == 0, "a prompt sharing 70 tokens reused a prefix without its state");
        CHECK(run(e, a, 120, 40, got) == 96, "steps of 40: not 96 tokens reused");
        CHECK(cold_row(e, b, 90, cold) == 0, "cold: %s", err);
        CHECK(run(e, b, 90, 0, got) == 64, "a prompt sharing 70 tokens: not 64 reused");
        worst = fmax(worst, rows_max_diff(got, cold, V));
        /* the cold rows above ran in two forwards (cut at the snapshot); an engine without snapshots runs one */
        engine *e0 = load(files[f], 0);
        double one = 0;
        if (e0) {
            CHECK(cold_row(e0, b, 90, cold) == 0, "cold: %s", err);
            one = rows_max_diff(got, cold, V);
            engine_destroy(e0);
        }
        const engine_info *in = engine_get_info(e);
        double tol = rows_engine_tol(in->tensor_cores, in->int8_decode && !strstr(files[f], "bf16"), TOL, cold, V);
        CHECK(worst <= tol && one <= tol, "%s: rows on a cached prefix vs cold max |delta| %.3g, vs one forward %.3g "
              "> %g", files[f], worst, one, tol);
        printf("  %s: on a cached prefix vs cold max |d| %.2e, vs one forward %.2e (tol %g)\n", files[f], worst, one,
               tol);
        free(cold);
        free(got);
        engine_destroy(e);
    }
}

static void test_prefix_evict(void)
{
    engine *e = load(files[0], 2);
    if (!e) return;
    uint32_t V = engine_get_info(e)->n_vocab;
    int32_t p[3][48];
    for (int i = 0; i < 3; i++) make_tokens(p[i], 48, 100 + (uint32_t)i);
    float *cold = malloc(sizeof(float) * V), *got = malloc(sizeof(float) * V);
    for (int i = 0; i < 3; i++) CHECK(run(e, p[i], 40, 0, NULL) == 0, "prompt %d reused a prefix", i);
    double worst = 0;
    CHECK(run(e, p[0], 48, 0, got) == 0, "the least recently used snapshot was kept");
    for (int i = 1; i < 3; i++) {
        CHECK(cold_row(e, p[i], 48, cold) == 0, "cold: %s", err);
        CHECK(run(e, p[i], 48, 0, got) == 32, "prompt %d: not 32 tokens reused", i);
        worst = fmax(worst, rows_max_diff(got, cold, V));
    }
    double tol = rows_engine_tol(engine_get_info(e)->tensor_cores, 0, TOL, cold, V); /* files[0] is bf16 */
    CHECK(worst <= tol, "rows on a cached prefix vs cold max |delta| %.3g > %g", worst, tol);
    engine_destroy(e);
    e = load(files[0], 0);
    if (e) {
        CHECK(run(e, p[0], 40, 0, NULL) == 0 && run(e, p[0], 40, 0, NULL) == 0, "reuse without snapshots");
        engine_destroy(e);
    }
    free(cold);
    free(got);
}

int main(void)
{
    RUN_TEST(test_prefix_hit);
    RUN_TEST(test_prefix_evict);
    CHECK_EXIT();
}
