/* test_engine_kv_quant.c — the quantized KV cache's accuracy against the f16 one, through the engine
 * API: three engines of one model (KV f16, q8_0, q4) step the same prompts (prefilled in one step,
 * chunks of 32 so several chunks read earlier quantized keys), then NGEN decode steps in which every
 * engine is fed the f16 engine's greedy token (so all three see the same text). Compared per row
 * (the prompt's last token, then each step), against f16:
 *   max |Δlogit|: the largest absolute difference of any logit of any row;
 *   greedy agreement: the rows whose argmax is f16's, among those where f16's top-2 margin is at
 *     least MARGIN logits (a near tie may go either way on any rounding).
 * Models: the real Gemma 3 270M (models/gemma-3-270m-q4_k_m.gguf: sliding window 512, head dim 256)
 * and the Gemma 4 fixture (tests/fixtures/gemma4_dense.gguf: random weights, sliding window 8 with
 * its ring wrapping during the steps, so ring slots are rewritten in the quantized format).
 * Bounds, about 3x what was measured on PoCL (the numbers are printed each run; 68 rows a model):
 *   Gemma 3 270M  q8_0: max |Δ| 0.47 measured, bound 1.5; agreement 46 of 46 clear rows, bound 95%
 *                 q4:   max |Δ| 8.3 measured, bound 25;  agreement 45 of 46 (97.8%), bound 75%
 *   Gemma 4 fix.  q8_0: max |Δ| 0.16 measured, bound 0.5; agreement 51 of 51, bound 95%
 *                 q4:   max |Δ| 1.7 measured, bound 5;   agreement 51 of 51, bound 75%
 * (q4's largest differences sit in the tail of the vocabulary: its greedy tokens still agree.) */
#include "check.h"
#include "engine.h"
#include "logit_rows.h"
#include "tokenizer.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NPROMPT 4
#define NGEN 16
#define MARGIN 0.5 /* f16 top-2 margin (logits) of the rows greedy agreement counts */

static const char *const PROMPTS[NPROMPT] = {
    "The history of the printing press begins in the fifteenth century, when Johannes Gutenberg combined "
    "movable metal type, oil-based inks and a wooden press adapted from those used for wine. Within fifty "
    "years presses were running in more than two hundred cities across Europe, and the price of books",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    a, b = 0, 1\n    for _ in range(n):\n"
    "        a, b = b, a + b\n    return a\n\n\ndef is_prime(n):\n",
    "A shopping list for the week: eggs, milk, bread, two kinds of cheese, apples, bananas, rice, lentils,",
    "Question: Why is the sky blue during the day but red at sunset?\nAnswer:",
};

typedef struct bound { double dmax, agree; } bound;

static double top2_margin(const float *x, uint32_t n)
{
    float a = -INFINITY, b = -INFINITY;
    for (uint32_t i = 0; i < n; i++) {
        if (x[i] > a) { b = a; a = x[i]; }
        else if (x[i] > b) b = x[i];
    }
    return (double)a - b;
}

