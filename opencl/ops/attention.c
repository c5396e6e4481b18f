/* ops_attention.c — attention launchers: the split-KV kernels (any batch, any device; on NVIDIA by
 * warps, attn_dec, or for long spans on tensor cores, attn_decm), the tensor-core flash kernel attn_fa
 * (runs of one sequence's tokens, NVIDIA, head dims 128 / 256 / 512), and op_attention_batch,
 * which cuts a forward batch into runs and gives each the kernel that suits it. */
#include "ops_int.h"

#include <stdio.h>

int ops_attn_init(ops *o, cl_runtime *rt, char *err, size_t errlen)
{
    ops_attn *at = &o->attn;
    if (!(at->partial = rt_kernel(rt, "attn_partial", err, errlen))) return -1;
    for (int i = 0; o->has_mma && i < 6; i++) {
        char name[32];
        snprintf(name, sizeof name, "attn_fa%d_%d", i < 3 ? 4 : 8, 128 << i % 3);
        if (!(at->fa[i / 3][i % 3] = rt_kernel(rt, name, err, errlen))) return -1;
    }
    if (o->has_mma && !(at->fa_q = rt_kernel(rt, "attn_fa_q", err, errlen))) return -1;
    if (rt->is_nvidia &&
        (!(at->dec[0] = rt_kernel(rt, "attn_dec_8", err, errlen)) ||
         !(at->dec[1] = rt_kernel(rt, "attn_dec_16", err, errlen)) ||
         !(at->decq[0] = rt_kernel(rt, "attn_decq_8", err, errlen)) ||
         !(at->decq[1] = rt_kernel(rt, "attn_decq_16", err, errlen)) ||
         !(at->decm[0] = rt_kernel(rt, "attn_decm_256", err, errlen)) ||
         !(at->decm[1] = rt_kernel(rt, "attn_decm_512", err, errlen)) ||
         !(at->decm_merge = rt_kernel(rt, "attn_decm_merge", err, errlen))))
        return -1;
    return 0;
}

void ops_attn_release(ops *o)
{
    ops_attn *at = &o->attn;
    ops_kernel_release(&at->partial);
    ops_kernel_release(&at->decm_merge);
    for (int i = 0; i < 2; i++) {
        ops_kernel_release(&at->dec[i]);
        ops_kernel_release(&at->decq[i]);
        ops_kernel_release(&at->decm[i]);
    }
    for (int i = 0; i < 6; i++) ops_kernel_release(&at->fa[i / 3][i % 3]);
    ops_kernel_release(&at->fa_q);
}

/* attn_dec's head dims (0: 256, 1: 512) over f16 rows; -1 where attn_partial takes the layer */
static int dec_index(const ops *o, uint32_t hd, int kv_type)
{
    int di = kv_type != ENGINE_KV_F16 ? -1 : hd == 256 ? 0 : hd == 512 ? 1 : -1;
    return di >= 0 && o->attn.dec[di] ? di : -1;
}

/* attn_decm's groups per token: a KV head's q heads 8 at a time, 256 output dims each; 0 unless the
 * heads fill the 8 columns (with 2 or 4 heads a KV head, E4B's, it measured slower than attn_dec) */
static uint32_t decm_groups(uint32_t nh, uint32_t nkv, uint32_t hd)
{
    uint32_t G = nkv && nh % nkv == 0 ? nh / nkv : 0;
    return G && G % 8 == 0 ? nkv * (G / 8) * (hd / 256) : 0;
}

int ops_attn_kind(const ops *o, uint32_t hd, int kv_type, uint32_t nh, uint32_t nkv, uint32_t span)
{
    int di = dec_index(o, hd, kv_type);
    if (di < 0) return OPS_ATTN_PARTIAL;
    return span >= o->pol.attn_decm_min_keys && decm_groups(nh, nkv, hd) && o->attn.decm[di] ? OPS_ATTN_DECM
                                                                                          : OPS_ATTN_DEC;
}

/* attn_decm's chunk partials for tokens [t0, t0 + ntok) (gm groups a token and chunk), then
 * attn_decm_merge's group per (token, head) with the int8 X of the output projection (attn_dec's) */
