/* ops.c — see ops.h */
#include "ops.h"
#include "errf.h"
#include "ops_int.h"
#include "ops_gemma4.h"

#include <clblast_c.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static const char *const kernel_names[K_COUNT] = {
    [K_NORM_ROPE] = "norm_rope", [K_ATTN_PARTIAL] = "attn_partial",
    [K_GEGLU] = "geglu", [K_GATHER_ROWS] = "gather_rows",
    [K_QKV_ROPE] = "qkv_rope", [K_MV_MULTI] = "mv_multi", [K_NORM_FUSE] = "norm_fuse", [K_ADD_ROWS] = "add_rows",
    [K_SCALE_ROWS] = "scale_rows", [K_SOFTCAP] = "softcap", [K_ARGMAX] = "argmax",
    [K_MV] = "mv (dequant-GEMV)", [K_DEQ] = "deq (dequant tile)", [K_EMB] = "emb (embedding)", [K_MMQ] = "mmq (tensor cores)",
    [K_GEMM] = "gemm (CLBlast)", [K_G4_MV_ANY] = "g4_mv_any", [K_G4_ROUTER] = "g4_router_topk",
    [K_G4_MOE_UP] = "g4_moe_up", [K_G4_GEGLU_SPLIT] = "g4_geglu_split", [K_G4_MOE_DOWN] = "g4_moe_down",
    [K_G4_PLE_GATE] = "g4_ple_gate", [K_G4_MOE_SORT] = "g4_moe_sort", [K_G4_MOE_COMBINE] = "g4_moe_combine",
    [K_MVQ] = "mvq (int8 dot GEMV)",
    [K_MMT] = "mmt (tiled tensor cores)", [K_MMT_CVT] = "mmt_cvt_x (X to f16)",
    [K_MMQ8] = "mmq8 (int8 tensor cores)", [K_Q8X] = "q8x_quant (X to int8)", [K_ATTN_DEC] = "attn_dec",
    [K_MVQG] = "mvqg (int8 dot GEMV, X given)", [K_MVQ_XQ] = "mvq_xq (X to int8)",
    [K_MMTA] = "mmta (tiles, cp.async)", [K_DEQH] = "deqh (weights to f16)",
    [K_ATTN_FA] = "attn_fa (tensor cores, cp.async)",
    [K_MMQ8S] = "mmq8s (int8 tensor cores, cp.async)",
    [K_MMQ8P] = "mmq8p (int8 tensor cores, per-warp cp.async)",
};

const char *ops_kernel_name(int k) { return k >= 0 && k < K_COUNT ? kernel_names[k] : "?"; }

int ops_type_supported(uint32_t type) { return dev_type_of(type)->suffix != NULL; }

int ops_type_kernel(cl_runtime *rt, cl_kernel *k, const char *family, uint32_t type, char *err, size_t errlen)
{
    char name[64];
    snprintf(name, sizeof name, "%s_%s", family, dev_type_of(type)->suffix);
    return (*k = rt_kernel(rt, name, err, errlen)) ? 0 : -1;
}

