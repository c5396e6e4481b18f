/* matmul.c — the weight products: one dispatcher (op_matmul) over a table of product families in
 * order of preference, the first whose fits() takes the product running it; the products of
 * several matrices sharing X, the GEGLU-input product, and the expert-grouped tensor-core
 * products that moe.c runs. Owns the float, f16 and dequantizing kernels; the int8 families are
 * matmul_q8.c's. */
#include "ops_int.h"

#include <clblast_c.h>
#include <stdio.h>

int ops_mm_init(ops *o, cl_runtime *rt, size_t scratch_elems, char *err, size_t errlen)
{
    ops_mm *m = &o->mm;
    for (uint32_t t = 0; t < GGML_TYPE_COUNT; t++) {
        uint32_t fam = dev_type_of(t)->families;
        if ((fam & DT_GEMV) && (ops_type_kernel(rt, &m->mv4[t], "mv4", t, err, errlen) ||
                                ops_type_kernel(rt, &m->mv16[t], "mv16", t, err, errlen) ||
                                ops_type_kernel(rt, &m->deq[t], "deq", t, err, errlen)))
            return -1;
        if (!rt->is_nvidia) continue;
        if (fam & DT_MMA_F16) {
            if (ops_type_kernel(rt, &m->mmqs[t], "mmqs", t, err, errlen) ||
                ops_type_kernel(rt, &m->mmql[t], "mmql", t, err, errlen) ||
                ops_type_kernel(rt, &m->mmqe_s[t], "mmqe_s", t, err, errlen) ||
                ops_type_kernel(rt, &m->mmqe_l[t], "mmqe_l", t, err, errlen))
                return -1;
            clGetKernelWorkGroupInfo(m->mmqs[t], rt->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof(size_t),
                                     &m->mmq_wg[0][t], NULL);
            clGetKernelWorkGroupInfo(m->mmql[t], rt->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof(size_t),
                                     &m->mmq_wg[1][t], NULL);
        }
        if ((fam & DT_TILES) && (ops_type_kernel(rt, &m->mmt[t], "mmt", t, err, errlen) ||
                                 ops_type_kernel(rt, &m->mmte[t], "mmte", t, err, errlen)))
            return -1;
        if ((fam & DT_DEQH) && ops_type_kernel(rt, &m->deqh[t], "deqh", t, err, errlen)) return -1;
    }
    if (!(m->mv_multi = rt_kernel(rt, "mv_multi", err, errlen)) || !(m->mv_any = rt_kernel(rt, "g4_mv_any", err,
    errlen)))
        return -1;
    if (m->mmt[GGML_TYPE_F32] && !(m->mmt_cvt = rt_kernel(rt, "mmt_cvt_x", err, errlen))) return -1;
    if (m->deqh[GGML_TYPE_F32] && (!(m->mmta = rt_kernel(rt, "mmta_f16", err, errlen)) ||
                                   !(m->mmt_cvt_glu = rt_kernel(rt, "mmt_cvt_glu", err, errlen))))
        return -1;
    if (m->mmta && rt->prog_sm90a &&
        (!(m->mmtw = rt_kernel(rt, "mmtw_f16", err, errlen)) || !(m->mmtwe = rt_kernel(rt, "mmtwe_f16", err, errlen)) ||
         !(m->mmt_cvt_xe = rt_kernel(rt, "mmt_cvt_xe", err, errlen))))
        return -1;
    m->scratch_elems = scratch_elems;
    if (scratch_elems && !(m->scratch = rt_alloc(rt, scratch_elems * sizeof(float), NULL, err, errlen))) return -1;
    return 0;
}

