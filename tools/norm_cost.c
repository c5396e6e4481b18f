/* norm_cost — device time of one decode norm chain (op_norm_chain, one row) against an empty launch of
 * the same group, held behind a user event so the host's enqueue rate does not count:
 *   build/tools/norm_cost [N_LAUNCHES [GIB]]
 * Per row length (Gemma 4 E2B 1536, E4B 2560, 26B 2816, 31B 5376) and group width, the chain the
 * decode runs between two products (post-norm, residual add, next pre-norm, int8 hand-off) costs
 * "us a launch"; "cold" puts a 128 MiB copy before each chain (the weights' stream in a real step
 * evicts the norm weights from L2) and subtracts the copies timed alone; "walked" puts a touch of one
 * word per 64 KiB of GIB GiB (default 16) before it instead (the address translations evicted). */
#include <stdlib.h>

#include "cl_probe.h"
#include "ops.h"
#include "runtime.h"

#define N_FAR_MAX 16 /* buffers of FAR_BYTES whose pages touch visits */
#define FAR_BYTES ((size_t)1 << 30)

typedef struct probe {
    cl_runtime rt;
    ops o;
    cl_mem x, wx, res, w0, y, big, big2, far[N_FAR_MAX], sink;
    int n_far;
    cl_kernel touch;
} probe;

/* one word of every 64 KiB of a buffer: many pages, little data, so what it evicts is mostly the
 * address translations rather than L2's lines */
static const char *touch_src =
    "kernel void touch(global const uint *b, global uint *sink, uint stride)\n"
    "{ uint v = b[(size_t)get_global_id(0) * stride]; if (v == 12345u) sink[0] = v; }\n";

/* what each timed launch is: an empty launch of lws items, the chain, or the chain after a copy or a
 * page walk, or those alone */
enum { EMPTY, CHAIN, COPY_CHAIN, COPY, WALK_CHAIN, WALK };

static int enqueue(probe *p, int what, uint32_t n, size_t lws)
{
    if (what == COPY_CHAIN || what == COPY)
        if (clEnqueueCopyBuffer(p->rt.q, p->big, p->big2, 0, 0, 128u << 20, 0, NULL, NULL) != CL_SUCCESS) return -1;
    if (what == WALK_CHAIN || what == WALK) {
        cl_uint stride = 16384;
        size_t g = FAR_BYTES / 4 / stride;
        for (int i = 0; i < p->n_far; i++)
            if (clSetKernelArg(p->touch, 0, sizeof(cl_mem), &p->far[i]) ||
                clSetKernelArg(p->touch, 1, sizeof(cl_mem), &p->sink) ||
                clSetKernelArg(p->touch, 2, sizeof stride, &stride) ||
                clEnqueueNDRangeKernel(p->rt.q, p->touch, 1, NULL, &g, NULL, 0, NULL, NULL))
                return -1;
    }
    if (what == EMPTY) return clEnqueueNDRangeKernel(p->rt.q, p->o.nop, 1, NULL, &lws, &lws, 0, NULL, NULL);
    if (what == COPY || what == WALK) return 0;
    norm_chain c = { .x = p->x, .wx = p->wx, .res = p->res, .scale = 1.0f, .out = { { p->w0, p->y } }, .nout = 1 };
    return op_norm_chain(&p->o, &c, 1, n, 1e-6f);
}

/* us a launch of what, reps launches held behind a gate */
static double held_us(probe *p, int what, uint32_t n, size_t lws, int reps)
{
    cl_event gate = probe_gate(p->rt.ctx, p->rt.q);
    if (!gate) return -1;
    for (int i = 0; i < reps; i++)
        if (enqueue(p, what, n, lws)) {
            probe_gate_open(gate, p->rt.q);
            return -1;
        }
    return 1e6 * probe_gate_open(gate, p->rt.q) / reps;
}

