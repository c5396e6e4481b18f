/* attn_decode.cl — split-KV attention for decode-shaped batches on NVIDIA (warp shuffles).
 *
 * attn_partial (attn_split.cl) spends its time in round trips, not bytes: the query and the key
 * offsets staged through local memory, a group barrier per 16 keys, then each item walking the
 * chunk's value rows four at a time. Here each warp owns whole keys: lane i holds dims
 * DPL*i .. DPL*i + DPL - 1 of the query (scaled) in registers, loads the same dims of ATTN_DEC_KU
 * keys and values at once (16-byte loads, a 512-byte row per warp), reduces the scores with
 * shuffles and keeps an online softmax; the 8 warps of a group take every 8th run of keys, then
 * merge through local memory. A one-chunk span writes its output directly; otherwise the chunk
 * partials and the last-group merge follow attn_partial's layout and counters. For a decode step
 * whose output projection runs on mvqg, the finished rows are also written as its int8 X. */

#ifdef CLG_NVIDIA

#define ATTN_DEC_KU 4 /* keys per warp per round (their K and V loads in flight together) */
#define ATTN_DEC_W 8  /* warps per group */

/* f16 pair in a word to floats */
inline float2 h2f2(uint w) { return (float2)(h2f(w), h2f(w >> 16)); }

/* xq_ntok > 0: the finished output row of (token t, head h), hd values, also to int8 for the output
 * projection (its X: nh * hd values per token, xq_ntok tokens): in mvqg's layout, or with tpad
 * (8 or 16) in mmq8's (q8x_quant's: (d, d * sum) pairs [k/32][tpad]). 8 items per 32-value block;
 * the group's own writes of the row are made visible by the barrier */
inline void attn_dec_q8(global float *orow, uint t, uint h, uint nh, uint hd, global uint *xq, global float *xds,
                        uint xq_ntok, uint tpad)
{
    if (xq_ntok == 0) return;
    barrier(CLK_GLOBAL_MEM_FENCE);
    uint lid = get_local_id(0);
    if (lid >= hd / 4) return; /* whole warps: hd / 4 is a multiple of 32 */
    float d;
    int s;
    uint w = q8_quant4(vload4(lid, orow), &d, &s);
    int s32 = s + shfl_xor_i(s, 4); /* s: this item's 16-value half */
    size_t k = (size_t)nh * hd, wi = t * (k / 4) + h * (hd / 4) + lid, bi = wi / 8;
    xq[wi] = w;
    if (tpad) {
        if (lid % 8 == 0) vstore2((float2)(d, d * (float)s32), (h * (hd / 4) + lid) / 8 * (size_t)tpad + t, xds);
        return;
    }
    if (lid % 4 == 0) xds[xq_ntok * (k / 32) + bi * 2 + (lid % 8) / 4] = d * (float)s;
    if (lid % 8 == 0) xds[bi] = d;
}

/* cos and sin of the rotation of the lane's DPL dims (dims DPL * lane ..) at position pos, for the
 * first rot dims (freq: rot / 2 inverse frequencies): the group's items compute one angle each into
 * tab (rot floats), every warp takes its dims' from there (query and key alike) */
inline void attn_fresh_rot(const int DPL, global const float *freq, uint rot, int pos, int lid, int lane,
                           local float *tab, float *rc, float *rs)
{
    uint half_rot = rot / 2;
    for (uint j = lid; j < half_rot; j += 32 * ATTN_DEC_W) {
        float c, sn = sincos((float)pos * freq[j], &c);
        tab[2 * j] = c;
        tab[2 * j + 1] = sn;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int i = 0; i < DPL; i++) {
        uint d = lane * DPL + i, j = d < half_rot ? d : d - half_rot;
        rc[i] = d < rot ? tab[2 * j] : 1.0f;
        rs[i] = d < rot ? tab[2 * j + 1] : 0.0f;
    }
}

/* The lane's DPL values of a head row straight from its projection, as qkv_rope makes them:
 * RMS-normed over the row (norm 1: times w, 2: without), the first rot dims rotated by (rc, rs)
 * (the partner dim is reread, not shuffled) */
