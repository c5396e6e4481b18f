/* attn_prefill.cl — prefill attention on NVIDIA tensor cores (attn_fa{4,8}_HD, head dims 128 / 256 /
 * 512): one work-group takes a tile of consecutive tokens of one sequence and every query head of
 * one KV head, walks the keys one KV block (32 keys) at a time and keeps the softmax online, so
 * scores never leave registers and each K/V block is read once per tile, not once per (token, head).
 *   - Rows: the tile's 16 * NW query rows are (token, head-of-group) pairs, token-major, 16 per warp
 *     (NW = 4 or 8 warps); with G = nh / nkv heads per KV head a tile holds 16 * NW / G tokens.
 *   - S = Q K^T and O += P V on mma m16n8k16: P comes from the S accumulators (the C layout of two
 *     8-key tiles is the A layout of one 16-key step), K and V^T fragments by ldmatrix (V^T
 *     transposed); softmax in the exp2 domain, row max and sum across the 4 lanes holding a row.
 *   - One group covers DV = min(HD, 256) output dims, so the scores are computed once per 256 dims.
 *   - K and V blocks go global -> local by cp.async (K first, V while the scores are computed),
 *     rows swizzled in 16-byte pieces (piece c of key row r at c ^ (r & 7)) so that ldmatrix's K
 *     and V^T fragments are free of bank conflicts.
 *   - Q comes as the score products' A fragments in the order the warps read them (attn_fa_q):
 *     one 16-byte load a lane per 16 dims, the warp's 512 bytes contiguous, nothing converted per
 *     block.
 * Keys of an edge block outside the tile's span are zeroed in the staged V (unwritten cache slots
 * may hold NaN, and 0 x NaN is NaN); their scores are masked to -inf. */

#ifdef CLG_NVIDIA

#define FA_KEYS 32 /* keys per block: one KV-cache block */

/* Q rows [t0, t0 + ntok) (f32, nh * hd a token) as attn_fa's A fragments: uint4 (tile, kv head,
 * warp, 16-dim step, lane) holds rows r0 = 16 w + g and r1 = r0 + 8 of the tile (token r / G, head
 * kh * G + r % G), dims d + 2t, +1 and d + 8 + 2t, +1 (g = lane / 4, t = lane % 4): a0 a1 a2 a3 of
 * the mma. Rows past the run are zero (their scores are masked). Item: (lane + 32 * step, block). */
kernel void attn_fa_q(global const float *Q, uint t0, uint ntok, uint nh, uint nkv, uint hd, uint nw,
                      global uint4 *Qf)
{
    uint lane = get_global_id(0) % 32, ds = get_global_id(0) / 32, blk = get_global_id(1);
    if (ds >= hd / 16) return;
    uint w = blk % nw, kh = blk / nw % nkv, tile = blk / nw / nkv, G = nh / nkv, tq = 16 * nw / G;
    uint g = lane / 4, t = lane % 4, d = 16 * ds + 2 * t;
    float2 x[2][2] = { { (float2)(0.0f), (float2)(0.0f) }, { (float2)(0.0f), (float2)(0.0f) } };
    for (int h = 0; h < 2; h++) {
        uint r = 16 * w + g + 8 * h, tk = tile * tq + r / G;
        if (tk >= ntok) continue;
        global const float *q = Q + ((size_t)(t0 + tk) * nh + kh * G + r % G) * hd + d;
        x[h][0] = vload2(0, q);
        x[h][1] = vload2(0, q + 8);
    }
    Qf[((size_t)blk * (hd / 16) + ds) * 32 + lane] =
        (uint4)(pack_h2(x[0][0].x, x[0][0].y), pack_h2(x[1][0].x, x[1][0].y), pack_h2(x[0][1].x, x[0][1].y),
                pack_h2(x[1][1].x, x[1][1].y));
}

