/* vision.c — the vision encoder's ops (kernels/vision.cl): the 2-D position add, per-head norm with the 2-D RoPE,
 * dense attention within each image, k x k average pooling, clamp, standardize. Shapes are checked here; the
 * kernels trust them. */
#include "ops_int.h"

#include <math.h>
#include <stdio.h>

static const uint32_t FA_WIDTHS[OPS_VFA_WIDTHS] = { 32, 64, 80, 128 }; /* DEFINE_VFA's in vision.cl */

int ops_vision_init(ops *o, cl_runtime *rt, char *err, size_t errlen)
{
    ops_vision *v = &o->vision;
    struct { cl_kernel *k; const char *name; } ks[] = {
        { &v->pos_add, "vis_pos_add" }, { &v->norm_rope2d, "vis_norm_rope2d" }, { &v->attn, "vis_attn" },
        { &v->avgpool, "vis_avgpool" }, { &v->clamp, "vis_clamp" }, { &v->standardize, "vis_standardize" },
    };
    for (size_t i = 0; i < sizeof ks / sizeof *ks; i++)
        if (!(*ks[i].k = rt_kernel(rt, ks[i].name, err, errlen))) return -1;
    for (int i = 0; o->has_mma && i < OPS_VFA_WIDTHS; i++) {
        char name[32];
        snprintf(name, sizeof name, "vis_fa_%u", FA_WIDTHS[i]);
        if (!(v->fa[i] = rt_kernel(rt, name, err, errlen))) return -1;
    }
    return 0;
}

void ops_vision_release(ops *o)
{
    ops_vision *v = &o->vision;
    cl_kernel *ks[] = { &v->pos_add, &v->norm_rope2d, &v->attn, &v->avgpool, &v->clamp, &v->standardize };
    for (size_t i = 0; i < sizeof ks / sizeof *ks; i++) ops_kernel_release(ks[i]);
    for (int i = 0; i < OPS_VFA_WIDTHS; i++) ops_kernel_release(&v->fa[i]);
}

static size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

/* a 2-D launch over (n values, rows): groups of 64 along the row */
static void grid2(size_t gws[2], size_t lws[2], uint32_t n, uint32_t rows)
{
    gws[0] = round_up(n, 64), gws[1] = rows, lws[0] = 64, lws[1] = 1;
}

int op_pos_add2d(ops *o, cl_mem x, cl_mem table, uint32_t n_pos, cl_mem pos, uint32_t ntok, uint32_t n)
{
    if (!n || !n_pos) return ops_fail(o, "pos_add2d: %u values, %u positions", n, n_pos);
    if (!ntok) return o->failed ? -1 : 0;
    size_t gws[2], lws[2];
    grid2(gws, lws, n, ntok);
    return OPS_LAUNCH(o, K_POS_ADD2D, o->vision.pos_add, 2, gws, lws, 16.0 * ntok * n, 2.0 * ntok * n, A(x),
                      A(table), A(pos), A(n), A(n_pos), A(ntok));
}

int op_norm_rope2d(ops *o, cl_mem x, uint32_t ntok, uint32_t nh, uint32_t hd, cl_mem w, int norm, float eps,
                   cl_mem pos, float theta, cl_mem h16, uint32_t hdp)
{
    if (norm < 0 || norm > 2 || (norm == 1 && !w) || !nh || !hd || hd > OPS_VNORM_MAX || (pos && hd % 4) ||
        (norm && !(eps > 0)) || (pos && !(theta > 0)) || (h16 && hdp < hd))
        return ops_fail(o, "norm_rope2d: unsupported arguments (norm %d%s, %u heads of %u, eps %g, theta %g, f16 "
                        "width %u)", norm, norm == 1 && !w ? " without weight" : "", nh, hd, eps, theta, hdp);
    if (!ntok || (!norm && !pos && !h16)) return o->failed ? -1 : 0;
    uint32_t mode = (uint32_t)norm, rope = pos != NULL, w16 = h16 ? hdp : 0;
    cl_mem wb = w ? w : x, pb = pos ? pos : x, hb = h16 ? h16 : x; /* unused buffer arguments point at x */
    size_t lws[2] = { o->rt->is_cpu ? 16 : 64, 1 }, gws[2] = { nh * lws[0], ntok }; /* VN_L in vision.cl */
    return OPS_LAUNCH(o, K_ROPE2D, o->vision.norm_rope2d, 2, gws, lws, (8.0 * hd + 2.0 * w16) * ntok * nh,
                      10.0 * ntok * nh * hd, A(x), A(nh), A(hd), A(wb), A(mode), A(eps), A(rope), A(pb), A(theta),
                      A(ntok), A(hb), A(w16));
}

uint32_t ops_vision_fa_width(const cl_runtime *rt, uint32_t hd)
{
    for (int i = 0; rt->is_nvidia && i < OPS_VFA_WIDTHS; i++)
        if (hd <= FA_WIDTHS[i]) return FA_WIDTHS[i];
    return 0;
}

uint32_t ops_vision_fa(const ops *o, uint32_t hd)
{
    uint32_t w = o->pol.vis_fa && o->has_mma ? ops_vision_fa_width(o->rt, hd) : 0;
    return w && hd % 2 == 0 ? w : 0; /* outputs are stored in pairs */
}

