/* 10_dequant.cl — dequantize sub-block sb (32 values) of a row, for each GGUF type.
 * Block layouts are llama.cpp's (ggml-common.h); offsets in bytes. */

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
