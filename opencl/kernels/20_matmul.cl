/* 20_matmul.cl — weight products with rows kept in their GGUF type.
 *
 * mvN_T: Y[t][r] = sum_k W[r][k] * X[t][k] for t < ntok <= N (decode: a few tokens per step).
 *        tpr items per output row stride over the row's 32-value sub-blocks, so the row is read
 *        once for all tokens, then a local-memory reduction per token.
 * deq_T: dequantize rows [r0, r0+n) to float (prefill: the GEMM then runs on the float tile).
 * emb_T: embedding lookup of token ids, times a scale. */

/* mv4_T serves 1-4 tokens, mv16_T 5-16: the per-token accumulators stay in registers.
 * tpr items share a row (a power of two; on NVIDIA at most a warp, so the reduction is shuffles),
 * striding over its 8-value units (deq8_T: unit u is lane t = u % 4 of sub-block u / 4), so
 * neighbouring items read neighbouring bytes and X as float4. A group covers L / tpr rows. */
/* lo . x[0..3] + hi . x[16..19] (x 16-byte aligned: ldx is a multiple of 4) */
inline float mv_dot8(float4 lo, float4 hi, global const float *x)
{
    return dot(lo, *(global const float4 *)x) + dot(hi, *(global const float4 *)(x + 16));
}

#define DEFINE_MV(T, MAXT)                                                                        \
kernel void mv##MAXT##_##T(global const uchar *W, uint row_bytes, uint n_rows, uint k,            \
                   global const float *X, uint ldx, global float *Y, uint ldy, uint ntok,         \
                   uint tpr, local float *red)                                                    \
{                                                                                                 \
    int lid = get_local_id(0), L = get_local_size(0);                                             \
    int sub = lid % (int)tpr;                                                                     \
    uint r = get_group_id(0) * (L / tpr) + lid / tpr;                                             \
    int live = r < n_rows; /* no early return: the reduction may use barriers */                  \
    global const uchar *row = W + (size_t)(live ? r : 0) * row_bytes;                             \
    float acc[MAXT];                                                                              \
    for (int t = 0; t < MAXT; t++) acc[t] = 0.0f;                                                 \
    int nu = live ? (int)(k / 8) : 0;                                                             \
    for (int u = sub; u < nu; u += tpr) {                                                         \
        float4 lo, hi;                                                                            \
        deq8_##T(row, u >> 2, u & 3, &lo, &hi);                                                   \
        global const float *x = X + (u >> 2) * 32 + 4 * (u & 3);                                  \
        acc[0] += mv_dot8(lo, hi, x); /* token 0 unconditionally: its loads hoist */              \
        for (int t = 1; t < MAXT; t++)                                                            \
            if (t < (int)ntok) acc[t] += mv_dot8(lo, hi, x + (size_t)t * ldx);                    \
    }                                                                                             \
    for (int t = 0; t < MAXT; t++) { /* static index: acc stays in registers */                  \
        if (t >= (int)ntok) break;                                                                \
        float v = seg_sum(acc[t], (int)tpr, red);                                                 \
        if (sub == 0 && live) Y[(size_t)t * ldy + r] = v;                                         \
    }                                                                                             \
}

/* mv4_T (1-4 tokens, decode): as mvN_T, but each segment of tpr items takes MV_R rows, so every
 * float4 of X loaded serves MV_R rows (X from cache, not weights, was what bounded the one-row
 * version at ~600 GB/s on the H200) and MV_R rows' weight loads are in flight together. */
#define MV_R 4

/* the unit loop of the MV_R-row kernels: DEQ_I dequantizes unit u of row i into lo[i], hi[i];
 * acc[MV_R][4] collects ntok (1-4) tokens of X (ldx apart); sub, tpr, nu from the kernel */
