/* cl_probe.h — what the standalone OpenCL probes in tools/ share: a clock, a check that returns 1 from
 * main with the failing call on stderr, the first device, and its context, queue and program (the build
 * log on stderr when the program fails). */
#ifndef CLGEMMA_CL_PROBE_H
#define CLGEMMA_CL_PROBE_H

#include <CL/cl.h>
#include <stdio.h>
#include <time.h>

#define CK(x) do { cl_int e_ = (x); if (e_ != CL_SUCCESS) { fprintf(stderr, "%s: %d\n", #x, e_); return 1; } } while (0)

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* the first device of the first platform */
static int probe_device(cl_device_id *dev)
{
    cl_platform_id pl;
    CK(clGetPlatformIDs(1, &pl, NULL));
    CK(clGetDeviceIDs(pl, CL_DEVICE_TYPE_ALL, 1, dev, NULL));
    return 0;
}

/* dev's context with an in-order queue, and src built with opts */
static int probe_open(cl_device_id *dev, const char *src, const char *opts, cl_context *ctx, cl_command_queue *q,
                      cl_program *p)
{
    cl_int e;
    *ctx = clCreateContext(NULL, 1, dev, NULL, NULL, &e);
    CK(e);
    *q = clCreateCommandQueue(*ctx, *dev, 0, &e);
    CK(e);
    *p = clCreateProgramWithSource(*ctx, 1, &src, NULL, &e);
    CK(e);
    if (clBuildProgram(*p, 1, dev, opts, NULL, NULL) != CL_SUCCESS) {
        char log[4096] = "";
        clGetProgramBuildInfo(*p, *dev, CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL);
        fprintf(stderr, "build failed: %s\n", log);
        return 1;
    }
    return 0;
}

#endif
