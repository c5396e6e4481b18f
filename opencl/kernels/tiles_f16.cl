/* tiles_f16.cl — prefill weight products as 128 x 128 tiles on NVIDIA tensor cores:
 * Y[t][r] = sum_k W[r][k] X[t][k] for 128 tokens x 128 weight rows per work-group of 8 warps.
 *
 * mmq (mma_f16.cl) has every warp dequantize its own rows and convert its own X from global memory
 * at each use. Here X is converted to f16 rows once (mmt_cvt_x), and
 * each step of 32 k-values is staged once per group into local memory (X copied, W dequantized one
 * 32-value sub-block per row) and read by all 8 warps (2 token halves x 4 row quarters, a 64 x 32
 * tile each). Two buffers: the next step is loaded while this one is multiplied, one barrier per
 * step. The tiles are bound by bytes in flight, not by the tensor cores: this file builds in its
 * own program capped at 128 registers (manifest.def), so two groups share a compute unit.
 *
 * Fragments come back with 16-byte local loads: lane (g, t) reads k = 8t..8t+7 of a row and uses
 * them as its fragment slots {2t, 2t+1, 2t+8, 2t+9} of two k16 steps (any order of k inside a step
 * is fine as long as A and B agree). Rows are 64 bytes, unpadded: the 8 lanes of a quarter-warp
 * read two whole rows, so the loads are free of bank conflicts. */

#ifdef CLG_NVIDIA

inline uint2 mmt_h4(float4 v) { return (uint2)(pack_h2(v.x, v.y), pack_h2(v.z, v.w)); }

/* one warp's 64 x 32 tile for the 32 k-values in buffers xa / wb (this lane's row g, quarter t).
 * All 16 products of the first k16 half before any of the second: an mma waits ~30 cycles for
 * the one it accumulates onto, and with 2 warps per scheduler nothing else would fill that. */
inline void mmt_step(local const uint4 *xa, local const uint4 *wb, float4 acc[4][4])
{
    uint4 bq[4], p[4], q[4];
    for (int j = 0; j < 4; j++) bq[j] = wb[32 * j];
    for (int i = 0; i < 4; i++) { p[i] = xa[64 * i]; q[i] = xa[64 * i + 32]; }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) acc[i][j] = mma_16816(acc[i][j], p[i].x, q[i].x, p[i].y, q[i].y, bq[j].x, bq[j].y);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) acc[i][j] = mma_16816(acc[i][j], p[i].z, q[i].z, p[i].w, q[i].w, bq[j].z, bq[j].w);
}

/* staging of a weight piece as f16: lo = values 4t..4t+3 of sub-block sb, hi = 16+4t..16+4t+3
 * (deq8's split); f16 rows are copied as they are */
#define DEFINE_MMT_W(T)                                                                           \
inline void mmt_w_##T(global const uchar *row, int sb, int t, uint2 *lo, uint2 *hi)              \
{                                                                                                 \
    float4 a, b;                                                                                  \
    deq8_##T(row, sb, t, &a, &b);                                                                 \
    *lo = mmt_h4(a);                                                                              \
    *hi = mmt_h4(b);                                                                              \
}

inline void mmt_w_f16(global const uchar *row, int sb, int t, uint2 *lo, uint2 *hi)
{
    global const uint2 *p = (global const uint2 *)(row + sb * 64) + t;
    *lo = p[0];
    *hi = p[4];
}

/* The kernels writing X as tiles (tiles_layout.cl) take item (8 u + j, rg) for piece u (8 values) of
 * tile row 8 rg + j, so a warp's 32 items write four whole 128-byte runs of the tiles */
inline void mmt_tile_item(uint *u, uint *r)
{
    *u = get_global_id(0) / 8;
    *r = get_global_id(1) * 8 + get_global_id(0) % 8;
}

/* X as f16 rows of k halves (what mmt and mmte stage; item (piece u of 8 values, token tk)), or with
 * tiled as the tiles of mmta and mmtw */
