/* ops_gemma4.h — launchers for opencl/kernels/moe.cl, rows.cl and gemv.cl (Gemma 4: any-length products, MoE
 * routing and expert products, per-layer-embedding gate). Same conventions as ops.h; launches go through ops_launch, so
 * bench --profile sees them. */
#ifndef CLGEMMA_OPS_GEMMA4_H
#define CLGEMMA_OPS_GEMMA4_H

#include "ops.h"

typedef struct ops_g4 {
    cl_runtime *rt;
    cl_kernel mv_any, router_topk, moe_up, geglu_split, moe_down, ple_gate;
    cl_kernel moe_up_mv, moe_down_mv; /* decode (ntok <= 4) layouts of moe_up / moe_down */
    cl_kernel moe_sort, moe_combine;  /* tensor-core path: pairs grouped by expert, per-pair sums */
    cl_kernel mvqe[GGML_TYPE_COUNT];  /* decode expert products on int8 dot products (NVIDIA; DT_GEMV_Q8 types) */
    cl_kernel router_topk_w;          /* router top-k in one warp per token (NVIDIA) */
} ops_g4;

int  ops_g4_init(ops_g4 *g, cl_runtime *rt, char *err, size_t errlen);
void ops_g4_destroy(ops_g4 *g);

/* like op_matmul, but also for row lengths that are not a multiple of 32 (f32/f16 rows) */
int g4_matmul(ops *o, const ops_g4 *g, const weight *w, cl_mem X, uint32_t ldx, cl_mem Y, uint32_t ldy,
              uint32_t ntok, char *err, size_t errlen);
/* z [ntok][n_exp] router logits -> sel/wsel [ntok][n_used] (n_exp <= 256) */
int g4_router_topk(ops *o, const ops_g4 *g, cl_mem z, uint32_t n_exp, uint32_t n_used, cl_mem exp_scale, cl_mem sel,
                   cl_mem wsel, uint32_t ntok, char *err, size_t errlen);
/* expert products: W holds n_exp experts of rows_e rows x k (weight.rows = n_exp * rows_e). With
 * tensor cores and more than 4 tokens, moe_up groups the pairs by expert into ord
 * (g4_moe_ord_ints) and moe_down reuses that grouping, its per-pair products going through yd
 * (ntok * n_used * rows_e floats). */
size_t g4_moe_ord_ints(uint32_t n_exp, uint32_t nsel);
int g4_moe_up(ops *o, const ops_g4 *g, const weight *w, uint32_t rows_e, cl_mem X, uint32_t ldx, cl_mem sel, uint32_t n_used,
              cl_mem gu, cl_mem ord, uint32_t ntok, char *err, size_t errlen);
int g4_geglu_split(ops *o, const ops_g4 *g, cl_mem gu, uint32_t f, cl_mem act, uint32_t nsel, char *err, size_t errlen);
/* Y [ntok][rows_e] = sum over a token's experts of wsel * W_e . geglu(gate, up), from gu's rows of
 * [k gate | k up] values per (token, slot) pair; act (nsel * k floats) holds geglu's output where a
 * path needs it materialised (the int8 decode path folds it into its X quantization). */
int g4_moe_down(ops *o, const ops_g4 *g, const weight *w, uint32_t rows_e, cl_mem gu, cl_mem act, cl_mem sel,
                cl_mem wsel, uint32_t n_used, cl_mem Y, cl_mem ord, cl_mem yd, uint32_t ntok, char *err,
                size_t errlen);
int g4_ple_gate(ops *o, const ops_g4 *g, cl_mem gate, cl_mem ple, uint32_t p, uint32_t n_layer, uint32_t il, uint32_t ntok,
                char *err, size_t errlen);

#endif
