/* 00_common.cl — shared helpers for every kernel file (the files are concatenated in name order
 * into one program). Portable OpenCL C 1.2: halves are only loaded/stored, math is in float. */

#define QK 32 /* every supported type dequantizes in sub-blocks of 32 values */

inline float ld_half(global const uchar *p) { return vload_half(0, (global const half *)p); }

inline uint ld_u32(global const uchar *p)
{
    return (uint)p[0] | ((uint)p[1] << 8) | ((uint)p[2] << 16) | ((uint)p[3] << 24);
}

/* sum of v over the work-group; red has get_local_size(0) floats. All items get the result. */
inline float wg_sum(float v, local float *red)
{
    int lid = get_local_id(0), n = get_local_size(0);
    red[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = n / 2; s > 0; s >>= 1) {
        if (lid < s) red[lid] += red[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float r = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

inline float wg_max(float v, local float *red)
{
    int lid = get_local_id(0), n = get_local_size(0);
    red[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = n / 2; s > 0; s >>= 1) {
        if (lid < s) red[lid] = fmax(red[lid], red[lid + s]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float r = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}
