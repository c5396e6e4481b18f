/* test_engine_async.c — a step that wants no output returns with its forward still queued; the next
 * step must not change what that forward uploads. On the real Gemma 3 270M
 * (models/gemma-3-270m-q4_k_m.gguf; forward chunks of 64 tokens, prefix cache off).
 *   test_queued_step_keeps_its_tokens: the reference R is T[0..8) fed in one step with its row read.
 *     Z gets T[0] (its first KV block, which syncs the queue), then a 600-token prompt of another
 *     sequence is queued (seconds of forwards on the CPU), then Z's T[1..5) with no output (queued
 *     behind it, no new block so nothing syncs), then at once T[5..8) with its row read. Before the
 *     engine waited for the last upload, the second step refilled the host staging first and the
 *     queued one uploaded T[5..8)'s ids and positions: Z's positions 1-3 were never written
 *     (CI saw test_engine_choice's first pair of rows differ this way).
 *   The reference W is fed as Z is (the same steps, so the same kernels: on GPUs the int8 decode paths
 *   differ from the prompt's f16 ones) with its rows read, so nothing is queued behind it; R's
 *   distance (another batch shape) is printed.
 * TOL: the same row through other batch shapes (test_engine_chunked's TOL); a lost KV row moves it by
 * whole units. */
#include "check.h"
#include "engine.h"
#include "logit_rows.h"
#include "tokenizer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODEL "models/gemma-3-270m-q4_k_m.gguf"
#define TOL 5e-2
#define NT 8
#define NX 600

static engine *E;
static uint32_t V;
static char err[512];

static int feed(int seq, const int32_t *toks, int n, float *row)
{
    engine_item it = { .seq = seq, .tokens = toks, .n_tokens = n, .logits = row };
    int rc = engine_step(E, &it, 1, err, sizeof err);
    CHECK(rc == 0, "step of %d tokens: %s", n, err);
    return rc;
}

static void test_queued_step_keeps_its_tokens(void)
{
    const char *text = "The three primary colours are red, yellow and blue, and";
    int32_t t[64], x[NX];
    int n = tokenizer_encode(engine_tokenizer(E), text, strlen(text), 1, 0, t, 64);
    CHECK(n >= NT, "prompt of %d tokens", n);
    for (int i = 0; i < NX; i++) x[i] = t[1 + i % (n - 1)];
    float *ref = malloc(V * sizeof *ref), *got = malloc(V * sizeof *got), *same = malloc(V * sizeof *same);
    int r = engine_seq_new(E), z = engine_seq_new(E), s = engine_seq_new(E), w = engine_seq_new(E);
    if (feed(r, t, NT, ref) || feed(w, t, 1, NULL) || feed(w, t + 1, 4, same) || feed(w, t + 5, NT - 5, same) ||
        feed(z, t, 1, NULL) || feed(s, x, NX, NULL) || feed(z, t + 1, 4, NULL) || feed(z, t + 5, NT - 5, got))
        goto out;
    double d = rows_max_diff(got, same, V);
    CHECK(d <= TOL && rows_argmax(got, V) == rows_argmax(same, V),
          "Z's row after a queued step: max |delta| %.3g from the reference, argmax %d / %d", d, rows_argmax(got, V),
          rows_argmax(same, V));
    printf("queued step: max |delta| %.3g (%.3g from one 8-token step)\n", d, rows_max_diff(got, ref, V));
out:
    engine_seq_free(E, w);
    free(same);
    engine_seq_free(E, r);
    engine_seq_free(E, z);
    engine_seq_free(E, s);
    free(ref);
    free(got);
}

int main(void)
{
    engine_opts o = { .n_ctx = 1024, .max_seqs = 5, .max_batch_tokens = 64, .no_prefix_cache = 1 };
    if (engine_load(&E, MODEL, &o, err, sizeof err)) {
        printf("FAIL engine_async_load: %s\n", err);
        return 1;
    }
    V = engine_get_info(E)->n_vocab;
    RUN_TEST(test_queued_step_keeps_its_tokens);
    engine_destroy(E);
    CHECK_EXIT();
}
