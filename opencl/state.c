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

uint64_t state_ck_bytes(uint32_t n_layer, const uint32_t *floats, const uint32_t *rows)
{
    uint64_t n = 0;
    for (uint32_t l = 0; floats && rows && l < n_layer; l++) n += floats[l] ? (uint64_t)STATE_CK_ROWS * rows[l] : 0;
    return state_per_seq(n_layer, floats) + 4 * n;
}

/* one layer's buffer of b bytes for n_seq sequences, checked against the device's largest allocation */
static int layer_buf(cl_runtime *rt, cl_mem *out, uint64_t b, const char *what, uint32_t l, uint32_t n_seq,
                     char *err, size_t errlen)
{
    if (b > rt->max_alloc)
        return ERR("the recurrent %s of layer %u for %u sequences (%.1f MiB) exceeds one buffer (max allocation "
                   "%.1f MiB): fewer sequences (max_seqs)", what, l, n_seq, b / 1048576.0, rt->max_alloc / 1048576.0);
    return (*out = rt_alloc(rt, b, NULL, err, errlen)) ? 0 : -1;
}

int state_create(state_store **out, cl_runtime *rt, uint32_t n_layer, const uint32_t *floats, const uint32_t *rows,
                 uint32_t n_seq, uint32_t n_ck, uint32_t n_snap, char *err, size_t errlen)
{
    *out = NULL;
    state_store *s = calloc(1, sizeof *s);
    if (!s) return ERR("out of memory");
    if (!rows) n_ck = 0;
    uint32_t n_slots = n_seq + n_ck + n_snap;
    s->n_layer = n_layer;
    s->n_seq = n_seq;
    s->n_ck = n_ck;
    s->n_snap = n_snap;
    s->n_slots = n_slots;
    s->floats = calloc(n_layer, sizeof *s->floats);
    s->buf = calloc(n_layer, sizeof *s->buf);
    s->copies = calloc(n_slots ? n_slots : 1, sizeof *s->copies);
    s->broken = calloc(n_slots ? n_slots : 1, 1);
    if (!s->floats || !s->buf || !s->copies || !s->broken) { state_destroy(s); return ERR("out of memory"); }
    memcpy(s->floats, floats, n_layer * sizeof *floats);
    s->per_seq = state_per_seq(n_layer, floats);
    s->ck_of = malloc((n_seq ? n_seq : 1) * sizeof *s->ck_of);
    s->row_floats = calloc(n_layer, sizeof *s->row_floats);
    s->rows = calloc(n_layer, sizeof *s->rows);
    s->ck_pos = calloc(n_ck ? n_ck : 1, sizeof *s->ck_pos);
    s->ck_len = calloc(n_ck ? n_ck : 1, sizeof *s->ck_len);
    s->snap_owner = malloc((n_snap ? n_snap : 1) * sizeof *s->snap_owner);
    s->snap_used = calloc(n_snap ? n_snap : 1, sizeof *s->snap_used);
    if (!s->ck_of || !s->row_floats || !s->rows || !s->ck_pos || !s->ck_len || !s->snap_owner || !s->snap_used) {
        state_destroy(s);
        return ERR("out of memory");
    }
    for (uint32_t i = 0; i < n_seq; i++) s->ck_of[i] = -1;
    for (uint32_t i = 0; i < n_snap; i++) s->snap_owner[i] = -1;
    if (n_ck) {
        memcpy(s->row_floats, rows, n_layer * sizeof *rows);
        s->ck_bytes = state_ck_bytes(n_layer, floats, rows);
    }
    for (uint32_t l = 0; l < n_layer; l++) {
        if (!floats[l]) continue;
        uint64_t b = 4ull * floats[l] * n_slots, r = 4ull * s->row_floats[l] * STATE_CK_ROWS * n_ck;
        if (layer_buf(rt, &s->buf[l], b, "state", l, n_seq, err, errlen) ||
            (r && layer_buf(rt, &s->rows[l], r, "state's replay rows", l, n_seq, err, errlen))) {
            state_destroy(s);
            return -1;
        }
        s->bytes += b + r;
    }
    *out = s;
    return 0;
}

