/* mma_f16.cl — weight products on NVIDIA tensor cores (inline PTX mma.sync m16n8k16, f16 inputs,
 * f32 accumulate), for batched decode and prefill: Y[t][r] = sum_k W[r][k] X[t][k].
 *
 * The mma's A operand is 16 tokens of X, B is 8 weight rows, C is tokens x rows. The order of k
 * inside one 16-wide step is free as long as A and B agree, so thread (g = lane / 4, t = lane % 4)
 * takes k = 4t..4t+3 of each 16-chunk for its fragment slots {2t, 2t+1, 2t+8, 2t+9}: exactly the
 * values deq8_T(row, sb, t) yields (lo = chunk 0 of the sub-block, hi = chunk 1), and a float4 of X.
 * So weights go from their GGUF blocks straight into registers, with no local-memory staging.
 *
 * A warp owns MT x NT tiles (16 tokens x 8 rows each). The warps of a work-group split the
 * sub-blocks of k between them (warp w takes sb = w, w + nw, ...) and add their partial tiles
 * through local memory at the end: small batches get enough warps in flight to pull bandwidth. */

#ifdef CLG_NVIDIA

/* the product loop and the split-k reduction; needs wr[NT], xr[MT][2], k, warp, nw, lane, lid, L, t,
 * part in scope and leaves warp 0 with acc[MT][NT] */
#define MMQ_MAIN(T, MT, NT)                                                                       \
    float4 acc[MT][NT];                                                                           \
    for (int i = 0; i < MT; i++)                                                \
        for (int j = 0; j < NT; j++) acc[i][j] = (float4)(0.0f);                \
    int nsb = (int)(k / 32);                                                                      \
    /* two sub-blocks per pass, weights of both loaded before the products (bytes in flight) */ \
    for (int sb0 = warp; sb0 < nsb; sb0 += 2 * nw) {                                              \
        uint b[2][NT][4];                                                                         \
        int two = sb0 + nw < nsb;                                                                 \
        for (int p = 0; p < 2; p++)                                                               \
            for (int j = 0; j < NT; j++) {                                                        \
                float4 lo, hi;                                                                    \
                deq8_##T(wr[j], p && two ? sb0 + nw : sb0, t, &lo, &hi);                          \
                b[p][j][0] = pack_h2(lo.x, lo.y); b[p][j][1] = pack_h2(lo.z, lo.w);               \
                b[p][j][2] = pack_h2(hi.x, hi.y); b[p][j][3] = pack_h2(hi.z, hi.w);               \
            }                                                                                     \
        for (int p = 0; p < 2; p++) { /* constant bounds: b[p] stays in registers */             \
            if (p == 1 && !two) break;                                                            \
            int sb = sb0 + p * nw;                                                                \
            for (int i = 0; i < MT; i++) {                                                        \
                float4 x0 = *(global const float4 *)(xr[i][0] + sb * 32);                         \
                float4 x1 = *(global const float4 *)(xr[i][1] + sb * 32);                         \
                float4 y0 = *(global const float4 *)(xr[i][0] + sb * 32 + 16);                    \
                float4 y1 = *(global const float4 *)(xr[i][1] + sb * 32 + 16);                    \
                uint a0 = pack_h2(x0.x, x0.y), a1 = pack_h2(x1.x, x1.y);                          \
                uint a2 = pack_h2(x0.z, x0.w), a3 = pack_h2(x1.z, x1.w);                          \
                uint e0 = pack_h2(y0.x, y0.y), e1 = pack_h2(y1.x, y1.y);                          \
                uint e2 = pack_h2(y0.z, y0.w), e3 = pack_h2(y1.z, y1.w);                          \
                /* the NT independent tiles between an mma and the one accumulating onto it */    \
                for (int j = 0; j < NT; j++)                                                      \
                    acc[i][j] = mma_16816(acc[i][j], a0, a1, a2, a3, b[p][j][0], b[p][j][1]);     \
                for (int j = 0; j < NT; j++)                                                      \
                    acc[i][j] = mma_16816(acc[i][j], e0, e1, e2, e3, b[p][j][2], b[p][j][3]);     \
            }                                                                                     \
        }                                                                                         \
    }                                                                                             \
    if (nw > 1) { /* add the other warps' partial tiles into warp 0's */                          \
        for (int i = 0; i < MT; i++)                                            \
            for (int j = 0; j < NT; j++)                                        \
                vstore4(acc[i][j], (i * NT + j) * L + lid, part);                                 \
        barrier(CLK_LOCAL_MEM_FENCE);                                                             \
        if (warp == 0)                                                                            \
            for (int w = 1; w < nw; w++)                                                          \
                for (int i = 0; i < MT; i++)                                    \
                    for (int j = 0; j < NT; j++)                                \
                        acc[i][j] += vload4((i * NT + j) * L + 32 * w + lane, part);              \
    }                                                                                             \
    (void)0

