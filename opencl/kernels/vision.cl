/* vision.cl — the vision encoder's own kernels (docs/design-vision.md 1.3, 4.4): the 2-D position-table add,
 * the per-head norm with the 2-D RoPE, dense attention within each image, k x k average pooling, clamp and
 * standardize. Rows are float, contiguous; positions and ranges are int pairs. */

/* x[t][j] += tab[pos[t].x][j] + tab[n_pos + pos[t].y][j] (the x table, then the y table); a position outside
 * the table makes the row NaN rather than read out of bounds */
kernel void vis_pos_add(global float *x, global const float *tab, global const int *pos, uint n, uint n_pos,
                        uint ntok)
{
    uint j = get_global_id(0), t = get_global_id(1);
    if (j >= n || t >= ntok) return;
    int px = pos[2 * t], py = pos[2 * t + 1];
    size_t i = (size_t)t * n + j;
    if (px < 0 || py < 0 || px >= (int)n_pos || py >= (int)n_pos) {
        x[i] = NAN;
        return;
    }
    x[i] += tab[(size_t)px * n + j] + tab[((size_t)n_pos + py) * n + j];
}

/* One group per (head, row) of x [ntok][nh][hd] (its items over the head's values, so a row is read once and
 * coalesced): norm mode 1 x = x / rms(x) · w, 2 without weight, 0 none; then with rope the axial RoPE of
 * transformers' Gemma4VisionRotaryEmbedding: the first half of the head rotated by pos.x, the second by pos.y, in
 * each half the NEOX pairs (i, i + hd/4) at frequency theta^(-4i/hd), a pair per item. Where hdp is not 0 the row
 * also goes to h16 [nh][ntok][hdp] as f16, zero past hd (vis_fa's operands). hd <= VN_MAX, groups of <= VN_L. */
#define VN_L 64
#define VN_MAX 512
kernel void vis_norm_rope2d(global float *x, uint nh, uint hd, global const float *w, uint mode, float eps,
                            uint rope, global const int *pos, float theta, uint ntok, global half *h16, uint hdp)
{
    local float v[VN_MAX], red[VN_L];
    uint h = get_group_id(0), t = get_group_id(1), lid = get_local_id(0), L = get_local_size(0);
    if (h >= nh || t >= ntok) return; /* whole groups: the barriers below see every item or none */
    global float *r = x + ((size_t)t * nh + h) * hd;
    float ss = 0.0f;
    for (uint i = lid; i < hd; i += L) {
        float a = r[i];
        v[i] = a;
        ss += a * a;
    }
    red[lid] = ss;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint st = L / 2; st > 0; st >>= 1) {
        if (lid < st) red[lid] += red[lid + st];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float s = mode ? rsqrt(red[0] / (float)hd + eps) : 1.0f;
    for (uint i = lid; i < hd; i += L) v[i] *= s * (mode == 1 ? w[i] : 1.0f);
    barrier(CLK_LOCAL_MEM_FENCE);
    uint hw = hd / 2, q = hd / 4;
    for (uint j = lid; rope && j < 2 * q; j += L) {
        uint part = j / q, i = j % q, a = part * hw + i;
        float p = (float)pos[2 * t + part], inv = pow(theta, -(float)(2 * i) / (float)hw);
        float c = cos(p * inv), sn = sin(p * inv), va = v[a], vb = v[a + q];
        v[a] = va * c - vb * sn;
        v[a + q] = vb * c + va * sn;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint i = lid; i < hd; i += L) r[i] = v[i];
    global half *d = h16 + ((size_t)h * ntok + t) * hdp;
    for (uint i = lid; i < hdp; i += L) vstore_half(i < hd ? v[i] : 0.0f, i, d);
}

#define VA_L 64  /* items per group: keys per tile (OPS_VATT_L) */
#define VA_DPT 8 /* output values per item: head dims up to VA_L * VA_DPT */

/* One group per (head, query row): softmax(q·kᵀ·scale) v over the keys [rng[t].x, rng[t].y) (the query's image,
 * no mask inside it), online over tiles of VA_L keys; q [ntok][nh][hd], k and v [ntok][nkv][hd], out as q. */