static int attention_decm(ops *o, int di, uint32_t gm, cl_mem Q, uint32_t t0, uint32_t ntok, uint32_t nh, uint32_t nkv,
                          uint32_t hd, const kv_view *k, const kv_view *v, cl_mem tok_pos, cl_mem tok_seq, int window,
                          float scale, float softcap, uint32_t nchunk, uint32_t chunk, cl_mem part_acc,
                          cl_mem part_ml, cl_mem out, cl_mem xq, cl_mem xqs, uint32_t xq_ntok, uint32_t tpad)
{
    size_t lws[3] = { 128, 1, 1 }, gws[3] = { (size_t)nchunk * (hd / 256) * 128, gm / (hd / 256), ntok };
    double keys = (double)ntok * nchunk * chunk, parts = 4.0 * ntok * nh * nchunk * (hd + 2);
    if (OPS_LAUNCH(o, K_ATTN_DECM, o->attn.decm[di], 3, gws, lws, keys * nkv * hd * 4.0 + parts,
                   keys * nh * hd * 4.0, A(Q), A(t0), A(nh), A(nkv), A(hd), A(k->cache), A(v->cache), A(tok_pos),
                   A(tok_seq), A(k->block_table), A(k->max_blocks), A(k->block_size), A(window), A(scale),
                   A(softcap), A(nchunk), A(chunk), A(part_acc), A(part_ml)))
        return -1;
    size_t mlws[3] = { hd / 4, 1, 1 }, mgws[3] = { hd / 4, nh, ntok };
    return OPS_LAUNCH(o, K_ATTN_DECM_MERGE, o->attn.decm_merge, 3, mgws, mlws, parts + 4.0 * ntok * nh * hd,
                      2.0 * ntok * nh * nchunk * hd, A(part_acc), A(part_ml), A(t0), A(nh), A(hd), A(nchunk), A(out),
                      A(xq), A(xqs), A(xq_ntok), A(tpad));
}

/* the split-KV kernels for tokens [t0, t0 + ntok); kind: ops_attn_kind's; r: the batch's raw projections
 * (attn_decq) */
static int attention_split(ops *o, cl_mem Q, uint32_t t0, uint32_t ntok, uint32_t nh, uint32_t nkv, uint32_t hd,
                           const kv_view *k, const kv_view *v, cl_mem tok_pos, cl_mem tok_hi, cl_mem tok_seq,
                           int window, float scale, float softcap, int kind, uint32_t nchunk, uint32_t chunk,
                           cl_mem part_acc, cl_mem part_ml, cl_mem part_cnt, cl_mem out, const qkv_raw *r)
{
    int di = dec_index(o, hd, k->type);
    uint32_t gm = kind == OPS_ATTN_DECM ? decm_groups(nh, nkv, hd) : 0;
    /* keys above a token's position (tok_hi) only on attn_partial; attn_decm takes no raw projections */
    if (kind != OPS_ATTN_PARTIAL && (di < 0 || tok_hi || (kind == OPS_ATTN_DECM && (!gm || r))))
        return ops_fail(o, "attention: kernel %d cannot take this layer", kind);
    cl_kernel dec = kind == OPS_ATTN_PARTIAL ? NULL
                  : kind == OPS_ATTN_DECM ? o->attn.decm[di] : r ? o->attn.decq[di] : o->attn.dec[di];
    if (chunk == 0 || chunk > (dec ? o->pol.attn_max_chunk : OPS_ATTN_CHUNK))
        return ops_fail(o, "attention: bad chunk %u", chunk);
    double span = (double)ntok * nh * nchunk * chunk; /* upper bound on keys visited */
    double bytes = span * hd * 4.0 / (nh / nkv) + 4.0 * ntok * nh * nchunk * (hd + 2);
    if (k->type != ENGINE_KV_F16 && hd % KV_QK) return ops_fail(o, "attention: a quantized KV row needs hd %% 32 == 0");
    if (dec) { /* one warp per run of keys (attn_decode.cl), or attn_decm.cl's groups of 4 warps: no local
                * staging of keys or scores */
        size_t lws[3] = { 256, 1, 1 }, gws[3] = { (size_t)nchunk * 256, nh, ntok };
        /* a whole decode batch whose output projection (k = nh * hd) takes mvqg (1-4 tokens) or
         * mmq8 (5-256): its int8 X too, in that product's layout */
        uint32_t qk = nh * hd, q8 = t0 == 0 && ops_mvqg_takes_x(o, qk, ntok);
        uint32_t q8x = t0 == 0 && !q8 && ops_q8x_takes_x(o, qk, ntok), tpad = q8x ? ops_q8x_tpad(ntok) : 0;
        if ((q8 && ops_xq_reserve(o, ntok, qk)) || (q8x && ops_q8x_reserve(o, ntok, qk)))
            return -1;
        cl_mem xq = q8 || q8x ? o->act.xq : out, xqs = q8 || q8x ? o->act.xqs : out;
        uint32_t xq_ntok = q8 || q8x ? ntok : 0;
        int rc;
        if (gm) {
            rc = attention_decm(o, di, gm, Q, t0, ntok, nh, nkv, hd, k, v, tok_pos, tok_seq, window, scale, softcap,
                                nchunk, chunk, part_acc, part_ml, out, xq, xqs, xq_ntok, tpad);
        } else if (r) {
            cl_mem qw = r->qw ? r->qw : Q, kw = r->kw ? r->kw : Q;
            rc = OPS_LAUNCH(o, K_ATTN_DEC, dec, 3, gws, lws, bytes + 4.0 * ntok * (nh + 2 * nkv) * hd,
                            span * hd * 4.0, A(Q), A(t0), A(nh), A(nkv), A(hd), A(k->cache),
                            A(v->cache), A(tok_pos), A(tok_seq), A(k->block_table), A(k->max_blocks),
                            A(k->block_size), A(window), A(scale), A(softcap), A(nchunk), A(chunk), A(part_acc),
                            A(part_ml), A(part_cnt), A(out), A(xq), A(xqs), A(xq_ntok), A(tpad), A(r->k), A(r->v),
                            A(qw), A(kw), A(r->qk_norm), A(r->v_norm), A(r->eps), A(r->freq), A(r->rot));
        } else {
            rc = OPS_LAUNCH(o, K_ATTN_DEC, dec, 3, gws, lws, bytes, span * hd * 4.0, A(Q), A(t0),
                            A(nh), A(nkv), A(hd), A(k->cache), A(v->cache), A(tok_pos), A(tok_seq),
                            A(k->block_table), A(k->max_blocks), A(k->block_size), A(window), A(scale), A(softcap),
                            A(nchunk), A(chunk), A(part_acc), A(part_ml), A(part_cnt), A(out), A(xq), A(xqs),
                            A(xq_ntok), A(tpad));
        }
        if (rc) return -1;
        if (q8 || q8x) ops_xq_given(o, out, ntok, qk);
        return 0;
    }
    size_t lws[3] = { o->rt->is_cpu ? 16 : 128, 1, 1 };
    size_t gws[3] = { (size_t)nchunk * lws[0], nh, ntok };
    return OPS_LAUNCH(o, K_ATTN_PARTIAL, o->attn.partial, 3, gws, lws, bytes, span * hd * 4.0, A(Q), A(t0), A(nh),
                      A(nkv), A(hd), A(k->cache), A(v->cache), A(tok_pos), A(tok_hi), A(tok_seq),
                      A(k->block_table), A(k->max_blocks), A(k->block_size), A(window), A(scale), A(softcap),
                      A(nchunk), A(chunk), A(part_acc), A(part_ml), A(part_cnt), A(out), LOCAL(hd * sizeof(float)),
                      LOCAL(OPS_ATTN_CHUNK * sizeof(float)), LOCAL(lws[0] * sizeof(float)),
                      LOCAL(OPS_ATTN_CHUNK * sizeof(cl_uint)));
}

