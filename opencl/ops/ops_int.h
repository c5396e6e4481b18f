/* ops_int.h — what the op family files (opencl/ops: every .c file) share, not part of the engine's API: the
 * families' create/release pairs, the helpers of launch.c, and the functions one family offers
 * another. Calls between families go one way (no circle):
 *   matmul -> matmul_q8 -> act_q8 -> matmul_h;  matmul -> matmul_h;  matmul -> rows;  norm -> {matmul, matmul_q8, act_q8};
 *   attention -> {matmul, rope, act_q8};  moe -> matmul;  everything -> launch. */
#ifndef CLGEMMA_OPS_INT_H
#define CLGEMMA_OPS_INT_H

#include "ops.h"
#include "types.h"

/* argument list helpers: A(x) passes a value by address and size; LOCAL(n) reserves local bytes */
#define A(x) KARG(x)
#define LOCAL(n) KLOCAL(n)

/* ---- each family's kernels and buffers: a create/release pair in the family's file (ops_init
 * creates matmul's first, then the others in launch.c's table order; ops_destroy the reverse) */
int  ops_mm_init(ops *o, cl_runtime *rt, size_t scratch_elems, char *err, size_t errlen);
void ops_mm_release(ops *o);
#define OPS_FAMILY(f) int ops_##f##_init(ops *o, cl_runtime *rt, char *err, size_t errlen); void ops_##f##_release(ops *o);
OPS_FAMILY(q8) OPS_FAMILY(mmh) OPS_FAMILY(act) OPS_FAMILY(norm) OPS_FAMILY(rope) OPS_FAMILY(attn) OPS_FAMILY(rows) OPS_FAMILY(logits)
OPS_FAMILY(moe) OPS_FAMILY(delta) OPS_FAMILY(vision)
#undef OPS_FAMILY

/* ---- launch.c: helpers of every family */
/* kernel FAMILY_suffix of type (its dev_type row) into *k */
int ops_type_kernel(cl_runtime *rt, cl_kernel *k, const char *family, uint32_t type, char *err, size_t errlen);
/* the profile's record of a launch made outside ops_launch_args (CLBlast's GEMM) */
void ops_profile_event(ops *o, int kind, cl_event ev, double bytes, double flop);
void ops_profile_release(ops *o);
/* releases a kernel / buffer where set, and clears it */
void ops_kernel_release(cl_kernel *k);
void ops_mem_release(cl_mem *m);
/* a device buffer of at least need bytes (regrown, never shrunk; the old one is released once
 * the kernels already enqueued on it are done) */
int ops_grow_buf(ops *o, cl_mem *b, size_t *have, size_t need);
/* warps per group for products that split k across a group's warps */
size_t ops_mmq_split_k(const ops *o, size_t tiles, uint32_t nsb, size_t max_wg, size_t part_per_warp, size_t ks_max);
/* the same towards a given number of warps */
size_t ops_split_k_to(const ops *o, size_t tiles, uint32_t nsb, size_t max_wg, size_t part_per_warp, size_t ks_max,
                      size_t target);
/* launch shape of the mv-layout kernels (mv4_T, mv_multi, g4_moe_*_mv): tpr items per segment,
 * rows_per_seg rows per segment, rows in all, k columns */
void ops_mv_geometry(const ops *o, uint32_t k, size_t rows, uint32_t rows_per_seg, size_t *gws, size_t *lws,
                     uint32_t *tpr);
/* the kernel arguments of up to three matrices sharing X (mv_multi, mvq_T, mvqg_T, mmq8_T): unused
 * slots repeat matrix 0's buffers with 0 rows */
typedef struct multi_args {
    cl_mem W[3], Y[3];
    uint32_t ty[3], rb[3], nr[3], ld[3];
    size_t rows;
    double bytes;
} multi_args;
int ops_gather_multi(ops *o, const mm_out *outs, int n, multi_args *a);

/* ---- matmul.c, for attention and moe */
/* X (n rows of k, ldx apart) to f16 rows in o->mm.xh, or with tiled as mmta's tiles of 128 rows */
int ops_x_f16(ops *o, cl_mem X, uint32_t ldx, uint32_t n, uint32_t k, int tiled);
/* Expert products on tensor cores over pairs grouped by the MoE sort (ord, tiles of tt pairs):
 * Y[p] = W_e . X[p / xdiv] for every pair p of expert e; W holds n_exp experts of rows_e rows. */
