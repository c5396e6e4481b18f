/* rope.cl — the attention inputs: per-head RMS norm and NEOX RoPE of Q and K, and the writes of K
 * and V into the paged cache (kv.cl's rows; qkv_rope_w: f16 only). norm_rope takes one buffer,
 * qkv_rope the Q, K and V of a batch in one launch, qkv_rope_w the same with a warp per head row
 * (NVIDIA). */

/* 1 / rms(x[0..n)) over the work-group (every item gets it) */
inline float row_inv_rms(global const float *x, uint n, float eps, local float *red)
{
    int lid = get_local_id(0), L = get_local_size(0);
    float ss = 0.0f;
    for (uint i = lid; i < n; i += L) ss += x[i] * x[i];
    ss = wg_sum(ss, red);
    return rsqrt(ss / (float)n + eps);
}

/* Per-head norm + NEOX RoPE for Q (in place) or K (written to the paged cache: kv.cl's rows, staged
 * in stage for a quantized type).
 * Rows are (token, head) pairs of hd values; heads per token = nh.
 * has_w = 0: plain RMS normalisation without weight; norm = 0: no normalisation at all.
 * RoPE rotates pairs (i, i + rot/2) for i < rot/2 with angle pos * freq[i]; dims >= rot pass.
 * Cache layout: [block][kv head][slot in block] rows; block = block_table[seq*max_blocks + pos/BS]. */
kernel void norm_rope(global float *x, uint nh, uint hd, global const float *w, int norm, int has_w,
                      float eps, global const float *freq, uint rot,
                      global const int *tok_pos, global const int *tok_seq,
                      int to_cache, global kv_t *cache, global const int *block_table, uint max_blocks,
                      uint block_size, local float *buf, local float *red, local float *stage)
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
    global kv_t *dst = 0;
    if (to_cache) {
        int p = tok_pos[t];
        int blk = block_table[(size_t)tok_seq[t] * max_blocks + p / block_size];
        dst = cache + (((size_t)blk * nh + h) * block_size + p % block_size) * KV_ROW(hd);
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
        if (to_cache) kv_put(v, i, dst, stage);
        else xr[i] = v;
    }
    if (to_cache) kv_put_row(stage, hd, dst);
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
 * head weight, 2 RMS norm without weight. stage: a quantized type's row before it is written. */
kernel void qkv_rope(global float *Q, global const float *K, global const float *V, uint nh, uint nkv, uint hd,
                     global const float *qw, global const float *kw, int qk_norm, int v_norm, float eps,
                     global const float *freq, uint rot, global const int *tok_pos, global const int *tok_seq,
                     global kv_t *kc, global kv_t *vc, global const int *block_table, uint max_blocks,
                     uint block_size, uint ntok, local float *buf, local float *red, local float *stage)
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
    global kv_t *dst = 0;
    if (kind > 0) {
        int blk = block_table[(size_t)tok_seq[t] * max_blocks + p / block_size];
        dst = (kind == 1 ? kc : vc) + (((size_t)blk * nkv + h) * block_size + p % block_size) * KV_ROW(hd);
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
        else kv_put(v, i, dst, stage);
    }
    if (kind > 0) kv_put_row(stage, hd, dst); /* kind is the group's */
}

#ifdef CLG_NVIDIA
/* qkv_rope with one warp per head row (8 rows per group of 256): lane i holds values i + 32m, the
 * RMS sum is reduced by shuffles (no barrier, no local memory) and each lane rotates its own pairs
 * (i, i + rot/2: same lane when rot/2 is a multiple of 32) with one sincos per pair, where
 * qkv_rope's 256-item group per row waits on barriers. hd a multiple of 32, at most 512. */
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
