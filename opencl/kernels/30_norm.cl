/* 30_norm.cl — RMSNorm family, one work-group per row of n values.
 * GGUF Gemma norm weights already hold Gemma's (1 + w), so y = x / rms(x) * w. */

/* 1 / rms(x[0..n)) over the work-group (every item gets it) */
inline float row_inv_rms(global const float *x, uint n, float eps, local float *red)
{
    int lid = get_local_id(0), L = get_local_size(0);
    float ss = 0.0f;
    for (uint i = lid; i < n; i += L) ss += x[i] * x[i];
    ss = wg_sum(ss, red);
    return rsqrt(ss / (float)n + eps);
}

/* Per-head norm + NEOX RoPE for Q (in place) or K (written to the paged cache as half).
 * Rows are (token, head) pairs of hd values; heads per token = nh.
 * has_w = 0: plain RMS normalisation without weight; norm = 0: no normalisation at all.
 * RoPE rotates pairs (i, i + rot/2) for i < rot/2 with angle pos * freq[i]; dims >= rot pass.
 * Cache layout: [block][kv head][slot in block][hd]; block = block_table[seq*max_blocks + pos/BS]. */
kernel void norm_rope(global float *x, uint nh, uint hd, global const float *w, int norm, int has_w,
                      float eps, global const float *freq, uint rot,
                      global const int *tok_pos, global const int *tok_seq,
                      int to_cache, global half *cache, global const int *block_table, uint max_blocks,
                      uint block_size, local float *buf, local float *red)
{
    size_t row = get_group_id(0);
    uint t = row / nh, h = row % nh;
    int lid = get_local_id(0), L = get_local_size(0);
    global float *xr = x + row * hd;
    float inv = 1.0f;
    if (norm) {
        inv = row_inv_rms(xr, hd, eps, red);
    }
    for (uint i = lid; i < hd; i += L) buf[i] = xr[i] * inv * (norm && has_w ? w[i] : 1.0f);
    barrier(CLK_LOCAL_MEM_FENCE);
    float pos = (float)tok_pos[t];
    uint half_rot = rot / 2;
    global half *dst = 0;
    if (to_cache) {
        int p = tok_pos[t];
        int blk = block_table[(size_t)tok_seq[t] * max_blocks + p / block_size];
        dst = cache + (((size_t)blk * nh + h) * block_size + p % block_size) * hd;
    }
    for (uint i = lid; i < hd; i += L) {
        float v;
        if (i < rot) {
            uint j = i < half_rot ? i : i - half_rot;
            float th = pos * freq[j];
            float c = cos(th), s = sin(th);
            v = i < half_rot ? buf[i] * c - buf[i + half_rot] * s : buf[j] * s + buf[i] * c;
        } else {
            v = buf[i];
        }
        if (to_cache) vstore_half(v, i, dst);
        else xr[i] = v;
    }
}

/* row of qkv_rope's launch -> kind (0 q, 1 k, 2 v), token, head, and the row within its buffer */
inline int qkv_row(size_t *row, uint ntok, uint nh, uint nkv, uint *t, uint *h)
{
    size_t r = *row, nq = (size_t)ntok * nh, nk = (size_t)ntok * nkv;
    int kind = r < nq ? 0 : r < nq + nk ? 1 : 2;
    r -= kind == 0 ? 0 : kind == 1 ? nq : nq + nk;
    uint heads = kind == 0 ? nh : nkv;
    *t = (uint)(r / heads);
    *h = (uint)(r % heads);
    *row = r;
    return kind;
}

/* One launch for the attention inputs of a batch: rows [0, T*nh) are Q heads (norm + RoPE in
 * place), then T*nkv K heads (norm + RoPE into the K cache), then T*nkv V heads (into the V
 * cache). Q/K/V are separate [T][heads][hd] buffers. Norm modes: 0 none, 1 RMS norm with the
 * head weight, 2 RMS norm without weight. */
kernel void qkv_rope(global float *Q, global const float *K, global const float *V, uint nh, uint nkv, uint hd,
                     global const float *qw, global const float *kw, int qk_norm, int v_norm, float eps,
                     global const float *freq, uint rot, global const int *tok_pos, global const int *tok_seq,
                     global half *kc, global half *vc, global const int *block_table, uint max_blocks,
                     uint block_size, uint ntok, local float *buf, local float *red)
{
    size_t row = get_group_id(0);
    int lid = get_local_id(0), L = get_local_size(0);
    uint t, h;
    int kind = qkv_row(&row, ntok, nh, nkv, &t, &h); /* 0 q, 1 k, 2 v */
    global const float *src = (kind == 0 ? Q : kind == 1 ? K : V) + row * hd;
    int norm = kind < 2 ? qk_norm : v_norm; /* 0 none, 1 with weight (Q/K only), 2 without */
    global const float *w = kind == 0 ? qw : kw;
    float inv = 1.0f;
    if (norm) {
        inv = row_inv_rms(src, hd, eps, red);
    }
    for (uint i = lid; i < hd; i += L) buf[i] = src[i] * inv * (norm == 1 && kind < 2 ? w[i] : 1.0f);
    barrier(CLK_LOCAL_MEM_FENCE);
    int p = tok_pos[t];
    global half *dst = 0;
    if (kind > 0) {
        int blk = block_table[(size_t)tok_seq[t] * max_blocks + p / block_size];
        dst = (kind == 1 ? kc : vc) + (((size_t)blk * nkv + h) * block_size + p % block_size) * hd;
    }
    uint half_rot = rot / 2;
    for (uint i = lid; i < hd; i += L) {
        float v = buf[i];
        if (kind < 2 && i < rot) {
            uint j = i < half_rot ? i : i - half_rot;
            float th = (float)p * freq[j];
            float c = cos(th), s = sin(th);
            v = i < half_rot ? buf[i] * c - buf[i + half_rot] * s : buf[j] * s + buf[i] * c;
        }
        if (kind == 0) Q[row * hd + i] = v;
        else vstore_half(v, i, dst);
    }
}

