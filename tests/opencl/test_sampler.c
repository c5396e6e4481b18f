/* Sampler against float64 references: the distribution it draws from (temperature, top-k, top-p,
 * min-p) measured by frequency over many seeded draws, penalties applied to the right tokens,
 * determinism per seed, greedy detection. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "sampler.h"

#define NV 50

static void logits_fixture(float *l)
{
    for (int i = 0; i < NV; i++) l[i] = (float)(3.0 * sin(i * 1.7) + 0.05 * i);
}

/* float64 reference: kept candidates and their probabilities under the same rules */
static void reference(const sampler_params *p, const float *l, double *prob)
{
    int idx[NV];
    for (int i = 0; i < NV; i++) idx[i] = i;
    for (int i = 0; i < NV; i++) /* sort by logit desc, id asc */
        for (int j = i + 1; j < NV; j++)
            if (l[idx[j]] > l[idx[i]] || (l[idx[j]] == l[idx[i]] && idx[j] < idx[i])) { int t = idx[i]; idx[i] = idx[j]; idx[j] = t; }
    int k = p->top_k > 0 && p->top_k < NV ? p->top_k : NV;
    double mx = l[idx[0]], sum = 0, e[NV];
    for (int i = 0; i < k; i++) { e[i] = exp((double)l[idx[i]] - mx); sum += e[i]; }
    int keep = k;
    if (p->top_p > 0 && p->top_p < 1) {
        double c = 0;
        for (int i = 0; i < k; i++) { c += e[i] / sum; if (c >= p->top_p) { keep = i + 1; break; } }
    }
    if (p->min_p > 0) { int m = 1; while (m < keep && e[m] >= p->min_p * e[0]) m++; keep = m; }
    double tot = 0, w[NV];
    for (int i = 0; i < keep; i++) { w[i] = exp(((double)l[idx[i]] - mx) / p->temperature); tot += w[i]; }
    memset(prob, 0, sizeof(double) * NV);
    for (int i = 0; i < keep; i++) prob[idx[i]] = w[i] / tot;
}

static void check_distribution(const sampler_params *p, const char *what)
{
    float base[NV], l[NV];
    logits_fixture(base);
    double ref[NV];
    reference(p, base, ref);
    sampler *s;
    CHECK(sampler_create(&s, p, NV) == 0, "create");
    int n = 40000, count[NV] = { 0 };
    for (int i = 0; i < n; i++) {
        memcpy(l, base, sizeof l);
        int32_t t = sampler_sample(s, l);
        CHECK(t >= 0 && t < NV, "%s: token %d out of range", what, t);
        if (t >= 0 && t < NV) count[t]++;
    }
    for (int i = 0; i < NV; i++) {
        double f = (double)count[i] / n, sd = sqrt(ref[i] * (1 - ref[i]) / n);
        if (ref[i] == 0) CHECK(count[i] == 0, "%s: token %d drawn %d times but excluded", what, i, count[i]);
        else CHECK(fabs(f - ref[i]) <= 5 * sd + 1e-3, "%s: token %d frequency %.4f vs %.4f", what, i, f, ref[i]);
    }
    sampler_destroy(s);
}

static void test_distributions(void)
{
    sampler_params p;
    sampler_params_default(&p);
    p.seed = 7;
    p.temperature = 1.0f; check_distribution(&p, "temp 1");
    p.temperature = 0.5f; check_distribution(&p, "temp 0.5");
    p.temperature = 1.5f; p.top_k = 5; check_distribution(&p, "top-k 5");
    p.top_k = 0; p.top_p = 0.6f; check_distribution(&p, "top-p 0.6");
    p.top_p = 1.0f; p.min_p = 0.2f; check_distribution(&p, "min-p 0.2");
    p.top_k = 10; p.top_p = 0.9f; p.min_p = 0.05f; p.temperature = 0.8f; check_distribution(&p, "all");
}