kernel void mmt_cvt_x(global const float *X, uint ldx, global uint4 *Xh, uint k, uint n, uint tiled)
{
    uint u = get_global_id(0), tk = get_global_id(1);
    if (tiled) mmt_tile_item(&u, &tk);
    if (u >= k / 8 || tk >= n) return;
    global const float4 *x = (global const float4 *)(X + (size_t)tk * ldx) + 2 * u;
    Xh[tiled ? mmt_tile_at(tk, u / 4, u % 4, k) : (size_t)tk * (k / 8) + u] = (uint4)(mmt_h4(x[0]), mmt_h4(x[1]));
}

/* the down product's X made from its gate and up rows (k values each, n tokens) straight into the tiles:
 * glu_act(g, act) * u; the f32 activation rows are never written */
kernel void mmt_cvt_glu(global const float *G, global const float *U, global uint4 *Xh, uint k, uint n, uint act)
{
    uint u, tk;
    mmt_tile_item(&u, &tk);
    if (u >= k / 8 || tk >= n) return;
    global const float4 *g = (global const float4 *)(G + (size_t)tk * k) + 2 * u,
                        *v = (global const float4 *)(U + (size_t)tk * k) + 2 * u;
    float4 a[2];
    for (int h = 0; h < 2; h++) {
        float4 e = g[h];
        a[h] = v[h] * (float4)(glu_act(e.x, act), glu_act(e.y, act), glu_act(e.z, act), glu_act(e.w, act));
    }
    Xh[mmt_tile_at(tk, u / 4, u % 4, k)] = (uint4)(mmt_h4(a[0]), mmt_h4(a[1]));
}

/* an expert product's X rows as tiles (mmtwe): tile q of g4_moe_sort's tiles (tt = MMT_T) is rows
 * MMT_T q.., slot i holding X row pairs[start + i] / xdiv, slots past the expert's end its first pair
 * again (computed, not stored); items past the tiles that exist return */
kernel void mmt_cvt_xe(global const float *X, uint ldx, global uint4 *Xh, uint k, global const int *ord, uint n_exp,
                       uint xdiv)
{
    uint u, sr;
    mmt_tile_item(&u, &sr);
    uint q = sr / MMT_T;
    global const int *offs = ord, *pairs = ord + n_exp + 2, *tiles = pairs + offs[n_exp];
    if (u >= k / 8 || q >= (uint)ord[n_exp + 1]) return;
    int e = tiles[2 * q], start = tiles[2 * q + 1], at = start + (int)(sr % MMT_T);
    uint pr = (uint)pairs[at < offs[e + 1] ? at : start];
    global const float4 *x = (global const float4 *)(X + (size_t)(pr / xdiv) * ldx) + 2 * u;
    Xh[mmt_tile_at(sr, u / 4, u % 4, k)] = (uint4)(mmt_h4(x[0]), mmt_h4(x[1]));
}

/* Rows of X (token tiles) and of W are clamped to the last real one: they are computed and not
 * stored. Staging: 16-byte piece (lid & 3) of tokens lid / 4 + 64 i of Xh, quarter (lid & 3) of
 * W rows lid / 4 + 64 i dequantized; a staged row is 32 halves = 4 uint4 = 8 uint2. The loop body
 * has no branches (the last step loads its own data again and stores it where no one reads), so
 * the compiler can interleave the next step's loads and dequantization with this step's mma. */
/* The group's tile: each item stages X rows xp[0..1] (its 16-byte piece of two token rows) and
 * W rows wp[0..1] (a quarter of two weight rows); leaves acc for warp (wt, wr): tokens wt*64..,
 * rows wr*32.. of the tile */
