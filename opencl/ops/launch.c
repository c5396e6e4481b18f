/* launch.c — the ops context: create/destroy (each family's pair in turn), the sticky error,
 * the one launcher (arguments, enqueue; profile.c times it), and the helpers every family shares. */
#include "ops_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const kernel_names[K_COUNT] = {
    [K_NORM_ROPE] = "norm_rope", [K_ATTN_PARTIAL] = "attn_partial",
    [K_GEGLU] = "geglu", [K_GATHER_ROWS] = "gather_rows",
    [K_QKV_ROPE] = "qkv_rope", [K_MV_MULTI] = "mv_multi", [K_NORM_FUSE] = "norm_fuse", [K_ADD_ROWS] = "add_rows",
    [K_SCALE_ROWS] = "scale_rows", [K_SOFTCAP] = "softcap", [K_ARGMAX] = "argmax",
    [K_MV] = "mv (dequant-GEMV)", [K_DEQ] = "deq (dequant tile)", [K_EMB] = "emb (embedding)",
    [K_MMQ] = "mmq (tensor cores)",
    [K_GEMM] = "gemm (CLBlast)", [K_MV_ANY] = "g4_mv_any", [K_ROUTER] = "g4_router_topk",
    [K_MOE_UP] = "g4_moe_up", [K_GEGLU_SPLIT] = "g4_geglu_split", [K_MOE_DOWN] = "g4_moe_down",
    [K_PLE_GATE] = "g4_ple_gate", [K_MOE_SORT] = "g4_moe_sort", [K_MOE_COMBINE] = "g4_moe_combine",
    [K_LOGITS_CONSTRAIN] = "logits_constrain", [K_LOGPROBS] = "logprobs", [K_SAMPLE_TOPK] = "sample_topk",
    [K_DELTA_CONV] = "delta_conv", [K_DELTA_STEP] = "delta_step", [K_DELTA_PREP] = "delta_chunk_prep",
    [K_DELTA_SCAN] = "delta_chunk_scan", [K_RMSNORM_GATED] = "rmsnorm_gated",
    [K_POS_ADD2D] = "vis_pos_add", [K_ROPE2D] = "vis_norm_rope2d", [K_ATTN_DENSE] = "vis_attn",
    [K_AVGPOOL] = "vis_avgpool", [K_CLAMP] = "vis_clamp", [K_STANDARDIZE] = "vis_standardize",
    [K_MVQ] = "mvq (int8 dot GEMV)",
    [K_MMT] = "mmt (tiled tensor cores)", [K_MMT_CVT] = "mmt_cvt_x (X to f16)",
    [K_MMQ8] = "mmq8 (int8 tensor cores)", [K_Q8X] = "q8x_quant (X to int8)", [K_ATTN_DEC] = "attn_dec",
    [K_MVQG] = "mvqg (int8 dot GEMV, X given)", [K_MVQ_XQ] = "mvq_xq (X to int8)",
    [K_MMTA] = "mmta (tiles, cp.async)", [K_DEQH] = "deqh (weights to f16)",
    [K_MMTW] = "mmtw (tiles, wgmma)", [K_GLU_TILES] = "mmt_cvt_glu (activation to f16 tiles)",
    [K_ATTN_FA] = "attn_fa (tensor cores, cp.async)", [K_ATTN_FA_Q] = "attn_fa_q (Q to f16 fragments)",
    [K_MMQ8S] = "mmq8s (int8 tensor cores, cp.async)",
    [K_MMQ8P] = "mmq8p (int8 tensor cores, per-warp cp.async)",
    [K_MMQ8_SUM] = "mmq8_sum (k slices added)",
    [K_MMQ8R] = "mmq8r (int8 tensor cores, cp.async, X shared by 4 warps)",
    [K_VIS_FA] = "vis_fa (tensor cores, cp.async)",
    [K_ATTN_DECM] = "attn_decm (tensor cores)", [K_ATTN_DECM_MERGE] = "attn_decm_merge",
    [K_MMH] = "mmh (f16 tensor cores, X shared)", [K_MMH_X] = "mmh_x (X to f16)",
};

const char *ops_kernel_name(int k) { return k >= 0 && k < K_COUNT ? kernel_names[k] : "?"; }

int ops_type_supported(uint32_t type) { return dev_type_of(type)->suffix != NULL; }

int ops_type_kernel(cl_runtime *rt, cl_kernel *k, const char *family, uint32_t type, char *err, size_t errlen)
{
    char name[64];
    snprintf(name, sizeof name, "%s_%s", family, dev_type_of(type)->suffix);
    return (*k = rt_kernel(rt, name, err, errlen)) ? 0 : -1;
}

void ops_kernel_release(cl_kernel *k)
{
    if (*k) clReleaseKernel(*k);
    *k = NULL;
}

void ops_mem_release(cl_mem *m)
{
    if (*m) clReleaseMemObject(*m);
    *m = NULL;
}