int ops_init(ops *o, cl_runtime *rt, size_t scratch_elems, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    o->rt = rt;
    for (int i = 0; i < K_MV; i++) {
        if (i == K_ARGMAX) continue; /* two kernels: argmax_part, argmax_final */
        o->k[i] = rt_kernel(rt, kernel_names[i], err, errlen);
        if (!o->k[i]) return -1;
    }
    for (uint32_t t = 0; t < GGML_TYPE_COUNT; t++) {
        uint32_t fam = dev_type_of(t)->families;
        if ((fam & DT_GEMV) && (ops_type_kernel(rt, &o->mv4[t], "mv4", t, err, errlen) ||
                                ops_type_kernel(rt, &o->mv16[t], "mv16", t, err, errlen) ||
                                ops_type_kernel(rt, &o->deq[t], "deq", t, err, errlen) ||
                                ops_type_kernel(rt, &o->emb[t], "emb", t, err, errlen)))
            return -1;
        if (!rt->is_nvidia) continue;
        if (fam & DT_MMA_F16) {
            if (ops_type_kernel(rt, &o->mmqs[t], "mmqs", t, err, errlen) ||
                ops_type_kernel(rt, &o->mmql[t], "mmql", t, err, errlen) ||
                ops_type_kernel(rt, &o->mmqe_s[t], "mmqe_s", t, err, errlen) ||
                ops_type_kernel(rt, &o->mmqe_l[t], "mmqe_l", t, err, errlen))
                return -1;
            clGetKernelWorkGroupInfo(o->mmqs[t], rt->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof(size_t),
                                     &o->mmq_wg[0][t], NULL);
            clGetKernelWorkGroupInfo(o->mmql[t], rt->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof(size_t),
                                     &o->mmq_wg[1][t], NULL);
        }
        if ((fam & DT_TILES) && (ops_type_kernel(rt, &o->mmt[t], "mmt", t, err, errlen) ||
                                 ops_type_kernel(rt, &o->mmte[t], "mmte", t, err, errlen)))
            return -1;
        if ((fam & DT_DEQH) && ops_type_kernel(rt, &o->deqh[t], "deqh", t, err, errlen)) return -1;
    }
    o->has_mma = rt->is_nvidia;
    o->act_int8 = 1;
    ops_policy_defaults(&o->pol, rt);
    if (o->mmt[GGML_TYPE_F32] && !(o->mmt_cvt = rt_kernel(rt, "mmt_cvt_x", err, errlen))) return -1;
    if (o->deqh[GGML_TYPE_F32] && !(o->mmta = rt_kernel(rt, "mmta_f16", err, errlen))) return -1;
    if (ops_int8_init(o, rt, err, errlen) || ops_g4_init(&o->g4, rt, err, errlen)) return -1;
    if (rt->is_nvidia && !(o->qkv_rope_w = rt_kernel(rt, "qkv_rope_w", err, errlen))) return -1;
    for (int i = 0; o->mmt_cvt && i < 3; i++) {
        char name[32];
        snprintf(name, sizeof name, "attn_fa_%d", 128 << i);
        if (!(o->fa[i] = rt_kernel(rt, name, err, errlen))) return -1;
    }
    if (rt->is_nvidia &&
        (!(o->attn_dec[0] = rt_kernel(rt, "attn_dec_8", err, errlen)) ||
         !(o->attn_dec[1] = rt_kernel(rt, "attn_dec_16", err, errlen)) ||
         !(o->attn_decq[0] = rt_kernel(rt, "attn_decq_8", err, errlen)) ||
         !(o->attn_decq[1] = rt_kernel(rt, "attn_decq_16", err, errlen))))
        return -1;
    if (!(o->argmax_part = rt_kernel(rt, "argmax_part", err, errlen))) return -1;
    if (!(o->argmax_final = rt_kernel(rt, "argmax_final", err, errlen))) return -1;
    if (!(o->am_val = rt_alloc(rt, 256 * 256 * sizeof(float), NULL, err, errlen))) return -1;
    if (!(o->am_idx = rt_alloc(rt, 256 * 256 * sizeof(int), NULL, err, errlen))) return -1;
    cl_uint cu = 1;
    clGetDeviceInfo(rt->device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
    o->n_cu = cu;
    cl_ulong lm = 16384;
    clGetDeviceInfo(rt->device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof lm, &lm, NULL);
    o->local_mem = (size_t)lm;
    /* CPU devices run a work-group as a loop; small groups avoid barrier overhead there */
    o->wg = rt->is_cpu ? 16 : 256;
    if (o->wg > rt->max_wg) o->wg = rt->max_wg;
    size_t kwg = 0;
    if (clGetKernelWorkGroupInfo(o->k[K_NORM_FUSE], rt->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg, &kwg, NULL) !=
            CL_SUCCESS || kwg > rt->max_wg)
        kwg = rt->max_wg;
    for (o->norm_wg_max = 64; o->norm_wg_max * 2 <= kwg && o->norm_wg_max < 1024;) o->norm_wg_max *= 2;
    o->scratch_elems = scratch_elems;
    if (scratch_elems) {
        o->scratch = rt_alloc(rt, scratch_elems * sizeof(float), NULL, err, errlen);
        if (!o->scratch) return -1;
    }
    return 0;
}

void ops_destroy(ops *o)
{
    for (int i = 0; i < K_GEMM; i++)
        if (o->k[i]) clReleaseKernel(o->k[i]);
    for (int t = 0; t < GGML_TYPE_COUNT; t++) {
        if (o->mv4[t]) clReleaseKernel(o->mv4[t]);
        if (o->mv16[t]) clReleaseKernel(o->mv16[t]);
        if (o->deq[t]) clReleaseKernel(o->deq[t]);
        if (o->emb[t]) clReleaseKernel(o->emb[t]);
        if (o->mmqs[t]) clReleaseKernel(o->mmqs[t]);
        if (o->mmql[t]) clReleaseKernel(o->mmql[t]);
        if (o->mmqe_s[t]) clReleaseKernel(o->mmqe_s[t]);
        if (o->mmqe_l[t]) clReleaseKernel(o->mmqe_l[t]);
        if (o->mvq[t]) clReleaseKernel(o->mvq[t]);
        if (o->mvqg[t]) clReleaseKernel(o->mvqg[t]);
        if (o->mvqn[t]) clReleaseKernel(o->mvqn[t]);
        if (o->mmt[t]) clReleaseKernel(o->mmt[t]);
        if (o->mmte[t]) clReleaseKernel(o->mmte[t]);
        if (o->deqh[t]) clReleaseKernel(o->deqh[t]);
        if (o->mmq8s[t]) clReleaseKernel(o->mmq8s[t]);
        for (int nt = 0; nt < 2; nt++) {
            if (o->mmq8[nt][t]) clReleaseKernel(o->mmq8[nt][t]);
            if (o->mmq8p[nt][t]) clReleaseKernel(o->mmq8p[nt][t]);
        }
    }
    if (o->q8x) clReleaseKernel(o->q8x);
    if (o->mvq_xq) clReleaseKernel(o->mvq_xq);
    for (int i = 0; i < 2; i++)
        if (o->attn_dec[i]) clReleaseKernel(o->attn_dec[i]);
    for (int i = 0; i < 2; i++)
        if (o->attn_decq[i]) clReleaseKernel(o->attn_decq[i]);
    for (int i = 0; i < 3; i++)
        if (o->fa[i]) clReleaseKernel(o->fa[i]);
    if (o->xq) clReleaseMemObject(o->xq);
    if (o->xqs) clReleaseMemObject(o->xqs);
    if (o->mmt_cvt) clReleaseKernel(o->mmt_cvt);
    if (o->xh) clReleaseMemObject(o->xh);
    if (o->mmta) clReleaseKernel(o->mmta);
    if (o->wh) clReleaseMemObject(o->wh);
    if (o->qkv_rope_w) clReleaseKernel(o->qkv_rope_w);
    if (o->argmax_part) clReleaseKernel(o->argmax_part);
    if (o->argmax_final) clReleaseKernel(o->argmax_final);
    if (o->am_val) clReleaseMemObject(o->am_val);
    if (o->am_idx) clReleaseMemObject(o->am_idx);
    if (o->scratch) clReleaseMemObject(o->scratch);
    ops_g4_destroy(&o->g4);
    memset(o, 0, sizeof *o);
}

static void prof_event(ops *o, int kind, cl_event ev, double bytes, double flop)
{
    if (!ev) return;
    clWaitForEvents(1, &ev);
    cl_ulong a = 0, b = 0;
    clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof a, &a, NULL);
    clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof b, &b, NULL);
    o->prof_ms[kind] += (double)(b - a) * 1e-6;
    o->prof_n[kind]++;
    o->prof_bytes[kind] += bytes;
    o->prof_flop[kind] += flop;
    clReleaseEvent(ev);
}

