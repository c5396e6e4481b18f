/* attn_decm.cl — split-KV attention for decode-shaped batches on NVIDIA tensor cores: the q heads of
 * one KV head are the 8 columns of each product, so a K or V row is read once per KV head where
 * attn_dec reads it once per q head.
 *   - A group (4 warps) takes one (chunk of keys, token, KV head, 8 of its q heads, DM_DV output
 *     dims); warp w takes the chunk's 16-key steps w, w + 4, ...
 *   - Scores S (heads x 8 keys) = Q K^T on m16n8k16, the heads as rows (rows 8-15 zero): Q as f16
 *     from local memory, K's fragments straight from the cache, a lane 32 bytes of one key row a
 *     64-dim block (the dims of a k-step permuted alike in Q and K: the dot product is a sum).
 *   - O^T (dims x heads) += V^T P^T on m16n8k16, the heads as columns: two 8-key score tiles'
 *     accumulators are P^T's fragment as they stand; V^T's fragments come from 32-byte pieces of
 *     four key rows a lane (a tile's dims permuted so that a lane's 16 dims are contiguous).
 *   - Online softmax per warp in the exp2 domain (as attn_fa), the warps merged through local
 *     memory into attn_dec's partial layout (a chunk's row per head, its max and sum).
 * attn_decm_merge then merges each (token, head)'s chunks in a group of its own, with attn_dec's int8
 * output for the next product: a group merging its KV head's 8 rows of 64 chunks at the end, as
 * attn_dec's last group does for its one row, held the launch for a serial read of 1 MB. */

#ifdef CLG_NVIDIA

#define DM_W 4      /* warps per group */
#define DM_DV 256   /* output dims per group: head dim 512 takes two groups, which share K in L2 */
#define DM_QS 8     /* f16 Q rows' padding (halves): the 8 heads' rows start on different banks */
#define DM_MC 8     /* chunks a merging item reads at a time */

/* two halves, one from each word: lo from a, hi from b (the low halves if lo_half, else the high) */
inline uint dm_pair(uint a, uint b, int lo_half)
{
    return lo_half ? (a & 0xffffu) | (b << 16) : (a >> 16) | (b & 0xffff0000u);
}

/* half i (0-7) of each of two 8-half pieces, paired */
inline uint dm_pick(uint4 a, uint4 b, int i)
{
    uint wa = i < 2 ? a.x : i < 4 ? a.y : i < 6 ? a.z : a.w, wb = i < 2 ? b.x : i < 4 ? b.y : i < 6 ? b.z : b.w;
    return dm_pair(wa, wb, (i & 1) == 0);
}