static cl_mem filled(probe *p, size_t bytes, float v)
{
    cl_int e;
    cl_mem m = clCreateBuffer(p->rt.ctx, CL_MEM_READ_WRITE, bytes, NULL, &e);
    if (m && clEnqueueFillBuffer(p->rt.q, m, &v, sizeof v, 0, bytes, 0, NULL, NULL) != CL_SUCCESS) return NULL;
    return m;
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 2000;
    static probe P;
    probe *p = &P;
    p->n_far = argc > 2 ? atoi(argv[2]) : 16;
    if (p->n_far < 1 || p->n_far > N_FAR_MAX) p->n_far = 16;
    char err[512];
    if (reps < 10 || rt_create(&p->rt, NULL, 0, err, sizeof err) || rt_build(&p->rt, NULL, NULL, err, sizeof err) ||
        ops_init(&p->o, &p->rt, 1u << 20, err, sizeof err)) {
        fprintf(stderr, "norm_cost: %s\n", reps < 10 ? "N_LAUNCHES must be at least 10" : err);
        return 1;
    }
    const uint32_t nmax = 8192;
    size_t b = 4 * nmax;
    if (!(p->x = filled(p, b, 0.5f)) || !(p->wx = filled(p, b, 1.0f)) || !(p->res = filled(p, b, 0.25f)) ||
        !(p->w0 = filled(p, b, 1.0f)) || !(p->y = filled(p, b, 0.0f)) || !(p->big = filled(p, 128u << 20, 1.0f)) ||
        !(p->big2 = filled(p, 128u << 20, 0.0f))) {
        fprintf(stderr, "norm_cost: buffers\n");
        return 1;
    }
    cl_int e;
    cl_program tp = clCreateProgramWithSource(p->rt.ctx, 1, &touch_src, NULL, &e);
    if (e || clBuildProgram(tp, 1, &p->rt.device, "", NULL, NULL) || !(p->touch = clCreateKernel(tp, "touch", &e))) {
        fprintf(stderr, "norm_cost: the touch kernel did not build\n");
        return 1;
    }
    for (int i = 0; i < p->n_far; i++)
        if (!(p->far[i] = filled(p, FAR_BYTES, 1.0f))) {
            fprintf(stderr, "norm_cost: %d GiB of buffers\n", (int)(p->n_far * (FAR_BYTES >> 30)));
            return 1;
        }
    if (!(p->sink = filled(p, 64, 0.0f))) return 1;
    clFinish(p->rt.q);
    printf("device: %s, %d launches each, held\n", p->rt.device_name, reps);
    for (int i = 0; i < 5; i++) held_us(p, COPY, 0, 0, reps / 10); /* clocks up */
    double copy = held_us(p, COPY, 0, 0, reps / 10), walk = held_us(p, WALK, 0, 0, reps / 10);
    printf("128 MiB copy alone: %.1f us; a touch of %d GiB of pages alone: %.1f us\n", copy,
           (int)(p->n_far * (FAR_BYTES >> 30)), walk);
    printf("%6s %6s %10s %10s %10s %10s\n", "n", "wg", "empty us", "chain us", "cold us", "walked us");
    uint32_t ns[] = { 1536, 2560, 2816, 5376 };
    size_t wgs[] = { 128, 256, 512 };
    size_t kwg = p->o.norm.wg_max;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++) {
            if (wgs[j] > p->rt.max_wg) continue;
            p->o.norm.wg_max = wgs[j];
            held_us(p, CHAIN, ns[i], 0, 20); /* warm */
            double em = held_us(p, EMPTY, 0, wgs[j], reps), ch = held_us(p, CHAIN, ns[i], 0, reps),
                   cold = held_us(p, COPY_CHAIN, ns[i], 0, reps / 10) - copy,
                   walked = held_us(p, WALK_CHAIN, ns[i], 0, reps / 10) - walk;
            char es[256];
            if (ops_status(&p->o, es, sizeof es)) { fprintf(stderr, "norm_cost: %s\n", es); return 1; }
            printf("%6u %6zu %10.2f %10.2f %10.2f %10.2f\n", ns[i], wgs[j], em, ch, cold, walked);
        }
    p->o.norm.wg_max = kwg;
    cl_mem ms[] = { p->x, p->wx, p->res, p->w0, p->y, p->big, p->big2, p->sink };
    for (int i = 0; i < 8; i++) clReleaseMemObject(ms[i]);
    for (int i = 0; i < p->n_far; i++) clReleaseMemObject(p->far[i]);
    clReleaseKernel(p->touch);
    clReleaseProgram(tp);
    ops_destroy(&p->o);
    rt_destroy(&p->rt);
    return 0;
}
