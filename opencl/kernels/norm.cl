/* norm.cl — the RMSNorm chains (norm_fuse), one work-group per row of n values.
 * GGUF Gemma norm weights already hold Gemma's (1 + w), so y = x / rms(x) * w. */

#define NF_RAW 1    /* t = x (no normalisation of the input) */
#define NF_X2 2     /* t += norm(x2) * wx2 */
#define NF_NORM_T 4 /* t = norm(t) * wt */
#define NF_RES 8    /* r = (res + t) * scale, written back to res */
#define NF_Q8 16    /* y_0 also to int8 in mvqg's layout (xq, xds; NVIDIA) */
#define NF_Q8X 32   /* y_0 also to int8 in mmq8's layout (q8x_quant's: xds as float2 [n/32][tpad]) */

/* t at float4 i: x itself, or norm(x)·wx [+ norm(x2)·wx2] given the inverse RMS values */
inline float4 nf_t(uint i, uint flags, global const float4 *x, global const float4 *wx, global const float4 *x2,
                   global const float4 *wx2, float ix, float ix2)
{
    float4 t = x[i];
    if (flags & NF_RAW) return t;
    t *= ix * wx[i];
    if (flags & NF_X2) t += x2[i] * ix2 * wx2[i];
    return t;
}

/* y_0's int8 form for the product after the chain (NF_Q8: mvqg's layout, NF_Q8X: mmq8's); every
 * lane of the warp calls it (shuffles), live says whether float4 i of the row exists */
inline void nf_q8_store(float4 v0, uint i, int live, uint n4, size_t row, size_t off, uint flags,
                        global uint *xq, global float *xds, uint tpad)
{
#ifdef CLG_NVIDIA
    if (!(flags & (NF_Q8 | NF_Q8X))) return;
    float d;
    int sm;
    uint w = q8_quant4(v0, &d, &sm); /* sm: this item's 16-value half of the block; 8 items a block */
    int s32 = sm + shfl_xor_i(sm, 4);
    size_t bi = row * (n4 / 8) + i / 8, nblk = get_num_groups(0) * (size_t)(n4 / 8);
    if (!live) return;
    xq[off + i] = w;
    if (flags & NF_Q8X) {
        if (i % 8 == 0) vstore2((float2)(d, d * (float)s32), (i / 8) * (size_t)tpad + row, xds);
    } else {
        if (i % 4 == 0) xds[nblk + bi * 2 + (i % 8) / 4] = d * (float)sm;
        if (i % 8 == 0) xds[bi] = d;
    }
#endif
}

#define NF_SLOTS 4 /* float4s per item held in registers: rows of up to NF_SLOTS * L float4s */

/* norm_fuse for a row of at most NF_SLOTS float4s per item: x, x2, res, wx and w_0 are loaded once,
 * up front, so the chain waits on one round of loads; the looped form rereads them per pass, a
 * dependent L1/L2 round trip behind each barrier */
inline void norm_fuse_regs(global const float4 *x, global const float4 *wx, global const float4 *x2,
                           global const float4 *wx2, global const float4 *wt, global float4 *res, float scale,
                           global const float4 *w0, global float4 *y0, global const float4 *w1, global float4 *y1,
                           global const float4 *w2, global float4 *y2, uint nout, uint flags, uint n4, float eps,
                           global uint *xq, global float *xds, uint tpad, local float2 *red, size_t row, size_t off)
{
    uint lid = get_local_id(0), L = get_local_size(0);
    float fn = (float)(4 * n4);
    float4 a[NF_SLOTS], b[NF_SLOTS], r[NF_SLOTS], wa[NF_SLOTS], w0a[NF_SLOTS];
    for (int s = 0; s < NF_SLOTS; s++) {
        uint i = lid + s * L;
        int in = i < n4;
        float4 z = (float4)(0.0f);
        a[s] = in ? x[i] : z;
        b[s] = in && (flags & NF_X2) ? x2[i] : z;
        r[s] = in && (flags & NF_RES) ? res[i] : z;
        wa[s] = in && !(flags & NF_RAW) ? wx[i] : z;
        w0a[s] = in && nout > 0 ? w0[i] : z;
    }
    if (!(flags & NF_RAW)) {
        float2 ss = (float2)(0.0f);
        for (int s = 0; s < NF_SLOTS; s++) ss += (float2)(dot(a[s], a[s]), dot(b[s], b[s]));
        ss = wg_sum2(ss, red);
        float ix = rsqrt(ss.x / fn + eps), ix2 = rsqrt(ss.y / fn + eps);
        for (int s = 0; s < NF_SLOTS; s++) {
            uint i = lid + s * L;
            a[s] *= ix * wa[s];
            if ((flags & NF_X2) && i < n4) a[s] += b[s] * ix2 * wx2[i];
        }
    }
    if (flags & NF_NORM_T) {
        float2 st = (float2)(0.0f);
        for (int s = 0; s < NF_SLOTS; s++) st.x += dot(a[s], a[s]);
        st = wg_sum2(st, red);
        float it = rsqrt(st.x / fn + eps);
        for (int s = 0; s < NF_SLOTS; s++) {
            uint i = lid + s * L;
            if (i < n4) a[s] *= it * wt[i];
        }
    }
    float2 sr = (float2)(0.0f);
    for (int s = 0; s < NF_SLOTS; s++) {
        uint i = lid + s * L;
        if (flags & NF_RES) {
            a[s] = (r[s] + a[s]) * scale;
            if (i < n4) res[i] = a[s];
        }
        sr.x += dot(a[s], a[s]);
    }
    if (nout == 0) return;
    sr = wg_sum2(sr, red);
    float ir = rsqrt(sr.x / fn + eps);
    for (int s = 0; s < NF_SLOTS; s++) {
        if (lid - lid % 32 + s * L >= n4) break; /* warp-uniform: nf_q8_store shuffles */
        uint i = lid + s * L;
        int live = i < n4;
        float4 q = a[s] * ir, v0 = q * w0a[s];
        if (live) {
            y0[i] = v0;
            if (nout > 1) y1[i] = q * w1[i];
            if (nout > 2) y2[i] = q * w2[i];
        }
        nf_q8_store(v0, i, live, n4, row, off, flags, xq, xds, tpad);
    }
}

