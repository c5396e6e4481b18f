/* test_spec_sampling.c — sampled speculative acceptance (spec_accept_sampled) keeps plain sampling's
 * distribution, on synthetic rows (no device). Goodness of fit is Pearson's chi-square (tests/lib/chi_square.h:
 * bins of expected count below 5 merged into a tail bin, dof = bins - 1, the p-value from a regularized
 * incomplete gamma); a fit passes at p > 1e-3, a token of probability 0 seen even once fails. Seeds are
 * fixed, so every run computes the same numbers.
 *   test_pvalue: Q at the tabled 0.001 critical values (dof 1, 5, 10, 30) gives 0.001.
 *   test_dist: sampler_dist equals a float64 reference of the chain (penalties, top-k, top-p at
 *     temperature 1, min-p, temperature), and sampler_sample's draw is the inverse CDF of sampler_dist
 *     at the same seed's uniform draw: the distribution is the one plain sampling draws from.
 *   test_accept_fits: 20,000 seeded trials per setting of spec_accept_sampled on fixed synthetic rows
 *     (24 tokens, drafts of 2-3): output token j, given the first j equal the draft, fits p_j (the
 *     reference after the history and draft[0, j)), for each j with 200 such trials or more (the bonus
 *     token too); settings cover penalties (the draft counted), likely (p 0.2-0.5) and unlikely (0.001-0.1)
 *     drafts, and drafts top-k / top-p / min-p cut to probability 0; dof 3 to 23. Temperature 0 with
 *     penalties verifies as plain greedy-with-penalties decoding, token for token.
 *   test_negative_controls: two wrong rules fail the same fit on the same rows at p < 1e-3: a rejection
 *     that draws from p_j with the draft left in, and accepted drafts kept from the penalties.
 */
#include "check.h"
#include "chi_square.h"
#include "sampler.h"
#include "spec.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NV 24        /* synthetic vocabulary */
#define TRIALS 20000
#define P_MIN 1e-3   /* the fit's threshold */
#define MAXK 3

typedef int (*accept_fn)(sampler *s, float *rows, uint32_t nv, const int32_t *draft, int k, int32_t *next);

static void test_pvalue(void)
{
    /* the 0.001 column of the chi-square table */
    const struct { int dof; double x; } crit[] = { { 1, 10.828 }, { 5, 20.515 }, { 10, 29.588 }, { 30, 59.703 } };
    for (size_t i = 0; i < sizeof crit / sizeof *crit; i++) {
        double q = gamma_q(crit[i].dof / 2.0, crit[i].x / 2);
        CHECK(fabs(q - 1e-3) < 2e-6, "Q at the 0.001 critical value of dof %d: %.6g", crit[i].dof, q);
    }
    CHECK(fabs(gamma_q(1.5, 1.5) - 0.391625) < 1e-5, "Q(1.5, 1.5) = %.6g", gamma_q(1.5, 1.5));
}

/* ---- a float64 reference of the sampler's chain ---- */

/* the tokens by v[NV], best first, ties to the lower id, into idx */
static void rank_order(const double *v, int *idx)
{
    for (int i = 0; i < NV; i++) idx[i] = i;
    for (int i = 0; i < NV; i++)
        for (int j = i + 1; j < NV; j++)
            if (v[idx[j]] > v[idx[i]] || (v[idx[j]] == v[idx[i]] && idx[j] < idx[i])) {
                int t = idx[i];
                idx[i] = idx[j];
                idx[j] = t;
            }
}

/* the distribution after history hist[0, nh) (penalties), the cuts and the temperature, into prob[NV] */
static void reference(const sampler_params *sp, const int32_t *hist, int nh, const float *row, double *prob)
{
    double l[NV];
    int cnt[NV] = { 0 }, idx[NV];
    int from = sp->penalty_last_n > 0 && nh > sp->penalty_last_n ? nh - sp->penalty_last_n : 0;
    for (int i = from; i < nh; i++) cnt[hist[i]]++;
    for (int i = 0; i < NV; i++) {
        float v = row[i]; /* float arithmetic as the sampler's row holds it */
        if (cnt[i]) {
            if (sp->repetition_penalty != 1.0f) v = v > 0 ? v / sp->repetition_penalty : v * sp->repetition_penalty;
            v -= (float)cnt[i] * sp->frequency_penalty + sp->presence_penalty;
        }
        l[i] = v;
    }
    rank_order(l, idx);
    memset(prob, 0, sizeof(double) * NV);
    if (sp->temperature <= 0) { prob[idx[0]] = 1; return; }
    int k = sp->top_k > 0 && sp->top_k < NV ? sp->top_k : NV;
    double e[NV], sum = 0, tot = 0, w[NV];
    for (int i = 0; i < k; i++) { e[i] = exp(l[idx[i]] - l[idx[0]]); sum += e[i]; }
    int keep = k;
    if (sp->top_p > 0 && sp->top_p < 1) {
        double c = 0;
        for (int i = 0; i < k; i++) { c += e[i] / sum; if (c >= sp->top_p) { keep = i + 1; break; } }
    }
    if (sp->min_p > 0) { int m = 1; while (m < keep && e[m] >= sp->min_p * e[0]) m++; keep = m; }
    for (int i = 0; i < keep; i++) { w[i] = exp((l[idx[i]] - l[idx[0]]) / sp->temperature); tot += w[i]; }
    for (int i = 0; i < keep; i++) prob[idx[i]] = w[i] / tot;
}

