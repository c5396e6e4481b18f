/* engine_step.c — engine.h's step and draft calls: a batch of (sequence, tokens) items flattened into forward
 * chunks (at most max_batch tokens, seq_chunk of one sequence, an image's tokens whole, a recurrent state's
 * snapshot boundary ending one), each chunk's forward, then the tokens picked from its output rows. */
#include "engine_int.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "errf.h"
#include "state.h"

/* the staging may change only once the last step's non-blocking uploads from it have run: a step with no
 * output rows returns with them still queued behind its forward */
static int staging_free(engine *e)
{
    if (!e->staged) return 0;
    cl_int ce = clWaitForEvents(1, &e->staged);
    clReleaseEvent(e->staged);
    e->staged = NULL;
    return ce == CL_SUCCESS ? 0 : -1;
}

static int grow_staging(engine *e, size_t n)
{
    if (n <= e->h_cap) return 0;
    int32_t **arrs[] = { &e->h_ids, &e->h_pos, &e->h_seq, &e->h_out, &e->h_hi, &e->h_span };
    for (int i = 0; i < 6; i++) {
        int32_t *p = realloc(*arrs[i], n * sizeof(int32_t));
        if (!p) return -1;
        *arrs[i] = p;
    }
    fwd_rows *r = realloc(e->h_rows, n * sizeof *r);
    if (!r) return -1;
    e->h_rows = r;
    e->h_cap = n;
    return 0;
}

/* engine_hold_steps: a chunk's commands queue behind a user event (gate_close) until gate_open, which
 * times them to their end; gate_open is a no-op where no gate is closed, so every exit may call it */
static void gate_close(engine *e)
{
    cl_int ce;
    if (!e->hold || !(e->gate = clCreateUserEvent(e->rt.ctx, &ce))) return;
    if (clEnqueueMarkerWithWaitList(e->rt.q, 1, &e->gate, NULL) != CL_SUCCESS) {
        clSetUserEventStatus(e->gate, CL_COMPLETE);
        clReleaseEvent(e->gate);
        e->gate = NULL;
    }
}

static void gate_open(engine *e)
{
    if (!e->gate) return;
    double t = monotonic_seconds();
    clSetUserEventStatus(e->gate, CL_COMPLETE);
    clFinish(e->rt.q);
    e->device_s += monotonic_seconds() - t;
    clReleaseEvent(e->gate);
    e->gate = NULL;
}

/* one output row of the step: which item and, for logits_all, which token of it */
typedef struct out_ref { int item; int tok; size_t tidx; } out_ref;

/* a chunk's image rows (fwd_args.rows) and whether its tokens' last keys (h_hi) go up */
typedef struct chunk_images { const fwd_rows *rows; uint32_t n_rows; int hi; uint32_t hi_extra; } chunk_images;

