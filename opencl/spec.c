/* spec.c — see spec.h. */
#include "spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NGRAM_MIN 2 /* a single shared token drafts too often wrongly */
#define NGRAM_MAX 5

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
            int c = 0;
            while (c < k_max && s + g + c < n) { draft[c] = hist[s + g + c]; c++; }
            return c;
        }
    }
    return 0;
}

int spec_accept_greedy(const int32_t *draft, int k, const int32_t *ids)
{
    int a = 0;
    while (a < k && ids[a] == draft[a]) a++;
    return a;
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
    if (!smp || !sampler_is_greedy(smp)) {
        snprintf(r->err, sizeof r->err, "drafts are verified for greedy decoding only (temperature 0, no penalties)");
        return -1;
    }
    r->k_max = k_max < 1 ? 1 : k_max > SPEC_MAX_DRAFT ? SPEC_MAX_DRAFT : k_max;
    r->on = 1;
    r->smp = smp;
    return hist_push(r, prompt, n);
}

int spec_next(spec_run *r, engine *e, int seq, int32_t tok, int32_t *out)
{
    int len0 = engine_seq_len(e, seq);
    if (hist_push(r, &tok, 1)) return -1;
    /* drafts stay clear of the context's end, where plain decoding's length stop must decide */
    int room = (int)engine_get_info(e)->n_ctx - len0 - 2, k_lim = room / 2 < r->k_max ? room / 2 : r->k_max;
    int32_t vt[SPEC_MAX_DRAFT + 1], ids[SPEC_MAX_DRAFT + 1];
    int k = k_lim > 0 ? spec_ngram_draft(r->hist, r->n_hist, NGRAM_MIN, NGRAM_MAX, k_lim, vt + 1) : 0;
    vt[0] = tok;
    engine_item it = { .seq = seq, .tokens = vt, .n_tokens = k + 1, .smp = r->smp, .ids_all = ids };
    if (engine_step(e, &it, 1, r->err, sizeof r->err)) return -1;
    int a = spec_accept_greedy(vt + 1, k, ids);
    if (hist_push(r, vt + 1, a)) return -1;
    if (a < k && engine_seq_truncate(e, seq, r->n_hist, r->hist, r->err, sizeof r->err)) return -1;
    memcpy(out, vt, sizeof *vt * (size_t)(a + 1));
    r->next = ids[a];
    r->steps++;
    r->drafted += k;
    r->accepted += a;
    return a + 1;
}

void spec_end(spec_run *r)
{
    free(r->hist);
    memset(r, 0, sizeof *r);
}
