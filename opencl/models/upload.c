/* upload.c — see upload.h. The slots are filled in turn; a slot is reused once its last write has
 * completed (the runtime's queue is in order, so its earlier writes have too). Small puts share a
 * slot, so a norm vector costs one queued write and no wait. */
#include "upload.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "errf.h"
#include "workers.h"

enum {
    UPLOAD_SLOTS = 4,
    UPLOAD_THREADS = 8,          /* copy threads at most, the caller included */
};
#define UPLOAD_SLOT_MAX ((size_t)64 << 20)
#define UPLOAD_SLOT_MIN ((size_t)64 << 10)
#define UPLOAD_PAR_MIN ((size_t)1 << 20)  /* below it the caller copies alone: waking threads costs more */
#define UPLOAD_ALIGN ((size_t)256)        /* where a put starts in a slot: aligned for the DMA engine */
#define UPLOAD_PART_ALIGN ((size_t)4096)  /* the threads' parts start on pages of the mapping */

struct uploader {
    cl_runtime *rt;
    size_t slot_bytes;
    int n_slots;
    cl_mem stage[UPLOAD_SLOTS];
    uint8_t *host[UPLOAD_SLOTS]; /* the slots mapped once, pinned */
    cl_event last[UPLOAD_SLOTS]; /* the latest write out of each slot */
    int cur;                     /* the slot being filled */
    size_t used;                 /* its bytes taken */
    /* the copy threads and the copy in progress */
    workers *w;
    int parts;
    uint8_t *dst;
    const uint8_t *src;
    size_t n;
    char err[256];               /* the first error ("" while none): sticky */
};

static size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

