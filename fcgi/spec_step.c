/* spec_step.c — see spec_step.h. */
#include "spec_step.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NGRAM_MIN 2 /* spec.c's: a single shared token drafts too often wrongly */
#define NGRAM_MAX 5

static const char *const mode_names[SPEC_MODES] = { "off", "ngram", "auto", "mtp" };

int spec_mode_parse(const char *name)
{
    for (int m = 0; m < SPEC_MODES; m++)
        if (!strcmp(name, mode_names[m])) return m;
    return -1;
}

const char *spec_mode_name(int mode) { return mode >= 0 && mode < SPEC_MODES ? mode_names[mode] : "?"; }

int spec_mode_effective(int mode, const engine_info *info)
{
    /* a recurrent state (hybrid models) goes back past rejected drafts only from a checkpoint */
    if (info->fit.state_seq_bytes && info->state_checkpoints <= 0) return SPEC_OFF;
    if (mode != SPEC_AUTO) return mode;
    if (info->draft_arch[0]) return SPEC_MTP;
    return info->draft_rows > 0 ? SPEC_NGRAM : SPEC_OFF;
}

static int clamp(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

int spec_seq_init(spec_seq *q, int mode, int k_max, int eligible, sampler *smp, uint32_t n_vocab,
                  const int32_t *prompt, int n, int max_tokens)
{
    memset(q, 0, sizeof *q);
    if (mode == SPEC_OFF || !eligible) return 0;
    q->smp = smp;
    q->sampled = smp && !sampler_is_greedy(smp);
    q->n_vocab = n_vocab;
    q->cap = n + max_tokens;
    if (!(q->hist = malloc((size_t)q->cap * sizeof *q->hist))) return -1;
    memcpy(q->hist, prompt, (size_t)n * sizeof *q->hist);
    q->n_hist = n;
    q->k_max = clamp(k_max, 1, SPEC_MAX_DRAFT);
    q->k = (q->k_max + 1) / 2; /* the first draft neither hopes nor fears */
    q->mtp = mode == SPEC_MTP;
    return 0;
}

void spec_seq_free(spec_seq *q)
{
    free(q->hist);
    free(q->rows);
    q->hist = NULL;
    q->rows = NULL;
}

void spec_seq_push(spec_seq *q, int32_t tok)
{
    if (q->hist && q->n_hist < q->cap) q->hist[q->n_hist++] = tok;
}

int spec_room(int n_ctx, int len, int max_tokens, int n_gen)
{
    int ctx = n_ctx - len - 2, out = max_tokens - n_gen - 1; /* the fed token's own room, then one more */
    int r = ctx < out ? ctx : out;
    return r > 0 ? r : 0;
}

int spec_seq_draft(spec_seq *q, int room)
{
    q->n_draft = q->want = 0;
    if (!q->hist || q->n_hist < 1) return 0;
    if (q->pause > 0) { q->pause--; return 0; }
    int k = q->k < room ? q->k : room;
    q->feed[0] = q->hist[q->n_hist - 1];
    /* out of memory for the rows: the step decodes plainly */
    size_t rows = (size_t)(q->k_max + 1) * q->n_vocab;
    if (k > 0 && q->sampled && !q->rows && !(q->rows = malloc(rows * sizeof *q->rows))) k = 0;
    if (q->mtp) { q->want = k; return 0; }
    if (k > 0) q->n_draft = spec_ngram_draft(q->hist, q->n_hist, NGRAM_MIN, NGRAM_MAX, k, q->feed + 1);
    return q->n_draft;
}

int spec_mtp_drafts(engine *e, spec_seq *const *qs, const int *seqs, int n, char *err, size_t errlen)
{
    engine_draft_item *it = malloc(sizeof *it * (size_t)(n > 0 ? n : 1));
    if (!it) { snprintf(err, errlen, "out of memory"); return -1; }
    for (int i = 0; i < n; i++)
        it[i] = (engine_draft_item){ .seq = seqs[i], .token = qs[i]->feed[0], .k = qs[i]->want, .out = qs[i]->feed + 1 };
    int rc = engine_draft(e, it, n, err, errlen);
    for (int i = 0; i < n; i++) qs[i]->n_draft = rc ? 0 : it[i].n;
    free(it);
    return rc;
}

void spec_seq_item(spec_seq *q, engine_item *it, int seq, int take)
{
    it->seq = seq;
    it->tokens = q->feed;
    it->n_tokens = take;
    it->draft = 1;
    if (!q->sampled) { /* argmaxed on the device: the choices come back, not rows */
        it->smp = q->smp;
        it->ids_all = q->ids;
        return;
    }
    /* raw rows, and no sampler: spec_seq_accept feeds it, never a rejected draft */
    it->smp = NULL;
    it->logits = q->rows;
    it->logits_all = 1;
}

int spec_seq_accept(spec_seq *q, engine *e, metrics *m, const engine_item *it, char *err, size_t errlen)
{
    int k = it->n_tokens - 1, a;
    int32_t next;
    if (q->sampled) {
        sampler_accept(q->smp, q->feed[0]); /* what the engine does for a plain item */
        a = spec_accept_sampled(q->smp, q->rows, q->n_vocab, q->feed + 1, k, &next);
    } else {
        a = spec_accept_greedy(q->feed + 1, k, q->ids);
        next = q->ids[a];
    }
    if (a < k) {
        /* the cache keeps hist (the fed token last) and the accepted draft: written ahead, the scheduler's
         * spec_seq_push of each output writes the same tokens there again */
        memcpy(q->hist + q->n_hist, q->feed + 1, (size_t)a * sizeof *q->hist);
        if (engine_seq_truncate(e, it->seq, q->n_hist + a, q->hist, err, errlen)) return -1;
    }
    memcpy(q->out, q->feed + 1, (size_t)a * sizeof *q->out);
    q->out[a] = next; /* not fed to the sampler: the next step feeds it */
    q->n_out = a + 1;
    q->k = spec_k_next(q->k, q->k_max, k, a);
    q->pause = spec_pause_next(&q->wait, k, a);
    metrics_spec(m, k, a);
    return 0;
}
