/* 00_common.cl — shared helpers for every kernel file (the files are concatenated in name order
 * into one program). Portable OpenCL C 1.2: halves are only loaded/stored, math is in float. */

#define QK 32 /* every supported type dequantizes in sub-blocks of 32 values */

inline float ld_half(global const uchar *p) { return vload_half(0, (global const half *)p); }

inline uint ld_u32(global const uchar *p)
{
    return (uint)p[0] | ((uint)p[1] << 8) | ((uint)p[2] << 16) | ((uint)p[3] << 24);
}

/* sum of v over the work-group; red has get_local_size(0) floats. All items get the result. */
/* GELU, tanh approximation (Gemma's gelu_pytorch_tanh) */
inline float gelu_tanh(float x)
{
    const float k = 0.7978845608028654f; /* sqrt(2/pi) */
    return 0.5f * x * (1.0f + tanh(k * (x + 0.044715f * x * x * x)));
}

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

/* two floats to one f16x2 register, lo in the low half (PTX cvt.rn.f16x2.f32 puts its first
 * source operand in the upper half) */
inline uint pack_h2(float lo, float hi)
{
    uint r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

/* tensor-core product D = A (16x16 f16) . B (16x8 f16) + C (f32). Not volatile: it is pure, so the
 * compiler may schedule loads across it. Here, not in 26_mma.cl, because the tile products
 * (28_mmt.cl) build in a program of their own (runtime.c). */
inline float4 mma_16816(float4 c, uint a0, uint a1, uint a2, uint a3, uint b0, uint b1)
{
    float d0, d1, d2, d3;
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%10,%11,%12,%13};"
        : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(c.x), "f"(c.y), "f"(c.z), "f"(c.w));
    return (float4)(d0, d1, d2, d3);
}

/* 16 bytes global -> local without registers; a local pointer converts to its shared-window
 * address, which is what cp.async's destination takes */
inline void cp_async16(local uint4 *dst, global const uint4 *src)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"((uint)(size_t)dst), "l"((ulong)src) : "memory");
}
inline void cp_async_commit(void) { asm volatile("cp.async.commit_group;" ::: "memory"); }
/* wait until at most one committed group of this item is still in flight */
inline void cp_async_wait1(void) { asm volatile("cp.async.wait_group 1;" ::: "memory"); }
inline void cp_async_wait0(void) { asm volatile("cp.async.wait_group 0;" ::: "memory"); }
/* the 128-byte L2 line holding p fetched from memory ahead of its load (no register, no wait) */
inline void prefetch_l2(global const void *p) { asm volatile("prefetch.global.L2 [%0];" ::"l"((ulong)p)); }
/* the warp's lanes meet here, and their local-memory writes (cp.async ones once waited on) become
 * visible to each other */
inline void bar_warp(void) { asm volatile("bar.warp.sync -1;" ::: "memory"); }
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
