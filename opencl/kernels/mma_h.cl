/* mma_h.cl — batched decode products (17-256 tokens) on f16 tensor cores, NVIDIA (inline PTX
 * mma.sync m16n8k16, f32 accumulate): Y[t][r] = sum_k W[r][k] X[t][k].
 *
 * The int8 products (mma_q8.cl) spend ~14 issue slots of scale arithmetic on every int8 mma's
 * result (a scale per 32 values of each weight row and token), so from ~32 tokens the issue rate
 * bounds them (~100 TFLOP/s). Here each weight is dequantized once per group into f16 A fragments
 * (rows are the mma's M), its scales spent there once rather than once per token tile, and X, made
 * f16 once per product (mmh_x), goes to local memory by cp.async and serves the group's MMH_WARPS
 * warps.
 *
 * Warp w of a group takes rows 32 w .. 32 w + 31 of the group's (two 16-row tiles) and all of its
 * 8 * NT tokens; the warps walk k together, one 64-value unit (two sub-blocks) a pass, X's units in
 * a ring of MMH_STAGES. The k order inside a 16-step is free as long as A and B agree: lane (g, t)
 * takes values 4t..4t+3 of a sub-block for step 0 and 16+4t..16+4t+3 for step 1 (deq8_T's lo and
 * hi), and mmh_x stores each sub-block of X permuted so that its 16-byte chunk t holds those eight
 * values. Groups, token blocks of 64 and k slices across groups as mmq8's (mma_q8.cl). q4_k's,
 * q8_0's and q6_k's kernels (below) copy the weights into the ring with X; the other types' read
 * them into registers.
 * At 16 tokens the int8 products stay faster (the dequantization's issue slots are not shared by
 * enough token tiles), so the host takes mmh from 17. */

#ifdef CLG_NVIDIA

#define MMH_WARPS 4  /* warps a group: 128 weight rows */
#define MMH_STAGES 3 /* X units in the ring */

/* X (ntok rows, ldx apart; act: act(X) * U as ld_x4) to f16 rows of k values for mmh, each
 * 32-value sub-block permuted: chunk t (8 values) = values 4t..4t+3, 16+4t..16+4t+3. Rows from
 * ntok to tp are zeros. Item (c, tk): chunk c of row tk. */
kernel void mmh_x(global const float *X, uint ldx, global const float *U, uint u_off, uint ldu, uint act, uint ntok,
                  uint tp, uint k, global uint4 *Xh)
{
    uint c = get_global_id(0), tk = get_global_id(1);
    if (c >= k / 8 || tk >= tp) return;
    uint i4 = (c / 4) * 8 + c % 4; /* float4 index of values 4t.. of sub-block c / 4 */
    float4 lo = (float4)(0.0f), hi = (float4)(0.0f);
    if (tk < ntok) {
        lo = ld_x4(X, ldx, U + u_off, ldu, act, tk, i4);
        hi = ld_x4(X, ldx, U + u_off, ldu, act, tk, i4 + 4);
    }
    Xh[(size_t)tk * (k / 8) + c] = (uint4)(pack_h2(lo.x, lo.y), pack_h2(lo.z, lo.w), pack_h2(hi.x, hi.y),
                                           pack_h2(hi.z, hi.w));
}

/* A fragments a[s][step][4] of rows p (g) and q (g + 8) for sub-blocks 2u + s: step 0 from values
 * 4t..4t+3, step 1 from 16+4t..16+4t+3 (registers a0..a3 of mma_16816: row g's first pair, row g +
 * 8's, row g's second, row g + 8's). Any type, through deq8_T. */
#define DEFINE_MMH_A(T)                                                                           \
inline void mmh_a_##T(global const uchar *p, global const uchar *q, int u, int t, uint a[2][2][4])\
{                                                                                                 \
    UNROLL for (int s = 0; s < 2; s++) {                                                          \
        float4 l0, h0, l1, h1;                                                                    \
        deq8_##T(p, 2 * u + s, t, &l0, &h0);                                                      \
        deq8_##T(q, 2 * u + s, t, &l1, &h1);                                                      \
        a[s][0][0] = pack_h2(l0.x, l0.y); a[s][0][1] = pack_h2(l1.x, l1.y);                       \
        a[s][0][2] = pack_h2(l0.z, l0.w); a[s][0][3] = pack_h2(l1.z, l1.w);                       \
        a[s][1][0] = pack_h2(h0.x, h0.y); a[s][1][1] = pack_h2(h1.x, h1.y);                       \
        a[s][1][2] = pack_h2(h0.z, h0.w); a[s][1][3] = pack_h2(h1.z, h1.w);                       \
    }                                                                                             \
}