int ops_mmq_moe(ops *o, const weight *w, uint32_t rows_e, uint32_t n_exp, cl_mem X, uint32_t ldx, uint32_t xdiv,
                cl_mem Y, uint32_t ldy, cl_mem ord, uint32_t nsel, uint32_t tt, int kind);
/* the same on 128 x 128 tiles (mmte_T, NVIDIA) for a sort with tiles of OPS_MMTE_PAIRS pairs; X (nx
 * rows of w->cols) is converted to f16 rows first */
#define OPS_MMTE_PAIRS 128
int ops_mmt_moe(ops *o, const weight *w, uint32_t rows_e, uint32_t n_exp, cl_mem X, uint32_t ldx, uint32_t nx,
                uint32_t xdiv, cl_mem Y, uint32_t ldy, cl_mem ord, uint32_t nsel, int kind);

/* ---- matmul_q8.c, for matmul and norm (NVIDIA): n (1-3) matrices of one type sharing X (or
 * gelu(X) * U: gg) on mvq / mvqg (1-4 tokens) or mmq8 (5-256 tokens) */
typedef struct geglu_in { cl_mem U; uint32_t u_off, ldu, act; } geglu_in; /* act: OPS_ACT_* */
int ops_mvq(ops *o, const mm_out *outs, int n, cl_mem X, uint32_t ldx, const geglu_in *gg, uint32_t ntok);
int ops_mmq8(ops *o, const mm_out *outs, int n, cl_mem X, uint32_t ldx, const geglu_in *gg, uint32_t ntok);
/* the plain norm chain c (x·wx into res, scaled; at most one output) into res_out inside the
 * products of its output (of the new residual where it has none), one launch (mvqn); 1 without
 * launching where that kernel does not apply */
int ops_mvqn(ops *o, const norm_chain *c, cl_mem res_out, const mm_out *outs, int n, uint32_t k, uint32_t ntok,
             float eps);

/* ---- matmul_h.c, for matmul and act_q8 (NVIDIA): n (1-3) matrices of any quantized type sharing X
 * (or act(X) * U: gg) on f16 tensor cores, X made f16 once (into ops_mm's xh; k slices through
 * ops_q8's part and mmq8_sum); _takes: the token counts it runs */
int ops_mmh_takes(const ops *o, uint32_t ntok);
int ops_mmh(ops *o, const mm_out *outs, int n, cl_mem X, uint32_t ldx, const geglu_in *gg, uint32_t ntok);

/* ---- act_q8.c: the int8 hand-off (NVIDIA). A producer of X (norm_fuse, attn_dec) whose next
 * product reads X as int8 writes that form too: *_takes_x says whether it should (rows of k
 * values, ntok of them), *_reserve makes room in xq / xqs, ops_xq_given tags it with X; the
 * products take it where the tag names their X. Every launch tells the module (ops_xq_launched):
 * launches that do not read the int8 X forget the tag (they may rewrite xq, or X itself). */
int  ops_mvqg_takes_x(const ops *o, uint32_t k, uint32_t ntok); /* mvqg's layout, 1-4 tokens */
int  ops_xq_reserve(ops *o, uint32_t ntok, uint32_t k);
int  ops_q8x_takes_x(const ops *o, uint32_t k, uint32_t ntok);  /* mmq8's layout, 5-256 tokens */
int  ops_q8x_reserve(ops *o, uint32_t ntok, uint32_t k);
void ops_xq_given(ops *o, cl_mem x, uint32_t ntok, uint32_t k);
/* 1 if xq / xqs hold X (ldx apart) of ntok rows of k as its producer left it */
int  ops_xq_holds(const ops *o, cl_mem X, uint32_t ldx, uint32_t ntok, uint32_t k);
void ops_xq_launched(ops *o, int kind);

/* ---- rows.c, for matmul: G[t][i] = gelu(G[t][i]) * U[t * ldu + il * k + i] (k values a row) */
int ops_geglu_slice(ops *o, cl_mem G, cl_mem U, uint32_t k, uint32_t ldu, uint32_t il, uint32_t ntok);

#endif
