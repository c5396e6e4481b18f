/* ops_gemma4.h — launchers for opencl/kernels/moe.cl, rows.cl and gemv.cl (Gemma 4: any-length products, MoE
 * routing and expert products, per-layer-embedding gate). Same conventions as ops.h; launches go through ops_launch, so
 * bench --profile sees them. */
#ifndef CLGEMMA_OPS_GEMMA4_H
#define CLGEMMA_OPS_GEMMA4_H

#include "ops.h"


/* the kernels of o->g4 (ops_init / ops_destroy call these) */
int  ops_g4_init(ops_g4 *g, cl_runtime *rt, char *err, size_t errlen);
void ops_g4_destroy(ops_g4 *g);

/* z [ntok][n_exp] router logits -> sel/wsel [ntok][n_used] (n_exp <= 256) */
int g4_router_topk(ops *o, cl_mem z, uint32_t n_exp, uint32_t n_used, cl_mem exp_scale, cl_mem sel,
                   cl_mem wsel, uint32_t ntok);
/* expert products: W holds n_exp experts of rows_e rows x k (weight.rows = n_exp * rows_e). With
 * tensor cores and more than 4 tokens, moe_up groups the pairs by expert into ord
 * (g4_moe_ord_ints) and moe_down reuses that grouping, its per-pair products going through yd
 * (ntok * n_used * rows_e floats). */
size_t g4_moe_ord_ints(uint32_t n_exp, uint32_t nsel);
int g4_moe_up(ops *o, const weight *w, uint32_t rows_e, cl_mem X, uint32_t ldx, cl_mem sel, uint32_t n_used,
              cl_mem gu, cl_mem ord, uint32_t ntok);
int g4_geglu_split(ops *o, cl_mem gu, uint32_t f, cl_mem act, uint32_t nsel);
/* Y [ntok][rows_e] = sum over a token's experts of wsel * W_e . geglu(gate, up), from gu's rows of
 * [k gate | k up] values per (token, slot) pair; act (nsel * k floats) holds geglu's output where a
 * path needs it materialised (the int8 decode path folds it into its X quantization). */
int g4_moe_down(ops *o, const weight *w, uint32_t rows_e, cl_mem gu, cl_mem act, cl_mem sel,
                cl_mem wsel, uint32_t n_used, cl_mem Y, cl_mem ord, cl_mem yd, uint32_t ntok);
#endif
