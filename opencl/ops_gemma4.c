/* ops_gemma4.c — see ops_gemma4.h */
#include "ops_gemma4.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "errf.h"

int ops_g4_init(ops_g4 *g, cl_runtime *rt, char *err, size_t errlen)
{
    memset(g, 0, sizeof *g);
    g->rt = rt;
    struct { cl_kernel *k; const char *name; } ks[] = {
        { &g->mv_any, "g4_mv_any" }, { &g->router_topk, "g4_router_topk" }, { &g->moe_up, "g4_moe_up" },
        { &g->geglu_split, "g4_geglu_split" }, { &g->moe_down, "g4_moe_down" }, { &g->ple_gate, "g4_ple_gate" },
    };
    for (size_t i = 0; i < sizeof ks / sizeof *ks; i++)
        if (!(*ks[i].k = rt_kernel(rt, ks[i].name, err, errlen))) { ops_g4_destroy(g); return -1; }
    return 0;
}

void ops_g4_destroy(ops_g4 *g)
{
    cl_kernel ks[] = { g->mv_any, g->router_topk, g->moe_up, g->geglu_split, g->moe_down, g->ple_gate };
    for (size_t i = 0; i < sizeof ks / sizeof *ks; i++)
        if (ks[i]) clReleaseKernel(ks[i]);
    memset(g, 0, sizeof *g);
}

typedef struct garg { size_t size; const void *ptr; } garg;
#define A(x) ((garg){ sizeof(x), &(x) })

/* 1-D or 2-D launch without a fixed work-group size */
static int go(const ops_g4 *g, cl_kernel k, const char *name, size_t g0, size_t g1, char *err, size_t errlen,
              int nargs, ...)
{
    va_list ap;
    va_start(ap, nargs);
    for (int i = 0; i < nargs; i++) {
        garg a = va_arg(ap, garg);
        cl_int e = clSetKernelArg(k, (cl_uint)i, a.size, a.ptr);
        if (e != CL_SUCCESS) {
            va_end(ap);
            return ERR("%s: argument %d: %s", name, i, rt_errstr(e));
        }
    }
    va_end(ap);
    if (g0 == 0 || g1 == 0) return 0;
    size_t gws[2] = { g0, g1 };
    cl_int e = clEnqueueNDRangeKernel(g->rt->q, k, 2, NULL, gws, NULL, 0, NULL, NULL);
    if (e != CL_SUCCESS) return ERR("%s: launch failed: %s", name, rt_errstr(e));
    return 0;
}

int g4_matmul(ops *o, const ops_g4 *g, const weight *w, cl_mem X, uint32_t ldx, cl_mem Y, uint32_t ldy,
              uint32_t ntok, char *err, size_t errlen)
{
    if (w->cols % 32 == 0) return op_matmul(o, w, X, ldx, Y, ldy, ntok, err, errlen);
    return go(g, g->mv_any, "g4_mv_any", w->rows, ntok, err, errlen, 10, A(w->buf), A(w->type), A(w->row_bytes),
              A(w->rows), A(w->cols), A(X), A(ldx), A(Y), A(ldy), A(ntok));
}

int g4_router_topk(const ops_g4 *g, cl_mem z, uint32_t n_exp, uint32_t n_used, cl_mem exp_scale, cl_mem sel,
                   cl_mem wsel, uint32_t ntok, char *err, size_t errlen)
{
    if (n_exp > 256 || n_used == 0 || n_used > n_exp) return ERR("router: %u of %u experts unsupported", n_used, n_exp);
    return go(g, g->router_topk, "g4_router_topk", ntok, 1, err, errlen, 7, A(z), A(n_exp), A(n_used), A(exp_scale),
              A(sel), A(wsel), A(ntok));
}

int g4_moe_up(const ops_g4 *g, const weight *w, uint32_t rows_e, cl_mem X, uint32_t ldx, cl_mem sel, uint32_t n_used,
              cl_mem gu, uint32_t ntok, char *err, size_t errlen)
{
    uint32_t nsel = ntok * n_used;
    return go(g, g->moe_up, "g4_moe_up", rows_e, nsel, err, errlen, 11, A(w->buf), A(w->type), A(w->row_bytes),
              A(rows_e), A(w->cols), A(X), A(ldx), A(sel), A(n_used), A(gu), A(nsel));
}

int g4_geglu_split(const ops_g4 *g, cl_mem gu, uint32_t f, cl_mem act, uint32_t nsel, char *err, size_t errlen)
{
    return go(g, g->geglu_split, "g4_geglu_split", f, nsel, err, errlen, 4, A(gu), A(f), A(act), A(nsel));
}

int g4_moe_down(const ops_g4 *g, const weight *w, uint32_t rows_e, cl_mem act, cl_mem sel, cl_mem wsel,
                uint32_t n_used, cl_mem Y, uint32_t ntok, char *err, size_t errlen)
{
    return go(g, g->moe_down, "g4_moe_down", rows_e, ntok, err, errlen, 11, A(w->buf), A(w->type), A(w->row_bytes),
              A(rows_e), A(w->cols), A(act), A(sel), A(wsel), A(n_used), A(Y), A(ntok));
}

int g4_ple_gate(const ops_g4 *g, cl_mem gate, cl_mem ple, uint32_t p, uint32_t n_layer, uint32_t il, uint32_t ntok,
                char *err, size_t errlen)
{
    uint32_t row = p * n_layer;
    return go(g, g->ple_gate, "g4_ple_gate", p, ntok, err, errlen, 6, A(gate), A(ple), A(p), A(row), A(il), A(ntok));
}
