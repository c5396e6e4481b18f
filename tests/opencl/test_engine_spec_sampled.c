/* test_engine_spec_sampled.c — sampled speculative decoding through the engine on the real Gemma 3 270M
 * (models/gemma-3-270m-q4_k_m.gguf) keeps plain sampling's distribution: a repetitive prompt, its greedy
 * next token t0 fed first, temperature 1, top-k 6, drafts of up to 3 (prompt lookup).
 * A decode step costs about 0.4 s on PoCL, so the runs share the engine's work: each verification step a
 * run can take (t0 and its draft, and each correction g1 with its own) is made once as spec_next makes it
 * (a fork of the prefilled prompt, a logits_all step, the rejected tail cut), and RUNS seeded runs replay
 * spec_next's host side on those rows (sampler_accept of the fed token, spec_accept_sampled; a step without
 * a draft draws from sampler_dist as the engine's own draw would). Seeds of both an accepted and a rejected
 * first draft then run through spec_next itself and must give the replay's tokens exactly.
 *   test_sampled_fit: the 2,000 runs' first two generated tokens (g1, g2) fit p(g1) p(g2 | g1), the
 *     target probabilities a plain engine gives (one-token steps on the same prefixes, sampler_dist with the
 *     same settings and history; 36 pairs): Pearson's chi-square (tests/lib/chi_square.h: bins of expected
 *     count below 5 merged; 25 bins, dof 24), pass at p > 1e-3 (this seed set: chi2 36.2, p 0.052; five
 *     other seed sets gave p 0.05-0.87); drafts are made and some rejected (2,378 of 6,000 accepted, the
 *     first rejected in 675 runs).
 *   test_spec_next_replays: spec_next's tokens, counters and cache length for two seeds of each kind equal
 *     the replay's. */
#include "check.h"
#include "chi_square.h"
#include "engine.h"
#include "sampler.h"
#include "spec.h"
#include "tokenizer.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODEL "models/gemma-3-270m-q4_k_m.gguf"
#define RUNS 2000
#define KD 3        /* drafts of up to KD tokens */
#define TOPK 6
#define P_MIN 1e-3
#define MAXB 16     /* corrections g1 with their own verification step */

static engine *E;
static uint32_t V;
static char err[512];
static int32_t P[256], T0;
static int NP, BASE;

/* one verification step: tok, then its draft, fed in one step; the k + 1 raw rows back */
typedef struct verif {
    int32_t tok, draft[KD];
    int k;
    float *rows;
} verif;

static verif V1, VB[MAXB];
static int NB, CUT; /* CUT: P + T0 in a sequence whose T0 came in V1's step, cut back after it */

static sampler *new_sampler(uint64_t seed)
{
    sampler_params p;
    sampler_params_default(&p);
    p.temperature = 1.0f;
    p.top_k = TOPK;
    p.seed = seed;
    sampler *s = NULL;
    if (sampler_create(&s, &p, V)) { printf("FAIL sampler_create\n"); exit(1); }
    for (int i = 0; i < NP; i++) sampler_accept(s, P[i]);
    return s;
}

static void step(engine_item *it)
{
    if (engine_step(E, it, 1, err, sizeof err)) { printf("FAIL step: %s\n", err); exit(1); }
}

/* tok and its draft (from hist[0, n), tok last) stepped with logits_all on a fork of src */
static void verify_once(verif *v, int src, const int32_t *hist, int n)
{
    v->tok = hist[n - 1];
    v->k = spec_ngram_draft(hist, n, SPEC_NGRAM_MIN, SPEC_NGRAM_MAX, KD, v->draft);
    int32_t t[KD + 1] = { v->tok };
    memcpy(t + 1, v->draft, sizeof(int32_t) * (size_t)v->k);
    v->rows = malloc(sizeof(float) * V * (size_t)(v->k + 1));
    int s = engine_seq_fork(E, src);
    engine_item it = { .seq = s, .tokens = t, .n_tokens = v->k + 1, .logits = v->rows, .logits_all = 1 };
    step(&it);
    if (src == BASE) { /* the sequence spec_next leaves after rejecting V1's first draft */
        CHECK(engine_seq_truncate(E, s, NP + 1, hist, err, sizeof err) == 0, "cut: %s", err);
        CUT = s;
    } else {
        engine_seq_free(E, s);
    }
}

/* the step after the correction g1 (made once, on first need) */
static verif *after(int32_t g1)
{
    for (int i = 0; i < NB; i++)
        if (VB[i].tok == g1) return &VB[i];
    if (NB == MAXB) { printf("FAIL more than %d corrections\n", MAXB); exit(1); }
    int32_t h[258];
    memcpy(h, P, sizeof(int32_t) * (size_t)NP);
    h[NP] = T0;
    h[NP + 1] = g1;
    verify_once(&VB[NB], CUT, h, NP + 2);
    return &VB[NB++];
}

/* spec_next's host side on v's rows: the fed token to s, then the acceptance; out gets v->tok's
 * successors (accepted drafts, then the next choice); returns their count */
