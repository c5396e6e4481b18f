/* tiles_wgmma.cl — the prefill weight products on Hopper's warpgroup tensor cores (wgmma, sm_90a):
 * Y[t][r] = sum_k W[r][k] X[t][k] for 128 tokens x 128 weight rows per group, on the f16 tiles of
 * deqh and mmt_cvt_x (tiles_layout.cl), like mmta_f16; mmtwe the same for the experts of a prefill
 * MoE layer (X gathered into tiles by mmt_cvt_xe).
 *
 * Each 16-value k half of a step is 4 KB of X and 4 KB of W in one run each, brought into local
 * memory by the bulk-copy engine (one thread issues both copies; they complete on the stage's
 * mbarrier), and read there by wgmma without passing through registers: each of the two
 * warpgroups multiplies its 64 tokens by the 128 rows with one m64n128k16 a stage. With cp.async
 * staging the same wgmma ran at half of mmta's rate (docs/PERF.md). Five stages of 8 KB (48 KB is
 * all a group may have, less the mbarriers): while stage s is multiplied, the copies of the next
 * three are in flight, and the buffer of stage s - 1 is refilled once both warpgroups are done
 * with it (one wgmma group in flight each, then the group's barrier). Rows past the tokens or the
 * matrix in a last tile are read unwritten: computed and not stored. */

#ifdef CLG_SM90A

#define MMTW_STAGES 5
#define MMTW_HALF (MMT_R * 2) /* uint4 in one k half of a tile's step (4 KB) */

/* The group's 128 x 128 product from the tiles at xp (its tokens) and wp (its rows), k values: leaves
 * d for lane (g, t) of warp wq of warpgroup wg (tokens 64 wg + 16 wq + g, +8; rows 8j + 2t, +1) */
#define MMTW_MAIN                                                                                  \
    local uint4 xs[MMTW_STAGES * MMTW_HALF] __attribute__((aligned(128)));                         \
    local uint4 ws[MMTW_STAGES * MMTW_HALF] __attribute__((aligned(128)));                         \
    local ulong full[MMTW_STAGES];                                                                 \
    int nh = (int)(k / 16);                                                                        \
    if (lid == 0) {                                                                                \
        for (int s = 0; s < MMTW_STAGES; s++) mbar_init(full + s, 1);                              \
        mbar_fence_init();                                                                         \
    }                                                                                              \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                  \
    /* the tiles' k halves follow each other: half h at h * MMTW_HALF */                          \
    if (lid == 0)                                                                                  \
        for (int s = 0; s < MMTW_STAGES - 1 && s < nh; s++) {                                      \
            mbar_expect(full + s, 2 * MMTW_HALF * 16);                                             \
            bulk_g2s(xs + s * MMTW_HALF, xp + (size_t)s * MMTW_HALF, MMTW_HALF * 16, full + s);    \
            bulk_g2s(ws + s * MMTW_HALF, wp + (size_t)s * MMTW_HALF, MMTW_HALF * 16, full + s);    \
        }                                                                                          \
    int wg = warp >> 2, wq = warp & 3;                                                             \
    float d[64];                                                                                   \
    for (int i = 0; i < 64; i++) d[i] = 0.0f;                                                      \
    int cur = 0;                                                                                   \
    uint par = 0;                                                                                  \
    for (int h = 0; h < nh; h++) {                                                                 \
        mbar_wait(full + cur, par);                                                                \
        /* core matrices: 128 bytes between the half's two 8-value chunks, 256 between 8-row      \
         * groups */                                                                               \
        local const uint4 *xb = xs + cur * MMTW_HALF + wg * (MMTW_HALF / 2), *wb = ws + cur * MMTW_HALF; \
        WG_KEEP(d);                                                                                \
        wg_fence();                                                                                \
        WGMMA_64x128(d, wg_desc(xb, 128, 256), wg_desc(wb, 128, 256));                             \
        wg_commit();                                                                               \
        wg_wait1(); /* this warpgroup's product of half h - 1 is done */                           \
        WG_KEEP(d);                                                                                \
        barrier(CLK_LOCAL_MEM_FENCE); /* and the other's: half h - 1's buffer is free */           \
        int nx = h + MMTW_STAGES - 1;                                                              \
        if (lid == 0 && nx < nh) {                                                                 \
            int b = cur == 0 ? MMTW_STAGES - 1 : cur - 1;                                          \
            mbar_expect(full + b, 2 * MMTW_HALF * 16);                                             \
            bulk_g2s(xs + b * MMTW_HALF, xp + (size_t)nx * MMTW_HALF, MMTW_HALF * 16, full + b);   \
            bulk_g2s(ws + b * MMTW_HALF, wp + (size_t)nx * MMTW_HALF, MMTW_HALF * 16, full + b);   \
        }                                                                                          \
        if (++cur == MMTW_STAGES) {                                                                \
            cur = 0;                                                                               \
            par ^= 1;                                                                              \
        }                                                                                          \
    }                                                                                              \
    wg_wait0();                                                                                    \
    WG_KEEP(d);

