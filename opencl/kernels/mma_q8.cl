/* mma_q8.cl — batched decode products (5-256 tokens) on int8 tensor cores, NVIDIA (inline PTX
 * mma.sync m16n8k32, int32 accumulate).
 *
 * The f16 products (mmqs) read X as f32 from L2 per warp and per use (many times the weight bytes
 * at 16 tokens) and unpack every weight into floats. Here X is quantized once per product
 * (quant_q8.cl's q8x_quant: int8 per 32 values, as llama.cpp's q8_1) and the weights stay
 * integers: nibbles or bytes go straight from their GGUF blocks into A fragments (types_q8.cl).
 *
 * One mma covers 16 weight rows x 8 tokens x one 32-value sub-block, so each block scale applies
 * to its int32 result once: Y += d_w * d_x * (q_w . q_x) - m_w * (d_x * sum q_x), where m_w is
 * q4_k's / q5_k's sub-block min or q5_0's 16 * d (its values are stored plus 16); q8_0 has no m
 * term, and q6_k (values made signed) a scale per 16 values: two mmas (mmq8_mac_q6_k).
 *
 * The k order inside a 32-step is free as long as A and B agree: thread (g = lane / 4, t = lane %
 * 4) takes values 8t..8t+7 of each sub-block (slots 4t..4t+3 <- values 8t..8t+3, slots
 * 16+4t..16+4t+3 <- 8t+4..8t+7), so its X is one 8-byte load and its q4_k nibbles one 8-byte load
 * that serves two sub-blocks (low and high nibbles). q4_k has kernels of its own, mmq8s and mmq8p
 * (below); mmq8_T serves the other int8 types.
 *
 * A work-group takes 16 * MMQ8_MT rows and 8 * NT tokens (NT token tiles of 8: 1, 2, 4, 8; past
 * 64 tokens the grid's second dimension takes the next 64, so weights are read once per 64); its
 * warps split k in units of 64 values (two sub-blocks; warp w takes units w, w + nw, ...) and add
 * their partial tiles through local memory. */

#ifdef CLG_NVIDIA

#define MMQ8_MT 2 /* 16-row tiles per warp (OPS_MMQ8_ROWS = 32 rows per group on the host) */
/* the loops over a warp's tiles unrolled, so its accumulators stay in registers (indexed by loop
 * variables they would live in local memory) */
#define UNROLL _Pragma("unroll")

/* one mma's int32 tile c (rows g, g + 8 x tokens 2t, 2t + 1) into the float tile acc with the block
 * scales: rows' d0, d1 and offsets m0, m1; x = the tokens' (d, d * sum) pairs */
inline float4 mmq8_scale_add(float4 acc, int4 c, float4 x, float d0, float d1, float m0, float m1)
{
    return acc + (float4)((float)c.x * (d0 * x.x) - m0 * x.y, (float)c.y * (d0 * x.z) - m0 * x.w,
                          (float)c.z * (d1 * x.x) - m1 * x.y, (float)c.w * (d1 * x.z) - m1 * x.w);
}

/* warp 0's finished tiles acc[MT_][NT_] into Y (rows past n_rows and tokens past ntok dropped):
 * c0, c1 are row g, tokens 2t, 2t + 1; c2, c3 row g + 8 */
#define MMQ8_STORE(MT_, NT_)                                                                      \
    UNROLL for (int i = 0; i < (MT_); i++)                                                               \
        UNROLL for (int j = 0; j < (NT_); j++)                                                           \
            UNROLL for (int h = 0; h < 2; h++) {                                                         \
                uint r = r0 + 16 * i + 8 * h + g, tk = 8 * j + 2 * t;                             \
                if (r >= n_rows) continue;                                                        \
                float v0 = h ? acc[i][j].z : acc[i][j].x, v1 = h ? acc[i][j].w : acc[i][j].y;     \
                if (tk < ntok) Y[(size_t)tk * ldy + r] = v0;                                      \
                if (tk + 1 < ntok) Y[(size_t)(tk + 1) * ldy + r] = v1;                            \
            }

/* one sub-block's mma of rows g (qa) and g + 8 (qb) against a token tile (xb) with its scales added
 * into acc: per type, as its values are stored (u8: plus an offset m; s8: signed) */
