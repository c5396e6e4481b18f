/* argmax.cl — the greedy pick of a batch's logits rows, on the device. */

/* argmax in two stages so a 262k vocabulary spreads over many work-groups:
 * stage 1: group g of row r reduces its slice to (value, index) in part[r][g];
 * stage 2: one group per row reduces the nparts pairs. Ties go to the lowest index. */
inline void argmax_reduce(local float *rv, local int *ri)
{
    int lid = get_local_id(0), L = get_local_size(0);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = L / 2; s > 0; s >>= 1) {
        if (lid < s) {
            float v = rv[lid + s];
            int j = ri[lid + s];
            if (v > rv[lid] || (v == rv[lid] && j < ri[lid])) { rv[lid] = v; ri[lid] = j; }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

kernel void argmax_part(global const float *x, uint n, uint slice, global float *pv, global int *pi,
                        local float *rv, local int *ri)
{
    uint g = get_group_id(0), r = get_group_id(1), ng = get_num_groups(0);
    int lid = get_local_id(0), L = get_local_size(0);
    global const float *xr = x + (size_t)r * n;
    uint lo = g * slice, hi = min(n, lo + slice);
    float best = -INFINITY;
    int bi = 0x7fffffff;
    for (uint i = lo + lid; i < hi; i += L) {
        float v = xr[i];
        if (v > best) { best = v; bi = (int)i; }
    }
    rv[lid] = best;
    ri[lid] = bi;
    argmax_reduce(rv, ri);
    if (lid == 0) { pv[r * ng + g] = rv[0]; pi[r * ng + g] = ri[0]; }
}

kernel void argmax_final(global const float *pv, global const int *pi, uint nparts, global int *out,
                         local float *rv, local int *ri)
{
    uint r = get_group_id(0);
    int lid = get_local_id(0), L = get_local_size(0);
    float best = -INFINITY;
    int bi = 0x7fffffff;
    for (uint i = lid; i < nparts; i += L) {
        float v = pv[r * nparts + i];
        int j = pi[r * nparts + i];
        if (v > best || (v == best && j < bi)) { best = v; bi = j; }
    }
    rv[lid] = best;
    ri[lid] = bi;
    argmax_reduce(rv, ri);
    if (lid == 0) out[r] = ri[0] == 0x7fffffff ? 0 : ri[0];
}
