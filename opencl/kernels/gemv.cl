/* gemv.cl — decode products (a few tokens) with weight rows kept in their GGUF type, dequantized in
 * registers (deq8_T), on any device: Y[t][r] = sum_k W[r][k] * X[t][k].
 *   mv4_T     1-4 tokens, MV_R rows per item segment;  mv16_T 5-16 tokens;
 *   mv_multi  up to three matrices of one X in one launch (Q/K/V, gate/up), types chosen at run time;
 *   g4_mv_any any row length (f32/f16 rows need not hold whole 32-value sub-blocks).
 * tpr items per output row stride over the row's 8-value units, so the row is read once for all
 * tokens, then a reduction per token (shuffles on NVIDIA, local memory elsewhere). */

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
 * float4 of X loaded serves MV_R rows (X from cache, not the weights, bounded the one-row version)
 * and MV_R rows' weight loads are in flight together. */
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

#define DEFINE_GEMV(T, id) DEFINE_MV4(T) DEFINE_MV(T, 16)
CLG_TYPES(DEFINE_GEMV)

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

/* dot of one weight row of k values (any supported type) with x */
inline float g4_dot(uint type, global const uchar *row, uint k, global const float *x)
{
    float acc = 0.0f;
    if (k % 32 == 0) {
        for (uint sb = 0; sb < k / 32; sb++) {
            float w[32];
            deq32_any(type, row, (int)sb, w);
            for (int i = 0; i < 32; i++) acc += w[i] * x[sb * 32 + i];
        }
    } else if (type == CLG_TYPE_f32) {
        global const float *r = (global const float *)row;
        for (uint i = 0; i < k; i++) acc += r[i] * x[i];
    } else if (type == CLG_TYPE_f16) {
        for (uint i = 0; i < k; i++) acc += vload_half(i, (global const half *)row) * x[i];
    } else {
        acc = NAN;
    }
    return acc;
}

/* Y[t][r] (ldy) = W[r] . X[t] (ldx): one item per output */
kernel void g4_mv_any(global const uchar *W, uint type, uint row_bytes, uint n_rows, uint k,
                      global const float *X, uint ldx, global float *Y, uint ldy, uint ntok)
{
    uint r = get_global_id(0), t = get_global_id(1);
    if (r >= n_rows || t >= ntok) return;
    Y[(size_t)t * ldy + r] = g4_dot(type, W + (size_t)r * row_bytes, k, X + (size_t)t * ldx);
}