#define MMT_MAIN(T)                                                                               \
    local uint2 *wd = (local uint2 *)ws + (lid >> 2) * 8 + (lid & 3);                             \
    int wt = warp & 1, wr = warp >> 1;                                                            \
    local const uint4 *xa = xs + (wt * 64 + g) * 4 + t, *wb = ws + (wr * 32 + g) * 4 + t;         \
    float4 acc[4][4];                                                                             \
    for (int i = 0; i < 4; i++)                                                                   \
        for (int j = 0; j < 4; j++) acc[i][j] = (float4)(0.0f);                                   \
    int nsb = (int)(k / 32);                                                                      \
    uint4 xv[2];                                                                                  \
    uint2 wl[2], wh[2];                                                                           \
    for (int i = 0; i < 2; i++) {                                                                 \
        xv[i] = xp[i][0];                                                                         \
        mmt_w_##T(wp[i], 0, lid & 3, &wl[i], &wh[i]);                                             \
        xs[lid + 256 * i] = xv[i];                                                                \
        wd[512 * i] = wl[i];                                                                      \
        wd[512 * i + 4] = wh[i];                                                                  \
    }                                                                                             \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                 \
    for (int sb = 0; sb < nsb; sb++) {                                                            \
        int cur = sb & 1, nx = sb + 1 < nsb ? sb + 1 : sb;                                        \
        /* X of the next step loaded first, its weights dequantized after this step's products  \
         * (measured: ahead of them they held the products up) */                                 \
        for (int i = 0; i < 2; i++) xv[i] = xp[i][4 * nx];                                        \
        mmt_step(xa + cur * MMT_T * 4, wb + cur * MMT_R * 4, acc);                                \
        for (int i = 0; i < 2; i++) mmt_w_##T(wp[i], nx, lid & 3, &wl[i], &wh[i]);                \
        int ob = cur ^ 1;                                                                         \
        for (int i = 0; i < 2; i++) {                                                             \
            xs[ob * MMT_T * 4 + lid + 256 * i] = xv[i];                                           \
            wd[ob * MMT_R * 8 + 512 * i] = wl[i];                                                 \
            wd[ob * MMT_R * 8 + 512 * i + 4] = wh[i];                                             \
        }                                                                                         \
        barrier(CLK_LOCAL_MEM_FENCE);                                                             \
    }

/* acc of token row (i, h) of warp (wt, wr) into y (a Y row): rows r0 + wr*32 + 8j + 2t, +1 */
#define MMT_STORE_ROW(y)                                                                          \
    for (int j = 0; j < 4; j++) {                                                                 \
        uint r = r0 + wr * 32 + 8 * j + 2 * t;                                                    \
        float v0 = h ? acc[i][j].z : acc[i][j].x, v1 = h ? acc[i][j].w : acc[i][j].y;             \
        if (r < n_rows) (y)[r] = v0;                                                              \
        if (r + 1 < n_rows) (y)[r + 1] = v1;                                                      \
    }

/* the group's tile into Y: token rows tok0 + .. (ntok of them), rows r0 + .. (n_rows) */
#define MMT_STORE_TILE                                                                            \
    for (int i = 0; i < 4; i++)                                                                   \
        for (int h = 0; h < 2; h++) {                                                             \
            uint tk = tok0 + wt * 64 + 16 * i + 8 * h + g;                                        \
            if (tk >= ntok) continue;                                                             \
            global float *y = Y + (size_t)tk * ldy;                                               \
            MMT_STORE_ROW(y)                                                                      \
        }

#define DEFINE_MMT(T)                                                                             \
kernel __attribute__((reqd_work_group_size(256, 1, 1)))                                          \
void mmt_##T(global const uchar *W, uint row_bytes, uint n_rows, uint k, global const uint4 *Xh,  \
             global float *Y, uint ldy, uint ntok)                                                \
{                                                                                                 \
    local uint4 xs[2 * MMT_T * 4], ws[2 * MMT_R * 4];                                             \
    int lid = get_local_id(0), lane = lid & 31, warp = lid >> 5, g = lane >> 2, t = lane & 3;     \
    /* token tiles of one row tile are neighbours in the grid: they share its weights in L2 */    \
    uint tok0 = get_group_id(0) * MMT_T, r0 = get_group_id(1) * MMT_R;                            \
    global const uint4 *xp[2];                                                                    \
    global const uchar *wp[2];                                                                    \
    for (int i = 0; i < 2; i++) {                                                                 \
        uint tk = tok0 + (lid >> 2) + 64 * i, r = r0 + (lid >> 2) + 64 * i;                       \
        xp[i] = Xh + (size_t)(tk < ntok ? tk : ntok - 1) * (k / 8) + (lid & 3);                   \
        wp[i] = W + (size_t)(r < n_rows ? r : n_rows - 1) * row_bytes;                            \
    }                                                                                             \
    MMT_MAIN(T)                                                                                   \
    MMT_STORE_TILE                                                                                \
}

