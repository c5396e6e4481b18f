/* stream_cost.c — how fast one kernel can stream a weight-sized buffer from device memory, launched as
 * many short groups against a resident grid whose groups loop over it (the question behind fusing a
 * decode layer into one persistent kernel: can its products read weights as fast as launched ones?).
 *   cc -O2 -std=c11 -DCL_TARGET_OPENCL_VERSION=120 tools/stream_cost.c -o build/stream_cost -lOpenCL
 *   build/stream_cost [MiB...]   (default 24 130: a 31B attention output and gate/up product)
 * Every launch is held behind a user event with the rest of its repeats (device time only):
 *   launched P   one item per P 16-byte loads, all issued before any is used, as many groups as that takes;
 *   resident G U G groups of 256 items a compute unit, each item striding over the buffer U loads at a time;
 *   rows L       mvqg's reads without its arithmetic: rows of 3,024 bytes (5,376 q4_k values), 4 a warp,
 *                groups of L items.
 * Prints us a launch and GB/s for each. */
#define _POSIX_C_SOURCE 199309L
#include "cl_probe.h"

#include <stdlib.h>

static const char *src =
    "#define SINK(a) if ((a.x ^ a.y ^ a.z ^ a.w) == 0x9e3779b9u) out[0] = a.x\n"
    "#define LAUNCHED(P) kernel void launched_##P(global const uint4 *w, global uint *out, ulong n)\\\n"
    "{ size_t g = get_global_id(0), gs = get_global_size(0); uint4 v[P], a = (uint4)(0);\\\n"
    "  for (int j = 0; j < P; j++) { size_t i = g + j * gs; v[j] = i < n ? w[i] : (uint4)(0); }\\\n"
    "  for (int j = 0; j < P; j++) a ^= v[j];\\\n"
    "  SINK(a); }\n"
    "#define RESIDENT(U) kernel void resident_##U(global const uint4 *w, global uint *out, ulong n)\\\n"
    "{ size_t g = get_global_id(0), gs = get_global_size(0); uint4 a = (uint4)(0);\\\n"
    "  for (size_t i0 = g; i0 < n; i0 += gs * U) { uint4 v[U];\\\n"
    "    for (int j = 0; j < U; j++) { size_t i = i0 + j * gs; v[j] = i < n ? w[i] : (uint4)(0); }\\\n"
    "    for (int j = 0; j < U; j++) a ^= v[j]; }\\\n"
    "  SINK(a); }\n"
    /* mvqg's reads without its arithmetic: each warp 4 rows of ru 16-byte units, lanes striding */
    "kernel void rows4(global const uint4 *w, global uint *out, ulong n, uint ru)\n"
    "{ uint lane = get_local_id(0) % 32, warp = get_local_id(0) / 32; uint4 a = (uint4)(0);\n"
    "  size_t r0 = ((size_t)get_group_id(0) * (get_local_size(0) / 32) + warp) * 4;\n"
    "  for (uint j = lane; j < ru; j += 32) { uint4 v[4];\n"
    "    for (int r = 0; r < 4; r++) { size_t i = (r0 + r) * ru + j; v[r] = i < n ? w[i] : (uint4)(0); }\n"
    "    for (int r = 0; r < 4; r++) a ^= v[r]; }\n"
    "  SINK(a); }\n"
    "LAUNCHED(1) LAUNCHED(2) LAUNCHED(4) LAUNCHED(8)\n"
    "RESIDENT(1) RESIDENT(2) RESIDENT(4) RESIDENT(8)\n";

/* us a launch of k over gws items in groups of lws, reps launches held behind a gate */
static double held_us(cl_context ctx, cl_command_queue q, cl_kernel k, size_t gws, size_t lws, int reps)
{
    cl_event gate = probe_gate(ctx, q);
    if (!gate) return -1;
    for (int r = 0; r < reps; r++)
        if (clEnqueueNDRangeKernel(q, k, 1, NULL, &gws, &lws, 0, NULL, NULL)) {
            probe_gate_open(gate, q);
            return -1;
        }
    return 1e6 * probe_gate_open(gate, q) / reps;
}