int ops_fail(ops *o, const char *fmt, ...)
{
    if (o->failed) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->err, sizeof o->err, fmt, ap);
    va_end(ap);
    o->failed = 1;
    return -1;
}

int ops_status(const ops *o, char *err, size_t errlen)
{
    if (!o->failed) return 0;
    if (errlen) snprintf(err, errlen, "%s", o->err);
    return -1;
}

void ops_clear(ops *o)
{
    o->failed = 0;
    o->err[0] = 0;
}

int ops_launch_args(ops *o, int kind, cl_kernel k, int dims, const size_t *gws, const size_t *lws, double bytes,
                    double flop, const karg *args, size_t nargs)
{
    if (o->failed) return -1;
    for (size_t i = 0; i < nargs; i++) {
        cl_int e = clSetKernelArg(k, (cl_uint)i, args[i].size, args[i].ptr);
        if (e != CL_SUCCESS) return ops_fail(o, "%s: argument %zu: %s", kernel_names[kind], i, rt_errstr(e));
    }
    size_t g[3];
    for (int i = 0; i < dims; i++) g[i] = lws ? (gws[i] + lws[i] - 1) / lws[i] * lws[i] : gws[i];
    if (kind != K_MVQG && kind != K_MMQ8 && kind != K_MMQ8S && kind != K_MMQ8P) o->xq_of = NULL; /* xq may be rewritten, or X itself */
    cl_event ev = NULL;
    cl_int e = clEnqueueNDRangeKernel(o->rt->q, k, (cl_uint)dims, NULL, g, lws, 0, NULL,
                                      o->rt->profiling ? &ev : NULL);
    if (e != CL_SUCCESS) return ops_fail(o, "%s: launch failed: %s", kernel_names[kind], rt_errstr(e));
    if (o->rt->profiling) prof_event(o, kind, ev, bytes, flop);
    return 0;
}

void ops_mv_geometry(const ops *o, uint32_t k, size_t rows, uint32_t rows_per_seg, size_t *gws, size_t *lws,
                     uint32_t *tpr)
{
    uint32_t nu = k / 8;
    size_t wg = o->pol.mv_wg < o->rt->max_wg ? o->pol.mv_wg : o->rt->max_wg;
    uint32_t cap = o->pol.mv_tpr < wg ? o->pol.mv_tpr : (uint32_t)wg;
    *tpr = 1;
    while (*tpr < cap && *tpr * 2 < nu + 1) *tpr *= 2;
    *lws = wg;
    size_t per = *lws / *tpr * rows_per_seg;
    *gws = (rows + per - 1) / per * *lws;
}

/* warps per group for the mmq kernels (they split k): doubled while fewer than pol.mmq_warps_target
 * (ops_split_k_to: target) warps would be in flight, each keeps two passes over k, and the group
 * fits the kernel's register-limited size and local memory (part_per_warp bytes of partial tiles
 * or ring each) */
size_t ops_mmq_split_k(const ops *o, size_t tiles, uint32_t nsb, size_t max_wg, size_t part_per_warp, size_t ks_max)
{
    return ops_split_k_to(o, tiles, nsb, max_wg, part_per_warp, ks_max, o->pol.mmq_warps_target);
}

size_t ops_split_k_to(const ops *o, size_t tiles, uint32_t nsb, size_t max_wg, size_t part_per_warp, size_t ks_max,
                      size_t target)
{
    size_t ks = 1;
    while (ks < ks_max && tiles * ks < target && nsb / (ks * 2) >= 2 && 64 * ks <= max_wg &&
           2 * ks * part_per_warp <= o->local_mem - 1024)
        ks *= 2;
    return ks;
}

int ops_grow_buf(ops *o, cl_mem *b, size_t *have, size_t need)
{
    if (o->failed) return -1;
    if (need <= *have) return 0;
    if (*b) clReleaseMemObject(*b);
    *have = 0;
    char why[200];
    if (!(*b = rt_alloc(o->rt, need, NULL, why, sizeof why))) return ops_fail(o, "%s", why);
    *have = need;
    return 0;
}

int ops_mmt_fits(const ops *o, uint32_t type, uint32_t rows, uint32_t k, uint32_t ntok)
{
    if (type >= GGML_TYPE_COUNT || !o->has_mma || !o->mmt[type] || ntok < 64 || k % 32) return 0;
    return (size_t)(rows + 127) / 128 * ((ntok + 127) / 128) >= o->pol.mmt_min_groups;
}

/* X (n rows of k) to f16 rows in o->xh for the tiles */
static int mmt_xh(ops *o, cl_mem X, uint32_t ldx, uint32_t n, uint32_t k)
{
    if (ops_grow_buf(o, &o->xh, &o->xh_bytes, (size_t)n * k * 2)) return -1;
    size_t cl[2] = { 64, 1 }, cg[2] = { (k / 8 + 63) / 64 * 64, n };
    uint32_t row0 = 0;
    return OPS_LAUNCH(o, K_MMT_CVT, o->mmt_cvt, 2, cg, cl, 6.0 * n * k, 0, A(X), A(ldx), A(o->xh),
                      A(k), A(row0));
}

/* tensor cores: the 128 x 128 tiles where the grid fills the GPU, else mmqs (16 tokens x 16 rows
 * per warp) up to 16 tokens and mmql (64 x 32) above; the warps of a group split k, as many as it
 * takes to have ~2k warps in flight */