int op_attention(ops *o, cl_mem Q, uint32_t t0, uint32_t ntok, uint32_t nh, uint32_t nkv, uint32_t hd,
                 const kv_view *k, const kv_view *v, cl_mem tok_pos, cl_mem tok_seq, int window,
                 float scale, float softcap, int kind, uint32_t nchunk, uint32_t chunk, cl_mem part_acc,
                 cl_mem part_ml, cl_mem part_cnt, cl_mem out)
{
    return attention_split(o, Q, t0, ntok, nh, nkv, hd, k, v, tok_pos, NULL, tok_seq, window, scale, softcap, kind,
                           nchunk, chunk, part_acc, part_ml, part_cnt, out, NULL);
}

void ops_attn_split(const ops *o, uint32_t span, uint32_t ntok, uint32_t nh, uint32_t nkv, uint32_t hd, int kind,
                    uint32_t *chunk, uint32_t *nchunk)
{
    uint32_t c = kind != OPS_ATTN_PARTIAL ? o->pol.attn_max_chunk : OPS_ATTN_CHUNK;
    if (!o->rt->is_cpu) {
        /* aim for ~attn_groups_per_cu work-groups per compute unit, chunks of at least attn_min_chunk
         * keys (rounded up to a power of two) */
        uint32_t lo = OPS_ATTN_MIN_CHUNK;
        while (lo < o->pol.attn_min_chunk && lo < OPS_ATTN_CHUNK) lo *= 2;
        uint64_t want = (uint64_t)o->pol.attn_groups_per_cu * o->n_cu,
                 have = (uint64_t)ntok * (kind == OPS_ATTN_DECM ? decm_groups(nh, nkv, hd) : nh);
        while (c > lo && have * ((span + c - 1) / c) < want) c /= 2;
    }
    *chunk = c;
    *nchunk = span ? (span + c - 1) / c : 1;
}