#define DEFINE_FA(NW, HD, DV)                                                                     \
kernel __attribute__((reqd_work_group_size(32 * NW, 1, 1)))                                      \
void attn_fa##NW##_##HD(global const uint4 *Qf, uint t0, uint ntok, uint nh, uint nkv, global const half *Kc, \
                  global const half *Vc, global const int *tok_pos, global const int *tok_seq,    \
                  global const int *block_table, uint max_blocks, int window, float scale,        \
                  float softcap, global float *out)                                               \
{                                                                                                 \
    local uint4 ks[FA_KEYS * HD / 8], vs[FA_KEYS * DV / 8];                                       \
    int lid = get_local_id(0), warp = lid / 32, lane = lid % 32, g = lane / 4, t = lane % 4;      \
    uint G = nh / nkv, tq = 16 * NW / G;                                                          \
    uint kh = get_group_id(1), dv0 = get_group_id(2) * DV;                                        \
    uint ta = get_group_id(0) * tq, tb = min(ntok, ta + tq);                                      \
    uint r0 = warp * 16 + g, r1 = r0 + 8;                                                         \
    uint tk0 = ta + r0 / G, tk1 = ta + r1 / G, h0 = kh * G + r0 % G, h1 = kh * G + r1 % G;        \
    int ok0 = tk0 < tb, ok1 = tk1 < tb;                                                           \
    int p0 = ok0 ? tok_pos[t0 + tk0] : -1, p1 = ok1 ? tok_pos[t0 + tk1] : -1;                     \
    int lo0 = window > 0 ? max(0, p0 - window + 1) : 0, lo1 = window > 0 ? max(0, p1 - window + 1) : 0; \
    global const uint4 *qf = Qf + ((size_t)(get_group_id(0) * nkv + kh) * NW + warp) * (HD / 16) * 32 + lane; \
    int pa = tok_pos[t0 + ta], pb = tok_pos[t0 + tb - 1];                                         \
    int kmin = window > 0 ? max(0, pa - window + 1) : 0, kmax = pb;                               \
    global const int *bt = block_table + (size_t)tok_seq[t0 + ta] * max_blocks;                   \
                                                                                                  \
    float4 o[DV / 8];                                                                             \
    for (int n = 0; n < DV / 8; n++) o[n] = (float4)(0.0f);                                       \
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;                                   \
    const float sl2 = scale * M_LOG2E_F, cap = softcap > 0.0f ? softcap : 1.0f;                   \
    /* this lane's ldmatrix row of K: key 8j + (lane & 7) of piece (lane >> 3) of 4 */            \
    local const uint4 *krow = ks + (lane & 7) * (HD / 8);                                         \
    int km = lane >> 3, ksw = lane & 7;                                                           \
                                                                                                  \
    int kb0 = kmin / FA_KEYS * FA_KEYS;                                                           \
    FA_LOAD_K(kb0, HD, NW)                                                                        \
    cp_async_commit();                                                                            \
    FA_LOAD_V(kb0, HD, DV, NW)                                                                    \
    cp_async_commit();                                                                            \
    for (int kb = kb0; kb <= kmax; kb += FA_KEYS) {                                               \
        cp_async_wait1(); /* K of this block (V may still be on its way) */                       \
        barrier(CLK_LOCAL_MEM_FENCE);                                                             \
        float4 s[4];                                                                              \
        for (int j = 0; j < 4; j++) s[j] = (float4)(0.0f);                                        \
        for (int d = 0; d < HD; d += 32) {                                                        \
            uint4 qa = qf[(d / 16) * 32], qb = qf[(d / 16 + 1) * 32];                             \
            uint b[4][4];                                                                         \
            for (int j = 0; j < 4; j++)                                                           \
                ldsm_x4(krow + 8 * j * (HD / 8) + ((d / 8 + km) ^ ksw), &b[j][0], &b[j][1], &b[j][2], &b[j][3]); \
            for (int j = 0; j < 4; j++) s[j] = mma_16816(s[j], qa.x, qa.y, qa.z, qa.w, b[j][0], b[j][1]); \
            for (int j = 0; j < 4; j++) s[j] = mma_16816(s[j], qb.x, qb.y, qb.z, qb.w, b[j][2], b[j][3]); \
        }                                                                                         \
        barrier(CLK_LOCAL_MEM_FENCE); /* every warp is done with this K */                        \
        if (kb + FA_KEYS <= kmax) { FA_LOAD_K(kb + FA_KEYS, HD, NW) }                             \
        cp_async_commit();                                                                        \
        FA_SOFTMAX(DV)                                                                            \
        cp_async_wait1(); /* V of this block */                                                   \
        barrier(CLK_LOCAL_MEM_FENCE);                                                             \
        if (kb < kmin || kb + FA_KEYS - 1 > kmax) {                                               \
            for (int i = lid; i < FA_KEYS * DV / 8; i += 32 * NW) {                               \
                int key = kb + i / (DV / 8);                                                      \
                if (key < kmin || key > kmax) vs[i] = (uint4)(0);                                 \
            }                                                                                     \
            barrier(CLK_LOCAL_MEM_FENCE);                                                         \
        }                                                                                         \
        for (int kk = 0; kk < 2; kk++) {                                                          \
            uint a0 = pack_h2(s[2 * kk].x, s[2 * kk].y), a1 = pack_h2(s[2 * kk].z, s[2 * kk].w);  \
            uint a2 = pack_h2(s[2 * kk + 1].x, s[2 * kk + 1].y);                                  \
            uint a3 = pack_h2(s[2 * kk + 1].z, s[2 * kk + 1].w);                                  \
            int vr = 16 * kk + (lane >> 3 & 1) * 8 + (lane & 7); /* this lane's ldmatrix row */    \
            for (int n2 = 0; n2 < DV / 16; n2++) {                                                \
                uint b00, b01, b10, b11;                                                          \
                int c = 2 * n2 + (lane >> 4);                                                     \
                ldsm_x4_t(vs + vr * (DV / 8) + (c ^ (vr & 7)), &b00, &b01, &b10, &b11);           \
                o[2 * n2] = mma_16816(o[2 * n2], a0, a1, a2, a3, b00, b01);                       \
                o[2 * n2 + 1] = mma_16816(o[2 * n2 + 1], a0, a1, a2, a3, b10, b11);               \
            }                                                                                     \
        }                                                                                         \
        barrier(CLK_LOCAL_MEM_FENCE); /* every warp is done with this V */                        \
        if (kb + FA_KEYS <= kmax) { FA_LOAD_V(kb + FA_KEYS, HD, DV, NW) }                         \
        cp_async_commit();                                                                        \
    }                                                                                             \
    l0 += shfl_xor_f(l0, 1);                                                                      \
    l0 += shfl_xor_f(l0, 2);                                                                      \
    l1 += shfl_xor_f(l1, 1);                                                                      \
    l1 += shfl_xor_f(l1, 2);                                                                      \
    global float *y0 = out + ((size_t)(t0 + tk0) * nh + h0) * HD + dv0 + 2 * t;                   \
    global float *y1 = out + ((size_t)(t0 + tk1) * nh + h1) * HD + dv0 + 2 * t;                   \
    for (int n = 0; n < DV / 8; n++) {                                                            \
        if (ok0) vstore2((float2)(o[n].x, o[n].y) / l0, 0, y0 + 8 * n);                           \
        if (ok1) vstore2((float2)(o[n].z, o[n].w) / l1, 0, y1 + 8 * n);                           \
    }                                                                                             \
}

