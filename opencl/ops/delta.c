/* delta.c — the gated-delta layers' ops (kernels/delta.cl): the conv with its state and the gates
 * (op_delta_conv), the delta-rule scan dispatched by run length between delta_step and the chunk
 * form (op_delta_scan), and the SiLU-gated norm of its output (op_rmsnorm_gated). */
#include "ops_int.h"

#include <math.h>

int ops_delta_init(ops *o, cl_runtime *rt, char *err, size_t errlen)
{
    ops_delta *d = &o->delta;
    struct { cl_kernel *k; const char *name; } ks[] = {
        { &d->conv, "delta_conv" }, { &d->conv_state, "delta_conv_state" }, { &d->step, "delta_step" },
        { &d->prep, "delta_chunk_prep" }, { &d->scan, "delta_chunk_scan" }, { &d->norm_gated, "rmsnorm_gated" },
        { &d->runs, "delta_runs" },
    };
    for (size_t i = 0; i < sizeof ks / sizeof *ks; i++)
        if (!(*ks[i].k = rt_kernel(rt, ks[i].name, err, errlen))) return -1;
    return 0;
}

void ops_delta_release(ops *o)
{
    ops_delta *d = &o->delta;
    cl_kernel *ks[] = { &d->conv, &d->conv_state, &d->step, &d->prep, &d->scan, &d->norm_gated, &d->runs };
    for (size_t i = 0; i < sizeof ks / sizeof *ks; i++) ops_kernel_release(ks[i]);
    ops_mem_release(&d->wu);
    ops_mem_release(&d->pg);
    d->wu_bytes = d->pg_bytes = 0;
}

static uint32_t dc_of(const delta_shape *sh) { return 2 * sh->hk * sh->dk + sh->hv * sh->dv; }

/* the shape, state layout and run table the kernels assume; -1 with the error kept otherwise */
static int check_args(ops *o, const char *op, const delta_shape *sh, const delta_runs *r, const delta_state *st)
{
    if (o->failed) return -1;
    if (!sh->hk || !sh->hv || sh->hv % sh->hk || !sh->dk || sh->dk > OPS_DELTA_DK_MAX || !sh->dv || !sh->kc ||
        sh->kc > OPS_DELTA_KC_MAX)
        return ops_fail(o, "%s: unsupported shape (Hk %u, Hv %u, dk %u, dv %u, kc %u; Hv a multiple of Hk, "
                        "dk <= %d, kc <= %d)", op, sh->hk, sh->hv, sh->dk, sh->dv, sh->kc, OPS_DELTA_DK_MAX,
                        OPS_DELTA_KC_MAX);
    uint64_t conv = (uint64_t)(sh->kc - 1) * dc_of(sh), ssm = (uint64_t)sh->hv * sh->dk * sh->dv;
    uint64_t co = st->conv_off, so = st->ssm_off;
    if (co + conv > st->slot_floats || so + ssm > st->slot_floats || (co < so + ssm && so < co + conv))
        return ops_fail(o, "%s: the conv (%llu floats at %u) and delta (%llu at %u) states do not fit apart in a "
                        "slot of %u floats", op, (unsigned long long)conv, st->conv_off, (unsigned long long)ssm,
                        st->ssm_off, st->slot_floats);
    for (uint32_t i = 0; i < r->n; i++) {
        const delta_run *u = &r->h[i];
        if (u->t0 < 0 || u->len < 1 || u->pos < 0 || (uint64_t)u->t0 + (uint64_t)u->len > r->ntok ||
            (i && u->t0 < r->h[i - 1].t0 + r->h[i - 1].len) || u->src < 0 || (uint32_t)u->src >= st->n_slots ||
            u->dst < 0 || (uint32_t)u->dst >= st->n_slots)
            return ops_fail(o, "%s: run %u (rows %d + %d, slots %d -> %d) is empty, out of order, past %u rows or "
                            "names a slot past %u", op, i, u->t0, u->len, u->src, u->dst, r->ntok, st->n_slots);
        for (uint32_t j = 0; j < r->n; j++)
            if (j != i && (r->h[j].src == u->dst || r->h[j].dst == u->dst))
                return ops_fail(o, "%s: run %u writes slot %d, which run %u uses too", op, i, u->dst, j);
    }
    return 0;
}

