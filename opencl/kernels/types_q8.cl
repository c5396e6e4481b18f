/* types_q8.cl — the int8 forms of the types the int8 paths take (CLG_TYPES_Q8; NVIDIA): per type,
 *   mvqp_T, mvq_ld_T    the piece of a row a gemv_q8 lane loads: piece pc (k / 32 of them per row) of
 *                       q4_k is qs bytes 16pc'..16pc'+15 of super-block pc / 8 (pc' = pc % 8), values
 *                       16h..16h+15 (h = pc' & 1) of sub-blocks 2p (low nibbles) and 2p + 1 (high
 *                       nibbles), p = pc' / 2; of q8_0 and q5_0 block pc;
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

/* the piece against one token's quantized X (in local memory: _l, or global: _g) */
#define DEFINE_DOT_Q4_K(AS, SFX)                                                                  \
inline float mvq_dot_q4_k##SFX(const mvqp_q4_k *p, int pc, AS const uint *xq, AS const float *xd,  \
                               AS const float *xs)                                                \
{                                                                                                 \
    int sa = (pc >> 3) * 8 + (pc & 6), h = pc & 1; /* global sub-block index of the low nibbles */ \
    AS const uint *xa = xq + sa * 8 + h * 4, *xb = xa + 8;                                        \
    const uint M = 0x0F0F0F0Fu;                                                                   \
    int ia = dp4a_us(p->q.x & M, xa[0], 0), ib = dp4a_us((p->q.x >> 4) & M, xb[0], 0);            \
    ia = dp4a_us(p->q.y & M, xa[1], ia); ib = dp4a_us((p->q.y >> 4) & M, xb[1], ib);              \
    ia = dp4a_us(p->q.z & M, xa[2], ia); ib = dp4a_us((p->q.z >> 4) & M, xb[2], ib);              \
    ia = dp4a_us(p->q.w & M, xa[3], ia); ib = dp4a_us((p->q.w >> 4) & M, xb[3], ib);              \
    return p->da * xd[sa] * (float)ia + p->db * xd[sa + 1] * (float)ib - p->ma * xs[2 * sa + h] -  \
           p->mb * xs[2 * sa + 2 + h];                                                            \
}
DEFINE_DOT_Q4_K(local, _l)

/* from global memory: each half-piece of X is one 16-byte load (its word offset is a multiple of 4;
 * faster than single words) */
inline float mvq_dot_q4_k_g(const mvqp_q4_k *p, int pc, global const uint *xq, global const float *xd,
                            global const float *xs)
{
    int sa = (pc >> 3) * 8 + (pc & 6), h = pc & 1;
    uint4 xa = *(global const uint4 *)(xq + sa * 8 + h * 4), xb = *(global const uint4 *)(xq + sa * 8 + 8 + h * 4);
    const uint M = 0x0F0F0F0Fu;
    int ia = dp4a_us(p->q.x & M, xa.x, 0), ib = dp4a_us((p->q.x >> 4) & M, xb.x, 0);
    ia = dp4a_us(p->q.y & M, xa.y, ia); ib = dp4a_us((p->q.y >> 4) & M, xb.y, ib);
    ia = dp4a_us(p->q.z & M, xa.z, ia); ib = dp4a_us((p->q.z >> 4) & M, xb.z, ib);
    ia = dp4a_us(p->q.w & M, xa.w, ia); ib = dp4a_us((p->q.w >> 4) & M, xb.w, ib);
    return p->da * xd[sa] * (float)ia + p->db * xd[sa + 1] * (float)ib - p->ma * xs[2 * sa + h] -
           p->mb * xs[2 * sa + 2 + h];
}


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

/* the passes ahead whose pieces each mvqg lane prefetches into L2, per type: one pays on q4_k, q8_0
 * lost, and mvq (X staged) has no long weight stream */
#define MVQG_PF_q4_k 1
#define MVQG_PF_q8_0 0
#define MVQG_PF_q5_0 0
/* the bytes of piece pc of a row (for the L2 prefetch): its nibbles or values */
inline global const uchar *mvq_at_q4_k(global const uchar *row, int pc) { return row + (pc >> 3) * 144 + 16 + 16 * (pc & 7); }
inline global const uchar *mvq_at_q8_0(global const uchar *row, int pc) { return row + pc * 34; }
inline global const uchar *mvq_at_q5_0(global const uchar *row, int pc) { return row + pc * 22; }

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

#endif /* CLG_NVIDIA */