inline void attn_fresh_row(const int DPL, global const float *src, global const float *w, int norm, float eps,
                           uint rot, uint hd, int lane, const float *rc, const float *rs, float *out)
{
    int d0 = lane * DPL;
    float ss = 0.0f, pv[16];
    uint half_rot = rot / 2;
    for (int i = 0; i < DPL; i++) {
        uint d = d0 + i, pd = d < half_rot ? d + half_rot : d - half_rot;
        out[i] = src[d];
        pv[i] = d < rot ? src[pd] * (norm == 1 ? w[pd] : 1.0f) : 0.0f;
        ss += out[i] * out[i];
    }
    float inv = 1.0f;
    if (norm) {
        for (int m = 16; m > 0; m >>= 1) ss += shfl_xor_f(ss, m);
        inv = rsqrt(ss / (float)hd + eps);
    }
    for (int i = 0; i < DPL; i++) {
        uint d = d0 + i;
        float a = out[i] * inv * (norm == 1 ? w[d] : 1.0f), b = pv[i] * inv;
        out[i] = d >= rot ? a : d < half_rot ? a * rc[i] - b * rs[i] : b * rs[i] + a * rc[i];
    }
}

/* fresh (attn_decq): Q, Kn and Vn are the raw projections of a decode batch (one token per
 * sequence): every warp norms and rotates its query row itself, keys before pos come from the
 * cache, and in the chunk holding pos the last warp takes the token's own key and value from Kn /
 * Vn before its cached keys; one group per (token, KV head) also writes them to the cache. This is
 * qkv_rope's work without its launch. */