static int replay(sampler *s, const verif *v, int32_t *out, int *accepted)
{
    float *w = malloc(sizeof(float) * V * (size_t)(v->k + 1));
    memcpy(w, v->rows, sizeof(float) * V * (size_t)(v->k + 1));
    sampler_accept(s, v->tok);
    int32_t next;
    int a = v->k ? spec_accept_sampled(s, w, V, v->draft, v->k, &next) : -1;
    free(w);
    if (a < 0) return -1; /* no draft */
    memcpy(out, v->draft, sizeof(int32_t) * (size_t)a);
    out[a] = next;
    *accepted = a;
    return a + 1;
}

/* the first two generated tokens of the run of seed (after T0) */
static void run_replay(uint64_t seed, int32_t *g, int *drafted, int *accepted)
{
    sampler *s = new_sampler(seed);
    int32_t out[KD + 1];
    int a, m = replay(s, &V1, out, &a);
    *drafted = V1.k;
    *accepted = a;
    g[0] = out[0];
    if (m >= 2) {
        g[1] = out[1];
    } else {
        verif *b = after(out[0]);
        int a2;
        m = replay(s, b, out, &a2);
        if (m < 0) { /* no draft after g1: spec_next lets the engine draw, from the same distribution */
            const int32_t *ids;
            const float *p;
            float *row = malloc(sizeof(float) * V);
            memcpy(row, b->rows, sizeof(float) * V);
            int n = sampler_dist(s, row, &ids, &p);
            double u = sampler_uniform(s), c = 0;
            g[1] = ids[n - 1];
            for (int i = 0; i < n; i++) { c += p[i]; if (u < c) { g[1] = ids[i]; break; } }
            free(row);
        } else {
            g[1] = out[0];
            *drafted += b->k;
            *accepted += a2;
        }
    }
    sampler_destroy(s);
}

/* sampler_dist of row under the test's sampler after history P T0 rest[0, nr), into prob[V] */
static void dist_after(float *row, const int32_t *rest, int nr, double *prob)
{
    sampler *sm = new_sampler(0);
    sampler_accept(sm, T0);
    for (int i = 0; i < nr; i++) sampler_accept(sm, rest[i]);
    const int32_t *ids;
    const float *p;
    int n = sampler_dist(sm, row, &ids, &p);
    memset(prob, 0, sizeof(double) * V);
    for (int i = 0; i < n; i++) prob[ids[i]] = p[i];
    sampler_destroy(sm);
}

/* tok stepped alone on a fork of src (plain decoding's one token a step): the row into row; the fork's id,
 * or freed (-1) unless keep */
static int plain_step(int src, int32_t tok, float *row, int keep)
{
    int s = engine_seq_fork(E, src);
    engine_item it = { .seq = s, .tokens = &tok, .n_tokens = 1, .logits = row };
    step(&it);
    if (keep) return s;
    engine_seq_free(E, s);
    return -1;
}

/* the runs, replayed: their first two generated tokens, drafted and accepted counts */
static int32_t PAIRS[RUNS][2];
static int DRAFTED[RUNS], ACCEPTED[RUNS];

static void test_sampled_fit(void)
{
    int drafted = 0, accepted = 0, rejected_first = 0;
    for (int r = 0; r < RUNS; r++) {
        run_replay((uint64_t)r, PAIRS[r], &DRAFTED[r], &ACCEPTED[r]);
        drafted += DRAFTED[r];
        accepted += ACCEPTED[r];
        rejected_first += PAIRS[r][0] != V1.draft[0];
    }
    /* the plain engine's target: p(g1) after P T0, p(g2 | g1) after P T0 g1, one token a step */
    float *row = malloc(sizeof(float) * V), *row1 = malloc(sizeof(float) * V);
    double *p1 = malloc(sizeof(double) * V), *p2 = malloc(sizeof(double) * V);
    int q = plain_step(BASE, T0, row, 1);
    memcpy(row1, V1.rows, sizeof(float) * V);
    double dmax = 0;
    for (uint32_t i = 0; i < V; i++) dmax = fmax(dmax, fabs((double)row[i] - row1[i]));
    dist_after(row, NULL, 0, p1);
    /* bins: every (g1, g2) of nonzero plain probability */
    static double pe[TOPK * TOPK];
    static long obs[TOPK * TOPK];
    int32_t bg[TOPK * TOPK][2];
    int nb = 0;
    for (uint32_t g1 = 0; g1 < V; g1++) {
        if (p1[g1] <= 0) continue;
        int32_t t = (int32_t)g1;
        plain_step(q, t, row, 0);
        dist_after(row, &t, 1, p2);
        for (uint32_t g2 = 0; g2 < V && nb < TOPK * TOPK; g2++) {
            if (p2[g2] <= 0) continue;
            bg[nb][0] = t;
            bg[nb][1] = (int32_t)g2;
            pe[nb++] = p1[g1] * p2[g2];
        }
    }
    engine_seq_free(E, q);
    int outside = 0;
    for (int r = 0; r < RUNS; r++) {
        int j = 0;
        while (j < nb && !(bg[j][0] == PAIRS[r][0] && bg[j][1] == PAIRS[r][1])) j++;
        if (j < nb) obs[j]++;
        else outside++;
    }
    double chi2 = 0;
    int dof = 0;
    double pv = outside ? 0 : chi_fit(pe, obs, nb, RUNS, &chi2, &dof);
    printf("  draft after t0: %d tokens, p(d0) %.3f; %d corrections stepped; verification row vs plain row: "
           "max |delta| %.3g\n", V1.k, p1[V1.draft[0]], NB, dmax);
    printf("  %d runs: %d drafted, %d accepted, first draft rejected in %d; %d bins, %d outside them; chi2 %.2f, "
           "dof %d, p-value %.3g\n", RUNS, drafted, accepted, rejected_first, nb, outside, chi2, dof, pv);
    CHECK(pv > P_MIN, "the first two tokens do not fit plain sampling's: p-value %.3g", pv);
    CHECK(drafted > 0 && accepted > 0 && accepted < drafted && rejected_first > 0,
          "drafts: %d drafted, %d accepted, %d first rejected (some of each needed)", drafted, accepted,
          rejected_first);
    free(row);
    free(row1);
    free(p1);
    free(p2);
}