__attribute__((format(printf, 2, 3))) static int fail(uploader *u, const char *fmt, ...)
{
    if (!u->err[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(u->err, sizeof u->err, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* ---- the copy threads ----------------------------------------------------------------------- */

static void copy_part(void *ctx, int part)
{
    const uploader *u = ctx;
    size_t per = round_up((u->n + u->parts - 1) / u->parts, UPLOAD_PART_ALIGN);
    size_t a = per * (size_t)part;
    if (a >= u->n) return;
    memcpy(u->dst + a, u->src + a, per < u->n - a ? per : u->n - a);
}

/* dst = src[0, n), a contiguous part per thread: their page faults on the file run in parallel */
static void copy(uploader *u, uint8_t *dst, const uint8_t *src, size_t n)
{
    if (n < UPLOAD_PAR_MIN) {
        memcpy(dst, src, n);
        return;
    }
    u->dst = dst;
    u->src = src;
    u->n = n;
    workers_run(u->w, u->parts, copy_part, u);
}

/* ---- the slots ------------------------------------------------------------------------------ */

/* waits for slot s's writes and checks they succeeded */
static int slot_wait(uploader *u, int s)
{
    if (!u->last[s]) return 0;
    cl_int st = CL_COMPLETE;
    cl_int e = clWaitForEvents(1, &u->last[s]);
    if (!e) e = clGetEventInfo(u->last[s], CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL);
    clReleaseEvent(u->last[s]);
    u->last[s] = NULL;
    if (e || st < 0) return fail(u, "upload: a write to the device failed: %s", rt_errstr(e ? e : st));
    return 0;
}

/* the next slot in the ring, once the device has read it */
static int slot_next(uploader *u)
{
    clFlush(u->rt->q);
    u->cur = (u->cur + 1) % u->n_slots;
    u->used = 0;
    return slot_wait(u, u->cur);
}

int upload_create(uploader **out, cl_runtime *rt, uint64_t total, char *err, size_t errlen)
{
    *out = NULL;
    uploader *u = calloc(1, sizeof *u);
    if (!u) return ERR("upload: out of memory");
    u->rt = rt;
    /* a share of the total per slot, within [64 KiB, 64 MiB]: a small model pins no more than itself */
    size_t slot = round_up((size_t)((total + UPLOAD_SLOTS - 1) / UPLOAD_SLOTS), UPLOAD_SLOT_MIN);
    if (slot < UPLOAD_SLOT_MIN) slot = UPLOAD_SLOT_MIN;
    if (slot > UPLOAD_SLOT_MAX) slot = UPLOAD_SLOT_MAX;
    uint64_t need = (total + slot - 1) / slot;
    u->slot_bytes = slot;
    u->n_slots = need < 1 ? 1 : need > UPLOAD_SLOTS ? UPLOAD_SLOTS : (int)need;
    for (int s = 0; s < u->n_slots; s++) {
        cl_int e = CL_SUCCESS;
        u->stage[s] = clCreateBuffer(rt->ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, slot, NULL, &e);
        if (u->stage[s])
            u->host[s] = clEnqueueMapBuffer(rt->q, u->stage[s], CL_TRUE, CL_MAP_WRITE_INVALIDATE_REGION, 0, slot, 0,
                                            NULL, NULL, &e);
        if (!u->host[s]) {
            upload_destroy(u);
            return ERR("upload: pinned staging of %.1f MiB: %s", slot / 1048576.0, rt_errstr(e));
        }
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    u->parts = cpus < 1 ? 1 : cpus > UPLOAD_THREADS ? UPLOAD_THREADS : (int)cpus;
    char why[128];
    if (workers_create(&u->w, u->parts - 1, why, sizeof why)) {
        upload_destroy(u);
        return ERR("upload: %s", why);
    }
    *out = u;
    return 0;
}

void upload_destroy(uploader *u)
{
    if (!u) return;
    clFinish(u->rt->q); /* the device may still read the slots */
    for (int s = 0; s < u->n_slots; s++) {
        if (u->last[s]) clReleaseEvent(u->last[s]);
        if (u->host[s]) clEnqueueUnmapMemObject(u->rt->q, u->stage[s], u->host[s], 0, NULL, NULL);
        if (u->stage[s]) clReleaseMemObject(u->stage[s]);
    }
    clFinish(u->rt->q);
    workers_destroy(u->w);
    free(u);
}

int upload_put(uploader *u, cl_mem dst, size_t dst_off, const void *src, size_t n)
{
    if (u->err[0]) return -1;
    size_t size = 0;
    cl_int e = clGetMemObjectInfo(dst, CL_MEM_SIZE, sizeof size, &size, NULL);
    if (e) return fail(u, "upload: the destination is not a buffer: %s", rt_errstr(e));
    if (dst_off > size || n > size - dst_off)
        return fail(u, "upload: %zu bytes at offset %zu overrun a buffer of %zu bytes", n, dst_off, size);
    const uint8_t *p = src;
    while (n) {
        if (u->used == u->slot_bytes && slot_next(u)) return -1;
        size_t take = u->slot_bytes - u->used < n ? u->slot_bytes - u->used : n;
        uint8_t *stage = u->host[u->cur] + u->used;
        copy(u, stage, p, take);
        cl_event ev;
        e = clEnqueueWriteBuffer(u->rt->q, dst, CL_FALSE, dst_off, take, stage, 0, NULL, &ev);
        if (e) return fail(u, "upload: writing %zu bytes at offset %zu: %s", take, dst_off, rt_errstr(e));
        if (u->last[u->cur]) clReleaseEvent(u->last[u->cur]);
        u->last[u->cur] = ev;
        u->used = round_up(u->used + take, UPLOAD_ALIGN); /* slot_bytes is a multiple of it */
        if (take >= UPLOAD_PAR_MIN) clFlush(u->rt->q); /* the device reads this while the next part fills */
        p += take;
        dst_off += take;
        n -= take;
    }
    return 0;
}

int upload_finish(uploader *u, char *err, size_t errlen)
{
    cl_int e = clFinish(u->rt->q);
    if (e) fail(u, "upload: waiting for the writes: %s", rt_errstr(e));
    for (int s = 0; s < u->n_slots; s++) slot_wait(u, s);
    u->cur = 0;
    u->used = 0;
    return u->err[0] ? ERR("%s", u->err) : 0;
}