void ops_mm_release(ops *o)
{
    ops_mm *m = &o->mm;
    for (int t = 0; t < GGML_TYPE_COUNT; t++) {
        cl_kernel *ks[] = { &m->mv4[t], &m->mv16[t], &m->deq[t], &m->mmqs[t], &m->mmql[t], &m->mmqe_s[t],
                            &m->mmqe_l[t], &m->mmt[t], &m->mmte[t], &m->deqh[t] };
        for (size_t i = 0; i < sizeof ks / sizeof *ks; i++) ops_kernel_release(ks[i]);
    }
    cl_kernel *ks[] = { &m->mv_multi, &m->mv_any, &m->mmt_cvt, &m->mmta, &m->mmtw, &m->mmtwe, &m->mmt_cvt_xe,
                        &m->mmt_cvt_glu };
    for (size_t i = 0; i < sizeof ks / sizeof *ks; i++) ops_kernel_release(ks[i]);
    cl_mem *ms[] = { &m->scratch, &m->xh, &m->wh };
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) ops_mem_release(ms[i]);
}

int ops_mmt_fits(const ops *o, uint32_t type, uint32_t rows, uint32_t k, uint32_t ntok)
{
    if (type >= GGML_TYPE_COUNT || !o->has_mma || !o->mm.mmt[type] || ntok < 64 || k % 32) return 0;
    return (size_t)(rows + 127) / 128 * ((ntok + 127) / 128) >= o->pol.mmt_min_groups;
}

/* o->mm.xh grown for n rows of k as whole tiles of 128 (the last one's rows past n computed, not stored),
 * and the grid of the kernels that write them (mmt_tile_item: 8 rows a piece of 8 values), groups cl */
static int xh_tiles(ops *o, size_t n, uint32_t k, size_t cg[2], size_t cl[2])
{
    cl[0] = 64, cl[1] = 1;
    cg[0] = ((size_t)k + 63) / 64 * 64, cg[1] = (n + 7) / 8;
    return ops_grow_buf(o, &o->mm.xh, &o->mm.xh_bytes, (n + 127) / 128 * 128 * k * 2);
}

int ops_x_f16(ops *o, cl_mem X, uint32_t ldx, uint32_t n, uint32_t k, int tiled)
{
    size_t cl[2] = { 64, 1 }, cg[2] = { (k / 8 + 63) / 64 * 64, n };
    if (tiled ? xh_tiles(o, n, k, cg, cl) : ops_grow_buf(o, &o->mm.xh, &o->mm.xh_bytes, (size_t)n * k * 2)) return -1;
    uint32_t t = tiled != 0;
    return OPS_LAUNCH(o, K_MMT_CVT, o->mm.mmt_cvt, 2, cg, cl, 6.0 * n * k, 0, A(X), A(ldx), A(o->mm.xh), A(k), A(n),
                      A(t));
}

/* w's rows as f16 tiles in o->mm.wh (hbytes: whole tiles of 128 rows), for mmta, mmtw and mmtwe: items
 * of 8 rows x 2 steps x 2 chunk pairs a warp (deqh_T) */
static int ops_deqh(ops *o, const weight *w, size_t hbytes)
{
    uint32_t k = w->cols, rows = w->rows;
    if (ops_grow_buf(o, &o->mm.wh, &o->mm.wh_bytes, hbytes)) return -1;
    size_t dl[2] = { 32, 8 }, dg[2] = { ((size_t)k / 32 + 1) / 2 * 32, ((size_t)rows + 63) / 64 * 8 };
    return OPS_LAUNCH(o, K_DEQH, o->mm.deqh[w->type], 2, dg, dl, (double)w->row_bytes * rows + hbytes, 0, A(w->buf),
                      A(w->row_bytes), A(k), A(rows), A(o->mm.wh));
}

/* ---- the product families of op_matmul, each a fits() and a run() ------------------------- */

typedef int mm_fits_fn(const ops *o, const weight *w, uint32_t ntok);
typedef int mm_run_fn(ops *o, const weight *w, cl_mem X, uint32_t ldx, cl_mem Y, uint32_t ldy, uint32_t ntok);

