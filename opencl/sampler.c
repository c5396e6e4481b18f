/* sampler.c — penalties, temperature, top-k, top-p, min-p and a seeded draw (see sampler.h).
 * Order as llama.cpp's common chain: penalties, top-k, top-p, min-p, temperature, draw. */
#include "sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct sampler {
    sampler_params p;
    uint32_t n_vocab;
    uint64_t rng;
    int32_t *hist;          /* ring of the last penalty_last_n tokens (all when 0: grows) */
    size_t hist_n, hist_cap, hist_head;
    uint32_t *count;        /* occurrences per token in the window */
    int32_t *cand;          /* scratch: candidate ids */
    float *cval;
};

void sampler_params_default(sampler_params *p)
{
    memset(p, 0, sizeof *p);
    p->top_p = 1.0f;
    p->repetition_penalty = 1.0f;
    p->penalty_last_n = 64;
}

int sampler_create(sampler **out, const sampler_params *p, uint32_t n_vocab)
{
    sampler *s = calloc(1, sizeof *s);
    if (!s) return -1;
    s->p = *p;
    s->n_vocab = n_vocab;
    s->rng = p->seed ^ 0x9E3779B97F4A7C15ull;
    s->count = calloc(n_vocab, sizeof *s->count);
    s->cand = malloc(n_vocab * sizeof *s->cand);
    s->cval = malloc(n_vocab * sizeof *s->cval);
    if (!s->count || !s->cand || !s->cval) { sampler_destroy(s); return -1; }
    *out = s;
    return 0;
}

void sampler_destroy(sampler *s)
{
    if (!s) return;
    free(s->hist); free(s->count); free(s->cand); free(s->cval);
    free(s);
}

const sampler_params *sampler_get_params(const sampler *s) { return &s->p; }

static int has_penalties(const sampler_params *p)
{
    return p->repetition_penalty != 1.0f || p->frequency_penalty != 0.0f || p->presence_penalty != 0.0f;
}

int sampler_is_greedy(const sampler *s) { return s->p.temperature <= 0.0f && !has_penalties(&s->p); }

void sampler_accept(sampler *s, int32_t tok)
{
    if (tok < 0 || (uint32_t)tok >= s->n_vocab) return;
    size_t lim = s->p.penalty_last_n > 0 ? (size_t)s->p.penalty_last_n : 0;
    if (lim && s->hist_n == lim) { /* window full: forget the oldest */
        int32_t old = s->hist[s->hist_head];
        s->count[old]--;
        s->hist[s->hist_head] = tok;
        s->hist_head = (s->hist_head + 1) % lim;
        s->count[tok]++;
        return;
    }
    if (s->hist_n == s->hist_cap) {
        size_t nc = s->hist_cap ? s->hist_cap * 2 : 64;
        if (lim && nc > lim) nc = lim;
        int32_t *h = realloc(s->hist, nc * sizeof *h);
        if (!h) return;
        s->hist = h;
        s->hist_cap = nc;
    }
    s->hist[s->hist_n++] = tok;
    s->count[tok]++;
}