/* unit u's X (tpb tokens x 8 chunks of 16 bytes) into stage st, chunk ch of token tok at tok * 8 +
 * (ch ^ 4 for odd tokens): the 8 lanes of a quarter-warp read chunk t of two tokens, whose
 * sub-blocks then lie in different halves of the banks */
inline void mmh_issue(local uint4 *st, global const uint4 *Xh, uint k8, int u, uint tpb, int lid)
{
    for (uint c = lid; c < 8 * tpb; c += 32 * MMH_WARPS) {
        uint tok = c >> 3, ch = c & 7;
        cp_async16(st + tok * 8 + (ch ^ ((tok & 1) << 2)), Xh + (size_t)tok * k8 + 8 * u + ch);
    }
}

/* the group's prologue: warp w's matrix among up to three of X (rows 32 w .. of the group's 128,
 * counted across them; idle past the last row), its Y at this k slice and token block of tpb, Xh
 * at the block's first token, the slice's units u0 .. u0 + n - 1 */
#define MMH_PICK                                                                                  \
    int lid = get_local_id(0), lane = lid & 31, warp = lid >> 5, g = lane >> 2, t = lane & 3;     \
    const uint k8 = k / 8;                                                                        \
    uint r0 = (get_group_id(0) * MMH_WARPS + warp) * 32, kk = get_group_id(1) % kg;               \
    uint tb = tpb * (get_group_id(1) / kg);                                                       \
    MMQ8_PICK                                                                                     \
    Xh += (size_t)tb * k8;                                                                        \
    int nu = (int)(k / 64), u0 = (int)(kk * nu / kg), n = (int)((kk + 1) * nu / kg) - u0;

#define MMH_ARGS                                                                                  \
    global const uchar *W0, uint rb0, uint n0, global float *Y0, uint ld0, global const uchar *W1, uint rb1, \
    uint n1, global float *Y1, uint ld1, global const uchar *W2, uint rb2, uint n2, global float *Y2, uint ld2, \
    uint k, global const uint4 *Xh, uint ntok, uint kg, uint pd

/* one unit's products: A fragments a[row tile][sub-block][step][4] against the X stage xb */
#define MMH_PRODUCTS(NT, xb)                                                                      \
    UNROLL for (int s = 0; s < 2; s++)                                                            \
        UNROLL for (int j = 0; j < (NT); j++) {                                                   \
            int tok = 8 * j + g;                                                                  \
            uint4 x = (xb)[tok * 8 + ((4 * s + t) ^ ((tok & 1) << 2))];                           \
            UNROLL for (int m = 0; m < 2; m++) {                                                  \
                acc[m][j] = mma_16816(acc[m][j], a[m][s][0][0], a[m][s][0][1], a[m][s][0][2],      \
                                      a[m][s][0][3], x.x, x.y);                                   \
                acc[m][j] = mma_16816(acc[m][j], a[m][s][1][0], a[m][s][1][1], a[m][s][1][2],      \
                                      a[m][s][1][3], x.z, x.w);                                   \
            }                                                                                     \
        }

/* the lane's rows 16 m + 8 h + g of the warp's 32 (wr[m][h], the last row past the matrix's end) */
#define MMH_LANE_ROWS                                                                             \
    global const uchar *wr[2][2];                                                                 \
    UNROLL for (int i = 0; i < 2; i++)                                                            \
        UNROLL for (int h = 0; h < 2; h++) {                                                      \
            uint r = r0 + 16 * i + 8 * h + g;                                                     \
            wr[i][h] = W + (size_t)(r < n_rows ? r : n_rows - 1) * row_bytes;                     \
        }

/* the accumulators of the warp's 2 row tiles x NT token tiles */
#define MMH_ACC(NT)                                                                               \
    float4 acc[2][NT];                                                                            \
    UNROLL for (int i = 0; i < 2; i++)                                                            \
        UNROLL for (int j = 0; j < (NT); j++) acc[i][j] = (float4)(0.0f);