/* warp 0 writes its tile: token row (i, h) goes to Y row yrow[i][h] (< 0: not a real token) */
#define MMQ_STORE(MT, NT)                                                                         \
    for (int i = 0; i < MT; i++)                                                                  \
        for (int j = 0; j < NT; j++) {                                                            \
            uint r = r0 + 8 * j + 2 * t;                                                          \
            for (int h = 0; h < 2; h++) {                                                         \
                if (yrow[i][h] < 0) continue;                                                     \
                global float *y = Y + (size_t)yrow[i][h] * ldy;                                   \
                float v0 = h ? acc[i][j].z : acc[i][j].x, v1 = h ? acc[i][j].w : acc[i][j].y;     \
                if (r < n_rows) y[r] = v0;                                                        \
                if (r + 1 < n_rows) y[r + 1] = v1;                                                \
            }                                                                                     \
        }

/* part: MT * NT * 4 floats per item when the group has more than one warp */
#define DEFINE_MMQ(T, NAME, MT, NT)                                                               \
kernel void NAME##_##T(global const uchar *W, uint row_bytes, uint n_rows, uint k,                \
                       global const float *X, uint ldx, global float *Y, uint ldy, uint ntok,     \
                       local float *part)                                                         \
{                                                                                                 \
    int lid = get_local_id(0), L = get_local_size(0);                                             \
    int lane = lid & 31, warp = lid >> 5, nw = L >> 5, g = lane >> 2, t = lane & 3;               \
    uint r0 = get_group_id(0) * (NT * 8), tok0 = get_group_id(1) * (MT * 16);                     \
    global const uchar *wr[NT];                                                                   \
    for (int j = 0; j < NT; j++) {                                                                \
        uint r = r0 + 8 * j + g;                                                                  \
        wr[j] = W + (size_t)(r < n_rows ? r : n_rows - 1) * row_bytes;                            \
    }                                                                                             \
    global const float *xr[MT][2];                                                                \
    int yrow[MT][2];                                                                              \
    for (int i = 0; i < MT; i++)                                                                  \
        for (int h = 0; h < 2; h++) {                                                             \
            uint tk = tok0 + 16 * i + 8 * h + g;                                                  \
            xr[i][h] = X + (size_t)(tk < ntok ? tk : ntok - 1) * ldx + 4 * t;                     \
            yrow[i][h] = tk < ntok ? (int)tk : -1;                                                \
        }                                                                                         \
    MMQ_MAIN(T, MT, NT);                                                                          \
    if (warp != 0) return;                                                                        \
    MMQ_STORE(MT, NT)                                                                             \
}

/* Expert products over tokens grouped by expert (g4_moe_sort): group (rt, q) takes row tile rt of
 * expert tiles[q].x for the pairs pairs[tiles[q].y ..] (at most MT*16, up to the expert's end at
 * offs[e + 1]). A pair p = token * n_used + slot reads X row p / xdiv and writes Y row p. */
#define DEFINE_MMQ_MOE(T, NAME, MT, NT)                                                           \
kernel void NAME##_##T(global const uchar *W, uint row_bytes, uint n_rows, uint k,                \
                       global const float *X, uint ldx, global float *Y, uint ldy,                \
                       global const int *ord, uint n_exp, uint xdiv, local float *part)           \
{                                                                                                 \
    int lid = get_local_id(0), L = get_local_size(0);                                             \
    int lane = lid & 31, warp = lid >> 5, nw = L >> 5, g = lane >> 2, t = lane & 3;               \
    uint q = get_group_id(1);                                                                     \
    global const int *offs = ord, *pairs = ord + n_exp + 2;                                       \
    global const int *tiles = pairs + offs[n_exp];                                                \
    if (q >= (uint)ord[n_exp + 1]) return; /* the whole group: before any barrier */              \
    int e = tiles[2 * q], start = tiles[2 * q + 1], end = offs[e + 1];                            \
    uint r0 = get_group_id(0) * (NT * 8);                                                         \
    global const uchar *wr[NT];                                                                   \
    for (int j = 0; j < NT; j++) {                                                                \
        uint r = r0 + 8 * j + g;                                                                  \
        wr[j] = W + ((size_t)e * n_rows + (r < n_rows ? r : n_rows - 1)) * row_bytes;             \
    }                                                                                             \
    global const float *xr[MT][2];                                                                \
    int yrow[MT][2];                                                                              \
    for (int i = 0; i < MT; i++)                                                                  \
        for (int h = 0; h < 2; h++) {                                                             \
            int at = start + 16 * i + 8 * h + g;                                                  \
            int pr = pairs[at < end ? at : start];                                                \
            xr[i][h] = X + (size_t)(pr / (int)xdiv) * ldx + 4 * t;                                \
            yrow[i][h] = at < end ? pr : -1;                                                      \
        }                                                                                         \
    MMQ_MAIN(T, MT, NT);                                                                          \
    if (warp != 0) return;                                                                        \
    MMQ_STORE(MT, NT)                                                                             \
}

/* mmqs: one tile of 16 tokens x 16 rows per warp (batched decode); mmql: 64 tokens x 32 rows;
 * mmqe_s / mmqe_l: the same over expert-grouped pairs */
#define DEFINE_MMQ_KERNELS(T, id) DEFINE_MMQ(T, mmqs, 1, 2) DEFINE_MMQ(T, mmql, 4, 4) \
    DEFINE_MMQ_MOE(T, mmqe_s, 1, 2) DEFINE_MMQ_MOE(T, mmqe_l, 4, 4)

CLG_TYPES(DEFINE_MMQ_KERNELS)

#endif /* CLG_NVIDIA */