#define MV_ROWS(DEQ_I, X, ldx, ntok)                                                              \
    for (int u = sub; u < nu; u += (int)tpr) {                                                    \
        float4 lo[MV_R], hi[MV_R];                                                                \
        for (int i = 0; i < MV_R; i++) DEQ_I;                                                     \
        global const float *x_ = (X) + (u >> 2) * 32 + 4 * (u & 3);                               \
        for (int t = 0; t < 4; t++) {                                                             \
            if (t > 0 && t >= (int)(ntok)) break;                                                 \
            float4 xl = *(global const float4 *)(x_ + (size_t)t * (ldx));                         \
            float4 xh = *(global const float4 *)(x_ + (size_t)t * (ldx) + 16);                    \
            for (int i = 0; i < MV_R; i++) acc[i][t] += dot(lo[i], xl) + dot(hi[i], xh);          \
        }                                                                                         \
    }
#define DEFINE_MV4(T)                                                                             \
kernel void mv4_##T(global const uchar *W, uint row_bytes, uint n_rows, uint k,                   \
                    global const float *X, uint ldx, global float *Y, uint ldy, uint ntok,        \
                    uint tpr, local float *red)                                                   \
{                                                                                                 \
    int lid = get_local_id(0), L = get_local_size(0);                                             \
    int sub = lid % (int)tpr;                                                                     \
    uint r0 = (get_group_id(0) * (L / tpr) + lid / tpr) * MV_R;                                   \
    global const uchar *row[MV_R];                                                                \
    float acc[MV_R][4];                                                                           \
    for (int i = 0; i < MV_R; i++) {                                                              \
        row[i] = W + (size_t)(r0 + i < n_rows ? r0 + i : 0) * row_bytes;                          \
        for (int t = 0; t < 4; t++) acc[i][t] = 0.0f;                                             \
    }                                                                                             \
    int nu = r0 < n_rows ? (int)(k / 8) : 0; /* no early return: the reduction may use barriers */\
    MV_ROWS(deq8_##T(row[i], u >> 2, u & 3, &lo[i], &hi[i]), X, ldx, ntok);                       \
    for (int t = 0; t < 4; t++) {                                                                 \
        if (t >= (int)ntok) break;                                                                \
        for (int i = 0; i < MV_R; i++) {                                                          \
            float v = seg_sum(acc[i][t], (int)tpr, red);                                          \
            if (sub == 0 && r0 + i < n_rows) Y[(size_t)t * ldy + r0 + i] = v;                     \
        }                                                                                         \
    }                                                                                             \
}

#define DEFINE_WEIGHT_KERNELS(T)                                                                  \
DEFINE_MV4(T)                                                                                     \
DEFINE_MV(T, 16)                                                                                  \
kernel void deq_##T(global const uchar *W, uint row_bytes, uint r0, uint n_rows, uint k,          \
                    global float *out)                                                            \
{                                                                                                 \
    uint sb = get_global_id(0), r = get_global_id(1);                                             \
    if (sb >= k / 32 || r >= n_rows) return;                                                      \
    float w[32];                                                                                  \
    deq32_##T(W + (size_t)(r0 + r) * row_bytes, sb, w);                                           \
    global float *o = out + (size_t)r * k + sb * 32;                                              \
    for (int i = 0; i < 32; i++) o[i] = w[i];                                                     \
}                                                                                                 \
kernel void emb_##T(global const uchar *W, uint row_bytes, uint k, global const int *ids,         \
                    uint ntok, float scale, global float *out)                                    \
{                                                                                                 \
    uint sb = get_global_id(0), t = get_global_id(1);                                             \
    if (sb >= k / 32 || t >= ntok) return;                                                        \
    float w[32];                                                                                  \
    deq32_##T(W + (size_t)ids[t] * row_bytes, sb, w);                                             \
    global float *o = out + (size_t)t * k + sb * 32;                                              \
    for (int i = 0; i < 32; i++) o[i] = w[i] * scale;                                             \
}

DEFINE_WEIGHT_KERNELS(f32)
DEFINE_WEIGHT_KERNELS(f16)
DEFINE_WEIGHT_KERNELS(bf16)
DEFINE_WEIGHT_KERNELS(q8_0)
DEFINE_WEIGHT_KERNELS(q4_0)
DEFINE_WEIGHT_KERNELS(q4_1)
DEFINE_WEIGHT_KERNELS(q5_0)
DEFINE_WEIGHT_KERNELS(q5_1)
DEFINE_WEIGHT_KERNELS(q4_k)
DEFINE_WEIGHT_KERNELS(q5_k)
DEFINE_WEIGHT_KERNELS(q6_k)