/* ---- the synthetic settings ---- */

typedef struct setting {
    const char *name;
    sampler_params sp;
    int k;
    int rank[MAXK];   /* draft[j]: the token of this rank in p_j (the reference after draft[0, j)) */
    int top_d0_next;  /* 1: row 1's best token is draft[0] (the penalties for accepting it matter) */
} setting;

static const int32_t HIST[] = { 3, 7, 7, 11, 3, 19 };
#define NH ((int)(sizeof HIST / sizeof *HIST))

/* fixed rows of logits, roughly N(0, 2) from a hash */
static void make_rows(const setting *st, float *rows, int32_t *draft, int salt)
{
    for (int j = 0; j <= st->k; j++)
        for (int i = 0; i < NV; i++) {
            uint32_t h = (uint32_t)(i * 2654435761u) ^ (uint32_t)((j + 1) * 40503u) ^ (uint32_t)(salt * 97u);
            h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
            rows[j * NV + i] = (float)(((double)(h % 10007) / 10007.0 - 0.5) * 7.0);
        }
    int32_t hist[NH + MAXK];
    memcpy(hist, HIST, sizeof HIST);
    for (int j = 0; j < st->k; j++) {
        if (j == 1 && st->top_d0_next) rows[NV + draft[0]] = rows[NV + 0] + 4.0f + fabsf(rows[NV + 1]) + 3.5f;
        double p[NV];
        reference(&st->sp, hist, NH + j, rows + j * NV, p);
        int idx[NV];
        rank_order(p, idx);
        draft[j] = idx[st->rank[j]];
        hist[NH + j] = draft[j];
    }
}

static sampler *fresh(const sampler_params *sp, uint64_t seed)
{
    sampler_params p = *sp;
    p.seed = seed;
    sampler *s = NULL;
    if (sampler_create(&s, &p, NV)) { printf("FAIL sampler_create\n"); exit(1); }
    for (int i = 0; i < NH; i++) sampler_accept(s, HIST[i]);
    return s;
}

/* TRIALS of fn on st's rows; the fit of output token j (given the first j equal the draft) to p_j for each
 * j with 200 or more such trials. Returns the smallest p-value; *accepted and *rejected count drafts. */
static double run_setting(const setting *st, accept_fn fn, int salt, int quiet, long *acc_out)
{
    float rows[(MAXK + 1) * NV], work[(MAXK + 1) * NV];
    int32_t draft[MAXK], hist[NH + MAXK];
    make_rows(st, rows, draft, salt);
    long obs[MAXK + 1][NV], n[MAXK + 1] = { 0 }, acc = 0;
    memset(obs, 0, sizeof obs);
    for (long t = 0; t < TRIALS; t++) {
        sampler *s = fresh(&st->sp, 1000003ull * (uint64_t)salt + (uint64_t)t);
        memcpy(work, rows, sizeof rows);
        int32_t next = -1;
        int a = fn(s, work, NV, draft, st->k, &next);
        sampler_destroy(s);
        acc += a;
        for (int j = 0; j <= a; j++) { /* out[j] given out[0, j) == draft[0, j): a >= j */
            obs[j][j < a ? draft[j] : next]++;
            n[j]++;
        }
    }
    memcpy(hist, HIST, sizeof HIST);
    memcpy(hist + NH, draft, sizeof draft);
    double worst = 1;
    for (int j = 0; j <= st->k; j++) {
        if (n[j] < 200) continue;
        double p[NV], chi2;
        int dof;
        reference(&st->sp, hist, NH + j, rows + j * NV, p);
        double pv = chi_fit(p, obs[j], NV, n[j], &chi2, &dof);
        char pd[32] = "bonus";
        if (j < st->k) snprintf(pd, sizeof pd, "p(draft) %.3f", p[draft[j]]);
        if (!quiet)
            printf("  %-22s token %d: n %6ld, %-14s chi2 %7.2f, dof %2d, p-value %.3g\n", st->name, j, n[j], pd,
                   chi2, dof, pv);
        if (pv < worst) worst = pv;
    }
    if (acc_out) *acc_out = acc;
    return worst;
}

