/* matmul_q8.c — products on int8 activations (NVIDIA): mvq_T (X staged per group), mvqg_T (X
 * quantized once, by act_q8.c or its producer), mvqn_T (the norm chain fused in front), and mmq8_T /
 * mmq8s_T / mmq8p_T (5-256 tokens on int8 tensor cores). */
#include "ops_int.h"

#include <stdio.h>

/* kernel FAMILY_suffix_NT (NT = 2^nt token tiles of 8) of type into *k, and the largest group it runs */
static int nt_kernel(cl_runtime *rt, cl_kernel *k, size_t *wg, const char *family, uint32_t type, int nt, char *err,
                     size_t errlen)
{
    char name[64];
    snprintf(name, sizeof name, "%s_%s_%d", family, dev_type_of(type)->suffix, 1 << nt);
    if (!(*k = rt_kernel(rt, name, err, errlen))) return -1;
    if (wg) clGetKernelWorkGroupInfo(*k, rt->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof(size_t), wg, NULL);
    return 0;
}

int ops_q8_init(ops *o, cl_runtime *rt, char *err, size_t errlen)
{
    ops_q8 *q = &o->q8;
    for (uint32_t t = 0; rt->is_nvidia && t < GGML_TYPE_COUNT; t++)
        if (dev_type_has(t, DT_GEMV_Q8) && (ops_type_kernel(rt, &q->mvq[t], "mvq", t, err, errlen) ||
                                            ops_type_kernel(rt, &q->mvqn[t], "mvqn", t, err, errlen) ||
                                            ops_type_kernel(rt, &q->mvqg[t], "mvqg", t, err, errlen)))
            return -1;
    if (q->mvqg[GGML_TYPE_Q4_K] && !(q->mvqg_q4k2 = rt_kernel(rt, "mvqg_q4_k2", err, errlen))) return -1;
    if (o->has_mma && !(q->mmq8_sum = rt_kernel(rt, "mmq8_sum", err, errlen))) return -1;
    for (uint32_t t = 0; o->has_mma && t < GGML_TYPE_COUNT; t++)
        for (int nt = 0; nt < OPS_MMQ8_NT; nt++) {
            if (dev_type_has(t, DT_MMQ8) &&
                nt_kernel(rt, &q->mmq8[nt][t], &q->mmq8_wg[nt][t], "mmq8", t, nt, err, errlen))
                return -1;
            /* a ring type's own kernels: mmq8s at 5-8 tokens only, mmq8p at all, mmq8r from 9 */
            if (dev_type_has(t, DT_MMQ8_RING) &&
                ((nt == 0 && nt_kernel(rt, &q->mmq8s[t], NULL, "mmq8s", t, nt, err, errlen)) ||
                 nt_kernel(rt, &q->mmq8p[nt][t], &q->mmq8p_wg[nt][t], "mmq8p", t, nt, err, errlen) ||
                 (nt > 0 && nt_kernel(rt, &q->mmq8r[nt][t], NULL, "mmq8r", t, nt, err, errlen))))
                return -1;
        }
    return 0;
}

void ops_q8_release(ops *o)
{
    ops_q8 *q = &o->q8;
    for (int t = 0; t < GGML_TYPE_COUNT; t++) {
        cl_kernel *ks[] = { &q->mvq[t], &q->mvqg[t], &q->mvqn[t], &q->mmq8s[t] };
        for (size_t i = 0; i < sizeof ks / sizeof *ks; i++) ops_kernel_release(ks[i]);
        for (int nt = 0; nt < OPS_MMQ8_NT; nt++) {
            ops_kernel_release(&q->mmq8[nt][t]);
            ops_kernel_release(&q->mmq8p[nt][t]);
            ops_kernel_release(&q->mmq8r[nt][t]);
        }
    }
    ops_kernel_release(&q->mmq8_sum);
    ops_kernel_release(&q->mvqg_q4k2);
    for (int i = 0; i < 3; i++) ops_mem_release(&q->part[i]);
}

/* local bytes of mvq's staged X: int8 values, a scale per 32 and a sum per 16 */
static size_t mvq_local(uint32_t k, uint32_t ntok) { return (size_t)ntok * (k + k / 32 * 4 + k / 16 * 4); }

