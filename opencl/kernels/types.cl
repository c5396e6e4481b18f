/* types.cl — the tensor types the kernels take: the lists that every per-type kernel family
 * instantiates itself from, and each type's dequantisation. Block layouts are llama.cpp's
 * (ggml-common.h); offsets in bytes. The host's facts per type are opencl/ops/types.c. A new type
 * adds its deq32_T and deq8_T here and one entry to CLG_TYPES_CONV (and, for the int8 paths, its
 * loaders in types_q8.cl and an entry in CLG_TYPES_Q8). */

/* X(name, GGML type number) for every type; CLG_TYPES_CONV: all but f16, whose rows the tile
 * products copy instead of converting; CLG_TYPES_BLOCKS: the quantized ones */
#define CLG_TYPES_BLOCKS(X)                                                                       \
    X(q8_0, 8) X(q4_0, 2) X(q4_1, 3) X(q5_0, 6) X(q5_1, 7) X(q4_k, 12) X(q5_k, 13) X(q6_k, 14)
#define CLG_TYPES_CONV(X) X(f32, 0) X(bf16, 30) CLG_TYPES_BLOCKS(X)
#define CLG_TYPES(X) X(f16, 1) CLG_TYPES_CONV(X)

/* the types of the int8 paths (gemv_q8.cl, mma_q8.cl, moe.cl's mvqe_T), X(name, number, the int8
 * mma their values take in mmq8: mma8_u8 stored unsigned, mma8_s8 signed). q4_k's batched products
 * are kernels of its own (mmq8s, mmq8p); mmq8_T serves CLG_TYPES_Q8_MMQ8. */
#define CLG_TYPES_Q8_MMQ8(X) X(q8_0, 8, mma8_s8) X(q5_0, 6, mma8_u8) X(q5_k, 13, mma8_u8) X(q6_k, 14, mma8_s8)
#define CLG_TYPES_Q8(X) X(q4_k, 12, mma8_u8) CLG_TYPES_Q8_MMQ8(X)

/* the GGML type numbers by name: CLG_TYPE_f32, ... */
#define CLG_TYPE_ID(T, id) CLG_TYPE_##T = id,
enum clg_type { CLG_TYPES(CLG_TYPE_ID) };

/* ---- deq32_T: sub-block sb (32 values) of a row */

/* F32: 4 bytes/value */
inline void deq32_f32(global const uchar *row, int sb, float *w)
{
    global const float *p = (global const float *)row + sb * 32;
    for (int i = 0; i < 32; i++) w[i] = p[i];
}

inline void deq32_f16(global const uchar *row, int sb, float *w)
{
    global const half *p = (global const half *)row + sb * 32;
    for (int i = 0; i < 32; i++) w[i] = vload_half(i, p);
}

inline void deq32_bf16(global const uchar *row, int sb, float *w)
{
    global const ushort *p = (global const ushort *)row + sb * 32;
    for (int i = 0; i < 32; i++) w[i] = as_float((uint)p[i] << 16);
}

/* Q8_0: {half d; int8 qs[32]} = 34 bytes */
inline void deq32_q8_0(global const uchar *row, int sb, float *w)
{
    global const uchar *b = row + sb * 34;
    float d = ld_half(b);
    global const char *q = (global const char *)(b + 2);
    for (int i = 0; i < 32; i++) w[i] = d * (float)q[i];
}

/* Q4_0: {half d; uint8 qs[16]} = 18 bytes; low nibbles are values 0..15, high 16..31, minus 8 */
inline void deq32_q4_0(global const uchar *row, int sb, float *w)
{
    global const uchar *b = row + sb * 18;
    float d = ld_half(b);
    for (int i = 0; i < 16; i++) {
        uchar q = b[2 + i];
        w[i] = d * (float)((int)(q & 15) - 8);
        w[i + 16] = d * (float)((int)(q >> 4) - 8);
    }
}

