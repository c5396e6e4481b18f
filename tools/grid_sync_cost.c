/* grid_sync_cost.c — what a kernel boundary costs the device against a barrier across every group of
 * one resident grid (the price of fusing a decode layer's launches into one; docs/PERF.md).
 *   cc -O2 -std=c11 -DCL_TARGET_OPENCL_VERSION=120 tools/grid_sync_cost.c -o build/grid_sync_cost -lOpenCL
 *   build/grid_sync_cost [phases]
 * For grids of G groups of L items, each phase reads a value another group wrote in the phase before
 * (through L2) and writes its own, so phases depend on each other as a layer's products do:
 *   launches  one launch per phase, all held behind a user event (device time only, no host enqueue);
 *   barrier   one launch, phases separated by a barrier across the grid (an atomic counter in L2);
 * and prints device us per phase of each. The barrier form needs every group resident at once: G is
 * kept to one group per compute unit times a small factor, which the device runs together; NVIDIA
 * only (a CPU device runs a few groups at a time, so the spinning ones would never meet). */
#define _POSIX_C_SOURCE 199309L
#include "cl_probe.h"

#include <stdlib.h>

static const char *src =
    "#ifdef NV\n"
    "inline void fence_gpu(void) { asm volatile(\"fence.acq_rel.gpu;\" ::: \"memory\"); }\n"
    "inline float ld_cg(global const float *p) { float v; asm volatile(\"ld.global.cg.f32 %0, [%1];\" : \"=f\"(v) : \"l\"((ulong)p)); return v; }\n"
    "#else\n"
    "inline void fence_gpu(void) { mem_fence(CLK_GLOBAL_MEM_FENCE); }\n"
    "inline float ld_cg(global const float *p) { return *(volatile global const float *)p; }\n"
    "#endif\n"
    /* phase ph: item i reads what item i of the next group wrote in phase ph - 1 */
    "inline void step(global float *buf, uint ph, uint n)\n"
    "{\n"
    "    uint i = get_global_id(0), L = get_local_size(0), src = (i + L) % n;\n"
    "    float v = ph ? ld_cg(buf + (size_t)(ph - 1) * n + src) : 0.0f;\n"
    "    buf[(size_t)ph * n + i] = v + 1.0f;\n"
    "}\n"
    "kernel void one(global float *buf, uint ph) { step(buf, ph, get_global_size(0)); }\n"
    /* every group's item 0 adds to the counter and waits for all groups' arrivals of this phase */
    "kernel void fused(global float *buf, volatile global uint *bar, uint phases)\n"
    "{\n"
    "    uint n = get_global_size(0), ng = get_num_groups(0);\n"
    "    for (uint ph = 0; ph < phases; ph++) {\n"
    "        step(buf, ph, n);\n"
    "        barrier(CLK_GLOBAL_MEM_FENCE);\n"
    "        if (get_local_id(0) == 0) {\n"
    "            fence_gpu();\n"
    "            atomic_inc(bar);\n"
    "            while (atomic_add(bar, 0) < (ph + 1) * ng) {}\n"
    "            fence_gpu();\n"
    "        }\n"
    "        barrier(CLK_GLOBAL_MEM_FENCE);\n"
    "    }\n"
    "}\n";

int main(int argc, char **argv)
{
    cl_uint phases = argc > 1 ? (cl_uint)atoi(argv[1]) : 2000;
    cl_device_id dev;
    cl_context ctx;
    cl_command_queue q;
    cl_program p;
    cl_int e;
    char vendor[128] = "";
    cl_uint cu = 1;
    if (probe_device(&dev)) return 1;
    clGetDeviceInfo(dev, CL_DEVICE_VENDOR, sizeof vendor, vendor, NULL);
    clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
    int nv = vendor[0] == 'N' && vendor[1] == 'V';
    if (probe_open(&dev, src, nv ? "-DNV=1" : "", &ctx, &q, &p)) return 1;
    cl_kernel k1 = clCreateKernel(p, "one", &e), kf = clCreateKernel(p, "fused", &e);
    CK(e);
    printf("%s, %u compute units, %u phases\n", vendor, cu, phases);
    printf("%8s %6s %18s %18s\n", "groups", "items", "launch us/phase", "barrier us/phase");
    const cl_uint per_cu[] = { 1, 2, 4 }, items[] = { 64, 256 };
    for (size_t a = 0; a < sizeof per_cu / sizeof *per_cu; a++)
        for (size_t b = 0; b < sizeof items / sizeof *items; b++) {
            size_t lws = items[b], gws = (size_t)cu * per_cu[a] * lws;
            cl_mem buf = clCreateBuffer(ctx, CL_MEM_READ_WRITE, gws * phases * sizeof(float), NULL, &e);
            CK(e);
            cl_mem bar = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof(cl_uint), NULL, &e);
            CK(e);
            double best_l = 1e9, best_f = 1e9;
            for (int rep = 0; rep < 3; rep++) {
                /* every launch behind a gate, so the time is the device's alone */
                cl_event gate = clCreateUserEvent(ctx, &e);
                CK(e);
                CK(clSetKernelArg(k1, 0, sizeof buf, &buf));
                for (cl_uint ph = 0; ph < phases; ph++) {
                    CK(clSetKernelArg(k1, 1, sizeof ph, &ph));
                    CK(clEnqueueNDRangeKernel(q, k1, 1, NULL, &gws, &lws, ph == 0, ph == 0 ? &gate : NULL, NULL));
                }
                CK(clFlush(q));
                double t0 = now();
                CK(clSetUserEventStatus(gate, CL_COMPLETE));
                CK(clFinish(q));
                double tl = (now() - t0) / phases;
                clReleaseEvent(gate);
                cl_uint zero = 0;
                CK(clEnqueueWriteBuffer(q, bar, CL_TRUE, 0, sizeof zero, &zero, 0, NULL, NULL));
                CK(clSetKernelArg(kf, 0, sizeof buf, &buf));
                CK(clSetKernelArg(kf, 1, sizeof bar, &bar));
                CK(clSetKernelArg(kf, 2, sizeof phases, &phases));
                CK(clFinish(q));
                t0 = now();
                /* elsewhere (a CPU runs groups a few at a time) the spinning groups would never meet */
                if (nv) CK(clEnqueueNDRangeKernel(q, kf, 1, NULL, &gws, &lws, 0, NULL, NULL));
                CK(clFinish(q));
                double tf = nv ? (now() - t0) / phases : 0.0;
                if (tl < best_l) best_l = tl;
                if (tf < best_f) best_f = tf;
            }
            /* the last phase's values: every item counted every phase */
            float v = 0.0f;
            CK(clEnqueueReadBuffer(q, buf, CL_TRUE, (gws * (phases - 1)) * sizeof(float), sizeof v, &v, 0, NULL, NULL));
            printf("%8zu %6zu %18.2f %18.2f%s\n", gws / lws, lws, 1e6 * best_l, 1e6 * best_f,
                   v == (float)phases ? "" : "  (wrong values)");
            clReleaseMemObject(buf);
            clReleaseMemObject(bar);
        }
    return 0;
}
