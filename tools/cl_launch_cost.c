/* cl_launch_cost.c — host cost of an OpenCL kernel launch on the first GPU device (measuring tool
 * for docs/PERF.md): N enqueues of a trivial kernel with 1 or 20 arguments, the arguments set
 * before every launch or once. Build: cc -O2 tools/cl_launch_cost.c -lOpenCL -o build/cl_launch_cost */
#define _POSIX_C_SOURCE 199309L
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static const char *src =
    "kernel void k1(global float *a) { if (get_global_id(0) == 0) a[0] += 1.0f; }\n"
    "kernel void k20(global float *a, global float *b, global float *c, global float *d, uint e, uint f,\n"
    "  uint g, uint h, float i, float j, global float *k, global float *l, uint m, uint n, uint o, uint p,\n"
    "  uint q, uint r, uint s, uint t) { if (get_global_id(0) == 0) a[0] += e + f + g + h + i + j + m + n + o + p + q + r + s + t; }\n";

int main(void)
{
    cl_platform_id pl[4];
    cl_uint np = 0;
    clGetPlatformIDs(4, pl, &np);
    cl_device_id dev = NULL;
    for (cl_uint i = 0; i < np && !dev; i++)
        if (clGetDeviceIDs(pl[i], CL_DEVICE_TYPE_GPU, 1, &dev, NULL) != CL_SUCCESS) dev = NULL;
    if (!dev) { fprintf(stderr, "no GPU device\n"); return 1; }
    cl_int e;
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &e);
    cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &e);
    cl_program p = clCreateProgramWithSource(ctx, 1, &src, NULL, &e);
    if (clBuildProgram(p, 1, &dev, "", NULL, NULL)) { fprintf(stderr, "build failed\n"); return 1; }
    cl_kernel k1 = clCreateKernel(p, "k1", &e), k20 = clCreateKernel(p, "k20", &e);
    cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4096, NULL, &e);
    size_t gws = 256, lws = 256;
    const int N = 20000;
    for (int mode = 0; mode < 4; mode++) {
        cl_kernel k = mode < 2 ? k1 : k20;
        int nargs = mode < 2 ? 1 : 20, every = mode % 2 == 0;
        cl_uint u = 7;
        float f = 1.0f;
        for (int a = 0; a < nargs; a++) {
            int is_mem = a < 4 || a == 10 || a == 11;
            clSetKernelArg(k, a, is_mem ? sizeof b : a == 8 || a == 9 ? sizeof f : sizeof u,
                           is_mem ? (void *)&b : a == 8 || a == 9 ? (void *)&f : (void *)&u);
        }
        clFinish(q);
        double t0 = now();
        for (int i = 0; i < N; i++) {
            if (every)
                for (int a = 0; a < nargs; a++) {
                    int is_mem = a < 4 || a == 10 || a == 11;
                    clSetKernelArg(k, a, is_mem ? sizeof b : a == 8 || a == 9 ? sizeof f : sizeof u,
                                   is_mem ? (void *)&b : a == 8 || a == 9 ? (void *)&f : (void *)&u);
                }
            clEnqueueNDRangeKernel(q, k, 1, NULL, &gws, &lws, 0, NULL, NULL);
        }
        double t1 = now();
        clFinish(q);
        double t2 = now();
        printf("%2d args, set %-10s enqueue %.2f us/launch, through finish %.2f us/launch\n", nargs,
               every ? "every time" : "once", (t1 - t0) / N * 1e6, (t2 - t0) / N * 1e6);
    }
    return 0;
}