/* lane's value of float v from lane src (PTX shfl.sync.idx) */
inline float dm_shfl(float v, int src)
{
    uint r;
    asm volatile("shfl.sync.idx.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(r) : "r"(as_uint(v)), "r"(src));
    return as_float(r);
}

#define DEFINE_ATTN_DECM(HD)                                                                      \
kernel __attribute__((reqd_work_group_size(32 * DM_W, 1, 1)))                                    \
void attn_decm_##HD(global const float *Q, uint t0, uint nh, uint nkv, uint hd, global const half *Kc, \
                    global const half *Vc, global const int *tok_pos, global const int *tok_seq,  \
                    global const int *block_table, uint max_blocks, uint block_size, int window,  \
                    float scale, float softcap, uint nchunk, uint chunk, global float *part_acc,  \
                    global float *part_ml)                                                        \
{                                                                                                 \
    local uint4 qs[8 * (HD + DM_QS) / 8];                                                         \
    local float wo[8 * DM_DV], wm[DM_W * 8], wl[DM_W * 8];                                        \
    const uint ndv = HD / DM_DV;                                                                  \
    int lid = get_local_id(0), warp = lid / 32, lane = lid % 32, g = lane / 4, t = lane % 4;      \
    uint c = get_group_id(0) / ndv, dv0 = get_group_id(0) % ndv * DM_DV;                          \
    uint G = nh / nkv, nhg = G / 8; /* G: a multiple of 8 (the host's rule) */                    \
    uint kh = get_group_id(1) / nhg, h0 = kh * G + get_group_id(1) % nhg * 8;                     \
    uint tl = get_group_id(2), tk = t0 + tl;                                                      \
    int pos = tok_pos[tk];                                                                        \
    int lo = window > 0 ? max(0, pos - window + 1) : 0;                                           \
    int c0 = lo + (int)(c * chunk), c1 = min(pos + 1, c0 + (int)chunk);                           \
    /* the group's q heads as f16 rows */                                                         \
    local uint *qw = (local uint *)qs;                                                            \
    for (uint i = lid; i < 8 * HD / 2; i += 32 * DM_W) {                                          \
        uint hh = i / (HD / 2), d = i % (HD / 2) * 2;                                             \
        float2 v = vload2(0, Q + ((size_t)tk * nh + h0 + hh) * HD + d);                           \
        qw[hh * ((HD + DM_QS) / 2) + d / 2] = pack_h2(v.x, v.y);                                  \
    }                                                                                             \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                 \
    global const int *bt = block_table + (size_t)tok_seq[tk] * max_blocks;                        \
    float4 o[DM_DV / 16];                                                                         \
    for (int i = 0; i < DM_DV / 16; i++) o[i] = (float4)(0.0f);                                   \
    float m = -INFINITY, l = 0.0f; /* head g's running max (log2 domain) and this lane's sum */   \
    const float sl2 = scale * M_LOG2E_F, cap = softcap > 0.0f ? softcap : 1.0f;                   \
    local const uint4 *qrow = qs + g * (HD + DM_QS) / 8 + 2 * t;                                  \
    for (int j0 = c0 + warp * 16; j0 < c1; j0 += DM_W * 16) { /* uniform per warp */              \
        global const uint4 *va = (global const uint4 *)(Vc + DM_ROW(min(j0 + 2 * t, c1 - 1), HD) + dv0);     \
        global const uint4 *vb = (global const uint4 *)(Vc + DM_ROW(min(j0 + 2 * t + 1, c1 - 1), HD) + dv0); \
        global const uint4 *vc = (global const uint4 *)(Vc + DM_ROW(min(j0 + 2 * t + 8, c1 - 1), HD) + dv0); \
        global const uint4 *vd = (global const uint4 *)(Vc + DM_ROW(min(j0 + 2 * t + 9, c1 - 1), HD) + dv0); \
        /* V first, so its loads are in flight with K's (they wait on nothing): rows j0 + 2t, +1,  \
         * +8, +9 (past the chunk: its last key, weighted 0), dims 128 B + 16 g .. + 15 of each */ \
        uint4 vr[DM_DV / 128][8];                                                                 \
        for (int B = 0; B < DM_DV / 128; B++) {                                                   \
            int w = 16 * B + 2 * g;                                                               \
            vr[B][0] = va[w]; vr[B][1] = va[w + 1]; vr[B][2] = vb[w]; vr[B][3] = vb[w + 1];       \
            vr[B][4] = vc[w]; vr[B][5] = vc[w + 1]; vr[B][6] = vd[w]; vr[B][7] = vd[w + 1];       \
        }                                                                                         \
        /* scores of keys j0 + 2t, +1 (s0) and j0 + 8 + 2t, +1 (s1) for head g */                  \
        global const uint4 *k0 = (global const uint4 *)(Kc + DM_ROW(min(j0 + g, c1 - 1), HD));         \
        global const uint4 *k1 = (global const uint4 *)(Kc + DM_ROW(min(j0 + 8 + g, c1 - 1), HD));     \
        float4 s0 = (float4)(0.0f), s1 = (float4)(0.0f);                                          \
        for (int b = 0; b < HD / 64; b++) {                                                       \
            uint4 ka = k0[8 * b + 2 * t], kb = k0[8 * b + 2 * t + 1];                             \
            uint4 kc = k1[8 * b + 2 * t], kd = k1[8 * b + 2 * t + 1];                             \
            uint4 qa = qrow[8 * b], qb = qrow[8 * b + 1];                                         \
            s0 = mma_16816(s0, qa.x, 0u, qa.y, 0u, ka.x, ka.y);                                   \
            s1 = mma_16816(s1, qa.x, 0u, qa.y, 0u, kc.x, kc.y);                                   \
            s0 = mma_16816(s0, qa.z, 0u, qa.w, 0u, ka.z, ka.w);                                   \
            s1 = mma_16816(s1, qa.z, 0u, qa.w, 0u, kc.z, kc.w);                                   \
            s0 = mma_16816(s0, qb.x, 0u, qb.y, 0u, kb.x, kb.y);                                   \
            s1 = mma_16816(s1, qb.x, 0u, qb.y, 0u, kd.x, kd.y);                                   \
            s0 = mma_16816(s0, qb.z, 0u, qb.w, 0u, kb.z, kb.w);                                   \
            s1 = mma_16816(s1, qb.z, 0u, qb.w, 0u, kd.z, kd.w);                                   \
        }                                                                                         \
        float x[4] = { s0.x, s0.y, s1.x, s1.y };                                                  \
        float mx = m;                                                                             \
        for (int e = 0; e < 4; e++) {                                                             \
            int key = j0 + 2 * t + (e & 1) + (e >> 1) * 8;                                        \
            float y = softcap > 0.0f ? cap * tanh(x[e] * scale / cap) * M_LOG2E_F : x[e] * sl2;   \
            x[e] = key < c1 ? y : -INFINITY;                                                      \
            mx = fmax(mx, x[e]);                                                                  \
        }                                                                                         \
        mx = fmax(mx, shfl_xor_f(mx, 1));                                                         \
        mx = fmax(mx, shfl_xor_f(mx, 2));                                                         \
        float bm = mx == -INFINITY ? 0.0f : mx, corr = native_exp2(m - bm);                       \
        m = mx;                                                                                   \
        for (int e = 0; e < 4; e++) x[e] = native_exp2(x[e] - bm);                                \
        l = l * corr + x[0] + x[1] + x[2] + x[3];                                                 \
        /* O^T's columns are heads 2t and 2t + 1: their rescale from the lanes holding them */    \
        float ca = dm_shfl(corr, 8 * t), cb = dm_shfl(corr, 8 * t + 4);                           \
        for (int i = 0; i < DM_DV / 16; i++) o[i] *= (float4)(ca, cb, ca, cb);                    \
        uint p0 = pack_h2(x[0], x[1]), p1 = pack_h2(x[2], x[3]);                                  \
        for (int B = 0; B < DM_DV / 128; B++)                                                     \
            for (int i = 0; i < 8; i++)                                                           \
                o[8 * B + i] = mma_16816(o[8 * B + i], dm_pick(vr[B][0], vr[B][2], i), dm_pick(vr[B][1], vr[B][3], i), \
                                         dm_pick(vr[B][4], vr[B][6], i), dm_pick(vr[B][5], vr[B][7], i), p0, p1); \
    }                                                                                             \
    l += shfl_xor_f(l, 1);                                                                        \
    l += shfl_xor_f(l, 2);                                                                        \
    if (t == 0) { wm[warp * 8 + g] = m; wl[warp * 8 + g] = l; }                                   \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                 \
    /* this warp's weight for heads 2t and 2t + 1: e^(m_warp - m_group) in the exp2 domain */     \
    float fw[2];                                                                                  \
    for (int k = 0; k < 2; k++) {                                                                 \
        int hh = 2 * t + k;                                                                       \
        float Mk = -INFINITY, mw = wm[warp * 8 + hh];                                             \
        for (int w = 0; w < DM_W; w++) Mk = fmax(Mk, wm[w * 8 + hh]);                             \
        fw[k] = mw > -INFINITY ? native_exp2(mw - Mk) : 0.0f;                                     \
    }                                                                                             \
    /* the warps' O^T into wo (head-major), one warp at a time */                                 \
    for (int w = 0; w < DM_W; w++) {                                                              \
        if (warp == w)                                                                            \
            for (int B = 0; B < DM_DV / 128; B++)                                                 \
                for (int i = 0; i < 8; i++) {                                                     \
                    int d = 128 * B + 16 * g + i;                                                 \
                    float4 v = o[8 * B + i] * (float4)(fw[0], fw[1], fw[0], fw[1]);               \
                    local float *ra = wo + (2 * t) * DM_DV + d, *rb = wo + (2 * t + 1) * DM_DV + d; \
                    if (w == 0) { ra[0] = v.x; rb[0] = v.y; ra[8] = v.z; rb[8] = v.w; }           \
                    else { ra[0] += v.x; rb[0] += v.y; ra[8] += v.z; rb[8] += v.w; }              \
                }                                                                                 \
        barrier(CLK_LOCAL_MEM_FENCE);                                                             \
    }                                                                                             \
    /* the chunk's row per head, and its max (natural log) and sum from the first dims' group */  \
    for (uint i = lid; i < 8 * DM_DV; i += 32 * DM_W) {                                           \
        uint hh = i / DM_DV, d = i % DM_DV;                                                       \
        size_t pidx = ((size_t)tl * nh + h0 + hh) * nchunk + c;                                   \
        part_acc[pidx * HD + dv0 + d] = wo[hh * DM_DV + d];                                       \
        if (d == 0 && dv0 == 0) {                                                                 \
            float Mh = -INFINITY, Lh = 0.0f;                                                      \
            for (int w = 0; w < DM_W; w++) Mh = fmax(Mh, wm[w * 8 + hh]);                         \
            for (int w = 0; w < DM_W; w++)                                                        \
                Lh += wm[w * 8 + hh] > -INFINITY ? native_exp2(wm[w * 8 + hh] - Mh) * wl[w * 8 + hh] : 0.0f; \
            part_ml[2 * pidx] = Mh * M_LN2_F;                                                     \
            part_ml[2 * pidx + 1] = Lh;                                                           \
        }                                                                                         \
    }                                                                                             \
}