kernel __attribute__((reqd_work_group_size(VA_L, 1, 1)))
void vis_attn(global const float *q, global const float *k, global const float *v, global float *out,
              global const int *rng, uint nh, uint nkv, uint hd, float scale, local float *qs)
{
    local float p[VA_L], red[VA_L];
    uint h = get_group_id(0), t = get_group_id(1), lid = get_local_id(0);
    uint kh = h / (nh / nkv);
    global const float *qr = q + ((size_t)t * nh + h) * hd;
    for (uint i = lid; i < hd; i += VA_L) qs[i] = qr[i] * scale;
    barrier(CLK_LOCAL_MEM_FENCE);
    int k0 = rng[2 * t], k1 = rng[2 * t + 1];
    float m = -INFINITY, l = 0.0f, acc[VA_DPT]; /* unrolled loops over j keep it in registers */
#pragma unroll
    for (int j = 0; j < VA_DPT; j++) acc[j] = 0.0f;
    for (int b = k0; b < k1; b += VA_L) {
        int key = b + (int)lid;
        float s = -INFINITY;
        if (key < k1) {
            global const float *kr = k + ((size_t)key * nkv + kh) * hd;
            s = 0.0f;
            for (uint i = 0; i < hd; i++) s += qs[i] * kr[i];
        }
        red[lid] = s;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint st = VA_L / 2; st > 0; st >>= 1) {
            if (lid < st) red[lid] = fmax(red[lid], red[lid + st]);
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        float mn = fmax(m, red[0]); /* finite: the tile has at least one key */
        barrier(CLK_LOCAL_MEM_FENCE);
        float e = key < k1 ? exp(s - mn) : 0.0f;
        p[lid] = e;
        red[lid] = e;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint st = VA_L / 2; st > 0; st >>= 1) {
            if (lid < st) red[lid] += red[lid + st];
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        float alpha = exp(m - mn);
        l = l * alpha + red[0];
        int nk = min(VA_L, k1 - b);
#pragma unroll
        for (int j = 0; j < VA_DPT; j++) {
            uint d = lid + (uint)j * VA_L;
            if (d < hd) {
                float a = acc[j] * alpha;
                for (int i = 0; i < nk; i++) a += p[i] * v[((size_t)(b + i) * nkv + kh) * hd + d];
                acc[j] = a;
            }
        }
        m = mn;
        barrier(CLK_LOCAL_MEM_FENCE); /* p and red are rewritten by the next tile */
    }
    global float *o = out + ((size_t)t * nh + h) * hd;
#pragma unroll
    for (int j = 0; j < VA_DPT; j++) {
        uint d = lid + (uint)j * VA_L;
        if (d < hd) o[d] = acc[j] / l;
    }
}

#ifdef CLG_NVIDIA
/* vis_fa_HDP: vis_attn's result on f16 tensor cores (attn_prefill.cl's attn_fa, dense instead of paged): one
 * group per 64 consecutive query rows of one head (4 warps x 16), the keys of every row's range walked 32 at a
 * time with the softmax online, so each K/V block is read once per 64 rows, not once per row.
 *   - Operands from vis_norm_rope2d's f16 copies, [heads][ntok][HDP] (head dims padded with zeros to HDP, a
 *     multiple of 16); Q fragments stay in registers for the whole walk.
 *   - K and V blocks go global -> local by cp.async (K first, V while the scores are computed) into rows of
 *     HDP / 8 + 1 sixteen-byte pieces: an odd stride, so that the score fragments (8 key rows x one word) and
 *     ldmatrix's V^T rows fall in distinct banks.
 *   - Tiles ([first, end) rows, tiles[]) lie inside one image and start at its first row or 64 rows on: a row's
 *     blocks of keys and its rows' company are then the same whatever else is encoded beside it (an image gives
 *     the same rows alone or in a batch). Keys past the image's end load its last row (finite: the score is
 *     masked, its weight 0). */
#define VFA_KEYS 32

#define VFA_LOAD(dst, src, kb, HDP)                                                               \
    for (int i = lid; i < VFA_KEYS * (HDP / 8); i += 128) {                                       \
        int row = i / (HDP / 8), c = i % (HDP / 8), key = min((int)(kb) + row, kmax);              \
        cp_async16(dst + row * (HDP / 8 + 1) + c, src + (size_t)key * (HDP / 8) + c);             \
    }

