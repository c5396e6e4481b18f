/* types_q8.cl — the int8 forms of the types the int8 paths take (CLG_TYPES_Q8; NVIDIA): per type,
 *   mvqp_T, mvq_ld_T    the piece of a row a gemv_q8 lane loads: piece pc (k / MVQ_VPP_T of them per row) of
 *                       q4_k is qs bytes 16pc'..16pc'+15 of super-block pc / 8 (pc' = pc % 8), values
 *                       16h..16h+15 (h = pc' & 1) of sub-blocks 2p (low nibbles) and 2p + 1 (high
 *                       nibbles), p = pc' / 2; q5_k's the same; of q8_0 and q5_0 block pc; of q6_k half
 *                       of two sub-blocks of super-block pc / 8 (mvq_ld_q6_k); q4_k2 (mvqg's q4_k for
 *                       long rows) a q4_k sub-block pair whole: qs bytes 32pc'..32pc'+31 of super-block
 *                       pc / 4 (pc' = pc % 4), sub-blocks 2pc' (low nibbles) and 2pc' + 1 (high);
 *   mvq_dot_T_l / _g    the piece against one token's int8 X (quant_q8.cl's layout) in local or
 *                       global memory, block scales applied once per piece;
 *   mvq_at_T, MVQG_PF_T the piece's bytes, and how many passes ahead mvqg prefetches them into L2;
 *   mmq8_ld_T           the unit of a row an mma_q8 thread loads (mma_q8.cl says which values). */

#ifdef CLG_NVIDIA

/* ---- q4_k: 144-byte super-blocks: d, dmin (f16), scales[12], qs[128] */

/* sub-block j's scale d * sc and min dmin * m from the super-block's first 16 bytes h, with ALU
 * only (kq_scale_min4's 6-bit packing) */
inline void q4k_scale_min(uint4 h, int j, float *dw, float *mw)
{
    int sh = 8 * (j & 3);
    uint a = (h.y >> sh) & 255, bb = (h.z >> sh) & 255, cc = (h.w >> sh) & 255;
    uint sc = j < 4 ? a & 63 : (cc & 15) | ((a >> 6) << 4);
    uint mn = j < 4 ? bb & 63 : (cc >> 4) | ((bb >> 6) << 4);
    *dw = h2f(h.x) * (float)sc;
    *mw = h2f(h.x >> 16) * (float)mn;
}

/* values a piece: 32, and 64 for q4_k2 */
#define MVQ_VPP_q4_k 32
#define MVQ_VPP_q8_0 32
#define MVQ_VPP_q5_0 32
#define MVQ_VPP_q5_k 32
#define MVQ_VPP_q6_k 32
#define MVQ_VPP_q4_k2 64

typedef struct mvqp_q4_k { uint4 q; float da, ma, db, mb; } mvqp_q4_k;

inline mvqp_q4_k mvq_ld_q4_k(global const uchar *row, int pc)
{
    global const uchar *b = row + (pc >> 3) * 144;
    int c = pc & 7, j = c & 6; /* sub-blocks j (low nibbles) and j + 1 (high) */
    uint4 h = *(global const uint4 *)b;
    mvqp_q4_k p;
    p.q = *(global const uint4 *)(b + 16 + 16 * c);
    q4k_scale_min(h, j, &p.da, &p.ma);
    q4k_scale_min(h, j + 1, &p.db, &p.mb);
    return p;
}

/* a k-quant piece against one token's quantized X (in local memory: _l, or global: _g); LO(c) and HI(c)
 * are component c of the piece's unsigned values of sub-blocks sa (values 16h..16h + 15) and sa + 1 */