int ops_mvq_fits(const ops *o, uint32_t type, uint32_t k, uint32_t ntok)
{
    if (!o->act_int8 || ntok < 1 || ntok > 4 || type >= GGML_TYPE_COUNT) return 0;
    return o->q8.mvq[type] && k % dev_type_of(type)->k_gemv_q8 == 0 &&
           (o->q8.mvqg[type] || mvq_local(k, ntok) + 1024 <= o->local_mem);
}

int ops_int8_decode(const ops *o)
{
    for (uint32_t t = 0; t < GGML_TYPE_COUNT; t++)
        if (o->q8.mvq[t]) return 1;
    return 0;
}

/* 1 if ops_mvq runs these products on mvq (X staged per group), not mvqg */
static int mvq_staged(const ops *o, uint32_t type, size_t rows, uint32_t k, uint32_t ntok)
{
    return !(o->q8.mvqg[type] && ((k >= o->pol.mvqg_min_k && rows * k >= o->pol.mvqg_min_elems) ||
                               mvq_local(k, ntok) + 1024 > o->local_mem));
}

/* rows per mvq group: pol.mvq_groups_per_cu groups per compute unit, whole passes of the 8 warps
 * (2 rows each), at most 128 (each group quantizes X once) */
static uint32_t mvq_rpg(const ops *o, size_t rows)
{
    size_t pass = 8 * 2, rpg = (rows / (o->pol.mvq_groups_per_cu * (size_t)o->n_cu) + pass - 1) / pass * pass;
    if (rpg < pass) rpg = pass;
    if (rpg > 128) rpg = 128;
    return (uint32_t)rpg;
}

/* n (1-3) matrices of one type sharing X, ntok <= 4, on the int8 dot-product kernels: mvqg for
 * large products (X quantized once, or taken as its producer left it), else mvq */
int ops_mvq(ops *o, const mm_out *outs, int n, cl_mem X, uint32_t ldx, const geglu_in *gg, uint32_t ntok)
{
    multi_args a;
    uint32_t k = outs[0].w->cols, type = outs[0].w->type;
    if (ops_gather_multi(o, outs, n, &a)) return -1;
    uint32_t geglu = gg ? gg->act : 0, u_off = gg ? gg->u_off : 0, ldu = gg ? gg->ldu : 0;
    cl_mem U = gg ? gg->U : NULL; /* unread without geglu; NULL costs the launch less than a buffer */
    if (!mvq_staged(o, type, a.rows, k, ntok)) {
        /* X as its producer (norm_fuse, attn_dec) left it, else quantized here */
        int given = !gg && ops_xq_holds(o, X, ldx, ntok, k);
        if (!given) {
            size_t qlws = 256, qgws = ((size_t)ntok * k / 4 + qlws - 1) / qlws * qlws;
            if (ops_xq_reserve(o, ntok, k) ||
                OPS_LAUNCH(o, K_MVQ_XQ, o->act.mvq_xq, 1, &qgws, &qlws,
                           4.0 * ntok * k * (geglu ? 2 : 1) + 1.4 * ntok * k,
                           0, A(X), A(ldx), A(U), A(u_off), A(ldu), A(geglu), A(ntok), A(k),
                           A(o->act.xq), A(o->act.xqs)))
                return -1;
            if (!gg && ldx == k) ops_xq_given(o, X, ntok, k); /* a product of another type on X takes it as it is */
        }
        uint32_t rpg = o->pol.mvqg_rpg / 4 * 4; /* whole warps of 4 rows */
        size_t lws = 32 * (size_t)(rpg / 4), gws = (a.rows + rpg - 1) / rpg * lws;
        /* a warp's passes over a row: ceil(pieces / 32) */
        uint32_t halves = (k / 32 + 31) / 32, pairs = (k / 64 + 31) / 32;
        int pair = type == GGML_TYPE_Q4_K && o->q8.mvqg_q4k2 &&
                   (o->pol.mvqg_pair == 2 || (o->pol.mvqg_pair == 1 && 2 * pairs <= halves));
        return OPS_LAUNCH(o, K_MVQG, pair ? o->q8.mvqg_q4k2 : o->q8.mvqg[type], 1, &gws, &lws, a.bytes + ntok * (1.4 * k + 4.0 * a.rows),
                          2.0 * ntok * a.rows * k, A(a.W[0]), A(a.rb[0]), A(a.nr[0]), A(a.Y[0]),
                          A(a.ld[0]), A(a.W[1]), A(a.rb[1]), A(a.nr[1]), A(a.Y[1]), A(a.ld[1]), A(a.W[2]), A(a.rb[2]),
                          A(a.nr[2]), A(a.Y[2]), A(a.ld[2]), A(k), A(ntok), A(rpg), A(o->act.xq), A(o->act.xqs));
    }
    uint32_t rpg32 = mvq_rpg(o, a.rows);
    size_t lws = 256, gws = (a.rows + rpg32 - 1) / rpg32 * lws;
    return OPS_LAUNCH(o, K_MVQ, o->q8.mvq[type], 1, &gws, &lws,
                      a.bytes + 4.0 * ntok * (k * (geglu ? 2 : 1) + a.rows), 2.0 * ntok * a.rows * k, A(a.W[0]),
                      A(a.rb[0]), A(a.nr[0]), A(a.Y[0]), A(a.ld[0]), A(a.W[1]), A(a.rb[1]),
                      A(a.nr[1]), A(a.Y[1]), A(a.ld[1]), A(a.W[2]), A(a.rb[2]), A(a.nr[2]), A(a.Y[2]), A(a.ld[2]),
                      A(k), A(X), A(ldx), A(ntok), A(rpg32), A(U), A(u_off), A(ldu), A(geglu),
                      LOCAL((size_t)ntok * k), LOCAL((size_t)ntok * k / 32 * 4), LOCAL((size_t)ntok * k / 16 * 4));
}

