/* pool.c — a step's masks computed on several threads (constraint_pool in constrain.h): the constraints
 * are the jobs of one workers batch, so n constrained sequences cost about n / (threads + 1) masks of
 * host time instead of n. */
#include "constrain.h"

#include <stdlib.h>

#include "errf.h"
#include "workers.h"

struct constraint_pool {
    workers *w;
    /* the batch in progress */
    constraint *const *c;
    uint32_t *const *bits;
    int *counts;
};

static void mask_one(void *ctx, int i)
{
    constraint_pool *p = ctx;
    p->counts[i] = constraint_mask(p->c[i], p->bits[i]);
}

int constraint_pool_create(constraint_pool **out, int threads, char *err, size_t errlen)
{
    *out = NULL;
    constraint_pool *p = calloc(1, sizeof *p);
    if (!p) return errf(err, errlen, "out of memory");
    if (workers_create(&p->w, threads, err, errlen)) { free(p); return -1; }
    *out = p;
    return 0;
}

void constraint_pool_destroy(constraint_pool *p)
{
    if (!p) return;
    workers_destroy(p->w);
    free(p);
}

void constraint_pool_masks(constraint_pool *p, constraint *const *c, uint32_t *const *bits, int *counts, int n)
{
    constraint_pool one = { NULL, c, bits, counts };
    if (!p) p = &one;
    p->c = c;
    p->bits = bits;
    p->counts = counts;
    workers_run(p->w, n, mask_one, p);
}
