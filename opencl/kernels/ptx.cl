/* ptx.cl — inline-PTX wrappers, NVIDIA only (the runtime builds with -DCLG_NVIDIA=1 there): warp
 * shuffles, f16 conversions, tensor-core products (f16 and int8 mma.sync), dp4a, cp.async copies,
 * the L2 prefetch, ldmatrix; for sm_90a (CLG_SM90A) mbarriers, bulk copies and wgmma. The kernel files
 * call these rather than writing asm themselves. */

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

/* one 32-bit PTX instruction of two or three register operands (f16x2 on packed halves: NVIDIA's
 * OpenCL has no cl_khr_fp16) */
#define DEFINE_PTX2(NAME, INSTR)                                                                  \
inline uint NAME(uint a, uint b)                                                                  \
{                                                                                                 \
    uint d;                                                                                       \
    asm(INSTR " %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));                                         \
    return d;                                                                                     \
}
#define DEFINE_PTX3(NAME, INSTR)                                                                  \
inline uint NAME(uint a, uint b, uint c)                                                          \
{                                                                                                 \
    uint d;                                                                                       \
    asm(INSTR " %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));                             \
    return d;                                                                                     \
}
DEFINE_PTX2(hsub2, "sub.f16x2")     /* a - b */
DEFINE_PTX2(hmul2, "mul.rn.f16x2")  /* a * b */
DEFINE_PTX3(hfma2, "fma.rn.f16x2")  /* a * b + c */
/* bytes of {b, a} (a's 0-3, b's 4-7) picked by the four nibbles of c, result byte 0 first */
DEFINE_PTX3(prmt, "prmt.b32")

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
/* at most n (0-3, a constant where it is inlined) committed groups still in flight */
inline void cp_async_wait_n(int n)
{
    switch (n) {
    case 0: cp_async_wait0(); break;
    case 1: cp_async_wait1(); break;
    case 2: cp_async_wait2(); break;
    default: asm volatile("cp.async.wait_group 3;" ::: "memory"); break;
    }
}

/* 4 bytes global -> local through L1, of which the first n (0, 2 or 4) are read and the rest zeroed:
 * for data only 4-byte aligned, and a word that would run past its buffer */
inline void cp_async4(local uint *dst, global const uint *src, uint n)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"((uint)(size_t)dst), "l"((ulong)src), "r"(n)
                 : "memory");
}
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
#ifdef CLG_SM90A
/* --- sm_90a (the sm90a program, NVIDIA compute capability 9.0) ---------------------------------
 * NVIDIA's OpenCL compiler writes PTX for sm_90, whose ptxas refuses wgmma. Each wgmma line reaches
 * the PTX behind the comment "//@sm90a " with its registers filled in, and runtime.c uncomments
 * those lines and rebuilds the PTX for sm_90a (tools/ptx_check.sh does the same). */
#define SM90A(x) "//@sm90a " x

/* an mbarrier in local memory: init for n arrivals (one thread, before a barrier; the fence makes the
 * init visible to the copy engine) */
inline void mbar_init(local ulong *m, uint n)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"((uint)(size_t)m), "r"(n) : "memory");
}
inline void mbar_fence_init(void) { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
/* this thread's arrival, the phase then waiting for bytes more to land by bulk copies */
inline void mbar_expect(local ulong *m, uint bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"((uint)(size_t)m), "r"(bytes) : "memory");
}
/* wait until the phase of parity par has completed */
inline void mbar_wait(local ulong *m, uint par)
{
    asm volatile("{\n.reg .pred P1;\nWAIT:\nmbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
                 "@P1 bra.uni DONE;\nbra.uni WAIT;\nDONE:\n}" ::"r"((uint)(size_t)m), "r"(par) : "memory");
}
/* bytes (a multiple of 16) global -> local by the bulk-copy engine, completing on mbarrier m */
inline void bulk_g2s(local uint4 *dst, global const uint4 *src, uint bytes, local ulong *m)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"((uint)(size_t)dst), "l"((ulong)src), "r"(bytes), "r"((uint)(size_t)m) : "memory");
}

/* a wgmma operand in local memory without swizzle, K-major: 8 x 16-byte core matrices of 128 bytes,
 * lbo bytes between the two of a 16-value k step, sbo between 8-row groups */
inline ulong wg_desc(local const uint4 *p, uint lbo, uint sbo)
{
    return (ulong)(((uint)(size_t)p & 0x3FFFFu) >> 4) | (ulong)(lbo >> 4) << 16 | (ulong)(sbo >> 4) << 32;
}
inline void wg_fence(void) { asm volatile(SM90A("wgmma.fence.sync.aligned;") ::: "memory"); }
inline void wg_commit(void) { asm volatile(SM90A("wgmma.commit_group.sync.aligned;") ::: "memory"); }
/* wait until at most n of this warpgroup's committed wgmma groups are in flight */
inline void wg_wait0(void) { asm volatile(SM90A("wgmma.wait_group.sync.aligned 0;") ::: "memory"); }
inline void wg_wait1(void) { asm volatile(SM90A("wgmma.wait_group.sync.aligned 1;") ::: "memory"); }

/* the 64 f32 accumulators of an m64n128 wgmma (float d[64]) as asm operands */
#define WG_D8(d, i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
                    "+f"(d[i + 6]), "+f"(d[i + 7])
#define WG_D64(d) WG_D8(d, 0), WG_D8(d, 8), WG_D8(d, 16), WG_D8(d, 24), WG_D8(d, 32), WG_D8(d, 40), WG_D8(d, 48), \
                  WG_D8(d, 56)
/* d stays in its registers across this point: nothing may read or move it while a wgmma is in flight */
#define WG_KEEP(d) asm volatile("" : WG_D64(d)::"memory")
/* d (64 x 128, f32) += A (64 x 16 f16, descriptor da) . B (16 x 128, descriptor db, K-major like A):
 * lane (g, t) of warp w of the warpgroup holds d[4j..4j+3] = rows 16w + g, +8 and columns 8j + 2t, +1
 * (as mma_16816's c) */
#define WGMMA_64x128(d, da, db)                                                                           \
    asm volatile(SM90A("{") "\n" SM90A(".reg .pred p;") "\n" SM90A("setp.ne.b32 p, %66, 0;") "\n"       \
                 SM90A("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;") \
                 "\n" SM90A("}")                                                                          \
                 : WG_D64(d)                                                                              \
                 : "l"(da), "l"(db), "r"(1)                                                               \
                 : "memory")
#endif /* CLG_SM90A */
#endif /* CLG_NVIDIA */