#define DEFINE_DOT_KQ(T, AS, SFX, LO, HI)                                                         \
inline float mvq_dot_##T##SFX(const mvqp_##T *p, int pc, AS const uint *xq, AS const float *xd,    \
                              AS const float *xs)                                                 \
{                                                                                                 \
    int sa = (pc >> 3) * 8 + (pc & 6), h = pc & 1; /* global sub-block index of the low nibbles */ \
    AS const uint *xa = xq + sa * 8 + h * 4, *xb = xa + 8;                                        \
    const uint M = 0x0F0F0F0Fu;                                                                   \
    int ia = dp4a_us(LO(x), xa[0], 0), ib = dp4a_us(HI(x), xb[0], 0);                             \
    ia = dp4a_us(LO(y), xa[1], ia); ib = dp4a_us(HI(y), xb[1], ib);                               \
    ia = dp4a_us(LO(z), xa[2], ia); ib = dp4a_us(HI(z), xb[2], ib);                               \
    ia = dp4a_us(LO(w), xa[3], ia); ib = dp4a_us(HI(w), xb[3], ib);                               \
    return p->da * xd[sa] * (float)ia + p->db * xd[sa + 1] * (float)ib - p->ma * xs[2 * sa + h] -  \
           p->mb * xs[2 * sa + 2 + h];                                                            \
}

/* from global memory: each half-piece of X is one 16-byte load (its word offset is a multiple of 4;
 * faster than single words) */
#define DEFINE_DOT_KQ_G(T, LO, HI)                                                                \
inline float mvq_dot_##T##_g(const mvqp_##T *p, int pc, global const uint *xq, global const float *xd, \
                             global const float *xs)                                              \
{                                                                                                 \
    int sa = (pc >> 3) * 8 + (pc & 6), h = pc & 1;                                                \
    uint4 xa = *(global const uint4 *)(xq + sa * 8 + h * 4), xb = *(global const uint4 *)(xq + sa * 8 + 8 + h * 4); \
    const uint M = 0x0F0F0F0Fu;                                                                   \
    int ia = dp4a_us(LO(x), xa.x, 0), ib = dp4a_us(HI(x), xb.x, 0);                               \
    ia = dp4a_us(LO(y), xa.y, ia); ib = dp4a_us(HI(y), xb.y, ib);                                 \
    ia = dp4a_us(LO(z), xa.z, ia); ib = dp4a_us(HI(z), xb.z, ib);                                 \
    ia = dp4a_us(LO(w), xa.w, ia); ib = dp4a_us(HI(w), xb.w, ib);                                 \
    return p->da * xd[sa] * (float)ia + p->db * xd[sa + 1] * (float)ib - p->ma * xs[2 * sa + h] -  \
           p->mb * xs[2 * sa + 2 + h];                                                            \
}

/* q4_k keeps its nibbles packed until the dot (4 registers a piece, not 8) */
#define Q4K_LO(c) (p->q.c & M)
#define Q4K_HI(c) ((p->q.c >> 4) & M)
DEFINE_DOT_KQ(q4_k, local, _l, Q4K_LO, Q4K_HI)
DEFINE_DOT_KQ_G(q4_k, Q4K_LO, Q4K_HI)

/* q4_k2: one header load and scale decode for both halves of a sub-block pair, half the passes of a
 * row (+3% on the 31B's B=1, whose 5,376-value rows fill the passes either way) */
typedef struct mvqp_q4_k2 { uint4 q0, q1; float da, ma, db, mb; } mvqp_q4_k2;

inline mvqp_q4_k2 mvq_ld_q4_k2(global const uchar *row, int pc)
{
    global const uchar *b = row + (pc >> 2) * 144;
    int c = pc & 3;
    uint4 h = *(global const uint4 *)b;
    mvqp_q4_k2 p;
    p.q0 = *(global const uint4 *)(b + 16 + 32 * c);
    p.q1 = *(global const uint4 *)(b + 32 + 32 * c);
    q4k_scale_min(h, 2 * c, &p.da, &p.ma);
    q4k_scale_min(h, 2 * c + 1, &p.db, &p.mb);
    return p;
}