static int mmq(ops *o, const weight *w, cl_mem X, uint32_t ldx, cl_mem Y, uint32_t ldy, uint32_t ntok)
{
    if (ops_mmt_fits(o, w->type, w->rows, w->cols, ntok)) {
        /* X once to f16 rows: the tiles stage half the bytes and convert nothing */
        uint32_t k = w->cols;
        if (mmt_xh(o, X, ldx, ntok, k)) return -1;
        size_t lws[2] = { 256, 1 }, gws[2] = { (ntok + 127) / 128 * 256, (w->rows + 127) / 128 };
        double flop = 2.0 * ntok * w->rows * k;
        size_t hbytes = (size_t)w->rows * k * 2;
        if (o->mmta && hbytes <= OPS_WH_MAX && (w->type == GGML_TYPE_F16 || o->deqh[w->type])) {
            /* weights made f16 rows too, then both operands staged by cp.async (docs/PERF.md 11) */
            cl_mem wsrc = w->buf;
            if (w->type != GGML_TYPE_F16) {
                if (ops_grow_buf(o, &o->wh, &o->wh_bytes, hbytes)) return -1;
                size_t dl[2] = { 64, 1 }, dg[2] = { (k / 8 + 63) / 64 * 64, w->rows };
                if (OPS_LAUNCH(o, K_DEQH, o->deqh[w->type], 2, dg, dl, (double)w->row_bytes * w->rows + hbytes, 0, A(w->buf), A(w->row_bytes), A(k), A(o->wh)))
                    return -1;
                wsrc = o->wh;
            }
            return OPS_LAUNCH(o, K_MMTA, o->mmta, 2, gws, lws, hbytes + 2.0 * ntok * k * gws[1] + 4.0 * ntok * w->rows,
                              flop, A(wsrc), A(w->rows), A(k), A(o->xh), A(Y), A(ldy), A(ntok));
        }
        return OPS_LAUNCH(o, K_MMT, o->mmt[w->type], 2, gws, lws,
                          (double)w->row_bytes * w->rows + 2.0 * ntok * k * gws[1] + 4.0 * ntok * w->rows, flop, A(w->buf), A(w->row_bytes), A(w->rows), A(k), A(o->xh), A(Y), A(ldy),
                          A(ntok));
    }
    int small = ntok <= 16;
    uint32_t mt = small ? 1 : 4, nt = small ? 2 : 4;
    size_t rtiles = (w->rows + 8 * nt - 1) / (8 * nt), ttiles = (ntok + 16 * mt - 1) / (16 * mt);
    size_t part_per_warp = 32 * mt * nt * 4 * sizeof(float);
    size_t ks = ops_mmq_split_k(o, rtiles * ttiles, w->cols / 32, o->mmq_wg[!small][w->type], part_per_warp, 16);
    size_t lws[2] = { 32 * ks, 1 }, gws[2] = { rtiles * lws[0], ttiles };
    size_t part = ks > 1 ? ks * part_per_warp : sizeof(float);
    double wreads = (double)gws[1], wbytes = (double)w->row_bytes * w->rows;
    return OPS_LAUNCH(o, K_MMQ, small ? o->mmqs[w->type] : o->mmql[w->type], 2, gws, lws,
                      wreads * wbytes + 4.0 * ntok * (w->cols + w->rows), 2.0 * ntok * w->rows * w->cols, A(w->buf), A(w->row_bytes), A(w->rows), A(w->cols), A(X), A(ldx), A(Y), A(ldy), A(ntok),
                      LOCAL(part));
}

int op_mmq_moe(ops *o, const weight *w, uint32_t rows_e, uint32_t n_exp, cl_mem X, uint32_t ldx, uint32_t xdiv,
               cl_mem Y, uint32_t ldy, cl_mem ord, uint32_t nsel, uint32_t tt, int kind)
{
    if (!o->has_mma || (tt != 16 && tt != 64) || w->cols % 32) return ops_fail(o, "mmq_moe: unsupported");
    int small = tt == 16;
    uint32_t nt = small ? 2 : 4;
    size_t rtiles = (rows_e + 8 * nt - 1) / (8 * nt), qmax = nsel / tt + n_exp;
    size_t part_per_warp = 32 * (small ? 1 : 4) * nt * 4 * sizeof(float);
    /* the tiles that exist are only known on the device: about nsel / tt */
    size_t ks = ops_mmq_split_k(o, rtiles * (nsel / tt + 1), w->cols / 32, o->mmq_wg[!small][w->type], part_per_warp, 8);
    size_t lws[2] = { 32 * ks, 1 }, gws[2] = { rtiles * lws[0], qmax };
    size_t part = ks > 1 ? ks * part_per_warp : sizeof(float);
    return OPS_LAUNCH(o, kind, small ? o->mmqe_s[w->type] : o->mmqe_l[w->type], 2, gws, lws,
                      (double)w->row_bytes * rows_e * (nsel < n_exp ? nsel : n_exp) + 4.0 * nsel * (w->cols + rows_e),
                      2.0 * nsel * rows_e * w->cols, A(w->buf), A(w->row_bytes), A(rows_e),
                      A(w->cols), A(X), A(ldx), A(Y), A(ldy), A(ord), A(n_exp), A(xdiv), LOCAL(part));
}

int op_mmt_moe(ops *o, const weight *w, uint32_t rows_e, uint32_t n_exp, cl_mem X, uint32_t ldx, uint32_t nx,
               uint32_t xdiv, cl_mem Y, uint32_t ldy, cl_mem ord, uint32_t nsel, int kind)
{
    if (w->type >= GGML_TYPE_COUNT || !o->mmte[w->type] || w->cols % 32)
        return ops_fail(o, "mmt_moe: unsupported");
    uint32_t k = w->cols;
    if (mmt_xh(o, X, ldx, nx, k)) return -1;
    /* the tiles that exist are only known on the device: at most nsel / 128 + one per expert */
    size_t lws[2] = { 256, 1 }, gws[2] = { ((size_t)nsel / OPS_MMTE_PAIRS + n_exp) * 256, (rows_e + 127) / 128 };
    double wbytes = (double)w->row_bytes * rows_e * (nsel < n_exp ? nsel : n_exp);
    return OPS_LAUNCH(o, kind, o->mmte[w->type], 2, gws, lws, wbytes * (1.0 + (double)nsel / OPS_MMTE_PAIRS / n_exp) +
                      2.0 * nsel * k * gws[1] + 4.0 * nsel * rows_e, 2.0 * nsel * rows_e * k,
                      A(w->buf), A(w->row_bytes), A(rows_e), A(k), A(o->xh), A(xdiv), A(Y), A(ldy), A(ord), A(n_exp));
}