/* unit i + pd's part of the lane's rows asked of L2 (pd > 0) */
#define MMH_PREFETCH_ROWS                                                                         \
        if (pd && i + (int)pd < n) {                                                              \
            size_t off = min((size_t)(u0 + i + pd) * row_bytes / nu + 32 * t, (size_t)row_bytes - 1); \
            UNROLL for (int m = 0; m < 2; m++)                                                    \
                UNROLL for (int h = 0; h < 2; h++) prefetch_l2(wr[m][h] + off);                   \
        }

/* NT token tiles of 8 (2, 4, 8); group (r, kg * b + kk) takes rows 128 r .. (its warps' 32 each,
 * across up to three matrices of X whose rows are whole warps'), tokens 8 NT b .. and slice kk of
 * k's kg (kg > 1: partial Ys for mmq8_sum). Xh: mmh_x's rows, at least 8 NT (b + 1) of them.
 * Weights are read straight into registers; pd > 0 has each lane ask L2 for the part of its rows'
 * bytes that unit pd passes ahead holds. (pd 0 and 2 measured the same, but the build without this
 * code ran 10-14% slower: the driver's compiler then batches fewer of a unit's loads; PERF.md.) */
#define DEFINE_MMH(T, NT)                                                                         \
kernel __attribute__((reqd_work_group_size(32 * MMH_WARPS, 1, 1))) void mmh_##T##_##NT(MMH_ARGS)  \
{                                                                                                 \
    local uint4 xs[MMH_STAGES * 8 * 8 * (NT)];                                                    \
    const uint tpb = 8 * (NT);                                                                    \
    MMH_PICK                                                                                      \
    MMH_LANE_ROWS                                                                                 \
    MMH_ACC(NT)                                                                                   \
    for (int s = 0; s < MMH_STAGES - 1; s++) {                                                    \
        if (s < n) mmh_issue(xs + s * 8 * tpb, Xh, k8, u0 + s, tpb, lid);                         \
        cp_async_commit();                                                                        \
    }                                                                                             \
    for (int i = 0; i < n; i++) {                                                                 \
        MMH_PREFETCH_ROWS                                                                         \
        /* this unit's weights first: their loads overlap the wait for X */                      \
        uint a[2][2][2][4];                                                                       \
        UNROLL for (int m = 0; m < 2; m++) mmh_a_##T(wr[m][0], wr[m][1], u0 + i, t, a[m]);        \
        cp_async_wait1(); /* unit i's X landed (MMH_STAGES 3: one younger group in flight) */     \
        barrier(CLK_LOCAL_MEM_FENCE); /* ... for every item, and unit i - 1's stage read by all */ \
        if (i + MMH_STAGES - 1 < n)                                                               \
            mmh_issue(xs + ((i + MMH_STAGES - 1) % MMH_STAGES) * 8 * tpb, Xh, k8, u0 + i + MMH_STAGES - 1, tpb, lid); \
        cp_async_commit();                                                                        \
        local const uint4 *xb = xs + (i % MMH_STAGES) * 8 * tpb;                                  \
        MMH_PRODUCTS(NT, xb)                                                                      \
    }                                                                                             \
    cp_async_wait0();                                                                             \
    if (idle) return;                                                                             \
    MMQ8_STORE(2, NT)                                                                             \
}

/* --- q4_k with its weights in the ring (mmh_q4_k) --------------------------------------------
 * Read straight into registers, a unit's weights are waited on at every pass (the group's warps
 * meet at its barrier, so one group's loads overlap only other groups' work). q4_k's blocks are
 * 16-byte pieces, so a stage holds the unit's weights too: each row's 16-byte header and its 32
 * bytes of nibbles, copied by the row's own lane, MMHR_NS - 1 units ahead. The values are made
 * in f16x2 arithmetic: a byte pair's nibbles placed in the low bits of two f16 whose exponent
 * makes them 1024 + q, less 1024 (exact), times d1 less m1 in one fma (one rounding, as deq8's
 * float path's final one; d1 and m1 are rounded to f16 first). Sub-blocks 2p and 2p + 1 of a
 * super-block are the low and high nibbles of the same 32 bytes. */