#define DEFINE_MMQ8_MAC(T, MMA)                                                                   \
inline float4 mmq8_mac_##T(float4 acc, uint2 qa, uint2 qb, uint2 xb, float4 x, float d0, float d1,  \
                           float m0, float m1, int t)                                             \
{                                                                                                 \
    return mmq8_scale_add(acc, MMA(qa.x, qb.x, qa.y, qb.y, xb.x, xb.y), x, d0, d1, m0, m1);       \
}
DEFINE_MMQ8_MAC(q8_0, mma8_s8)
DEFINE_MMQ8_MAC(q5_0, mma8_u8)
DEFINE_MMQ8_MAC(q5_k, mma8_u8)

/* q6_k has a scale per 16 values (d: values 0-15, e: 16-31, passed as m): lanes t < 2 hold values
 * 0-15 of the sub-block, t >= 2 values 16-31, so one mma with the upper lanes' A zeroed and one
 * with the lower lanes' keeps X's fragments and layout those of the other types */
inline float4 mmq8_mac_q6_k(float4 acc, uint2 qa, uint2 qb, uint2 xb, float4 x, float d0, float d1, float e0,
                            float e1, int t)
{
    uint lo = t < 2 ? ~0u : 0u, hi = ~lo;
    int4 c = mma8_s8(qa.x & lo, qb.x & lo, qa.y & lo, qb.y & lo, xb.x, xb.y);
    int4 c2 = mma8_s8(qa.x & hi, qb.x & hi, qa.y & hi, qb.y & hi, xb.x, xb.y);
    return mmq8_scale_add(mmq8_scale_add(acc, c, x, d0, d1, 0.0f, 0.0f), c2, x, e0, e1, 0.0f, 0.0f);
}

/* NT token tiles of 8 (8 * NT tokens a group); group (r, kg * b + kk) takes rows 32r.., tokens 64b..
 * (b > 0 only at NT 8) and slice kk of k's kg: with kg > 1 each slice writes its partial Y (ntok rows
 * of ldy, slice kk's after kk * ntok rows) for mmq8_sum to add, so a product of few rows and long k
 * still fills the GPU. X is int8 [tp][k] with (d, d * sum) pairs [k/32][tp] (tp: the padded token
 * count it was quantized for). part: MMQ8_MT * NT * 4 floats per item when nw > 1. Up to three
 * matrices of X (Q/K/V, gate/up) in one launch: groups number their rows across them, and a group's
 * 32 rows lie in one matrix (the host passes several only when each has a multiple of 32). */
