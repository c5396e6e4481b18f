/* moe.c — mixture-of-experts ops: the router's top-k, the expert products (int8 decode kernels,
 * float per-pair kernels, or the pairs grouped by expert for matmul's tensor-core products) and
 * their GEGLU and weighted combination. */
#include "ops_int.h"

int ops_moe_init(ops *o, cl_runtime *rt, char *err, size_t errlen)
{
    ops_moe *g = &o->moe;
    struct { cl_kernel *k; const char *name; } ks[] = {
        { &g->router_topk, "g4_router_topk" }, { &g->moe_up, "g4_moe_up" }, { &g->geglu_split, "g4_geglu_split" },
        { &g->moe_down, "g4_moe_down" }, { &g->moe_up_mv, "g4_moe_up_mv" }, { &g->moe_down_mv, "g4_moe_down_mv" },
        { &g->moe_sort, "g4_moe_sort" }, { &g->moe_combine, "g4_moe_combine" },
    };
    for (size_t i = 0; i < sizeof ks / sizeof *ks; i++)
        if (!(*ks[i].k = rt_kernel(rt, ks[i].name, err, errlen))) return -1;
    if (rt->is_nvidia && !(g->router_topk_w = rt_kernel(rt, "g4_router_topk_w", err, errlen))) return -1;
    for (uint32_t t = 0; rt->is_nvidia && t < GGML_TYPE_COUNT; t++)
        if (dev_type_has(t, DT_GEMV_Q8) && ops_type_kernel(rt, &g->mvqe[t], "mvqe", t, err, errlen)) return -1;
    return 0;
}

void ops_moe_release(ops *o)
{
    ops_moe *g = &o->moe;
    cl_kernel *ks[] = { &g->router_topk, &g->router_topk_w, &g->moe_up, &g->geglu_split, &g->moe_down,
                        &g->moe_up_mv, &g->moe_down_mv, &g->moe_sort, &g->moe_combine };
    for (size_t i = 0; i < sizeof ks / sizeof *ks; i++) ops_kernel_release(ks[i]);
    for (int t = 0; t < GGML_TYPE_COUNT; t++) ops_kernel_release(&g->mvqe[t]);
}

/* a 2-D launch without a fixed work-group size through the shared (profiled) launcher; empty grids
 * enqueue nothing */
#define LAUNCH_2D(kind, k, g0, g1, bytes, flop, ...)                                                    \
    ((g0) == 0 || (g1) == 0 ? 0                                                                                \
                            : OPS_LAUNCH(o, kind, k, 2, ((size_t[2]){ (g0), (g1) }), NULL, bytes, flop, __VA_ARGS__))

int op_router_topk(ops *o, cl_mem z, uint32_t n_exp, uint32_t n_used, cl_mem exp_scale, cl_mem sel,
                   cl_mem wsel, uint32_t ntok)
{
    const ops_moe *g = &o->moe;
    if (n_exp > 256 || n_used == 0 || n_used > n_exp) return ops_fail(o, "router: %u of %u experts unsupported",
    n_used, n_exp);
    if (g->router_topk_w && n_used <= 32) {
        size_t l1 = 32, g1 = (size_t)ntok * 32;
        return OPS_LAUNCH(o, K_ROUTER, g->router_topk_w, 1, &g1, &l1, 4.0 * ntok * (n_exp + 2 * n_used),
                          4.0 * ntok * n_exp, A(z), A(n_exp), A(n_used), A(exp_scale), A(sel), A(wsel),
                          A(ntok));
    }
    size_t lws = 32;
    while (lws < n_exp) lws *= 2;
    size_t gws = (size_t)ntok * lws;
    return ntok == 0 ? 0
                     : OPS_LAUNCH(o, K_ROUTER, g->router_topk, 1, &gws, &lws, 4.0 * ntok * n_exp, 0, A(z), A(n_exp),
                     A(n_used), A(exp_scale), A(sel), A(wsel), A(ntok),
                                  KLOCAL(lws * sizeof(float)), KLOCAL(lws * sizeof(int)));
}

/* decode layout (mv-style segments of OPS_MV_R rows) for vrows virtual rows of k columns */
static int moe_mv_geometry(const ops *o, uint32_t k, uint32_t rows_e, size_t vrows, size_t *gws, size_t *lws,
                           uint32_t *tpr)
{
    if (rows_e % OPS_MV_R || k % 32) return 0;
    ops_mv_geometry(o, k, vrows, OPS_MV_R, gws, lws, tpr);
    return 1;
}

size_t ops_moe_ord_ints(uint32_t n_exp,
uint32_t nsel) { return n_exp + 2 + nsel + 2 * ((size_t)nsel / 16 + n_exp + 1); }