/* any supported type, chosen at run time (uniform per work-group) */
inline void deq32_any(uint type, global const uchar *row, int sb, float *w)
{
    switch (type) {
    case 0: deq32_f32(row, sb, w); break;
    case 1: deq32_f16(row, sb, w); break;
    case 2: deq32_q4_0(row, sb, w); break;
    case 3: deq32_q4_1(row, sb, w); break;
    case 6: deq32_q5_0(row, sb, w); break;
    case 7: deq32_q5_1(row, sb, w); break;
    case 8: deq32_q8_0(row, sb, w); break;
    case 12: deq32_q4_k(row, sb, w); break;
    case 13: deq32_q5_k(row, sb, w); break;
    case 14: deq32_q6_k(row, sb, w); break;
    case 30: deq32_bf16(row, sb, w); break;
    default: for (int i = 0; i < 32; i++) w[i] = NAN;
    }
}

/* one row of the up-to-three matrices of mv_multi, numbered across them (matrix 0's first) */
typedef struct mrow { global const uchar *p; uint type, ldy; global float *y; int live; } mrow;

inline mrow multi_row(uint r, global const uchar *W0, uint t0, uint rb0, uint n0, global float *Y0, uint ld0,
                      global const uchar *W1, uint t1, uint rb1, uint n1, global float *Y1, uint ld1,
                      global const uchar *W2, uint t2, uint rb2, uint n2, global float *Y2, uint ld2)
{
    mrow m;
    m.live = 1;
    if (r < n0) { m.p = W0 + (size_t)r * rb0; m.type = t0; m.y = Y0 + r; m.ldy = ld0; }
    else if (r < n0 + n1) { r -= n0; m.p = W1 + (size_t)r * rb1; m.type = t1; m.y = Y1 + r; m.ldy = ld1; }
    else if (r < n0 + n1 + n2) { r -= n0 + n1; m.p = W2 + (size_t)r * rb2; m.type = t2; m.y = Y2 + r; m.ldy = ld2; }
    else { m.p = W0; m.type = t0; m.y = Y0; m.ldy = ld0; m.live = 0; }
    return m;
}

/* Up to three matrices sharing the input X in one launch (Q/K/V, gate/up), laid out as mv4_T:
 * tpr items per segment, MV_R rows per segment, rows numbered across the matrices. A segment may
 * straddle two matrices; the run-time type switch then diverges for that segment only.
 * Decode only (ntok <= 4). */
kernel void mv_multi(global const uchar *W0, uint t0, uint rb0, uint n0, global float *Y0, uint ld0,
                     global const uchar *W1, uint t1, uint rb1, uint n1, global float *Y1, uint ld1,
                     global const uchar *W2, uint t2, uint rb2, uint n2, global float *Y2, uint ld2,
                     uint k, global const float *X, uint ldx, uint ntok, uint tpr, local float *red)
{
    int lid = get_local_id(0), L = get_local_size(0), sub = lid % (int)tpr;
    uint r0 = (get_group_id(0) * (L / tpr) + lid / tpr) * MV_R;
    mrow m[MV_R];
    float acc[MV_R][4];
    for (int i = 0; i < MV_R; i++) {
        m[i] = multi_row(r0 + i, W0, t0, rb0, n0, Y0, ld0, W1, t1, rb1, n1, Y1, ld1, W2, t2, rb2, n2, Y2, ld2);
        for (int t = 0; t < 4; t++) acc[i][t] = 0.0f;
    }
    int nu = m[0].live ? (int)(k / 8) : 0; /* no early return: the reduction may use barriers */
    MV_ROWS(deq8_any(m[i].type, m[i].p, u >> 2, u & 3, &lo[i], &hi[i]), X, ldx, ntok);
    for (int t = 0; t < 4; t++) {
        if (t >= (int)ntok) break;
        for (int i = 0; i < MV_R; i++) {
            float v = seg_sum(acc[i][t], (int)tpr, red);
            if (sub == 0 && m[i].live) m[i].y[(size_t)t * m[i].ldy] = v;
        }
    }
}