#define MMHR_STAGE(tpb) (3 * 32 * MMH_WARPS + 8 * (tpb)) /* uint4 a stage: headers, nibbles, X */
/* stages: at 16 tokens a unit's products are few, so more units in flight hide the loads (five:
 * 40 KB, under the 48 KB a group may have) */
#define MMHR_NS(NT) ((NT) == 2 ? 5 : MMH_STAGES)

/* unit u of the group into stage st: item lid copies its row's header and nibbles (wrow), then X */
inline void mmhr_issue(local uint4 *st, global const uchar *wrow, global const uint4 *Xh, uint k8, int u, uint tpb,
                       int lid)
{
    global const uchar *b = wrow + (u >> 2) * 144;
    cp_async16(st + lid, (global const uint4 *)b);
    global const uint4 *q = (global const uint4 *)(b + 16 + 32 * (u & 3));
    cp_async16(st + 32 * MMH_WARPS + 2 * lid, q);
    cp_async16(st + 32 * MMH_WARPS + 2 * lid + 1, q + 1);
    mmh_issue(st + 96 * MMH_WARPS, Xh, k8, u, tpb, lid);
}

/* one row's values for this lane (header hh, nibble words w[0] = bytes 4t.., w[1] = 16 + 4t..) of
 * sub-blocks 2p + s: v[s][step][pair], pair 0 = values (4t, 4t + 1) of the step's four, 1 = the next */
inline void mmh_q4k_v(uint4 hh, const uint w[2], int p, uint v[2][2][2])
{
    float d0, m0, d1, m1;
    q4k_scale_min(hh, 2 * p, &d0, &m0);
    q4k_scale_min(hh, 2 * p + 1, &d1, &m1);
    uint D[2] = { pack_h2(d0, d0), pack_h2(d1, d1) }, M[2] = { pack_h2(-m0, -m0), pack_h2(-m1, -m1) };
    const uint E = 0x64006400u; /* 1024.0 in both halves */
    UNROLL for (int st = 0; st < 2; st++) {
        /* bytes 0, 1 and 2, 3 of the word as the low bytes of two 16-bit halves */
        uint x[2] = { (w[st] & 0xFFu) | ((w[st] & 0xFF00u) << 8), ((w[st] >> 16) & 0xFFu) | ((w[st] >> 8) & 0xFF0000u) };
        UNROLL for (int q = 0; q < 2; q++) {
            v[0][st][q] = hfma2(hsub2((x[q] & 0x000F000Fu) | E, E), D[0], M[0]);
            v[1][st][q] = hfma2(hsub2(((x[q] >> 4) & 0x000F000Fu) | E, E), D[1], M[1]);
        }
    }
}

#define DEFINE_MMHR(NT)                                                                           \
kernel __attribute__((reqd_work_group_size(32 * MMH_WARPS, 1, 1))) void mmh_q4_k_##NT(MMH_ARGS)   \
{                                                                                                 \
    local uint4 ring[MMHR_NS(NT) * MMHR_STAGE(8 * (NT))];                                         \
    const uint tpb = 8 * (NT), SB = MMHR_STAGE(8 * (NT));                                         \
    const int NS = MMHR_NS(NT);                                                                   \
    MMH_PICK                                                                                      \
    global const uchar *wrow = W + (size_t)min(r0 + lane, n_rows - 1) * row_bytes; /* lane's row */ \
    MMH_ACC(NT)                                                                                   \
    for (int s = 0; s < NS - 1; s++) {                                                            \
        if (s < n) mmhr_issue(ring + s * SB, wrow, Xh, k8, u0 + s, tpb, lid);                     \
        cp_async_commit();                                                                        \
    }                                                                                             \
    for (int i = 0; i < n; i++) {                                                                 \
        if (pd && i + (int)pd < n) /* the nibbles pd units ahead into L2 */                       \
            prefetch_l2(wrow + ((u0 + i + pd) >> 2) * 144 + 16 + 32 * ((u0 + i + pd) & 3));       \
        cp_async_wait_n(NS - 2); /* unit i landed: NS - 2 younger groups may be in flight */      \
        barrier(CLK_LOCAL_MEM_FENCE); /* ... for every item, and unit i - 1's stage read by all */ \
        if (i + NS - 1 < n)                                                                       \
            mmhr_issue(ring + ((i + NS - 1) % NS) * SB, wrow, Xh, k8, u0 + i + NS - 1, tpb, lid); \
        cp_async_commit();                                                                        \
        local const uint4 *st = ring + (i % NS) * SB;                                             \
        local const uint *nw = (local const uint *)(st + 32 * MMH_WARPS);                         \
        int p = (u0 + i) & 3;                                                                     \
        uint a[2][2][2][4];                                                                       \
        UNROLL for (int m = 0; m < 2; m++)                                                        \
            UNROLL for (int h = 0; h < 2; h++) {                                                  \
                int row = 32 * warp + 16 * m + 8 * h + g;                                         \
                uint w[2] = { nw[row * 8 + t], nw[row * 8 + 4 + t] }, v[2][2][2];                 \
                mmh_q4k_v(st[row], w, p, v);                                                      \
                UNROLL for (int s = 0; s < 2; s++)                                                \
                    UNROLL for (int e = 0; e < 2; e++) {                                          \
                        a[m][s][e][h] = v[s][e][0];                                               \
                        a[m][s][e][2 + h] = v[s][e][1];                                           \
                    }                                                                             \
            }                                                                                     \
        local const uint4 *xb = st + 96 * MMH_WARPS;                                              \
        MMH_PRODUCTS(NT, xb)                                                                      \
    }                                                                                             \
    cp_async_wait0();                                                                             \
    if (idle) return;                                                                             \
    MMQ8_STORE(2, NT)                                                                             \
}

