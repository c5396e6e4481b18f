/* draft.c — see draft.h. */
#include "draft.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errf.h"

#define KEEP ENGINE_DRAFT_KEEP
#define DRAFT_ROWS 32 /* sequences one draft forward holds: its logits are rows x n_vocab floats */
#define DRAFT_K 16    /* engine_draft_item.k at most: SPEC_MAX_DRAFT */

_Static_assert(KEEP <= 32, "keep_bits holds a bit per slot");
_Static_assert(KEEP >= DRAFT_K + 1, "a verification's every row is kept");

int drafter_create(drafter *d, const char *path, const model *target, cl_runtime *rt, uint32_t n_seq, uint32_t n_ctx,
                   char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    char why[512];
    if (gguf_open(&d->f, path, why, sizeof why)) return ERR("%s", why);
    if (model_load_drafter(&d->m, d->f, target, rt, why, sizeof why)) return ERR("%s: %s", path, why);
    d->loaded = 1;
    d->n_seq = n_seq;
    d->hb = target->hp.n_embd;
    d->rows = n_seq < DRAFT_ROWS ? n_seq : DRAFT_ROWS;
    if (fwd_bufs_create(&d->b, &d->m, rt, d->rows, d->rows, n_ctx, why, sizeof why)) return ERR("drafter: %s", why);
    d->keep = rt_alloc(rt, 4 * (size_t)n_seq * KEEP * d->hb, NULL, why, sizeof why);
    d->all = d->keep ? rt_alloc(rt, 4 * (size_t)DRAFT_K * d->rows, NULL, why, sizeof why) : NULL;
    if (!d->all) return ERR("drafter: %s", why);
    d->keep_pos0 = calloc(n_seq, sizeof *d->keep_pos0);
    d->keep_n = calloc(n_seq, sizeof *d->keep_n);
    d->keep_bits = calloc(n_seq, sizeof *d->keep_bits);
    int32_t **h[] = { &d->h_ids, &d->h_pos, &d->h_prev, &d->h_seq };
    for (int i = 0; i < 4; i++) *h[i] = malloc(sizeof(int32_t) * d->rows);
    d->h_all = malloc(sizeof(int32_t) * DRAFT_K * d->rows);
    d->h_item = malloc(sizeof(int) * d->rows);
    if (!d->keep_pos0 || !d->keep_n || !d->keep_bits || !d->h_ids || !d->h_pos || !d->h_prev || !d->h_seq ||
        !d->h_all || !d->h_item)
        return ERR("out of memory");
    return 0;
}

void drafter_destroy(drafter *d)
{
    fwd_bufs_destroy(&d->b);
    if (d->keep) clReleaseMemObject(d->keep);
    if (d->all) clReleaseMemObject(d->all);
    if (d->loaded) model_free(&d->m);
    gguf_close(d->f);
    free(d->keep_pos0); free(d->keep_n); free(d->keep_bits);
    free(d->h_ids); free(d->h_pos); free(d->h_prev); free(d->h_seq); free(d->h_all); free(d->h_item);
    memset(d, 0, sizeof *d);
}

void drafter_forget(drafter *d, int seq)
{
    if (seq >= 0 && (uint32_t)seq < d->n_seq) d->keep_n[seq] = 0;
}

void drafter_step_begin(drafter *d, int seq, uint32_t pos0, int n)
{
    d->keep_pos0[seq] = (int32_t)pos0;
    d->keep_n[seq] = n;
    d->keep_bits[seq] = 0;
}

int drafter_keep(drafter *d, cl_command_queue q, cl_mem xo, uint32_t row, int seq, int tok, int n)
{
    size_t rb = 4 * (size_t)d->hb;
    int first = d->keep_n[seq] - KEEP; /* older tokens' slots are taken by newer ones */
    if (tok < first) { row += (uint32_t)(first - tok); n -= first - tok; tok = first; }
    while (n > 0) { /* runs of slots that do not wrap */
        int slot = tok % KEEP, run = KEEP - slot < n ? KEEP - slot : n;
        cl_int ce = clEnqueueCopyBuffer(q, xo, d->keep, row * rb, ((size_t)seq * KEEP + slot) * rb, run * rb, 0, NULL,
                                        NULL);
        if (ce) return -1;
        for (int i = 0; i < run; i++) d->keep_bits[seq] |= 1u << (slot + i);
        row += (uint32_t)run;
        tok += run;
        n -= run;
    }
    return 0;
}

/* the slot of seq's row for position len - 1 (what the target's last choice came from); -1: not kept */
static int kept_slot(const drafter *d, int seq, int len)
{
    int r = len - 1 - d->keep_pos0[seq], n = d->keep_n[seq];
    if (n <= 0 || r < 0 || r >= n || r < n - KEEP) return -1;
    int slot = r % KEEP;
    return d->keep_bits[seq] >> slot & 1 ? slot : -1;
}