static int run_chunk(engine *e, engine_item *items, const out_ref *refs, uint32_t r0, uint32_t t0, uint32_t ntok,
                     uint32_t n_out, uint32_t max_pos, const chunk_images *ci, char *err, size_t errlen)
{
    cl_command_queue q = e->rt.q;
    fwd_bufs *b = &e->b;
    /* the in-order queue runs these after everything before them: staged is the last, so the next step's
     * fill waits for it (staging_free) */
    if (e->staged) { clReleaseEvent(e->staged); e->staged = NULL; }
    gate_close(e);
    cl_int ce = clEnqueueWriteBuffer(q, b->ids, CL_FALSE, 0, 4 * ntok, e->h_ids + t0, 0, NULL, NULL);
    if (!ce) ce = clEnqueueWriteBuffer(q, b->pos, CL_FALSE, 0, 4 * ntok, e->h_pos + t0, 0, NULL, NULL);
    if (!ce && ci->hi) ce = clEnqueueWriteBuffer(q, b->hi, CL_FALSE, 0, 4 * ntok, e->h_hi + t0, 0, NULL, NULL);
    if (!ce && n_out) ce = clEnqueueWriteBuffer(q, b->out_rows, CL_FALSE, 0, 4 * n_out, e->h_out + r0, 0, NULL, NULL);
    if (!ce) ce = clEnqueueWriteBuffer(q, b->seq, CL_FALSE, 0, 4 * ntok, e->h_seq + t0, 0, NULL, &e->staged);
    if (ce) return ERR("upload of the batch failed: %s", rt_errstr(ce));
    fwd_args a = { ntok, n_out, max_pos, e->h_seq + t0, e->h_ids + t0, e->h_pos + t0, ci->rows, ci->n_rows, ci->hi,
                   ci->hi_extra };
    /* int8 activations only for decode steps (one token per sequence, or drafts): prompt logits keep the
     * f16/f32 accuracy the goldens hold them to (int8 X moved Gemma 3's by up to 0.48, over 0.35) */
    int decode = 1;
    for (uint32_t i = 1; i < ntok && decode; i++) decode = e->h_seq[t0 + i] != e->h_seq[t0 + i - 1];
    if (e->step_drafts) decode = 1;
    e->o.act_int8 = decode;
    double tq = monotonic_seconds();
    ops_clear(&e->o); /* a failed step's error is not this one's */
    if (model_forward(&e->m, &e->o, b, &e->kv, &a, err, errlen)) return -1;
    if (!n_out) { e->enqueue_s += monotonic_seconds() - tq; gate_open(e); return 0; }
    /* the drafter starts from the normed rows fwd_logits leaves in xo: each item's run of them kept */
    for (uint32_t r = 0, r1; e->draft && r < n_out; r = r1) {
        const out_ref *f = &refs[r0 + r];
        for (r1 = r + 1; r1 < n_out && refs[r0 + r1].item == f->item; r1++) {}
        if (drafter_keep(e->draft, q, b->xo, r, items[f->item].seq, f->tok, (int)(r1 - r)))
            return ERR("keeping the drafter's rows failed");
    }
    /* greedy rows: argmax on the device, only ids (and asked-for logprobs) come back; others get their
     * logits row. Masks and biases go first, so both kinds choose from the processed row. */
    uint32_t nv = e->m.hp.n_vocab;
    choice_constrain(&e->choice, &e->o, b->logits, r0, n_out);
    op_argmax(&e->o, b->logits, n_out, nv, b->argmax);
    choice_logprobs(&e->choice, &e->o, b->logits, r0, n_out);
    draw_launch(&e->draw, &e->o, b->logits, r0, n_out);
    if (ops_status(&e->o, err, errlen)) return -1;
    e->enqueue_s += monotonic_seconds() - tq;
    gate_open(e);
    int32_t ids[256];
    if (n_out > 256) return ERR("internal: too many output rows");
    ce = clEnqueueReadBuffer(q, b->argmax, CL_TRUE, 0, 4 * n_out, ids, 0, NULL, NULL);
    if (ce) return ERR("reading sampled ids failed: %s", rt_errstr(ce));
    for (uint32_t r = 0; r < n_out; r++) {
        engine_item *it = &items[refs[r0 + r].item];
        int last = refs[r0 + r].tok == it->n_tokens - 1;
        if (it->logits) {
            float *dst = it->logits + (it->logits_all ? (size_t)refs[r0 + r].tok * nv : 0);
            ce = clEnqueueReadBuffer(q, b->logits, CL_TRUE, 4 * (size_t)r * nv, 4 * (size_t)nv, dst, 0, NULL, NULL);
            if (ce) return ERR("reading logits failed: %s", rt_errstr(ce));
        }
        if (it->ids_all) it->ids_all[refs[r0 + r].tok] = ids[r];
        if (!last || !it->smp) continue;
        for (int k = 0; k < it->n_tokens; k++) sampler_accept(it->smp, it->tokens[k]);
        if (sampler_is_greedy(it->smp)) {
            it->token_out = ids[r];
            if (it->n_logprobs > 0) choice_fill(&e->choice, (int32_t)(r0 + r), it);
        } else if ((it->token_out = draw_pick(&e->draw, (int32_t)(r0 + r), it->smp)) < 0) {
            /* a row the device did not draw for: the whole row to the host */
            ce = clEnqueueReadBuffer(q, b->logits, CL_TRUE, 4 * (size_t)r * nv, 4 * (size_t)nv, e->h_logits, 0, NULL,
                                     NULL);
            if (ce) return ERR("reading logits failed: %s", rt_errstr(ce));
            it->token_out = it->n_logprobs > 0 ? sampler_sample_logprobs(it->smp, e->h_logits, it->n_logprobs, it->lp)
                                               : sampler_sample(it->smp, e->h_logits);
        }
    }
    return 0;
}

