/* 27_mvq.cl — decode products (1-4 tokens) on integer dot products, NVIDIA (inline PTX dp4a).
 *
 * The float GEMV (mv4_T) spends ~20 instructions per weight byte unpacking nibbles into floats,
 * which caps it far below the memory roofline. Here each work-group first quantizes the tokens'
 * X to int8 per 32 values (scale d = max|x| / 127, as llama.cpp's q8_1) into local memory; then
 * a lane takes a 16-byte (q4_k) or 34-byte (q8_0) piece of a weight row per step and dots it
 * with X four bytes per dp4a, applying the block scales once per piece.
 *
 * Piece pc (k / 32 of them per row) of q4_k: qs bytes 16pc'..16pc'+15 of super-block pc / 8
 * (pc' = pc % 8): values 16h..16h+15 (h = pc' & 1) of sub-blocks 2p (low nibbles) and 2p + 1
 * (high nibbles), p = pc' / 2. Of q8_0: block pc.
 *
 * Piece pc of q5_0: block pc. Rows: up to three matrices of one type sharing X (Q/K/V, gate/up) numbered across them. A
 * group of 8 warps covers rpg rows, each warp MVQ_R rows per pass with its lanes striding over
 * the pieces, then a shuffle reduction per row and token. */

#ifdef CLG_NVIDIA


/* sum of 4 unsigned bytes of a times 4 signed bytes of b, plus c */
inline int dp4a_us(uint a, uint b, int c)
{
    int r;
    asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    return r;
}

inline int dp4a_ss(uint a, uint b, int c)
{
    int r;
    asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    return r;
}

/* f16 bits (low half of u) to float */
inline float h2f(uint u)
{
    float r;
    ushort h = (ushort)u;
    asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(h));
    return r;
}

inline int shfl_xor_i(int v, int m) { return as_int(shfl_xor_f(as_float(v), m)); }

/* four values of a 32-value block held by 8 neighbouring lanes (all must call) to int8, packed in
 * a word: the block's scale d = max|x| / 127, and in s the sum of the int8 values of this lane's
 * 16-value half (lanes 0-3 or 4-7 of the 8) */
inline uint q8_quant4(float4 v, float *d, int *s)
{
    float am = fmax(fmax(fabs(v.x), fabs(v.y)), fmax(fabs(v.z), fabs(v.w)));
    am = fmax(am, shfl_xor_f(am, 1));
    am = fmax(am, shfl_xor_f(am, 2));
    am = fmax(am, shfl_xor_f(am, 4));
    float id = am > 0.0f ? 127.0f / am : 0.0f;
    *d = am / 127.0f;
    int4 q = convert_int4_rte(v * id);
    int h = q.x + q.y + q.z + q.w;
    h += shfl_xor_i(h, 1);
    *s = h + shfl_xor_i(h, 2);
    return (uint)(q.x & 255) | ((uint)(q.y & 255) << 8) | ((uint)(q.z & 255) << 16) | ((uint)q.w << 24);
}

/* float4 i4 of row tk of X, or of gelu(X) * U with geglu (rows ldx and ldu apart) */
inline float4 ld_x4(global const float *X, uint ldx, global const float *U, uint ldu, uint geglu, uint tk, uint i4)
{
    float4 v = vload4(0, X + (size_t)tk * ldx + 4 * i4);
    if (!geglu) return v;
    float4 u = vload4(0, U + (size_t)tk * ldu + 4 * i4);
    return (float4)(gelu_tanh(v.x), gelu_tanh(v.y), gelu_tanh(v.z), gelu_tanh(v.w)) * u;
}

/* X (ntok rows, ldx apart) to int8 per 32 values in local memory: xq words [ntok][k/4], scales
 * xd [ntok][k/32], and xs [ntok][k/16] = d * (sum of each 16 quantized values), which the
 * q4_k min and q5_0 offset terms need. 8 lanes per 32-value block, 4 values each. geglu: the
 * product's input is gelu(X) * U (rows ldu apart), so the activation needs no launch of its own. */