/* f32/f16 rows of any length (not a multiple of 32): one item per (row, token) */
static int any_len_fits(const ops *o, const weight *w, uint32_t ntok)
{
    (void)o; (void)ntok;
    return w->cols % 32 != 0;
}

static int any_len_run(ops *o, const weight *w, cl_mem X, uint32_t ldx, cl_mem Y, uint32_t ldy, uint32_t ntok)
{
    if (w->rows == 0 || ntok == 0) return 0;
    return OPS_LAUNCH(o, K_MV_ANY, o->mm.mv_any, 2, ((size_t[2]){ w->rows, ntok }), NULL,
                      (double)w->row_bytes * w->rows, 2.0 * ntok * w->rows * w->cols, A(w->buf), A(w->type),
                      A(w->row_bytes), A(w->rows), A(w->cols), A(X), A(ldx), A(Y), A(ldy), A(ntok));
}

/* 17-256 tokens on f16 tensor cores, X shared by a group's warps (matmul_h.c) */
static int mmh_fits(const ops *o, const weight *w, uint32_t ntok)
{
    return ops_mmh_fits(o, w->type, w->rows, w->cols, ntok);
}

static int mmh_run(ops *o, const weight *w, cl_mem X, uint32_t ldx, cl_mem Y, uint32_t ldy, uint32_t ntok)
{
    mm_out m = { w, Y, ldy };
    return ops_mmh(o, &m, 1, X, ldx, NULL, ntok);
}

/* 5-256 tokens on the int8 tensor cores (matmul_q8.c) */
static int q8_mma_fits(const ops *o, const weight *w, uint32_t ntok)
{
    return ops_mmq8_fits(o, w->type, w->rows, w->cols, ntok);
}

static int q8_mma_run(ops *o, const weight *w, cl_mem X, uint32_t ldx, cl_mem Y, uint32_t ldy, uint32_t ntok)
{
    mm_out m = { w, Y, ldy };
    return ops_mmq8(o, &m, 1, X, ldx, NULL, ntok);
}

/* tensor cores, 128 x 128 tiles where the grid fills the GPU */
static int tiles_fits(const ops *o, const weight *w, uint32_t ntok)
{
    return o->has_mma && ntok > 4 && ops_mmt_fits(o, w->type, w->rows, w->cols, ntok);
}

/* deqh's f16 tiles of w's rows: 128 a tile, the last one's rows past the matrix computed, not stored */
static size_t tiles_hbytes(const weight *w) { return (size_t)(w->rows + 127) / 128 * 128 * w->cols * 2; }

/* 1 if w's tiles multiply f16 tiles of X (mmtw, mmta), which mmt_cvt_x or mmt_cvt_glu write; 0: mmt on X
 * rows */
static int tiles_f16(const ops *o, const weight *w)
{
    return o->mm.mmta && tiles_hbytes(w) <= OPS_WH_MAX && (w->type == GGML_TYPE_F16 || o->mm.deqh[w->type]);
}

/* the product on the f16 tiles of X already in o->mm.xh */
static int tiles_f16_run(ops *o, const weight *w, cl_mem Y, uint32_t ldy, uint32_t ntok)
{
    uint32_t k = w->cols, wtile = w->type != GGML_TYPE_F16;
    size_t lws[2] = { 256, 1 }, gws[2] = { (ntok + 127) / 128 * 256, (w->rows + 127) / 128 }, hbytes = tiles_hbytes(w);
    double flop = 2.0 * ntok * w->rows * k, bytes = hbytes + 2.0 * ntok * k * gws[1] + 4.0 * ntok * w->rows;
    /* f16 weights are read as the rows they are; the others made f16 tiles first */
    cl_mem wsrc = w->buf;
    if (wtile) {
        if (ops_deqh(o, w, hbytes)) return -1;
        wsrc = o->mm.wh;
        /* Hopper: wgmma on bulk-copied tiles */
        if (o->mm.mmtw && o->pol.wgmma)
            return OPS_LAUNCH(o, K_MMTW, o->mm.mmtw, 2, gws, lws, bytes, flop, A(wsrc), A(w->rows), A(k),
                              A(o->mm.xh), A(Y), A(ldy), A(ntok));
    }
    return OPS_LAUNCH(o, K_MMTA, o->mm.mmta, 2, gws, lws, bytes, flop, A(wsrc), A(w->rows), A(k), A(o->mm.xh), A(Y),
                      A(ldy), A(ntok), A(wtile));
}