int ops_gather_multi(ops *o, const mm_out *outs, int n, multi_args *a)
{
    memset(a, 0, sizeof *a);
    uint32_t k = outs[0].w->cols;
    for (int i = 0; i < 3; i++) {
        const mm_out *m = &outs[i < n ? i : 0];
        if (m->w->cols != k) return ops_fail(o, "mv_multi: matrices differ in columns (%u vs %u)", m->w->cols, k);
        a->W[i] = m->w->buf; a->Y[i] = m->y;
        if (i < n) {
            a->ty[i] = m->w->type; a->rb[i] = m->w->row_bytes; a->nr[i] = m->w->rows; a->ld[i] = m->ldy;
            a->rows += a->nr[i];
            a->bytes += (double)a->rb[i] * a->nr[i];
        }
    }
    return 0;
}

int op_matmul(ops *o, const weight *w, cl_mem X, uint32_t ldx, cl_mem Y, uint32_t ldy, uint32_t ntok)
{
    uint32_t t = w->type;
    double wbytes = (double)w->row_bytes * w->rows;
    mm_out m = { w, Y, ldy };
    if (w->cols % 32) /* f32/f16 rows of any length: one item per (row, token) */
        return w->rows == 0 || ntok == 0
                   ? 0
                   : OPS_LAUNCH(o, K_G4_MV_ANY, o->g4.mv_any, 2, ((size_t[2]){ w->rows, ntok }), NULL, wbytes,
                                2.0 * ntok * w->rows * w->cols, A(w->buf), A(w->type), A(w->row_bytes), A(w->rows),
                                A(w->cols), A(X), A(ldx), A(Y), A(ldy), A(ntok));
    if (ops_mmq8_fits(o, t, w->rows, w->cols, ntok)) return ops_mmq8(o, &m, 1, X, ldx, NULL, ntok);
    if (o->has_mma && ntok > 4) return mmq(o, w, X, ldx, Y, ldy, ntok);
    if (ntok <= 4 && ops_mvq_fits(o, t, w->cols, ntok)) return ops_mvq(o, &m, 1, X, ldx, NULL, ntok);
    if (ntok <= OPS_MV_MAXT) {
        /* items per row: about two 8-value units each, a power of two within the group (at most
         * a warp on NVIDIA, where the reduction is warp shuffles) */
        size_t gws, lws;
        uint32_t tpr;
        ops_mv_geometry(o, w->cols, w->rows, ntok <= 4 ? OPS_MV_R : 1, &gws, &lws, &tpr);
        return OPS_LAUNCH(o, K_MV, ntok <= 4 ? o->mv4[t] : o->mv16[t], 1, &gws, &lws,
                      wbytes + 4.0 * ntok * (w->cols + w->rows), 2.0 * ntok * w->rows * w->cols,
                      A(w->buf), A(w->row_bytes), A(w->rows), A(w->cols), A(X), A(ldx), A(Y), A(ldy), A(ntok), A(tpr),
                      LOCAL(lws * sizeof(float)));
    }
    /* prefill: dequantize a tile of rows into scratch, then Y[:, r0:r0+n] = X * tile^T */
    uint32_t tile = (uint32_t)(o->scratch_elems / w->cols);
    if (tile == 0) return ops_fail(o, "matmul: scratch too small for %u columns", w->cols);
    for (uint32_t r0 = 0; r0 < w->rows; r0 += tile) {
        uint32_t n = w->rows - r0 < tile ? w->rows - r0 : tile;
        size_t lws[2] = { 32, 1 }, gws[2] = { w->cols / 32, n };
        if (o->rt->is_cpu) lws[0] = 1;
        if (OPS_LAUNCH(o, K_DEQ, o->deq[t], 2, gws, lws, wbytes * n / w->rows + 4.0 * n * w->cols, 0, A(w->buf), A(w->row_bytes), A(r0), A(n), A(w->cols), A(o->scratch)))
            return -1;
        cl_event ev = NULL;
        CLBlastStatusCode s = CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeYes,
                                           ntok, n, w->cols, 1.0f, X, 0, ldx, o->scratch, 0, w->cols, 0.0f,
                                           Y, r0, ldy, &o->rt->q, o->rt->profiling ? &ev : NULL);
        if (s != CLBlastSuccess)
            return ops_fail(o, "CLBlast SGEMM %ux%ux%u failed: status %d", ntok, n, w->cols, (int)s);
        if (o->rt->profiling)
            prof_event(o, K_GEMM, ev, 4.0 * ((double)ntok * w->cols + (double)n * w->cols + (double)ntok * n),
                       2.0 * ntok * n * w->cols);
    }
    return 0;
}

int op_embed(ops *o, const weight *w, cl_mem ids, uint32_t ntok, float scale, cl_mem out)
{
    size_t gws[2] = { w->cols / 32, ntok };
    return OPS_LAUNCH(o, K_EMB, o->emb[w->type], 2, gws, NULL, (double)ntok * (w->row_bytes + 4.0 * w->cols), 0, A(w->buf), A(w->row_bytes), A(w->cols), A(ids), A(ntok), A(scale), A(out));
}