/* the prefix cache's side of chunk [t0, t0 + tn) of the step's tokens, for each item it holds tokens of:
 * before its forward (after = 0) the blocks it writes made the item's own again where the blocks an
 * earlier chunk completed were registered since; after it, those the chunk completed registered */
static int chunk_kv(engine *e, const engine_item *items, int n, size_t t0, size_t tn, int after)
{
    size_t off = 0;
    for (int i = 0; i < n; off += (size_t)items[i].n_tokens, i++) {
        size_t end = off + (size_t)items[i].n_tokens, a = t0 > off ? t0 : off, b = t0 + tn < end ? t0 + tn : end;
        if (a >= b) continue;
        int seq = items[i].seq;
        uint32_t from = (uint32_t)(e->kv.seq_len[seq] + (a - off)), to = from + (uint32_t)(b - a);
        if (after) kv_written(&e->kv, seq, items[i].tokens + (a - off), from, to);
        else if (kv_own(&e->kv, seq, from, to)) return -1;
    }
    return 0;
}

/* an item's spans: in order, inside its tokens, each an encoded image's tail whose ids are its soft
 * tokens' and which fits one forward */
static int check_spans(engine *e, const engine_item *it, char *why, size_t cap)
{
    if (!it->n_spans) return 0;
    if (it->n_spans < 0 || !it->spans) return snprintf(why, cap, "bad image spans (%d)", it->n_spans), -1;
    if (!e->vision.arch) return snprintf(why, cap, "image tokens, but this model has no vision projector"), -1;
    int end = 0;
    uint32_t most = e->seq_chunk < e->max_batch ? e->seq_chunk : e->max_batch;
    for (int s = 0; s < it->n_spans; s++) {
        const engine_span *sp = &it->spans[s];
        int S = sp->image ? engine_image_tokens(sp->image) : 0;
        if (!sp->image || sp->n < 1 || sp->first < 0 || sp->first + sp->n != S || sp->offset < end ||
            sp->offset + sp->n > it->n_tokens)
            return snprintf(why, cap, "image span %d (tokens %d + %d, image tokens %d + of %d) is not an image's "
                            "tail inside the item after the span before", s, sp->offset, sp->n, sp->first, S), -1;
        if ((uint32_t)sp->n > most)
            return snprintf(why, cap, "image span %d of %d tokens is over the %u a forward holds", s, sp->n, most), -1;
        if (!engine_image_rows(e, sp->image))
            return snprintf(why, cap, "image span %d: the image is not encoded (engine_image_encode)", s), -1;
        for (int k = 0; k < sp->n; k++)
            if (it->tokens[sp->offset + k] != engine_image_token(sp->image, sp->first + k))
                return snprintf(why, cap, "image span %d: token %d is not the image's", s, sp->offset + k), -1;
        end = sp->offset + sp->n;
    }
    return 0;
}

/* per item the token index (in the step's order) its last block boundary falls before, where a snapshot of the
 * recurrent state is kept (kv_snapshot): prompt items (not drafts) of 2 tokens or more that reach a boundary;
 * SIZE_MAX for the others, ascending for the rest. NULL without snapshots (or out of memory: none kept). */
