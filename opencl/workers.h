/* workers.h — a few threads that run one batch of independent jobs beside the caller: the caller and
 * the threads take job indices from one shared counter until none is left. Used by the constraint
 * masks (constrain/pool.c) and the weight upload's copies (models/upload.c). One batch at a time. */
#ifndef CLGEMMA_WORKERS_H
#define CLGEMMA_WORKERS_H

#include <stddef.h>

typedef struct workers workers;
typedef void workers_fn(void *ctx, int i);

/* `threads` helpers beside the caller (0: the caller alone); 0, or -1 with err */
int  workers_create(workers **out, int threads, char *err, size_t errlen);
void workers_destroy(workers *w);    /* NULL is fine */
int  workers_threads(const workers *w);
/* fn(ctx, i) for every i in [0, n), returning when all are done */
void workers_run(workers *w, int n, workers_fn *fn, void *ctx);

#endif
