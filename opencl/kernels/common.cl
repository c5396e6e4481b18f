/* common.cl — helpers for every kernel file (the files build in the order of manifest.def into
 * one program). Portable OpenCL C 1.2: halves are only loaded and stored, math is in float; on
 * NVIDIA the reductions use ptx.cl's shuffles. */

inline float ld_half(global const uchar *p) { return vload_half(0, (global const half *)p); }

inline uint ld_u32(global const uchar *p)
{
    return (uint)p[0] | ((uint)p[1] << 8) | ((uint)p[2] << 16) | ((uint)p[3] << 24);
}

/* GELU, tanh approximation (Gemma's gelu_pytorch_tanh) */
inline float gelu_tanh(float x)
{
    const float k = 0.7978845608028654f; /* sqrt(2/pi) */
    return 0.5f * x * (1.0f + tanh(k * (x + 0.044715f * x * x * x)));
}

/* a gated unit's activation of the gate x: fn 1 GELU-tanh, 2 SiLU (ops.h's OPS_ACT_*) */
inline float glu_act(float x, uint fn) { return fn == 2 ? x / (1.0f + exp(-x)) : gelu_tanh(x); }

/* order this work-item's global writes before its later accesses device-wide (for a counter that
 * tells the last work-group of a set it may read the others' results) */
inline void fence_device(void)
{
#ifdef CLG_NVIDIA
    asm volatile("membar.gl;" ::: "memory");
#else
    mem_fence(CLK_GLOBAL_MEM_FENCE);
#endif
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

/* Sum of a float2 over the work-group. On NVIDIA: warp shuffles, one partial per warp through local
 * memory, one barrier pair (local size a multiple of 32); elsewhere a tree (power-of-two size). */
inline float2 wg_sum2(float2 v, local float2 *red)
{
    uint lid = get_local_id(0), L = get_local_size(0);
#ifdef CLG_NVIDIA
    for (int m = 16; m > 0; m >>= 1) {
        v.x += shfl_xor_f(v.x, m);
        v.y += shfl_xor_f(v.y, m);
    }
    if ((lid & 31) == 0) red[lid >> 5] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    /* every warp adds the partials by shuffles: one local load per lane, not one per warp */
    v = (lid & 31) < (L >> 5) ? red[lid & 31] : (float2)(0.0f);
    for (int m = 16; m > 0; m >>= 1) {
        v.x += shfl_xor_f(v.x, m);
        v.y += shfl_xor_f(v.y, m);
    }
#else
    red[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = L / 2; s > 0; s >>= 1) {
        if (lid < s) red[lid] += red[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    v = red[0];
#endif
    barrier(CLK_LOCAL_MEM_FENCE);
    return v;
}

/* sum over aligned segments of n items (n a power of two); each item gets its segment's sum.
 * Every item of the group must call it (barriers on the portable path); red has group-size floats. */
inline float seg_sum(float v, int n, local float *red)
{
#ifdef CLG_NVIDIA
    for (int m = (n < 32 ? n : 32) / 2; m > 0; m >>= 1) v += shfl_xor_f(v, m);
    if (n <= 32) return v;
    /* whole warps: their sums meet in local memory behind one barrier, not log2(n) */
    int id = get_local_id(0), w0 = (id - id % n) / 32;
    if (id % 32 == 0) red[id / 32] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    v = 0.0f;
    for (int w = 0; w < n / 32; w++) v += red[w0 + w];
    barrier(CLK_LOCAL_MEM_FENCE);
    return v;
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