#define DEFINE_MMQ8(T, NT)                                                                        \
kernel void mmq8_##T##_##NT(global const uchar *W0, uint rb0, uint n0, global float *Y0, uint ld0,\
                            global const uchar *W1, uint rb1, uint n1, global float *Y1, uint ld1,\
                            global const uchar *W2, uint rb2, uint n2, global float *Y2, uint ld2,\
                            uint k, global const uint *Xq, global const float4 *Xs, uint ntok,    \
                            uint tp, uint kg, local float *part)                                  \
{                                                                                                 \
    int lid = get_local_id(0), L = get_local_size(0);                                             \
    int lane = lid & 31, warp = lid >> 5, nw = L >> 5, g = lane >> 2, t = lane & 3;               \
    uint r0 = get_group_id(0) * (16 * MMQ8_MT), kk = get_group_id(1) % kg, tb = 64 * (get_group_id(1) / kg);\
    global const uchar *W = W0;                                                                   \
    global float *Y = Y0;                                                                         \
    uint row_bytes = rb0, n_rows = n0, ldy = ld0;                                                 \
    if (r0 >= n0 + n1) { r0 -= n0 + n1; W = W2; Y = Y2; row_bytes = rb2; n_rows = n2; ldy = ld2; }\
    else if (r0 >= n0) { r0 -= n0; W = W1; Y = Y1; row_bytes = rb1; n_rows = n1; ldy = ld1; }     \
    Y += ((size_t)kk * ntok + tb) * ldy; /* this k slice's partial Y, this group's token block */ \
    ntok -= tb;                                                                                   \
    Xs += tb / 2;                                                                                 \
    global const uchar *wr[MMQ8_MT][2];                                                           \
    UNROLL for (int i = 0; i < MMQ8_MT; i++)                                                             \
        UNROLL for (int h = 0; h < 2; h++) {                                                             \
            uint r = r0 + 16 * i + 8 * h + g;                                                     \
            wr[i][h] = W + (size_t)(r < n_rows ? r : n_rows - 1) * row_bytes;                     \
        }                                                                                         \
    global const uint *xr = Xq + (size_t)(tb + g) * (k / 4) + 2 * t;                              \
    size_t xj = (size_t)8 * (k / 4); /* from one token tile's X to the next */                    \
    float4 acc[MMQ8_MT][NT];                                                                      \
    UNROLL for (int i = 0; i < MMQ8_MT; i++)                                                             \
        UNROLL for (int j = 0; j < NT; j++) acc[i][j] = (float4)(0.0f);                                  \
    int nu = (int)(k / 64), u0 = (int)(kk * nu / kg), u1 = (int)((kk + 1) * nu / kg);             \
    /* one 64-value unit per warp pass: loading two ahead measured slower (docs/PERF.md) */       \
    for (int u = u0 + warp; u < u1; u += nw) {                                                    \
        uint2 q[MMQ8_MT][2][2];                                                                   \
        float dw[MMQ8_MT][2][2], mw[MMQ8_MT][2][2];                                               \
        UNROLL for (int i = 0; i < MMQ8_MT; i++)                                                         \
            UNROLL for (int h = 0; h < 2; h++)                                                           \
                mmq8_ld_##T(wr[i][h], u, t, q[i][h], dw[i][h], mw[i][h]);                         \
        if (NT <= 2) { /* all of X's fragments loaded before the mmas */                          \
            uint2 xb[NT][2];                                                                      \
            float4 xs[NT][2];                                                                     \
            UNROLL for (int j = 0; j < NT; j++)                                                          \
                UNROLL for (int s = 0; s < 2; s++) {                                                     \
                    xb[j][s] = vload2(0, xr + j * xj + 16 * u + 8 * s);                           \
                    xs[j][s] = Xs[(size_t)(2 * u + s) * (tp / 2) + 4 * j + t];                    \
                }                                                                                 \
            UNROLL for (int s = 0; s < 2; s++)                                                           \
                UNROLL for (int i = 0; i < MMQ8_MT; i++)                                                 \
                    UNROLL for (int j = 0; j < NT; j++)                                                  \
                        acc[i][j] = mmq8_mac_##T(acc[i][j], q[i][0][s], q[i][1][s], xb[j][s], xs[j][s],\
                                                 dw[i][0][s], dw[i][1][s], mw[i][0][s], mw[i][1][s], t);\
        } else /* a token tile's at a time: all of them would not fit in registers */             \
            UNROLL for (int s = 0; s < 2; s++)                                                           \
                UNROLL for (int j = 0; j < NT; j++) {                                                    \
                    uint2 xb = vload2(0, xr + j * xj + 16 * u + 8 * s);                           \
                    float4 x = Xs[(size_t)(2 * u + s) * (tp / 2) + 4 * j + t];                    \
                    UNROLL for (int i = 0; i < MMQ8_MT; i++)                                             \
                        acc[i][j] = mmq8_mac_##T(acc[i][j], q[i][0][s], q[i][1][s], xb, x, dw[i][0][s],\
                                                 dw[i][1][s], mw[i][0][s], mw[i][1][s], t);       \
                }                                                                                 \
    }                                                                                             \
    if (nw > 1) { /* add the other warps' partial tiles into warp 0's */                          \
        UNROLL for (int i = 0; i < MMQ8_MT; i++)                                                         \
            UNROLL for (int j = 0; j < NT; j++) vstore4(acc[i][j], (i * NT + j) * L + lid, part);        \
        barrier(CLK_LOCAL_MEM_FENCE);                                                             \
        if (warp == 0)                                                                            \
            for (int w = 1; w < nw; w++)                                                          \
                UNROLL for (int i = 0; i < MMQ8_MT; i++)                                                 \
                    UNROLL for (int j = 0; j < NT; j++)                                                  \
                        acc[i][j] += vload4((i * NT + j) * L + 32 * w + lane, part);              \
    }                                                                                             \
    if (warp != 0) return;                                                                        \
    MMQ8_STORE(MMQ8_MT, NT)                                                                       \
}