static sampler_params params(float temp, int top_k, float top_p, float min_p, float rep, float freq, float pres)
{
    sampler_params p;
    sampler_params_default(&p);
    p.temperature = temp;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.repetition_penalty = rep;
    p.frequency_penalty = freq;
    p.presence_penalty = pres;
    return p;
}

static void test_dist(void)
{
    const sampler_params cases[] = {
        params(1.0f, 0, 1.0f, 0, 1, 0, 0),     params(0.7f, 5, 1.0f, 0, 1.3f, 0.2f, 0.1f),
        params(1.3f, 0, 0.8f, 0.05f, 1, 0, 0), params(0.9f, 8, 0.9f, 0, 1.5f, 0.5f, 0.5f),
        params(0, 0, 1.0f, 0, 1.5f, 0, 0),
    };
    float row[NV], work[NV];
    int mism = 0, draws = 0;
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        for (int r = 0; r < 50; r++) {
            setting st = { .sp = cases[c], .k = 0 };
            int32_t d[MAXK];
            make_rows(&st, row, d, 100 + r);
            double want[NV], got[NV] = { 0 };
            reference(&cases[c], HIST, NH, row, want);
            sampler *a = fresh(&cases[c], (uint64_t)r), *b = fresh(&cases[c], (uint64_t)r);
            const int32_t *ids;
            const float *p;
            memcpy(work, row, sizeof row);
            int n = sampler_dist(a, work, &ids, &p);
            for (int i = 0; i < n; i++) got[ids[i]] = p[i];
            double md = 0;
            for (int i = 0; i < NV; i++) md = fmax(md, fabs(got[i] - want[i]));
            CHECK(md < 1e-5, "case %zu row %d: sampler_dist off the reference by %.3g", c, r, md);
            /* the inverse CDF at the same uniform draw is sampler_sample's token */
            for (int t = 0; t < 20; t++) {
                double u = sampler_uniform(a), cum = 0, tot = 0;
                for (int i = 0; i < n; i++) tot += p[i];
                int32_t inv = ids[n - 1];
                for (int i = 0; i < n; i++) { cum += p[i]; if (u * tot < cum) { inv = ids[i]; break; } }
                memcpy(work, row, sizeof row);
                int32_t tok = sampler_sample(b, work);
                if (cases[c].temperature <= 0) inv = ids[0]; /* greedy draws nothing */
                mism += tok != inv;
                draws++;
            }
            sampler_destroy(a);
            sampler_destroy(b);
        }
    CHECK(mism == 0, "%d of %d draws of sampler_sample differ from sampler_dist's inverse CDF", mism, draws);
}

static const setting SETTINGS[] = {
    { .name = "plain, likely drafts", .k = 2, .rank = { 0, 0 } },
    { .name = "plain, unlikely d1", .k = 2, .rank = { 0, 3 } },
    { .name = "penalties, d0 counted", .k = 2, .rank = { 0, 4 }, .top_d0_next = 1 },
    { .name = "penalties, unlikely d0", .k = 3, .rank = { 3, 0, 1 } },
    { .name = "top-k/top-p, d1 cut", .k = 2, .rank = { 1, 10 } },
    { .name = "top-p/min-p, d0 cut", .k = 2, .rank = { 14, 0 } },
    { .name = "min-p, penalties", .k = 3, .rank = { 1, 2, 0 }, .top_d0_next = 1 },
};
#define N_SETTINGS ((int)(sizeof SETTINGS / sizeof *SETTINGS))
#define CUT_D1 4 /* the settings whose drafts are cut to probability 0 */
#define CUT_D0 5

static setting setting_at(int i)
{
    setting st = SETTINGS[i];
    const sampler_params ps[] = {
        params(0.4f, 0, 1.0f, 0, 1, 0, 0),
        params(1.0f, 0, 1.0f, 0, 1, 0, 0),          params(0.9f, 0, 1.0f, 0, 1.5f, 0.5f, 0.5f),
        params(1.1f, 0, 1.0f, 0, 1.2f, 0.3f, 0.2f), params(1.3f, 6, 0.85f, 0, 1, 0, 0),
        params(1.0f, 0, 0.7f, 0.1f, 1, 0, 0),       params(0.8f, 12, 1.0f, 0.03f, 1.4f, 0.2f, 0.4f),
    };
    st.sp = ps[i];
    return st;
}