/* spec_next itself for seeds of both kinds: the replay's tokens and counts */
static void test_spec_next_replays(void)
{
    int want[2] = { 2, 2 }, ran = 0; /* seeds whose first draft is accepted, rejected */
    for (int r = 0; r < RUNS && (want[0] || want[1]); r++) {
        int kind = PAIRS[r][0] != V1.draft[0];
        if (!want[kind]) continue;
        want[kind]--;
        sampler *s = new_sampler((uint64_t)r);
        int seq = engine_seq_fork(E, BASE);
        spec_run sr;
        CHECK(spec_begin(&sr, P, NP, KD, s) == 0, "spec_begin: %s", sr.err);
        int32_t out[SPEC_MAX_DRAFT + 1], g[2];
        int m = spec_next(&sr, E, seq, T0, out);
        CHECK(m >= 1, "spec_next: %s", sr.err);
        CHECK(engine_seq_len(E, seq) == NP + m, "seed %d: %d tokens in the cache, want %d", r, engine_seq_len(E, seq),
              NP + m);
        if (m >= 3) { g[0] = out[1]; g[1] = out[2]; }
        else if (m == 2) { g[0] = out[1]; g[1] = sr.next; }
        else {
            g[0] = sr.next;
            int m2 = spec_next(&sr, E, seq, sr.next, out);
            CHECK(m2 >= 1, "spec_next: %s", sr.err);
            g[1] = m2 >= 2 ? out[1] : sr.next;
        }
        CHECK(g[0] == PAIRS[r][0] && g[1] == PAIRS[r][1] && sr.drafted == DRAFTED[r] && sr.accepted == ACCEPTED[r],
              "seed %d: spec_next gave %d %d (%d drafted, %d accepted), the replay %d %d (%d, %d)", r, g[0], g[1],
              sr.drafted, sr.accepted, PAIRS[r][0], PAIRS[r][1], DRAFTED[r], ACCEPTED[r]);
        printf("  seed %d: %d %d, %d drafted, %d accepted, as replayed\n", r, g[0], g[1], sr.drafted, sr.accepted);
        spec_end(&sr);
        engine_seq_free(E, seq);
        sampler_destroy(s);
        ran++;
    }
    CHECK(ran == 4, "%d seeds of the 4 wanted (2 accepted, 2 rejected first drafts)", ran);
}

int main(void)
{
    engine_opts o = { .n_ctx = 1024, .max_seqs = 4, .max_batch_tokens = 64 };
    if (engine_load(&E, MODEL, &o, err, sizeof err)) {
        printf("FAIL engine_spec_sampled_load: %s\n", err);
        return 1;
    }
    V = engine_get_info(E)->n_vocab;
    /* "The cat sat on the" + " mat": the draft ". The dog" is likely (p 0.67), not certain */
    const char *text = "The cat sat on the mat. The dog sat on the log. The cat sat on the";
    NP = tokenizer_encode(engine_tokenizer(E), text, strlen(text), 1, 0, P, 256);
    /* the prompt once; T0, its greedy continuation, is the token every run feeds first */
    sampler_params gp;
    sampler_params_default(&gp);
    sampler *g = NULL;
    if (sampler_create(&g, &gp, V)) return 1;
    BASE = engine_seq_new(E);
    engine_item it = { .seq = BASE, .tokens = P, .n_tokens = NP, .smp = g };
    step(&it);
    T0 = it.token_out;
    sampler_destroy(g);
    int32_t h[257];
    memcpy(h, P, sizeof(int32_t) * (size_t)NP);
    h[NP] = T0;
    verify_once(&V1, BASE, h, NP + 1);
    if (V1.k < 1) {
        printf("FAIL engine_spec_sampled: no draft after the prompt\n");
        return 1;
    }
    RUN_TEST(test_sampled_fit);
    RUN_TEST(test_spec_next_replays);
    free(V1.rows);
    for (int i = 0; i < NB; i++) free(VB[i].rows);
    engine_destroy(E);
    CHECK_EXIT();
}
