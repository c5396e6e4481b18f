/* 60_gemma4.cl — Gemma 4 extras: products with any row length (f32/f16 rows need not hold whole
 * 32-value sub-blocks), MoE routing (softmax over all experts, top-k, renormalised, times the
 * per-expert scale), expert products that read only the selected experts' rows, and the
 * per-layer-embedding gate. */

/* dot of one weight row of k values (any supported type) with x */
inline float g4_dot(uint type, global const uchar *row, uint k, global const float *x)
{
    float acc = 0.0f;
    if (k % 32 == 0) {
        for (uint sb = 0; sb < k / 32; sb++) {
            float w[32];
            deq32_any(type, row, (int)sb, w);
            for (int i = 0; i < 32; i++) acc += w[i] * x[sb * 32 + i];
        }
    } else if (type == 0) {
        global const float *r = (global const float *)row;
        for (uint i = 0; i < k; i++) acc += r[i] * x[i];
    } else if (type == 1) {
        for (uint i = 0; i < k; i++) acc += vload_half(i, (global const half *)row) * x[i];
    } else {
        acc = NAN;
    }
    return acc;
}

/* Y[t][r] (ldy) = W[r] . X[t] (ldx): one item per output */
kernel void g4_mv_any(global const uchar *W, uint type, uint row_bytes, uint n_rows, uint k,
                      global const float *X, uint ldx, global float *Y, uint ldy, uint ntok)
{
    uint r = get_global_id(0), t = get_global_id(1);
    if (r >= n_rows || t >= ntok) return;
    Y[(size_t)t * ldy + r] = g4_dot(type, W + (size_t)r * row_bytes, k, X + (size_t)t * ldx);
}

/* per token (one work-group, an item per expert, L >= n_exp): p = softmax(z) over n_exp, the
 * n_used largest (ties: lower index first), renormalised over those, times exp_scale[e] */
kernel void g4_router_topk(global const float *z, uint n_exp, uint n_used, global const float *exp_scale,
                           global int *sel, global float *wsel, uint ntok, local float *lv, local int *li)
{
    uint t = get_group_id(0);
    int lid = get_local_id(0), L = get_local_size(0);
    global const float *zt = z + (size_t)t * n_exp;
    float v = lid < (int)n_exp ? zt[lid] : -INFINITY;
    float mx = wg_max(v, lv);
    float sum = wg_sum(lid < (int)n_exp ? exp(v - mx) : 0.0f, lv);
    float cur = v, wsum = 0.0f;
    for (uint j = 0; j < n_used; j++) {
        lv[lid] = cur;
        li[lid] = lid;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int s = L / 2; s > 0; s >>= 1) {
            if (lid < s) {
                float a = lv[lid], b = lv[lid + s];
                int ia = li[lid], ib = li[lid + s];
                if (b > a || (b == a && ib < ia)) { lv[lid] = b; li[lid] = ib; }
            }
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        int best = li[0];
        float bv = lv[0];
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid == best) cur = -INFINITY; /* taken */
        float p = exp(bv - mx) / sum;
        wsum += p;
        if (lid == 0) {
            sel[(size_t)t * n_used + j] = best;
            wsel[(size_t)t * n_used + j] = p;
        }
    }
    if (lid == 0)
        for (uint j = 0; j < n_used; j++) {
            size_t i = (size_t)t * n_used + j;
            wsel[i] = wsel[i] / wsum * exp_scale[sel[i]];
        }
}

#ifdef CLG_NVIDIA
/* g4_router_topk in one warp per token (NVIDIA, n_exp <= 256): each lane holds experts lane + 32i,
 * the maxima and sums are shuffles, so the n_used picks take no barriers (the group version's
 * log2(n_exp) barriers per pick made it ~18 us per launch) */
