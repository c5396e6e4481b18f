/* profile.c — bench --profile: each launch's event is kept until its step has finished, then read,
 * so the kernels run as they do unprofiled (no wait per launch) and the gaps between them are the
 * device's real idle time: launch latency and the host falling behind. */
#include "ops_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct prof_pending {
    cl_event ev;
    int kind;
    double bytes, flop;
};

/* one launch shape: a kind with its byte and FLOP counts (those follow from the shape) */
struct prof_shape {
    int kind;
    double bytes, flop, ms;
    long n;
};

static void shape_add(ops *o, const struct prof_pending *p, double ms)
{
    if (!o->prof_shapes && !(o->prof_shapes = calloc(OPS_PROF_SHAPES, sizeof *o->prof_shapes))) return;
    struct prof_shape *s = o->prof_shapes;
    size_t i = 0;
    while (i < o->prof_nshapes && !(s[i].kind == p->kind && s[i].bytes == p->bytes && s[i].flop == p->flop)) i++;
    if (i == o->prof_nshapes) {
        if (i == OPS_PROF_SHAPES) return; /* the table is full: the per-kind totals still count it */
        s[i] = (struct prof_shape){ p->kind, p->bytes, p->flop, 0, 0 };
        o->prof_nshapes++;
    }
    s[i].ms += ms;
    s[i].n++;
}

static int by_time(const void *a, const void *b)
{
    double x = ((const struct prof_shape *)a)->ms, y = ((const struct prof_shape *)b)->ms;
    return x < y ? 1 : x > y ? -1 : 0;
}

void ops_profile_event(ops *o, int kind, cl_event ev, double bytes, double flop)
{
    if (!ev) return;
    if (o->prof_npend == o->prof_cap) {
        size_t cap = o->prof_cap ? 2 * o->prof_cap : 1024;
        struct prof_pending *p = realloc(o->prof_pend, cap * sizeof *p);
        if (p) {
            o->prof_pend = p;
            o->prof_cap = cap;
        } else {
            ops_profile_harvest(o); /* no room to grow: the launches so far are read now, emptying it */
        }
        if (o->prof_npend == o->prof_cap) { clReleaseEvent(ev); return; }
    }
    o->prof_pend[o->prof_npend++] = (struct prof_pending){ ev, kind, bytes, flop };
}

/* one in-order queue: launch i starts after launch i - 1 ends, so start_i - end_(i-1) is idle time */
void ops_profile_harvest(ops *o)
{
    if (!o->prof_npend) return;
    clWaitForEvents(1, &o->prof_pend[o->prof_npend - 1].ev);
    cl_ulong first = 0, prev_end = 0;
    for (size_t i = 0; i < o->prof_npend; i++) {
        struct prof_pending *p = &o->prof_pend[i];
        cl_ulong a = 0, b = 0; /* done: the queue runs in order and the last one is */
        clGetEventProfilingInfo(p->ev, CL_PROFILING_COMMAND_START, sizeof a, &a, NULL);
        clGetEventProfilingInfo(p->ev, CL_PROFILING_COMMAND_END, sizeof b, &b, NULL);
        clReleaseEvent(p->ev);
        if (i == 0) first = a;
        else if (a > prev_end) o->prof_gap_ms += (double)(a - prev_end) * 1e-6;
        if (b > prev_end) prev_end = b;
        o->prof_ms[p->kind] += (double)(b - a) * 1e-6;
        shape_add(o, p, (double)(b - a) * 1e-6);
        o->prof_n[p->kind]++;
        o->prof_bytes[p->kind] += p->bytes;
        o->prof_flop[p->kind] += p->flop;
    }
    if (prev_end > first) o->prof_span_ms += (double)(prev_end - first) * 1e-6;
    o->prof_npend = 0;
}

void ops_profile_release(ops *o)
{
    for (size_t i = 0; i < o->prof_npend; i++) clReleaseEvent(o->prof_pend[i].ev);
    free(o->prof_pend);
    free(o->prof_shapes);
    o->prof_pend = NULL;
    o->prof_shapes = NULL;
    o->prof_npend = o->prof_cap = 0;
}

