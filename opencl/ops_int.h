/* ops_int.h — shared by the ops_*.c launchers, not part of the engine's API */
#ifndef CLGEMMA_OPS_INT_H
#define CLGEMMA_OPS_INT_H

#include "ops.h"
#include "types.h"

/* argument list helpers: A(x) passes a value by address and size; LOCAL(n) reserves local bytes */
#define A(x) KARG(x)
#define LOCAL(n) KLOCAL(n)

/* kernel FAMILY_suffix of type (its dev_type row) into *k */
int ops_type_kernel(cl_runtime *rt, cl_kernel *k, const char *family, uint32_t type, char *err, size_t errlen);
/* a device buffer of at least need bytes (regrown, never shrunk; the old one is released once
 * the kernels already enqueued on it are done) */
int ops_grow_buf(ops *o, cl_mem *b, size_t *have, size_t need);
/* warps per group for products that split k across a group's warps */
size_t ops_mmq_split_k(const ops *o, size_t tiles, uint32_t nsb, size_t max_wg, size_t part_per_warp, size_t ks_max);
/* the same towards a given number of warps */
size_t ops_split_k_to(const ops *o, size_t tiles, uint32_t nsb, size_t max_wg, size_t part_per_warp, size_t ks_max,
                      size_t target);

/* the kernel arguments of up to three matrices sharing X (mv_multi, mvq_T, mvqg_T): unused slots
 * repeat matrix 0's buffers with 0 rows */
typedef struct multi_args {
    cl_mem W[3], Y[3];
    uint32_t ty[3], rb[3], nr[3], ld[3];
    size_t rows;
    double bytes;
} multi_args;
int ops_gather_multi(ops *o, const mm_out *outs, int n, multi_args *a);

/* geglu input of a product: X' = gelu(X) * U[u_off + t * ldu + i] (folded into X's quantization) */
typedef struct geglu_in { cl_mem U; uint32_t u_off, ldu; } geglu_in;

/* int8-activation decode products (ops_int8.c, NVIDIA): kernels, and n (1-3) matrices of one
 * type sharing X on mvq / mvqg (1-4 tokens) or mmq8 (5-16 tokens) */
int ops_int8_init(ops *o, cl_runtime *rt, char *err, size_t errlen);
int ops_mvq(ops *o, const mm_out *outs, int n, cl_mem X, uint32_t ldx, const geglu_in *gg, uint32_t ntok);
int ops_mmq8(ops *o, const mm_out *outs, int n, cl_mem X, uint32_t ldx, const geglu_in *gg, uint32_t ntok);

#endif