kernel __attribute__((reqd_work_group_size(32, 1, 1)))
void g4_router_topk_w(global const float *z, uint n_exp, uint n_used, global const float *exp_scale,
                      global int *sel, global float *wsel, uint ntok)
{
    uint t = get_group_id(0);
    int lane = get_local_id(0);
    global const float *zt = z + (size_t)t * n_exp;
    float v[8];
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        int e = lane + 32 * i;
        v[i] = e < (int)n_exp ? zt[e] : -INFINITY;
        mx = fmax(mx, v[i]);
    }
    for (int m = 16; m > 0; m >>= 1) mx = fmax(mx, shfl_xor_f(mx, m));
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; i++) sum += v[i] > -INFINITY ? exp(v[i] - mx) : 0.0f;
    for (int m = 16; m > 0; m >>= 1) sum += shfl_xor_f(sum, m);
    float wsum = 0.0f, pj = 0.0f;
    int ej = 0;
    for (uint j = 0; j < n_used; j++) {
        float bv = -INFINITY;
        int bi = 0x7fffffff;
#pragma unroll
        for (int i = 0; i < 8; i++) /* lane-local best; indices rise with i, so > keeps the lowest on ties */
            if (v[i] > bv) { bv = v[i]; bi = lane + 32 * i; }
        for (int m = 16; m > 0; m >>= 1) {
            float ov = shfl_xor_f(bv, m);
            int oi = as_int(shfl_xor_f(as_float(bi), m));
            if (ov > bv || (ov == bv && oi < bi)) { bv = ov; bi = oi; }
        }
#pragma unroll
        for (int i = 0; i < 8; i++)
            if (lane + 32 * i == bi) v[i] = -INFINITY; /* taken */
        float p = exp(bv - mx) / sum;
        wsum += p;
        if (lane == (int)j) { ej = bi; pj = p; } /* lane j keeps pick j */
    }
    if (lane < (int)n_used) {
        size_t i = (size_t)t * n_used + lane;
        sel[i] = ej;
        wsel[i] = pj / wsum * exp_scale[ej];
    }
}
#endif

/* gu[t*n_used + j][r] = W_e[r] . X[t], e = sel[t*n_used + j]; W holds n_exp experts of rows_e rows */
kernel void g4_moe_up(global const uchar *W, uint type, uint row_bytes, uint rows_e, uint k,
                      global const float *X, uint ldx, global const int *sel, uint n_used,
                      global float *gu, uint nsel)
{
    uint r = get_global_id(0), s = get_global_id(1);
    if (r >= rows_e || s >= nsel) return;
    uint t = s / n_used;
    global const uchar *row = W + ((size_t)sel[s] * rows_e + r) * row_bytes;
    gu[(size_t)s * rows_e + r] = g4_dot(type, row, k, X + (size_t)t * ldx);
}

/* act[s][i] = gelu(gu[s][i]) * gu[s][f + i] (gate rows first, then up rows) */
kernel void g4_geglu_split(global const float *gu, uint f, global float *act, uint nsel)
{
    uint i = get_global_id(0), s = get_global_id(1);
    if (i >= f || s >= nsel) return;
    act[(size_t)s * f + i] = gelu_tanh(gu[(size_t)s * 2 * f + i]) * gu[(size_t)s * 2 * f + f + i];
}

/* Y[t][r] = sum_j wsel[t,j] * W_e[r] . act[t,j], e = sel[t,j]; W holds experts of rows_e rows of k */
kernel void g4_moe_down(global const uchar *W, uint type, uint row_bytes, uint rows_e, uint k,
                        global const float *act, global const int *sel, global const float *wsel, uint n_used,
                        global float *Y, uint ntok)
{
    uint r = get_global_id(0), t = get_global_id(1);
    if (r >= rows_e || t >= ntok) return;
    float acc = 0.0f;
    for (uint j = 0; j < n_used; j++) {
        size_t s = (size_t)t * n_used + j;
        global const uchar *row = W + ((size_t)sel[s] * rows_e + r) * row_bytes;
        acc += wsel[s] * g4_dot(type, row, k, act + s * k);
    }
    Y[(size_t)t * rows_e + r] = acc;
}

/* g[t][i] = gelu(g[t][i]) * ple[t][il*p + i]; ple rows hold n_layer*p values */
kernel void g4_ple_gate(global float *g, global const float *ple, uint p, uint row, uint il, uint ntok)
{
    uint i = get_global_id(0), t = get_global_id(1);
    if (i >= p || t >= ntok) return;
    size_t gi = (size_t)t * p + i;
    g[gi] = gelu_tanh(g[gi]) * ple[(size_t)t * row + (size_t)il * p + i];
}

/* Expert products for decode (a few tokens): laid out as mv4_T (tpr items per segment, MV_R
 * consecutive rows per segment, warp shuffles on NVIDIA), each segment's rows inside one selected
 * expert; the unit loop is mv4_T's (MV_ROWS) with one token. The host uses these when rows_e is a
 * multiple of MV_R and k of 32. */