static int tiles_run(ops *o, const weight *w, cl_mem X, uint32_t ldx, cl_mem Y, uint32_t ldy, uint32_t ntok)
{
    uint32_t k = w->cols;
    int f16 = tiles_f16(o, w);
    /* X once to f16 (tiles, or rows for mmt): the tiles stage half the bytes and convert nothing */
    if (ops_x_f16(o, X, ldx, ntok, k, f16)) return -1;
    if (f16) return tiles_f16_run(o, w, Y, ldy, ntok);
    size_t lws[2] = { 256, 1 }, gws[2] = { (ntok + 127) / 128 * 256, (w->rows + 127) / 128 };
    return OPS_LAUNCH(o, K_MMT, o->mm.mmt[w->type], 2, gws, lws,
                      (double)w->row_bytes * w->rows + 2.0 * ntok * k * gws[1] + 4.0 * ntok * w->rows,
                      2.0 * ntok * w->rows * k, A(w->buf), A(w->row_bytes), A(w->rows), A(k), A(o->mm.xh), A(Y),
                      A(ldy), A(ntok));
}

/* tensor cores: mmqs (16 tokens x 16 rows per warp) up to 16 tokens and mmql (64 x 32) above; the
 * warps of a group split k, as many as it takes to have ~2k warps in flight */
static int mma_fits(const ops *o, const weight *w, uint32_t ntok)
{
    (void)w;
    return o->has_mma && ntok > 4;
}

static int mma_run(ops *o, const weight *w, cl_mem X, uint32_t ldx, cl_mem Y, uint32_t ldy, uint32_t ntok)
{
    int small = ntok <= 16;
    uint32_t mt = small ? 1 : 4, nt = small ? 2 : 4;
    size_t rtiles = (w->rows + 8 * nt - 1) / (8 * nt), ttiles = (ntok + 16 * mt - 1) / (16 * mt);
    size_t part_per_warp = 32 * mt * nt * 4 * sizeof(float);
    size_t ks = ops_mmq_split_k(o, rtiles * ttiles, w->cols / 32, o->mm.mmq_wg[!small][w->type], part_per_warp, 16);
    size_t lws[2] = { 32 * ks, 1 }, gws[2] = { rtiles * lws[0], ttiles };
    size_t part = ks > 1 ? ks * part_per_warp : sizeof(float);
    double wreads = (double)gws[1], wbytes = (double)w->row_bytes * w->rows;
    return OPS_LAUNCH(o, K_MMQ, small ? o->mm.mmqs[w->type] : o->mm.mmql[w->type], 2, gws, lws,
                      wreads * wbytes + 4.0 * ntok * (w->cols + w->rows), 2.0 * ntok * w->rows * w->cols, A(w->buf),
                      A(w->row_bytes), A(w->rows), A(w->cols), A(X), A(ldx), A(Y), A(ldy), A(ntok), LOCAL(part));
}

/* 1-4 tokens on the int8 dot-product kernels (matmul_q8.c) */
static int q8_gemv_fits(const ops *o, const weight *w, uint32_t ntok)
{
    return ntok <= 4 && ops_mvq_fits(o, w->type, w->cols, ntok);
}

static int q8_gemv_run(ops *o, const weight *w, cl_mem X, uint32_t ldx, cl_mem Y, uint32_t ldy, uint32_t ntok)
{
    mm_out m = { w, Y, ldy };
    return ops_mvq(o, &m, 1, X, ldx, NULL, ntok);
}

