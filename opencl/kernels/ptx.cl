/* ptx.cl — inline-PTX wrappers, NVIDIA only (the runtime builds with -DCLG_NVIDIA=1 there): warp
 * shuffles, f16 conversions, tensor-core products (f16 and int8 mma.sync), dp4a, cp.async copies,
 * the L2 prefetch, ldmatrix. The kernel files call these rather than writing asm themselves. */

#ifdef CLG_NVIDIA
/* butterfly exchange inside a warp (PTX shfl.sync): no local memory, no barrier */
inline float shfl_xor_f(float v, int m)
{
    uint r;
    asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(r) : "r"(as_uint(v)), "r"(m));
    return as_float(r);
}

inline int shfl_xor_i(int v, int m) { return as_int(shfl_xor_f(as_float(v), m)); }


/* two floats to one f16x2 register, lo in the low half (PTX cvt.rn.f16x2.f32 puts its first
 * source operand in the upper half) */
inline uint pack_h2(float lo, float hi)
{
    uint r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

/* f16 bits (low half of u) to float */
inline float h2f(uint u)
{
    float r;
    ushort h = (ushort)u;
    asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(h));
    return r;
}

/* f32 rounded through f16, the cache's precision (round to nearest even, as vstore_half) */
inline float round_f16(float x)
{
    float y;
    asm("{ .reg .b16 h; cvt.rn.f16.f32 h, %1; cvt.f32.f16 %0, h; }" : "=f"(y) : "f"(x));
    return y;
}

/* tensor-core product D = A (16x16 f16) . B (16x8 f16) + C (f32). Not volatile: it is pure, so the
 * compiler may schedule loads across it. */
inline float4 mma_16816(float4 c, uint a0, uint a1, uint a2, uint a3, uint b0, uint b1)
{
    float d0, d1, d2, d3;
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%10,%11,%12,%13};"
        : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(c.x), "f"(c.y), "f"(c.z), "f"(c.w));
    return (float4)(d0, d1, d2, d3);
}

/* D = A (16 x 32, AT = u8 or s8) . B (32 x 8, s8), int32 */
#define DEFINE_MMA8(AT)                                                                           \
inline int4 mma8_##AT(uint a0, uint a1, uint a2, uint a3, uint b0, uint b1)                       \
{                                                                                                 \
    int d0, d1, d2, d3;                                                                           \
    asm("mma.sync.aligned.m16n8k32.row.col.s32." #AT ".s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "     \
        "{%8,%9}, {%10,%10,%10,%10};"                                                             \
        : "=r"(d0), "=r"(d1), "=r"(d2), "=r"(d3)                                                  \
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(0));                          \
    return (int4)(d0, d1, d2, d3);                                                                \
}
DEFINE_MMA8(u8)
DEFINE_MMA8(s8)

/* sum of 4 unsigned bytes of a times 4 signed bytes of b, plus c */
inline int dp4a_us(uint a, uint b, int c)
{
    int r;
    asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    return r;
}

inline int dp4a_ss(uint a, uint b, int c)
{
    int r;
    asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    return r;
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
inline void cp_async_wait2(void) { asm volatile("cp.async.wait_group 2;" ::: "memory"); }

/* cp_async16 through L1 (.ca), for data the groups of a compute unit share */
inline void cp_async16_ca(local uint4 *dst, global const uint4 *src)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" ::"r"((uint)(size_t)dst), "l"((ulong)src) : "memory");
}
/* the 128-byte L2 line holding p fetched from memory ahead of its load (no register, no wait) */
inline void prefetch_l2(global const void *p) { asm volatile("prefetch.global.L2 [%0];" ::"l"((ulong)p)); }
/* the warp's lanes meet here, and their local-memory writes (cp.async ones once waited on) become
 * visible to each other */
inline void bar_warp(void) { asm volatile("bar.warp.sync -1;" ::: "memory"); }

/* four 8x8 f16 matrices from local memory: lane 8m + r gives row r of matrix m. Plain (ldsm_x4),
 * lane (g, t) gets elements 2t, 2t + 1 of row g of each (an mma's B fragment whose n are the rows);
 * transposed (ldsm_x4_t), the same of the matrices' columns */
#define DEFINE_LDSM(NAME, TRANS)                                                                  \
inline void NAME(local const uint4 *row, uint *r0, uint *r1, uint *r2, uint *r3)                 \
{                                                                                                 \
    uint a, b, c, d;                                                                              \
    asm volatile("ldmatrix.sync.aligned.m8n8.x4" TRANS ".shared.b16 {%0,%1,%2,%3}, [%4];"         \
                 : "=r"(a), "=r"(b), "=r"(c), "=r"(d)                                             \
                 : "r"((uint)(size_t)row)                                                         \
                 : "memory");                                                                     \
    *r0 = a; *r1 = b; *r2 = c; *r3 = d;                                                           \
}
DEFINE_LDSM(ldsm_x4, "")
DEFINE_LDSM(ldsm_x4_t, ".trans")
#endif /* CLG_NVIDIA */