/* gu[s][r] = W_e[r] . X[t] for s = t * n_used + j, e = sel[s]: virtual rows s * rows_e + r */
kernel void g4_moe_up_mv(global const uchar *W, uint type, uint row_bytes, uint rows_e, uint k,
                         global const float *X, uint ldx, global const int *sel, uint n_used,
                         global float *gu, uint nsel, uint tpr, local float *red)
{
    int lid = get_local_id(0), L = get_local_size(0), sub = lid % (int)tpr;
    uint v0 = (get_group_id(0) * (L / tpr) + lid / tpr) * MV_R;
    int live = v0 < nsel * rows_e; /* no early return: the reduction may use barriers */
    uint s = live ? v0 / rows_e : 0, r0 = v0 % rows_e;
    global const uchar *row0 = W + ((size_t)sel[s] * rows_e + r0) * row_bytes;
    float acc[MV_R][4];
    for (int i = 0; i < MV_R; i++) acc[i][0] = 0.0f;
    int nu = live ? (int)(k / 8) : 0;
    MV_ROWS(deq8_any(type, row0 + (size_t)i * row_bytes, u >> 2, u & 3, &lo[i], &hi[i]),
            X + (size_t)(s / n_used) * ldx, 0, 1);
    for (int i = 0; i < MV_R; i++) {
        float v = seg_sum(acc[i][0], (int)tpr, red);
        if (sub == 0 && live) gu[(size_t)s * rows_e + r0 + i] = v;
    }
}

/* Y[t][r] = sum_j wsel[t,j] * W_e[r] . act[t,j], e = sel[t,j]: virtual rows t * rows_e + r */
kernel void g4_moe_down_mv(global const uchar *W, uint type, uint row_bytes, uint rows_e, uint k,
                           global const float *act, global const int *sel, global const float *wsel,
                           uint n_used, global float *Y, uint ntok, uint tpr, local float *red)
{
    int lid = get_local_id(0), L = get_local_size(0), sub = lid % (int)tpr;
    uint v0 = (get_group_id(0) * (L / tpr) + lid / tpr) * MV_R;
    int live = v0 < ntok * rows_e;
    uint t = live ? v0 / rows_e : 0, r0 = v0 % rows_e;
    float tot[MV_R];
    for (int i = 0; i < MV_R; i++) tot[i] = 0.0f;
    int nu = live ? (int)(k / 8) : 0;
    for (uint j = 0; j < n_used; j++) {
        size_t s = (size_t)t * n_used + j;
        global const uchar *row0 = W + ((size_t)sel[s] * rows_e + r0) * row_bytes;
        float acc[MV_R][4];
        for (int i = 0; i < MV_R; i++) acc[i][0] = 0.0f;
        MV_ROWS(deq8_any(type, row0 + (size_t)i * row_bytes, u >> 2, u & 3, &lo[i], &hi[i]), act + s * k, 0, 1);
        float ws = wsel[s];
        for (int i = 0; i < MV_R; i++) tot[i] += ws * acc[i][0];
    }
    for (int i = 0; i < MV_R; i++) {
        float v = seg_sum(tot[i], (int)tpr, red);
        if (sub == 0 && live) Y[(size_t)t * rows_e + r0 + i] = v;
    }
}

/* Group the (token, slot) pairs by expert for the tensor-core expert products (one work-group):
 * ord = [offs[0..n_exp] | n_tiles | pairs[nsel] sorted by expert | tiles[2 * n_tiles]], a tile
 * being (expert, first index into pairs) of at most tt pairs. Order inside an expert follows the
 * atomics, which changes nothing: every pair's outputs are computed on their own. */
kernel void g4_moe_sort(global const int *sel, uint nsel, uint n_exp, uint tt, global int *ord, local int *cnt,
                        local int *cur)
{
    int lid = get_local_id(0), L = get_local_size(0);
    for (int e = lid; e < (int)n_exp; e += L) cnt[e] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = lid; s < nsel; s += L) atomic_inc(&cnt[sel[s]]);
    barrier(CLK_LOCAL_MEM_FENCE);
    global int *pairs = ord + n_exp + 2, *tiles = pairs + nsel;
    if (lid == 0) {
        int off = 0, nt = 0;
        for (uint e = 0; e < n_exp; e++) {
            int c = cnt[e];
            ord[e] = off;
            cur[e] = off;
            for (int st = 0; st < c; st += (int)tt) {
                tiles[2 * nt] = (int)e;
                tiles[2 * nt + 1] = off + st;
                nt++;
            }
            off += c;
        }
        ord[n_exp] = off;
        ord[n_exp + 1] = nt;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = lid; s < nsel; s += L) pairs[atomic_inc(&cur[sel[s]])] = (int)s;
}

/* Y[t][r] = sum_j wsel[t, j] * yd[t * n_used + j][r] (yd: the per-pair down products) */
kernel void g4_moe_combine(global const float *yd, global const float *wsel, uint n_used, uint h, global float *Y,
                           uint ntok)
{
    uint r = get_global_id(0), t = get_global_id(1);
    if (r >= h || t >= ntok) return;
    float acc = 0.0f;
    for (uint j = 0; j < n_used; j++) {
        size_t s = (size_t)t * n_used + j;
        acc += wsel[s] * yd[s * h + r];
    }
    Y[(size_t)t * h + r] = acc;
}