/* mvqn: the plain chain r = (res + norm(x)·wx)·scale into res_out, y = norm(r)·w0 (y = r where w0 is
 * NULL), inside the products of y. One token only: the step is bound by its launches there; at 4
 * tokens every group's four chains cost more than the launch saved. 1 where it does not apply. */
int ops_mvqn(ops *o, const norm_chain *c, cl_mem res_out, const mm_out *outs, int n, uint32_t k, uint32_t ntok,
             float eps)
{
    if (ntok != 1 || n < 1 || n > 3 || k % 32 || c->res == res_out || !c->wx || c->x2 || c->wt || c->nout > 1)
        return 1;
    uint32_t type = outs[0].w->type;
    size_t rows = 0;
    for (int i = 0; i < n; i++) {
        if (outs[i].w->type != type || outs[i].w->cols != k) return 1;
        rows += outs[i].w->rows;
    }
    if (type >= GGML_TYPE_COUNT || !o->q8.mvqn[type] || !ops_mvq_fits(o, type, k, ntok) || !mvq_staged(o, type, rows,
    k, ntok))
        return 1;
    multi_args a;
    if (ops_gather_multi(o, outs, n, &a)) return -1;
    cl_mem w0in = c->nout ? c->out[0].w : NULL;
    uint32_t rpg = mvq_rpg(o, a.rows), raw = w0in == NULL;
    size_t lws = 256, gws = (a.rows + rpg - 1) / rpg * lws;
    return OPS_LAUNCH(o, K_MVQ, o->q8.mvqn[type], 1, &gws, &lws, a.bytes + 4.0 * ntok * (4.0 * k + a.rows),
                      2.0 * ntok * a.rows * k, A(a.W[0]), A(a.rb[0]), A(a.nr[0]), A(a.Y[0]),
                      A(a.ld[0]), A(a.W[1]), A(a.rb[1]), A(a.nr[1]), A(a.Y[1]), A(a.ld[1]), A(a.W[2]), A(a.rb[2]),
                      A(a.nr[2]), A(a.Y[2]), A(a.ld[2]), A(k), A(ntok), A(rpg), A(c->x), A(c->wx), A(c->res),
                      A(res_out), A(c->scale), A(w0in), A(raw), A(eps), LOCAL((size_t)ntok * k),
                      LOCAL((size_t)ntok * k / 32 * 4), LOCAL((size_t)ntok * k / 16 * 4),
                            LOCAL(32 * sizeof(cl_float2)));
}

int ops_mmq8_fits(const ops *o, uint32_t type, uint32_t rows, uint32_t k, uint32_t ntok)
{
    if (!o->act_int8 || ntok < 5 || ntok > o->pol.mmq8_max_tok || type >= GGML_TYPE_COUNT || !o->act.q8x ||
        !(o->q8.mmq8[0][type] || o->q8.mmq8p[0][type]))
        return 0;
    if ((size_t)rows * k < o->pol.mmq8_min_elems) return 0;
    if (!o->q8.mmq8p[0][type] && ntok > o->pol.mmq8g_max_tok) return 0;
    return k % dev_type_of(type)->k_mmq8 == 0;
}

