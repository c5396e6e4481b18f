/* launch_cost.c — host cost of one kernel launch on the default OpenCL device, split into argument
 * setting and enqueue (measures what bounds launch-heavy decode steps; docs/PERF.md).
 *   cc -O2 -std=c11 -DCL_TARGET_OPENCL_VERSION=120 tools/launch_cost.c -o build/launch_cost -lOpenCL
 *   build/launch_cost [launches]
 * Prints µs per launch for: enqueue with arguments set once; 4 arguments set + enqueue; 24 set +
 * enqueue; the same 24 through one kernel object per call site (arguments set once each). */
#define _POSIX_C_SOURCE 199309L
#include "cl_probe.h"

#include <stdlib.h>

static const char *src =
    "kernel void k24(global float *a, global float *b, global float *c, global float *d, uint e, uint f,"
    " uint g, uint h, uint i, uint j, uint k, uint l, uint m, uint n, uint o, uint p, uint q, uint r,"
    " uint s, uint t, uint u, uint v, uint w, uint x) { if (get_global_id(0) == 0 && e == 12345u) a[0] = 1.0f; }\n";

static int set_all(cl_kernel k, cl_mem m, cl_uint from, cl_uint to, cl_uint salt)
{
    for (cl_uint i = from; i < to; i++) {
        cl_int e;
        if (i < 4) e = clSetKernelArg(k, i, sizeof m, &m);
        else { cl_uint v = i + salt; e = clSetKernelArg(k, i, sizeof v, &v); }
        if (e != CL_SUCCESS) return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 20000;
    cl_device_id dev;
    cl_context ctx;
    cl_command_queue q;
    cl_program p;
    cl_int e;
    if (probe_device(&dev) || probe_open(&dev, src, "", &ctx, &q, &p)) return 1;
    cl_mem m = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4096, NULL, &e);
    CK(e);
    enum { SITES = 64 };
    cl_kernel k = clCreateKernel(p, "k24", &e), ks[SITES];
    CK(e);
    for (int i = 0; i < SITES; i++) {
        ks[i] = clCreateKernel(p, "k24", &e);
        CK(e);
        if (set_all(ks[i], m, 0, 24, (cl_uint)i)) return 1;
    }
    if (set_all(k, m, 0, 24, 0)) return 1;
    size_t gws = 128, lws = 128;
    const char *names[] = { "enqueue only (args set once)", "4 args + enqueue", "24 args + enqueue",
                            "24 args only (no enqueue)", "kernel per call site, enqueue only" };
    for (int mode = 0; mode < 5; mode++) {
        CK(clFinish(q));
        double t0 = now();
        for (int i = 0; i < n; i++) {
            if (mode == 1 && set_all(k, m, 20, 24, (cl_uint)i)) return 1;
            if ((mode == 2 || mode == 3) && set_all(k, m, 0, 24, (cl_uint)i)) return 1;
            if (mode == 3) continue;
            cl_kernel kk = mode == 4 ? ks[i % SITES] : k;
            CK(clEnqueueNDRangeKernel(q, kk, 1, NULL, &gws, &lws, 0, NULL, NULL));
        }
        double t1 = now();
        CK(clFinish(q));
        double t2 = now();
        printf("%-40s %7.2f us/launch host, %7.2f us/launch to finish\n", names[mode], 1e6 * (t1 - t0) / n,
               1e6 * (t2 - t0) / n);
    }
    return 0;
}