void ops_vision_tiles(int32_t *tiles, uint32_t *nt, uint32_t r0, uint32_t n)
{
    for (uint32_t t = 0; t < n; t += OPS_VFA_TILE, ++*nt) {
        tiles[2 * *nt] = (int32_t)(r0 + t);
        tiles[2 * *nt + 1] = (int32_t)(r0 + (n - t < OPS_VFA_TILE ? n : t + OPS_VFA_TILE));
    }
}

int op_attention_dense_f16(ops *o, cl_mem q16, cl_mem k16, cl_mem v16, uint32_t hdp, cl_mem out, cl_mem ranges,
                           cl_mem tiles, uint32_t n_tiles, uint32_t ntok, uint32_t nh, uint32_t nkv, uint32_t hd,
                           float scale)
{
    int wi = -1;
    for (int i = 0; i < OPS_VFA_WIDTHS; i++)
        if (FA_WIDTHS[i] == hdp) wi = i;
    if (!nh || !nkv || nh % nkv || !hd || hd % 2 || wi < 0 || hdp != ops_vision_fa(o, hd) || !isfinite(scale))
        return ops_fail(o, "attention_dense_f16: unsupported shape (%u heads, %u kv heads, head dim %u at width %u, "
                        "scale %g)", nh, nkv, hd, hdp, scale);
    if (!ntok) return o->failed ? -1 : 0;
    if (n_tiles < (ntok + OPS_VFA_TILE - 1) / OPS_VFA_TILE || n_tiles > ntok)
        return ops_fail(o, "attention_dense_f16: %u tiles for %u rows", n_tiles, ntok);
    size_t lws[2] = { 128, 1 }, gws[2] = { (size_t)n_tiles * 128, nh };
    double keys = (double)ntok * ntok; /* the single-image bound; several images do less */
    return OPS_LAUNCH(o, K_VIS_FA, o->vision.fa[wi], 2, gws, lws, 4.0 * keys * nh * hdp / 64 + 4.0 * ntok * nh * hd,
                      4.0 * keys * nh * hdp, A(q16), A(k16), A(v16), A(out), A(ranges), A(tiles), A(ntok), A(nh),
                      A(nkv), A(hd), A(scale));
}

int op_attention_dense(ops *o, cl_mem q, cl_mem k, cl_mem v, cl_mem out, cl_mem ranges, uint32_t ntok, uint32_t nh,
                       uint32_t nkv, uint32_t hd, float scale)
{
    if (!nh || !nkv || nh % nkv || !hd || hd > OPS_VATT_L * OPS_VATT_DPT || !isfinite(scale))
        return ops_fail(o, "attention_dense: unsupported shape (%u heads, %u kv heads, head dim %u (at most %d), "
                        "scale %g)", nh, nkv, hd, OPS_VATT_L * OPS_VATT_DPT, scale);
    if ((size_t)hd * sizeof(float) + 2 * OPS_VATT_L * sizeof(float) > o->local_mem)
        return ops_fail(o, "attention_dense: head dim %u needs more local memory than the device's %zu bytes", hd,
                        o->local_mem);
    if (!ntok) return o->failed ? -1 : 0;
    size_t lws[2] = { OPS_VATT_L, 1 }, gws[2] = { (size_t)nh * OPS_VATT_L, ntok };
    double keys = (double)ntok * ntok; /* the single-image bound; several images do less */
    return OPS_LAUNCH(o, K_ATTN_DENSE, o->vision.attn, 2, gws, lws, 8.0 * keys * nkv * hd / OPS_VATT_L,
                      4.0 * keys * nh * hd, A(q), A(k), A(v), A(out), A(ranges), A(nh), A(nkv), A(hd), A(scale),
                      LOCAL(hd * sizeof(float)));
}

int op_avgpool(ops *o, cl_mem x, cl_mem cells, cl_mem out, uint32_t nout, uint32_t n, uint32_t k, float s)
{
    if (!n || !k || !isfinite(s)) return ops_fail(o, "avgpool: unsupported arguments (%u values, kernel %u)", n, k);
    if (!nout) return o->failed ? -1 : 0;
    size_t gws[2], lws[2];
    grid2(gws, lws, n, nout);
    return OPS_LAUNCH(o, K_AVGPOOL, o->vision.avgpool, 2, gws, lws, 4.0 * nout * n * (k * k + 1),
                      (double)nout * n * k * k, A(x), A(out), A(cells), A(n), A(k), A(s), A(nout));
}

int op_clamp(ops *o, cl_mem x, cl_mem y, float lo, float hi, uint32_t n)
{
    if (isnan(lo) || isnan(hi) || lo > hi) return ops_fail(o, "clamp: bounds [%g, %g]", lo, hi);
    if (!n) return o->failed ? -1 : 0;
    size_t lws = 64, gws = round_up(n, lws);
    return OPS_LAUNCH(o, K_CLAMP, o->vision.clamp, 1, &gws, &lws, 8.0 * n, 2.0 * n, A(x), A(y), A(lo), A(hi), A(n));
}

int op_standardize(ops *o, cl_mem x, cl_mem y, cl_mem bias, cl_mem scale, uint32_t rows, uint32_t n)
{
    if (!n || !bias || !scale) return ops_fail(o, "standardize: no bias or scale for %u values", n);
    if (!rows) return o->failed ? -1 : 0;
    size_t gws[2], lws[2];
    grid2(gws, lws, n, rows);
    return OPS_LAUNCH(o, K_STANDARDIZE, o->vision.standardize, 2, gws, lws, 8.0 * rows * n, 2.0 * rows * n,
                      A(x), A(y), A(bias), A(scale), A(n), A(rows));
}