/* Q4_1: {half d; half m; uint8 qs[16]} = 20 bytes */
inline void deq32_q4_1(global const uchar *row, int sb, float *w)
{
    global const uchar *b = row + sb * 20;
    float d = ld_half(b), m = ld_half(b + 2);
    for (int i = 0; i < 16; i++) {
        uchar q = b[4 + i];
        w[i] = d * (float)(q & 15) + m;
        w[i + 16] = d * (float)(q >> 4) + m;
    }
}

/* Q5_0: {half d; uint8 qh[4]; uint8 qs[16]} = 22 bytes; bit j of qh is the 5th bit of value j */
inline void deq32_q5_0(global const uchar *row, int sb, float *w)
{
    global const uchar *b = row + sb * 22;
    float d = ld_half(b);
    uint qh = ld_u32(b + 2);
    for (int i = 0; i < 16; i++) {
        uchar q = b[6 + i];
        int x0 = (int)((q & 15) | (((qh >> i) << 4) & 16)) - 16;
        int x1 = (int)((q >> 4) | ((qh >> (i + 12)) & 16)) - 16;
        w[i] = d * (float)x0;
        w[i + 16] = d * (float)x1;
    }
}

/* Q5_1: {half d; half m; uint8 qh[4]; uint8 qs[16]} = 24 bytes */
inline void deq32_q5_1(global const uchar *row, int sb, float *w)
{
    global const uchar *b = row + sb * 24;
    float d = ld_half(b), m = ld_half(b + 2);
    uint qh = ld_u32(b + 4);
    for (int i = 0; i < 16; i++) {
        uchar q = b[8 + i];
        w[i] = d * (float)((q & 15) | (((qh >> i) << 4) & 16)) + m;
        w[i + 16] = d * (float)((q >> 4) | ((qh >> (i + 12)) & 16)) + m;
    }
}

