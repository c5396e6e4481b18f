/* state.c — the recurrent state store of hybrid models (state.h). */
#include "state.h"

#include <stdlib.h>
#include <string.h>

#include "errf.h"

uint64_t state_per_seq(uint32_t n_layer, const uint32_t *floats)
{
    uint64_t n = 0;
    for (uint32_t l = 0; floats && l < n_layer; l++) n += floats[l];
    return 4 * n;
}

int state_create(state_store **out, cl_runtime *rt, uint32_t n_layer, const uint32_t *floats, uint32_t n_slots,
                 char *err, size_t errlen)
{
    *out = NULL;
    state_store *s = calloc(1, sizeof *s);
    if (!s) return ERR("out of memory");
    s->n_layer = n_layer;
    s->n_slots = n_slots;
    s->floats = calloc(n_layer, sizeof *s->floats);
    s->buf = calloc(n_layer, sizeof *s->buf);
    s->copies = calloc(n_slots ? n_slots : 1, sizeof *s->copies);
    s->broken = calloc(n_slots ? n_slots : 1, 1);
    if (!s->floats || !s->buf || !s->copies || !s->broken) { state_destroy(s); return ERR("out of memory"); }
    memcpy(s->floats, floats, n_layer * sizeof *floats);
    s->per_seq = state_per_seq(n_layer, floats);
    for (uint32_t l = 0; l < n_layer; l++) {
        if (!floats[l]) continue;
        uint64_t b = 4ull * floats[l] * n_slots;
        if (b > rt->max_alloc) {
            state_destroy(s);
            return ERR("the recurrent state of layer %u for %u sequences (%.1f MiB) exceeds one buffer (max "
                       "allocation %.1f MiB): fewer sequences (max_seqs)", l, n_slots, b / 1048576.0,
                       rt->max_alloc / 1048576.0);
        }
        if (!(s->buf[l] = rt_alloc(rt, b, NULL, err, errlen))) { state_destroy(s); return -1; }
        s->bytes += b;
    }
    *out = s;
    return 0;
}

void state_destroy(state_store *s)
{
    if (!s) return;
    for (uint32_t l = 0; s->buf && l < s->n_layer; l++)
        if (s->buf[l]) clReleaseMemObject(s->buf[l]);
    free(s->buf);
    free(s->floats);
    free(s->copies);
    free(s->broken);
    free(s);
}

void state_fork(state_store *s, int src, int dst)
{
    state_release(s, dst);
    s->copies[s->n_copies++] = (state_copy){ src, dst };
    s->broken[dst] = s->broken[src];
}

void state_release(state_store *s, int slot)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < s->n_copies; i++)
        if (s->copies[i].dst != slot) s->copies[k++] = s->copies[i];
    s->n_copies = k;
    s->broken[slot] = 0;
}

void state_mark_broken(state_store *s, int slot) { s->broken[slot] = 1; }
int state_broken(const state_store *s, int slot) { return s->broken[slot]; }

int state_sync(state_store *s, cl_runtime *rt, char *err, size_t errlen)
{
    for (uint32_t i = 0; i < s->n_copies; i++)
        for (uint32_t l = 0; l < s->n_layer; l++) {
            if (!s->buf[l]) continue;
            size_t b = 4 * (size_t)s->floats[l];
            cl_int ce = clEnqueueCopyBuffer(rt->q, s->buf[l], s->buf[l], b * (size_t)s->copies[i].src,
                                            b * (size_t)s->copies[i].dst, b, 0, NULL, NULL);
            if (ce) return ERR("copying a forked sequence's recurrent state failed: %s", rt_errstr(ce));
        }
    s->n_copies = 0;
    return 0;
}

int state_zero(const state_store *s, cl_command_queue q, int slot)
{
    const float zero = 0.0f;
    for (uint32_t l = 0; l < s->n_layer; l++) {
        if (!s->buf[l]) continue;
        size_t b = 4 * (size_t)s->floats[l];
        cl_int ce = clEnqueueFillBuffer(q, s->buf[l], &zero, sizeof zero, b * (size_t)slot, b, 0, NULL, NULL);
        if (ce) return ce;
    }
    return 0;
}