void state_destroy(state_store *s)
{
    if (!s) return;
    for (uint32_t l = 0; s->buf && l < s->n_layer; l++)
        if (s->buf[l]) clReleaseMemObject(s->buf[l]);
    for (uint32_t l = 0; s->rows && l < s->n_layer; l++)
        if (s->rows[l]) clReleaseMemObject(s->rows[l]);
    free(s->buf);
    free(s->rows);
    free(s->row_floats);
    free(s->ck_of);
    free(s->ck_pos);
    free(s->ck_len);
    free(s->snap_owner);
    free(s->snap_used);
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
    if ((uint32_t)slot < s->n_seq) s->ck_of[slot] = -1; /* its checkpoint, if any, waits for the next step */
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

void state_step_begin(state_store *s)
{
    for (uint32_t j = 0; j < s->ck_used; j++) state_release(s, (int)(s->n_seq + j)); /* a copy not yet made */
    for (uint32_t i = 0; i < s->n_seq; i++) s->ck_of[i] = -1;
    s->ck_used = 0;
}

int state_checkpoint(state_store *s, int seq, int32_t pos, int32_t n)
{
    if (n < 2 || n > STATE_CK_ROWS || s->ck_used == s->n_ck || s->ck_of[seq] >= 0) return 0;
    int32_t j = (int32_t)s->ck_used++;
    s->copies[s->n_copies++] = (state_copy){ seq, (int32_t)s->n_seq + j }; /* ck slots: never a copy's target yet */
    s->ck_of[seq] = j;
    s->ck_pos[j] = pos;
    s->ck_len[j] = n;
    return 1;
}

int state_restore(state_store *s, cl_runtime *rt, int seq, int32_t n, char *err, size_t errlen)
{
    int32_t j = s->ck_of[seq];
    if (j < 0 || n < 0 || n > s->ck_len[j]) return ERR("no checkpoint of the recurrent state within the last step");
    if (s->ck_pos[j] == 0) /* the forward zeroed the slot after the checkpoint copied it */
        return state_zero(s, rt->q, seq) ? ERR("zeroing a sequence's state failed") : 0;
    for (uint32_t l = 0; l < s->n_layer; l++) {
        if (!s->buf[l]) continue;
        size_t b = 4 * (size_t)s->floats[l];
        cl_int ce = clEnqueueCopyBuffer(rt->q, s->buf[l], s->buf[l], b * (s->n_seq + (size_t)j), b * (size_t)seq, b,
                                        0, NULL, NULL);
        if (ce) return ERR("restoring a sequence's recurrent state failed: %s", rt_errstr(ce));
    }
    return 0;
}

int state_snapshot(state_store *s, int seq, int32_t owner, int32_t *evicted)
{
    *evicted = -1;
    if (!s->n_snap) return -1;
    uint32_t j = 0;
    for (uint32_t i = 0; i < s->n_snap; i++) { /* a free one first, else the least recently used */
        if (s->snap_owner[i] < 0) { j = i; break; }
        if (s->snap_used[i] < s->snap_used[j]) j = i;
    }
    *evicted = s->snap_owner[j];
    int slot = (int)(s->n_seq + s->n_ck + j);
    state_release(s, slot); /* a copy into it not yet made is moot */
    s->copies[s->n_copies++] = (state_copy){ seq, slot };
    s->broken[slot] = s->broken[seq];
    s->snap_owner[j] = owner;
    s->snap_used[j] = ++s->snap_tick;
    return (int)j;
}

void state_snapshot_drop(state_store *s, int snap)
{
    state_release(s, (int)(s->n_seq + s->n_ck + (uint32_t)snap));
    s->snap_owner[snap] = -1;
    s->snap_used[snap] = 0;
}

void state_from_snapshot(state_store *s, int snap, int seq)
{
    state_fork(s, (int)(s->n_seq + s->n_ck + (uint32_t)snap), seq);
    s->snap_used[snap] = ++s->snap_tick;
}