/* Y (ntok rows of ldy) = the kg partial Ys of mmq8 / mmq8p in P (rows apart, slice after slice) */
kernel void mmq8_sum(global const float *P, uint kg, uint rows, uint ntok, global float *Y, uint ldy)
{
    uint r = get_global_id(0), tk = get_global_id(1);
    if (r >= rows) return;
    float v = 0.0f;
    for (uint kk = 0; kk < kg; kk++) v += P[((size_t)kk * ntok + tk) * rows + r];
    Y[(size_t)tk * ldy + r] = v;
}

/* 5-8, 9-16, 17-32 and 33-256 tokens (64 a group) */
#define DEFINE_MMQ8_KERNELS(T) DEFINE_MMQ8(T, 1) DEFINE_MMQ8(T, 2) DEFINE_MMQ8(T, 4) DEFINE_MMQ8(T, 8)
#define DEFINE_MMQ8_OF(T, id, MMA) DEFINE_MMQ8_KERNELS(T)
CLG_TYPES_Q8_MMQ8(DEFINE_MMQ8_OF)

/* --- q4_k weights staged by cp.async (mmq8s) ------------------------------------------------
 * mmq8 reads each unit's nibbles as scattered 8-byte loads from 32 rows and waits on them every
 * pass. Here a group of 4 warps takes 16 * MT rows and
 * all of k: stages of MQS_SB(NT) super-blocks of those rows (10 KB) go global -> local by
 * cp.async, three in flight. Warp w multiplies super-block w / (4 / MQS_SB) of a stage for token
 * tile w % (4 / MQS_SB) on all MT row tiles (X fragments serve MT products), and the warps' partial
 * tiles are added through local memory at the end. Staged super-blocks are 160 bytes apart
 * (144 + 16): 8-byte nibble reads of 4 rows x 4 lanes fall on distinct banks. Needs row_bytes %
 * 16 == 0 (k a multiple of 256).
 * Built for 8 tokens only (16 rows, 4 super-blocks a stage, one per warp). At 16 tokens mmq8p takes
 * them: this kernel has too few groups for the large products, and X is read from L1 per product. */

#define MQS_STAGES 4
#define MQS_PITCH 10 /* uint4 per staged super-block row (144 bytes + 16) */
#define MQS_SB(NT) (4 / (NT)) /* super-blocks per stage */

/* stage si (super-blocks SBS * si ..) of rows r0 .. r0 + RR - 1 into buffer si % MQS_STAGES, laid
 * out [sb][row][160 B]; chunks in row-major order (one row's super-blocks are contiguous) */
#define MQS_LOAD(si, SBS, RR)                                                                     \
    {                                                                                             \
        int sb0 = (si) * (SBS);                                                                   \
        local uint4 *dst = st + ((si) % MQS_STAGES) * ((SBS) * (RR) * MQS_PITCH);                 \
        for (int i = lid; i < (RR) * (SBS) * 9; i += 128) {                                       \
            int row = i / ((SBS) * 9), rem = i - row * ((SBS) * 9), s = rem / 9, c = rem - s * 9; \
            uint r = r0 + row < n_rows ? r0 + row : n_rows - 1;                                   \
            if (sb0 + s < nsb)                                                                    \
                cp_async16(dst + (s * (RR) + row) * MQS_PITCH + c,                                \
                           (global const uint4 *)(W + (size_t)r * row_bytes + (size_t)(sb0 + s) * 144) + c); \
        }                                                                                         \
    }