#define DEFINE_VFA(HDP)                                                                           \
kernel __attribute__((reqd_work_group_size(128, 1, 1)))                                          \
void vis_fa_##HDP(global const uint *Qh, global const uint4 *Kh, global const uint4 *Vh,          \
                  global float *out, global const int *rng, global const int *tiles, uint ntok,   \
                  uint nh, uint nkv, uint hd, float scale)                                        \
{                                                                                                 \
    local uint4 ks[VFA_KEYS * (HDP / 8 + 1)], vs[VFA_KEYS * (HDP / 8 + 1)];                       \
    int lid = get_local_id(0), warp = lid / 32, lane = lid % 32, g = lane / 4, t = lane % 4;      \
    uint h = get_group_id(1), kh = h / (nh / nkv);                                                \
    uint ta = tiles[2 * get_group_id(0)], tb = tiles[2 * get_group_id(0) + 1];                    \
    uint r0 = ta + warp * 16 + g, r1 = r0 + 8;                                                    \
    int ok0 = r0 < tb, ok1 = r1 < tb;                                                             \
    int kmin = rng[2 * ta], kmax = rng[2 * ta + 1] - 1; /* the image's keys: every row's */       \
    global const uint *q0 = Qh + ((size_t)h * ntok + (ok0 ? r0 : ta)) * (HDP / 2) + t;            \
    global const uint *q1 = Qh + ((size_t)h * ntok + (ok1 ? r1 : ta)) * (HDP / 2) + t;            \
    uint qa[HDP / 16][4];                                                                         \
    for (int d = 0; d < HDP; d += 16) {                                                           \
        qa[d / 16][0] = q0[d / 2];                                                                \
        qa[d / 16][1] = q1[d / 2];                                                                \
        qa[d / 16][2] = q0[d / 2 + 4];                                                            \
        qa[d / 16][3] = q1[d / 2 + 4];                                                            \
    }                                                                                             \
    global const uint4 *kg = Kh + (size_t)kh * ntok * (HDP / 8);                                  \
    global const uint4 *vg = Vh + (size_t)kh * ntok * (HDP / 8);                                  \
    float4 o[HDP / 8];                                                                            \
    for (int n = 0; n < HDP / 8; n++) o[n] = (float4)(0.0f);                                      \
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;                                   \
    const float sl2 = scale * M_LOG2E_F, softcap = 0.0f, cap = 1.0f; /* FA_SOFTMAX's names */      \
    int lo0 = kmin, lo1 = kmin, p0 = kmax, p1 = kmax;                                             \
    local const uint *kw = (local const uint *)ks;                                                \
    VFA_LOAD(ks, kg, kmin, HDP)                                                                   \
    cp_async_commit();                                                                            \
    VFA_LOAD(vs, vg, kmin, HDP)                                                                   \
    cp_async_commit();                                                                            \
    for (int kb = kmin; kb <= kmax; kb += VFA_KEYS) {                                             \
        cp_async_wait1(); /* K of this block (V may still be on its way) */                       \
        barrier(CLK_LOCAL_MEM_FENCE);                                                             \
        float4 s[4];                                                                              \
        for (int j = 0; j < 4; j++) s[j] = (float4)(0.0f);                                        \
        for (int d = 0; d < HDP; d += 16) {                                                       \
            int c = d / 8;                                                                        \
            for (int j = 0; j < 4; j++) {                                                         \
                local const uint *kr = kw + (8 * j + g) * (HDP / 2 + 4) + t;                      \
                s[j] = mma_16816(s[j], qa[d / 16][0], qa[d / 16][1], qa[d / 16][2], qa[d / 16][3], \
                                 kr[c * 4], kr[(c + 1) * 4]);                                     \
            }                                                                                     \
        }                                                                                         \
        barrier(CLK_LOCAL_MEM_FENCE); /* every warp is done with this K */                        \
        if (kb + VFA_KEYS <= kmax) { VFA_LOAD(ks, kg, kb + VFA_KEYS, HDP) }                       \
        cp_async_commit();                                                                        \
        FA_SOFTMAX(HDP) /* attn_prefill.cl's, every row masked to the image's keys */                \
        cp_async_wait1(); /* V of this block */                                                   \
        barrier(CLK_LOCAL_MEM_FENCE);                                                             \
        for (int kk = 0; kk < 2; kk++) {                                                          \
            uint a0 = pack_h2(s[2 * kk].x, s[2 * kk].y), a1 = pack_h2(s[2 * kk].z, s[2 * kk].w);  \
            uint a2 = pack_h2(s[2 * kk + 1].x, s[2 * kk + 1].y);                                  \
            uint a3 = pack_h2(s[2 * kk + 1].z, s[2 * kk + 1].w);                                  \
            int vr = 16 * kk + (lane >> 3 & 1) * 8 + (lane & 7); /* this lane's ldmatrix row */    \
            for (int n2 = 0; n2 < HDP / 16; n2++) {                                               \
                uint b00, b01, b10, b11;                                                          \
                ldsm_x4_t(vs + vr * (HDP / 8 + 1) + 2 * n2 + (lane >> 4), &b00, &b01, &b10, &b11); \
                o[2 * n2] = mma_16816(o[2 * n2], a0, a1, a2, a3, b00, b01);                       \
                o[2 * n2 + 1] = mma_16816(o[2 * n2 + 1], a0, a1, a2, a3, b10, b11);               \
            }                                                                                     \
        }                                                                                         \
        barrier(CLK_LOCAL_MEM_FENCE); /* every warp is done with this V */                        \
        if (kb + VFA_KEYS <= kmax) { VFA_LOAD(vs, vg, kb + VFA_KEYS, HDP) }                       \
        cp_async_commit();                                                                        \
    }                                                                                             \
    l0 += shfl_xor_f(l0, 1);                                                                      \
    l0 += shfl_xor_f(l0, 2);                                                                      \
    l1 += shfl_xor_f(l1, 1);                                                                      \
    l1 += shfl_xor_f(l1, 2);                                                                      \
    global float *y0 = out + ((size_t)r0 * nh + h) * hd + 2 * t;                                  \
    global float *y1 = out + ((size_t)r1 * nh + h) * hd + 2 * t;                                  \
    for (int n = 0; n < HDP / 8; n++) {                                                           \
        if (8 * n + 2 * t >= (int)hd) continue; /* the padding */                                 \
        if (ok0) vstore2((float2)(o[n].x, o[n].y) / l0, 0, y0 + 8 * n);                           \
        if (ok1) vstore2((float2)(o[n].z, o[n].w) / l1, 0, y1 + 8 * n);                           \
    }                                                                                             \
}