/* pairs per expert tile: 128 for the 128 x 128 tiles (mmte, built for every type the tiles take)
 * when experts average half a tile or more (prefill), 64 when they see several mmqe tiles' worth,
 * else 16. The up and down products of a layer share one sort. */
static uint32_t moe_tile(const ops *o, uint32_t n_exp, uint32_t nsel)
{
    if (nsel >= 64 * n_exp && o->mm.mmte[GGML_TYPE_F32]) return OPS_MMTE_PAIRS;
    return nsel > 4 * n_exp ? 64 : 16;
}

static int moe_grouped(const ops *o, const weight *w,
uint32_t ntok) { return o->has_mma && ntok > 4 && w->cols % 32 == 0; }

/* The int8 decode expert products (mvqe_T) take ngg slot groups of nj slots each: rows per group
 * divide rows_e (a group quantizes only its slots' X rows), as many as keep ~2 groups per compute
 * unit. 0 when the shape or type does not fit. */
static uint32_t mvqe_rpg(const ops *o, const weight *w, uint32_t rows_e, uint32_t nj, uint32_t ngg)
{
    const ops_moe *g = &o->moe;
    uint32_t k = w->cols;
    size_t local = (size_t)nj * (k + k / 32 * 4 + k / 16 * 4);
    if (!o->act_int8 || !g->mvqe[w->type] || k % dev_type_of(w->type)->k_gemv_q8 || rows_e % 16 ||
        local + 1024 > o->local_mem)
        return 0;
    uint32_t rpg = 16;
    for (uint32_t c = 64; c > 16; c /= 2)
        if (rows_e % c == 0 && (size_t)ngg * rows_e / c >= 2 * (size_t)o->n_cu) { rpg = c; break; }
    return rpg;
}

static int mvqe(ops *o, const weight *w, uint32_t rows_e, uint32_t rpg, cl_mem X, uint32_t ldx,
                uint32_t xdiv, uint32_t geglu, cl_mem sel, cl_mem wsel, uint32_t nj, uint32_t ngg, cl_mem Y, int kind)
{
    const ops_moe *g = &o->moe;
    uint32_t k = w->cols, use_w = wsel != NULL;
    size_t lws = 256, gws = (size_t)ngg * rows_e / rpg * lws, nsel = (size_t)ngg * nj;
    return OPS_LAUNCH(o, kind, g->mvqe[w->type], 1, &gws, &lws,
                      (double)nsel * rows_e * w->row_bytes + 4.0 * nsel * k * (geglu ? 2 : 1),
                      2.0 * nsel * rows_e * k, A(w->buf), A(w->row_bytes), A(rows_e), A(k), A(X),
                      A(ldx), A(xdiv), A(geglu), A(sel), A(wsel), A(use_w), A(nj), A(Y), A(rpg),
                      KLOCAL((size_t)nj * k), KLOCAL((size_t)nj * k / 32 * 4), KLOCAL((size_t)nj * k / 16 * 4));
}

int op_moe_up(ops *o, const weight *w, uint32_t rows_e, cl_mem X, uint32_t ldx, cl_mem sel,
              uint32_t n_used, cl_mem gu, cl_mem ord, uint32_t ntok)
{
    const ops_moe *g = &o->moe;
    if (moe_grouped(o, w, ntok)) {
        uint32_t n_exp = w->rows / rows_e, nsel = ntok * n_used, tt = moe_tile(o, n_exp, nsel);
        size_t lws = o->rt->is_cpu ? 16 : 256, gws = lws;
        if (OPS_LAUNCH(o, K_MOE_SORT, g->moe_sort, 1, &gws, &lws, 8.0 * nsel, 0, A(sel), A(nsel),
                       A(n_exp), A(tt), A(ord), KLOCAL(n_exp * sizeof(int)), KLOCAL(n_exp * sizeof(int))))
            return -1;
        if (tt == OPS_MMTE_PAIRS)
            return ops_mmt_moe(o, w, rows_e, n_exp, X, ldx, ntok, n_used, gu, rows_e, ord, nsel, K_MOE_UP);
        return ops_mmq_moe(o, w, rows_e, n_exp, X, ldx, n_used, gu, rows_e, ord, nsel, tt, K_MOE_UP);
    }
    uint32_t nsel = ntok * n_used, tpr, rpg = ntok <= 4 ? mvqe_rpg(o, w, rows_e, 1, nsel) : 0;
    if (rpg)
        return mvqe(o, w, rows_e, rpg, X, ldx, n_used, 0, sel, NULL, 1, nsel, gu, K_MOE_UP);
    size_t gws, lws;
    if (ntok <= 4 && moe_mv_geometry(o, w->cols, rows_e, (size_t)nsel * rows_e, &gws, &lws, &tpr))
        return OPS_LAUNCH(o, K_MOE_UP, g->moe_up_mv, 1, &gws, &lws, (double)nsel * rows_e * w->row_bytes,
                          2.0 * nsel * rows_e * w->cols, A(w->buf), A(w->type), A(w->row_bytes),
                          A(rows_e), A(w->cols), A(X), A(ldx), A(sel), A(n_used), A(gu), A(nsel), A(tpr),
                          KLOCAL(lws * sizeof(float)));
    return LAUNCH_2D(K_MOE_UP, g->moe_up, rows_e, nsel, (double)nsel * rows_e * w->row_bytes,
                     2.0 * nsel * rows_e * w->cols, A(w->buf), A(w->type), A(w->row_bytes), A(rows_e), A(w->cols),
                     A(X), A(ldx), A(sel), A(n_used), A(gu), A(nsel));
}