/* against global X: sub-block sa's 32 int8 values are the 8 words from 8 sa, a pair's 16 words one
 * run; xs holds a sum per 16 values */
inline float mvq_dot_q4_k2_g(const mvqp_q4_k2 *p, int pc, global const uint *xq, global const float *xd,
                             global const float *xs)
{
    int sa = (pc >> 2) * 8 + 2 * (pc & 3);
    global const uint4 *x = (global const uint4 *)(xq + sa * 8);
    uint4 a0 = x[0], a1 = x[1], b0 = x[2], b1 = x[3];
    const uint M = 0x0F0F0F0Fu;
    int ia = dp4a_us(p->q0.x & M, a0.x, 0), ib = dp4a_us((p->q0.x >> 4) & M, b0.x, 0);
    ia = dp4a_us(p->q0.y & M, a0.y, ia); ib = dp4a_us((p->q0.y >> 4) & M, b0.y, ib);
    ia = dp4a_us(p->q0.z & M, a0.z, ia); ib = dp4a_us((p->q0.z >> 4) & M, b0.z, ib);
    ia = dp4a_us(p->q0.w & M, a0.w, ia); ib = dp4a_us((p->q0.w >> 4) & M, b0.w, ib);
    ia = dp4a_us(p->q1.x & M, a1.x, ia); ib = dp4a_us((p->q1.x >> 4) & M, b1.x, ib);
    ia = dp4a_us(p->q1.y & M, a1.y, ia); ib = dp4a_us((p->q1.y >> 4) & M, b1.y, ib);
    ia = dp4a_us(p->q1.z & M, a1.z, ia); ib = dp4a_us((p->q1.z >> 4) & M, b1.z, ib);
    ia = dp4a_us(p->q1.w & M, a1.w, ia); ib = dp4a_us((p->q1.w >> 4) & M, b1.w, ib);
    float2 d = vload2(0, xd + sa);
    float4 m = vload4(0, xs + 2 * sa);
    return p->da * d.x * (float)ia + p->db * d.y * (float)ib - p->ma * (m.x + m.y) - p->mb * (m.z + m.w);
}

/* ---- q5_k: 176-byte super-blocks: d, dmin (f16), scales[12] (q4_k's packing), qh[32], qs[128]; a
 * piece is q4_k's (qs bytes 16pc'.., sub-blocks 2p and 2p + 1) with bits 2p and 2p + 1 of qh bytes
 * 16h..16h + 15 as the values' fifth bits */
typedef struct mvqp_q5_k { uint4 a, b; float da, ma, db, mb; } mvqp_q5_k;

inline mvqp_q5_k mvq_ld_q5_k(global const uchar *row, int pc)
{
    global const uchar *b = row + (pc >> 3) * 176;
    int c = pc & 7, j = c & 6;
    uint4 h = *(global const uint4 *)b;
    uint4 q = *(global const uint4 *)(b + 48 + 16 * c), qh = *(global const uint4 *)(b + 16 + 16 * (c & 1));
    const uint M = 0x0F0F0F0Fu, B = 0x01010101u;
    mvqp_q5_k p;
    p.a = (q & M) | (((qh >> (uint)j) & B) << 4);
    p.b = ((q >> 4) & M) | (((qh >> (uint)(j + 1)) & B) << 4);
    q4k_scale_min(h, j, &p.da, &p.ma);
    q4k_scale_min(h, j + 1, &p.db, &p.mb);
    return p;
}

#define Q5K_LO(c) p->a.c
#define Q5K_HI(c) p->b.c
DEFINE_DOT_KQ(q5_k, local, _l, Q5K_LO, Q5K_HI)
DEFINE_DOT_KQ_G(q5_k, Q5K_LO, Q5K_HI)


/* A 2-byte-aligned block of 2 + 4n bytes (an f16 then n words: q8_0, q5_0): returns the f16 bits
 * and fills w with the words at block bytes 2 + 4i, from aligned loads that stay inside the block
 * (from b - 2 when b sits mid-word, else with the last word read as its first 2 bytes). */