/* where key p of the group's KV head starts in the paged cache (halves) */
#define DM_ROW(p, HD) ((((size_t)bt[(p) / block_size] * nkv + kh) * block_size + (p) % block_size) * HD)

DEFINE_ATTN_DECM(256)
DEFINE_ATTN_DECM(512)

/* the chunks of (token t0 + z, head y) into its output row: a group of hd / 4 items, 4 dims each;
 * then the row as the output projection's int8 X where xq_ntok > 0 (attn_dec_q8) */
kernel void attn_decm_merge(global const float *part_acc, global const float *part_ml, uint t0, uint nh, uint hd,
                            uint nchunk, global float *out, global uint *xq, global float *xds, uint xq_ntok,
                            uint tpad)
{
    uint lid = get_local_id(0), h = get_group_id(1), tl = get_group_id(2), t = t0 + tl;
    size_t base = ((size_t)tl * nh + h) * nchunk;
    global const float *pm = part_ml + 2 * base, *pa = part_acc + base * hd + 4 * lid;
    /* DM_MC chunks' loads in flight at a time: the chain of round trips, not bytes, is what costs */
    float M = -INFINITY, den = 0.0f;
    for (uint c = 0; c < nchunk; c += DM_MC) {
        float mc[DM_MC];
        for (int i = 0; i < DM_MC; i++) mc[i] = c + i < nchunk ? pm[2 * (c + i)] : -INFINITY;
        for (int i = 0; i < DM_MC; i++) M = fmax(M, mc[i]);
    }
    float4 acc = (float4)(0.0f);
    for (uint c = 0; c < nchunk; c += DM_MC) {
        float w[DM_MC];
        float4 v[DM_MC];
        for (int i = 0; i < DM_MC; i++) { /* an empty chunk (max -inf) or one past the end weighs 0 */
            uint ci = min(c + i, nchunk - 1);
            float mi = pm[2 * ci];
            w[i] = c + i < nchunk && mi > -INFINITY ? exp(mi - M) : 0.0f;
            v[i] = vload4(0, pa + (size_t)ci * hd);
            den += w[i] * pm[2 * ci + 1];
        }
        for (int i = 0; i < DM_MC; i++) acc += w[i] > 0.0f ? w[i] * v[i] : (float4)(0.0f);
    }
    global float *orow = out + ((size_t)t * nh + h) * hd;
    vstore4(acc / den, lid, orow);
    attn_dec_q8(orow, t, h, nh, hd, xq, xds, xq_ntok, tpad);
}

#endif /* CLG_NVIDIA */
