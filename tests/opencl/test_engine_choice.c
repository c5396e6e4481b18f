/* test_engine_choice.c — engine_item's allow mask, logit bias and logprobs through engine_step on
 * the real Gemma 3 270M (models/gemma-3-270m-q4_k_m.gguf: a 262k vocabulary, so the device
 * reductions run over many parts).
 *
 * Most cases step two sequences with the same prompt in one step: A plain (its raw logits row
 * downloaded), B with the rules under test (its processed row downloaded too), and hold B's choice
 * against A's raw row:
 *   mask: greedy = the argmax of the raw row within the allowed set; B's row is -inf outside the
 *     set and the raw row inside; sampled choices (temperature 1, seeded) stay in the set over 200
 *     fed-back steps; a single allowed token is chosen.
 *   bias: +100 forces a token (greedy and sampled), -100 bans the argmax (the runner-up wins),
 *     moderate biases move the argmax as adding them to the raw row predicts; a token listed twice
 *     gets both biases.
 *   logprobs: greedy rows' device logprobs (mask and bias applied) against a float64 log-softmax
 *     of B's processed row (TOL_LP absolute): chosen = top-1 = the argmax, the top ids the
 *     reference's order (ties aside); a 5-token mask lists 5. Sampled rows (temperature 0.7,
 *     penalties, mask and bias) against a float64 reference of the penalised row over temperature.
 *   mixed batch: constrained greedy, unconstrained greedy, sampled with bias and logprobs-only in
 *     one step give the tokens (and logprobs) each gives alone, over several fed-back steps.
 *   errors: a bad item fails the step before the forward and changes no sequence. */
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
#define TOL_LP 1e-4     /* absolute, device float32 log-softmax vs float64 */
#define TOL_ROW 1e-4    /* absolute: the same token's logits in two rows of one step */
#define NEAR_TIE 1e-3   /* raw-row margins below this are not held to one answer */

static engine *E;
static uint32_t V;
static char err[512];
static int32_t prompt[64];
static int n_prompt;
static float *rowA, *rowB;
static uint64_t rs = 0x1234567;