/* Expert products on the tiles (prefill MoE): group (q, row tile) takes expert tiles[q].x's rows
 * (n_rows per expert) for the up to MMT_T pairs pairs[tiles[q].y ..] of one expert (g4_moe_sort
 * with tt = MMT_T; a pair's X row is Xh row pair / xdiv, its output Y row pair). Pairs past the
 * expert's end repeat its first one and are not stored. */
#define DEFINE_MMTE(T)                                                                            \
kernel __attribute__((reqd_work_group_size(256, 1, 1)))                                          \
void mmte_##T(global const uchar *W, uint row_bytes, uint n_rows, uint k, global const uint4 *Xh, \
              uint xdiv, global float *Y, uint ldy, global const int *ord, uint n_exp)             \
{                                                                                                 \
    local uint4 xs[2 * MMT_T * 4], ws[2 * MMT_R * 4];                                             \
    int lid = get_local_id(0), lane = lid & 31, warp = lid >> 5, g = lane >> 2, t = lane & 3;     \
    uint q = get_group_id(0), r0 = get_group_id(1) * MMT_R;                                       \
    global const int *offs = ord, *pairs = ord + n_exp + 2, *tiles = pairs + offs[n_exp];         \
    if (q >= (uint)ord[n_exp + 1]) return; /* the whole group: before any barrier */              \
    int e = tiles[2 * q], start = tiles[2 * q + 1], end = offs[e + 1];                            \
    global const uint4 *xp[2];                                                                    \
    global const uchar *wp[2];                                                                    \
    for (int i = 0; i < 2; i++) {                                                                 \
        int at = start + (lid >> 2) + 64 * i;                                                     \
        uint pr = (uint)pairs[at < end ? at : start], r = r0 + (lid >> 2) + 64 * i;               \
        xp[i] = Xh + (size_t)(pr / xdiv) * (k / 8) + (lid & 3);                                   \
        wp[i] = W + ((size_t)e * n_rows + (r < n_rows ? r : n_rows - 1)) * row_bytes;             \
    }                                                                                             \
    MMT_MAIN(T)                                                                                   \
    for (int i = 0; i < 4; i++)                                                                   \
        for (int h = 0; h < 2; h++) {                                                             \
            int at = start + wt * 64 + 16 * i + 8 * h + g;                                        \
            if (at >= end) continue;                                                              \
            global float *y = Y + (size_t)pairs[at] * ldy;                                        \
            MMT_STORE_ROW(y)                                                                      \
        }                                                                                         \
}

/* --- f16 rows on both sides, staged by cp.async (mmta) ---------------------------------------
 * mmt stages through registers, so a group has one 16 KB step in flight (Little's law caps the
 * staging rate, and the tiles ran far faster with the weight staging left out). Here
 * the weights are made f16 first (deqh_T, once per product) and both operands go global ->
 * local by cp.async, which holds no registers: three 16 KB stages (48 KB, all a group may have),
 * two in flight while the third is multiplied. Same warps, fragments and k order as mmt.
 * deqh_T writes the weights as tiles: a row tile's 128 rows x 32 values of one step are 8 KB in
 * one piece (each step of f16 rows would be 128 pieces of 64 bytes, one per row); f16 weights are
 * read as the rows they are. X comes as tiles too (mmt_cvt_x). A last tile's rows past the tokens
 * or the matrix are read unwritten: computed and not stored. */

#define MMTA_STAGES 3 /* 16 KB each: the 48 KB a group may have */

