/* launch_cost.c — the cost of one kernel launch on the default OpenCL device: on the host (argument
 * setting and enqueue) and on the device (launches held behind a gate, so only the device's time per
 * launch is timed), by argument count and form (measures what bounds launch-heavy decode steps;
 * docs/PERF.md).
 *   cc -O2 -std=c11 -DCL_TARGET_OPENCL_VERSION=200 tools/launch_cost.c -o build/launch_cost -lOpenCL
 *   build/launch_cost [launches]
 * Host: µs per launch for enqueue with arguments set once; 4 arguments set + enqueue; 24 set + enqueue;
 * the same 24 through one kernel object per call site. Then per kernel form (1 buffer; 4 buffers and 20
 * uints; 4 buffers and one struct of 20 uints; 12 buffers and 12 uints) on 1 group of 128 items and on 264
 * groups of 256: host µs per enqueue and held device µs per launch. Then whether a launch's own cost
 * hides behind its predecessor's work: held µs per launch of a kernel spinning n dependent FMAs an item
 * (264 groups of 256) with 1 buffer argument and with 12, and once alone. Last, the 12-pointer kernel with
 * 11 of them NULL and, where the device has coarse-grained SVM (built for OpenCL 2.0), with 12 SVM pointers. */
#define _POSIX_C_SOURCE 199309L
#include "cl_probe.h"

#include <stdlib.h>

static const char *src =
    "kernel void k24(global float *a, global float *b, global float *c, global float *d, uint e, uint f,"
    " uint g, uint h, uint i, uint j, uint k, uint l, uint m, uint n, uint o, uint p, uint q, uint r,"
    " uint s, uint t, uint u, uint v, uint w, uint x) { if (get_global_id(0) == 0 && e == 12345u) a[0] = 1.0f; }\n"
    "kernel void k1(global float *a) { if (get_global_id(0) == 123456789u) a[0] = 1.0f; }\n"
    "typedef struct { uint v[20]; } args20;\n"
    "kernel void ks(global float *a, global float *b, global float *c, global float *d, args20 s)"
    " { if (get_global_id(0) == 0 && s.v[0] == 12345u) a[0] = 1.0f; }\n"
    "kernel void k12(global float *a, global float *b, global float *c, global float *d, global float *a2,"
    " global float *b2, global float *c2, global float *d2, global float *a3, global float *b3, global float *c3,"
    " global float *d3, uint e, uint f, uint g, uint h, uint i, uint j, uint k, uint l, uint m, uint n, uint o,"
    " uint p) { if (get_global_id(0) == 0 && e == 12345u) a[0] = 1.0f; }\n"
    "#define SPIN float v = (float)get_global_id(0); for (uint i = 0; i < n; i++) v = fma(v, 0.999f, 0.5f);"
    " if (v == 1234.5f) a[0] = v;\n"
    "kernel void spin1(global float *a, uint n) { SPIN }\n"
    "kernel void spin12(global float *a, global float *b, global float *c, global float *d, global float *a2,"
    " global float *b2, global float *c2, global float *d2, global float *a3, global float *b3, global float *c3,"
    " global float *d3, uint n) { SPIN }\n";

/* arguments from..to-1 of a kernel whose first nmem take m and the rest uints */
static int set_all(cl_kernel k, cl_mem m, cl_uint nmem, cl_uint from, cl_uint to, cl_uint salt)
{
    for (cl_uint i = from; i < to; i++) {
        cl_int e;
        if (i < nmem) e = clSetKernelArg(k, i, sizeof m, &m);
        else { cl_uint v = i + salt; e = clSetKernelArg(k, i, sizeof v, &v); }
        if (e != CL_SUCCESS) return -1;
    }
    return 0;
}