/* the families in creation order: later ones may read what earlier ones made */
static const struct family {
    int (*init)(ops *o, cl_runtime *rt, char *err, size_t errlen);
    void (*release)(ops *o);
} FAMILIES[] = {
    { ops_q8_init, ops_q8_release },     { ops_mmh_init, ops_mmh_release },   { ops_act_init, ops_act_release },   { ops_norm_init, ops_norm_release },
    { ops_rope_init, ops_rope_release }, { ops_attn_init, ops_attn_release }, { ops_rows_init, ops_rows_release },
    { ops_logits_init, ops_logits_release },
    { ops_moe_init, ops_moe_release },   { ops_delta_init, ops_delta_release },
    { ops_vision_init, ops_vision_release },
};

int ops_init(ops *o, cl_runtime *rt, size_t scratch_elems, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    o->rt = rt;
    o->has_mma = rt->is_nvidia;
    o->act_int8 = 1;
    ops_policy_defaults(&o->pol, rt);
    cl_uint cu = 1;
    clGetDeviceInfo(rt->device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
    o->n_cu = cu;
    cl_ulong lm = 16384;
    clGetDeviceInfo(rt->device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof lm, &lm, NULL);
    o->local_mem = (size_t)lm;
    /* CPU devices run a work-group as a loop; small groups avoid barrier overhead there */
    o->wg = rt->is_cpu ? 16 : 256;
    if (o->wg > rt->max_wg) o->wg = rt->max_wg;
    if (!(o->nop = rt_kernel(rt, "nop", err, errlen)) || ops_mm_init(o, rt, scratch_elems, err, errlen)) return -1;
    for (size_t i = 0; i < sizeof FAMILIES / sizeof *FAMILIES; i++)
        if (FAMILIES[i].init(o, rt, err, errlen)) return -1;
    return 0;
}

void ops_destroy(ops *o)
{
    for (size_t i = sizeof FAMILIES / sizeof *FAMILIES; i-- > 0;) FAMILIES[i].release(o);
    ops_mm_release(o);
    ops_kernel_release(&o->nop);
    ops_profile_release(o);
    memset(o, 0, sizeof *o);
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

/* the kinds whose outputs steer other launches' reads (expert and token ids): LAUNCH_EMPTY refuses them */
static const unsigned char WRITES_INDICES[K_COUNT] = { [K_ROUTER] = 1, [K_MOE_SORT] = 1, [K_ARGMAX] = 1,
                                                       [K_SAMPLE_TOPK] = 1 };

int ops_kind_writes_indices(int kind) { return kind >= 0 && kind < K_COUNT && WRITES_INDICES[kind]; }

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
    ops_xq_launched(o, kind);
    if (o->pol.launch_empty == (uint32_t)kind + 1 && !WRITES_INDICES[kind]) k = o->nop; /* policy.c refuses the rest */
    cl_event ev = NULL;
    cl_int e = clEnqueueNDRangeKernel(o->rt->q, k, (cl_uint)dims, NULL, g, lws, 0, NULL,
                                      o->rt->profiling ? &ev : NULL);
    if (!e && o->pol.launch_twice == (uint32_t)kind + 1)
        e = clEnqueueNDRangeKernel(o->rt->q, k, (cl_uint)dims, NULL, g, lws, 0, NULL, NULL);
    if (e != CL_SUCCESS) return ops_fail(o, "%s: launch failed: %s", kernel_names[kind], rt_errstr(e));
    if (o->rt->profiling) ops_profile_event(o, kind, ev, bytes, flop);
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
    /* few rows (the 128-row MoE router): each row over more items until the grid has its warps */
    size_t segs = (rows + rows_per_seg - 1) / rows_per_seg;
    while (*tpr * 2 <= o->rt->max_wg && *tpr * 2 < nu + 1 && segs * *tpr / 32 < (size_t)o->pol.mv_warps_per_cu * o->n_cu)
        *tpr *= 2;
    *lws = wg > *tpr ? wg : *tpr;
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

int ops_gather_multi(ops *o, const mm_out *outs, int n, multi_args *a)
{
    memset(a, 0, sizeof *a);
    uint32_t k = outs[0].w->cols;
    for (int i = 0; i < n && i < 3; i++) { /* unused slots stay NULL: a NULL argument costs the launch less */
        const mm_out *m = &outs[i];
        if (m->w->cols != k) return ops_fail(o, "mv_multi: matrices differ in columns (%u vs %u)", m->w->cols, k);
        a->W[i] = m->w->buf; a->Y[i] = m->y;
        a->ty[i] = m->w->type; a->rb[i] = m->w->row_bytes; a->nr[i] = m->w->rows; a->ld[i] = m->ldy;
        a->rows += a->nr[i];
        a->bytes += (double)a->rb[i] * a->nr[i];
    }
    return 0;
}
