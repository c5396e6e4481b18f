/* host_table.c — see host_table.h */
#include "host_table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "errf.h"

int host_table_open(host_table *h, const gguf_tensor *t, gguf_bytes_fn make, char *err, size_t errlen)
{
    memset(h, 0, sizeof *h);
    h->t = t;
    h->rows = (uint32_t)(t->ne[1] * t->ne[2] * t->ne[3]);
    h->row_bytes = (size_t)ggml_row_bytes(t->type, t->ne[0]);
    h->data = t->data;
    if (h->data) return 0;
    if (!make) return ERR("model: tensor '%.*s' has no data in the file", (int)t->name.len, t->name.ptr);
    /* synthetic: address space for the whole table, memory only for the rows made */
    h->made_bytes = h->row_bytes * h->rows;
    void *p = mmap(NULL, h->made_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    h->have = calloc((h->rows + 7) / 8, 1);
    if (p == MAP_FAILED || !h->have) {
        if (p != MAP_FAILED) munmap(p, h->made_bytes);
        free(h->have);
        memset(h, 0, sizeof *h);
        return ERR("out of host memory for the synthetic table '%.*s'", (int)t->name.len, t->name.ptr);
    }
    h->made = p;
    h->make = make;
    return 0;
}

static int wait_upload(host_table *h, char *err, size_t errlen)
{
    if (!h->ev) return 0;
    cl_int e = clWaitForEvents(1, &h->ev);
    clReleaseEvent(h->ev);
    h->ev = NULL;
    return e ? ERR("upload of '%.*s' rows failed: %s", (int)h->t->name.len, h->t->name.ptr, rt_errstr(e)) : 0;
}

static void release_stage(host_table *h)
{
    if (h->stage) clEnqueueUnmapMemObject(h->q, h->pinned, h->stage, 0, NULL, NULL);
    if (h->q) clFinish(h->q);
    cl_mem *ms[] = { &h->pinned, &h->dev, &h->iota };
    for (int i = 0; i < 3; i++)
        if (*ms[i]) clReleaseMemObject(*ms[i]);
    h->pinned = h->dev = h->iota = NULL;
    h->stage = NULL;
}

int host_table_stage(host_table *h, cl_runtime *rt, uint32_t max_tok, char *err, size_t errlen)
{
    if (wait_upload(h, err, errlen)) return -1;
    release_stage(h);
    h->q = rt->q;
    h->max_tok = max_tok;
    size_t bytes = h->row_bytes * max_tok;
    cl_int e;
    h->pinned = clCreateBuffer(rt->ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, bytes, NULL, &e);
    if (h->pinned)
        h->stage = clEnqueueMapBuffer(rt->q, h->pinned, CL_TRUE, CL_MAP_WRITE, 0, bytes, 0, NULL, NULL, &e);
    if (!h->stage) return ERR("host staging of %.1f MiB for '%.*s': %s", bytes / 1048576.0, (int)h->t->name.len,
                              h->t->name.ptr, rt_errstr(e));
    int32_t *iota = malloc(sizeof(int32_t) * max_tok);
    if (!iota) return ERR("out of host memory for table staging");
    for (uint32_t i = 0; i < max_tok; i++) iota[i] = (int32_t)i;
    h->dev = rt_alloc(rt, bytes, NULL, err, errlen);
    h->iota = h->dev ? rt_alloc(rt, sizeof(int32_t) * max_tok, iota, err, errlen) : NULL;
    free(iota);
    return h->iota ? 0 : -1;
}

/* row r of the table, made first where it is synthetic */
static const uint8_t *row_at(host_table *h, uint32_t r, char *err, size_t errlen)
{
    if (h->data) return h->data + (size_t)r * h->row_bytes;
    uint8_t *p = h->made + (size_t)r * h->row_bytes;
    if (!(h->have[r / 8] >> (r % 8) & 1)) {
        if (h->make(h->t, (uint64_t)r * h->row_bytes, h->row_bytes, p, err, errlen)) return NULL;
        h->have[r / 8] |= (uint8_t)(1u << (r % 8));
    }
    return p;
}

int host_table_gather(host_table *h, cl_runtime *rt, const int32_t *ids, uint32_t n, weight *w, cl_mem *idx,
                      char *err, size_t errlen)
{
    if (n > h->max_tok) return ERR("internal: %u rows of '%.*s' for staging of %u", n, (int)h->t->name.len,
                                   h->t->name.ptr, h->max_tok);
    /* the previous forward's copy may still be reading the staging (non-blocking upload) */
    if (wait_upload(h, err, errlen)) return -1;
    for (uint32_t i = 0; i < n; i++) {
        if (ids[i] < 0 || (uint32_t)ids[i] >= h->rows)
            return ERR("token id %d out of range for '%.*s' (%u rows)", ids[i], (int)h->t->name.len, h->t->name.ptr,
                       h->rows);
        const uint8_t *r = row_at(h, (uint32_t)ids[i], err, errlen);
        if (!r) return -1;
        memcpy(h->stage + (size_t)i * h->row_bytes, r, h->row_bytes);
    }
    cl_int e = clEnqueueWriteBuffer(rt->q, h->dev, CL_FALSE, 0, h->row_bytes * n, h->stage, 0, NULL, &h->ev);
    if (e) return ERR("upload of '%.*s' rows failed: %s", (int)h->t->name.len, h->t->name.ptr, rt_errstr(e));
    *w = (weight){ h->dev, h->t->type, n, (uint32_t)h->t->ne[0], (uint32_t)h->row_bytes };
    *idx = h->iota;
    return 0;
}

void host_table_close(host_table *h)
{
    if (h->ev) {
        clWaitForEvents(1, &h->ev);
        clReleaseEvent(h->ev);
    }
    release_stage(h);
    if (h->made) munmap(h->made, h->made_bytes);
    free(h->have);
    memset(h, 0, sizeof *h);
}
