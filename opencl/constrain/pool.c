/* pool.c — a step's masks computed on several threads (constraint_pool in constrain.h): the caller and
 * the pool's threads take constraints from one shared counter until none is left, so a batch of n
 * constrained sequences costs about n / (threads + 1) masks of host time instead of n. */
#include "constrain.h"

#include <pthread.h>
#include <stdlib.h>

#include "errf.h"

struct constraint_pool {
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    pthread_t *th;
    int n_th;
    /* the batch in progress */
    constraint *const *c;
    uint32_t *const *bits;
    int *counts;
    int n, next, busy;   /* next: first not taken; busy: threads still working on this batch */
    unsigned batch;      /* bumped per batch, so a thread takes part once */
    int quit;
};

/* take and do constraints until none is left; called with mu held, returns with it held */
static void work(constraint_pool *p)
{
    while (p->next < p->n) {
        int i = p->next++;
        pthread_mutex_unlock(&p->mu);
        p->counts[i] = constraint_mask(p->c[i], p->bits[i]);
        pthread_mutex_lock(&p->mu);
    }
}

static void *worker(void *arg)
{
    constraint_pool *p = arg;
    unsigned seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->batch == seen) pthread_cond_wait(&p->go, &p->mu);
        if (p->quit) break;
        seen = p->batch;
        p->busy++;
        work(p);
        if (--p->busy == 0) pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int constraint_pool_create(constraint_pool **out, int threads, char *err, size_t errlen)
{
    *out = NULL;
    constraint_pool *p = calloc(1, sizeof *p);
    if (!p) return errf(err, errlen, "out of memory");
    if (threads < 0) threads = 0;
    p->th = calloc((size_t)threads + 1, sizeof *p->th);
    if (!p->th) { free(p); return errf(err, errlen, "out of memory"); }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    for (; p->n_th < threads; p->n_th++)
        if (pthread_create(&p->th[p->n_th], NULL, worker, p)) {
            constraint_pool_destroy(p);
            return errf(err, errlen, "constraint_pool_create: cannot start a thread");
        }
    *out = p;
    return 0;
}

void constraint_pool_destroy(constraint_pool *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_th; i++) pthread_join(p->th[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    free(p->th);
    free(p);
}

void constraint_pool_masks(constraint_pool *p, constraint *const *c, uint32_t *const *bits, int *counts, int n)
{
    if (!p || p->n_th == 0 || n < 2) { /* nothing to share */
        for (int i = 0; i < n; i++) counts[i] = constraint_mask(c[i], bits[i]);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->c = c;
    p->bits = bits;
    p->counts = counts;
    p->n = n;
    p->next = 0;
    p->batch++;
    pthread_cond_broadcast(&p->go);
    p->busy++;
    work(p);
    p->busy--;
    while (p->busy > 0 || p->next < p->n) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
