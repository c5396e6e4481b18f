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

#ifdef CLG_NVIDIA
/* butterfly exchange inside a warp (PTX shfl.sync): no local memory, no barrier */
inline float shfl_xor_f(float v, int m)
{
    uint r;
    asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(r) : "r"(as_uint(v)), "r"(m));
    return as_float(r);
}
#endif

/* sum over aligned segments of n items (n a power of two); each item gets its segment's sum.
 * Every item of the group must call it (barriers on the portable path); red has group-size floats. */
inline float seg_sum(float v, int n, local float *red)
{
#ifdef CLG_NVIDIA
    if (n <= 32) {
        for (int m = n / 2; m > 0; m >>= 1) v += shfl_xor_f(v, m);
        return v;
    }
#endif
    int lid = get_local_id(0), sub = lid % n;
    red[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = n / 2; s > 0; s >>= 1) {
        if (sub < s) red[lid] += red[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    v = red[lid - sub];
    barrier(CLK_LOCAL_MEM_FENCE);
    return v;
}