/* decode products on float, any device: items per row about two 8-value units each, a power of
 * two within the group (at most a warp on NVIDIA, where the reduction is warp shuffles) */
static int gemv_fits(const ops *o, const weight *w, uint32_t ntok)
{
    (void)o; (void)w;
    return ntok <= OPS_MV_MAXT;
}

static int gemv_run(ops *o, const weight *w, cl_mem X, uint32_t ldx, cl_mem Y, uint32_t ldy, uint32_t ntok)
{
    uint32_t t = w->type;
    size_t gws, lws;
    uint32_t tpr;
    ops_mv_geometry(o, w->cols, w->rows, ntok <= 4 ? OPS_MV_R : 1, &gws, &lws, &tpr);
    return OPS_LAUNCH(o, K_MV, ntok <= 4 ? o->mm.mv4[t] : o->mm.mv16[t], 1, &gws, &lws,
                      (double)w->row_bytes * w->rows + 4.0 * ntok * (w->cols + w->rows),
                      2.0 * ntok * w->rows * w->cols, A(w->buf), A(w->row_bytes), A(w->rows), A(w->cols), A(X),
                      A(ldx), A(Y), A(ldy), A(ntok), A(tpr), LOCAL(lws * sizeof(float)));
}

/* prefill anywhere: dequantize a tile of rows into scratch, then Y[:, r0:r0+n] = X * tile^T */
static int gemm_fits(const ops *o, const weight *w, uint32_t ntok)
{
    (void)o; (void)w; (void)ntok;
    return 1;
}

static int gemm_run(ops *o, const weight *w, cl_mem X, uint32_t ldx, cl_mem Y, uint32_t ldy, uint32_t ntok)
{
    uint32_t t = w->type;
    double wbytes = (double)w->row_bytes * w->rows;
    uint32_t tile = (uint32_t)(o->mm.scratch_elems / w->cols);
    if (tile == 0) return ops_fail(o, "matmul: scratch too small for %u columns", w->cols);
    for (uint32_t r0 = 0; r0 < w->rows; r0 += tile) {
        uint32_t n = w->rows - r0 < tile ? w->rows - r0 : tile;
        size_t lws[2] = { 32, 1 }, gws[2] = { w->cols / 32, n };
        if (o->rt->is_cpu) lws[0] = 1;
        if (OPS_LAUNCH(o, K_DEQ, o->mm.deq[t], 2, gws, lws, wbytes * n / w->rows + 4.0 * n * w->cols, 0, A(w->buf),
                       A(w->row_bytes), A(r0), A(n), A(w->cols), A(o->mm.scratch)))
            return -1;
        cl_event ev = NULL;
        CLBlastStatusCode s = CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeYes,
                                           ntok, n, w->cols, 1.0f, X, 0, ldx, o->mm.scratch, 0, w->cols, 0.0f,
                                           Y, r0, ldy, &o->rt->q, o->rt->profiling ? &ev : NULL);
        if (s != CLBlastSuccess)
            return ops_fail(o, "CLBlast SGEMM %ux%ux%u failed: status %d", ntok, n, w->cols, (int)s);
        if (o->rt->profiling)
            ops_profile_event(o, K_GEMM, ev, 4.0 * ((double)ntok * w->cols + (double)n * w->cols + (double)ntok * n),
                              2.0 * ntok * n * w->cols);
    }
    return 0;
}