/* one group per row; for a few rows (decode) a group as wide as the row needs (~2 float4 per item),
 * so each pass is one or two loads per item instead of a loop of dependent ones */
static size_t norm_lws(const ops *o, uint32_t rows, uint32_t n)
{
    if (o->rt->is_cpu || rows >= 2 * o->n_cu) return o->wg;
    size_t lws = 64;
    while (lws < n / 8 && lws * 2 <= o->norm_wg_max) lws *= 2;
    return lws;
}

int op_norm_chain(ops *o, const norm_chain *c, uint32_t rows, uint32_t n, float eps)
{
    if (n % 4) return ops_fail(o, "norm: rows of %u values (the norm kernels take multiples of 4)", n);
    if (c->nout < 0 || c->nout > 3 || (!c->wx && (c->x2 || c->wt)) || (c->x2 && !c->wx2) || (!c->res && c->nout == 0))
        return ops_fail(o, "norm chain: unsupported arguments (n = %u, %d outputs)", n, c->nout);
    uint32_t flags = (c->wx ? 0 : 1) | (c->x2 ? 2 : 0) | (c->wt ? 4 : 0) | (c->res ? 8 : 0);
    cl_mem x = c->x, dflt = c->x; /* unused buffer arguments point at x */
#define OR_X(m) ((m) ? (m) : dflt)
    cl_mem wx = OR_X(c->wx), x2 = OR_X(c->x2), wx2 = OR_X(c->wx2), wt = OR_X(c->wt), res = OR_X(c->res);
    cl_mem w[3], y[3];
    for (int j = 0; j < 3; j++) {
        w[j] = j < c->nout ? c->out[j].w : dflt;
        y[j] = j < c->nout ? c->out[j].y : dflt;
    }
#undef OR_X
    uint32_t nout = (uint32_t)c->nout;
    float scale = c->res ? c->scale : 1.0f;
    size_t lws = norm_lws(o, rows, n), gws = (size_t)rows * lws;
    /* a decode-sized y_0 that mvqg will take (its products are sized by the same k) leaves its
     * int8 form in xq / xqs too: no quantization launch before those products */
    int q8 = nout > 0 && lws % 32 == 0 && ops_mvqg_takes_x(o, n, rows);
    /* the same for 5-16 rows in mmq8's layout (its q8x_quant launch saved) */
    int q8x = !q8 && nout > 0 && lws % 32 == 0 && ops_q8x_takes_x(o, n, rows);
    uint32_t tpad = rows <= 8 ? 8 : 16;
    if ((q8 && ops_xq_reserve(o, rows, n)) || (q8x && ops_q8x_reserve(o, rows, n)))
        return -1;
    cl_mem xq = q8 || q8x ? o->xq : x, xqs = q8 || q8x ? o->xqs : x;
    flags |= q8 ? 16 : q8x ? 32 : 0;
    double streams = 1 + (c->wx ? 1 : 0) + (c->x2 ? 2 : 0) + (c->wt ? 1 : 0) + (c->res ? 2 : 0) + 2.0 * nout;
    if (OPS_LAUNCH(o, K_NORM_FUSE, o->k[K_NORM_FUSE], 1, &gws, &lws, 4.0 * streams * rows * n,
                   (4.0 + 3.0 * nout) * rows * n, A(x), A(wx), A(x2), A(wx2), A(wt), A(res),
                   A(scale), A(w[0]), A(y[0]), A(w[1]), A(y[1]), A(w[2]), A(y[2]), A(nout), A(flags), A(n),
                   A(eps), A(xq), A(xqs), A(tpad), LOCAL(lws * sizeof(cl_float2))))
        return -1;
    if (q8 || q8x) ops_xq_given(o, y[0], rows, n);
    return 0;
}

/* the norms below are norm chains: float4 rows only (both loaders ask for multiples of 32) */
int op_rmsnorm(ops *o, cl_mem x, cl_mem w, cl_mem y, uint32_t rows, uint32_t n, float eps)
{
    norm_chain c = { .x = x, .out = { { w, y } }, .nout = 1 };
    return op_norm_chain(o, &c, rows, n, eps);
}

int op_rmsnorm_add(ops *o, cl_mem x, cl_mem w, cl_mem res, uint32_t rows, uint32_t n, float eps)
{
    norm_chain c = { .x = x, .wx = w, .res = res, .scale = 1.0f };
    return op_norm_chain(o, &c, rows, n, eps);
}

int op_rmsnorm_add_norm(ops *o, cl_mem x, cl_mem w1, cl_mem res, cl_mem w2, cl_mem y, uint32_t rows, uint32_t n,
                        float eps)
{
    norm_chain c = { .x = x, .wx = w1, .res = res, .scale = 1.0f, .out = { { w2, y } }, .nout = 1 };
    return op_norm_chain(o, &c, rows, n, eps);
}