static void test_accept_fits(void)
{
    for (int i = 0; i < N_SETTINGS; i++) {
        setting st = setting_at(i);
        long acc;
        double pv = run_setting(&st, spec_accept_sampled, i + 1, 0, &acc);
        printf("  %-22s %ld of %ld drafted tokens accepted\n", st.name, acc, (long)TRIALS * st.k);
        CHECK(pv > P_MIN, "%s: p-value %.3g", st.name, pv);
        if (i == CUT_D1 || i == CUT_D0) continue; /* a cut draft is never accepted */
        CHECK(acc > 0 && acc < (long)TRIALS * st.k, "%s: %ld accepted (some of both needed)", st.name, acc);
    }
    /* temperature 0 with penalties: every trial the plain penalized argmax sequence */
    setting st = { .name = "greedy, penalties", .sp = params(0, 0, 1.0f, 0, 1.5f, 0.3f, 0), .k = 2, .top_d0_next = 1 };
    float rows[(MAXK + 1) * NV];
    int32_t draft[MAXK], next;
    make_rows(&st, rows, draft, 9);
    draft[1] = (draft[1] + 1) % NV; /* the second drafted token wrong */
    sampler *s = fresh(&st.sp, 1), *g = fresh(&st.sp, 2);
    int a = spec_accept_sampled(s, rows, NV, draft, 2, &next);
    make_rows(&st, rows, draft, 9);
    int32_t t0 = sampler_sample(g, rows);
    sampler_accept(g, t0);
    int32_t t1 = sampler_sample(g, rows + NV);
    CHECK(a == 1 && t0 == draft[0] && next == t1, "greedy with penalties: %d accepted, next %d (plain %d %d)", a, next,
          t0, t1);
    sampler_destroy(s);
    sampler_destroy(g);
}

/* ---- wrong rules the fit must catch ---- */

static int wrong_rule;

static int accept_wrong(sampler *s, float *rows, uint32_t nv, const int32_t *draft, int k, int32_t *next)
{
    for (int i = 0;; i++) {
        const int32_t *ids;
        const float *p;
        int n = sampler_dist(s, rows + (size_t)i * nv, &ids, &p);
        double pd = 0, u = sampler_uniform(s), c = 0;
        for (int j = 0; j < n; j++)
            if (ids[j] == draft[i < k ? i : 0]) pd = p[j];
        if (i < k && u < pd) {
            if (wrong_rule != 2) sampler_accept(s, draft[i]); /* rule 2: the penalties never see it */
            continue;
        }
        /* rule 1: the draw keeps the rejected draft in */
        double r = sampler_uniform(s), tot = 0;
        for (int j = 0; j < n; j++) tot += (i < k && wrong_rule != 1 && ids[j] == draft[i]) ? 0 : p[j];
        *next = ids[0];
        for (int j = 0; j < n; j++) {
            if (i < k && wrong_rule != 1 && ids[j] == draft[i]) continue;
            c += p[j];
            if (r * tot < c) { *next = ids[j]; break; }
        }
        if (i < k && *next == draft[i]) { /* kept in and drawn: counts as accepted */
            if (wrong_rule != 2) sampler_accept(s, draft[i]);
            continue;
        }
        return i;
    }
}

static void test_negative_controls(void)
{
    wrong_rule = 1;
    setting st = setting_at(1);
    double pv = run_setting(&st, accept_wrong, 2, 0, NULL);
    printf("  rule 1 (the rejected draft left in the draw): smallest p-value %.3g\n", pv);
    CHECK(pv < P_MIN, "a draw with the rejected draft left in passed (p-value %.3g)", pv);
    wrong_rule = 2;
    st = setting_at(2);
    pv = run_setting(&st, accept_wrong, 3, 0, NULL);
    printf("  rule 2 (accepted drafts kept from the penalties): smallest p-value %.3g\n", pv);
    CHECK(pv < P_MIN, "accepted drafts kept from the penalties passed (p-value %.3g)", pv);
    wrong_rule = 0;
    pv = run_setting(&st, accept_wrong, 3, 1, NULL);
    CHECK(pv > P_MIN, "the controls' harness with the right rule fails (p-value %.3g)", pv);
}

int main(void)
{
    RUN_TEST(test_pvalue);
    RUN_TEST(test_dist);
    RUN_TEST(test_accept_fits);
    RUN_TEST(test_negative_controls);
    CHECK_EXIT();
}