/* in order of preference: the first whose fits() takes the product runs it */
static const struct mm_family {
    const char *name;
    mm_fits_fn *fits;
    mm_run_fn *run;
} FAMILIES[] = {
    { "any length (mv_any)", any_len_fits, any_len_run },
    { "f16 tensor cores, X shared (mmh)", mmh_fits, mmh_run },
    { "int8 tensor cores (mmq8, mmq8s, mmq8p)", q8_mma_fits, q8_mma_run },
    { "f16 tiles (mmta, mmt)", tiles_fits, tiles_run },
    { "f16 tensor cores (mmqs, mmql)", mma_fits, mma_run },
    { "int8 dot products (mvqg, mvq)", q8_gemv_fits, q8_gemv_run },
    { "float decode (mv4, mv16)", gemv_fits, gemv_run },
    { "dequantized tiles + GEMM (deq, CLBlast)", gemm_fits, gemm_run },
};

int op_matmul(ops *o, const weight *w, cl_mem X, uint32_t ldx, cl_mem Y, uint32_t ldy, uint32_t ntok)
{
    if (o->failed) return -1;
    for (size_t i = 0; i < sizeof FAMILIES / sizeof *FAMILIES; i++)
        if (FAMILIES[i].fits(o, w, ntok)) return FAMILIES[i].run(o, w, X, ldx, Y, ldy, ntok);
    return ops_fail(o, "matmul: no product family takes %u x %u", w->rows, w->cols); /* gemm takes all */
}

int op_matmul_multi(ops *o, const mm_out *outs, int n, cl_mem X, uint32_t ldx, uint32_t ntok)
{
    int all8 = n >= 1, allh = n >= 1;
    uint32_t rows = 0;
    for (int i = 0; i < n; i++) rows += outs[i].w->rows;
    for (int i = 0; i < n; i++) allh &= ops_mmh_fits(o, outs[i].w->type, rows, outs[i].w->cols, ntok) &&
                                       outs[i].w->cols == outs[0].w->cols;
    if (allh) return ops_mmh(o, outs, n, X, ldx, NULL, ntok); /* X made f16 once for all */
    for (int i = 0; i < n; i++) all8 &= ops_mmq8_fits(o, outs[i].w->type, rows, outs[i].w->cols, ntok) &&
                                       outs[i].w->cols == outs[0].w->cols;
    if (all8) return ops_mmq8(o, outs, n, X, ldx, NULL, ntok); /* X quantized once for all */
    if (ntok > 4 || n > 3 || n < 1 || outs[0].w->cols % 32) {
        for (int i = 0; i < n; i++)
            if (op_matmul(o, outs[i].w, X, ldx, outs[i].y, outs[i].ldy, ntok)) return -1;
        return 0;
    }
    uint32_t k = outs[0].w->cols;
    /* the int8 products, one launch per run of one type (Q4_K_M's q6_k attn_v beside q4_k q and k), X
     * quantized once, not the float GEMV (mixed types there: 23% of 31B's B=1 kernel time on an H100) */
    int each = 1;
    for (int i = 0; i < n; i++) each &= outs[i].w->cols == k && ops_mvq_fits(o, outs[i].w->type, k, ntok);
    if (each) {
        for (int i = 0, j; i < n; i = j) {
            for (j = i + 1; j < n && outs[j].w->type == outs[i].w->type;) j++;
            if (ops_mvq(o, outs + i, j - i, X, ldx, NULL, ntok)) return -1;
        }
        return 0;
    }
    multi_args a;
    if (ops_gather_multi(o, outs, n, &a)) return -1;
    size_t gws, lws;
    uint32_t tpr;
    ops_mv_geometry(o, k, a.rows, OPS_MV_R, &gws, &lws, &tpr);
    return OPS_LAUNCH(o, K_MV_MULTI, o->mm.mv_multi, 1, &gws, &lws, a.bytes, 2.0 * ntok * a.rows * k, A(a.W[0]),
                      A(a.ty[0]), A(a.rb[0]), A(a.nr[0]), A(a.Y[0]), A(a.ld[0]), A(a.W[1]),
                      A(a.ty[1]), A(a.rb[1]), A(a.nr[1]), A(a.Y[1]), A(a.ld[1]), A(a.W[2]), A(a.ty[2]), A(a.rb[2]),
                      A(a.nr[2]), A(a.Y[2]), A(a.ld[2]), A(k), A(X), A(ldx), A(ntok), A(tpr),
                      LOCAL(lws * sizeof(float)));
}

