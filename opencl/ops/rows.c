/* rows.c — row and elementwise ops: embedding rows, GEGLU (flat, and over a slice of wider U rows:
 * the per-layer-input gate), gather, add, scale, softcap, argmax. */
#include "ops_int.h"

#include <stdio.h>

int ops_rows_init(ops *o, cl_runtime *rt, char *err, size_t errlen)
{
    ops_rows *r = &o->rows;
    struct { cl_kernel *k; const char *name; } ks[] = {
        { &r->geglu, "geglu" }, { &r->swiglu, "swiglu" }, { &r->mul_sigmoid, "mul_sigmoid" }, { &r->add_gated, "add_gated" }, { &r->ple_gate, "g4_ple_gate" }, { &r->gather, "gather_rows" }, { &r->add, "add_rows" },
        { &r->scale, "scale_rows" }, { &r->softcap, "softcap" }, { &r->argmax_part, "argmax_part" },
        { &r->argmax_final, "argmax_final" },
    };
    for (size_t i = 0; i < sizeof ks / sizeof *ks; i++)
        if (!(*ks[i].k = rt_kernel(rt, ks[i].name, err, errlen))) return -1;
    for (uint32_t t = 0; t < GGML_TYPE_COUNT; t++)
        if (dev_type_has(t, DT_GEMV) && ops_type_kernel(rt, &r->emb[t], "emb", t, err, errlen)) return -1;
    if (!(r->am_val = rt_alloc(rt, 256 * 256 * sizeof(float), NULL, err, errlen))) return -1;
    if (!(r->am_idx = rt_alloc(rt, 256 * 256 * sizeof(int), NULL, err, errlen))) return -1;
    return 0;
}

void ops_rows_release(ops *o)
{
    ops_rows *r = &o->rows;
    cl_kernel *ks[] = { &r->geglu, &r->swiglu, &r->mul_sigmoid, &r->add_gated, &r->ple_gate, &r->gather, &r->add, &r->scale, &r->softcap, &r->argmax_part,
                        &r->argmax_final };
    for (size_t i = 0; i < sizeof ks / sizeof *ks; i++) ops_kernel_release(ks[i]);
    for (int t = 0; t < GGML_TYPE_COUNT; t++) ops_kernel_release(&r->emb[t]);
    ops_mem_release(&r->am_val);
    ops_mem_release(&r->am_idx);
}

int op_embed(ops *o, const weight *w, cl_mem ids, uint32_t ntok, float scale, cl_mem out)
{
    size_t gws[2] = { w->cols / 32, ntok };
    return OPS_LAUNCH(o, K_EMB, o->rows.emb[w->type], 2, gws, NULL, (double)ntok * (w->row_bytes + 4.0 * w->cols), 0,
                      A(w->buf), A(w->row_bytes), A(w->cols), A(ids), A(ntok), A(scale), A(out));
}

static size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

int op_geglu(ops *o, cl_mem g, cl_mem u, cl_mem out, uint32_t n)
{
    size_t lws = 64, gws = round_up(n, lws);
    return OPS_LAUNCH(o, K_GEGLU, o->rows.geglu, 1, &gws, &lws, 12.0 * n, 10.0 * n, A(g), A(u), A(out),
                  A(n));
}

int op_swiglu(ops *o, cl_mem g, cl_mem u, cl_mem out, uint32_t n)
{
    size_t lws = 64, gws = round_up(n, lws);
    return OPS_LAUNCH(o, K_GEGLU, o->rows.swiglu, 1, &gws, &lws, 12.0 * n, 5.0 * n, A(g), A(u), A(out), A(n));
}

int op_mul_sigmoid(ops *o, cl_mem x, cl_mem g, uint32_t n)
{
    size_t lws = 64, gws = round_up(n, lws);
    return OPS_LAUNCH(o, K_GEGLU, o->rows.mul_sigmoid, 1, &gws, &lws, 12.0 * n, 4.0 * n, A(x), A(g), A(n));
}

int op_add_gated(ops *o, cl_mem x, cl_mem y, cl_mem s, uint32_t rows, uint32_t n)
{
    size_t lws[2] = { 64, 1 }, gws[2] = { round_up(n, 64), rows };
    return OPS_LAUNCH(o, K_ADD_ROWS, o->rows.add_gated, 2, gws, lws, 12.0 * rows * n, 3.0 * rows * n, A(x), A(y),
                      A(s), A(n));
}

int ops_geglu_slice(ops *o, cl_mem G, cl_mem U, uint32_t k, uint32_t ldu, uint32_t il, uint32_t ntok)
{
    if (k == 0 || ntok == 0) return o->failed ? -1 : 0;
    return OPS_LAUNCH(o, K_PLE_GATE, o->rows.ple_gate, 2, ((size_t[2]){ k, ntok }), NULL, 12.0 * k * ntok,
                      10.0 * k * ntok, A(G), A(U), A(k), A(ldu), A(il), A(ntok));
}

int op_gather_rows(ops *o, cl_mem src, cl_mem idx, cl_mem dst, uint32_t rows, uint32_t n)
{
    size_t lws[2] = { 64, 1 }, gws[2] = { round_up(n, 64), rows };
    return OPS_LAUNCH(o, K_GATHER_ROWS, o->rows.gather, 2, gws, lws, 8.0 * rows * n, 0, A(src),
                  A(idx), A(dst), A(n));
}

int op_copy_rows(ops *o, cl_mem src, size_t src_row, cl_mem dst, size_t dst_row, size_t rows, uint32_t n)
{
    if (o->failed) return -1;
    size_t rb = 4 * (size_t)n;
    cl_int ce = clEnqueueCopyBuffer(o->rt->q, src, dst, src_row * rb, dst_row * rb, rows * rb, 0, NULL, NULL);
    return ce ? ops_fail(o, "copy of %zu rows failed: %s", rows, rt_errstr(ce)) : 0;
}

int op_add(ops *o, cl_mem x, cl_mem y, uint32_t n)
{
    size_t lws = 64, gws = round_up(n, lws);
    return OPS_LAUNCH(o, K_ADD_ROWS, o->rows.add, 1, &gws, &lws, 12.0 * n, n, A(x), A(y), A(n));
}

int op_scale(ops *o, cl_mem x, float s, uint32_t n)
{
    size_t lws = 64, gws = round_up(n, lws);
    return OPS_LAUNCH(o, K_SCALE_ROWS, o->rows.scale, 1, &gws, &lws, 8.0 * n, n, A(x), A(s), A(n));
}

int op_softcap(ops *o, cl_mem x, float cap, uint32_t n)
{
    size_t lws = 64, gws = round_up(n, lws);
    return OPS_LAUNCH(o, K_SOFTCAP, o->rows.softcap, 1, &gws, &lws, 8.0 * n, 3.0 * n, A(x), A(cap),
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
    if (OPS_LAUNCH(o, K_ARGMAX, o->rows.argmax_part, 2, gws, l2, 4.0 * rows * n, 0, A(x), A(n), A(slice),
               A(o->rows.am_val), A(o->rows.am_idx), LOCAL(lws * sizeof(float)), LOCAL(lws * sizeof(int))))
        return -1;
    size_t lf = 64, gf = rows * lf;
    return OPS_LAUNCH(o, K_ARGMAX, o->rows.argmax_final, 1, &gf, &lf, 8.0 * rows * parts, 0, A(o->rows.am_val),
                  A(o->rows.am_idx), A(parts), A(out), LOCAL(lf * sizeof(float)), LOCAL(lf * sizeof(int)));
}