inline void mvq_quant_x(global const float *X, uint ldx, global const float *U, uint ldu, uint ntok, uint k,
                        uint geglu, local uint *xq, local float *xd, local float *xs)
{
    int lid = get_local_id(0), warp = lid / 32, lane = lid % 32, sub = lane % 8;
    int nbk = (int)(k / 32), nb = (int)ntok * nbk;
    /* one pass's loads at a time: issuing 8 passes' loads together measured slower (registers) */
    for (int base = warp * 4; base < nb; base += 32) { /* uniform per warp: shuffles below */
        int bi = base + lane / 8, live = bi < nb;
        int tk = live ? bi / nbk : 0, b = live ? bi % nbk : 0;
        float4 v = live ? ld_x4(X, ldx, U, ldu, geglu, tk, 8 * b + sub) : (float4)(0.0f);
        float d;
        int s;
        uint w = q8_quant4(v, &d, &s); /* s: lanes 0-3 and 4-7 of the block, one 16-value half each */
        if (live) {
            xq[bi * 8 + sub] = w;
            if (sub % 4 == 0) xs[bi * 2 + sub / 4] = d * (float)s;
            if (sub == 0) xd[bi] = d;
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
}

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

/* row r of the matrices (numbered across them): its bytes, output and whether it exists */
inline int mvq_row(uint r, global const uchar *W0, uint rb0, uint n0, global float *Y0,
                   global const uchar *W1, uint rb1, uint n1, global float *Y1,
                   global const uchar *W2, uint rb2, uint n2, global float *Y2, uint ld0, uint ld1, uint ld2,
                   global const uchar **p, global float **y, uint *ld)
{
    if (r < n0) { *p = W0 + (size_t)r * rb0; *y = Y0 + r; *ld = ld0; return 1; }
    r -= n0;
    if (r < n1) { *p = W1 + (size_t)r * rb1; *y = Y1 + r; *ld = ld1; return 1; }
    r -= n1;
    if (r < n2) { *p = W2 + (size_t)r * rb2; *y = Y2 + r; *ld = ld2; return 1; }
    *p = W0; *y = Y0; *ld = ld0;
    return 0;
}

/* the passes ahead whose pieces each mvqg lane prefetches into L2, per type: one pays on q4_k, q8_0
 * lost, and mvq (X staged) has no long weight stream */
#define MVQG_PF_q4_k 1
#define MVQG_PF_q8_0 0
#define MVQG_PF_q5_0 0
/* the bytes of piece pc of a row (for the L2 prefetch): its nibbles or values */
inline global const uchar *mvq_at_q4_k(global const uchar *row, int pc) { return row + (pc >> 3) * 144 + 16 + 16 * (pc & 7); }
inline global const uchar *mvq_at_q8_0(global const uchar *row, int pc) { return row + pc * 34; }
inline global const uchar *mvq_at_q5_0(global const uchar *row, int pc) { return row + pc * 22; }

/* MVQ_R rows per warp pass: mvq_T and mvqn_T take 2, mvqg_T 4. Loading the
 * next piece ahead of the current dot products (and the first pieces before X is quantized) was
 * measured slower. The group's rows [g0, g1) against
 * X quantized in address space AS (SFX: _l local, _g global). */
#define MVQ_ROWS(T, MVQ_R, SFX, NT, PF)                                                           \
    int lid = get_local_id(0), warp = lid / 32, lane = lid % 32;                                  \
    uint nrows = n0 + n1 + n2, g0 = get_group_id(0) * rpg, g1 = min(nrows, g0 + rpg);             \
    int npc = (int)(k / 32);                                                                      \
    for (uint rb = g0 + warp * MVQ_R; rb < g1; rb += (get_local_size(0) / 32) * MVQ_R) {         \
        global const uchar *p[MVQ_R];                                                             \
        global float *y[MVQ_R];                                                                   \
        uint ld[MVQ_R];                                                                           \
        int live[MVQ_R];                                                                          \
        float acc[MVQ_R][NT];                                                                     \
        for (int i = 0; i < MVQ_R; i++) {                                                         \
            live[i] = mvq_row(rb + i, W0, rb0, n0, Y0, W1, rb1, n1, Y1, W2, rb2, n2, Y2, ld0, ld1, ld2, \
                              &p[i], &y[i], &ld[i]) && rb + i < g1;                               \
            for (int t = 0; t < NT; t++) acc[i][t] = 0.0f;                                        \
        }                                                                                         \
        for (int pc = lane; pc < npc; pc += 32) {                                                 \
            mvqp_##T w[MVQ_R];                                                                    \
            if (PF && pc + 32 * PF < npc) /* later passes' pieces into L2 meanwhile */             \
                for (int i = 0; i < MVQ_R; i++) prefetch_l2(mvq_at_##T(p[i], pc + 32 * PF));       \
            for (int i = 0; i < MVQ_R; i++) w[i] = mvq_ld_##T(p[i], pc);                          \
            for (int t = 0; t < NT; t++) {                                                        \
                if (t > 0 && t >= (int)ntok) break;                                               \
                for (int i = 0; i < MVQ_R; i++)                                                   \
                    acc[i][t] += mvq_dot_##T##SFX(&w[i], pc, xq + t * (k / 4), xd + t * (k / 32), \
                                                  xs + t * (k / 16));                             \
            }                                                                                     \
        }                                                                                         \
        for (int t = 0; t < NT; t++) {                                                            \
            if (t >= (int)ntok) break;                                                            \
            for (int i = 0; i < MVQ_R; i++) {                                                     \
                float v = acc[i][t];                                                              \
                for (int m = 16; m > 0; m >>= 1) v += shfl_xor_f(v, m);                           \
                if (lane == 0 && live[i]) y[i][(size_t)t * ld[i]] = v;                            \
            }                                                                                     \
        }                                                                                         \
    }

#define MVQ_MATS                                                                                  \
    global const uchar *W0, uint rb0, uint n0, global float *Y0, uint ld0,                         \
    global const uchar *W1, uint rb1, uint n1, global float *Y1, uint ld1,                         \
    global const uchar *W2, uint rb2, uint n2, global float *Y2, uint ld2

/* X staged per group (mvq_T) */
#define DEFINE_MVQ(T)                                                                             \
kernel __attribute__((reqd_work_group_size(256, 1, 1)))                                          \
void mvq_##T(MVQ_MATS, uint k, global const float *X, uint ldx, uint ntok, uint rpg,           \
                global const float *U, uint u_off, uint ldu, uint geglu,                          \
                local uint *xq, local float *xd, local float *xs)                                 \
{                                                                                                 \
    mvq_quant_x(X, ldx, U + u_off, ldu, ntok, k, geglu, xq, xd, xs);                              \
    MVQ_ROWS(T, 2, _l, 4, 0)                                                                      \
}

/* X quantized once beforehand by mvq_xq (mvqg_T): no staging, the weights stream at once */
#define DEFINE_MVQG(T, R, NT, NAME)                                                               \
kernel void NAME##_##T(MVQ_MATS, uint k, uint ntok, uint rpg, global const uint *xq, global const float *xds) \
{                                                                                                 \
    global const float *xd = xds, *xs = xds + (size_t)ntok * (k / 32);                            \
    MVQ_ROWS(T, R, _g, NT, MVQG_PF_##T)                                                           \
}

/* X (ntok rows, ldx apart; geglu: gelu(X) * U) to mvqg's int8 layout, that of mvq_quant_x: xq
 * words [ntok][k/4], then in xds the scales [ntok][k/32] and the scaled half sums [ntok][k/16]. 8
 * items per 32-value block; every item runs the shuffles. */
kernel void mvq_xq(global const float *X, uint ldx, global const float *U, uint u_off, uint ldu, uint geglu,
                   uint ntok, uint k, global uint *xq, global float *xds)
{
    size_t gid = get_global_id(0), nq = k / 4;
    int live = gid < ntok * nq, sub = (int)(gid % 8);
    uint tk = live ? (uint)(gid / nq) : 0, i4 = live ? (uint)(gid % nq) : 0;
    float4 v = live ? ld_x4(X, ldx, U + u_off, ldu, geglu, tk, i4) : (float4)(0.0f);
    float d;
    int s;
    uint w = q8_quant4(v, &d, &s);
    if (!live) return;
    size_t bi = gid / 8; /* = tk * (k / 32) + i4 / 8 */
    xq[gid] = w;
    if (sub % 4 == 0) xds[(size_t)ntok * (k / 32) + bi * 2 + sub / 4] = d * (float)s;
    if (sub == 0) xds[bi] = d;
}

DEFINE_MVQ(q4_k)
DEFINE_MVQ(q8_0)
DEFINE_MVQ(q5_0)
/* 4 rows per warp pass: measured best against 2 and 8 rows and a one-token build (docs/PERF.md) */
DEFINE_MVQG(q4_k, 4, 4, mvqg)
DEFINE_MVQG(q8_0, 4, 4, mvqg)
DEFINE_MVQG(q5_0, 4, 4, mvqg)

/* Expert products for decode (MoE), same pieces and quantized X. Virtual rows v = slot group *
 * rows_e + r; the slots of group gg are gg * nj .. gg * nj + nj - 1, slot s's weights are expert
 * sel[s]'s rows and its X row is (s / xdiv) of X (ldx apart), and
 *   Y[v] = sum over those slots of (wsel ? wsel[s] : 1) * W_sel[s][r] . X_s.
 * Up/gate: nj = 1, xdiv = n_used (one token's X for each of its experts). Down: nj = n_used,
 * xdiv = 1, X = the gate|up rows with geglu on, weights wsel: the weighted sum over the token's
 * experts without a combine pass (gate and up: k values each per row). A group's rpg rows lie in one slot group (rpg divides rows_e),
 * so it quantizes only that group's nj X rows; lanes stride over (slot, piece) pairs. */
#define DEFINE_MVQE(T)                                                                            \
kernel __attribute__((reqd_work_group_size(256, 1, 1)))                                          \
void mvqe_##T(global const uchar *W, uint rbytes, uint rows_e, uint k, global const float *X,       \
              uint ldx, uint xdiv, uint geglu, global const int *sel, global const float *wsel,   \
              uint use_w, uint nj, global float *Y, uint rpg,                                     \
              local uint *xq, local float *xd, local float *xs)                                   \
{                                                                                                 \
    int lid = get_local_id(0), warp = lid / 32, lane = lid % 32;                                  \
    uint g0 = get_group_id(0) * rpg, gg = g0 / rows_e, s0 = gg * nj;                              \
    global const float *xr = X + (size_t)(s0 / xdiv) * ldx;                                       \
    mvq_quant_x(xr, ldx, xr + k, ldx, nj, k, geglu, xq, xd, xs);                                  \
    int npc = (int)(k / 32), tot = (int)nj * npc;                                                 \
    for (uint v = g0 + warp * 2; v < g0 + rpg; v += 16) {                                         \
        uint r = v - gg * rows_e;                                                                 \
        float acc0 = 0.0f, acc1 = 0.0f;                                                           \
        for (int q = lane; q < tot; q += 32) {                                                    \
            int j = q / npc, pc = q - j * npc;                                                    \
            uint s = s0 + (uint)j;                                                                \
            global const uchar *p = W + ((size_t)sel[s] * rows_e + r) * rbytes;                   \
            mvqp_##T w0 = mvq_ld_##T(p, pc), w1 = mvq_ld_##T(p + rbytes, pc);                     \
            float ws = use_w ? wsel[s] : 1.0f;                                                    \
            local const uint *xqj = xq + j * (k / 4);                                             \
            local const float *xdj = xd + j * (k / 32), *xsj = xs + j * (k / 16);                 \
            acc0 += ws * mvq_dot_##T##_l(&w0, pc, xqj, xdj, xsj);                                     \
            acc1 += ws * mvq_dot_##T##_l(&w1, pc, xqj, xdj, xsj);                                     \
        }                                                                                         \
        for (int m = 16; m > 0; m >>= 1) {                                                        \
            acc0 += shfl_xor_f(acc0, m);                                                          \
            acc1 += shfl_xor_f(acc1, m);                                                          \
        }                                                                                         \
        if (lane == 0) {                                                                          \
            Y[v] = acc0;                                                                          \
            Y[v + 1] = acc1;                                                                      \
        }                                                                                         \
    }                                                                                             \
}

DEFINE_MVQE(q4_k)
DEFINE_MVQE(q8_0)
DEFINE_MVQE(q5_0)

#endif