#define DEFINE_MMQ8S(NT, MT)                                                                      \
kernel __attribute__((reqd_work_group_size(128, 1, 1)))                                          \
void mmq8s_q4_k_##NT(global const uchar *W, uint row_bytes, uint n_rows, uint k, global const uint *Xq, \
                     global const float4 *Xs, global float *Y, uint ldy, uint ntok)               \
{                                                                                                 \
    const int SBS = MQS_SB(NT), RR = 16 * MT, TW = 4 / SBS; /* token-tile warps per super-block */ \
    local uint4 st[MQS_STAGES * MQS_SB(NT) * 16 * MT * MQS_PITCH];                                \
    int lid = get_local_id(0), lane = lid & 31, warp = lid >> 5, g = lane >> 2, t = lane & 3;     \
    int ws = warp / TW, j = warp % TW; /* this warp's super-block in a stage, its token tile */   \
    uint r0 = get_group_id(0) * RR, tpad = 8 * NT;                                                \
    int nsb = (int)(k / 256), nst = (nsb + SBS - 1) / SBS;                                        \
    global const uint *xr = Xq + (size_t)(8 * j + g) * (k / 4) + 2 * t;                          \
    float4 acc[MT];                                                                               \
    UNROLL for (int i = 0; i < MT; i++) acc[i] = (float4)(0.0f);                                         \
    for (int si = 0; si < MQS_STAGES - 1; si++) {                                                 \
        if (si < nst) MQS_LOAD(si, SBS, RR)                                                       \
        cp_async_commit();                                                                        \
    }                                                                                             \
    for (int si = 0; si < nst; si++) {                                                            \
        cp_async_wait2(); /* stage si has landed for this item */                                 \
        barrier(CLK_LOCAL_MEM_FENCE); /* ... for every item; the buffer refilled next is free */ \
        if (si + MQS_STAGES - 1 < nst) MQS_LOAD(si + MQS_STAGES - 1, SBS, RR)                     \
        cp_async_commit();                                                                        \
        int S = si * SBS + ws;                                                                    \
        if (S >= nsb) continue;                                                                   \
        local const uchar *bs = (local const uchar *)(st + (((si % MQS_STAGES) * SBS + ws) * RR + g) * MQS_PITCH); \
        const uint M = 0x0F0F0F0Fu;                                                               \
        for (int p = 0; p < 4; p++) {                                                             \
            int u = 4 * S + p;                                                                    \
            uint2 xb[2];                                                                          \
            float4 x[2];                                                                          \
            UNROLL for (int s = 0; s < 2; s++) {                                                         \
                xb[s] = vload2(0, xr + 16 * u + 8 * s);                                           \
                x[s] = Xs[(size_t)(2 * u + s) * (tpad / 2) + 4 * j + t];                          \
            }                                                                                     \
            UNROLL for (int i = 0; i < MT; i++) {                                                        \
                local const uchar *b0 = bs + 16 * i * MQS_PITCH * 16, *b1 = b0 + 8 * MQS_PITCH * 16; \
                uint4 h0 = *(local const uint4 *)b0, h1 = *(local const uint4 *)b1;               \
                uint2 w0 = *(local const uint2 *)(b0 + 16 + 32 * p + 8 * t);                      \
                uint2 w1 = *(local const uint2 *)(b1 + 16 + 32 * p + 8 * t);                      \
                UNROLL for (int s = 0; s < 2; s++) {                                                     \
                    int sh = 4 * s;                                                               \
                    float d0, m0, d1, m1;                                                         \
                    q4k_scale_min(h0, 2 * p + s, &d0, &m0);                                       \
                    q4k_scale_min(h1, 2 * p + s, &d1, &m1);                                       \
                    int4 c = mma8_u8((w0.x >> sh) & M, (w1.x >> sh) & M, (w0.y >> sh) & M, (w1.y >> sh) & M, \
                                     xb[s].x, xb[s].y);                                           \
                    acc[i] = mmq8_scale_add(acc[i], c, x[s], d0, d1, m0, m1);                     \
                }                                                                                 \
            }                                                                                     \
        }                                                                                         \
    }                                                                                             \
    barrier(CLK_LOCAL_MEM_FENCE); /* every warp is done with the stages: reuse them */            \
    local float4 *part = (local float4 *)st;                                                      \
    UNROLL for (int i = 0; i < MT; i++) part[(warp * MT + i) * 32 + lane] = acc[i];                      \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                 \
    if (ws != 0) return;                                                                          \
    for (int w = 1; w < SBS; w++)                                                                 \
        UNROLL for (int i = 0; i < MT; i++) acc[i] += part[((w * TW + j) * MT + i) * 32 + lane];         \
    UNROLL for (int i = 0; i < MT; i++)                                                                  \
        UNROLL for (int h = 0; h < 2; h++) {                                                             \
            uint r = r0 + 16 * i + 8 * h + g, tk = 8 * j + 2 * t;                                \
            if (r >= n_rows) continue;                                                            \
            float v0 = h ? acc[i].z : acc[i].x, v1 = h ? acc[i].w : acc[i].y;                     \
            if (tk < ntok) Y[(size_t)tk * ldy + r] = v0;                                          \
            if (tk + 1 < ntok) Y[(size_t)(tk + 1) * ldy + r] = v1;                                \
        }                                                                                         \
}