/* K block of keys from kb: 32 rows x HD/8 pieces; V: the group's DV dims of the same rows */
#define FA_LOAD_K(kb, HD, NW)                                                                     \
    {                                                                                             \
        global const uint4 *src = (global const uint4 *)(Kc + ((size_t)bt[(kb) / FA_KEYS] * nkv + kh) * FA_KEYS * HD); \
        for (int i = lid; i < FA_KEYS * HD / 8; i += 32 * NW) {                                       \
            int row = i / (HD / 8), c = i % (HD / 8);                                             \
            cp_async16(ks + row * (HD / 8) + (c ^ (row & 7)), src + i);                           \
        }                                                                                         \
    }
#define FA_LOAD_V(kb, HD, DV, NW)                                                                 \
    {                                                                                             \
        global const uint4 *src = (global const uint4 *)(Vc + ((size_t)bt[(kb) / FA_KEYS] * nkv + kh) * FA_KEYS * HD + dv0); \
        for (int i = lid; i < FA_KEYS * DV / 8; i += 32 * NW) {                                       \
            int row = i / (DV / 8), c = i % (DV / 8);                                             \
            cp_async16(vs + row * (DV / 8) + (c ^ (row & 7)), src + row * (HD / 8) + c);          \
        }                                                                                         \
    }

