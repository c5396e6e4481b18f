/* logits.cl — what a choice row needs besides the pick (argmax.cl): a token mask and logit bias
 * applied in place, and log-probabilities (log-sum-exp and the top k) without downloading the row.
 *
 * The rules buffer (built by opencl/choice.c per step) holds, per constrained row, a descriptor of 4
 * ints {row, allow_off, bias_off, n_bias}: allow_off is the word offset of the row's bitset (bit i of
 * word i/32: token i allowed) or -1; bias_off the offset of n_bias (token, bias bits) pairs sorted by
 * token, one per token. */

#define LP_MAXK 20 /* ENGINE_MAX_LOGPROBS */

/* one value of a row: -inf where the mask forbids it (the mask wins over bias), else plus its bias */
kernel void logits_constrain(global float *x, uint n, global const int *rules, uint d0, uint row0)
{
    uint i = get_global_id(0), j = get_global_id(1);
    if (i >= n) return;
    global const int *d = rules + 4 * (d0 + j);
    int aoff = d[1], boff = d[2], nb = d[3];
    global float *xr = x + (size_t)(d[0] - (int)row0) * n;
    if (aoff >= 0 && !(((uint)rules[aoff + (i >> 5)] >> (i & 31)) & 1u)) { xr[i] = -INFINITY; return; }
    /* binary search of the sorted tokens: at most 9 steps for OpenAI's 300 pairs */
    int lo = 0, hi = nb;
    while (lo < hi) {
        int m = (lo + hi) >> 1, t = rules[boff + 2 * m];
        if (t == (int)i) { xr[i] += as_float(rules[boff + 2 * m + 1]); return; }
        if (t < (int)i) lo = m + 1; else hi = m;
    }
}

