/* choice.h — a step's choice rows beyond a plain pick (engine.h: engine_item's allow, bias and
 * logprobs): the rules of every constrained row in one buffer uploaded once per step, the launches
 * that apply them before the pick, and the device log-probabilities of greedy rows. A step without
 * such rows launches and transfers nothing here. Used by engine.c only. */
#ifndef CLGEMMA_CHOICE_H
#define CLGEMMA_CHOICE_H

#include "engine.h"
#include "ops.h"
#include "runtime.h"

typedef struct choice_plan {
    uint32_t n_vocab, words; /* words: of one allow bitset */
    uint32_t max_rows;       /* choice rows a step may have: max_seqs */
    cl_mem rules;            /* kernels/logits.cl's layout: max_rows descriptors, max_rows logprob
                              * rows, then the bitsets and bias pairs of this step's rows */
    int32_t *h_rules;        /* its host staging */
    size_t used;             /* words of h_rules this step fills */
    cl_mem lp_out;           /* the greedy rows' logprobs: 2 * ENGINE_MAX_LOGPROBS words a row */
    float *h_lp;
    uint32_t n_con, n_lp;    /* this step's constrained rows; greedy rows with logprobs */
    int32_t *con_row, *lp_row; /* their output rows in the step (ascending, as items come) */
    int *lp_k;               /* the logprobs each greedy row asked for */
} choice_plan;

/* buffers for max_rows choice rows of n_vocab logits; 0, or -1 with err */
int  choice_create(choice_plan *c, cl_runtime *rt, uint32_t n_vocab, uint32_t max_rows, char *err, size_t errlen);
void choice_destroy(choice_plan *c);

/* 0 when item's allow / bias / logprobs are valid for n_vocab, else -1 with why */
int choice_check(const engine_item *it, uint32_t n_vocab, char *err, size_t errlen);
/* 1 when the item asks for anything this file does */
int choice_wanted(const engine_item *it);

/* a new step: no rows; then choice_add for each item that choice_wanted, its chosen row being the
 * step's output row `row` (rows ascending), greedy when its sampler is; then choice_upload once */
void choice_begin(choice_plan *c);
void choice_add(choice_plan *c, const engine_item *it, int32_t row, int greedy);
int  choice_upload(choice_plan *c, cl_command_queue q, char *err, size_t errlen);

/* for a chunk of the step holding output rows [r0, r0 + rn) in x: the masks and biases before the
 * pick; the greedy rows' logprobs after it, read back without blocking (the queue is in order: the
 * chunk's blocking read of its ids waits for them). Sticky errors in o. */
int choice_constrain(choice_plan *c, ops *o, cl_mem x, uint32_t r0, uint32_t rn);
int choice_logprobs(choice_plan *c, ops *o, cl_mem x, uint32_t r0, uint32_t rn);
/* the device logprobs of greedy output row `row` into it->lp (chosen: the top one, the argmax) */
void choice_fill(const choice_plan *c, int32_t row, engine_item *it);

#endif