inline uint ld_block_a2(global const uchar *b, int n, uint *w)
{
    int mid = ((ulong)b & 2) != 0;
    global const uint *a = (global const uint *)(b - (mid ? 2 : 0));
    uint prev = a[0];
    for (int i = 0; i < n; i++) {
        uint next = (mid || i + 1 < n) ? a[i + 1] : *(global const ushort *)(a + n);
        w[i] = mid ? next : (prev >> 16) | (next << 16);
        prev = next;
    }
    return mid ? a[0] >> 16 : a[0] & 0xFFFFu;
}

/* ---- q8_0: 34-byte blocks: d (f16), qs[32] int8; blocks are only 2-byte aligned (ld_block_a2) */
typedef struct mvqp_q8_0 { uint q[8]; float d; } mvqp_q8_0;

inline mvqp_q8_0 mvq_ld_q8_0(global const uchar *row, int pc)
{
    mvqp_q8_0 p;
    p.d = h2f(ld_block_a2(row + pc * 34, 8, p.q));
    return p;
}

#define DEFINE_DOT_Q8_0(AS, SFX)                                                                  \
inline float mvq_dot_q8_0##SFX(const mvqp_q8_0 *p, int pc, AS const uint *xq, AS const float *xd,   \
                               AS const float *xs)                                                \
{                                                                                                 \
    AS const uint *x = xq + pc * 8;                                                               \
    int s = 0;                                                                                    \
    for (int i = 0; i < 8; i++) s = dp4a_ss(p->q[i], x[i], s);                                    \
    return p->d * xd[pc] * (float)s;                                                              \
}
DEFINE_DOT_Q8_0(local, _l)
DEFINE_DOT_Q8_0(global, _g)

/* ---- q5_0: 22-byte blocks: d (f16), qh (32 fifth bits), qs[16] (value j: low nibble of qs[j],
 * value 16 + j: high nibble), each value minus 16. */
typedef struct mvqp_q5_0 { uint lo[4], hi[4]; float d; } mvqp_q5_0;

/* bits 0..3 of b to bit 4 of bytes 0..3 */
inline uint q5_spread(uint b) { return ((b & 1) << 4) | ((b & 2) << 11) | ((b & 4) << 18) | ((b & 8) << 25); }

inline mvqp_q5_0 mvq_ld_q5_0(global const uchar *row, int pc)
{
    uint w[5]; /* qh, then qs */
    mvqp_q5_0 p;
    p.d = h2f(ld_block_a2(row + pc * 22, 5, w));
    for (int i = 0; i < 4; i++) {
        p.lo[i] = (w[i + 1] & 0x0F0F0F0Fu) | q5_spread(w[0] >> (4 * i));
        p.hi[i] = ((w[i + 1] >> 4) & 0x0F0F0F0Fu) | q5_spread(w[0] >> (16 + 4 * i));
    }
    return p;
}

#define DEFINE_DOT_Q5_0(AS, SFX)                                                                  \
inline float mvq_dot_q5_0##SFX(const mvqp_q5_0 *p, int pc, AS const uint *xq, AS const float *xd,   \
                               AS const float *xs)                                                \
{                                                                                                 \
    AS const uint *x = xq + pc * 8;                                                               \
    int s = 0;                                                                                    \
    for (int i = 0; i < 4; i++) s = dp4a_us(p->lo[i], x[i], s);                                   \
    for (int i = 0; i < 4; i++) s = dp4a_us(p->hi[i], x[4 + i], s);                               \
    return p->d * (xd[pc] * (float)s - 16.0f * (xs[2 * pc] + xs[2 * pc + 1]));                    \
}
DEFINE_DOT_Q5_0(local, _l)
DEFINE_DOT_Q5_0(global, _g)