/* --- q8_0 and q6_k with their weights in the ring (mmhw) -------------------------------------
 * Their blocks are 34 and 210 bytes, so a unit's bytes of a row are 4-byte (q8_0: 68 bytes) or
 * only 2-byte aligned (q6_k: the half-block's 64 bytes of ql and 32 of qh, 4 scales and d). They
 * come by 4-byte cp.async, the four lanes of a row's quad taking its words in turn: each warp
 * copies its own 32 rows, and the lanes that copy a row are those that read it. q6_k copies the
 * aligned words around its bytes (29 a row) and picks them out by prmt with the block's offset
 * (0 or 2); d's word reads 2 bytes only where it would run past the block (and the buffer). A
 * row's words lie MMHW_RS_T words apart in a stage: q8_0's 20 keep a quad's reads of 8 rows on
 * distinct banks; q6_k's 29 leave 2-way conflicts but fit two stages at 64 tokens in the 48 KB a
 * group may have. The values are made in f16x2 arithmetic as q4_k's: a byte under an f16 exponent
 * (1024 + q, exact), less the offset (exact), times the block's scale in one rounding (q6_k's d *
 * sc rounded to f16 first). */

#define MMHW_RS_q8_0 20
#define MMHW_RS_q6_k 29
#define MMHW_NS_q8_0(NT) ((NT) == 8 ? 2 : 3) /* stages: three do not fit at 64 tokens */
#define MMHW_NS_q6_k(NT) 2
#define MMHW_STAGE(T, NT) (8 * MMH_WARPS * MMHW_RS_##T + 8 * 8 * (NT)) /* uint4 a stage: weights, X */

/* bytes b0 b1 b2 b3 as f16 halves 1024 + b0, 1024 + b1 (sel 0x4140) or b2, b3 (0x4342) */
#define MMHW_H2(x, sel) prmt((x), 0x64646464u, (sel))

/* unit u of this lane's rows (wr[m][h]: rows 16 m + 8 h + g of the warp's) into ws, the stage at
 * the lane's first row: word i of a row by lane i % 4 of its quad */
inline void mmhw_copy_q8_0(local uint *ws, global const uchar *wr[2][2], int u, int t)
{
    UNROLL for (int m = 0; m < 2; m++)
        UNROLL for (int h = 0; h < 2; h++) {
            local uint *d = ws + (16 * m + 8 * h) * MMHW_RS_q8_0 + t;
            global const uint *s = (global const uint *)(wr[m][h] + u * 68) + t;
            UNROLL for (int i = 0; i < 4; i++) cp_async4(d + 4 * i, s + 4 * i, 4);
            if (t == 0) cp_async4(d + 16, s + 16, 4);
        }
}