/* this lane's token row hh (0: 16 wq + g, 1: +8) of d into y (a Y row): rows r0 + 8j + 2t, +1 below n_rows */
#define MMTW_STORE_ROW(y, hh)                                                                      \
    for (int j = 0; j < 16; j++) {                                                                 \
        uint r = r0 + 8 * j + 2 * t;                                                               \
        if (r < n_rows) (y)[r] = d[4 * j + 2 * (hh)];                                              \
        if (r + 1 < n_rows) (y)[r + 1] = d[4 * j + 2 * (hh) + 1];                                  \
    }

kernel __attribute__((reqd_work_group_size(256, 1, 1)))
void mmtw_f16(global const uint4 *Wh, uint n_rows, uint k, global const uint4 *Xh, global float *Y, uint ldy,
              uint ntok)
{
    int lid = get_local_id(0), lane = lid & 31, warp = lid >> 5, g = lane >> 2, t = lane & 3;
    uint tok0 = get_group_id(0) * MMT_T, r0 = get_group_id(1) * MMT_R;
    global const uint4 *xp = Xh + mmt_tile_at(tok0, 0, 0, k), *wp = Wh + mmt_tile_at(r0, 0, 0, k);
    MMTW_MAIN
    for (int hh = 0; hh < 2; hh++) {
        uint tk = tok0 + wg * 64 + 16 * wq + 8 * hh + g;
        if (tk >= ntok) continue;
        global float *y = Y + (size_t)tk * ldy;
        MMTW_STORE_ROW(y, hh)
    }
}

/* Expert products (prefill MoE): group (q, row tile) multiplies expert tiles[q].x's rows (n_rows per
 * expert, a multiple of MMT_R; deqh's tiles of all experts' rows) by tile q of mmt_cvt_xe's X, the up
 * to MMT_T pairs pairs[tiles[q].y ..] of one expert; a pair's output is Y row pair. */
kernel __attribute__((reqd_work_group_size(256, 1, 1)))
void mmtwe_f16(global const uint4 *Wh, uint n_rows, uint k, global const uint4 *Xh, global float *Y, uint ldy,
               global const int *ord, uint n_exp)
{
    int lid = get_local_id(0), lane = lid & 31, warp = lid >> 5, g = lane >> 2, t = lane & 3;
    uint q = get_group_id(0), r0 = get_group_id(1) * MMT_R;
    global const int *offs = ord, *pairs = ord + n_exp + 2, *tiles = pairs + offs[n_exp];
    if (q >= (uint)ord[n_exp + 1]) return; /* the whole group: before any barrier */
    int e = tiles[2 * q], start = tiles[2 * q + 1], end = offs[e + 1];
    global const uint4 *xp = Xh + mmt_tile_at(q * MMT_T, 0, 0, k),
                       *wp = Wh + mmt_tile_at((uint)e * n_rows + r0, 0, 0, k);
    MMTW_MAIN
    for (int hh = 0; hh < 2; hh++) {
        int at = start + wg * 64 + 16 * wq + 8 * hh + g;
        if (at >= end) continue;
        global float *y = Y + (size_t)pairs[at] * ldy;
        MMTW_STORE_ROW(y, hh)
    }
}

#endif /* CLG_SM90A */
