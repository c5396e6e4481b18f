/* workers.c — see workers.h. */
#include "workers.h"

#include <pthread.h>
#include <stdlib.h>

#include "errf.h"

struct workers {
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    pthread_t *th;
    int n_th;
    /* the batch in progress */
    workers_fn *fn;
    void *ctx;
    int n, next, busy;   /* next: first not taken; busy: threads still working on this batch */
    unsigned batch;      /* bumped per batch, so a thread takes part once */
    int quit;
};

/* take and do jobs until none is left; called with mu held, returns with it held */
static void work(workers *w)
{
    while (w->next < w->n) {
        int i = w->next++;
        pthread_mutex_unlock(&w->mu);
        w->fn(w->ctx, i);
        pthread_mutex_lock(&w->mu);
    }
}

static void *worker(void *arg)
{
    workers *w = arg;
    unsigned seen = 0;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->quit && w->batch == seen) pthread_cond_wait(&w->go, &w->mu);
        if (w->quit) break;
        seen = w->batch;
        w->busy++;
        work(w);
        if (--w->busy == 0) pthread_cond_signal(&w->done);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int workers_create(workers **out, int threads, char *err, size_t errlen)
{
    *out = NULL;
    workers *w = calloc(1, sizeof *w);
    if (!w) return errf(err, errlen, "out of memory");
    if (threads < 0) threads = 0;
    w->th = calloc((size_t)threads + 1, sizeof *w->th);
    if (!w->th) { free(w); return errf(err, errlen, "out of memory"); }
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->go, NULL);
    pthread_cond_init(&w->done, NULL);
    for (; w->n_th < threads; w->n_th++)
        if (pthread_create(&w->th[w->n_th], NULL, worker, w)) {
            workers_destroy(w);
            return errf(err, errlen, "cannot start a worker thread");
        }
    *out = w;
    return 0;
}

void workers_destroy(workers *w)
{
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    w->quit = 1;
    pthread_cond_broadcast(&w->go);
    pthread_mutex_unlock(&w->mu);
    for (int i = 0; i < w->n_th; i++) pthread_join(w->th[i], NULL);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->go);
    pthread_cond_destroy(&w->done);
    free(w->th);
    free(w);
}

int workers_threads(const workers *w) { return w ? w->n_th : 0; }

void workers_run(workers *w, int n, workers_fn *fn, void *ctx)
{
    if (!w || w->n_th == 0 || n < 2) { /* nothing to share */
        for (int i = 0; i < n; i++) fn(ctx, i);
        return;
    }
    pthread_mutex_lock(&w->mu);
    w->fn = fn;
    w->ctx = ctx;
    w->n = n;
    w->next = 0;
    w->batch++;
    pthread_cond_broadcast(&w->go);
    w->busy++;
    work(w);
    w->busy--;
    while (w->busy > 0 || w->next < w->n) pthread_cond_wait(&w->done, &w->mu);
    pthread_mutex_unlock(&w->mu);
}
