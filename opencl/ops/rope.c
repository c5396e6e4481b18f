/* rope.c — per-head norms, RoPE and the K/V cache writes: op_norm_rope (one tensor, optionally
 * into its cache) and op_qkv_rope (a batch's Q/K/V in one launch). */
#include "ops_int.h"

int ops_rope_init(ops *o, cl_runtime *rt, char *err, size_t errlen)
{
    if (!(o->rope.norm_rope = rt_kernel(rt, "norm_rope", err, errlen)) ||
        !(o->rope.qkv = rt_kernel(rt, "qkv_rope", err, errlen)))
        return -1;
    if (rt->is_nvidia && !(o->rope.qkv_w = rt_kernel(rt, "qkv_rope_w", err, errlen))) return -1;
    return 0;
}

void ops_rope_release(ops *o)
{
    ops_kernel_release(&o->rope.norm_rope);
    ops_kernel_release(&o->rope.qkv);
    ops_kernel_release(&o->rope.qkv_w);
}

int op_qkv_rope(ops *o, cl_mem Q, cl_mem K, cl_mem V, uint32_t ntok, uint32_t nh, uint32_t nkv, uint32_t hd,
                cl_mem qw, cl_mem kw, int qk_norm, int v_norm, float eps, cl_mem freq, uint32_t rot,
                cl_mem tok_pos, cl_mem tok_seq, const kv_view *kc, const kv_view *vc)
{
    size_t lws = o->wg, gws = (size_t)ntok * (nh + 2 * nkv) * lws;
    cl_mem qwb = qw ? qw : Q, kwb = kw ? kw : Q;
    if (qk_norm == 1 && (!qw || !kw)) return ops_fail(o, "qkv_rope: norm mode 1 needs Q and K weights");
    if (kc->type != ENGINE_KV_F16 && hd % KV_QK) return ops_fail(o, "qkv_rope: a quantized KV row needs hd %% 32 == 0");
    size_t rows = (size_t)ntok * (nh + 2 * nkv);
    /* qkv_rope_w writes f16 rows only (a quantized row's scale spans lanes: not written for it) */
    if (o->rope.qkv_w && kc->type == ENGINE_KV_F16 && rows >= o->pol.qkv_rope_w_min_rows && hd % 32 == 0 &&
        hd <= 512 && rot % 64 == 0 && rot <= hd) {
        /* a warp per head row where there are enough rows: no barriers, and a sincos per pair */
        size_t wl = 256, wg = ((size_t)ntok * (nh + 2 * nkv) * 32 + wl - 1) / wl * wl;
        return OPS_LAUNCH(o, K_QKV_ROPE, o->rope.qkv_w, 1, &wg, &wl, 8.0 * ntok * (nh + 2 * nkv) * hd,
                          8.0 * ntok * (nh + nkv) * hd, A(Q), A(K), A(V), A(nh), A(nkv), A(hd),
                          A(qwb), A(kwb), A(qk_norm), A(v_norm), A(eps), A(freq), A(rot), A(tok_pos), A(tok_seq),
                          A(kc->cache), A(vc->cache), A(kc->block_table), A(kc->max_blocks), A(kc->block_size),
                          A(ntok));
    }
    return OPS_LAUNCH(o, K_QKV_ROPE, o->rope.qkv, 1, &gws, &lws, 8.0 * ntok * (nh + 2 * nkv) * hd,
                  8.0 * ntok * (nh + nkv) * hd, A(Q), A(K), A(V), A(nh), A(nkv), A(hd), A(qwb),
                  A(kwb), A(qk_norm), A(v_norm), A(eps), A(freq), A(rot), A(tok_pos), A(tok_seq), A(kc->cache),
                  A(vc->cache), A(kc->block_table), A(kc->max_blocks), A(kc->block_size), A(ntok),
                  LOCAL(hd * sizeof(float)), LOCAL(lws * sizeof(float)), LOCAL(hd * sizeof(float)));
}

int op_norm_rope(ops *o, cl_mem x, uint32_t ntok, uint32_t nh, uint32_t hd, cl_mem w, int norm, float eps,
                 cl_mem freq, uint32_t rot, cl_mem tok_pos, cl_mem tok_seq, const kv_view *kv)
{
    size_t lws = o->wg, gws = (size_t)ntok * nh * lws;
    int has_w = w != NULL;
    int to_cache = kv != NULL;
    cl_mem cache = kv ? kv->cache : NULL, bt = kv ? kv->block_table : NULL; /* NULL: unread */
    uint32_t mb = kv ? kv->max_blocks : 1, bs = kv ? kv->block_size : 1;
    if (kv && kv->type != ENGINE_KV_F16 && hd % KV_QK) return ops_fail(o, "norm_rope: a quantized KV row needs hd %% 32 == 0");
    return OPS_LAUNCH(o, K_NORM_ROPE, o->rope.norm_rope, 1, &gws, &lws, (to_cache ? 6.0 : 8.0) * ntok * nh * hd,
                  8.0 * ntok * nh * hd, A(x), A(nh), A(hd), A(w), A(norm), A(has_w), A(eps),
                  A(freq), A(rot), A(tok_pos), A(tok_seq), A(to_cache), A(cache), A(bt), A(mb), A(bs),
                  LOCAL(hd * sizeof(float)), LOCAL(lws * sizeof(float)), LOCAL(hd * sizeof(float)));
}