DEFINE_VFA(32)
DEFINE_VFA(64)
DEFINE_VFA(80)
DEFINE_VFA(128)

#endif /* CLG_NVIDIA */

/* out[c][j] = s · Σ of the k x k rows of x whose top-left is row cell[c].x of a grid cell[c].y rows wide */
kernel void vis_avgpool(global const float *x, global float *out, global const int *cell, uint n, uint k, float s,
                        uint nout)
{
    uint j = get_global_id(0), c = get_global_id(1);
    if (j >= n || c >= nout) return;
    size_t base = (size_t)cell[2 * c], gw = (size_t)cell[2 * c + 1];
    float acc = 0.0f;
    for (uint dy = 0; dy < k; dy++)
        for (uint dx = 0; dx < k; dx++) acc += x[(base + dy * gw + dx) * n + j];
    out[(size_t)c * n + j] = acc * s;
}

/* y = min(max(x, lo), hi) over n values (y may be x) */
kernel void vis_clamp(global const float *x, global float *y, float lo, float hi, uint n)
{
    size_t i = get_global_id(0);
    if (i < n) y[i] = fmin(fmax(x[i], lo), hi);
}

/* y[r][j] = (x[r][j] - bias[j]) · scale[j] (y may be x) */
kernel void vis_standardize(global const float *x, global float *y, global const float *bias,
                            global const float *scale, uint n, uint rows)
{
    uint j = get_global_id(0), r = get_global_id(1);
    if (j >= n || r >= rows) return;
    size_t i = (size_t)r * n + j;
    y[i] = (x[i] - bias[j]) * scale[j];
}
