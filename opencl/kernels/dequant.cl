/* dequant.cl — weight rows to float: deq_T a tile of rows for the CLBlast GEMM (prefill where there
 * are no tensor cores), emb_T the embedding rows of token ids, times a scale. */

#define DEFINE_DEQ_ROWS(T, id)                                                                    \
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

CLG_TYPES(DEFINE_DEQ_ROWS)
