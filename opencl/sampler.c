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
    uint32_t kmax;          /* the candidates a draw takes (cand_k) */
    float *cv, *w;          /* scratch of kmax: candidates' values, their weights */
    int32_t *ci;            /* and ids (a draw from the device's candidates) */
    float *pv;              /* the penalized window's values, ids in pi */
    int32_t *pi;
    size_t pcap;
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
    s->kmax = p->top_k > 0 && (uint32_t)p->top_k < n_vocab ? (uint32_t)p->top_k : (n_vocab < 1024 ? n_vocab : 1024);
    if (s->kmax < 1) s->kmax = 1;
    s->cv = malloc(s->kmax * sizeof *s->cv);
    s->w = malloc(s->kmax * sizeof *s->w);
    s->ci = malloc(s->kmax * sizeof *s->ci);
    if (!s->count || !s->cand || !s->cval || !s->cv || !s->w || !s->ci) { sampler_destroy(s); return -1; }
    *out = s;
    return 0;
}

void sampler_destroy(sampler *s)
{
    if (!s) return;
    free(s->hist); free(s->count); free(s->cand); free(s->cval);
    free(s->cv); free(s->w); free(s->ci); free(s->pv); free(s->pi);
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

/* a window token's value after the penalties, seen c times */
static float penalized(const sampler_params *p, float l, uint32_t c)
{
    if (p->repetition_penalty != 1.0f) l = l > 0 ? l / p->repetition_penalty : l * p->repetition_penalty;
    return l - ((float)c * p->frequency_penalty + p->presence_penalty);
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
        logits[t] = penalized(p, logits[t], c);
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

/* the weights of the k best values of the processed row (val best first, temperature > 0) into s->w: the
 * candidates top-p and min-p keep, their count returned; *tot their sum, *last the last of weight > 0 */
static size_t weigh(sampler *s, const float *val, size_t k, double *tot_out, size_t *last_out)
{
    const sampler_params *p = &s->p;
    /* softmax over the candidates at temperature 1 for top-p/min-p, as llama.cpp's chain does */
    float mx = val[0];
    double sum = 0;
    for (size_t i = 0; i < k; i++) { s->w[i] = expf(val[i] - mx); sum += s->w[i]; }
    size_t keep = k;
    if (p->top_p < 1.0f && p->top_p > 0.0f) {
        double c = 0;
        for (size_t i = 0; i < k; i++) {
            c += s->w[i] / sum;
            if (c >= p->top_p) { keep = i + 1; break; }
        }
    }
    if (p->min_p > 0.0f) {
        size_t m = 1;
        while (m < keep && s->w[m] >= p->min_p * s->w[0]) m++;
        keep = m;
    }
    double tot = 0;
    size_t last = 0; /* the last candidate of weight > 0: masked (-inf) tokens weigh 0 and are never drawn */
    for (size_t i = 0; i < keep; i++) {
        s->w[i] = expf((val[i] - mx) / p->temperature);
        tot += s->w[i];
        if (s->w[i] > 0) last = i;
    }
    *tot_out = tot;
    *last_out = last;
    return keep;
}

/* the choice from the k best values of the processed row, val[i] of token ids[i], best first (ties to the
 * lower id) */
static int32_t choose_from(sampler *s, const float *val, const int32_t *ids, size_t k)
{
    if (s->p.temperature <= 0.0f) return ids[0];
    double tot;
    size_t last;
    weigh(s, val, k, &tot, &last);
    double r = next_u01(s) * tot, c = 0;
    for (size_t i = 0; i <= last; i++) {
        c += s->w[i];
        if (r < c) return ids[i];
    }
    return ids[last];
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
    size_t k = s->kmax;
    top_sorted(s->cand, n, k, logits);
    for (size_t i = 0; i < k; i++) s->cv[i] = logits[s->cand[i]];
    return choose_from(s, s->cv, s->cand, k);
}

uint32_t sampler_cand_k(const sampler *s) { return s->p.temperature <= 0.0f ? 1 : s->kmax; }

int sampler_pen_tokens(sampler *s, const int32_t *next, int n_next, int32_t *ids, int cap)
{
    if (!has_penalties(&s->p)) return 0;
    size_t lim = s->p.penalty_last_n > 0 ? (size_t)s->p.penalty_last_n : 0;
    size_t from = lim && (size_t)n_next > lim ? (size_t)n_next - lim : 0;
    int n = 0;
    /* the window's tokens and the next ones it may take in, each once (count's top bit marks) */
    for (size_t pass = 0; pass < 2; pass++) {
        size_t m = pass ? (size_t)n_next : s->hist_n;
        for (size_t i = pass ? from : 0; i < m; i++) {
            int32_t t = pass ? next[i] : s->hist[i];
            if (t < 0 || (uint32_t)t >= s->n_vocab || s->count[t] & 0x80000000u) continue;
            if (n < cap) ids[n] = t;
            n++;
            s->count[t] |= 0x80000000u;
        }
    }
    for (int i = 0; i < n && i < cap; i++) s->count[ids[i]] &= 0x7fffffffu;
    return n <= cap ? n : -1;
}

static int cmp_pen(const void *a, const void *b, void *ctx)
{
    const sampler *s = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    float u = s->pv[x], v = s->pv[y];
    if (u != v) return u < v ? 1 : -1;
    return s->pi[x] - s->pi[y];
}

int32_t sampler_sample_cands(sampler *s, const float *val, const int32_t *id, uint32_t m, const int32_t *pid,
                             const float *pval, int np)
{
    size_t k = sampler_cand_k(s);
    if (k > m) k = m;
    if (!has_penalties(&s->p)) return choose_from(s, val, id, k);
    /* the window's tokens at their penalized values, best first */
    if (s->pcap < s->hist_n) { /* out of memory: the caller draws from the whole row instead */
        float *v = realloc(s->pv, s->hist_n * sizeof *v);
        if (v) s->pv = v;
        int32_t *q = realloc(s->pi, 2 * s->hist_n * sizeof *q);
        if (q) s->pi = q;
        if (!v || !q) return -1;
        s->pcap = s->hist_n;
    }
    size_t nw = 0;
    for (size_t i = 0; i < s->hist_n; i++) {
        int32_t t = s->hist[i];
        uint32_t c = s->count[t];
        if (c == 0 || c > 0x7fffffff) continue;
        float raw = -INFINITY;
        for (int j = 0; j < np; j++)
            if (pid[j] == t) { raw = pval[j]; break; }
        s->pv[nw] = penalized(&s->p, raw, c);
        s->pi[nw++] = t;
        s->count[t] |= 0x80000000u;
    }
    for (size_t i = 0; i < s->hist_n; i++) s->count[s->hist[i]] &= 0x7fffffffu;
    int32_t *order = s->pi + s->pcap;
    for (size_t i = 0; i < nw; i++) order[i] = (int32_t)i;
    qsort_r(order, nw, sizeof *order, cmp_pen, s);
    /* merged with the device's best of the other tokens (window tokens there carry raw values) */
    size_t a = 0, b = 0, o = 0;
    while (o < k && (a < m || b < nw)) {
        while (a < m && s->count[id[a]] > 0) a++;
        int take_b = b < nw && (a >= m || s->pv[order[b]] > val[a] ||
                                (s->pv[order[b]] == val[a] && s->pi[order[b]] < id[a]));
        if (!take_b && a >= m) break;
        s->cv[o] = take_b ? s->pv[order[b]] : val[a];
        s->ci[o++] = take_b ? s->pi[order[b++]] : id[a++];
    }
    return choose_from(s, s->cv, s->ci, o ? o : 1);
}

int32_t sampler_sample(sampler *s, float *logits)
{
    apply_penalties(s, logits);
    return choose(s, logits);
}

int sampler_dist(sampler *s, float *logits, const int32_t **ids, const float **prob)
{
    apply_penalties(s, logits);
    *ids = s->cand;
    *prob = s->w;
    if (s->p.temperature <= 0.0f) { /* the argmax, ties to the lower id, as choose() takes it */
        s->cand[0] = choose(s, logits);
        s->w[0] = 1.0f;
        return 1;
    }
    /* choose()'s candidates and weights, normalized instead of drawn from */
    uint32_t n = s->n_vocab;
    for (uint32_t i = 0; i < n; i++) s->cand[i] = (int32_t)i;
    size_t k = s->kmax, last;
    top_sorted(s->cand, n, k, logits);
    for (size_t i = 0; i < k; i++) s->cv[i] = logits[s->cand[i]];
    double tot;
    weigh(s, s->cv, k, &tot, &last);
    for (size_t i = 0; i <= last; i++) s->w[i] = (float)(s->w[i] / tot);
    return (int)last + 1;
}

double sampler_uniform(sampler *s) { return next_u01(s); }

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