static size_t *snapshot_cuts(const engine *e, const engine_item *items, int n)
{
    if (!e->kv.state || !e->kv.state->n_snap || !e->kv.prefix.cap) return NULL;
    size_t *cut = malloc(sizeof *cut * (size_t)n), off = 0;
    for (int i = 0; cut && i < n; off += (size_t)items[i].n_tokens, i++) {
        uint32_t len = (uint32_t)e->kv.seq_len[items[i].seq], b = (len + (uint32_t)items[i].n_tokens) / KV_BLOCK * KV_BLOCK;
        int prompt = items[i].n_tokens >= 2 && !items[i].draft && !items[i].ids_all;
        cut[i] = prompt && b > len ? off + (b - len) : SIZE_MAX;
    }
    return cut;
}

int engine_step(engine *e, engine_item *items, int n, char *err, size_t errlen)
{
    if (n <= 0) return ERR("empty batch");
    size_t total = 0, n_out = 0;
    int drafts = 1; /* every item one token or a draft: decode's precision */
    for (int i = 0; i < n; i++) {
        engine_item *it = &items[i];
        if (it->seq < 0 || (uint32_t)it->seq >= e->kv.n_seq || e->kv.seq_len[it->seq] < 0)
            return ERR("item %d: invalid sequence %d", i, it->seq);
        for (int j = 0; j < i; j++)
            if (items[j].seq == it->seq) return ERR("item %d: sequence %d appears twice in one step", i, it->seq);
        if (it->n_tokens <= 0 || !it->tokens) return ERR("item %d: no tokens", i);
        if (e->kv.state && state_broken(e->kv.state, it->seq))
            return ERR("item %d: sequence %d's recurrent state was left part-written by a failed step: free it", i,
                       it->seq);
        if ((uint64_t)e->kv.seq_len[it->seq] + it->n_tokens > e->info.n_ctx)
            return ERR("sequence would reach %lld tokens, over the context of %u",
                       (long long)e->kv.seq_len[it->seq] + it->n_tokens, e->info.n_ctx);
        char why[160];
        if (check_spans(e, it, why, sizeof why)) return ERR("item %d: %s", i, why);
        for (int k = 0, s = 0; k < it->n_tokens; k++) {
            if (s < it->n_spans && k == it->spans[s].offset) { k += it->spans[s++].n - 1; continue; }
            if (it->tokens[k] < 0 || (uint32_t)it->tokens[k] >= e->info.n_vocab)
                return ERR("item %d: token id %d out of range [0, %u)", i, it->tokens[k], e->info.n_vocab);
        }
        if (choice_check(it, e->info.n_vocab, why, sizeof why)) return ERR("item %d: %s", i, why);
        if (it->ids_all && (!it->smp || !sampler_is_greedy(it->smp) || choice_wanted(it) || it->logits_all))
            return ERR("item %d: ids_all needs a greedy sampler and no allow, bias, logprobs or logits_all", i);
        total += it->n_tokens;
        drafts = drafts && (it->n_tokens == 1 || it->draft || it->ids_all);
        n_out += it->logits_all || it->ids_all ? (size_t)it->n_tokens : (it->smp || it->logits) ? 1 : 0;
    }
    out_ref *refs = malloc((n_out ? n_out : 1) * sizeof *refs);
    if (staging_free(e)) { free(refs); return ERR("the last step's upload failed"); }
    if (!refs || grow_staging(e, total + n_out)) { free(refs); return ERR("out of memory"); }
    /* reserve KV blocks for every item first, so a full cache fails before any work */
    for (int i = 0; i < n; i++) {
        if (kv_reserve(&e->kv, items[i].seq, (uint32_t)(e->kv.seq_len[items[i].seq] + items[i].n_tokens))) {
            for (int j = 0; j <= i; j++) kv_trim(&e->kv, items[j].seq, (uint32_t)e->kv.seq_len[items[j].seq]);
            free(refs);
            ERR("KV cache full: no free blocks for sequence %d (pools of %u full-attention and %u "
                "sliding-window blocks of %d tokens)", items[i].seq, e->kv.pool[KV_FULL].n_blocks,
                e->kv.pool[KV_RING].n_blocks, KV_BLOCK);
            return ENGINE_KV_FULL;
        }
    }
    e->step_drafts = drafts;
    if (e->kv.state) state_step_begin(e->kv.state);
    for (int i = 0; e->kv.state && i < n; i++) /* the state before a verification, which may be cut back */
        if (items[i].draft || items[i].ids_all)
            state_checkpoint(e->kv.state, items[i].seq, e->kv.seq_len[items[i].seq], items[i].n_tokens);
    for (int i = 0; e->draft && i < n; i++)
        drafter_step_begin(e->draft, items[i].seq, (uint32_t)e->kv.seq_len[items[i].seq], items[i].n_tokens);
    kv_step_begin(&e->kv);
    int rc = kv_sync(&e->kv, &e->rt, err, errlen);
    /* flatten tokens item by item; a chunk holds at most max_batch tokens, seq_chunk of one sequence
     * and max_out outputs */
    size_t t = 0, r = 0;
    choice_begin(&e->choice);
    draw_begin(&e->draw);
    uint32_t n_rows = 0;
    for (int i = 0; i < n; i++) {
        engine_item *it = &items[i];
        int s = 0, s_end = -1, s_hi = 0; /* the span token k is in: ends before s_end, sees up to s_hi */
        for (int k = 0; k < it->n_tokens; k++, t++) {
            int32_t pos = e->kv.seq_len[it->seq] + k;
            e->h_span[t] = 0;
            if (s < it->n_spans && k == it->spans[s].offset) {
                const engine_span *sp = &it->spans[s++];
                s_end = k + sp->n;
                s_hi = pos + sp->n - 1;
                e->h_span[t] = sp->n;
                e->h_rows[n_rows++] = (fwd_rows){ engine_image_rows(e, sp->image), (uint32_t)sp->first, (uint32_t)t,
                                                  (uint32_t)sp->n };
            }
            int in_image = k < s_end;
            e->h_ids[t] = in_image ? 0 : it->tokens[k]; /* an image token's embedding row: the pad's */
            e->h_pos[t] = pos;
            e->h_hi[t] = in_image && e->info.image_bidir ? s_hi : pos;
            e->h_seq[t] = it->seq;
            int want = it->logits_all || it->ids_all || (k == it->n_tokens - 1 && (it->smp || it->logits));
            if (want && k == it->n_tokens - 1 && it->smp && choice_wanted(it))
                choice_add(&e->choice, it, (int32_t)r, sampler_is_greedy(it->smp));
            if (want && k == it->n_tokens - 1) draw_add(&e->draw, it, (int32_t)r);
            if (want) { refs[r] = (out_ref){ i, k, t }; r++; }
        }
    }
    if (!rc) rc = choice_upload(&e->choice, e->rt.q, err, errlen);
    if (!rc) rc = draw_upload(&e->draw, e->rt.q, err, errlen);
    /* a recurrent state is kept for the prefix cache at the last block boundary of each prompt item: a forward
     * ends there (cut: that token's index; the item's end where that is the boundary) */
    size_t *cut = snapshot_cuts(e, items, n);
    size_t t0 = 0, r0 = 0, w0 = 0, cj = 0; /* w0: the step's first image run not yet in a chunk */
    while (!rc && t0 < total) {
        size_t tn = 0, rn = 0, rr = r0;
        uint32_t max_pos = 0, run = 0; /* run: the current sequence's tokens in the chunk */
        /* grow the chunk token by token, an image's tokens all at once, until a limit is hit */
        while (t0 + tn < total && tn < e->max_batch) {
            size_t u = t0 + tn, len = e->h_span[u] > 0 ? (size_t)e->h_span[u] : 1, outs = 0;
            while (rr + outs < n_out && refs[rr + outs].tidx < u + len) outs++; /* rows are in token order */
            uint32_t nrun = (tn > 0 && e->h_seq[u] == e->h_seq[u - 1] ? run : 0) + (uint32_t)len;
            if (tn + len > e->max_batch || rn + outs > e->b.max_out || nrun > e->seq_chunk) {
                if (!tn) rc = ERR("an image of %zu tokens with %zu output rows does not fit one forward (%u rows)", len,
                                  outs, e->b.max_out);
                break;
            }
            while (cut && cj < (size_t)n && (cut[cj] == SIZE_MAX || cut[cj] < u)) cj++;
            if (cut && tn > 0 && cj < (size_t)n && cut[cj] == u) break;
            run = nrun;
            for (size_t k = 0; k < len; k++, tn++) {
                if ((uint32_t)e->h_pos[t0 + tn] > max_pos) max_pos = (uint32_t)e->h_pos[t0 + tn];
                /* out_rows index the chunk's own tokens */
                if (rr < n_out && refs[rr].tidx == t0 + tn) { e->h_out[rr] = (int32_t)tn; rr++; rn++; }
            }
        }
        chunk_images ci = { e->h_rows + w0, 0, 0, 0 };
        while (w0 + ci.n_rows < n_rows && e->h_rows[w0 + ci.n_rows].dst < t0 + tn) {
            e->h_rows[w0 + ci.n_rows].dst -= (uint32_t)t0; /* the chunk's own rows */
            ci.n_rows++;
        }
        w0 += ci.n_rows;
        for (size_t k = t0; k < t0 + tn; k++) {
            uint32_t extra = (uint32_t)(e->h_hi[k] - e->h_pos[k]);
            if (extra > ci.hi_extra) ci.hi_extra = extra;
        }
        ci.hi = ci.hi_extra > 0;
        if (t0 > 0 && chunk_kv(e, items, n, t0, tn, 0)) rc = ERR("internal: a KV block to write is shared");
        if (!rc && t0 > 0) rc = kv_sync(&e->kv, &e->rt, err, errlen);
        if (!rc) rc = run_chunk(e, items, refs, (uint32_t)r0, (uint32_t)t0, (uint32_t)tn, (uint32_t)rn, max_pos, &ci,
                                err, errlen);
        if (!rc) chunk_kv(e, items, n, t0, tn, 1);
        for (size_t i = 0, off = 0; !rc && cut && i < (size_t)n; off += (size_t)items[i].n_tokens, i++) {
            size_t end = off + (size_t)items[i].n_tokens, last = t0 + tn < end ? t0 + tn : end;
            if (cut[i] != SIZE_MAX && cut[i] > t0 && last == cut[i]) kv_snapshot(&e->kv, items[i].seq);
        }
        t0 += tn;
        r0 += rn;
    }
    free(cut);
    if (rc) {
        gate_open(e);
        clFinish(e->rt.q);
        kv_abort(&e->kv);
        /* the forward may have updated some layers' state in place: no retry may apply these tokens again */
        for (int i = 0; e->kv.state && i < n; i++) state_mark_broken(e->kv.state, items[i].seq);
        for (int i = 0; i < n; i++) {
            kv_trim(&e->kv, items[i].seq, (uint32_t)e->kv.seq_len[items[i].seq]);
            engine_seq_fresh(e, items[i].seq);
        }
        free(refs);
        return -1;
    }
    for (int i = 0; i < n; i++)
        kv_commit(&e->kv, items[i].seq, (uint32_t)(e->kv.seq_len[items[i].seq] + items[i].n_tokens));
    free(refs);
    ops_profile_harvest(&e->o); /* bench --profile: the step's launch times, read once it is done */
    return 0;
}

int engine_draft(engine *e, engine_draft_item *items, int n, char *err, size_t errlen)
{
    if (!e->draft) return ERR("no drafter loaded (--draft FILE)");
    if (n <= 0) return 0;
    if (staging_free(e)) return ERR("the last step's upload failed");
    double tq = monotonic_seconds();
    ops_clear(&e->o);
    e->o.act_int8 = 1; /* one token per sequence: decode's products */
    int rc = drafter_run(e->draft, &e->m, &e->o, &e->kv, items, n, err, errlen);
    e->enqueue_s += monotonic_seconds() - tq;
    return rc;
}
