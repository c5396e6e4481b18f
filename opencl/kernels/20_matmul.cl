/* 20_matmul.cl — weight products with rows kept in their GGUF type.
 *
 * mvN_T: Y[t][r] = sum_k W[r][k] * X[t][k] for t < ntok <= N (decode: a few tokens per step).
 *        tpr items per output row stride over the row's 32-value sub-blocks, so the row is read
 *        once for all tokens, then a local-memory reduction per token.
 * deq_T: dequantize rows [r0, r0+n) to float (prefill: the GEMM then runs on the float tile).
 * emb_T: embedding lookup of token ids, times a scale. */

/* mv4_T serves 1-4 tokens, mv16_T 5-16: the per-token accumulators stay in registers.
 * tpr items share a row (a power of two <= the group size), so short rows (640 values = 20
 * sub-blocks) still keep every item busy: a group covers L / tpr rows. */
#define DEFINE_MV(T, MAXT)                                                                        \
kernel void mv##MAXT##_##T(global const uchar *W, uint row_bytes, uint n_rows, uint k,            \
                   global const float *X, uint ldx, global float *Y, uint ldy, uint ntok,         \
                   uint tpr, local float *red)                                                    \
{                                                                                                 \
    int lid = get_local_id(0), L = get_local_size(0);                                             \
    int sub = lid % (int)tpr;                                                                     \
    uint r = get_group_id(0) * (L / tpr) + lid / tpr;                                             \
    int live = r < n_rows; /* no early return: the reduction below has barriers */               \
    global const uchar *row = W + (size_t)(live ? r : 0) * row_bytes;                             \
    float acc[MAXT];                                                                              \
    for (int t = 0; t < MAXT; t++) acc[t] = 0.0f;                                                 \
    int nsb = live ? (int)(k / 32) : 0;                                                           \
    for (int sb = sub; sb < nsb; sb += tpr) {                                                     \
        float w[32];                                                                              \
        deq32_##T(row, sb, w);                                                                    \
        for (int t = 0; t < MAXT; t++) {                                                          \
            if (t < (int)ntok) {                                                                  \
                global const float4 *x = (global const float4 *)(X + (size_t)t * ldx + sb * 32); \
                float4 s = 0.0f;                                                                  \
                for (int i = 0; i < 8; i++)                                                       \
                    s += (float4)(w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]) * x[i];     \
                acc[t] += s.x + s.y + s.z + s.w;                                                  \
            }                                                                                     \
        }                                                                                         \
    }                                                                                             \
    for (int t = 0; t < (int)ntok; t++) {                                                         \
        red[lid] = acc[t];                                                                        \
        barrier(CLK_LOCAL_MEM_FENCE);                                                             \
        for (int s = (int)tpr / 2; s > 0; s >>= 1) {                                              \
            if (sub < s) red[lid] += red[lid + s];                                                \
            barrier(CLK_LOCAL_MEM_FENCE);                                                         \
        }                                                                                         \
        if (sub == 0 && live) Y[(size_t)t * ldy + r] = red[lid];                                  \
        barrier(CLK_LOCAL_MEM_FENCE);                                                             \
    }                                                                                             \
}

#define DEFINE_WEIGHT_KERNELS(T)                                                                  \
DEFINE_MV(T, 4)                                                                                   \
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

/* Up to three matrices sharing the input X in one launch (Q/K/V, gate/up): work-group r belongs
 * to matrix 0 for r < n0, matrix 1 for r < n0 + n1, else matrix 2. Decode only (ntok <= 4). */
kernel void mv_multi(global const uchar *W0, uint t0, uint rb0, uint n0, global float *Y0, uint ld0,
                     global const uchar *W1, uint t1, uint rb1, uint n1, global float *Y1, uint ld1,
                     global const uchar *W2, uint t2, uint rb2, uint n2, global float *Y2, uint ld2,
                     uint k, global const float *X, uint ldx, uint ntok, local float *red)
{
    uint r = get_group_id(0);
    int lid = get_local_id(0), L = get_local_size(0);
    global const uchar *W; uint type, rb, ldy; global float *Y;
    if (r < n0) { W = W0; type = t0; rb = rb0; Y = Y0; ldy = ld0; }
    else if (r < n0 + n1) { r -= n0; W = W1; type = t1; rb = rb1; Y = Y1; ldy = ld1; }
    else if (r < n0 + n1 + n2) { r -= n0 + n1; W = W2; type = t2; rb = rb2; Y = Y2; ldy = ld2; }
    else return;
    global const uchar *row = W + (size_t)r * rb;
    float acc[4] = { 0.0f, 0.0f, 0.0f, 0.0f };
    int nsb = k / 32;
    for (int sb = lid; sb < nsb; sb += L) {
        float w[32];
        deq32_any(type, row, sb, w);
        for (int t = 0; t < 4; t++) {
            if (t < (int)ntok) {
                global const float4 *x = (global const float4 *)(X + (size_t)t * ldx + sb * 32);
                float4 s = 0.0f;
                for (int i = 0; i < 8; i++)
                    s += (float4)(w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]) * x[i];
                acc[t] += s.x + s.y + s.z + s.w;
            }
        }
    }
    for (int t = 0; t < (int)ntok; t++) {
        float v = L > 1 ? wg_sum(acc[t], red) : acc[t];
        if (lid == 0) Y[(size_t)t * ldy + r] = v;
    }
}