int op_matmul_multi(ops *o, const mm_out *outs, int n, cl_mem X, uint32_t ldx, uint32_t ntok)
{
    int all8 = n >= 1;
    uint32_t rows = 0;
    for (int i = 0; i < n; i++) rows += outs[i].w->rows;
    for (int i = 0; i < n; i++) all8 &= ops_mmq8_fits(o, outs[i].w->type, rows, outs[i].w->cols, ntok) &&
                                       outs[i].w->cols == outs[0].w->cols;
    if (all8) return ops_mmq8(o, outs, n, X, ldx, NULL, ntok); /* X quantized once for all */
    if (ntok > 4 || n > 3 || n < 1 || outs[0].w->cols % 32) {
        for (int i = 0; i < n; i++)
            if (op_matmul(o, outs[i].w, X, ldx, outs[i].y, outs[i].ldy, ntok)) return -1;
        return 0;
    }
    uint32_t k = outs[0].w->cols;
    int same = 1;
    for (int i = 1; i < n; i++) same &= outs[i].w->type == outs[0].w->type && outs[i].w->cols == k;
    if (same && ops_mvq_fits(o, outs[0].w->type, k, ntok)) return ops_mvq(o, outs, n, X, ldx, NULL, ntok);
    multi_args a;
    if (ops_gather_multi(o, outs, n, &a)) return -1;
    size_t gws, lws;
    uint32_t tpr;
    ops_mv_geometry(o, k, a.rows, OPS_MV_R, &gws, &lws, &tpr);
    return OPS_LAUNCH(o, K_MV_MULTI, o->k[K_MV_MULTI], 1, &gws, &lws, a.bytes, 2.0 * ntok * a.rows * k, A(a.W[0]), A(a.ty[0]), A(a.rb[0]), A(a.nr[0]), A(a.Y[0]), A(a.ld[0]), A(a.W[1]),
                      A(a.ty[1]), A(a.rb[1]), A(a.nr[1]), A(a.Y[1]), A(a.ld[1]), A(a.W[2]), A(a.ty[2]), A(a.rb[2]),
                      A(a.nr[2]), A(a.Y[2]), A(a.ld[2]), A(k), A(X), A(ldx), A(ntok), A(tpr),
                      LOCAL(lws * sizeof(float)));
}

int op_matmul_geglu(ops *o, const weight *w, cl_mem G, uint32_t ldg, cl_mem U, uint32_t u_off, uint32_t ldu, cl_mem Y,
                    uint32_t ldy, uint32_t ntok)
{
    geglu_in gg = { U, u_off, ldu };
    mm_out m = { w, Y, ldy };
    uint32_t k = w->cols;
    if (ops_mmq8_fits(o, w->type, w->rows, k, ntok)) return ops_mmq8(o, &m, 1, G, ldg, &gg, ntok);
    if (ops_mvq_fits(o, w->type, k, ntok)) return ops_mvq(o, &m, 1, G, ldg, &gg, ntok);
    if (ldg != k) return ops_fail(o, "matmul_geglu: gate rows %u apart, not %u", ldg, k);
    if (u_off == 0 && ldu == k) {
        op_geglu(o, G, U, G, ntok * k);
    } else if (u_off % k == 0) { /* a slice of wider U rows (Gemma 4's per-layer inputs) */
        uint32_t il = u_off / k;
        if (k && ntok &&
            OPS_LAUNCH(o, K_G4_PLE_GATE, o->g4.ple_gate, 2, ((size_t[2]){ k, ntok }), NULL, 12.0 * k * ntok,
                       10.0 * k * ntok, A(G), A(U), A(k), A(ldu), A(il), A(ntok)))
            return -1;
    } else {
        return ops_fail(o, "matmul_geglu: U offset %u is not a multiple of %u", u_off, k);
    }
    return op_matmul(o, w, G, ldg, Y, ldy, ntok);
}

int op_qkv_rope(ops *o, cl_mem Q, cl_mem K, cl_mem V, uint32_t ntok, uint32_t nh, uint32_t nkv, uint32_t hd,
                cl_mem qw, cl_mem kw, int qk_norm, int v_norm, float eps, cl_mem freq, uint32_t rot,
                cl_mem tok_pos, cl_mem tok_seq, const kv_view *kc, const kv_view *vc)
{
    size_t lws = o->wg, gws = (size_t)ntok * (nh + 2 * nkv) * lws;
    cl_mem qwb = qw ? qw : Q, kwb = kw ? kw : Q;
    if (qk_norm == 1 && (!qw || !kw)) return ops_fail(o, "qkv_rope: norm mode 1 needs Q and K weights");
    size_t rows = (size_t)ntok * (nh + 2 * nkv);
    if (o->qkv_rope_w && rows >= o->pol.qkv_rope_w_min_rows && hd % 32 == 0 && hd <= 512 && rot % 64 == 0 &&
        rot <= hd) {
        /* a warp per head row where there are enough rows: no barriers, and a sincos per pair */
        size_t wl = 256, wg = ((size_t)ntok * (nh + 2 * nkv) * 32 + wl - 1) / wl * wl;
        return OPS_LAUNCH(o, K_QKV_ROPE, o->qkv_rope_w, 1, &wg, &wl, 8.0 * ntok * (nh + 2 * nkv) * hd,
                          8.0 * ntok * (nh + nkv) * hd, A(Q), A(K), A(V), A(nh), A(nkv), A(hd),
                          A(qwb), A(kwb), A(qk_norm), A(v_norm), A(eps), A(freq), A(rot), A(tok_pos), A(tok_seq),
                          A(kc->cache), A(vc->cache), A(kc->block_table), A(kc->max_blocks), A(kc->block_size),
                          A(ntok));
    }
    return OPS_LAUNCH(o, K_QKV_ROPE, o->k[K_QKV_ROPE], 1, &gws, &lws, 8.0 * ntok * (nh + 2 * nkv) * hd,
                  8.0 * ntok * (nh + nkv) * hd, A(Q), A(K), A(V), A(nh), A(nkv), A(hd), A(qwb),
                  A(kwb), A(qk_norm), A(v_norm), A(eps), A(freq), A(rot), A(tok_pos), A(tok_seq), A(kc->cache),
                  A(vc->cache), A(kc->block_table), A(kc->max_blocks), A(kc->block_size), A(ntok),
                  LOCAL(hd * sizeof(float)), LOCAL(lws * sizeof(float)));
}