DEFINE_MMQ8S(1, 1)

/* --- q4_k with a cp.async ring (mmq8p, mmq8r) -----------------------------------------------
 * mmq8's warp loads a unit's nibbles, scales and X into registers and waits on them before its
 * mmas: one unit in flight per warp, and latency rather than memory bounds it. Here units are kept
 * in flight in local memory, filled by cp.async: the rows' scale headers (16 bytes each) and
 * nibbles (32 bytes each), the unit's int8 X (64 bytes a token) and its X scales. Each row's two
 * sub-block scales are decoded once per unit (one lane a row) into the place of its header.
 *   mmq8p (RW 1): each warp has its own ring for its 32 rows and the units it takes of k (warps
 *     split k as mmq8's do, and add their partial tiles through the idle ring at the end); only
 *     warp barriers inside the loop.
 *   mmq8r (RW 4): the group's 4 warps take 32 rows each and every unit of k, sharing one ring, so
 *     the unit's X is staged once for 128 rows: at 64 tokens X is 3.3 times a warp's weight bytes.
 * Groups and k slices across groups as mmq8's. X rows in a stage are 64 bytes apart, their 16-byte
 * chunks swizzled (chunk ^ 2 for tokens 2-3 mod 4) so 8-byte reads of 4 tokens x 4 lanes fall on
 * distinct banks. Needs k % 256 == 0. */

#define MQP_STAGE(rows, tpb) (48 * (rows) + 80 * (tpb)) /* bytes per stage: headers, nibbles, X, X scales */

/* issue unit u's copies into stage buffer st by the R items id = 0..R-1 that stage R rows: item id
 * copies row id's header and nibbles (wrow), then the items copy the unit's X and X scales of the
 * group's tpb tokens (Xq, Xs at its first token; X quantized for tp tokens) */
inline void mqp_issue(local uchar *st, int u, int id, int R, global const uchar *wrow, uint k, uint tpb, uint tp,
                      global const uint *Xq, global const float4 *Xs)
{
    local uint4 *hd = (local uint4 *)st, *nb = hd + R, *xq = nb + 2 * R, *xs = xq + 4 * tpb;
    global const uchar *b = wrow + (u >> 2) * 144;
    cp_async16(hd + id, (global const uint4 *)b);
    global const uint4 *n = (global const uint4 *)(b + 16 + 32 * (u & 3));
    cp_async16(nb + 2 * id, n);
    cp_async16(nb + 2 * id + 1, n + 1);
    for (uint c = id; c < 4 * tpb; c += R) {
        uint tok = c >> 2, ch = c & 3;
        cp_async16_ca(xq + tok * 4 + (ch ^ (((tok >> 1) & 1) << 1)),
                      (global const uint4 *)(Xq + tok * (k / 4)) + 4 * u + ch);
    }
    for (uint c = id; c < tpb; c += R) { /* [sub-block s][token pair] */
        uint s = c / (tpb / 2), pr = c % (tpb / 2);
        cp_async16_ca(xs + c, (global const uint4 *)(Xs + (size_t)(2 * u + s) * (tp / 2) + pr));
    }
}

/* the matrix holding rows r0.. of up to three of X (W0..W2, rows counted across them; past the last
 * row idle, r0 then 0 of W0: such warps still copy and meet the barriers), Y moved to k slice kk's
 * partial Y at the token block from tb, and ntok counted from tb (needs r0, kk, tb, ntok; mmq8p,
 * mmq8r and mma_h.cl's mmh) */
#define MMQ8_PICK                                                                                 \
    int idle = r0 >= n0 + n1 + n2;                                                                \
    global const uchar *W = W0;                                                                   \
    global float *Y = Y0;                                                                         \
    uint row_bytes = rb0, n_rows = n0, ldy = ld0;                                                 \
    if (idle) r0 = 0;                                                                             \
    else if (r0 >= n0 + n1) { r0 -= n0 + n1; W = W2; Y = Y2; row_bytes = rb2; n_rows = n2; ldy = ld2; } \
    else if (r0 >= n0) { r0 -= n0; W = W1; Y = Y1; row_bytes = rb1; n_rows = n1; ldy = ld1; }       \
    Y += ((size_t)kk * ntok + tb) * ldy;                                                          \
    ntok -= tb;