static uint32_t irand(uint32_t n)
{
    uint64_t z = (rs += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (uint32_t)((z ^ (z >> 31)) % n);
}

static sampler *mk_sampler(float temp, float rep, float freq, float pres, uint64_t seed)
{
    sampler_params p;
    sampler_params_default(&p);
    p.temperature = temp;
    p.repetition_penalty = rep;
    p.frequency_penalty = freq;
    p.presence_penalty = pres;
    p.seed = seed;
    sampler *s = NULL;
    if (sampler_create(&s, &p, V)) { printf("FAIL sampler_create\n"); exit(1); }
    return s;
}

/* a new sequence holding the prompt less its last token */
static int seq_prefix(void)
{
    int s = engine_seq_new(E);
    engine_item it = { .seq = s, .tokens = prompt, .n_tokens = n_prompt - 1 };
    if (s < 0 || engine_step(E, &it, 1, err, sizeof err)) { printf("FAIL prefix: %s\n", err); exit(1); }
    return s;
}

/* A (plain greedy) and b (the rules under test; its smp is used, or greedy) choose after the same prompt
 * in one step; rowA / rowB get their rows; returns b's token */
static int32_t pair_step(engine_item *b)
{
    int sa = seq_prefix(), sb = seq_prefix();
    sampler *ga = mk_sampler(0, 1, 0, 0, 0), *gb = b->smp ? NULL : mk_sampler(0, 1, 0, 0, 0);
    engine_item it[2] = { { .seq = sa, .tokens = &prompt[n_prompt - 1], .n_tokens = 1, .smp = ga, .logits = rowA },
                          *b };
    it[1].seq = sb;
    it[1].tokens = &prompt[n_prompt - 1];
    it[1].n_tokens = 1;
    it[1].logits = rowB;
    if (gb) it[1].smp = gb;
    CHECK(engine_step(E, it, 2, err, sizeof err) == 0, "pair step: %s", err);
    engine_seq_free(E, sa);
    engine_seq_free(E, sb);
    sampler_destroy(ga);
    sampler_destroy(gb);
    *b = it[1];
    return it[1].token_out;
}

static int allowed(const uint32_t *m, uint32_t i) { return m[i / 32] >> (i % 32) & 1; }

/* the argmax of x within mask (all when NULL) plus bias[i] (NULL: none), and its margin to the next */
static int32_t argmax_in(const float *x, const uint32_t *mask, const double *bias, double *margin)
{
    int32_t b = -1;
    double bv = -INFINITY, second = -INFINITY;
    for (uint32_t i = 0; i < V; i++) {
        if (mask && !allowed(mask, i)) continue;
        double v = (double)x[i] + (bias ? bias[i] : 0);
        if (v > bv) { second = bv; bv = v; b = (int32_t)i; }
        else if (v > second) second = v;
    }
    if (margin) *margin = bv - second;
    return b;
}

static uint32_t *random_mask(int n, int32_t *ids)
{
    uint32_t *m = calloc((V + 31) / 32, 4);
    for (int k = 0; k < n;) {
        uint32_t i = irand(V);
        if (allowed(m, i)) continue;
        m[i / 32] |= 1u << (i % 32);
        if (ids) ids[k] = (int32_t)i;
        k++;
    }
    return m;
}

static void test_mask_greedy(void)
{
    int32_t ids[50];
    uint32_t *m = random_mask(50, ids);
    engine_item b = { .allow = m };
    int32_t tok = pair_step(&b);
    double margin;
    int32_t want = argmax_in(rowA, m, NULL, &margin);
    CHECK(allowed(m, (uint32_t)tok), "greedy token %d outside the mask", tok);
    CHECK(tok == want || margin < NEAR_TIE, "greedy token %d, argmax of the raw row in the set %d (margin %.3g)", tok,
          want, margin);
    size_t bad_out = 0, bad_in = 0;
    for (uint32_t i = 0; i < V; i++) {
        if (!allowed(m, i)) bad_out += rowB[i] != -INFINITY;
        else bad_in += !(fabsf(rowB[i] - rowA[i]) <= TOL_ROW);
    }
    CHECK(bad_out == 0 && bad_in == 0, "processed row: %zu disallowed not -inf, %zu allowed differ from raw", bad_out,
          bad_in);
    /* one allowed token: that one */
    uint32_t *one = calloc((V + 31) / 32, 4);
    one[ids[7] / 32] |= 1u << (ids[7] % 32);
    engine_item c = { .allow = one };
    CHECK(pair_step(&c) == ids[7], "single allowed token %d not chosen (%d)", ids[7], c.token_out);
    free(one);
    free(m);
}

static void test_mask_sampled(void)
{
    uint32_t *m = random_mask(50, NULL);
    sampler *s = mk_sampler(1.0f, 1, 0, 0, 42);
    int seq = seq_prefix();
    int32_t tok = prompt[n_prompt - 1];
    int outside = 0;
    for (int step = 0; step < 200; step++) {
        engine_item it = { .seq = seq, .tokens = &tok, .n_tokens = 1, .smp = s, .allow = m };
        if (engine_step(E, &it, 1, err, sizeof err)) { CHECK(0, "step %d: %s", step, err); break; }
        tok = it.token_out;
        outside += !allowed(m, (uint32_t)tok);
    }
    CHECK(outside == 0, "%d of 200 sampled tokens outside the mask", outside);
    engine_seq_free(E, seq);
    sampler_destroy(s);
    free(m);
}

static void test_bias(void)
{
    engine_item b0 = { 0 };
    pair_step(&b0);
    double margin;
    int32_t top = argmax_in(rowA, NULL, NULL, &margin);
    /* +100 forces a token far from the top, greedy and sampled */
    int32_t t = (int32_t)(irand(V / 2) + V / 4);
    engine_bias force = { t, 100.0f };
    engine_item g = { .bias = &force, .n_bias = 1 };
    CHECK(pair_step(&g) == t, "greedy +100 on %d chose %d", t, g.token_out);
    CHECK(fabsf(rowB[t] - (rowA[t] + 100.0f)) <= TOL_ROW, "processed row %g, raw %g + 100", rowB[t], rowA[t]);
    sampler *s = mk_sampler(1.0f, 1, 0, 0, 3);
    engine_item sm = { .smp = s, .bias = &force, .n_bias = 1 };
    CHECK(pair_step(&sm) == t, "sampled +100 on %d chose %d", t, sm.token_out);
    sampler_destroy(s);
    /* -100 bans the argmax: the runner-up wins */
    double *bias = calloc(V, sizeof *bias);
    bias[top] = -100;
    engine_bias ban = { top, -100.0f };
    engine_item bn = { .bias = &ban, .n_bias = 1 };
    int32_t second = argmax_in(rowA, NULL, bias, &margin);
    int32_t got = pair_step(&bn);
    CHECK(got != top, "-100 on the argmax %d did not ban it", top);
    CHECK(got == second || margin < NEAR_TIE, "-100 on %d chose %d, the raw runner-up is %d", top, got, second);
    /* moderate biases on 30 of the best 60: the argmax of raw + bias; one token listed twice */
    memset(bias, 0, V * sizeof *bias);
    int32_t best[60];
    for (int k = 0; k < 60; k++) {
        double mv = -INFINITY;
        best[k] = 0;
        for (uint32_t i = 0; i < V; i++) {
            int used = 0;
            for (int j = 0; j < k && !used; j++) used = best[j] == (int32_t)i;
            if (!used && rowA[i] > mv) { mv = rowA[i]; best[k] = (int32_t)i; }
        }
    }
    engine_bias pairs[31];
    for (int k = 0; k < 30; k++) {
        pairs[k] = (engine_bias){ best[2 * k + 1], (float)(irand(600) / 100.0) - 1.0f };
        bias[pairs[k].token] += pairs[k].bias;
    }
    pairs[30] = (engine_bias){ best[1], 0.75f }; /* best[1] twice: both biases */
    bias[best[1]] += 0.75;
    engine_item mo = { .bias = pairs, .n_bias = 31 };
    int32_t want = argmax_in(rowA, NULL, bias, &margin);
    got = pair_step(&mo);
    CHECK(got == want || margin < NEAR_TIE, "moderate biases chose %d, raw + bias predicts %d (margin %.3g)", got, want,
          margin);
    CHECK(fabs(rowB[best[1]] - (rowA[best[1]] + bias[best[1]])) <= TOL_ROW, "twice-listed token: %g, raw %g + %g",
          rowB[best[1]], rowA[best[1]], bias[best[1]]);
    free(bias);
}

/* float64 log-softmax of x / t into lp; returns the number of finite values */
static uint32_t log_softmax(const float *x, double t, double *lp)
{
    double m = -INFINITY, s = 0;
    uint32_t nf = 0;
    for (uint32_t i = 0; i < V; i++) m = fmax(m, x[i]);
    for (uint32_t i = 0; i < V; i++) s += exp((x[i] - m) / t);
    for (uint32_t i = 0; i < V; i++) { lp[i] = (x[i] - m) / t - log(s); nf += isfinite(x[i]); }
    return nf;
}

/* lp against the float64 reference: chosen, the top values in order, each id's reference value
 * the one at its place (so ties may come in either order), no id twice */
static void check_lp(const engine_logprobs *lp, int n, int32_t tok, const double *ref, uint32_t nfinite,
                     const char *what)
{
    int want_n = (uint32_t)n < nfinite ? n : (int)nfinite;
    CHECK(lp->n_top == want_n, "%s: n_top %d, want %d", what, lp->n_top, want_n);
    CHECK(fabs(lp->chosen - ref[tok]) <= TOL_LP, "%s: chosen %.7g, reference %.7g", what, lp->chosen, ref[tok]);
    int32_t top[ENGINE_MAX_LOGPROBS]; /* the reference's best, ties to the lower id */
    for (int k = 0; k < want_n; k++) {
        top[k] = -1;
        for (uint32_t i = 0; i < V; i++) {
            int used = 0;
            for (int j = 0; j < k && !used; j++) used = top[j] == (int32_t)i;
            if (!used && (top[k] < 0 || ref[i] > ref[top[k]])) top[k] = (int32_t)i;
        }
    }
    int bad_v = 0, bad_id = 0, dup = 0;
    for (int k = 0; k < lp->n_top && k < want_n; k++) {
        int32_t id = lp->top_id[k];
        bad_v += !(fabs(lp->top_lp[k] - ref[top[k]]) <= TOL_LP);
        bad_id += id < 0 || (uint32_t)id >= V || !(fabs(ref[id] - ref[top[k]]) <= TOL_LP);
        for (int j = 0; j < k; j++) dup += lp->top_id[j] == id;
    }
    CHECK(!bad_v && !bad_id && !dup, "%s: %d values off, %d ids not the reference's, %d twice", what, bad_v, bad_id,
          dup);
}

static void test_logprobs_greedy(void)
{
    double *ref = malloc(V * sizeof *ref);
    engine_logprobs lp;
    /* logprobs only */
    engine_item a = { .n_logprobs = 20, .lp = &lp };
    int32_t tok = pair_step(&a);
    uint32_t nf = log_softmax(rowB, 1.0, ref);
    check_lp(&lp, 20, tok, ref, nf, "plain");
    CHECK(lp.top_id[0] == tok && lp.chosen == lp.top_lp[0], "plain: top-1 %d / chosen %g, argmax %d / %g",
          lp.top_id[0], lp.chosen, tok, lp.top_lp[0]);
    /* half the vocabulary allowed, biases on 10 */
    uint32_t *m = random_mask((int)(V / 2), NULL);
    engine_bias pairs[10];
    for (int k = 0; k < 10; k++) pairs[k] = (engine_bias){ (int32_t)irand(V), (float)irand(800) / 100.0f };
    engine_item b = { .allow = m, .bias = pairs, .n_bias = 10, .n_logprobs = 13, .lp = &lp };
    tok = pair_step(&b);
    nf = log_softmax(rowB, 1.0, ref);
    check_lp(&lp, 13, tok, ref, nf, "mask+bias");
    CHECK(lp.top_id[0] == tok, "mask+bias: top-1 %d, chosen %d", lp.top_id[0], tok);
    for (int k = 0; k < lp.n_top; k++) CHECK(allowed(m, (uint32_t)lp.top_id[k]), "listed %d is masked", lp.top_id[k]);
    free(m);
    /* five allowed: five listed */
    int32_t ids[5];
    m = random_mask(5, ids);
    engine_item c = { .allow = m, .n_logprobs = 20, .lp = &lp };
    tok = pair_step(&c);
    nf = log_softmax(rowB, 1.0, ref);
    check_lp(&lp, 20, tok, ref, nf, "five allowed");
    free(m);
    free(ref);
}

static void test_logprobs_sampled(void)
{
    const float temp = 0.7f, rep = 1.3f, freq = 0.4f, pres = 0.6f;
    double *ref = malloc(V * sizeof *ref);
    float *pen = malloc(V * sizeof *pen);
    uint32_t *m = random_mask((int)(V / 3), NULL);
    /* bias prompt tokens up so the penalties meet allowed, likely tokens */
    engine_bias pairs[8];
    for (int k = 0; k < 8; k++) {
        int32_t t = prompt[1 + k % (n_prompt - 1)];
        m[t / 32] |= 1u << (t % 32);
        pairs[k] = (engine_bias){ t, 4.0f };
    }
    for (int trial = 0; trial < 3; trial++) {
        sampler *s = mk_sampler(temp, rep, freq, pres, 100 + (uint64_t)trial);
        /* the sampler has seen the prefix (as a sequence that always steps with it would) */
        for (int k = 0; k < n_prompt - 1; k++) sampler_accept(s, prompt[k]);
        engine_logprobs lp;
        engine_item b = { .smp = s, .allow = m, .bias = pairs, .n_bias = 8, .n_logprobs = 10, .lp = &lp };
        int32_t tok = pair_step(&b);
        /* penalties of the whole prompt (within penalty_last_n 64) on the processed row */
        memcpy(pen, rowB, V * sizeof *pen);
        for (uint32_t i = 0; i < V; i++) {
            int c = 0;
            for (int k = 0; k < n_prompt; k++) c += prompt[k] == (int32_t)i;
            if (!c) continue;
            float l = pen[i];
            l = l > 0 ? l / rep : l * rep;
            pen[i] = l - ((float)c * freq + pres);
        }
        uint32_t nf = log_softmax(pen, temp, ref);
        char what[64];
        snprintf(what, sizeof what, "sampled trial %d", trial);
        check_lp(&lp, 10, tok, ref, nf, what);
        CHECK(allowed(m, (uint32_t)tok), "%s: token %d masked", what, tok);
        sampler_destroy(s);
    }
    free(m);
    free(pen);
    free(ref);
}

/* the four kinds of item for NSTEP fed-back steps, alone or all in one step */
#define NSTEP 4
static void run_kinds(int together, int32_t out[4][NSTEP], engine_logprobs lp_out[NSTEP], const uint32_t *m,
                      const engine_bias *bias, int nb)
{
    int seq[4];
    sampler *s[4];
    int32_t tok[4];
    for (int k = 0; k < 4; k++) {
        seq[k] = seq_prefix();
        s[k] = k == 2 ? mk_sampler(0.8f, 1, 0, 0, 77) : mk_sampler(0, 1, 0, 0, 0);
        tok[k] = prompt[n_prompt - 1];
    }
    for (int step = 0; step < NSTEP; step++) {
        engine_logprobs lp;
        engine_item it[4] = {
            { .seq = seq[0], .tokens = &tok[0], .n_tokens = 1, .smp = s[0], .allow = m },
            { .seq = seq[1], .tokens = &tok[1], .n_tokens = 1, .smp = s[1] },
            { .seq = seq[2], .tokens = &tok[2], .n_tokens = 1, .smp = s[2], .bias = bias, .n_bias = nb },
            { .seq = seq[3], .tokens = &tok[3], .n_tokens = 1, .smp = s[3], .n_logprobs = 5, .lp = &lp },
        };
        if (together) {
            CHECK(engine_step(E, it, 4, err, sizeof err) == 0, "mixed step: %s", err);
        } else {
            for (int k = 0; k < 4; k++) CHECK(engine_step(E, &it[k], 1, err, sizeof err) == 0, "alone: %s", err);
        }
        for (int k = 0; k < 4; k++) out[k][step] = tok[k] = it[k].token_out;
        lp_out[step] = lp;
    }
    for (int k = 0; k < 4; k++) {
        engine_seq_free(E, seq[k]);
        sampler_destroy(s[k]);
    }
}

static void test_mixed_batch(void)
{
    uint32_t *m = random_mask(200, NULL);
    engine_bias bias[3] = { { (int32_t)irand(V), 3.0f }, { (int32_t)irand(V), -2.0f }, { prompt[2], 5.0f } };
    int32_t alone[4][NSTEP], mixed[4][NSTEP];
    engine_logprobs la[NSTEP], lm[NSTEP];
    run_kinds(0, alone, la, m, bias, 3);
    run_kinds(1, mixed, lm, m, bias, 3);
    for (int k = 0; k < 4; k++)
        for (int st = 0; st < NSTEP; st++)
            CHECK(alone[k][st] == mixed[k][st], "kind %d step %d: alone %d, in the batch %d", k, st, alone[k][st],
                  mixed[k][st]);
    for (int st = 0; st < NSTEP; st++) {
        CHECK(allowed(m, (uint32_t)mixed[0][st]), "constrained token %d masked", mixed[0][st]);
        CHECK(la[st].n_top == 5 && lm[st].n_top == 5, "n_top %d / %d", la[st].n_top, lm[st].n_top);
        for (int t = 0; t < 5 && t < lm[st].n_top; t++)
            CHECK(la[st].top_id[t] == lm[st].top_id[t] && fabsf(la[st].top_lp[t] - lm[st].top_lp[t]) <= TOL_LP,
                  "step %d logprob %d: alone %d %g, batch %d %g", st, t, la[st].top_id[t], la[st].top_lp[t],
                  lm[st].top_id[t], lm[st].top_lp[t]);
    }
    free(m);
}

static void test_errors(void)
{
    int seq = seq_prefix(), len = engine_seq_len(E, seq);
    sampler *s = mk_sampler(0, 1, 0, 0, 0);
    engine_bias bad_tok = { (int32_t)V, 1.0f }, nan_b = { 5, NAN }, ok = { 5, 1.0f };
    engine_logprobs lp;
    uint32_t *none = calloc((V + 31) / 32, 4);
    engine_item cases[] = {
        { .smp = s, .bias = &bad_tok, .n_bias = 1 },
        { .smp = s, .bias = &nan_b, .n_bias = 1 },
        { .smp = s, .bias = &ok, .n_bias = ENGINE_MAX_BIAS + 1 },
        { .smp = s, .n_bias = 2 },
        { .smp = s, .n_logprobs = ENGINE_MAX_LOGPROBS + 1, .lp = &lp },
        { .smp = s, .n_logprobs = 3 },
        { .smp = s, .allow = none },
        { .bias = &ok, .n_bias = 1 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        engine_item it = cases[i];
        it.seq = seq;
        it.tokens = &prompt[n_prompt - 1];
        it.n_tokens = 1;
        err[0] = 0;
        CHECK(engine_step(E, &it, 1, err, sizeof err) == -1 && err[0], "case %zu accepted", i);
        CHECK(engine_seq_len(E, seq) == len, "case %zu changed the sequence", i);
    }
    free(none);
    sampler_destroy(s);
    engine_seq_free(E, seq);
}

int main(void)
{
    engine_opts o = { .n_ctx = 512, .max_seqs = 8, .max_batch_tokens = 64 };
    if (engine_load(&E, MODEL, &o, err, sizeof err)) {
        printf("FAIL engine_choice_load: %s\n", err);
        return 1;
    }
    V = engine_get_info(E)->n_vocab;
    const char *text = "The three primary colours are red, yellow and";
    n_prompt = tokenizer_encode(engine_tokenizer(E), text, strlen(text), 1, 0, prompt, 64);
    rowA = malloc(V * sizeof *rowA);
    rowB = malloc(V * sizeof *rowB);
    RUN_TEST(test_mask_greedy);
    RUN_TEST(test_mask_sampled);
    RUN_TEST(test_bias);
    RUN_TEST(test_logprobs_greedy);
    RUN_TEST(test_logprobs_sampled);
    RUN_TEST(test_mixed_batch);
    RUN_TEST(test_errors);
    free(rowA);
    free(rowB);
    engine_destroy(E);
    CHECK_EXIT();
}