/* the best (value, index) of the items' candidates to every item; ties to the lower index, as argmax */
inline void lp_best(float *v, int *ix, local float *rv, local int *ri)
{
    int lid = get_local_id(0), L = get_local_size(0);
    rv[lid] = *v;
    ri[lid] = *ix;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = L / 2; s > 0; s >>= 1) {
        if (lid < s) {
            float w = rv[lid + s];
            int j = ri[lid + s];
            if (w > rv[lid] || (w == rv[lid] && j < ri[lid])) { rv[lid] = w; ri[lid] = j; }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    *v = rv[0];
    *ix = ri[0];
    barrier(CLK_LOCAL_MEM_FENCE); /* rv is free again only once every item has read it */
}

/* 1 when (v, i) ranks below the previous pick (pv, pi) and is finite enough to report (masked
 * tokens at -inf are never listed) */
inline int lp_next(float v, int i, float pv, int pi) { return v > -INFINITY && (v < pv || (v == pv && i > pi)); }

/* stage 1: group g of row j (x row rows[roff + j] - row0) over its slice: the slice's k best
 * (k rounds of "best below the last pick"), its max m and sum of exp(x - m); part p = j * ng + g
 * writes pm[p], ps[p], pv/pi[p * LP_MAXK ...] (index 0x7fffffff: no such value) */
kernel void logprobs_part(global const float *x, uint n, uint slice, global const int *rows, uint roff, uint row0,
                          uint k, global float *pm, global float *ps, global float *pv, global int *pi,
                          local float *rv, local int *ri)
{
    uint g = get_group_id(0), j = get_group_id(1), ng = get_num_groups(0);
    int lid = get_local_id(0), L = get_local_size(0);
    global const float *xr = x + (size_t)(rows[roff + j] - (int)row0) * n;
    uint lo = g * slice, hi = min(n, lo + slice);
    size_t p = (size_t)j * ng + g;
    float tv = INFINITY, m = -INFINITY;
    int ti = -1;
    for (uint t = 0; t < k; t++) {
        float best = -INFINITY;
        int bi = 0x7fffffff;
        for (uint i = lo + lid; i < hi; i += L) {
            float v = xr[i];
            if (lp_next(v, (int)i, tv, ti) && (v > best || (v == best && (int)i < bi))) { best = v; bi = (int)i; }
        }
        lp_best(&best, &bi, rv, ri);
        tv = best;
        ti = bi;
        if (t == 0) m = best;
        if (lid == 0) { pv[p * LP_MAXK + t] = best; pi[p * LP_MAXK + t] = bi; }
    }
    /* compensated sum: a CPU item adds thousands of terms serially */
    float s = 0, c = 0;
    if (m > -INFINITY)
        for (uint i = lo + lid; i < hi; i += L) {
            float y = exp(xr[i] - m) - c, u = s + y;
            c = (u - s) - y;
            s = u;
        }
    rv[lid] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int h = L / 2; h > 0; h >>= 1) {
        if (lid < h) rv[lid] += rv[lid + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) { pm[p] = m; ps[p] = rv[0]; }
}

/* stage 2: one group per row merges its nparts parts: lse = M + log(sum of ps * exp(pm - M)), then the
 * k best of the parts' candidates; out row j: LP_MAXK log-probabilities (value - lse) then LP_MAXK
 * ids as int bits (-1 past the finite values) */
kernel void logprobs_final(global const float *pm, global const float *ps, global const float *pv,
                           global const int *pi, uint nparts, uint k, global float *out, local float *rv,
                           local int *ri)
{
    uint j = get_group_id(0);
    int lid = get_local_id(0), L = get_local_size(0);
    size_t p0 = (size_t)j * nparts;
    float M = -INFINITY;
    for (uint q = 0; q < nparts; q++) M = fmax(M, pm[p0 + q]);
    float S = 0;
    for (uint q = 0; q < nparts; q++)
        if (pm[p0 + q] > -INFINITY) S += ps[p0 + q] * exp(pm[p0 + q] - M);
    float lse = M + log(S);
    global float *o = out + (size_t)j * 2 * LP_MAXK;
    global int *oi = (global int *)(o + LP_MAXK);
    float tv = INFINITY;
    int ti = -1;
    uint nc = nparts * LP_MAXK;
    for (uint t = 0; t < k; t++) {
        float best = -INFINITY;
        int bi = 0x7fffffff;
        for (uint c = lid; c < nc; c += L) {
            uint q = c / LP_MAXK, r = c % LP_MAXK;
            if (r >= k) continue;
            float v = pv[(p0 + q) * LP_MAXK + r];
            int i = pi[(p0 + q) * LP_MAXK + r];
            if (i != 0x7fffffff && lp_next(v, i, tv, ti) && (v > best || (v == best && i < bi))) { best = v; bi = i; }
        }
        lp_best(&best, &bi, rv, ri);
        tv = best;
        ti = bi;
        if (lid == 0) {
            o[t] = bi == 0x7fffffff ? -INFINITY : best - lse;
            oi[t] = bi == 0x7fffffff ? -1 : bi;
        }
    }
}

/* ---- sampled rows: the best values of a row, so the draw reads kilobytes, not the row (opencl/draw.c) */

#define SMP_MAXK 2048 /* OPS_SAMPLE_MAXK */

/* a float's order as an unsigned key (NaN lowest) and back */
inline uint smp_key(float v)
{
    uint u = as_uint(v);
    return isnan(v) ? 0u : (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
inline float smp_val(uint k) { return as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k); }

/* One group per row j (x row desc[4j] - row0): its desc[4j + 1] best values, ties to the lower index,
 * sorted best first into out[(d0 + j) * 2 * SMP_MAXK ...] (values, then indices as int bits); then the row's
 * values at the desc[4j + 3] tokens listed from pen[desc[4j + 2]] into pval at the same offset. The
 * k-th best key by radix select (four 8-bit passes of a local histogram), the keys above it and as many
 * equal to it as still needed (the lowest indices, in order, unless every one is taken or it is -inf,
 * whose tokens weigh nothing in a draw), then a bitonic sort in local memory. */
kernel void sample_topk(global const float *x, uint n, global const int *desc, uint d0, uint row0,
                        global const int *pen, global float *pval, global uint *out, local uint *hist,
                        local uint *ck, local int *ci, local uint *sh)
{
    uint j = get_group_id(0), lid = get_local_id(0), L = get_local_size(0);
    global const int *d = desc + 4 * (d0 + j);
    global const float *xr = x + (size_t)(d[0] - (int)row0) * n;
    uint K = min(min((uint)d[1], n), (uint)SMP_MAXK), prefix = 0, mask = 0, need = K, ties = 0;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (uint b = lid; b < 256; b += L) hist[b] = 0;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint i = lid; i < n; i += L) {
            uint key = smp_key(xr[i]);
            if ((key & mask) == prefix) atomic_inc(&hist[(key >> shift) & 255u]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid == 0) {
            uint c = 0, b = 255;
            while (b > 0 && c + hist[b] < need) c += hist[b--];
            sh[0] = b; sh[1] = need - c; sh[2] = hist[b];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        prefix |= sh[0] << shift;
        mask |= 255u << shift;
        need = sh[1];
        ties = sh[2];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    uint T = prefix, above = K - need;
    int any_eq = ties == need || T == smp_key(-INFINITY);
    if (lid == 0) sh[3] = sh[4] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint i = lid; i < n; i += L) {
        uint key = smp_key(xr[i]);
        if (key > T) {
            uint p = atomic_inc(&sh[3]);
            ck[p] = key;
            ci[p] = (int)i;
        } else if (key == T && any_eq) {
            uint p = atomic_inc(&sh[4]);
            if (p < need) { ck[above + p] = key; ci[above + p] = (int)i; }
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (!any_eq && lid == 0) /* finite ties past the cut: rare, so one item takes the lowest indices */
        for (uint i = 0, t = 0; i < n && t < need; i++)
            if (smp_key(xr[i]) == T) { ck[above + t] = T; ci[above + t] = (int)i; t++; }
    uint M = 1;
    while (M < K) M <<= 1;
    for (uint i = K + lid; i < M; i += L) { ck[i] = 0; ci[i] = 0x7fffffff; }
    barrier(CLK_LOCAL_MEM_FENCE);
    /* bitonic sort, best first: a before b when its key is higher, or equal with the lower index */
    for (uint size = 2; size <= M; size <<= 1)
        for (uint stride = size >> 1; stride > 0; stride >>= 1) {
            for (uint t = lid; t < M / 2; t += L) {
                uint a = 2 * stride * (t / stride) + (t % stride), b = a + stride;
                int b_first = ck[b] > ck[a] || (ck[b] == ck[a] && ci[b] < ci[a]);
                if (((a & size) == 0) == b_first) {
                    uint tk = ck[a]; ck[a] = ck[b]; ck[b] = tk;
                    int ti = ci[a]; ci[a] = ci[b]; ci[b] = ti;
                }
            }
            barrier(CLK_LOCAL_MEM_FENCE);
        }
    global uint *o = out + (size_t)(d0 + j) * 2 * SMP_MAXK;
    for (uint i = lid; i < K; i += L) {
        o[i] = as_uint(smp_val(ck[i]));
        o[SMP_MAXK + i] = (uint)ci[i];
    }
    for (int i = (int)lid; i < d[3]; i += (int)L) pval[d[2] + i] = xr[pen[d[2] + i]];
}
