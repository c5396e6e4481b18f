/* gemv_q8.cl — decode products (1-4 tokens) on integer dot products, NVIDIA (inline PTX dp4a).
 *
 * The float GEMV (gemv.cl) spends many instructions per weight byte unpacking nibbles into floats,
 * which keeps it far below the memory roofline. Here X is int8 per 32 values (quant_q8.cl); a lane
 * takes a piece of a weight row per step (16 bytes of q4_k, a 34-byte q8_0 block: types_q8.cl) and
 * dots it with X four bytes per dp4a, applying the block scales once per piece.
 *   mvq_T   each work-group quantizes the tokens' X into local memory first;
 *   mvqg_T  X quantized once beforehand (mvq_xq, or left by its producer): the weights stream at once
 *           (mvqg_q4_k2: q4_k a sub-block pair, 32 bytes, a piece);
 *   mvqn_T  mvq_T whose staging runs the RMSNorm chain before it (one launch fewer per chain).
 * Rows: up to three matrices of one type sharing X (Q/K/V, gate/up) numbered across them. A group
 * of 8 warps covers rpg rows, each warp MVQ_R rows per pass with its lanes striding over the
 * pieces, then a shuffle reduction per row and token. */

#ifdef CLG_NVIDIA

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

/* MVQ_R rows per warp pass: mvq_T and mvqn_T take 2, mvqg_T 4. Loading the
 * next piece ahead of the current dot products (and the first pieces before X is quantized) was
 * measured slower. The group's rows [g0, g1) against
 * X quantized in address space AS (SFX: _l local, _g global). */
#define MVQ_ROWS(T, MVQ_R, SFX, NT, PF)                                                           \
    int lid = get_local_id(0), warp = lid / 32, lane = lid % 32;                                  \
    uint nrows = n0 + n1 + n2, g0 = get_group_id(0) * rpg, g1 = min(nrows, g0 + rpg);             \
    int npc = (int)(k / MVQ_VPP_##T);                                                             \
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

/* X staged per group with the norm chain before it (mvqn_T): r = (res + norm(x)·wx)·scale and y =
 * norm(r)·w0 (or y = r with raw) for up to 4 token rows instead of loading y. Every group
 * recomputes the two sums (rows of a few thousand values, from L2); group 0 writes r to res_out,
 * which must not be res (the other groups are still reading it). */
#define DEFINE_MVQN(T)                                                                            \
kernel __attribute__((reqd_work_group_size(256, 1, 1)))                                          \
void mvqn_##T(MVQ_MATS, uint k, uint ntok, uint rpg, global const float *x, global const float *wx,  \
              global const float *res, global float *res_out, float scale, global const float *w0, uint raw, \
              float eps, local uint *xq, local float *xd, local float *xs, local float2 *red)      \
{                                                                                                 \
    mvq_quant_chain(x, wx, res, res_out, scale, w0, raw, eps, ntok, k, xq, xd, xs, red);          \
    MVQ_ROWS(T, 2, _l, 4, 0)                                                                      \
}

/* 4 rows per warp pass in mvqg: measured best against 2 and 8 rows and a one-token build */
#define DEFINE_GEMV_Q8(T, id, MMA) DEFINE_MVQ(T) DEFINE_MVQG(T, 4, 4, mvqg) DEFINE_MVQN(T)
CLG_TYPES_Q8(DEFINE_GEMV_Q8)

/* q4_k's sub-block-pair pieces on global X (mvqg_q4_k2), 4 rows a warp pass too (2 measured 1% slower) */
DEFINE_MVQG(q4_k2, 4, 4, mvqg)

#endif /* CLG_NVIDIA */
