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

/* One item per (head, row) of x [ntok][nh][hd]: norm mode 1 x = x / rms(x) · w, 2 without weight, 0 none; then
 * with rope the axial RoPE of transformers' Gemma4VisionRotaryEmbedding: the first half of the head rotated by
 * pos.x, the second by pos.y, in each half the NEOX pairs (i, i + hd/4) at frequency theta^(-4i/hd). */
kernel void vis_norm_rope2d(global float *x, uint nh, uint hd, global const float *w, uint mode, float eps,
                            uint rope, global const int *pos, float theta, uint ntok)
{
    uint h = get_global_id(0), t = get_global_id(1);
    if (h >= nh || t >= ntok) return;
    global float *r = x + ((size_t)t * nh + h) * hd;
    if (mode) {
        float ss = 0.0f;
        for (uint i = 0; i < hd; i++) ss += r[i] * r[i];
        float s = rsqrt(ss / (float)hd + eps);
        for (uint i = 0; i < hd; i++) r[i] = r[i] * s * (mode == 1 ? w[i] : 1.0f);
    }
    if (!rope) return;
    uint hw = hd / 2, q = hd / 4;
    for (uint part = 0; part < 2; part++) {
        float p = (float)pos[2 * t + part];
        global float *s = r + part * hw;
        for (uint i = 0; i < q; i++) {
            float inv = pow(theta, -(float)(2 * i) / (float)hw);
            float c = cos(p * inv), sn = sin(p * inv);
            float a = s[i], b = s[i + q];
            s[i] = a * c - b * sn;
            s[i + q] = b * c + a * sn;
        }
    }
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