/* ---- q6_k: 210-byte super-blocks, only 2-byte aligned: ql[128], qh[64], int8 scales[16], d (f16).
 * Value 32c + i of half h (c < 4, i < 32) is nibble c / 2 of ql[64h + 32(c & 1) + i] below bits 2c, 2c + 1
 * of qh[32h + i], stored plus 32, with scale 8h + 2c + i / 16 (deq32_q6_k). Piece pc is t = pc & 7 of
 * super-block pc / 8: the 16 ql bytes at 64h + 32c1 + 16e and the 16 qh bytes at 32h + 16e (h = t / 4,
 * c1 = (t / 2) & 1, e = t & 1), values 16e..16e + 15 of sub-blocks 4h + c1 (a: low nibbles) and
 * 4h + c1 + 2 (b: high), so a warp's lanes read each super-block's ql once, in order. */
typedef struct mvqp_q6_k { uint a[4], b[4]; float da, db; } mvqp_q6_k;

/* the 4 words of 16 bytes at 2-byte aligned p, from aligned loads within p - 2 .. p + 19 (every
 * run is followed by 4 more bytes of the super-block); no branch: lanes differ in alignment */
inline void ld16_a2(global const uchar *p, uint *w)
{
    uint sh = ((uint)(ulong)p & 2) * 8;
    global const uint *a = (global const uint *)((ulong)p & ~(ulong)3);
    uint prev = a[0];
    for (int i = 0; i < 4; i++) {
        uint next = a[i + 1];
        w[i] = (uint)((((ulong)next << 32) | prev) >> sh);
        prev = next;
    }
}

inline mvqp_q6_k mvq_ld_q6_k(global const uchar *row, int pc)
{
    global const uchar *b = row + (pc >> 3) * 210;
    int t = pc & 7, h = t >> 2, c1 = (t >> 1) & 1, e = t & 1;
    uint ql[4], qh[4];
    ld16_a2(b + 64 * h + 32 * c1 + 16 * e, ql);
    ld16_a2(b + 128 + 32 * h + 16 * e, qh);
    global const char *sc = (global const char *)(b + 192 + 8 * h + 2 * c1 + e);
    float d = h2f(*(global const ushort *)(b + 208));
    uint hs = 2 * c1;
    mvqp_q6_k p;
    for (int i = 0; i < 4; i++) {
        p.a[i] = (ql[i] & 0x0F0F0F0Fu) | (((qh[i] >> hs) & 0x03030303u) << 4);
        p.b[i] = ((ql[i] >> 4) & 0x0F0F0F0Fu) | (((qh[i] >> (hs + 4)) & 0x03030303u) << 4);
    }
    p.da = d * (float)sc[0];
    p.db = d * (float)sc[4];
    return p;
}

/* sub-blocks sa and sa + 2 of the piece, values 16e..: X words 8s + 4e.. (16-byte aligned), sums xs[2s + e] */
#define Q6K_SUBS int t = pc & 7, e = t & 1, sa = (pc >> 3) * 8 + (t >> 2) * 4 + ((t >> 1) & 1), sb = sa + 2;
#define Q6K_DOT_TAIL                                                                              \
    int ia = 0, ib = 0;                                                                           \
    for (int i = 0; i < 4; i++) ia = dp4a_us(p->a[i], xa[i], ia);                                 \
    for (int i = 0; i < 4; i++) ib = dp4a_us(p->b[i], xb[i], ib);                                 \
    return p->da * (xd[sa] * (float)ia - 32.0f * xs[2 * sa + e]) + p->db * (xd[sb] * (float)ib - 32.0f * xs[2 * sb + e]);

inline float mvq_dot_q6_k_l(const mvqp_q6_k *p, int pc, local const uint *xq, local const float *xd,
                            local const float *xs)
{
    Q6K_SUBS
    local const uint *xa = xq + sa * 8 + 4 * e, *xb = xq + sb * 8 + 4 * e;
    Q6K_DOT_TAIL
}