int op_delta_conv(ops *o, const delta_shape *sh, const delta_runs *r, cl_mem x, cl_mem cw, cl_mem a, cl_mem b,
                  cl_mem ssm_a, cl_mem dt_bias, float eps, const delta_state *st, cl_mem y, cl_mem beta, cl_mem g)
{
    if (check_args(o, "delta_conv", sh, r, st)) return -1;
    if (x == y) return ops_fail(o, "delta_conv: y must not be x (later rows read earlier raw inputs)");
    if (r->n == 0) return 0;
    uint32_t dc = dc_of(sh), heads = 2 * sh->hk + sh->hv, kc = sh->kc, hk = sh->hk, hv = sh->hv, dk = sh->dk;
    uint32_t dv = sh->dv, nr = r->n;
    cl_ulong sf = st->slot_floats;
    float qscale = (float)(1.0 / sqrt((double)sh->dk));
    /* a group per (head, token row): its channels' taps, then the head's L2 norm as one reduction */
    size_t lws[2] = { o->rt->is_cpu ? 16 : 128, 1 }, gws[2] = { heads * lws[0], r->ntok };
    double bytes = 4.0 * r->ntok * (2.0 * dc + 4.0 * hv), flop = (2.0 * kc + 6.0) * r->ntok * dc;
    if (OPS_LAUNCH(o, K_DELTA_CONV, o->delta.conv, 2, gws, lws, bytes, flop, A(x), A(cw), A(kc), A(r->d), A(nr),
                   A(st->buf), A(sf), A(st->conv_off), A(hk), A(hv), A(dk), A(dv), A(a), A(b), A(ssm_a), A(dt_bias),
                   A(eps), A(qscale), A(y), A(beta), A(g), LOCAL(lws[0] * sizeof(float))))
        return -1;
    if (kc == 1) return 0; /* no state */
    /* after the conv read the source states, so that in-place runs do not race */
    size_t lc = 64, gc[2] = { (dc + lc - 1) / lc * lc, nr }, lc2[2] = { lc, 1 };
    return OPS_LAUNCH(o, K_DELTA_CONV, o->delta.conv_state, 2, gc, lc2, 8.0 * nr * (kc - 1) * dc, 0, A(x), A(kc),
                      A(r->d), A(st->buf), A(sf), A(st->conv_off), A(dc));
}

/* delta_step over the runs of [0, max_len) tokens */
static int scan_step(ops *o, const delta_shape *sh, const delta_runs *r, cl_mem y, cl_mem beta, cl_mem g,
                     const delta_state *st, cl_mem out, uint32_t max_len, double toks)
{
    uint32_t cols = o->pol.delta_cols, hk = sh->hk, hv = sh->hv, dk = sh->dk, dv = sh->dv, tiled = !!sh->tiled;
    uint32_t lo = 0;
    cl_ulong sf = st->slot_floats;
    if (cols > o->rt->max_wg) cols = (uint32_t)o->rt->max_wg;
    size_t lws[3] = { cols, 1, 1 }, gws[3] = { (size_t)(dv + cols - 1) / cols * cols, r->n, hv };
    double state = 8.0 * r->n * hv * dk * dv, per_tok = 4.0 * hv * (2.0 * dk + 2.0 * dv + 2.0);
    return OPS_LAUNCH(o, K_DELTA_STEP, o->delta.step, 3, gws, lws, state + toks * per_tok, toks * hv * 6.0 * dk * dv,
                      A(y), A(beta), A(g), A(r->d), A(hk), A(hv), A(dk), A(dv), A(tiled), A(lo), A(max_len),
                      A(st->buf), A(sf), A(st->ssm_off), A(out), LOCAL(2 * dk * sizeof(float)));
}

/* delta_chunk_prep then delta_chunk_scan over the runs of min_len tokens or more; max_chunks: the
 * most chunks one of them spans */