#ifdef CLG_NVIDIA
/* qkv_rope with one warp per head row (8 rows per group of 256): lane i holds values i + 32m, the
 * RMS sum is reduced by shuffles (no barrier, no local memory) and each lane rotates its own pairs
 * (i, i + rot/2: same lane when rot/2 is a multiple of 32) with one sincos per pair. qkv_rope's
 * 256-item group per row took 365 us per 2048-token launch on the H200 (31B prefill). hd a multiple
 * of 32, at most 512. */
kernel void qkv_rope_w(global float *Q, global const float *K, global const float *V, uint nh, uint nkv, uint hd,
                       global const float *qw, global const float *kw, int qk_norm, int v_norm, float eps,
                       global const float *freq, uint rot, global const int *tok_pos, global const int *tok_seq,
                       global half *kc, global half *vc, global const int *block_table, uint max_blocks,
                       uint block_size, uint ntok)
{
    size_t row = get_global_id(0) / 32;
    uint lane = get_local_id(0) % 32, nm = hd / 32;
    if (row >= (size_t)ntok * (nh + 2 * nkv)) return; /* whole warps */
    uint t, h;
    int kind = qkv_row(&row, ntok, nh, nkv, &t, &h); /* 0 q, 1 k, 2 v */
    global const float *src = (kind == 0 ? Q : kind == 1 ? K : V) + row * hd;
    int norm = kind < 2 ? qk_norm : v_norm;
    float v[16], ss = 0.0f;
    for (uint m = 0; m < 16; m++)
        if (m < nm) {
            v[m] = src[lane + 32 * m];
            ss += v[m] * v[m];
        }
    if (norm) {
        for (int x = 16; x > 0; x >>= 1) ss += shfl_xor_f(ss, x);
        float inv = rsqrt(ss / (float)hd + eps);
        global const float *w = kind == 0 ? qw : kw;
        for (uint m = 0; m < 16; m++)
            if (m < nm) v[m] *= inv * (norm == 1 && kind < 2 ? w[lane + 32 * m] : 1.0f);
    }
    int p = tok_pos[t];
    if (kind < 2) {
        uint hm = rot / 64; /* pairs per lane: rot / 2 values, 32 per m */
        for (uint m = 0; m < 8; m++)
            if (m < hm) {
                float c, sn = sincos((float)p * freq[lane + 32 * m], &c);
                float a = v[m], b = v[m + hm];
                v[m] = a * c - b * sn;
                v[m + hm] = a * sn + b * c;
            }
    }
    if (kind == 0) {
        for (uint m = 0; m < 16; m++)
            if (m < nm) Q[row * hd + lane + 32 * m] = v[m];
        return;
    }
    int blk = block_table[(size_t)tok_seq[t] * max_blocks + p / block_size];
    global half *dst = (kind == 1 ? kc : vc) + (((size_t)blk * nkv + h) * block_size + p % block_size) * hd;
    for (uint m = 0; m < 16; m++)
        if (m < nm) vstore_half(v[m], lane + 32 * m, dst);
}
#endif

/* Sum of a float2 over the work-group. On NVIDIA: warp shuffles, one partial per warp through local
 * memory, one barrier pair (local size a multiple of 32); elsewhere a tree (power-of-two size). */
inline float2 wg_sum2(float2 v, local float2 *red)
{
    uint lid = get_local_id(0), L = get_local_size(0);
#ifdef CLG_NVIDIA
    for (int m = 16; m > 0; m >>= 1) {
        v.x += shfl_xor_f(v.x, m);
        v.y += shfl_xor_f(v.y, m);
    }
    if ((lid & 31) == 0) red[lid >> 5] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    /* every warp adds the partials by shuffles: one local load per lane, not one per warp */
    v = (lid & 31) < (L >> 5) ? red[lid & 31] : (float2)(0.0f);
    for (int m = 16; m > 0; m >>= 1) {
        v.x += shfl_xor_f(v.x, m);
        v.y += shfl_xor_f(v.y, m);
    }
#else
    red[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = L / 2; s > 0; s >>= 1) {
        if (lid < s) red[lid] += red[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    v = red[0];
#endif
    barrier(CLK_LOCAL_MEM_FENCE);
    return v;
}

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

#define NF_SLOTS 2 /* float4s per item held in registers: rows of up to NF_SLOTS * L float4s */

/* norm_fuse for a row of at most NF_SLOTS float4s per item: x, x2, res, wx and w_0 are loaded once,
 * up front, so the chain waits on one round of loads; the looped form rereads them per pass, a
 * dependent L1/L2 round trip behind each barrier (31B decode: 16.6 us per launch) */
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
