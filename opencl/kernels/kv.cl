/* kv.cl — the KV cache's rows in the type the program is built for (CLG_KV: 0 f16, 1 q8_0, 2 q4_0;
 * kv.h's kv_types): kv_t, a row's size in kv_t, and the loads and stores every generic kernel that
 * reads or writes the cache goes through. A quantized row is llama.cpp's blocks of 32 values
 * (q8_0: d = amax / 127, q = round(x / d); q4_0: d = max / -8, q = min(15, (int)(x / d + 8.5)),
 * value j of a block in the low nibble of its byte j, value j + 16 in the high one), the row's
 * quants first, then its hd / 32 f16 scales: 4 values' quants are one 4-byte load. */

#ifndef CLG_KV
#define CLG_KV 0
#endif

#if CLG_KV == 0
typedef half kv_t;
#define KV_ROW(hd) (hd) /* a row in kv_t */
#else
typedef uchar kv_t;
#define KV_QB (CLG_KV == 1 ? 32 : 16)     /* quant bytes of a block of 32 values */
#define KV_QBYTES(hd) ((hd) / 32 * KV_QB) /* where a row's scales start */
#define KV_ROW(hd) (KV_QBYTES(hd) + (hd) / 16)
#endif

/* values d .. d + 3 of a row (d a multiple of 4) */
inline float4 kv_load4(global const kv_t *row, uint d, uint hd)
{
#if CLG_KV == 0
    return vload_half4(0, row + d);
#else
    float s = vload_half(d / 32, (global const half *)(row + KV_QBYTES(hd)));
#if CLG_KV == 1
    return convert_float4(vload4(0, (global const char *)row + d)) * s;
#else
    uchar4 b = vload4(0, row + d / 32 * 16 + d % 16);
    return (convert_float4(d % 32 < 16 ? b & (uchar)15 : b >> (uchar)4) - 8.0f) * s;
#endif
#endif
}

/* value d of a row */
inline float kv_load1(global const kv_t *row, uint d, uint hd)
{
#if CLG_KV == 0
    return vload_half(d, row);
#else
    float s = vload_half(d / 32, (global const half *)(row + KV_QBYTES(hd)));
#if CLG_KV == 1
    return (float)((global const char *)row)[d] * s;
#else
    uchar b = row[d / 32 * 16 + d % 16];
    return (float)((d % 32 < 16 ? b & 15 : b >> 4) - 8) * s;
#endif
#endif
}

/* value i of a row being written: f16 goes straight to the cache, a quantized type's to the group's
 * staging row (hd floats), which kv_put_row then writes */
inline void kv_put(float v, uint i, global kv_t *row, local float *stage)
{
#if CLG_KV == 0
    vstore_half(v, i, row);
#else
    stage[i] = v;
#endif
}

/* the staged row to the cache, a block per item (the whole group calls it: a barrier) */
inline void kv_put_row(local const float *stage, uint hd, global kv_t *row)
{
#if CLG_KV != 0
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint b = get_local_id(0); b < hd / 32; b += get_local_size(0)) {
        local const float *x = stage + 32 * b;
        float amax = 0.0f, mx = 0.0f;
        for (int j = 0; j < 32; j++)
            if (fabs(x[j]) > amax) { amax = fabs(x[j]); mx = x[j]; }
#if CLG_KV == 1
        float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        global char *q = (global char *)row + 32 * b;
        for (int j = 0; j < 32; j++) q[j] = (char)round(x[j] * id);
#else
        float d = mx / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        global uchar *q = row + 16 * b;
        for (int j = 0; j < 16; j++)
            q[j] = (uchar)(min(15, (int)(x[j] * id + 8.5f)) | min(15, (int)(x[j + 16] * id + 8.5f)) << 4);
#endif
        vstore_half(d, b, (global half *)(row + KV_QBYTES(hd)));
    }
#endif
}