static int scan_chunks(ops *o, const delta_shape *sh, const delta_runs *r, cl_mem y, cl_mem beta, cl_mem g,
                       const delta_state *st, cl_mem out, uint32_t min_len, uint32_t max_chunks, double toks)
{
    uint32_t C = o->pol.delta_chunk, cs = o->pol.delta_scan_cols, hk = sh->hk, hv = sh->hv, dk = sh->dk, dv = sh->dv;
    uint32_t tiled = !!sh->tiled, hi = UINT32_MAX;
    cl_ulong sf = st->slot_floats;
    if (C < 1 || C > OPS_DELTA_C_MAX) return ops_fail(o, "delta_scan: chunk of %u tokens (1..%d)", C, OPS_DELTA_C_MAX);
    if (cs > dv) cs = dv;
#define SCAN_LOCAL(cs) (((size_t)dk * (cs) + (size_t)C * (cs) + 2 * C) * sizeof(float))
    while (cs > 1 && SCAN_LOCAL(cs) > o->local_mem) cs = (cs + 1) / 2; /* columns are a speed knob: fit the device */
    size_t scan_local = SCAN_LOCAL(cs);
#undef SCAN_LOCAL
    if (scan_local > o->local_mem || (size_t)C * (C + 2) * sizeof(float) > o->local_mem)
        return ops_fail(o, "delta_scan: %zu bytes of local memory for dk %u, %u columns, chunk %u (device: %zu)",
                        scan_local, dk, cs, C, o->local_mem);
    /* per token row and head: W and U rows, P's row and γ (rows of other runs unused) */
    if (ops_grow_buf(o, &o->delta.wu, &o->delta.wu_bytes, (size_t)r->ntok * hv * (dk + dv) * sizeof(float)) ||
        ops_grow_buf(o, &o->delta.pg, &o->delta.pg_bytes, (size_t)r->ntok * hv * (C + 1) * sizeof(float)))
        return -1;
    size_t L = o->rt->is_cpu ? 16 : 256;
    if (L > o->rt->max_wg) L = o->rt->max_wg;
    size_t lws[3] = { L, 1, 1 }, gp[3] = { (size_t)max_chunks * L, r->n, hv };
    double wl = dk + dv;
    if (OPS_LAUNCH(o, K_DELTA_PREP, o->delta.prep, 3, gp, lws, toks * hv * 4.0 * (3.0 * wl + C),
                   toks * hv * (4.0 * C * dk + C * wl), A(y), A(beta), A(g), A(r->d), A(hk), A(hv), A(dk), A(dv),
                   A(tiled), A(C), A(min_len), A(hi), A(o->delta.wu), A(o->delta.pg),
                   LOCAL((size_t)C * C * sizeof(float)), LOCAL(C * sizeof(float)), LOCAL(C * sizeof(float))))
        return -1;
    size_t gs[3] = { (size_t)(dv + cs - 1) / cs * L, r->n, hv };
    return OPS_LAUNCH(o, K_DELTA_SCAN, o->delta.scan, 3, gs, lws,
                      8.0 * r->n * hv * dk * dv + toks * hv * 4.0 * (2.0 * wl + C + 2.0 * dv),
                      toks * hv * dv * (6.0 * dk + C), A(y), A(o->delta.wu), A(o->delta.pg), A(r->d), A(hk), A(hv),
                      A(dk), A(dv), A(tiled), A(C), A(cs), A(min_len), A(hi), A(st->buf), A(sf), A(st->ssm_off),
                      A(out), LOCAL((size_t)dk * cs * sizeof(float)), LOCAL((size_t)C * cs * sizeof(float)),
                      LOCAL(C * sizeof(float)), LOCAL(C * sizeof(float)));
}

int op_delta_scan(ops *o, const delta_shape *sh, const delta_runs *r, cl_mem y, cl_mem beta, cl_mem g,
                  const delta_state *st, cl_mem out)
{
    if (check_args(o, "delta_scan", sh, r, st)) return -1;
    uint32_t C = o->pol.delta_chunk ? o->pol.delta_chunk : 1, min = o->pol.delta_chunk_min, chunks = 0;
    double step_toks = 0, chunk_toks = 0;
    for (uint32_t i = 0; i < r->n; i++) {
        uint32_t len = (uint32_t)r->h[i].len, pos = (uint32_t)r->h[i].pos, n = (pos + len - 1) / C - pos / C + 1;
        if (len < min) step_toks += len;
        else {
            chunk_toks += len;
            if (n > chunks) chunks = n;
        }
    }
    if (step_toks > 0 && scan_step(o, sh, r, y, beta, g, st, out, min, step_toks)) return -1;
    if (chunk_toks > 0 && scan_chunks(o, sh, r, y, beta, g, st, out, min, chunks, chunk_toks)) return -1;
    return 0;
}

int op_delta_runs(ops *o, cl_mem seq, cl_mem pos, uint32_t ntok, cl_mem d)
{
    size_t one = 1;
    return OPS_LAUNCH(o, K_DELTA_CONV, o->delta.runs, 1, &one, &one, 8.0 * ntok + 20.0 * ntok, 0, A(seq), A(pos),
                      A(ntok), A(d));
}

int op_rmsnorm_gated(ops *o, cl_mem x, cl_mem z, cl_mem w, cl_mem y, uint32_t rows, uint32_t n, float eps)
{
    if (!n) return ops_fail(o, "rmsnorm_gated: rows of 0 values");
    if (!rows) return o->failed ? -1 : 0;
    size_t lws = o->rt->is_cpu ? 16 : 64, gws = (size_t)rows * lws;
    return OPS_LAUNCH(o, K_RMSNORM_GATED, o->delta.norm_gated, 1, &gws, &lws, 16.0 * rows * n, 8.0 * rows * n, A(x),
                      A(z), A(w), A(y), A(n), A(eps), LOCAL(lws * sizeof(float)));
}