int op_matmul_geglu(ops *o, const weight *w, cl_mem G, uint32_t ldg, cl_mem U, uint32_t u_off, uint32_t ldu, cl_mem Y,
                    uint32_t ldy, uint32_t ntok)
{
    return op_matmul_glu(o, OPS_ACT_GELU, w, G, ldg, U, u_off, ldu, Y, ldy, ntok);
}

int op_matmul_glu(ops *o, int act, const weight *w, cl_mem G, uint32_t ldg, cl_mem U, uint32_t u_off, uint32_t ldu,
                  cl_mem Y, uint32_t ldy, uint32_t ntok)
{
    geglu_in gg = { U, u_off, ldu, (uint32_t)act };
    mm_out m = { w, Y, ldy };
    uint32_t k = w->cols;
    if (ops_mmh_fits(o, w->type, w->rows, k, ntok)) return ops_mmh(o, &m, 1, G, ldg, &gg, ntok);
    if (ops_mmq8_fits(o, w->type, w->rows, k, ntok)) return ops_mmq8(o, &m, 1, G, ldg, &gg, ntok);
    if (ops_mvq_fits(o, w->type, k, ntok)) return ops_mvq(o, &m, 1, G, ldg, &gg, ntok);
    if (ldg != k) return ops_fail(o, "matmul_geglu: gate rows %u apart, not %u", ldg, k);
    if (act == OPS_ACT_SILU && (u_off || ldu != k))
        return ops_fail(o, "matmul_glu: SiLU takes U laid out as G (offset %u, rows %u apart)", u_off, ldu);
    if (u_off == 0 && ldu == k && k % 32 == 0 && tiles_fits(o, w, ntok) && tiles_f16(o, w)) {
        /* the activation written straight as the down product's f16 tiles: no f32 activation rows */
        size_t cl[2], cg[2];
        uint32_t a = (uint32_t)act;
        if (xh_tiles(o, ntok, k, cg, cl) ||
            OPS_LAUNCH(o, K_GLU_TILES, o->mm.mmt_cvt_glu, 2, cg, cl, 10.0 * ntok * k, 10.0 * ntok * k, A(G), A(U),
                       A(o->mm.xh), A(k), A(ntok), A(a)))
            return -1;
        return tiles_f16_run(o, w, Y, ldy, ntok);
    }
    if (act == OPS_ACT_SILU)
        op_swiglu(o, G, U, G, ntok * k);
    else if (u_off == 0 && ldu == k)
        op_geglu(o, G, U, G, ntok * k);
    else if (u_off % k == 0) /* a slice of wider U rows (Gemma 4's per-layer inputs) */
        ops_geglu_slice(o, G, U, k, ldu, u_off / k, ntok);
    else
        return ops_fail(o, "matmul_geglu: U offset %u is not a multiple of %u", u_off, k);
    return op_matmul(o, w, G, ldg, Y, ldy, ntok);
}