void ops_profile_reset(ops *o)
{
    ops_profile_harvest(o); /* launches before the reset count to nobody */
    memset(o->prof_ms, 0, sizeof o->prof_ms);
    memset(o->prof_n, 0, sizeof o->prof_n);
    memset(o->prof_bytes, 0, sizeof o->prof_bytes);
    memset(o->prof_flop, 0, sizeof o->prof_flop);
    o->prof_gap_ms = o->prof_span_ms = 0;
    o->prof_nshapes = 0;
}

void ops_profile_print(ops *o, double wall_ms, int steps)
{
    if (o->rt) clFinish(o->rt->q);
    ops_profile_harvest(o);
    double total = 0;
    long launches = 0;
    for (int i = 0; i < K_COUNT; i++) { total += o->prof_ms[i]; launches += o->prof_n[i]; }
    /* twice: the kind's LAUNCH_TWICE / LAUNCH_EMPTY value (bench --hold --set LAUNCH_TWICE=N: its device cost) */
    fprintf(stderr, "%-20s %9s %7s %8s %10s %10s %10s %6s\n", "kernel", "ms", "share", "launches", "GB/s", "TFLOP/s",
            "us/launch", "twice");
    for (int i = 0; i < K_COUNT; i++) {
        if (!o->prof_n[i]) continue;
        double s = o->prof_ms[i] * 1e-3;
        fprintf(stderr, "%-20s %9.3f %6.1f%% %8ld %10.1f %10.3f %10.1f %6d\n", ops_kernel_name(i), o->prof_ms[i],
                total > 0 ? 100.0 * o->prof_ms[i] / total : 0.0, o->prof_n[i], s > 0 ? o->prof_bytes[i] / s / 1e9 : 0,
                s > 0 ? o->prof_flop[i] / s / 1e12 : 0, 1e3 * o->prof_ms[i] / o->prof_n[i], i + 1);
    }
    double pct = wall_ms > 0 ? 100.0 / wall_ms : 0.0;
    fprintf(stderr, "kernel time %.3f ms, wall %.3f ms over %d steps: %ld launches (%.1f per step)\n", total, wall_ms,
            steps, launches, steps ? (double)launches / steps : 0.0);
    fprintf(stderr, "wall: kernels %.1f%%, device idle between a step's kernels %.1f%% (%.2f us a launch), "
                    "outside the steps' device spans (host between steps) %.1f%%\n",
            total * pct, o->prof_gap_ms * pct, launches ? 1e3 * o->prof_gap_ms / (double)launches : 0.0,
            (wall_ms - o->prof_span_ms) * pct);
    if (!o->prof_shapes || !o->prof_nshapes) return;
    qsort(o->prof_shapes, o->prof_nshapes, sizeof *o->prof_shapes, by_time);
    fprintf(stderr, "the %d launch shapes taking the most time (a shape: a kind with its bytes and FLOPs):\n",
            o->prof_nshapes < 16 ? (int)o->prof_nshapes : 16);
    fprintf(stderr, "%-20s %9s %7s %8s %10s %10s %10s %10s\n", "kernel", "ms", "share", "launches", "MB", "GB/s",
            "TFLOP/s", "us/launch");
    for (size_t i = 0; i < o->prof_nshapes && i < 16; i++) {
        const struct prof_shape *h = &o->prof_shapes[i];
        double s = h->ms * 1e-3;
        fprintf(stderr, "%-20s %9.3f %6.1f%% %8ld %10.2f %10.1f %10.3f %10.1f\n", ops_kernel_name(h->kind), h->ms,
                total > 0 ? 100.0 * h->ms / total : 0.0, h->n, h->bytes * 1e-6, s > 0 ? h->bytes * h->n / s / 1e9 : 0,
                s > 0 ? h->flop * h->n / s / 1e12 : 0, 1e3 * h->ms / h->n);
    }
}