/* a row's unit: words 0-16 ql's half-block, 17-25 qh's, 26-27 the unit's 4 scales, 28 d, each run
 * from the aligned word at or before its first byte */
inline void mmhw_copy_q6_k(local uint *ws, global const uchar *wr[2][2], int u, int t)
{
    int hb = (u >> 1) & 1, jj = u & 1;
    UNROLL for (int m = 0; m < 2; m++)
        UNROLL for (int h = 0; h < 2; h++) {
            local uint *d = ws + (16 * m + 8 * h) * MMHW_RS_q6_k;
            global const uchar *b = wr[m][h] + (u >> 2) * 210;
            uint sh = (uint)(size_t)b & 2;
            global const uint *a = (global const uint *)(b - sh), *ql = a + 16 * hb, *qh = a + 32 + 8 * hb;
            UNROLL for (int i = 0; i < 4; i++) cp_async4(d + t + 4 * i, ql + t + 4 * i, 4);
            if (t == 0) cp_async4(d + 16, ql + 16, 4);
            UNROLL for (int i = 0; i < 2; i++) cp_async4(d + 17 + t + 4 * i, qh + t + 4 * i, 4);
            if (t == 0) cp_async4(d + 25, qh + 8, 4);
            /* lane 0 the scales' first word, 1 their second (none at offset 0), 2 d's */
            if (t < 3)
                cp_async4(d + 26 + t, a + (t < 2 ? 48 + 2 * hb + jj + t : 52), t == 0 ? 4 : sh ? 4 : t == 1 ? 0 : 2);
        }
}

/* A fragments of this lane's rows for the stage's unit u (as mmh_a_T's) */
inline void mmhw_a_q8_0(local const uint *ws, global const uchar *wr[2][2], int u, int t, uint a[2][2][2][4])
{
    UNROLL for (int m = 0; m < 2; m++)
        UNROLL for (int h = 0; h < 2; h++) {
            local const uint *w = ws + (16 * m + 8 * h) * MMHW_RS_q8_0;
            uint w0 = w[0], w8 = w[8];
            /* block 0 at byte 0 (d, then values from byte 2), block 1 at byte 34 */
            uint D[2] = { prmt(w0, w0, 0x1010), prmt(w8, w8, 0x3232) };
            uint q[2][2] = { { prmt(w[t], w[t + 1], 0x5432), prmt(w[4 + t], w[5 + t], 0x5432) },
                             { w[9 + t], w[13 + t] } };
            UNROLL for (int s = 0; s < 2; s++)
                UNROLL for (int e = 0; e < 2; e++) {
                    uint x = q[s][e] ^ 0x80808080u; /* 128 + q: 1152 + q under the exponent */
                    a[m][s][e][h] = hmul2(hsub2(MMHW_H2(x, 0x4140), 0x64806480u), D[s]);
                    a[m][s][e][2 + h] = hmul2(hsub2(MMHW_H2(x, 0x4342), 0x64806480u), D[s]);
                }
        }
}

inline void mmhw_a_q6_k(local const uint *ws, global const uchar *wr[2][2], int u, int t, uint a[2][2][2][4])
{
    int jj = u & 1; /* ql's high nibbles and qh's bits 4-7 for odd units */
    UNROLL for (int m = 0; m < 2; m++)
        UNROLL for (int h = 0; h < 2; h++) {
            local const uint *w = ws + (16 * m + 8 * h) * MMHW_RS_q6_k;
            uint sh = (uint)(size_t)(wr[m][h] + (u >> 2) * 210) & 2, sel = 0x3210 + sh * 0x1111;
            uint qh[2] = { prmt(w[17 + t], w[18 + t], sel), prmt(w[21 + t], w[22 + t], sel) };
            uint sc = prmt(w[26], w[27], sel) ^ 0x80808080u, dd = prmt(w[28], w[28], 0x1010 + sh * 0x1111);
            /* d * sc for sub-block s's two 16-value halves: scales 2 s, 2 s + 1 */
            uint S[2] = { hmul2(hsub2(MMHW_H2(sc, 0x4140), 0x64806480u), dd),
                          hmul2(hsub2(MMHW_H2(sc, 0x4342), 0x64806480u), dd) };
            UNROLL for (int s = 0; s < 2; s++)
                UNROLL for (int e = 0; e < 2; e++) {
                    uint ql = prmt(w[8 * s + 4 * e + t], w[8 * s + 4 * e + t + 1], sel);
                    uint q = ((ql >> (4 * jj)) & 0x0F0F0F0Fu) | (((qh[e] >> (2 * s + 4 * jj)) & 0x03030303u) << 4);
                    uint se = prmt(S[s], S[s], e ? 0x3232 : 0x1010);
                    a[m][s][e][h] = hmul2(hsub2(MMHW_H2(q, 0x4140), 0x64206420u), se); /* less 1056 */
                    a[m][s][e][2 + h] = hmul2(hsub2(MMHW_H2(q, 0x4342), 0x64206420u), se);
                }
        }
}

