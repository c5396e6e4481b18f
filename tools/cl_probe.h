/* cl_probe.h — what the OpenCL probes in tools/ share: a clock, a check that returns 1 from main with
 * the failing call on stderr, the first device, and its context, queue and program (the build log on
 * stderr when the program fails), and a gate that holds a queue so only device time is timed. */
#ifndef CLGEMMA_CL_PROBE_H
#define CLGEMMA_CL_PROBE_H

#include <CL/cl.h>
#include <stdio.h>
#include <time.h>

#define CK(x) do { cl_int e_ = (x); if (e_ != CL_SUCCESS) { fprintf(stderr, "%s: %d\n", #x, e_); return 1; } } while (0)

static inline double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* the first device of the first platform */
static inline int probe_device(cl_device_id *dev)
{
    cl_platform_id pl;
    CK(clGetPlatformIDs(1, &pl, NULL));
    CK(clGetDeviceIDs(pl, CL_DEVICE_TYPE_ALL, 1, dev, NULL));
    return 0;
}

/* dev's context with an in-order queue, and src built with opts */
static inline int probe_open(cl_device_id *dev, const char *src, const char *opts, cl_context *ctx, cl_command_queue *q,
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

/* a user event holding q: what is enqueued after it waits until probe_gate_open, which returns the
 * seconds from then until q has finished (NULL: the gate could not be made) */
static inline cl_event probe_gate(cl_context ctx, cl_command_queue q)
{
    cl_int e;
    cl_event gate = clCreateUserEvent(ctx, &e);
    if (gate && clEnqueueMarkerWithWaitList(q, 1, &gate, NULL) != CL_SUCCESS) {
        clSetUserEventStatus(gate, CL_COMPLETE);
        clReleaseEvent(gate);
        return NULL;
    }
    return gate;
}

static inline double probe_gate_open(cl_event gate, cl_command_queue q)
{
    double t = now();
    clSetUserEventStatus(gate, CL_COMPLETE);
    clFinish(q);
    t = now() - t;
    clReleaseEvent(gate);
    return t;
}

#endif