/* RW warps share a stage (1: mmq8p, each warp its own ring; 4: mmq8r); nst stages in flight */
#define DEFINE_MMQ8P(NAME, NT, RW)                                                                \
kernel void NAME##_q4_k_##NT(global const uchar *W0, uint rb0, uint n0, global float *Y0, uint ld0,\
                            global const uchar *W1, uint rb1, uint n1, global float *Y1, uint ld1, \
                            global const uchar *W2, uint rb2, uint n2, global float *Y2, uint ld2, \
                            uint k, global const uint *Xq, global const float4 *Xs, uint ntok,     \
                            uint tp, uint kg, uint nst, local uint4 *ring16)                      \
{                                                                                                 \
    int lid = get_local_id(0), L = get_local_size(0);                                             \
    int lane = lid & 31, warp = lid >> 5, nw = L >> 5, g = lane >> 2, t = lane & 3;               \
    const int R = 32 * (RW), rw = (RW) > 1 ? warp : 0; /* rows a stage holds; this warp's 32 of them */ \
    const int kw = (RW) > 1 ? 0 : warp, kn = (RW) > 1 ? 1 : nw; /* this warp's share of k's units */ \
    uint r0 = (get_group_id(0) * (RW) + rw) * (16 * MMQ8_MT), kk = get_group_id(1) % kg;          \
    uint tb = 64 * (get_group_id(1) / kg), tpb = 8 * NT, SB = MQP_STAGE(R, 8 * NT);              \
    MMQ8_PICK                                                                                     \
    Xq += (size_t)tb * (k / 4);                                                                   \
    Xs += tb / 2;                                                                                 \
    global const uchar *wrow = W + (size_t)min(r0 + lane, n_rows - 1) * row_bytes; /* lane's row */ \
    local uchar *ring = (local uchar *)ring16;                                                    \
    local uchar *mine = ring + (size_t)kw * nst * SB;                                             \
    int id = (RW) > 1 ? lid : lane;                                                               \
    float4 acc[MMQ8_MT][NT];                                                                      \
    UNROLL for (int i = 0; i < MMQ8_MT; i++)                                                      \
        UNROLL for (int j = 0; j < NT; j++) acc[i][j] = (float4)(0.0f);                           \
    int nu = (int)(k / 64), u0 = (int)(kk * nu / kg), nk = (int)((kk + 1) * nu / kg) - u0;        \
    int ni = kw < nk ? (nk - kw + kn - 1) / kn : 0;                                               \
    for (int si = 0; si < (int)nst - 1; si++) {                                                   \
        if (si < ni) mqp_issue(mine + si * SB, u0 + kw + si * kn, id, R, wrow, k, tpb, tp, Xq, Xs); \
        cp_async_commit();                                                                        \
    }                                                                                             \
    const uint M = 0x0F0F0F0Fu;                                                                   \
    for (int i = 0; i < ni; i++) {                                                                \
        /* stage i landed (nst - 2 younger groups may still be in flight) */                      \
        if (nst == 2) cp_async_wait0(); else if (nst == 3) cp_async_wait1(); else cp_async_wait2(); \
        /* every item's copies visible, and stage i - 1 (refilled next) read by all */            \
        if ((RW) > 1) barrier(CLK_LOCAL_MEM_FENCE); else bar_warp();                              \
        if (i + (int)nst - 1 < ni)                                                                \
            mqp_issue(mine + ((i + nst - 1) % nst) * SB, u0 + kw + (i + nst - 1) * kn, id, R, wrow, k, tpb, tp, \
                      Xq, Xs);                                                                    \
        cp_async_commit();                                                                        \
        local uchar *st = mine + (i % nst) * SB;                                                  \
        local uint4 *hd = (local uint4 *)st + 32 * rw;                                            \
        local const uint2 *nb = (local const uint2 *)(st + 16 * R) + 4 * 32 * rw;                 \
        local const uint2 *xq = (local const uint2 *)(st + 48 * R);                               \
        local const float4 *xsl = (local const float4 *)(st + 48 * R + 64 * tpb);                 \
        int u = u0 + kw + i * kn, p = u & 3;                                                      \
        /* each row's two sub-block scales decoded once (lane l: row l of this warp's 32), in     \
         * place of its header: the 4 lanes that read a row would each decode them */            \
        {                                                                                         \
            uint4 hh = hd[lane];                                                                  \
            float d0, m0, d1, m1;                                                                 \
            q4k_scale_min(hh, 2 * p, &d0, &m0);                                                   \
            q4k_scale_min(hh, 2 * p + 1, &d1, &m1);                                               \
            hd[lane] = as_uint4((float4)(d0, m0, d1, m1));                                        \
        }                                                                                         \
        bar_warp();                                                                               \
        /* both row tiles' nibbles and scales, then X from local memory a token tile at a time    \
         * (read once for both; at NT 8 all of it would not fit in registers) */                  \
        uint2 q[MMQ8_MT][2][2];                                                                   \
        float4 f[MMQ8_MT][2];                                                                     \
        UNROLL for (int a = 0; a < MMQ8_MT; a++)                                                  \
            UNROLL for (int h = 0; h < 2; h++) {                                                  \
                int row = 16 * a + 8 * h + g;                                                     \
                f[a][h] = as_float4(hd[row]);                                                     \
                uint2 w = nb[row * 4 + t];                                                        \
                q[a][h][0] = (uint2)(w.x & M, w.y & M);                                           \
                q[a][h][1] = (uint2)((w.x >> 4) & M, (w.y >> 4) & M);                             \
            }                                                                                     \
        UNROLL for (int s = 0; s < 2; s++)                                                        \
            UNROLL for (int j = 0; j < NT; j++) {                                                 \
                int tok = 8 * j + g, ch = (2 * s + (t >> 1)) ^ (((tok >> 1) & 1) << 1);           \
                uint2 xb = xq[tok * 8 + ch * 2 + (t & 1)];                                        \
                float4 xs = xsl[s * (tpb / 2) + 4 * j + t];                                       \
                UNROLL for (int a = 0; a < MMQ8_MT; a++) {                                        \
                    int4 c = mma8_u8(q[a][0][s].x, q[a][1][s].x, q[a][0][s].y, q[a][1][s].y, xb.x, xb.y);\
                    float d0 = s ? f[a][0].z : f[a][0].x, m0 = s ? f[a][0].w : f[a][0].y;         \
                    float d1 = s ? f[a][1].z : f[a][1].x, m1 = s ? f[a][1].w : f[a][1].y;         \
                    acc[a][j] = mmq8_scale_add(acc[a][j], c, xs, d0, d1, m0, m1);                 \
                }                                                                                 \
            }                                                                                     \
    }                                                                                             \
    cp_async_wait0();                                                                             \
    if ((RW) == 1 && nw > 1) { /* the other warps' partial tiles into warp 0's, through the (idle) ring */ \
        barrier(CLK_LOCAL_MEM_FENCE);                                                             \
        local float4 *part = (local float4 *)ring;                                                \
        UNROLL for (int a = 0; a < MMQ8_MT; a++)                                                  \
            UNROLL for (int j = 0; j < NT; j++) part[(a * NT + j) * L + lid] = acc[a][j];         \
        barrier(CLK_LOCAL_MEM_FENCE);                                                             \
        if (warp == 0)                                                                            \
            for (int w = 1; w < nw; w++)                                                          \
                UNROLL for (int a = 0; a < MMQ8_MT; a++)                                          \
                    UNROLL for (int j = 0; j < NT; j++) acc[a][j] += part[(a * NT + j) * L + 32 * w + lane]; \
    }                                                                                             \
    if (kw != 0 || idle) return;                                                                  \
    MMQ8_STORE(MMQ8_MT, NT)                                                                       \
}

/* 64 rows per warp (X read half as often per weight byte) measured slower: too many registers */
DEFINE_MMQ8P(mmq8p, 1, 1)
DEFINE_MMQ8P(mmq8p, 2, 1)
DEFINE_MMQ8P(mmq8p, 4, 1)
DEFINE_MMQ8P(mmq8p, 8, 1)
DEFINE_MMQ8P(mmq8r, 2, 4)
DEFINE_MMQ8P(mmq8r, 4, 4)
DEFINE_MMQ8P(mmq8r, 8, 4)

#endif /* CLG_NVIDIA */