inline void attn_dec_body(const int DPL, const int fresh, global const float *Q, uint t0, uint nh, uint nkv, uint hd,
                          global half *Kc, global half *Vc, global const int *tok_pos,
                          global const int *tok_seq, global const int *block_table, uint max_blocks,
                          uint block_size, int window, float scale, float softcap, uint nchunk, uint chunk,
                          global float *part_acc, global float *part_ml, global uint *cnt, global float *out,
                          global uint *xq, global float *xds, uint xq_ntok, uint tpad, local float *wml,
                          local float *wacc,
                          local float *sc, local float *red, local int *is_last, global const float *Kn,
                          global const float *Vn, global const float *qw, global const float *kw, int qk_norm,
                          int v_norm, float eps, global const float *freq, uint rot)
{
    uint c = get_group_id(0), h = get_group_id(1), tl = get_group_id(2), t = t0 + tl;
    int lid = get_local_id(0), warp = lid / 32, lane = lid % 32;
    int pos = tok_pos[t];
    int lo = window > 0 ? max(0, pos - window + 1) : 0;
    int c0 = lo + (int)(c * chunk), c1 = min(pos + 1, c0 + (int)chunk);
    size_t th = (size_t)tl * nh + h, pidx = th * nchunk + c;
    uint kh = h / (nh / nkv);
    global const float *qr = Q + ((size_t)t * nh + h) * hd + lane * DPL;
    float q[16], acc[16], rc[16], rs[16];
    if (fresh) {
        attn_fresh_rot(DPL, freq, rot, pos, lid, lane, sc, rc, rs); /* sc: free until the merge */
        attn_fresh_row(DPL, Q + ((size_t)t * nh + h) * hd, qw, qk_norm, eps, rot, hd, lane, rc, rs, q);
        for (int i = 0; i < DPL; i++) q[i] *= scale;
    } else {
        for (int i = 0; i < DPL; i += 4) {
            float4 v = vload4(0, qr + i) * scale;
            q[i] = v.x; q[i + 1] = v.y; q[i + 2] = v.z; q[i + 3] = v.w;
        }
    }
    /* fresh: the chunk holding pos takes that key from Kn (the last warp, first) */
    int has_new = fresh && c0 <= pos && c1 == pos + 1;
    if (has_new) c1 = pos;
    for (int i = 0; i < DPL; i++) acc[i] = 0.0f;
    global const int *bt = block_table + (size_t)tok_seq[t] * max_blocks;
    float m = -INFINITY, l = 0.0f;
    if (has_new && warp == ATTN_DEC_W - 1) {
        float kn[16], vn[16];
        size_t row = ((size_t)t * nkv + kh) * hd;
        attn_fresh_row(DPL, Kn + row, kw, qk_norm, eps, rot, hd, lane, rc, rs, kn);
        attn_fresh_row(DPL, Vn + row, kw, v_norm ? 2 : 0, eps, 0, hd, lane, rc, rs, vn);
        float d = 0.0f;
        for (int i = 0; i < DPL; i++) {
            kn[i] = round_f16(kn[i]);
            vn[i] = round_f16(vn[i]);
            d += q[i] * kn[i];
        }
        if (h % (nh / nkv) == 0) { /* the one writer of this (token, KV head) */
            size_t off = (((size_t)bt[pos / block_size] * nkv + kh) * block_size + pos % block_size) * hd + lane * DPL;
            for (int i = 0; i < DPL; i++) {
                vstore_half(kn[i], off + i, Kc);
                vstore_half(vn[i], off + i, Vc);
            }
        }
        for (int sh = 16; sh > 0; sh >>= 1) d += shfl_xor_f(d, sh);
        if (softcap > 0.0f) d = softcap * tanh(d / softcap);
        m = d; /* the warp's first key */
        l = 1.0f;
        for (int i = 0; i < DPL; i++) acc[i] = vn[i];
    }
    for (int j0 = c0 + warp * ATTN_DEC_KU; j0 < c1; j0 += ATTN_DEC_W * ATTN_DEC_KU) { /* uniform per warp */
        uint4 kw[ATTN_DEC_KU][2], vw[ATTN_DEC_KU][2];
        for (int i = 0; i < ATTN_DEC_KU; i++) {
            int p = min(j0 + i, c1 - 1); /* keys past the chunk reload its last one; masked below */
            size_t off = (((size_t)bt[p / block_size] * nkv + kh) * block_size + p % block_size) * hd + lane * DPL;
            for (int v = 0; v < DPL / 8; v++) {
                kw[i][v] = *(global const uint4 *)(Kc + off + 8 * v);
                vw[i][v] = *(global const uint4 *)(Vc + off + 8 * v);
            }
        }
        float s[ATTN_DEC_KU];
        for (int i = 0; i < ATTN_DEC_KU; i++) {
            float d = 0.0f;
            for (int v = 0; v < DPL / 8; v++) {
                uint4 w = kw[i][v];
                float2 a = h2f2(w.x), b = h2f2(w.y), e = h2f2(w.z), f = h2f2(w.w);
                const float *qq = q + 8 * v;
                d += qq[0] * a.x + qq[1] * a.y + qq[2] * b.x + qq[3] * b.y + qq[4] * e.x + qq[5] * e.y +
                     qq[6] * f.x + qq[7] * f.y;
            }
            s[i] = d;
        }
        for (int sh = 16; sh > 0; sh >>= 1)
            for (int i = 0; i < ATTN_DEC_KU; i++) s[i] += shfl_xor_f(s[i], sh);
        float mn = m;
        for (int i = 0; i < ATTN_DEC_KU; i++) {
            if (softcap > 0.0f) s[i] = softcap * tanh(s[i] / softcap);
            s[i] = j0 + i < c1 ? s[i] : -INFINITY;
            mn = fmax(mn, s[i]);
        }
        float corr = exp(m - mn); /* m = -inf (first round) gives 0: acc and l are 0 then */
        l *= corr;
        for (int i = 0; i < DPL; i++) acc[i] *= corr;
        for (int i = 0; i < ATTN_DEC_KU; i++) {
            float pw = exp(s[i] - mn); /* masked keys: exp(-inf) = 0 */
            l += pw;
            for (int v = 0; v < DPL / 8; v++) {
                uint4 w = vw[i][v];
                float2 a = h2f2(w.x), b = h2f2(w.y), e = h2f2(w.z), f = h2f2(w.w);
                float *aa = acc + 8 * v;
                aa[0] += pw * a.x; aa[1] += pw * a.y; aa[2] += pw * b.x; aa[3] += pw * b.y;
                aa[4] += pw * e.x; aa[5] += pw * e.y; aa[6] += pw * f.x; aa[7] += pw * f.y;
            }
        }
        m = mn;
    }
    /* the warps' (m, l, acc) into one: a warp without keys has m = -inf and weighs 0 */
    if (lane == 0) { wml[2 * warp] = m; wml[2 * warp + 1] = l; }
    for (int i = 0; i < DPL; i++) wacc[warp * hd + lane * DPL + i] = acc[i];
    barrier(CLK_LOCAL_MEM_FENCE);
    float M = -INFINITY, Lsum = 0.0f, ew[ATTN_DEC_W];
    for (int w = 0; w < ATTN_DEC_W; w++) M = fmax(M, wml[2 * w]);
    for (int w = 0; w < ATTN_DEC_W; w++) {
        ew[w] = wml[2 * w] > -INFINITY ? exp(wml[2 * w] - M) : 0.0f;
        Lsum += ew[w] * wml[2 * w + 1];
    }
    global float *orow = out + ((size_t)t * nh + h) * hd;
    global float *acc_out = nchunk == 1 ? orow : part_acc + pidx * hd;
    float inv = nchunk == 1 ? 1.0f / Lsum : 1.0f;
    for (uint d = lid; d < hd; d += 32 * ATTN_DEC_W) {
        float a = 0.0f;
        for (int w = 0; w < ATTN_DEC_W; w++) a += ew[w] * wacc[w * hd + d];
        acc_out[d] = a * inv;
    }
    if (nchunk == 1) {
        attn_dec_q8(orow, t, h, nh, hd, xq, xds, xq_ntok, tpad);
        return;
    }
    if (lid == 0) { part_ml[2 * pidx] = M; part_ml[2 * pidx + 1] = Lsum; }
    /* count this chunk in once the group's writes are visible device-wide; the last one merges */
    barrier(CLK_GLOBAL_MEM_FENCE);
    if (lid == 0) {
        fence_device();
        *is_last = atomic_inc(cnt + th) == nchunk - 1;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (!*is_last) return;
    fence_device();
    attn_merge(part_acc, part_ml, th * nchunk, hd, nchunk, orow, sc, red);
    if (lid == 0) cnt[th] = 0;
    attn_dec_q8(orow, t, h, nh, hd, xq, xds, xq_ntok, tpad);
}

/* attn_dec_DPL: head dim 32 * DPL (256 or 512), groups of 8 warps, same arguments as attn_partial
 * without its local buffers */
#define DEFINE_ATTN_DEC(DPL)                                                                      \
kernel __attribute__((reqd_work_group_size(32 * ATTN_DEC_W, 1, 1)))                              \
void attn_dec_##DPL(global const float *Q, uint t0, uint nh, uint nkv, uint hd, global const half *Kc, \
                    global const half *Vc, global const int *tok_pos, global const int *tok_seq,  \
                    global const int *block_table, uint max_blocks, uint block_size, int window,  \
                    float scale, float softcap, uint nchunk, uint chunk, global float *part_acc,  \
                    global float *part_ml, global uint *cnt, global float *out, global uint *xq,  \
                    global float *xds, uint xq_ntok, uint tpad)                                   \
{                                                                                                 \
    local float wml[2 * ATTN_DEC_W], wacc[ATTN_DEC_W * 32 * DPL], sc[ATTN_MAX_CHUNK],            \
        red[32 * ATTN_DEC_W];                                                                     \
    local int is_last;                                                                            \
    attn_dec_body(DPL, 0, Q, t0, nh, nkv, hd, (global half *)Kc, (global half *)Vc, tok_pos, tok_seq, \
                  block_table, max_blocks, block_size, window, scale, softcap, nchunk, chunk, part_acc, \
                  part_ml, cnt, out, xq, xds, xq_ntok, tpad, wml, wacc, sc, red, &is_last, Q, Q, Q, Q, 0, \
                  0, 0.0f, Q, 0);                                                                 \
}