static void test_seed_determinism(void)
{
    sampler_params p;
    sampler_params_default(&p);
    p.temperature = 1.0f;
    float base[NV], l[NV];
    logits_fixture(base);
    int32_t a[64], b[64], c[64];
    int32_t *runs[3] = { a, b, c };
    uint64_t seeds[3] = { 42, 42, 43 };
    for (int r = 0; r < 3; r++) {
        p.seed = seeds[r];
        sampler *s;
        CHECK(sampler_create(&s, &p, NV) == 0, "create");
        for (int i = 0; i < 64; i++) { memcpy(l, base, sizeof l); runs[r][i] = sampler_sample(s, l); }
        sampler_destroy(s);
    }
    CHECK(memcmp(a, b, sizeof a) == 0, "same seed gave different tokens");
    CHECK(memcmp(a, c, sizeof a) != 0, "different seeds gave the same 64 tokens");
}

static void test_penalties(void)
{
    sampler_params p;
    sampler_params_default(&p);
    p.repetition_penalty = 2.0f;
    p.frequency_penalty = 0.5f;
    p.presence_penalty = 0.25f;
    p.penalty_last_n = 4;
    sampler *s;
    CHECK(sampler_create(&s, &p, NV) == 0, "create");
    CHECK(!sampler_is_greedy(s), "penalties must disable the device argmax");
    /* history 9 3 3 5 3 -> window of 4: 3 3 5 3 (9 forgotten) */
    int32_t h[] = { 9, 3, 3, 5, 3 };
    for (int i = 0; i < 5; i++) sampler_accept(s, h[i]);
    float l[NV];
    for (int i = 0; i < NV; i++) l[i] = -10.0f;
    l[3] = 4.0f; l[5] = -2.0f; l[9] = 3.9f; l[7] = 1.0f;
    int32_t t = sampler_sample(s, l);
    /* 3: 4/2 - 3*0.5 - 0.25 = 0.25; 5: -2*2 - 0.5 - 0.25 = -4.75; 9 untouched = 3.9 */
    CHECK(fabsf(l[3] - 0.25f) < 1e-6f, "token 3 penalised to %f, want 0.25", l[3]);
    CHECK(fabsf(l[5] + 4.75f) < 1e-6f, "token 5 penalised to %f, want -4.75", l[5]);
    CHECK(l[9] == 3.9f, "token 9 left the window but was penalised (%f)", l[9]);
    CHECK(t == 9, "greedy after penalties picked %d, want 9", t);
    sampler_destroy(s);
}

static void test_greedy(void)
{
    sampler_params p;
    sampler_params_default(&p);
    sampler *s;
    CHECK(sampler_create(&s, &p, NV) == 0, "create");
    CHECK(sampler_is_greedy(s), "default params must be greedy");
    float l[NV];
    logits_fixture(l);
    l[17] = 100.0f;
    CHECK(sampler_sample(s, l) == 17, "greedy did not pick the maximum");
    sampler_destroy(s);
}

/* sampler_sample_logprobs: float64 log-softmax of the penalised row over the temperature (before
 * top-k / top-p cut it), the best n in order, masked (-inf) tokens never drawn nor listed, and the
 * same draws as sampler_sample for the same seed */