inline float mvq_dot_q6_k_g(const mvqp_q6_k *p, int pc, global const uint *xq, global const float *xd,
                            global const float *xs)
{
    Q6K_SUBS
    uint4 x0 = *(global const uint4 *)(xq + sa * 8 + 4 * e), x1 = *(global const uint4 *)(xq + sb * 8 + 4 * e);
    uint xa[4] = { x0.x, x0.y, x0.z, x0.w }, xb[4] = { x1.x, x1.y, x1.z, x1.w };
    Q6K_DOT_TAIL
}

/* the passes ahead whose pieces each mvqg lane prefetches into L2, per type: one pays on q4_k, q8_0
 * lost, and mvq (X staged) has no long weight stream */
#define MVQG_PF_q4_k 1
#define MVQG_PF_q4_k2 1
#define MVQG_PF_q8_0 0
#define MVQG_PF_q5_0 0
#define MVQG_PF_q6_k 0
#define MVQG_PF_q5_k 0
/* the bytes of piece pc of a row (for the L2 prefetch): its nibbles or values */
inline global const uchar *mvq_at_q4_k(global const uchar *row, int pc) { return row + (pc >> 3) * 144 + 16 + 16 * (pc & 7); }
inline global const uchar *mvq_at_q4_k2(global const uchar *row, int pc) { return row + (pc >> 2) * 144 + 16 + 32 * (pc & 3); }
inline global const uchar *mvq_at_q8_0(global const uchar *row, int pc) { return row + pc * 34; }
inline global const uchar *mvq_at_q5_0(global const uchar *row, int pc) { return row + pc * 22; }
inline global const uchar *mvq_at_q5_k(global const uchar *row, int pc) { return row + (pc >> 3) * 176 + 48 + 16 * (pc & 7); }
inline global const uchar *mvq_at_q6_k(global const uchar *row, int pc)
{
    int t = pc & 7;
    return row + (pc >> 3) * 210 + 64 * (t >> 2) + 32 * ((t >> 1) & 1) + 16 * (t & 1);
}

/* 8 bytes at p, which is 2 bytes past a 4-byte boundary, from aligned loads that stay within
 * p - 2 .. p + 7 (the last piece is a 2-byte load: p + 7 may end the buffer) */
inline uint2 ld8_mid(global const uchar *p)
{
    global const uint *a = (global const uint *)(p - 2);
    uint w0 = a[0], w1 = a[1], w2 = *(global const ushort *)(p + 6);
    return (uint2)((w0 >> 16) | (w1 << 16), (w1 >> 16) | (w2 << 16));
}

inline uint2 ld8_al4(global const uchar *p)
{
    global const uint *a = (global const uint *)p;
    return (uint2)(a[0], a[1]);
}

/* One row's unit u (values 64u..64u+63: sub-blocks 2u, 2u+1) for thread t: q[s] = (slots 4t..,
 * slots 16+4t..) of sub-block s, with its scale dw[s] and offset mw[s] */

/* q8_0: blocks 2u (at 68u, so its values sit 2 past a 4-byte boundary) and 2u + 1 (4-aligned values) */
inline void mmq8_ld_q8_0(global const uchar *row, int u, int t, uint2 *q, float *dw, float *mw)
{
    global const uchar *b = row + u * 68;
    q[0] = ld8_mid(b + 2 + 8 * t);
    q[1] = ld8_al4(b + 36 + 8 * t);
    dw[0] = ld_half(b); dw[1] = ld_half(b + 34);
    mw[0] = mw[1] = 0.0f;
}

/* q5_0: 22-byte blocks d, qh[4], qs[16]; value j < 16 is qs[j]'s low nibble, 16 + j its high one,
 * bit j of qh the fifth bit; stored plus 16. Values 8t..8t+7: qs[8(t & 1)..] nibble t >> 1. */