int op_geglu_split(ops *o, cl_mem gu, uint32_t f, cl_mem act, uint32_t nsel)
{
    return op_glu_split(o, OPS_ACT_GELU, gu, f, act, nsel);
}

int op_glu_split(ops *o, int fn, cl_mem gu, uint32_t f, cl_mem act, uint32_t nsel)
{
    const ops_moe *g = &o->moe;
    uint32_t a = (uint32_t)fn;
    return LAUNCH_2D(K_GEGLU_SPLIT, g->geglu_split, f, nsel, 12.0 * f * nsel, 10.0 * f * nsel, A(gu), A(f),
                     A(act), A(nsel), A(a));
}

int op_moe_down(ops *o, const weight *w, uint32_t rows_e, cl_mem gu, cl_mem act, cl_mem sel,
                cl_mem wsel, uint32_t n_used, cl_mem Y, cl_mem ord, cl_mem yd, uint32_t ntok)
{
    return op_moe_down_glu(o, OPS_ACT_GELU, w, rows_e, gu, act, sel, wsel, n_used, Y, ord, yd, ntok);
}

int op_moe_down_glu(ops *o, int fn, const weight *w, uint32_t rows_e, cl_mem gu, cl_mem act, cl_mem sel,
                    cl_mem wsel, uint32_t n_used, cl_mem Y, cl_mem ord, cl_mem yd, uint32_t ntok)
{
    const ops_moe *g = &o->moe;
    uint32_t rpg = ntok <= 4 ? mvqe_rpg(o, w, rows_e, n_used, ntok) : 0;
    if (rpg) /* the activation folded into the quantization of each pair's X */
        return mvqe(o, w, rows_e, rpg, gu, 2 * w->cols, 1, (uint32_t)fn, sel, wsel, n_used, ntok, Y, K_MOE_DOWN);
    if (op_glu_split(o, fn, gu, w->cols, act, ntok * n_used)) return -1;
    if (moe_grouped(o, w, ntok)) {
        uint32_t n_exp = w->rows / rows_e, nsel = ntok * n_used, tt = moe_tile(o, n_exp, nsel);
        if (tt == OPS_MMTE_PAIRS ? ops_mmt_moe(o, w, rows_e, n_exp, act, w->cols, nsel, 1, yd, rows_e, ord, nsel,
                                              K_MOE_DOWN)
                                 : ops_mmq_moe(o, w, rows_e, n_exp, act, w->cols, 1, yd, rows_e, ord, nsel, tt,
                                              K_MOE_DOWN))
            return -1;
        return LAUNCH_2D(K_MOE_COMBINE, g->moe_combine, rows_e, ntok, 4.0 * (nsel + ntok) * rows_e,
                         2.0 * nsel * rows_e, A(yd), A(wsel), A(n_used), A(rows_e), A(Y), A(ntok));
    }
    double nsel = (double)ntok * n_used;
    uint32_t tpr;
    size_t gws, lws;
    if (ntok <= 4 && moe_mv_geometry(o, w->cols, rows_e, (size_t)ntok * rows_e, &gws, &lws, &tpr))
        return OPS_LAUNCH(o, K_MOE_DOWN, g->moe_down_mv, 1, &gws, &lws, nsel * rows_e * w->row_bytes,
                          2.0 * nsel * rows_e * w->cols, A(w->buf), A(w->type), A(w->row_bytes),
                          A(rows_e), A(w->cols), A(act), A(sel), A(wsel), A(n_used), A(Y), A(ntok), A(tpr),
                          KLOCAL(lws * sizeof(float)));
    return LAUNCH_2D(K_MOE_DOWN, g->moe_down, rows_e, ntok, nsel * rows_e * w->row_bytes,
                     2.0 * nsel * rows_e * w->cols, A(w->buf), A(w->type), A(w->row_bytes), A(rows_e), A(w->cols),
                     A(act), A(sel), A(wsel), A(n_used), A(Y), A(ntok));
}