static void test_logprobs(void)
{
    sampler_params p;
    sampler_params_default(&p);
    p.temperature = 0.7f;
    p.top_k = 5;
    p.top_p = 0.9f;
    p.presence_penalty = 0.5f;
    p.seed = 11;
    sampler *s, *t;
    CHECK(sampler_create(&s, &p, NV) == 0 && sampler_create(&t, &p, NV) == 0, "create");
    sampler_accept(s, 4); sampler_accept(t, 4);
    int masked = 0, same = 1, bad = 0;
    for (int round = 0; round < 300; round++) {
        float l[NV], l2[NV];
        logits_fixture(l);
        for (int i = 0; i < NV; i += 3) l[i] = -INFINITY; /* a third masked */
        memcpy(l2, l, sizeof l);
        sampler_logprobs lp;
        int32_t a = sampler_sample_logprobs(s, l, 8, &lp), b = sampler_sample(t, l2);
        masked += a % 3 == 0;
        same &= a == b;
        double m = -INFINITY, sum = 0, ref[NV];
        for (int i = 0; i < NV; i++) m = fmax(m, l2[i]);
        for (int i = 0; i < NV; i++) sum += exp((l2[i] - m) / 0.7);
        for (int i = 0; i < NV; i++) ref[i] = (l2[i] - m) / 0.7 - log(sum);
        bad += lp.n_top != 8 || fabs(lp.chosen - ref[a]) > 1e-5;
        for (int k = 0; k < lp.n_top; k++) {
            int32_t id = lp.top_id[k];
            int above = 0;
            for (int i = 0; i < NV; i++) above += ref[i] > ref[id];
            bad += id % 3 == 0 || above != k || fabs(lp.top_lp[k] - ref[id]) > 1e-5;
        }
    }
    CHECK(masked == 0, "%d draws of masked tokens", masked);
    CHECK(same, "sampler_sample_logprobs drew otherwise than sampler_sample");
    CHECK(bad == 0, "%d logprobs off the float64 reference", bad);
    /* two finite tokens: two listed */
    float l[NV];
    for (int i = 0; i < NV; i++) l[i] = -INFINITY;
    l[7] = 1.0f; l[30] = 2.0f;
    sampler_logprobs lp;
    int32_t a = sampler_sample_logprobs(s, l, 20, &lp);
    CHECK((a == 7 || a == 30) && lp.n_top == 2 && lp.top_id[0] == 30 && lp.top_id[1] == 7, "drew %d, listed %d: %d %d",
          a, lp.n_top, lp.top_id[0], lp.top_id[1]);
    sampler_destroy(s);
    sampler_destroy(t);
}

/* sampler_score: a given token's log-softmax at temperature 1 without penalties, whatever the
 * sampler's settings and history, and the row and the draws untouched */
static void test_score(void)
{
    sampler_params p;
    sampler_params_default(&p);
    p.temperature = 0.5f;
    p.repetition_penalty = 1.5f;
    p.seed = 3;
    sampler *s, *t;
    CHECK(sampler_create(&s, &p, NV) == 0 && sampler_create(&t, &p, NV) == 0, "create");
    for (int i = 0; i < 10; i++) { sampler_accept(s, i); sampler_accept(t, i); }
    float l[NV], keep[NV];
    logits_fixture(l);
    memcpy(keep, l, sizeof l);
    double m = -INFINITY, sum = 0;
    for (int i = 0; i < NV; i++) m = fmax(m, l[i]);
    for (int i = 0; i < NV; i++) sum += exp(l[i] - m);
    int bad = 0;
    for (int32_t tok = 0; tok < NV; tok++) {
        sampler_logprobs lp;
        sampler_score(s, l, tok, 3, &lp);
        bad += fabs(lp.chosen - (l[tok] - m - log(sum))) > 1e-5 || lp.n_top != 3;
        for (int k = 0; k < lp.n_top; k++) bad += fabs(lp.top_lp[k] - (l[lp.top_id[k]] - m - log(sum))) > 1e-5;
    }
    CHECK(bad == 0, "%d scores off the float64 log-softmax", bad);
    CHECK(!memcmp(l, keep, sizeof l), "the row changed");
    float a[NV], b[NV];
    memcpy(a, l, sizeof l);
    memcpy(b, l, sizeof l);
    CHECK(sampler_sample(s, a) == sampler_sample(t, b), "scoring changed what the sampler draws");
    sampler_destroy(s);
    sampler_destroy(t);
}

int main(void)
{
    RUN_TEST(test_distributions);
    RUN_TEST(test_seed_determinism);
    RUN_TEST(test_penalties);
    RUN_TEST(test_greedy);
    RUN_TEST(test_logprobs);
    RUN_TEST(test_score);
    CHECK_EXIT();
}