/* scale, cap and mask the scores (log2 domain), new row maxima, P = exp2(S - max) in s, running
 * sums l and the rescale of o */
#define FA_SOFTMAX(DV)                                                                            \
    {                                                                                             \
        float mx0 = m0, mx1 = m1;                                                                 \
        for (int j = 0; j < 4; j++) {                                                             \
            int key = kb + 8 * j + 2 * t;                                                         \
            float v[4] = { s[j].x, s[j].y, s[j].z, s[j].w };                                      \
            for (int e = 0; e < 4; e++) {                                                         \
                float x = softcap > 0.0f ? cap * tanh(v[e] * scale / cap) * M_LOG2E_F : v[e] * sl2; \
                int kp = key + (e & 1), lo = e < 2 ? lo0 : lo1, hi = e < 2 ? p0 : p1;             \
                v[e] = kp >= lo && kp <= hi ? x : -INFINITY;                                      \
            }                                                                                     \
            s[j] = (float4)(v[0], v[1], v[2], v[3]);                                              \
            mx0 = fmax(mx0, fmax(v[0], v[1]));                                                    \
            mx1 = fmax(mx1, fmax(v[2], v[3]));                                                    \
        }                                                                                         \
        mx0 = fmax(mx0, shfl_xor_f(mx0, 1));                                                      \
        mx0 = fmax(mx0, shfl_xor_f(mx0, 2));                                                      \
        mx1 = fmax(mx1, shfl_xor_f(mx1, 1));                                                      \
        mx1 = fmax(mx1, shfl_xor_f(mx1, 2));                                                      \
        float b0 = mx0 == -INFINITY ? 0.0f : mx0, b1 = mx1 == -INFINITY ? 0.0f : mx1;             \
        float c0 = native_exp2(m0 - b0), c1 = native_exp2(m1 - b1);                               \
        m0 = mx0;                                                                                 \
        m1 = mx1;                                                                                 \
        for (int j = 0; j < 4; j++) {                                                             \
            s[j] = (float4)(native_exp2(s[j].x - b0), native_exp2(s[j].y - b0), native_exp2(s[j].z - b1), \
                            native_exp2(s[j].w - b1));                                            \
            l0 = l0 * (j ? 1.0f : c0) + s[j].x + s[j].y;                                          \
            l1 = l1 * (j ? 1.0f : c1) + s[j].z + s[j].w;                                          \
        }                                                                                         \
        for (int n = 0; n < DV / 8; n++) o[n] *= (float4)(c0, c0, c1, c1);                        \
    }

/* 4 and 8 warps a group (FA_WARPS): 8 read each K and V block for twice the query rows */
DEFINE_FA(4, 128, 128)
DEFINE_FA(4, 256, 256)
DEFINE_FA(4, 512, 256)
DEFINE_FA(8, 128, 128)
DEFINE_FA(8, 256, 256)
DEFINE_FA(8, 512, 256)

#endif /* CLG_NVIDIA */
