/* tiles_layout.cl — the f16 tiles of the prefill products (deqh's weights, mmt_cvt_x's X), read by
 * mmta_f16 (tiles_f16.cl) and mmtw_f16 (tiles_wgmma.cl): 128 rows a tile, one 8 KB piece per (row
 * tile, step of 32 values), inside it wgmma's core-matrix order: k half j (16 values), 8-row group,
 * 8-value chunk c of the half, row in the group, 16 bytes each. So each k half of a step is one
 * 4 KB run (one bulk copy, and wgmma reads it as it lands), and every 16-byte piece is 8
 * consecutive values of one row (what mmta's items copy). */

#ifdef CLG_NVIDIA

#define MMT_T 128 /* tokens per group */
#define MMT_R 128 /* weight rows per group */

/* the uint4 holding values 8q..8q+7 (q < 4) of step sb of row r, rows of k values */
inline size_t mmt_tile_at(uint r, uint sb, uint q, uint k)
{
    uint rr = r % MMT_R;
    return ((size_t)(r / MMT_R) * (k / 32) + sb) * (MMT_R * 4) + (q >> 1) * (MMT_R * 2) + (rr >> 3) * 16 +
           (q & 1) * 8 + (rr & 7);
}

#endif /* CLG_NVIDIA */