int main(int argc, char **argv)
{
    cl_device_id dev;
    cl_context ctx;
    cl_command_queue q;
    cl_program p;
    cl_int e;
    cl_uint cu = 1;
    if (probe_device(&dev) || probe_open(&dev, src, "", &ctx, &q, &p)) return 1;
    clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
    int nsz = argc > 1 ? argc - 1 : 2;
    const int ways[] = { 1, 2, 4, 8 };
    cl_kernel kl[4], kr[4];
    char name[32];
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "launched_%d", ways[i]);
        kl[i] = clCreateKernel(p, name, &e);
        CK(e);
        snprintf(name, sizeof name, "resident_%d", ways[i]);
        kr[i] = clCreateKernel(p, name, &e);
        CK(e);
    }
    cl_mem out = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64, NULL, &e);
    CK(e);
    printf("%u compute units; us a launch (GB/s), held\n", cu);
    for (int s = 0; s < nsz; s++) {
        size_t mib = argc > 1 ? (size_t)atol(argv[1 + s]) : s ? 130 : 24, bytes = mib << 20;
        cl_ulong n = bytes / 16;
        cl_mem w = clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, NULL, &e);
        CK(e);
        cl_uint zero = 0;
        CK(clEnqueueFillBuffer(q, w, &zero, sizeof zero, 0, bytes, 0, NULL, NULL));
        int reps = (int)(20000 / (mib + 10)) + 5;
        for (int i = 0; i < 4; i++) {
            cl_kernel ks[2] = { kl[i], kr[i] };
            for (int j = 0; j < 2; j++) {
                CK(clSetKernelArg(ks[j], 0, sizeof w, &w));
                CK(clSetKernelArg(ks[j], 1, sizeof out, &out));
                CK(clSetKernelArg(ks[j], 2, sizeof n, &n));
            }
        }
        held_us(ctx, q, kl[0], (n + 255) / 256 * 256, 256, reps); /* clocks up */
        printf("%zu MiB\n", mib);
        for (int i = 0; i < 4; i++) {
            size_t items = (n + ways[i] - 1) / ways[i], gws = (items + 255) / 256 * 256;
            double us = held_us(ctx, q, kl[i], gws, 256, reps);
            printf("  launched P=%d: %8.1f us (%6.0f GB/s)\n", ways[i], us, bytes / us / 1e3);
        }
        cl_uint ru = 3024 / 16;
        cl_kernel k4 = clCreateKernel(p, "rows4", &e);
        CK(e);
        CK(clSetKernelArg(k4, 0, sizeof w, &w));
        CK(clSetKernelArg(k4, 1, sizeof out, &out));
        CK(clSetKernelArg(k4, 2, sizeof n, &n));
        CK(clSetKernelArg(k4, 3, sizeof ru, &ru));
        const size_t lw[] = { 64, 128, 256 };
        for (int i = 0; i < 3; i++) {
            size_t rows = n / ru, rpg = lw[i] / 32 * 4, gws = (rows + rpg - 1) / rpg * lw[i];
            double us = held_us(ctx, q, k4, gws, lw[i], reps);
            printf("  rows L=%zu: %8.1f us (%6.0f GB/s)\n", lw[i], us, (double)rows * ru * 16 / us / 1e3);
        }
        clReleaseKernel(k4);
        const int per_cu[] = { 1, 2, 4, 8 };
        for (int g = 0; g < 4; g++)
            for (int i = 0; i < 4; i++) {
                size_t gws = (size_t)cu * per_cu[g] * 256;
                double us = held_us(ctx, q, kr[i], gws, 256, reps);
                printf("  resident G=%d U=%d: %8.1f us (%6.0f GB/s)\n", per_cu[g], ways[i], us, bytes / us / 1e3);
            }
        clReleaseMemObject(w);
    }
    return 0;
}