/* n launches of k: host seconds per enqueue, then device seconds per launch held behind a gate */
static int launches(cl_context ctx, cl_command_queue q, cl_kernel k, int n, size_t gws, size_t lws, double *host,
                    double *held)
{
    CK(clFinish(q));
    double t0 = now();
    for (int i = 0; i < n; i++) CK(clEnqueueNDRangeKernel(q, k, 1, NULL, &gws, &lws, 0, NULL, NULL));
    *host = (now() - t0) / n;
    CK(clFinish(q));
    cl_event gate = probe_gate(ctx, q);
    if (!gate) return 1;
    for (int i = 0; i < n; i++) CK(clEnqueueNDRangeKernel(q, k, 1, NULL, &gws, &lws, 0, NULL, NULL));
    *held = probe_gate_open(gate, q) / n;
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
        if (set_all(ks[i], m, 4, 0, 24, (cl_uint)i)) return 1;
    }
    if (set_all(k, m, 4, 0, 24, 0)) return 1;
    size_t gws = 128, lws = 128;
    const char *names[] = { "enqueue only (args set once)", "4 args + enqueue", "24 args + enqueue",
                            "24 args only (no enqueue)", "kernel per call site, enqueue only" };
    for (int mode = 0; mode < 5; mode++) {
        CK(clFinish(q));
        double t0 = now();
        for (int i = 0; i < n; i++) {
            if (mode == 1 && set_all(k, m, 4, 20, 24, (cl_uint)i)) return 1;
            if ((mode == 2 || mode == 3) && set_all(k, m, 4, 0, 24, (cl_uint)i)) return 1;
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
    /* the forms: name, buffers, uints (-1: the struct) */
    static const struct { const char *name; cl_uint nmem; int nuint; } forms[] = {
        { "k1", 1, 0 }, { "k24", 4, 20 }, { "ks", 4, -1 }, { "k12", 12, 12 },
    };
    static const size_t grids[][2] = { { 128, 128 }, { 264 * 256, 256 } };
    int held = n < 2000 ? n : 2000; /* launches behind one gate */
    double th, td;
    for (size_t f = 0; f < sizeof forms / sizeof *forms; f++) {
        cl_kernel kf = clCreateKernel(p, forms[f].name, &e);
        CK(e);
        if (forms[f].nuint >= 0) {
            if (set_all(kf, m, forms[f].nmem, 0, forms[f].nmem + (cl_uint)forms[f].nuint, 0)) return 1;
        } else {
            cl_uint s[20] = { 0 };
            if (set_all(kf, m, 4, 0, 4, 0)) return 1;
            CK(clSetKernelArg(kf, 4, sizeof s, s));
        }
        for (size_t g = 0; g < 2; g++) {
            if (launches(ctx, q, kf, held, grids[g][0], grids[g][1], &th, &td)) return 1;
            printf("%-4s %2u buffers %2d uints, %3zu groups: %6.2f us/launch host, %6.2f us/launch held on the device\n",
                   forms[f].name, forms[f].nmem, forms[f].nuint < 0 ? 20 : forms[f].nuint, grids[g][0] / grids[g][1],
                   1e6 * th, 1e6 * td);
        }
        clReleaseKernel(kf);
    }
    cl_kernel sp[2] = { clCreateKernel(p, "spin1", &e), clCreateKernel(p, "spin12", &e) };
    CK(e);
    for (cl_uint i = 0; i < 12; i++) CK(clSetKernelArg(sp[1], i, sizeof m, &m));
    CK(clSetKernelArg(sp[0], 0, sizeof m, &m));
    static const cl_uint spins[] = { 0, 500, 1000, 2500, 5000, 10000 };
    size_t sg = 264 * 256, sl = 256;
    for (size_t s = 0; s < sizeof spins / sizeof *spins; s++) {
        double t[3];
        for (int f = 0; f < 3; f++) {
            CK(clSetKernelArg(sp[f == 1], f == 1 ? 12 : 1, sizeof spins[s], &spins[s]));
            t[f] = 1e9;
            for (int rep = 0; rep < (f == 2 ? 20 : 1); rep++) {
                if (launches(ctx, q, sp[f == 1], f == 2 ? 1 : held, sg, sl, &th, &td)) return 1;
                if (td < t[f]) t[f] = td;
            }
        }
        printf("spin %5u: %7.2f us/launch held with 1 buffer, %7.2f with 12, %7.2f alone (best of 20)\n", spins[s],
               1e6 * t[0], 1e6 * t[1], 1e6 * t[2]);
    }
    /* unused buffer arguments as NULL: 1 buffer set and 11 NULL */
    cl_mem none = NULL;
    for (cl_uint i = 1; i < 12; i++) CK(clSetKernelArg(sp[1], i, sizeof none, &none));
    CK(clSetKernelArg(sp[1], 12, sizeof spins[0], &spins[0]));
    if (launches(ctx, q, sp[1], held, sg, sl, &th, &td)) return 1;
    printf("spin     0, 1 buffer and 11 NULL: %6.2f us/launch host, %6.2f us/launch held\n", 1e6 * th, 1e6 * td);
#if CL_TARGET_OPENCL_VERSION >= 200
    cl_device_svm_capabilities svm = 0;
    clGetDeviceInfo(dev, CL_DEVICE_SVM_CAPABILITIES, sizeof svm, &svm, NULL);
    if (!(svm & CL_DEVICE_SVM_COARSE_GRAIN_BUFFER)) return 0;
    for (cl_uint i = 0; i < 12; i++) {
        void *sv = clSVMAlloc(ctx, CL_MEM_READ_WRITE, 4096, 0);
        if (!sv) { fprintf(stderr, "clSVMAlloc failed\n"); return 1; }
        CK(clSetKernelArgSVMPointer(sp[1], i, sv));
    }
    if (launches(ctx, q, sp[1], held, sg, sl, &th, &td)) return 1;
    printf("spin     0, 12 SVM pointers: %6.2f us/launch host, %6.2f us/launch held\n", 1e6 * th, 1e6 * td);
#endif
    return 0;
}
