/* test_engine_draw.c — sampled rows drawn from their best values on the device (opencl/draw.c) choose the
 * token the host sampler draws from the whole row (sampler_sample), token for token. On the real Gemma 3
 * 270M (models/gemma-3-270m-q4_k_m.gguf: a 262k vocabulary).
 *
 * Each case steps two sequences with the same prompt together for STEPS fed-back steps: A greedy with its
 * processed row downloaded (the same allow mask and bias as B, so the same row), B with the sampler under
 * test (drawn on the device). A host twin of B's sampler (same settings, seed and history) samples from A's
 * row; B's token must be the twin's at every step, and both sequences take B's token next. Cases:
 * temperatures 0.6-1.5, top_k (40, 1500: more candidates than the default 1024), top_p, min_p, repetition
 * / frequency / presence penalties (a negative presence penalty raises seen tokens, so a token outside the
 * raw best must still win), penalty windows of 8 and the whole history, greedy with penalties, an allow
 * mask of 30 tokens (fewer than the candidates: -inf ties at the cut) and a bias.
 * Reference: the host sampler (tests/opencl/test_sampler.c holds it against its own definitions);
 * tolerance: none, the tokens are equal. */
#include "check.h"
#include "engine.h"
#include "sampler.h"
#include "tokenizer.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODEL "models/gemma-3-270m-q4_k_m.gguf"
#define STEPS 8

static engine *E;
static uint32_t V;
static char err[512];
static int32_t prompt[64];
static int n_prompt;

typedef struct { const char *name; sampler_params p; int mask, bias; } draw_case;

static void run_case(const draw_case *c, uint64_t seed)
{
    float *row = malloc(V * sizeof *row);
    sampler_params p = c->p;
    p.seed = seed;
    sampler *dev = NULL, *twin = NULL, *greedy = NULL;
    sampler_params g;
    sampler_params_default(&g);
    if (sampler_create(&dev, &p, V) || sampler_create(&twin, &p, V) || sampler_create(&greedy, &g, V)) {
        CHECK(0, "%s: sampler_create", c->name);
        return;
    }
    uint32_t *allow = NULL;
    if (c->mask) {
        allow = calloc((V + 31) / 32, 4);
        for (int i = 0; i < 30; i++) {
            uint32_t t = (uint32_t)((i * 2654435761u + 7) % V);
            allow[t / 32] |= 1u << (t % 32);
        }
    }
    engine_bias bias[2] = { { 1000, 6.0f }, { 2000, -3.0f } };
    int sa = engine_seq_new(E), sb = engine_seq_new(E), diff = 0;
    int32_t ta[64], tb[64];
    memcpy(ta, prompt, sizeof(int32_t) * (size_t)n_prompt);
    memcpy(tb, prompt, sizeof(int32_t) * (size_t)n_prompt);
    int n = n_prompt;
    for (int step = 0; step < STEPS && !diff; step++) {
        engine_item it[2] = {
            { .seq = sa, .tokens = ta, .n_tokens = n, .smp = greedy, .logits = row, .allow = allow,
              .bias = c->bias ? bias : NULL, .n_bias = c->bias ? 2 : 0 },
            { .seq = sb, .tokens = tb, .n_tokens = n, .smp = dev, .allow = allow, .bias = c->bias ? bias : NULL,
              .n_bias = c->bias ? 2 : 0 },
        };
        if (engine_step(E, it, 2, err, sizeof err)) { CHECK(0, "%s step %d: %s", c->name, step, err); break; }
        for (int k = 0; k < n; k++) sampler_accept(twin, tb[k]);
        int32_t want = sampler_sample(twin, row);
        if (it[1].token_out != want) {
            CHECK(0, "%s (seed %llu) step %d: device draw %d, host draw from the row %d", c->name,
                  (unsigned long long)seed, step, it[1].token_out, want);
            diff = 1;
        }
        ta[0] = tb[0] = it[1].token_out;
        n = 1;
    }
    engine_seq_free(E, sa);
    engine_seq_free(E, sb);
    sampler_destroy(dev);
    sampler_destroy(twin);
    sampler_destroy(greedy);
    free(allow);
    free(row);
}

static sampler_params params(float t, int top_k, float top_p, float min_p, float rep, float freq, float pres, int last)
{
    sampler_params p;
    sampler_params_default(&p);
    p.temperature = t;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.repetition_penalty = rep;
    p.frequency_penalty = freq;
    p.presence_penalty = pres;
    p.penalty_last_n = last;
    return p;
}

static void test_draw_equals_host(void)
{
    const draw_case cases[] = {
        { "t1.0", params(1.0f, 0, 1.0f, 0, 1, 0, 0, 64), 0, 0 },
        { "t1.5 top_p 0.95", params(1.5f, 0, 0.95f, 0, 1, 0, 0, 64), 0, 0 },
        { "t0.6 top_k 40", params(0.6f, 40, 1.0f, 0, 1, 0, 0, 64), 0, 0 },
        { "t1.2 top_k 1500 min_p 0.01", params(1.2f, 1500, 1.0f, 0.01f, 1, 0, 0, 64), 0, 0 },
        { "t0.9 rep 1.3 freq 0.5", params(0.9f, 0, 0.9f, 0, 1.3f, 0.5f, 0, 8), 0, 0 },
        { "t1.0 presence -4 (raises seen tokens)", params(1.0f, 0, 1.0f, 0, 1, 0, -4.0f, 0), 0, 0 },
        { "greedy with rep 1.5", params(0, 0, 1.0f, 0, 1.5f, 0, 0, 64), 0, 0 },
        { "t1.0 mask of 30", params(1.0f, 0, 1.0f, 0, 1, 0, 0, 64), 1, 0 },
        { "t0.8 bias, freq 1, mask", params(0.8f, 0, 1.0f, 0.05f, 1, 1.0f, 0.2f, 16), 1, 1 },
        { "t1.1 bias", params(1.1f, 0, 1.0f, 0, 1, 0, 0, 64), 0, 1 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        run_case(&cases[i], 7919 + i);
}

int main(void)
{
    engine_opts o = { .n_ctx = 256, .max_seqs = 4, .max_batch_tokens = 64 };
    if (engine_load(&E, MODEL, &o, err, sizeof err)) {
        printf("FAIL engine_draw_load: %s\n", err);
        return 1;
    }
    V = engine_get_info(E)->n_vocab;
    const char *text = "Once upon a time, in a small village by the sea, there lived";
    n_prompt = tokenizer_encode(engine_tokenizer(E), text, strlen(text), 1, 0, prompt, 64);
    RUN_TEST(test_draw_equals_host);
    engine_destroy(E);
    CHECK_EXIT();
}
