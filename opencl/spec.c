/* spec.c — see spec.h. */
#include "spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int spec_ngram_draft(const int32_t *hist, int n, int n_min, int n_max, int k_max, int32_t *draft)
{
    if (k_max > SPEC_MAX_DRAFT) k_max = SPEC_MAX_DRAFT;
    if (n_min < 1) n_min = 1;
    for (int g = n_max < n - 1 ? n_max : n - 1; g >= n_min; g--) {
        const int32_t *suf = hist + n - g;
        /* the latest earlier occurrence: recent text predicts the continuation best */
        for (int s = n - g - 1; s >= 0; s--) {
            int j = 0;
            while (j < g && hist[s + j] == suf[j]) j++;
            if (j < g) continue;
            int c = 0; /* an image's ids (negative) are never a draft: the draft stops before one */
            while (c < k_max && s + g + c < n && hist[s + g + c] >= 0) { draft[c] = hist[s + g + c]; c++; }
            return c;
        }
    }
    return 0;
}

static int clamp(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

int spec_k_next(int k, int k_max, int proposed, int accepted)
{
    if (proposed <= 0) return k; /* no draft: nothing learnt */
    return accepted >= proposed ? clamp(2 * k, 1, k_max) : clamp(accepted + 1, 1, k_max);
}

int spec_pause_next(int *wait, int proposed, int accepted)
{
    if (proposed <= 0) return 0;
    if (accepted > 0) { *wait = 0; return 0; }
    *wait = clamp(2 * *wait, 1, SPEC_PAUSE_MAX);
    return *wait;
}

int spec_accept_greedy(const int32_t *draft, int k, const int32_t *ids)
{
    int a = 0;
    while (a < k && ids[a] == draft[a]) a++;
    return a;
}

/* a draw from p[0, n) of tokens ids without token skip, renormalized; -1 when nothing else has weight */
static int32_t draw_without(sampler *s, const int32_t *ids, const float *p, int n, int32_t skip)
{
    double tot = 0, c = 0;
    for (int i = 0; i < n; i++)
        if (ids[i] != skip) tot += p[i];
    if (!(tot > 0)) return -1;
    double r = sampler_uniform(s) * tot;
    int last = -1;
    for (int i = 0; i < n; i++) {
        if (ids[i] == skip || !(p[i] > 0)) continue;
        c += p[i];
        last = i;
        if (r < c) return ids[i];
    }
    return ids[last]; /* r at the rounded total's edge */
}

int spec_accept_sampled(sampler *s, float *rows, uint32_t n_vocab, const int32_t *draft, int k, int32_t *next)
{
    for (int i = 0;; i++) {
        const int32_t *ids;
        const float *p;
        int n = sampler_dist(s, rows + (size_t)i * n_vocab, &ids, &p);
        if (i == k) {
            int32_t t = draw_without(s, ids, p, n, -1);
            *next = t >= 0 ? t : ids[0];
            return k;
        }
        double pd = 0;
        for (int j = 0; j < n; j++)
            if (ids[j] == draft[i]) { pd = p[j]; break; }
        /* the residual max(0, p - q) of a point-mass draft is p without the draft */
        int32_t t = sampler_uniform(s) < pd ? draft[i] : draw_without(s, ids, p, n, draft[i]);
        if (t >= 0 && t != draft[i]) { *next = t; return i; }
        sampler_accept(s, draft[i]);
    }
}

static int hist_push(spec_run *r, const int32_t *t, int n)
{
    if (r->n_hist + n > r->cap) {
        int cap = (r->n_hist + n) * 2;
        int32_t *h = realloc(r->hist, sizeof *h * (size_t)cap);
        if (!h) { snprintf(r->err, sizeof r->err, "out of memory"); return -1; }
        r->hist = h;
        r->cap = cap;
    }
    memcpy(r->hist + r->n_hist, t, sizeof *t * (size_t)n);
    r->n_hist += n;
    return 0;
}

int spec_begin(spec_run *r, const int32_t *prompt, int n, int k_max, sampler *smp)
{
    memset(r, 0, sizeof *r);
    if (!smp) {
        snprintf(r->err, sizeof r->err, "drafts are verified against a sampler: none given");
        return -1;
    }
    r->k_max = k_max < 1 ? 1 : k_max > SPEC_MAX_DRAFT ? SPEC_MAX_DRAFT : k_max;
    r->k = (r->k_max + 1) / 2; /* used with adapt: the worker's first draft length */
    r->on = 1;
    r->smp = smp;
    return hist_push(r, prompt, n);
}

/* vt[0, k + 1) stepped on seq: the draft vt[1, k + 1) verified; the accepted count, the next choice into
 * *next; -1 with r->err */
static int verify(spec_run *r, engine *e, int seq, const int32_t *vt, int k, int32_t *next)
{
    engine_item it = { .seq = seq, .tokens = vt, .n_tokens = k + 1, .smp = r->smp };
    int32_t ids[SPEC_MAX_DRAFT + 1];
    if (sampler_is_greedy(r->smp)) { /* the choices argmaxed on the device: ids back, not rows */
        it.ids_all = ids;
        if (engine_step(e, &it, 1, r->err, sizeof r->err)) return -1;
        int a = spec_accept_greedy(vt + 1, k, ids);
        *next = ids[a];
        return a;
    }
    if (k == 0) { /* nothing to verify: the engine's own draw (from the device's best values) */
        if (engine_step(e, &it, 1, r->err, sizeof r->err)) return -1;
        *next = it.token_out;
        return 0;
    }
    uint32_t nv = engine_get_info(e)->n_vocab;
    size_t need = (size_t)(k + 1) * nv;
    if (need > r->rows_cap) {
        float *p = realloc(r->rows, sizeof *p * need);
        if (!p) { snprintf(r->err, sizeof r->err, "out of memory"); return -1; }
        r->rows = p;
        r->rows_cap = need;
    }
    /* the rows come back raw and the sampler is fed here: it must never see a rejected draft */
    it.smp = NULL;
    it.logits = r->rows;
    it.logits_all = 1;
    it.draft = 1;
    if (engine_step(e, &it, 1, r->err, sizeof r->err)) return -1;
    sampler_accept(r->smp, vt[0]);
    return spec_accept_sampled(r->smp, r->rows, nv, vt + 1, k, next);
}

int spec_next(spec_run *r, engine *e, int seq, int32_t tok, int32_t *out)
{
    int len0 = engine_seq_len(e, seq);
    if (hist_push(r, &tok, 1)) return -1;
    /* drafts stay clear of the context's end, where plain decoding's length stop must decide */
    int k_now = r->adapt ? r->k : r->k_max;
    int room = (int)engine_get_info(e)->n_ctx - len0 - 2, k_lim = room / 2 < k_now ? room / 2 : k_now;
    if (r->adapt && r->pause > 0) { r->pause--; k_lim = 0; }
    int32_t vt[SPEC_MAX_DRAFT + 1];
    int k = 0;
    if (k_lim > 0 && engine_get_info(e)->draft_arch[0]) { /* the engine's MTP drafter */
        engine_draft_item d = { .seq = seq, .token = tok, .k = k_lim, .out = vt + 1 };
        if (engine_draft(e, &d, 1, r->err, sizeof r->err)) return -1;
        k = d.n;
    } else if (k_lim > 0) {
        k = spec_ngram_draft(r->hist, r->n_hist, SPEC_NGRAM_MIN, SPEC_NGRAM_MAX, k_lim, vt + 1);
    }
    vt[0] = tok;
    int a = verify(r, e, seq, vt, k, &r->next);
    if (a < 0 || hist_push(r, vt + 1, a)) return -1;
    if (a < k && engine_seq_truncate(e, seq, r->n_hist, r->hist, r->err, sizeof r->err)) return -1;
    memcpy(out, vt, sizeof *vt * (size_t)(a + 1));
    if (r->adapt) {
        r->k = spec_k_next(r->k, r->k_max, k, a);
        r->pause = spec_pause_next(&r->wait, k, a);
    }
    r->steps++;
    r->drafted += k;
    r->accepted += a;
    return a + 1;
}

void spec_end(spec_run *r)
{
    free(r->hist);
    free(r->rows);
    memset(r, 0, sizeof *r);
}
