/* draw.h — a step's sampled rows drawn from their best values on the device: one launch per chunk finds
 * each row's best k (plus the values the penalties change) and reads back kilobytes instead of the row
 * (a 262k vocabulary is 1 MiB a row and a host scan of ~1.4 ms). Rows with logprobs, or with more
 * penalized tokens or candidates than fit, keep the whole-row path. Used by engine.c only. */
#ifndef CLGEMMA_DRAW_H
#define CLGEMMA_DRAW_H

#include "engine.h"
#include "ops.h"
#include "runtime.h"

#define DRAW_MAX_PEN 256 /* penalized tokens a device-drawn row may have */

typedef struct draw_plan {
    uint32_t n_vocab, max_rows;
    cl_mem req;        /* descriptors {row, k, pen_off, n_pen} per row, then the penalized tokens */
    int32_t *h_req;
    cl_mem pval, out;  /* the penalized tokens' values (at their tokens' offsets in req); per row
                        * OPS_SAMPLE_MAXK candidate values, then their ids */
    float *h_pval;
    void *h_out;
    uint32_t n, used;  /* this step's rows; words of h_req's token area in use */
    int32_t *row;      /* their output rows in the step (ascending) */
} draw_plan;

int  draw_create(draw_plan *d, cl_runtime *rt, uint32_t n_vocab, uint32_t max_rows, char *err, size_t errlen);
void draw_destroy(draw_plan *d);

/* a new step; then draw_add for each sampled item's output row (ascending), 1 when the row is drawn here;
 * then draw_upload once */
void draw_begin(draw_plan *d);
int  draw_add(draw_plan *d, const engine_item *it, int32_t row);
int  draw_upload(draw_plan *d, cl_command_queue q, char *err, size_t errlen);
/* for a chunk holding output rows [r0, r0 + rn) of x: the launch and its non-blocking reads (the chunk's
 * blocking read of its ids waits for them). Sticky errors in o. */
int  draw_launch(draw_plan *d, ops *o, cl_mem x, uint32_t r0, uint32_t rn);
/* the token of output row `row` if draw_add took it (after sampler_accept of the step's tokens), else -1 (the
 * caller draws from the whole row) */
int32_t draw_pick(draw_plan *d, int32_t row, sampler *smp);

#endif
