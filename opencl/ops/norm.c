/* norm.c — RMSNorm chains (norm_fuse: one launch per chain), the plain norms as chains, and the
 * chain feeding products (op_norm_matmul: fused into them on matmul_q8's mvqn where it applies). */
#include "ops_int.h"

int ops_norm_init(ops *o, cl_runtime *rt, char *err, size_t errlen)
{
    if (!(o->norm.fuse = rt_kernel(rt, "norm_fuse", err, errlen))) return -1;
    size_t kwg = 0;
    if (clGetKernelWorkGroupInfo(o->norm.fuse, rt->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg, &kwg, NULL) !=
            CL_SUCCESS || kwg > rt->max_wg)
        kwg = rt->max_wg;
    /* 512, not 1024: a 1,024-item group took twice as long for the same row (docs/PERF.md) */
    for (o->norm.wg_max = 64; o->norm.wg_max * 2 <= kwg && o->norm.wg_max < 512;) o->norm.wg_max *= 2;
    return 0;
}

void ops_norm_release(ops *o) { ops_kernel_release(&o->norm.fuse); }

/* one group per row; for a few rows (decode) a group as wide as the row needs (2-4 float4 per item),
 * so each pass is one or two loads per item instead of a loop of dependent ones */
static size_t norm_lws(const ops *o, uint32_t rows, uint32_t n)
{
    if (o->rt->is_cpu || rows >= 2 * o->n_cu) return o->wg;
    size_t lws = 64;
    while (lws < n / 8 && lws * 2 <= o->norm.wg_max) lws *= 2;
    return lws;
}

int op_norm_chain(ops *o, const norm_chain *c, uint32_t rows, uint32_t n, float eps)
{
    if (n % 4) return ops_fail(o, "norm: rows of %u values (the norm kernels take multiples of 4)", n);
    if (c->nout < 0 || c->nout > 3 || (!c->wx && (c->x2 || c->wt)) || (c->x2 && !c->wx2) || (!c->res && c->nout == 0))
        return ops_fail(o, "norm chain: unsupported arguments (n = %u, %d outputs)", n, c->nout);
    uint32_t flags = (c->wx ? 0 : 1) | (c->x2 ? 2 : 0) | (c->wt ? 4 : 0) | (c->res ? 8 : 0);
    /* unused buffer arguments go as NULL: it costs the launch less than a buffer */
    cl_mem w[3] = { NULL, NULL, NULL }, y[3] = { NULL, NULL, NULL };
    for (int j = 0; j < c->nout; j++) {
        w[j] = c->out[j].w;
        y[j] = c->out[j].y;
    }
    uint32_t nout = (uint32_t)c->nout;
    float scale = c->res ? c->scale : 1.0f;
    size_t lws = norm_lws(o, rows, n), gws = (size_t)rows * lws;
    /* a decode-sized y_0 that mvqg will take (its products are sized by the same k) leaves its
     * int8 form in xq / xqs too: no quantization launch before those products */
    int q8 = nout > 0 && lws % 32 == 0 && ops_mvqg_takes_x(o, n, rows);
    /* the same for 5-256 rows in mmq8's layout (its q8x_quant launch saved) */
    int q8x = !q8 && nout > 0 && lws % 32 == 0 && ops_q8x_takes_x(o, n, rows);
    uint32_t tpad = ops_q8x_tpad(rows);
    if ((q8 && ops_xq_reserve(o, rows, n)) || (q8x && ops_q8x_reserve(o, rows, n)))
        return -1;
    cl_mem xq = q8 || q8x ? o->act.xq : NULL, xqs = q8 || q8x ? o->act.xqs : NULL;
    flags |= q8 ? 16 : q8x ? 32 : 0;
    double streams = 1 + (c->wx ? 1 : 0) + (c->x2 ? 2 : 0) + (c->wt ? 1 : 0) + (c->res ? 2 : 0) + 2.0 * nout;
    if (OPS_LAUNCH(o, K_NORM_FUSE, o->norm.fuse, 1, &gws, &lws, 4.0 * streams * rows * n,
                   (4.0 + 3.0 * nout) * rows * n, A(c->x), A(c->wx), A(c->x2), A(c->wx2), A(c->wt), A(c->res),
                   A(scale), A(w[0]), A(y[0]), A(w[1]), A(y[1]), A(w[2]), A(y[2]), A(nout), A(flags), A(n),
                   A(eps), A(xq), A(xqs), A(tpad), LOCAL(lws * sizeof(cl_float2))))
        return -1;
    if (q8 || q8x) ops_xq_given(o, y[0], rows, n);
    return 0;
}

/* the plain norm is a norm chain: float4 rows only (both loaders ask for multiples of 32) */
int op_rmsnorm(ops *o, cl_mem x, cl_mem w, cl_mem y, uint32_t rows, uint32_t n, float eps)
{
    norm_chain c = { .x = x, .out = { { w, y } }, .nout = 1 };
    return op_norm_chain(o, &c, rows, n, eps);
}

int op_norm_matmul(ops *o, resid *r, const norm_chain *c, const mm_out *outs, int n, uint32_t k, uint32_t ntok,
                   float eps)
{
    if (o->failed) return -1;
    norm_chain ch = *c;
    ch.res = r->cur;
    if (ch.nout) ch.out[0].y = r->spare;
    int rc = ops_mvqn(o, &ch, r->spare, outs, n, k, ntok, eps);
    if (rc <= 0) {
        if (rc == 0) { /* the new residual is in spare */
            cl_mem t = r->cur;
            r->cur = r->spare;
            r->spare = t;
        }
        return rc;
    }
    if (op_norm_chain(o, &ch, ntok, k, eps) || n == 0) return o->failed ? -1 : 0;
    cl_mem y = ch.nout ? ch.out[0].y : r->cur;
    return n == 1 ? op_matmul(o, outs[0].w, y, k, outs[0].y, outs[0].ldy, ntok) : op_matmul_multi(o, outs, n, y, k,
    ntok);
}