static void run_model(const char *path, const char *name, const bound b[ENGINE_KV_TYPES])
{
    char err[512];
    engine *E[ENGINE_KV_TYPES] = { 0 };
    int seq[ENGINE_KV_TYPES][NPROMPT];
    for (int t = 0; t < ENGINE_KV_TYPES; t++) {
        engine_opts o = { .n_ctx = 512, .max_seqs = NPROMPT, .max_batch_tokens = 32, .kv_type = t,
                          .no_prefix_cache = 1 };
        if (engine_load(&E[t], path, &o, err, sizeof err)) {
            printf("FAIL kv_quant_load: %s (%s): %s\n", path, engine_kv_type_name(t), err);
            for (int u = 0; u < t; u++) engine_destroy(E[u]);
            check_failures_total++;
            return;
        }
        for (int p = 0; p < NPROMPT; p++) seq[t][p] = engine_seq_new(E[t]);
    }
    uint32_t V = engine_get_info(E[0])->n_vocab;
    const tokenizer *tk = engine_tokenizer(E[0]);
    int32_t ids[NPROMPT][256], tok[NPROMPT];
    int n[NPROMPT];
    for (int p = 0; p < NPROMPT; p++) {
        n[p] = tokenizer_encode(tk, PROMPTS[p], strlen(PROMPTS[p]), 1, 0, ids[p], 256);
        CHECK(n[p] > 1 && n[p] <= 256, "%s: prompt %d: %d tokens", name, p, n[p]);
        if (n[p] < 1 || n[p] > 256) n[p] = 1;
    }
    float *row[ENGINE_KV_TYPES][NPROMPT];
    for (int t = 0; t < ENGINE_KV_TYPES; t++)
        for (int p = 0; p < NPROMPT; p++) row[t][p] = malloc(V * sizeof(float));
    double dmax[ENGINE_KV_TYPES] = { 0 };
    int agree[ENGINE_KV_TYPES] = { 0 }, clear = 0, rows = 0;
    for (int g = 0; g <= NGEN; g++) { /* g 0: the prompts; then one token each */
        for (int t = 0; t < ENGINE_KV_TYPES; t++) {
            engine_item it[NPROMPT];
            for (int p = 0; p < NPROMPT; p++)
                it[p] = (engine_item){ .seq = seq[t][p], .tokens = g ? &tok[p] : ids[p], .n_tokens = g ? 1 : n[p],
                                       .logits = row[t][p] };
            if (engine_step(E[t], it, NPROMPT, err, sizeof err)) {
                CHECK(0, "%s (%s): step %d: %s", name, engine_kv_type_name(t), g, err);
                goto done;
            }
        }
        for (int p = 0; p < NPROMPT; p++) {
            int32_t want = rows_argmax(row[ENGINE_KV_F16][p], V);
            int is_clear = top2_margin(row[ENGINE_KV_F16][p], V) >= MARGIN;
            clear += is_clear;
            rows++;
            for (int t = 1; t < ENGINE_KV_TYPES; t++) {
                double d = rows_max_diff(row[t][p], row[ENGINE_KV_F16][p], V);
                if (!(d <= dmax[t])) dmax[t] = d;
                agree[t] += is_clear && rows_argmax(row[t][p], V) == want;
            }
            tok[p] = want;
        }
    }
    for (int t = 1; t < ENGINE_KV_TYPES; t++) {
        double a = clear ? (double)agree[t] / clear : 1.0;
        printf("  %s KV %s vs f16: max |dlogit| %.4g (bound %g), greedy agreement %d of %d clear rows = %.1f%% "
               "(bound %.0f%%; %d rows)\n", name, engine_kv_type_name(t), dmax[t], b[t].dmax, agree[t], clear,
               100 * a, 100 * b[t].agree, rows);
        CHECK(dmax[t] <= b[t].dmax, "%s KV %s: max |dlogit| %.4g over %g", name, engine_kv_type_name(t), dmax[t],
              b[t].dmax);
        CHECK(a >= b[t].agree, "%s KV %s: greedy agreement %.1f%% under %.0f%%", name, engine_kv_type_name(t), 100 * a,
              100 * b[t].agree);
    }
    CHECK(clear >= rows / 3, "%s: only %d of %d rows have a clear f16 margin", name, clear, rows);
done:
    for (int t = 0; t < ENGINE_KV_TYPES; t++) {
        for (int p = 0; p < NPROMPT; p++) free(row[t][p]);
        engine_destroy(E[t]);
    }
}

static void test_kv_quant_gemma3(void)
{
    static const bound b[ENGINE_KV_TYPES] = { { 0, 0 }, { 1.5, 0.95 }, { 25.0, 0.75 } };
    run_model("models/gemma-3-270m-q4_k_m.gguf", "gemma3-270m", b);
}

static void test_kv_quant_gemma4(void)
{
    static const bound b[ENGINE_KV_TYPES] = { { 0, 0 }, { 0.5, 0.95 }, { 5.0, 0.75 } };
    run_model("tests/fixtures/gemma4_dense.gguf", "gemma4-fixture", b);
}

int main(void)
{
    RUN_TEST(test_kv_quant_gemma3);
    RUN_TEST(test_kv_quant_gemma4);
    CHECK_EXIT();
}
