/* moe.cl — mixture of experts: routing (softmax over all experts, top-k, renormalised, times the
 * per-expert scale), expert products that read only the selected experts' rows (any device: one
 * item per output, or gemv.cl's layout for decode; NVIDIA: mvqe_T on int8 X for decode, and the
 * grouping of (token, slot) pairs by expert for mma_f16.cl's and tiles_f16.cl's expert tiles), and
 * the weighted sum of the experts' outputs. */

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
 * the maxima and sums are shuffles, so the n_used picks take no barriers (the group version takes
 * log2(n_exp) per pick) */
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

/* act[s][i] = gelu(gu[s][i]) * gu[s][f + i] (gate rows first, then up rows); fn 2: silu (Qwen), else gelu */
kernel void g4_geglu_split(global const float *gu, uint f, global float *act, uint nsel, uint fn)
{
    uint i = get_global_id(0), s = get_global_id(1);
    if (i >= f || s >= nsel) return;
    float x = gu[(size_t)s * 2 * f + i];
    act[(size_t)s * f + i] = glu_act(x, fn) * gu[(size_t)s * 2 * f + f + i];
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

#ifdef CLG_NVIDIA
/* Expert products for decode on int8 X (NVIDIA): gemv_q8.cl's pieces (types_q8.cl) and staged
 * X (quant_q8.cl). Virtual rows v = slot group *
 * rows_e + r; the slots of group gg are gg * nj .. gg * nj + nj - 1, slot s's weights are expert
 * sel[s]'s rows and its X row is (s / xdiv) of X (ldx apart), and
 *   Y[v] = sum over those slots of (wsel ? wsel[s] : 1) * W_sel[s][r] . X_s.
 * Up/gate: nj = 1, xdiv = n_used (one token's X for each of its experts). Down: nj = n_used,
 * xdiv = 1, X = the gate|up rows with geglu on, weights wsel: the weighted sum over the token's
 * experts without a combine pass (gate and up: k values each per row). A group's rpg rows lie in one
 * slot group (rpg divides rows_e), so it quantizes only that group's nj X rows; lanes stride over
 * (slot, piece) pairs. */
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

#define DEFINE_MVQE_ID(T, id, MMA) DEFINE_MVQE(T)
CLG_TYPES_Q8(DEFINE_MVQE_ID)
#endif /* CLG_NVIDIA */