/* one forward's rows: items it[0, T) (all with a kept row), their k drafted ids back */
static int run_rows(drafter *d, const model *target, ops *o, kv_cache *kv, engine_draft_item *items, uint32_t T,
                    char *err, size_t errlen)
{
    cl_command_queue q = o->rt->q;
    fwd_bufs *b = &d->b;
    size_t rb = 4 * (size_t)d->hb;
    uint32_t max_pos = 0;
    int kmax = 0, want_logits = 0;
    for (uint32_t r = 0; r < T; r++) {
        const engine_draft_item *it = &items[d->h_item[r]];
        int len = kv->seq_len[it->seq];
        d->h_ids[r] = it->token;
        d->h_pos[r] = len;
        d->h_prev[r] = len - 1;
        d->h_seq[r] = it->seq;
        if ((uint32_t)len > max_pos) max_pos = (uint32_t)len;
        if (it->k > kmax) kmax = it->k;
        want_logits |= it->logits != NULL;
    }
    cl_int ce = clEnqueueWriteBuffer(q, b->ids, CL_FALSE, 0, 4 * T, d->h_ids, 0, NULL, NULL);
    if (!ce) ce = clEnqueueWriteBuffer(q, b->pos, CL_FALSE, 0, 4 * T, d->h_pos, 0, NULL, NULL);
    if (!ce) ce = clEnqueueWriteBuffer(q, b->ext[FWD_DRAFT_PREV], CL_FALSE, 0, 4 * T, d->h_prev, 0, NULL, NULL);
    if (!ce) ce = clEnqueueWriteBuffer(q, b->seq, CL_FALSE, 0, 4 * T, d->h_seq, 0, NULL, NULL);
    for (uint32_t r = 0; r < T && !ce; r++) {
        int seq = d->h_seq[r], slot = kept_slot(d, seq, d->h_pos[r]);
        ce = clEnqueueCopyBuffer(q, d->keep, b->ext[FWD_DRAFT_H], ((size_t)seq * KEEP + slot) * rb, r * rb, rb, 0, NULL,
                                 NULL);
    }
    if (ce) return ERR("drafter: upload failed: %s", rt_errstr(ce));
    fwd_args a = { T, T, max_pos, d->h_seq, d->h_ids, NULL, NULL, 0, 0, 0 };
    uint32_t V = d->m.hp.n_vocab;
    for (int s = 0; s < kmax; s++) {
        if (d->m.arch->draft(&d->m, target, o, b, kv, &a, err, errlen)) return -1;
        ce = clEnqueueCopyBuffer(q, b->ids, d->all, 0, 4 * (size_t)s * T, 4 * T, 0, NULL, NULL);
        for (uint32_t r = 0; r < T && want_logits && !ce; r++) {
            engine_draft_item *it = &items[d->h_item[r]];
            if (it->logits && s < it->k)
                ce = clEnqueueReadBuffer(q, b->logits, CL_TRUE, 4 * (size_t)r * V, 4 * (size_t)V,
                                         it->logits + (size_t)s * V, 0, NULL, NULL);
        }
        if (ce) return ERR("drafter: %s", rt_errstr(ce));
    }
    ce = clEnqueueReadBuffer(q, d->all, CL_TRUE, 0, 4 * (size_t)kmax * T, d->h_all, 0, NULL, NULL);
    if (ce) return ERR("drafter: reading the drafted ids failed: %s", rt_errstr(ce));
    for (uint32_t r = 0; r < T; r++) {
        engine_draft_item *it = &items[d->h_item[r]];
        for (int s = 0; s < it->k; s++) it->out[s] = d->h_all[(size_t)s * T + r];
        it->n = it->k;
    }
    return 0;
}

int drafter_run(drafter *d, const model *target, ops *o, kv_cache *kv, engine_draft_item *items, int n, char *err,
                size_t errlen)
{
    for (int i = 0; i < n; i++) {
        engine_draft_item *it = &items[i];
        it->n = 0;
        if (it->seq < 0 || (uint32_t)it->seq >= d->n_seq || kv->seq_len[it->seq] < 1)
            return ERR("draft item %d: invalid sequence %d", i, it->seq);
        for (int j = 0; j < i; j++)
            if (items[j].seq == it->seq) return ERR("draft item %d: sequence %d appears twice", i, it->seq);
        if (it->k < 1 || it->k > DRAFT_K || !it->out) return ERR("draft item %d: k %d (1..%d) or no out", i, it->k, DRAFT_K);
        if (it->token < 0 || (uint32_t)it->token >= target->hp.n_vocab)
            return ERR("draft item %d: token id %d out of range [0, %u)", i, it->token, target->hp.n_vocab);
    }
    uint32_t T = 0;
    for (int i = 0; i < n; i++) {
        if (kept_slot(d, items[i].seq, kv->seq_len[items[i].seq]) < 0) continue;
        d->h_item[T++] = i;
        if (T == d->rows || i == n - 1) {
            if (run_rows(d, target, o, kv, items, T, err, errlen)) return -1;
            T = 0;
        }
    }
    return T ? run_rows(d, target, o, kv, items, T, err, errlen) : 0;
}