/* attn_fa's warps a group: the policy's 8, or 4 */
static uint32_t fa_warps(const ops *o)
{
    return o->pol.fa_warps == 8 ? 8 : 4;
}

/* attn_fa for head dim hd with the policy's warps, NULL where there is none (other head dims take
 * the split-KV kernels) */
static cl_kernel fa_kernel(const ops *o, uint32_t hd)
{
    cl_kernel const *fa = o->attn.fa[fa_warps(o) == 8];
    return hd == 128 ? fa[0] : hd == 256 ? fa[1] : hd == 512 ? fa[2] : NULL;
}

int ops_flash_ok(const ops *o, uint32_t nh, uint32_t nkv, uint32_t hd, int kv_type)
{
    if (!fa_kernel(o, hd) || !nkv || nh % nkv || kv_type != ENGINE_KV_F16) return 0; /* attn_fa reads f16 rows */
    uint32_t G = nh / nkv;
    return G <= OPS_FLASH_ROWS && OPS_FLASH_ROWS % G == 0;
}

int op_attention_flash(ops *o, cl_mem Q, uint32_t t0, uint32_t ntok, uint32_t nh, uint32_t nkv, uint32_t hd,
                       const kv_view *k, const kv_view *v, cl_mem tok_pos, cl_mem tok_seq, int window,
                       float scale, float softcap, uint32_t span, cl_mem out)
{
    if (!ops_flash_ok(o, nh, nkv, hd, k->type))
        return ops_fail(o, "attention: flash kernel unavailable for this shape or KV type");
    if (k->block_size != 32) return ops_fail(o, "attention: flash kernel needs KV blocks of 32 keys");
    uint32_t nw = fa_warps(o), tq = 16 * nw / (nh / nkv), tiles = (ntok + tq - 1) / tq;
    /* Q of the run as the warps' A fragments (o->mm.xh), then attn_fa: one group per 16 * nw query
     * rows, KV head and 256 output dims */
    uint32_t dvs = hd > 256 ? 2 : 1;
    if (ops_grow_buf(o, &o->mm.xh, &o->mm.xh_bytes, (size_t)tiles * nkv * 16 * nw * hd * 2)) return -1;
    size_t ql[2] = { 64, 1 }, qg[2] = { (hd / 16 * 32 + 63) / 64 * 64, (size_t)tiles * nkv * nw };
    if (OPS_LAUNCH(o, K_ATTN_FA_Q, o->attn.fa_q, 2, qg, ql, (double)ntok * nh * hd * 6.0, 0, A(Q), A(t0), A(ntok),
                   A(nh), A(nkv), A(hd), A(nw), A(o->mm.xh)))
        return -1;
    /* keys per row at most: the span plus the tile's own extent. K and V are read once per tile and
     * KV head; the score product runs once per output-dim slice */
    size_t lws[3] = { 32 * nw, 1, 1 }, gws[3] = { (size_t)tiles * 32 * nw, nkv, dvs };
    double keys = (double)span + tq, rows = (double)ntok * nh;
    return OPS_LAUNCH(o, K_ATTN_FA, fa_kernel(o, hd), 3, gws, lws, (double)tiles * nkv * keys * hd * 4.0,
                      2.0 * rows * keys * (hd * dvs + hd), A(o->mm.xh), A(t0), A(ntok), A(nh), A(nkv),
                      A(k->cache), A(v->cache), A(tok_pos), A(tok_seq), A(k->block_table), A(k->max_blocks),
                      A(window), A(scale), A(softcap), A(out));
}

/* tokens [t0, t0 + n) on the split-KV kernels, sliced so the partials fit their buffers; span: the
 * longest key span of a token in the batch */
static int split_range(ops *o, const attn_batch *b, const attn_layer *l, uint32_t span, uint32_t t0, uint32_t n)
{
    cl_mem hi = l->window > 0 ? b->hi : NULL; /* full-attention layers stay causal around images */
    uint32_t chunk, nchunk;
    int kind = hi ? OPS_ATTN_PARTIAL : ops_attn_kind(o, l->hd, l->k->type, l->nh, l->nkv, span);
    ops_attn_split(o, span, n, l->nh, l->nkv, l->hd, kind, &chunk, &nchunk);
    size_t per_tok = (size_t)l->nh * nchunk * b->part_hd;
    uint32_t slice = (uint32_t)(b->part_elems / per_tok);
    if (slice == 0) return ops_fail(o, "attention: position %u exceeds the partial buffers", b->max_pos);
    for (uint32_t s = t0; s < t0 + n; s += slice) {
        uint32_t m = t0 + n - s < slice ? t0 + n - s : slice;
        if (attention_split(o, b->q, s, m, l->nh, l->nkv, l->hd, l->k, l->v, b->pos, hi, b->seq, l->window,
                            l->scale, l->softcap, kind, nchunk, chunk, b->part_acc, b->part_ml, b->part_cnt, b->out,
                            NULL))
            return -1;
    }
    return 0;
}