/* n products of one X (or gelu(X) * U) on mmq8: X rounded to int8 once (q8x_quant into o->act.xq /
 * o->act.xqs, tokens padded to ops_q8x_tpad), then one launch per matrix of OPS_MMQ8_ROWS rows and
 * 8 * NT tokens per group (past 64 tokens the grid's second dimension takes 64 each) */
int ops_mmq8(ops *o, const mm_out *outs, int n, cl_mem X, uint32_t ldx, const geglu_in *gg, uint32_t ntok)
{
    uint32_t k = outs[0].w->cols, tp = ops_q8x_tpad(ntok), geglu = gg ? gg->act : 0;
    uint32_t nt = tp <= 8 ? 0 : tp <= 16 ? 1 : tp <= 32 ? 2 : 3, tpb = 8u << nt, blocks = tp / tpb;
    uint32_t ldu = gg ? gg->ldu : 0, u_off = gg ? gg->u_off : 0;
    cl_mem U = gg ? gg->U : NULL; /* unread without geglu; NULL costs the launch less than a buffer */
    /* X as its producer (norm_fuse) left it, else quantized here; padded tokens' values only
     * reach their own (unstored) output columns */
    int given = !gg && ops_xq_holds(o, X, ldx, ntok, k);
    size_t qlws = 256, qgws = ((size_t)tp * k / 4 + qlws - 1) / qlws * qlws;
    if (!given && (ops_q8x_reserve(o, ntok, k) ||
                   OPS_LAUNCH(o, K_Q8X, o->act.q8x, 1, &qgws, &qlws, 4.0 * ntok * k * (geglu ? 2 : 1) + 1.25 * tp * k,
                              0, A(X), A(ldx), A(U), A(u_off), A(ldu), A(geglu), A(ntok), A(tp), A(k),
                              A(o->act.xq), A(o->act.xqs))))
        return -1;
    /* matrices of one type whose rows are whole groups go in one launch (Q/K/V, gate/up): fewer
     * kernel boundaries, and small ones (512-row K/V) no longer run alone on a few compute units */
    int together = n > 1;
    for (int i = 0; i < n; i++)
        together &= outs[i].w->type == outs[0].w->type && outs[i].w->rows % OPS_MMQ8_ROWS == 0 &&
                    !(nt == 0 && o->q8.mmq8s[outs[i].w->type]);
    for (int i = 0; i < n; i++) {
        const weight *w = outs[i].w;
        if (nt == 0 && o->q8.mmq8s[w->type] && w->row_bytes % 16 == 0) {
            /* up to 8 tokens: 16 rows per group of 4 warps, weights staged by cp.async (mma_q8.cl) */
            size_t lws = 128, gws = (size_t)(w->rows + 15) / 16 * lws;
            if (OPS_LAUNCH(o, K_MMQ8S, o->q8.mmq8s[w->type], 1, &gws, &lws,
                           (double)w->row_bytes * w->rows + 4.0 * ntok * w->rows, 2.0 * ntok * w->rows * k, A(w->buf),
                            A(w->row_bytes), A(w->rows), A(k), A(o->act.xq), A(o->act.xqs),
                           A(outs[i].y), A(outs[i].ldy), A(ntok)))
                return -1;
            continue;
        }
        multi_args a;
        if (ops_gather_multi(o, together ? outs : &outs[i], together ? n : 1, &a)) return -1;
        size_t tiles = (a.rows + OPS_MMQ8_ROWS - 1) / OPS_MMQ8_ROWS;
        size_t part_per_warp = 32 * (OPS_MMQ8_ROWS / 16) * tpb / 8 * 4 * sizeof(float);
        double bytes = a.bytes * blocks + (double)tiles * tp * k * 1.25 + 4.0 * ntok * a.rows;
        int ring = o->q8.mmq8p[nt][w->type] != NULL;
        /* each mmq8p warp's ring of stages (mma_q8.cl MQP_STAGE: 48 bytes a row, 80 a token), reused
         * for the partial tiles; both split k towards mmq8p's warp count (31B's q6_k on mmq8 at 16
         * and 64 tokens: 701 -> 737 and 1,291 -> 1,340 tok/s against mmq's 2,048) */
        uint32_t stages = o->pol.mmq8p_stages;
        size_t per_warp = ring ? (size_t)stages * (48 * OPS_MMQ8_ROWS + 80 * tpb) : part_per_warp;
        size_t target = o->pol.mmq8p_warps_target;
        /* mmq8r: 4 warps of 32 rows share one ring, as many stages as fit, k split across groups only */
        size_t r_stage = 48 * 4 * OPS_MMQ8_ROWS + 80 * tpb, r_stages = o->local_mem / r_stage;
        if (r_stages > stages) r_stages = stages;
        int shared = ring && o->q8.mmq8r[nt][w->type] && ntok >= o->pol.mmq8r_min_tok && r_stages >= 2;
        size_t wg = ring ? o->q8.mmq8p_wg[nt][w->type] : o->q8.mmq8_wg[nt][w->type];
        size_t ks = shared ? 1
                    : o->pol.mmq8_warps ? o->pol.mmq8_warps
                                        : ops_split_k_to(o, tiles * blocks, k / 32, wg, per_warp, 16, target);
        /* a product of few rows and long k (FFN down, attention output) whose groups cannot take more
         * warps (at 64 tokens a warp's ring fills the local memory) splits k across groups too: each
         * slice writes its partial Y, mmq8_sum adds them */
        uint32_t kg = 1, nu = k / 64;
        while (!together && kg < o->pol.mmq8_slices_max && tiles * blocks * ks * kg * 2 <= target &&
               nu / (ks * kg * 2) >= o->pol.mmq8_slice_units)
            kg *= 2;
        cl_mem Y0 = a.Y[0];
        uint32_t ld0 = a.ld[0];
        if (kg > 1) {
            if (ops_grow_buf(o, &o->q8.part[0], &o->q8.part_bytes[0], (size_t)kg * ntok * a.rows * sizeof(float))) return -1;
            Y0 = o->q8.part[0];
            ld0 = a.rows;
        }
        size_t lws[2] = { 32 * ks, 1 }, gws[2] = { tiles * lws[0], (size_t)blocks * kg };
        size_t part = ring ? ks * per_warp : ks > 1 ? ks * part_per_warp : sizeof(float);
        if (shared) {
            lws[0] = 128;
            gws[0] = (tiles + 3) / 4 * lws[0];
            stages = (uint32_t)r_stages;
            part = r_stages * r_stage;
        }
        int kind = shared ? K_MMQ8R : K_MMQ8P;
        cl_kernel kr = shared ? o->q8.mmq8r[nt][w->type] : o->q8.mmq8p[nt][w->type];
        int rc = ring ? OPS_LAUNCH(o, kind, kr, 2, gws, lws, bytes, 2.0 * ntok * a.rows * k,
                                   A(a.W[0]), A(a.rb[0]), A(a.nr[0]), A(Y0), A(ld0), A(a.W[1]), A(a.rb[1]),
                                   A(a.nr[1]), A(a.Y[1]), A(a.ld[1]), A(a.W[2]), A(a.rb[2]), A(a.nr[2]), A(a.Y[2]),
                                   A(a.ld[2]), A(k), A(o->act.xq), A(o->act.xqs), A(ntok), A(tp), A(kg), A(stages),
                                   LOCAL(part))
                      : OPS_LAUNCH(o, K_MMQ8, o->q8.mmq8[nt][w->type], 2, gws, lws, bytes, 2.0 * ntok * a.rows * k,
                                   A(a.W[0]), A(a.rb[0]), A(a.nr[0]), A(Y0), A(ld0), A(a.W[1]), A(a.rb[1]),
                                   A(a.nr[1]), A(a.Y[1]), A(a.ld[1]), A(a.W[2]), A(a.rb[2]), A(a.nr[2]), A(a.Y[2]),
                                   A(a.ld[2]), A(k), A(o->act.xq), A(o->act.xqs), A(ntok), A(tp), A(kg), LOCAL(part));
        if (rc) return -1;
        if (kg > 1) {
            uint32_t rows = (uint32_t)a.rows;
            size_t sl[2] = { 64, 1 }, sg[2] = { (rows + 63) / 64 * 64, ntok };
            if (OPS_LAUNCH(o, K_MMQ8_SUM, o->q8.mmq8_sum, 2, sg, sl, 4.0 * (kg + 1) * ntok * rows, 0, A(o->q8.part[0]),
                           A(kg), A(rows), A(ntok), A(a.Y[0]), A(a.ld[0])))
                return -1;
        }
        if (together) break;
    }
    return 0;
}