/* 6-bit scale and min of sub-block j in the 12-byte K-quant scales array */
inline void kq_scale_min(global const uchar *s, int j, float *sc, float *mn)
{
    if (j < 4) {
        *sc = (float)(s[j] & 63);
        *mn = (float)(s[j + 4] & 63);
    } else {
        *sc = (float)((s[j + 4] & 15) | ((s[j - 4] >> 6) << 4));
        *mn = (float)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

/* Q4_K: {half d; half dmin; uint8 scales[12]; uint8 qs[128]} = 144 bytes per 256 values.
 * Sub-blocks 2p and 2p+1 share qs[32p..32p+31]: low nibbles then high nibbles. */
inline void deq32_q4_k(global const uchar *row, int sb, float *w)
{
    global const uchar *b = row + (sb >> 3) * 144;
    int j = sb & 7;
    float d = ld_half(b), dmin = ld_half(b + 2), sc, mn;
    kq_scale_min(b + 4, j, &sc, &mn);
    float d1 = d * sc, m1 = dmin * mn;
    global const uchar *q = b + 16 + 32 * (j >> 1);
    int shift = (j & 1) * 4;
    for (int i = 0; i < 32; i++) w[i] = d1 * (float)((q[i] >> shift) & 15) - m1;
}

/* Q5_K: {half d; half dmin; uint8 scales[12]; uint8 qh[32]; uint8 qs[128]} = 176 bytes.
 * Bit j of qh[i] is the 5th bit of value i of sub-block j. */
inline void deq32_q5_k(global const uchar *row, int sb, float *w)
{
    global const uchar *b = row + (sb >> 3) * 176;
    int j = sb & 7;
    float d = ld_half(b), dmin = ld_half(b + 2), sc, mn;
    kq_scale_min(b + 4, j, &sc, &mn);
    float d1 = d * sc, m1 = dmin * mn;
    global const uchar *qh = b + 16;
    global const uchar *q = b + 48 + 32 * (j >> 1);
    int shift = (j & 1) * 4;
    for (int i = 0; i < 32; i++)
        w[i] = d1 * (float)(((q[i] >> shift) & 15) | (((qh[i] >> j) & 1) << 4)) - m1;
}

/* Q6_K: {uint8 ql[128]; uint8 qh[64]; int8 scales[16]; half d} = 210 bytes per 256 values.
 * Each half of 128 values uses ql[64], qh[32], scales[8]; quarter k of a half takes ql low/high
 * nibbles of ql[0..31] or ql[32..63] and bits 2k..2k+1 of qh; one scale per 16 values. */
inline void deq32_q6_k(global const uchar *row, int sb, float *w)
{
    global const uchar *b = row + (sb >> 3) * 210;
    int j = sb & 7, h = j >> 2, k = j & 3;
    float d = ld_half(b + 208);
    global const uchar *ql = b + 64 * h + ((k & 1) ? 32 : 0);
    global const uchar *qh = b + 128 + 32 * h;
    global const char *sc = (global const char *)(b + 192 + 8 * h);
    int lshift = (k >> 1) * 4, hshift = 2 * k;
    for (int i = 0; i < 32; i++) {
        int q = (int)(((ql[i] >> lshift) & 15) | (((qh[i] >> hshift) & 3) << 4)) - 32;
        w[i] = d * (float)sc[(i >> 4) + 2 * k] * (float)q;
    }
}

/* ---- deq8_T: 8 values of sub-block sb of a row: lo = values 4t..4t+3, hi = values 16+4t..16+4t+3,
 * t in 0..3. Four lanes with t = 0..3 read one sub-block's bytes side by side (coalesced), and the
 * 4t / 16+4t split matches where the low and high halves of a 32-value block sit in every 4- and
 * 5-bit layout, so each lane loads whole 32-bit words. The mma kernels use the same split for
 * their per-thread k-slots (mma_f16.cl). */

/* 32-bit word at a 2-byte aligned address (Q8_0, Q5_0 and Q6_K blocks are only 2-aligned) */
inline uint ld_u32_a2(global const uchar *p)
{
    global const ushort *s = (global const ushort *)p;
    return (uint)s[0] | ((uint)s[1] << 16);
}

/* small non-negative integer n (< 2^23) to float without a conversion instruction (those run at a
 * quarter of the FMA rate on NVIDIA): the bits 0x4B000000 | n are the float 2^23 + n, exactly */
inline float u2f(uint n) { return as_float(0x4B000000u | n) - 8388608.0f; }

/* the four nibbles at bit offset sh of each byte of u, as floats */
inline float4 nib4(uint u, int sh)
{
    u >>= sh;
    return (float4)(u2f(u & 15), u2f((u >> 8) & 15), u2f((u >> 16) & 15), u2f((u >> 24) & 15));
}

/* each byte of u as a float */
inline float4 bytes4(uint u)
{
    return (float4)(u2f(u & 255), u2f((u >> 8) & 255), u2f((u >> 16) & 255), u2f(u >> 24));
}

/* each byte of u as a signed int8, as a float (flip the sign bit: byte + 128 is unsigned) */
inline float4 sbytes4(uint u)
{
    return bytes4(u ^ 0x80808080u) - 128.0f;
}

inline void deq8_f32(global const uchar *row, int sb, int t, float4 *lo, float4 *hi)
{
    global const float *p = (global const float *)row + sb * 32 + 4 * t;
    *lo = vload4(0, p);
    *hi = vload4(0, p + 16);
}

inline void deq8_f16(global const uchar *row, int sb, int t, float4 *lo, float4 *hi)
{
    global const half *p = (global const half *)row + sb * 32 + 4 * t;
    *lo = vload_half4(0, p);
    *hi = vload_half4(0, p + 16);
}

inline float4 bf16x4(uint2 u)
{
    return (float4)(as_float(u.x << 16), as_float(u.x & 0xffff0000u), as_float(u.y << 16),
                    as_float(u.y & 0xffff0000u));
}

inline void deq8_bf16(global const uchar *row, int sb, int t, float4 *lo, float4 *hi)
{
    global const uint2 *p = (global const uint2 *)(row + sb * 64 + 8 * t);
    *lo = bf16x4(p[0]);
    *hi = bf16x4(p[4]);
}

/* Q8_0: {half d; int8 qs[32]} */
inline void deq8_q8_0(global const uchar *row, int sb, int t, float4 *lo, float4 *hi)
{
    global const uchar *b = row + sb * 34;
    float d = ld_half(b);
    *lo = d * sbytes4(ld_u32_a2(b + 2 + 4 * t));
    *hi = d * sbytes4(ld_u32_a2(b + 18 + 4 * t));
}

/* Q4_0: {half d; uint8 qs[16]}: low nibbles values 0..15, high 16..31, minus 8 */
inline void deq8_q4_0(global const uchar *row, int sb, int t, float4 *lo, float4 *hi)
{
    global const uchar *b = row + sb * 18;
    float d = ld_half(b);
    uint q = ld_u32_a2(b + 2 + 4 * t);
    *lo = d * (nib4(q, 0) - 8.0f);
    *hi = d * (nib4(q, 4) - 8.0f);
}

/* Q4_1: {half d; half m; uint8 qs[16]} */
inline void deq8_q4_1(global const uchar *row, int sb, int t, float4 *lo, float4 *hi)
{
    global const uchar *b = row + sb * 20;
    float d = ld_half(b), m = ld_half(b + 2);
    uint q = *(global const uint *)(b + 4 + 4 * t);
    *lo = d * nib4(q, 0) + m;
    *hi = d * nib4(q, 4) + m;
}

/* fifth bits for values i..i+3 from qh (bit i of qh is value i's), as 0 or 16 */
inline float4 qh4(uint qh, int i)
{
    qh >>= i;
    return (float4)((float)((qh & 1) << 4), (float)(((qh >> 1) & 1) << 4), (float)(((qh >> 2) & 1) << 4),
                    (float)(((qh >> 3) & 1) << 4));
}

/* Q5_0: {half d; uint8 qh[4]; uint8 qs[16]} */
inline void deq8_q5_0(global const uchar *row, int sb, int t, float4 *lo, float4 *hi)
{
    global const uchar *b = row + sb * 22;
    float d = ld_half(b);
    uint qh = ld_u32_a2(b + 2), q = ld_u32_a2(b + 6 + 4 * t);
    *lo = d * (nib4(q, 0) + qh4(qh, 4 * t) - 16.0f);
    *hi = d * (nib4(q, 4) + qh4(qh, 16 + 4 * t) - 16.0f);
}

/* Q5_1: {half d; half m; uint8 qh[4]; uint8 qs[16]} */
inline void deq8_q5_1(global const uchar *row, int sb, int t, float4 *lo, float4 *hi)
{
    global const uchar *b = row + sb * 24;
    float d = ld_half(b), m = ld_half(b + 2);
    uint qh = *(global const uint *)(b + 4), q = *(global const uint *)(b + 8 + 4 * t);
    *lo = d * (nib4(q, 0) + qh4(qh, 4 * t)) + m;
    *hi = d * (nib4(q, 4) + qh4(qh, 16 + 4 * t)) + m;
}

/* kq_scale_min without branches (lanes of one warp hold different sub-blocks): the 12 scale bytes
 * as three 32-bit words, s 4-byte aligned (K-quant blocks are 144/176 bytes, scales at +4) */
inline void kq_scale_min4(global const uchar *s, int j, float *sc, float *mn)
{
    global const uint *w = (global const uint *)s;
    uint u0 = w[0], u1 = w[1], u2 = w[2];
    int sh = 8 * (j & 3);
    uint a = (u0 >> sh) & 255, b = (u1 >> sh) & 255, c = (u2 >> sh) & 255;
    uint lo_s = a & 63, lo_m = b & 63;
    uint hi_s = (c & 15) | ((a >> 6) << 4), hi_m = (c >> 4) | ((b >> 6) << 4);
    *sc = (float)(j < 4 ? lo_s : hi_s);
    *mn = (float)(j < 4 ? lo_m : hi_m);
}

/* scale and min of sub-block j of a Q4_K/Q5_K super-block at b: value = d1 * q - m1 */
inline void kq_sub_scale(global const uchar *b, int j, float *d1, float *m1)
{
    float sc, mn;
    kq_scale_min4(b + 4, j, &sc, &mn);
    *d1 = ld_half(b) * sc;
    *m1 = ld_half(b + 2) * mn;
}

/* Q4_K: 144-byte super-blocks of 8 sub-blocks; sub-blocks 2p, 2p+1 share qs[32p..32p+31] */
inline void deq8_q4_k(global const uchar *row, int sb, int t, float4 *lo, float4 *hi)
{
    global const uchar *b = row + (sb >> 3) * 144;
    int j = sb & 7;
    float d1, m1;
    kq_sub_scale(b, j, &d1, &m1);
    global const uint *q = (global const uint *)(b + 16 + 32 * (j >> 1) + 4 * t);
    int sh = (j & 1) * 4;
    *lo = d1 * nib4(q[0], sh) - m1;
    *hi = d1 * nib4(q[4], sh) - m1;
}

/* Q5_K: 176 bytes: d, dmin, scales[12], qh[32], qs[128]; bit j of qh[i] is value i of sub-block j */
inline void deq8_q5_k(global const uchar *row, int sb, int t, float4 *lo, float4 *hi)
{
    global const uchar *b = row + (sb >> 3) * 176;
    int j = sb & 7;
    float d1, m1;
    kq_sub_scale(b, j, &d1, &m1);
    global const uint *qh = (global const uint *)(b + 16 + 4 * t);
    global const uint *q = (global const uint *)(b + 48 + 32 * (j >> 1) + 4 * t);
    int sh = (j & 1) * 4;
    *lo = d1 * (nib4(q[0], sh) + 16.0f * nib4((qh[0] >> j) & 0x01010101u, 0)) - m1;
    *hi = d1 * (nib4(q[4], sh) + 16.0f * nib4((qh[4] >> j) & 0x01010101u, 0)) - m1;
}

/* Q6_K: 210 bytes: ql[128], qh[64], int8 scales[16], half d (see deq32_q6_k) */
inline void deq8_q6_k(global const uchar *row, int sb, int t, float4 *lo, float4 *hi)
{
    global const uchar *b = row + (sb >> 3) * 210;
    int j = sb & 7, h = j >> 2, k = j & 3;
    float d = ld_half(b + 208);
    global const uchar *ql = b + 64 * h + ((k & 1) ? 32 : 0) + 4 * t;
    global const uchar *qh = b + 128 + 32 * h + 4 * t;
    global const char *sc = (global const char *)(b + 192 + 8 * h);
    int ls = (k >> 1) * 4, hs = 2 * k;
    uint l0 = ld_u32_a2(ql), l1 = ld_u32_a2(ql + 16);
    uint h0 = (ld_u32_a2(qh) >> hs) & 0x03030303u, h1 = (ld_u32_a2(qh + 16) >> hs) & 0x03030303u;
    *lo = d * (float)sc[2 * k] * (nib4(l0, ls) + 16.0f * bytes4(h0) - 32.0f);
    *hi = d * (float)sc[2 * k + 1] * (nib4(l1, ls) + 16.0f * bytes4(h1) - 32.0f);
}

/* any type, chosen at run time by its GGML number (uniform per work-group) */
#define CLG_DEQ32_CASE(T, id) case id: deq32_##T(row, sb, w); break;
inline void deq32_any(uint type, global const uchar *row, int sb, float *w)
{
    switch (type) {
    CLG_TYPES(CLG_DEQ32_CASE)
    default: for (int i = 0; i < 32; i++) w[i] = NAN;
    }
}

#define CLG_DEQ8_CASE(T, id) case id: deq8_##T(row, sb, t, lo, hi); break;
inline void deq8_any(uint type, global const uchar *row, int sb, int t, float4 *lo, float4 *hi)
{
    switch (type) {
    CLG_TYPES(CLG_DEQ8_CASE)
    default: *lo = *hi = (float4)(NAN);
    }
}