int ops_mmq_moe(ops *o, const weight *w, uint32_t rows_e, uint32_t n_exp, cl_mem X, uint32_t ldx, uint32_t xdiv,
               cl_mem Y, uint32_t ldy, cl_mem ord, uint32_t nsel, uint32_t tt, int kind)
{
    if (!o->has_mma || (tt != 16 && tt != 64) || w->cols % 32) return ops_fail(o, "mmq_moe: unsupported");
    int small = tt == 16;
    uint32_t nt = small ? 2 : 4;
    size_t rtiles = (rows_e + 8 * nt - 1) / (8 * nt), qmax = nsel / tt + n_exp;
    size_t part_per_warp = 32 * (small ? 1 : 4) * nt * 4 * sizeof(float);
    /* the tiles that exist are only known on the device: about nsel / tt */
    size_t ks = ops_mmq_split_k(o, rtiles * (nsel / tt + 1), w->cols / 32, o->mm.mmq_wg[!small][w->type],
    part_per_warp, 8);
    size_t lws[2] = { 32 * ks, 1 }, gws[2] = { rtiles * lws[0], qmax };
    size_t part = ks > 1 ? ks * part_per_warp : sizeof(float);
    return OPS_LAUNCH(o, kind, small ? o->mm.mmqe_s[w->type] : o->mm.mmqe_l[w->type], 2, gws, lws,
                      (double)w->row_bytes * rows_e * (nsel < n_exp ? nsel : n_exp) + 4.0 * nsel * (w->cols + rows_e),
                      2.0 * nsel * rows_e * w->cols, A(w->buf), A(w->row_bytes), A(rows_e),
                      A(w->cols), A(X), A(ldx), A(Y), A(ldy), A(ord), A(n_exp), A(xdiv), LOCAL(part));
}

int ops_mmt_moe(ops *o, const weight *w, uint32_t rows_e, uint32_t n_exp, cl_mem X, uint32_t ldx, uint32_t nx,
               uint32_t xdiv, cl_mem Y, uint32_t ldy, cl_mem ord, uint32_t nsel, int kind)
{
    if (w->type >= GGML_TYPE_COUNT || !o->mm.mmte[w->type] || w->cols % 32)
        return ops_fail(o, "mmt_moe: unsupported");
    uint32_t k = w->cols;
    /* the tiles that exist are only known on the device: at most nsel / 128 + one per expert */
    size_t lws[2] = { 256, 1 }, gws[2] = { ((size_t)nsel / OPS_MMTE_PAIRS + n_exp) * 256, (rows_e + 127) / 128 };
    size_t hbytes = (size_t)w->rows * k * 2, xrows = gws[0] / 256 * OPS_MMTE_PAIRS;
    /* Hopper: every expert's rows made f16 tiles (deqh), the pairs' X rows gathered into tiles, then
     * wgmma over both; an expert's rows must be whole tiles */
    if (o->mm.mmtwe && o->pol.wgmma && rows_e % 128 == 0 && o->mm.deqh[w->type] && hbytes <= OPS_WH_MAX) {
        size_t cl[2], cg[2];
        if (xh_tiles(o, xrows, k, cg, cl) ||
            OPS_LAUNCH(o, K_MMT_CVT, o->mm.mmt_cvt_xe, 2, cg, cl, 6.0 * nsel * k, 0, A(X), A(ldx), A(o->mm.xh), A(k),
                       A(ord), A(n_exp), A(xdiv)) ||
            ops_deqh(o, w, hbytes))
            return -1;
        return OPS_LAUNCH(o, kind, o->mm.mmtwe, 2, gws, lws, hbytes + 2.0 * xrows * k * gws[1] + 4.0 * nsel * rows_e,
                          2.0 * nsel * rows_e * k, A(o->mm.wh), A(rows_e), A(k), A(o->mm.xh), A(Y), A(ldy), A(ord),
                          A(n_exp));
    }
    if (ops_x_f16(o, X, ldx, nx, k, 0)) return -1;
    double wbytes = (double)w->row_bytes * rows_e * (nsel < n_exp ? nsel : n_exp);
    return OPS_LAUNCH(o, kind, o->mm.mmte[w->type], 2, gws, lws,
                      wbytes * (1.0 + (double)nsel / OPS_MMTE_PAIRS / n_exp) +
                      2.0 * nsel * k * gws[1] + 4.0 * nsel * rows_e, 2.0 * nsel * rows_e * k,
                      A(w->buf), A(w->row_bytes), A(rows_e), A(k), A(o->mm.xh), A(xdiv), A(Y), A(ldy), A(ord),
                        A(n_exp));
}