/* the longest key span of a token of b in layer l: its window (or position), plus how far an image's
 * tokens see past their own position in a sliding layer */
static uint32_t batch_span(const attn_batch *b, const attn_layer *l)
{
    uint32_t span = b->max_pos + 1;
    if (l->window > 0 && span > (uint32_t)l->window) span = (uint32_t)l->window;
    return l->window > 0 && b->hi ? span + b->hi_extra : span;
}

int op_attention_batch(ops *o, const attn_batch *b, const attn_layer *l)
{
    int flash = b->h_seq && ops_flash_ok(o, l->nh, l->nkv, l->hd, l->k->type) && l->k->block_size == 32 &&
                !(l->window > 0 && b->hi); /* attn_fa is causal only */
    uint32_t span = batch_span(b, l);
    /* runs of one sequence long enough for tiles go to the flash kernel; the rest, merged into
     * ranges, to the split-KV kernels */
    uint32_t pend = 0, t = 0;
    while (t < b->ntok) {
        uint32_t e = t + 1;
        if (flash)
            while (e < b->ntok && b->h_seq[e] == b->h_seq[t]) e++;
        else
            e = b->ntok;
        if (flash && e - t >= OPS_FLASH_MIN_RUN) {
            if (pend < t && split_range(o, b, l, span, pend, t - pend)) return -1;
            if (op_attention_flash(o, b->q, t, e - t, l->nh, l->nkv, l->hd, l->k, l->v, b->pos, b->seq, l->window,
                                   l->scale, l->softcap, span, b->out))
                return -1;
            pend = e;
        }
        t = e;
    }
    return pend < b->ntok ? split_range(o, b, l, span, pend, b->ntok - pend) : 0;
}

int op_qkv_attention(ops *o, const qkv_raw *r, const attn_batch *b, const attn_layer *l)
{
    cl_kernel dq = l->k->type != ENGINE_KV_F16 ? NULL /* attn_decq writes f16 rows only */
                 : l->hd == 256 ? o->attn.decq[0] : l->hd == 512 ? o->attn.decq[1] : NULL;
    /* one launch where the whole batch is 1-4 decode tokens (one per sequence: no token attends
     * to another's fresh key) in one split-KV slice; 16-token steps measured slower this way, so
     * those keep qkv_rope */
    int one = dq && b->h_seq && b->ntok <= o->pol.attn_decq_max_tok && r->rot % 2 == 0 && r->rot <= l->hd &&
              r->rot <= OPS_ATTN_CHUNK && /* the angles' table is the kernel's score buffer */
              l->nkv && l->nh % l->nkv == 0 && (r->qk_norm != 1 || (r->qw && r->kw)) && !b->hi;
    for (uint32_t t = 1; one && t < b->ntok; t++) one = b->h_seq[t] != b->h_seq[t - 1];
    uint32_t span = batch_span(b, l), chunk = 0, nchunk = 0;
    /* long spans read each KV row once per KV head on attn_decm, after qkv_rope */
    if (one && ops_attn_kind(o, l->hd, l->k->type, l->nh, l->nkv, span) != OPS_ATTN_DEC) one = 0;
    if (one) {
        ops_attn_split(o, span, b->ntok, l->nh, l->nkv, l->hd, OPS_ATTN_DEC, &chunk, &nchunk);
        one = b->part_elems / ((size_t)l->nh * nchunk * b->part_hd) >= b->ntok;
    }
    if (one)
        return attention_split(o, b->q, 0, b->ntok, l->nh, l->nkv, l->hd, l->k, l->v, b->pos, NULL, b->seq, l->window,
                               l->scale, l->softcap, OPS_ATTN_DEC, nchunk, chunk, b->part_acc, b->part_ml, b->part_cnt,
                               b->out, r);
    if (op_qkv_rope(o, b->q, r->k, r->v, b->ntok, l->nh, l->nkv, l->hd, r->qw, r->kw, r->qk_norm, r->v_norm, r->eps,
                    r->freq, r->rot, b->pos, b->seq, l->k, l->v))
        return -1;
    return op_attention_batch(o, b, l);
}
