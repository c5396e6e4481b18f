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