/* attn_decq_DPL: the same from the raw projections (fresh, above), with qkv_rope's arguments after
 * attn_dec's */
#define DEFINE_ATTN_DECQ(DPL)                                                                     \
kernel __attribute__((reqd_work_group_size(32 * ATTN_DEC_W, 1, 1)))                              \
void attn_decq_##DPL(global const float *Q, uint t0, uint nh, uint nkv, uint hd, global half *Kc,  \
                     global half *Vc, global const int *tok_pos, global const int *tok_seq,       \
                     global const int *block_table, uint max_blocks, uint block_size, int window, \
                     float scale, float softcap, uint nchunk, uint chunk, global float *part_acc, \
                     global float *part_ml, global uint *cnt, global float *out, global uint *xq, \
                     global float *xds, uint xq_ntok, uint tpad, global const float *Kn,          \
                     global const float *Vn, global const float *qw, global const float *kw,      \
                     int qk_norm, int v_norm, float eps, global const float *freq, uint rot)      \
{                                                                                                 \
    local float wml[2 * ATTN_DEC_W], wacc[ATTN_DEC_W * 32 * DPL], sc[ATTN_MAX_CHUNK],            \
        red[32 * ATTN_DEC_W];                                                                     \
    local int is_last;                                                                            \
    attn_dec_body(DPL, 1, Q, t0, nh, nkv, hd, Kc, Vc, tok_pos, tok_seq, block_table, max_blocks,  \
                  block_size, window, scale, softcap, nchunk, chunk, part_acc, part_ml, cnt, out, \
                  xq, xds, xq_ntok, tpad, wml, wacc, sc, red, &is_last, Kn, Vn, qw, kw, qk_norm,  \
                  v_norm, eps, freq, rot);                                                        \
}

DEFINE_ATTN_DEC(8)
DEFINE_ATTN_DEC(16)
DEFINE_ATTN_DECQ(8)
DEFINE_ATTN_DECQ(16)

#endif /* CLG_NVIDIA */