/* xoshiro-style splitmix64: small, seeded, the same sequence on every platform */
static double next_u01(sampler *s)
{
    uint64_t z = (s->rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0;
}

static void apply_penalties(sampler *s, float *logits)
{
    const sampler_params *p = &s->p;
    if (!has_penalties(p)) return;
    /* each distinct token in the window once */
    for (size_t i = 0; i < s->hist_n; i++) {
        int32_t t = s->hist[i];
        uint32_t c = s->count[t];
        if (c == 0 || c > 0x7fffffff) continue;
        float l = logits[t];
        if (p->repetition_penalty != 1.0f) l = l > 0 ? l / p->repetition_penalty : l * p->repetition_penalty;
        l -= (float)c * p->frequency_penalty + p->presence_penalty;
        logits[t] = l;
        s->count[t] |= 0x80000000u; /* mark as done */
    }
    for (size_t i = 0; i < s->hist_n; i++) s->count[s->hist[i]] &= 0x7fffffffu;
}

static int cmp_desc(const void *a, const void *b, void *ctx)
{
    const float *v = ctx;
    float x = v[*(const int32_t *)a], y = v[*(const int32_t *)b];
    if (x != y) return x < y ? 1 : -1;
    return *(const int32_t *)a - *(const int32_t *)b;
}

/* "a ranks below b": lower value, or equal value and higher id */
static int below(const float *v, int32_t a, int32_t b) { return v[a] < v[b] || (v[a] == v[b] && a > b); }

static void sift_down(int32_t *h, size_t k, size_t x, const float *v)
{
    for (;;) {
        size_t l = 2 * x + 1, r = l + 1, m = x;
        if (l < k && below(v, h[l], h[m])) m = l;
        if (r < k && below(v, h[r], h[m])) m = r;
        if (m == x) return;
        int32_t t = h[x]; h[x] = h[m]; h[m] = t;
        x = m;
    }
}

/* the k best of ids[0..n) (by v, ties to the lower id) moved to ids[0..k), sorted best first */
static void top_sorted(int32_t *ids, size_t n, size_t k, const float *v)
{
    if (k > n) k = n;
    /* min-heap of the best k seen so far; most of a vocabulary fails the first comparison */
    for (size_t j = k / 2; j-- > 0;) sift_down(ids, k, j, v);
    for (size_t i = k; i < n; i++) {
        if (!below(v, ids[0], ids[i])) continue;
        ids[0] = ids[i];
        sift_down(ids, k, 0, v);
    }
    qsort_r(ids, k, sizeof *ids, cmp_desc, (void *)v);
}

/* the choice from a row whose penalties are applied */
static int32_t choose(sampler *s, const float *logits)
{
    const sampler_params *p = &s->p;
    uint32_t n = s->n_vocab;
    if (p->temperature <= 0.0f) {
        int32_t best = 0;
        for (uint32_t i = 1; i < n; i++)
            if (logits[i] > logits[best]) best = (int32_t)i;
        return best;
    }
    for (uint32_t i = 0; i < n; i++) s->cand[i] = (int32_t)i;
    /* without top-k, a softmax tail beyond the best 1024 is below any useful top-p/min-p cut */
    size_t k = p->top_k > 0 && (uint32_t)p->top_k < n ? (size_t)p->top_k : (n < 1024 ? n : 1024);
    top_sorted(s->cand, n, k, logits);
    if (k > n) k = n;
    /* softmax over the candidates at temperature 1 for top-p/min-p, as llama.cpp's chain does */
    float mx = logits[s->cand[0]];
    double sum = 0;
    for (size_t i = 0; i < k; i++) { s->cval[i] = expf(logits[s->cand[i]] - mx); sum += s->cval[i]; }
    size_t keep = k;
    if (p->top_p < 1.0f && p->top_p > 0.0f) {
        double c = 0;
        for (size_t i = 0; i < k; i++) {
            c += s->cval[i] / sum;
            if (c >= p->top_p) { keep = i + 1; break; }
        }
    }
    if (p->min_p > 0.0f) {
        size_t m = 1;
        while (m < keep && s->cval[m] >= p->min_p * s->cval[0]) m++;
        keep = m;
    }
    double tot = 0;
    size_t last = 0; /* the last candidate of weight > 0: masked (-inf) tokens weigh 0 and are never drawn */
    for (size_t i = 0; i < keep; i++) {
        s->cval[i] = expf((logits[s->cand[i]] - mx) / p->temperature);
        tot += s->cval[i];
        if (s->cval[i] > 0) last = i;
    }
    double r = next_u01(s) * tot, c = 0;
    for (size_t i = 0; i <= last; i++) {
        c += s->cval[i];
        if (r < c) return s->cand[i];
    }
    return s->cand[last];
}

int32_t sampler_sample(sampler *s, float *logits)
{
    apply_penalties(s, logits);
    return choose(s, logits);
}

/* the log-softmax of logits / t: the n best into lp (masked tokens never listed); returns the
 * row's max and log of its sum, for the caller's chosen token */
static void top_logprobs(sampler *s, const float *logits, double t, int n, sampler_logprobs *lp, double *m_out,
                         double *ls_out)
{
    double m = -INFINITY, sum = 0;
    uint32_t nv = s->n_vocab;
    for (uint32_t i = 0; i < nv; i++)
        if (logits[i] > m) m = logits[i];
    for (uint32_t i = 0; i < nv; i++) sum += exp((logits[i] - m) / t);
    double ls = log(sum);
    if (n < 1) n = 1;
    if (n > SAMPLER_MAX_LOGPROBS) n = SAMPLER_MAX_LOGPROBS;
    for (uint32_t i = 0; i < nv; i++) s->cand[i] = (int32_t)i;
    top_sorted(s->cand, nv, (size_t)n, logits); /* choose() refills cand afterwards */
    lp->n_top = 0;
    for (int i = 0; i < n && (uint32_t)i < nv && logits[s->cand[i]] > -INFINITY; i++) {
        lp->top_id[i] = s->cand[i];
        lp->top_lp[i] = (float)((logits[s->cand[i]] - m) / t - ls);
        lp->n_top = i + 1;
    }
    *m_out = m;
    *ls_out = ls;
}

int32_t sampler_sample_logprobs(sampler *s, float *logits, int n, sampler_logprobs *lp)
{
    apply_penalties(s, logits);
    double t = s->p.temperature > 0.0f ? s->p.temperature : 1.0, m, ls;
    top_logprobs(s, logits, t, n, lp, &m, &ls);
    int32_t tok = choose(s, logits);
    lp->chosen = (float)((logits[tok] - m) / t - ls);
    return tok;
}

void sampler_score(sampler *s, const float *logits, int32_t token, int n, sampler_logprobs *lp)
{
    double m, ls;
    top_logprobs(s, logits, 1.0, n, lp, &m, &ls);
    lp->chosen = (float)(logits[token] - m - ls);
}