/* The RMSNorm chains between two weight products, one launch per row set (one row per work-group):
 *   t = x  or  norm(x)·wx [+ norm(x2)·wx2];  t = norm(t)·wt (NF_NORM_T);
 *   r = (res + t)·scale written to res (NF_RES), else r = t;  y_j = norm(r)·w_j for j < nout (<= 3).
 * E.g. a post-FFN norm, the residual add, the layer's output scale and the next layer's pre-norm in
 * one launch. Rows are float4s (n % 4 == 0). Rows of up to NF_SLOTS float4s per item stay in
 * registers (norm_fuse_regs); longer ones are recomputed per pass rather than kept: an item rereads
 * only what it read or wrote itself, from L1. y_j may alias x when r does not come from res. */
kernel void norm_fuse(global const float4 *x, global const float4 *wx, global const float4 *x2,
                      global const float4 *wx2, global const float4 *wt, global float4 *res, float scale,
                      global const float4 *w0, global float4 *y0, global const float4 *w1, global float4 *y1,
                      global const float4 *w2, global float4 *y2, uint nout, uint flags, uint n, float eps,
                      global uint *xq, global float *xds, uint tpad, local float2 *red)
{
    uint lid = get_local_id(0), L = get_local_size(0), n4 = n / 4;
    size_t row = get_group_id(0), off = row * (size_t)n4;
    x += off;
    x2 += off;
    res += off;
    y0 += off;
    y1 += off;
    y2 += off;
    if (n4 <= NF_SLOTS * L) {
        norm_fuse_regs(x, wx, x2, wx2, wt, res, scale, w0, y0, w1, y1, w2, y2, nout, flags, n4, eps, xq, xds,
                       tpad, red, row, off);
        return;
    }
    float fn = (float)n, ix = 1.0f, ix2 = 1.0f, it = 1.0f;
    if (!(flags & NF_RAW)) {
        float2 ss = (float2)(0.0f);
        for (uint i = lid; i < n4; i += L) {
            float4 a = x[i];
            ss.x += dot(a, a);
            if (flags & NF_X2) {
                float4 b = x2[i];
                ss.y += dot(b, b);
            }
        }
        ss = wg_sum2(ss, red);
        ix = rsqrt(ss.x / fn + eps);
        ix2 = rsqrt(ss.y / fn + eps);
    }
    if (flags & NF_NORM_T) {
        float2 st = (float2)(0.0f);
        for (uint i = lid; i < n4; i += L) {
            float4 t = nf_t(i, flags, x, wx, x2, wx2, ix, ix2);
            st.x += dot(t, t);
        }
        st = wg_sum2(st, red);
        it = rsqrt(st.x / fn + eps);
    }
    float2 sr = (float2)(0.0f);
    for (uint i = lid; i < n4; i += L) {
        float4 t = nf_t(i, flags, x, wx, x2, wx2, ix, ix2);
        if (flags & NF_NORM_T) t *= it * wt[i];
        if (flags & NF_RES) {
            t = (res[i] + t) * scale;
            res[i] = t;
        }
        sr.x += dot(t, t);
    }
    if (nout == 0) return;
    sr = wg_sum2(sr, red);
    float ir = rsqrt(sr.x / fn + eps);
    /* warp-uniform trip count (L and n4 / 8 blocks are whole warps' worth): nf_q8_store's shuffles */
    for (uint i0 = lid - lid % 32; i0 < n4; i0 += L) {
        uint i = i0 + lid % 32;
        float4 v0 = (float4)(0.0f);
        if (i < n4) {
            float4 r;
            if (flags & NF_RES) {
                r = res[i];
            } else {
                r = nf_t(i, flags, x, wx, x2, wx2, ix, ix2);
                if (flags & NF_NORM_T) r *= it * wt[i];
            }
            r *= ir;
            v0 = r * w0[i];
            y0[i] = v0;
            if (nout > 1) y1[i] = r * w1[i];
            if (nout > 2) y2[i] = r * w2[i];
        }
        nf_q8_store(v0, i, i < n4, n4, row, off, flags, xq, xds, tpad);
    }
}
