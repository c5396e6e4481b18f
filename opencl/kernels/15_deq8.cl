/* 15_deq8.cl — dequantize 8 values of sub-block sb (32 values) of a row: lo = values 4t..4t+3,
 * hi = values 16+4t..16+4t+3, t in 0..3. Four lanes with t = 0..3 read one sub-block's bytes
 * side by side (coalesced), and the 4t / 16+4t split matches where the low and high halves of
 * a 32-value block sit in every 4- and 5-bit layout, so each lane loads whole 32-bit words.
 * The mma kernels use the same split for their per-thread k-slots (26_mma.cl). */

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

/* any supported type, chosen at run time (uniform per work-group); GGML type numbers */
inline void deq8_any(uint type, global const uchar *row, int sb, int t, float4 *lo, float4 *hi)
{
    switch (type) {
    case 0: deq8_f32(row, sb, t, lo, hi); break;
    case 1: deq8_f16(row, sb, t, lo, hi); break;
    case 2: deq8_q4_0(row, sb, t, lo, hi); break;
    case 3: deq8_q4_1(row, sb, t, lo, hi); break;
    case 6: deq8_q5_0(row, sb, t, lo, hi); break;
    case 7: deq8_q5_1(row, sb, t, lo, hi); break;
    case 8: deq8_q8_0(row, sb, t, lo, hi); break;
    case 12: deq8_q4_k(row, sb, t, lo, hi); break;
    case 13: deq8_q5_k(row, sb, t, lo, hi); break;
    case 14: deq8_q6_k(row, sb, t, lo, hi); break;
    case 30: deq8_bf16(row, sb, t, lo, hi); break;
    default: *lo = *hi = (float4)(NAN);
    }
}