int op_norm_rope(ops *o, cl_mem x, uint32_t ntok, uint32_t nh, uint32_t hd, cl_mem w, int norm, float eps,
                 cl_mem freq, uint32_t rot, cl_mem tok_pos, cl_mem tok_seq, const kv_view *kv)
{
    size_t lws = o->wg, gws = (size_t)ntok * nh * lws;
    int has_w = w != NULL;
    cl_mem wb = w ? w : x; /* any valid buffer when unused */
    int to_cache = kv != NULL;
    cl_mem cache = kv ? kv->cache : x, bt = kv ? kv->block_table : tok_pos;
    uint32_t mb = kv ? kv->max_blocks : 1, bs = kv ? kv->block_size : 1;
    return OPS_LAUNCH(o, K_NORM_ROPE, o->k[K_NORM_ROPE], 1, &gws, &lws, (to_cache ? 6.0 : 8.0) * ntok * nh * hd,
                  8.0 * ntok * nh * hd, A(x), A(nh), A(hd), A(wb), A(norm), A(has_w), A(eps),
                  A(freq), A(rot), A(tok_pos), A(tok_seq), A(to_cache), A(cache), A(bt), A(mb), A(bs),
                  LOCAL(hd * sizeof(float)), LOCAL(lws * sizeof(float)));
}

static size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

int op_geglu(ops *o, cl_mem g, cl_mem u, cl_mem out, uint32_t n)
{
    size_t lws = 64, gws = round_up(n, lws);
    return OPS_LAUNCH(o, K_GEGLU, o->k[K_GEGLU], 1, &gws, &lws, 12.0 * n, 10.0 * n, A(g), A(u), A(out),
                  A(n));
}

int op_gather_rows(ops *o, cl_mem src, cl_mem idx, cl_mem dst, uint32_t rows, uint32_t n)
{
    size_t lws[2] = { 64, 1 }, gws[2] = { round_up(n, 64), rows };
    return OPS_LAUNCH(o, K_GATHER_ROWS, o->k[K_GATHER_ROWS], 2, gws, lws, 8.0 * rows * n, 0, A(src),
                  A(idx), A(dst), A(n));
}

int op_add(ops *o, cl_mem x, cl_mem y, uint32_t n)
{
    size_t lws = 64, gws = round_up(n, lws);
    return OPS_LAUNCH(o, K_ADD_ROWS, o->k[K_ADD_ROWS], 1, &gws, &lws, 12.0 * n, n, A(x), A(y), A(n));
}

int op_scale(ops *o, cl_mem x, float s, uint32_t n)
{
    size_t lws = 64, gws = round_up(n, lws);
    return OPS_LAUNCH(o, K_SCALE_ROWS, o->k[K_SCALE_ROWS], 1, &gws, &lws, 8.0 * n, n, A(x), A(s), A(n));
}

int op_softcap(ops *o, cl_mem x, float cap, uint32_t n)
{
    size_t lws = 64, gws = round_up(n, lws);
    return OPS_LAUNCH(o, K_SOFTCAP, o->k[K_SOFTCAP], 1, &gws, &lws, 8.0 * n, 3.0 * n, A(x), A(cap),
                  A(n));
}

int op_argmax(ops *o, cl_mem x, uint32_t rows, uint32_t n, cl_mem out)
{
    if (rows > 256) return ops_fail(o, "argmax: %u rows exceed 256", rows);
    size_t lws = o->rt->is_cpu ? 16 : 256;
    /* enough parts to cover the device, each a few thousand values */
    uint32_t parts = o->rt->is_cpu ? 4 : 128;
    if (parts > (n + lws - 1) / lws) parts = (uint32_t)((n + lws - 1) / lws);
    uint32_t slice = (n + parts - 1) / parts;
    size_t gws[2] = { parts * lws, rows }, l2[2] = { lws, 1 };
    if (OPS_LAUNCH(o, K_ARGMAX, o->argmax_part, 2, gws, l2, 4.0 * rows * n, 0, A(x), A(n), A(slice),
               A(o->am_val), A(o->am_idx), LOCAL(lws * sizeof(float)), LOCAL(lws * sizeof(int))))
        return -1;
    size_t lf = 64, gf = rows * lf;
    return OPS_LAUNCH(o, K_ARGMAX, o->argmax_final, 1, &gf, &lf, 8.0 * rows * parts, 0, A(o->am_val),
                  A(o->am_idx), A(parts), A(out), LOCAL(lf * sizeof(float)), LOCAL(lf * sizeof(int)));
}

void ops_profile_reset(ops *o)
{
    memset(o->prof_ms, 0, sizeof o->prof_ms);
    memset(o->prof_n, 0, sizeof o->prof_n);
    memset(o->prof_bytes, 0, sizeof o->prof_bytes);
    memset(o->prof_flop, 0, sizeof o->prof_flop);
}

void ops_profile_print(const ops *o, double wall_ms, int steps)
{
    double total = 0;
    long launches = 0;
    for (int i = 0; i < K_COUNT; i++) { total += o->prof_ms[i]; launches += o->prof_n[i]; }
    fprintf(stderr, "%-20s %9s %7s %8s %10s %10s %10s\n", "kernel", "ms", "share", "launches", "GB/s", "TFLOP/s",
            "us/launch");
    for (int i = 0; i < K_COUNT; i++) {
        if (!o->prof_n[i]) continue;
        double s = o->prof_ms[i] * 1e-3;
        fprintf(stderr, "%-20s %9.3f %6.1f%% %8ld %10.1f %10.3f %10.1f\n", kernel_names[i], o->prof_ms[i],
                total > 0 ? 100.0 * o->prof_ms[i] / total : 0.0, o->prof_n[i], s > 0 ? o->prof_bytes[i] / s / 1e9 : 0,
                s > 0 ? o->prof_flop[i] / s / 1e12 : 0, 1e3 * o->prof_ms[i] / o->prof_n[i]);
    }
    fprintf(stderr, "kernel time %.3f ms, wall %.3f ms over %d steps: %ld launches (%.1f per step); "
                    "time outside kernels (launch overhead, host) %.1f%%\n",
            total, wall_ms, steps, launches, steps ? (double)launches / steps : 0.0,
            wall_ms > 0 ? 100.0 * (wall_ms - total) / wall_ms : 0.0);
}