inline uint2 q5_vals(uint2 w, uint hb, int t)
{
    int sh = (t >> 1) * 4;
    const uint M = 0x0F0F0F0Fu;
    return (uint2)(((w.x >> sh) & M) | q5_spread(hb), ((w.y >> sh) & M) | q5_spread(hb >> 4));
}

inline void mmq8_ld_q5_0(global const uchar *row, int u, int t, uint2 *q, float *dw, float *mw)
{
    global const uchar *b = row + u * 44;
    q[0] = q5_vals(ld8_mid(b + 6 + 8 * (t & 1)), b[2 + t], t);
    q[1] = q5_vals(ld8_al4(b + 28 + 8 * (t & 1)), b[24 + t], t);
    dw[0] = ld_half(b); dw[1] = ld_half(b + 22);
    mw[0] = 16.0f * dw[0]; mw[1] = 16.0f * dw[1];
}

/* q5_k: q4_k's unit (qs bytes 32p + 8t.., sub-blocks 2p low and 2p + 1 high nibbles, p = u % 4)
 * with bits 2p and 2p + 1 of qh bytes 8t.. as the fifth bits */
inline void mmq8_ld_q5_k(global const uchar *row, int u, int t, uint2 *q, float *dw, float *mw)
{
    global const uchar *b = row + (u >> 2) * 176;
    int p = u & 3;
    uint4 h = *(global const uint4 *)b;
    uint2 w = *(global const uint2 *)(b + 48 + 32 * p + 8 * t), qh = *(global const uint2 *)(b + 16 + 8 * t);
    const uint M = 0x0F0F0F0Fu, B = 0x01010101u;
    q[0] = (w & M) | (((qh >> (uint)(2 * p)) & B) << 4);
    q[1] = ((w >> 4) & M) | (((qh >> (uint)(2 * p + 1)) & B) << 4);
    q4k_scale_min(h, 2 * p, &dw[0], &mw[0]);
    q4k_scale_min(h, 2 * p + 1, &dw[1], &mw[1]);
}

/* 8 bytes at 2-byte aligned p from aligned loads within p - 2 .. p + 9; no branch: lanes differ in
 * alignment */
inline uint2 ld8_a2(global const uchar *p)
{
    uint sh = ((uint)(ulong)p & 2) * 8;
    global const uint *a = (global const uint *)((ulong)p & ~(ulong)3);
    ulong w0 = a[0], w1 = a[1], w2 = a[2];
    return (uint2)((uint)(((w1 << 32) | w0) >> sh), (uint)(((w2 << 32) | w1) >> sh));
}

/* q6_k (layout above mvq_ld_q6_k): sub-block 2p + s of super-block u / 4 (p = u % 4) with values
 * made signed (stored plus 32); dw[s] scales its values 0-15, mw[s] 16-31 (mmq8_mac_q6_k). Its
 * loads end by byte 196 of the 210. */
inline void mmq8_ld_q6_k(global const uchar *row, int u, int t, uint2 *q, float *dw, float *mw)
{
    global const uchar *b = row + (u >> 2) * 210;
    int p = u & 3, h = p >> 1, ls = 4 * (p & 1);
    float d = ld_half(b + 208);
    const uint M = 0x0F0F0F0Fu;
    for (int s = 0; s < 2; s++) {
        int c = 2 * (p & 1) + s;
        uint2 l = ld8_a2(b + 64 * h + 32 * s + 8 * t), hb = ld8_a2(b + 128 + 32 * h + 8 * t);
        uint2 v = ((l >> (uint)ls) & M) | (((hb >> (uint)(2 * c)) & 0x03030303u) << 4);
        q[s] = (uint2)(as_uint(as_char4(v.x) - (char4)(32)), as_uint(as_char4(v.y) - (char4)(32)));
        global const char *sc = (global const char *)(b + 192 + 8 * h + 2 * c);
        dw[s] = d * (float)sc[0];
        mw[s] = d * (float)sc[1];
    }
}

#endif /* CLG_NVIDIA */