#define DEFINE_MMHW(T, NT)                                                                        \
kernel __attribute__((reqd_work_group_size(32 * MMH_WARPS, 1, 1))) void mmh_##T##_##NT(MMH_ARGS)  \
{                                                                                                 \
    local uint4 ring[MMHW_NS_##T(NT) * MMHW_STAGE(T, NT)];                                        \
    const uint tpb = 8 * (NT), SB = MMHW_STAGE(T, NT), XO = 8 * MMH_WARPS * MMHW_RS_##T;          \
    const int NS = MMHW_NS_##T(NT);                                                               \
    MMH_PICK                                                                                      \
    MMH_LANE_ROWS                                                                                 \
    const int wo = (32 * warp + g) * MMHW_RS_##T; /* the lane's first row in a stage */          \
    MMH_ACC(NT)                                                                                   \
    for (int s = 0; s < NS - 1; s++) {                                                            \
        if (s < n) {                                                                              \
            mmhw_copy_##T((local uint *)(ring + s * SB) + wo, wr, u0 + s, t);                     \
            mmh_issue(ring + s * SB + XO, Xh, k8, u0 + s, tpb, lid);                              \
        }                                                                                         \
        cp_async_commit();                                                                        \
    }                                                                                             \
    for (int i = 0; i < n; i++) {                                                                 \
        MMH_PREFETCH_ROWS                                                                         \
        cp_async_wait_n(NS - 2); /* unit i landed: NS - 2 younger groups may be in flight */      \
        barrier(CLK_LOCAL_MEM_FENCE); /* ... for every item, and unit i - 1's stage read by all */ \
        if (i + NS - 1 < n) {                                                                     \
            local uint4 *nx = ring + ((i + NS - 1) % NS) * SB;                                    \
            mmhw_copy_##T((local uint *)nx + wo, wr, u0 + i + NS - 1, t);                         \
            mmh_issue(nx + XO, Xh, k8, u0 + i + NS - 1, tpb, lid);                                \
        }                                                                                         \
        cp_async_commit();                                                                        \
        local const uint4 *st = ring + (i % NS) * SB;                                             \
        uint a[2][2][2][4];                                                                       \
        mmhw_a_##T((local const uint *)st + wo, wr, u0 + i, t, a);                                \
        local const uint4 *xb = st + XO;                                                          \
        MMH_PRODUCTS(NT, xb)                                                                      \
    }                                                                                             \
    cp_async_wait0();                                                                             \
    if (idle) return;                                                                             \
    MMQ8_STORE(2, NT)                                                                             \
}

/* deq8_T's A fragments for every other type */
#define DEFINE_MMH_OF(T, id) DEFINE_MMH_A(T) DEFINE_MMH(T, 2) DEFINE_MMH(T, 4) DEFINE_MMH(T, 8)
DEFINE_MMH_OF(q4_0, 2) DEFINE_MMH_OF(q4_1, 3) DEFINE_MMH_OF(q5_0, 6) DEFINE_MMH_OF(q5_1, 7) DEFINE_MMH_OF(q5_k, 13)
DEFINE_MMHR(2) DEFINE_MMHR(4) DEFINE_MMHR(8)
DEFINE_MMHW(q8_0, 2) DEFINE_MMHW(q8_0, 4) DEFINE_MMHW(q8_0, 8)
DEFINE_MMHW(q6_k, 2) DEFINE_MMHW(q6_k, 4) DEFINE_MMHW(q6_k, 8)

#endif /* CLG_NVIDIA */