kernel __attribute__((reqd_work_group_size(256, 1, 1)))
void mmta_f16(global const uint4 *Wh, uint n_rows, uint k, global const uint4 *Xh, global float *Y, uint ldy,
              uint ntok, uint wtile)
{
    local uint4 xs[MMTA_STAGES * MMT_T * 4], ws[MMTA_STAGES * MMT_R * 4];
    int lid = get_local_id(0), lane = lid & 31, warp = lid >> 5, g = lane >> 2, t = lane & 3;
    uint tok0 = get_group_id(0) * MMT_T, r0 = get_group_id(1) * MMT_R;
    global const uint4 *xp[2], *wp[2];
    for (int i = 0; i < 2; i++) {
        uint tk = tok0 + (lid >> 2) + 64 * i, r = r0 + (lid >> 2) + 64 * i;
        xp[i] = Xh + mmt_tile_at(tk, 0, lid & 3, k);
        wp[i] = wtile ? Wh + mmt_tile_at(r, 0, lid & 3, k)
                      : Wh + (size_t)(r < n_rows ? r : n_rows - 1) * (k / 8) + (lid & 3);
    }
    uint wstep = wtile ? MMT_R * 4 : 4, xstep = MMT_T * 4; /* uint4 from one step's piece to the next */
    int wt = warp & 1, wr = warp >> 1;
    local const uint4 *xa = xs + (wt * 64 + g) * 4 + t, *wb = ws + (wr * 32 + g) * 4 + t;
    float4 acc[4][4];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) acc[i][j] = (float4)(0.0f);
    int nsb = (int)(k / 32);
    for (int s = 0; s < MMTA_STAGES - 1; s++) {
        if (s < nsb)
            for (int i = 0; i < 2; i++) {
                cp_async16(xs + s * MMT_T * 4 + lid + 256 * i, xp[i] + xstep * s);
                cp_async16(ws + s * MMT_R * 4 + lid + 256 * i, wp[i] + wstep * s);
            }
        cp_async_commit();
    }
    int cur = 0, nb = MMTA_STAGES - 1;
    for (int sb = 0; sb < nsb; sb++) {
        /* step sb has landed for every item, and every warp is done with the buffer refilled next */
        cp_async_wait1();
        barrier(CLK_LOCAL_MEM_FENCE);
        int nx = sb + MMTA_STAGES - 1;
        if (nx < nsb)
            for (int i = 0; i < 2; i++) {
                cp_async16(xs + nb * MMT_T * 4 + lid + 256 * i, xp[i] + xstep * nx);
                cp_async16(ws + nb * MMT_R * 4 + lid + 256 * i, wp[i] + wstep * nx);
            }
        cp_async_commit();
        mmt_step(xa + cur * MMT_T * 4, wb + cur * MMT_R * 4, acc);
        cur = cur == MMTA_STAGES - 1 ? 0 : cur + 1;
        nb = nb == MMTA_STAGES - 1 ? 0 : nb + 1;
    }
    MMT_STORE_TILE
}

/* weight rows to f16 tiles (the operand of mmta and mmtw, tiles_layout.cl): item (32 p + l, rg) takes
 * row 8 rg + l % 8, step 2 p + l / 16, and chunks c and 2 + c (c = l / 8 % 2; deq8's t = 2c, 2c + 1
 * give values 8c..8c+7 and 16 + 8c..), so a warp's stores are whole 128-byte runs of the tiles */
#define DEFINE_DEQH(T)                                                                            \
kernel void deqh_##T(global const uchar *W, uint row_bytes, uint k, uint n_rows, global uint4 *Wh) \
{                                                                                                 \
    uint l = get_global_id(0) % 32, sb = get_global_id(0) / 32 * 2 + l / 16, c = l / 8 % 2;      \
    uint r = get_global_id(1) * 8 + l % 8;                                                        \
    if (sb >= k / 32 || r >= n_rows) return;                                                      \
    global const uchar *row = W + (size_t)r * row_bytes;                                          \
    float4 a0, b0, a1, b1;                                                                        \
    deq8_##T(row, (int)sb, (int)(2 * c), &a0, &b0);                                               \
    deq8_##T(row, (int)sb, (int)(2 * c + 1), &a1, &b1);                                           \
    Wh[mmt_tile_at(r, sb, c, k)] = (uint4)(mmt_h4(a0), mmt_h4(a1));                               \
    Wh[mmt_tile_at(r, sb, 2 + c, k)] = (uint4)(mmt_h4(b0), mmt_h4(b1));                           \
}

/* the weight staging of every type but f16 (mmt_w_f16 above copies), the tiles of every type, and
 * the f16 rows of every type but f16 for mmta */
#define DEFINE_MMT_W_ID(T, id) DEFINE_MMT_W(T)
#define DEFINE_TILES(T, id) DEFINE_MMT(T) DEFINE_MMTE(T)
#define DEFINE_DEQH_ID(T, id) DEFINE_DEQH(T)
CLG_TYPES_CONV(DEFINE_MMT_W_ID)
CLG_TYPES(DEFINE_TILES)
CLG_TYPES_CONV(DEFINE_DEQH_ID)

#endif /* CLG_NVIDIA */
