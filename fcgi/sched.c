/* sched.c — engine thread, job queue, per-job token channels. */
#include "sched.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "log.h"

enum { CANCEL_NONE = 0, CANCEL_STOP, CANCEL_CLIENT, CANCEL_ALL };

struct gen_job {
    /* fixed at submit */
    int32_t *prompt;
    int n_prompt, max_tokens;
    double t_arrival, t_submit;
    sampler *smp;
    constraint *con;          /* structured output, or NULL */
    uint32_t *allow;          /* its mask, n_vocab bits, remade before each step */
    engine_bias *bias;
    int n_bias, n_logprobs;
    engine_logprobs lp_now;   /* the step's logprobs of this job's token */
    /* engine thread only */
    int seq, prefilled, n_gen;
    int32_t last;
    double t_last, t_first_out, t_last_out; /* any token chosen; first and last token handed out */
    gen_job *next;            /* queue link (under sched.mu) */
    /* shared */
    atomic_int cancel;
    atomic_int started;       /* the engine took it from the queue */
    atomic_int refs;
    pthread_mutex_t mu;       /* guards the channel below */
    pthread_cond_t cv;
    int32_t *toks;            /* generated tokens, capacity max_tokens */
    engine_logprobs *lps;     /* theirs, when n_logprobs > 0 */
    int n_toks, n_read;
    enum job_end end;
    char error[256];
};

struct sched {
    engine *eng;
    metrics *m;
    constraint_vocab *vocab;
    int max_seqs, max_queue;
    pthread_t thread;
    pthread_mutex_t mu;       /* guards everything below */
    pthread_cond_t cv;
    gen_job *head, *tail;
    int n_queued, n_active;
    int stopping, closed;
    atomic_int cancel_all;    /* the drain deadline passed: end every job */
    /* engine thread only */
    gen_job **active;
    engine_item *items;
    int *failed;
};

/* ---- jobs ---- */

static void job_free(gen_job *j)
{
    sampler_destroy(j->smp);
    constraint_destroy(j->con);
    free(j->allow);
    free(j->bias);
    free(j->lps);
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mu);
    free(j->toks);
    free(j->prompt);
    free(j);
}

static void job_unref(gen_job *j)
{
    if (atomic_fetch_sub(&j->refs, 1) == 1) job_free(j);
}

int job_started(gen_job *j)
{
    return atomic_load(&j->started);
}

void job_release(gen_job *j)
{
    if (j) job_unref(j);
}

void job_cancel(gen_job *j, int client_gone)
{
    int none = CANCEL_NONE;
    atomic_compare_exchange_strong(&j->cancel, &none, client_gone ? CANCEL_CLIENT : CANCEL_STOP);
}

int job_wait(gen_job *j, int32_t *toks, engine_logprobs *lps, int cap, job_status *st, double timeout_s)
{
    struct timespec until;
    if (timeout_s > 0) {
        clock_gettime(CLOCK_REALTIME, &until);
        double t = (double)until.tv_nsec / 1e9 + timeout_s;
        until.tv_sec += (time_t)t;
        until.tv_nsec = (long)((t - (double)(time_t)t) * 1e9);
    }
    pthread_mutex_lock(&j->mu);
    while (j->n_read == j->n_toks && j->end == JOB_RUNNING) {
        if (timeout_s <= 0) pthread_cond_wait(&j->cv, &j->mu);
        else if (pthread_cond_timedwait(&j->cv, &j->mu, &until) == ETIMEDOUT) {
            pthread_mutex_unlock(&j->mu);
            st->end = JOB_RUNNING;
            st->error[0] = 0;
            return -1;
        }
    }
    int k = j->n_toks - j->n_read;
    if (k > cap) k = cap;
    memcpy(toks, j->toks + j->n_read, (size_t)k * sizeof *toks);
    if (lps && j->lps) memcpy(lps, j->lps + j->n_read, (size_t)k * sizeof *lps);
    j->n_read += k;
    st->end = j->n_read == j->n_toks ? j->end : JOB_RUNNING;
    snprintf(st->error, sizeof st->error, "%s", j->error);
    pthread_mutex_unlock(&j->mu);
    return k;
}

/* engine thread: hand a token to the reader */
static void job_push(gen_job *j, int32_t tok)
{
    pthread_mutex_lock(&j->mu);
    if (j->n_toks < j->max_tokens) {
        if (j->lps) j->lps[j->n_toks] = j->lp_now;
        j->toks[j->n_toks++] = tok;
    }
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

/* engine thread: the job is over; frees its sequence and drops the scheduler's reference */
static void job_finish(sched *s, gen_job *j, enum job_end end, const char *error)
{
    if (j->n_gen >= 2) metrics_tpot(s->m, (j->t_last_out - j->t_first_out) / (j->n_gen - 1));
    if (j->seq >= 0) engine_seq_free(s->eng, j->seq);
    j->seq = -1;
    if (end == JOB_CANCELLED) {
        int why = atomic_load(&j->cancel);
        if (why == CANCEL_STOP) end = JOB_STOP; /* the reader had what it wanted */
        else metrics_cancel(s->m, why == CANCEL_ALL ? CANCEL_DRAIN : CANCEL_CLIENT_GONE);
    }
    pthread_mutex_lock(&j->mu);
    j->end = end;
    if (error) snprintf(j->error, sizeof j->error, "%s", error);
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    job_unref(j);
}

/* under s->mu: the gauges the pool sees */
static void publish_counts(sched *s)
{
    metrics_load(s->m, s->n_active, s->n_queued);
}

int sched_submit(sched *s, const job_spec *spec, gen_job **out)
{
    *out = NULL;
    if (spec->n_prompt < 1 || spec->max_tokens < 1) { constraint_destroy(spec->con); return SCHED_ENOMEM; }
    gen_job *j = calloc(1, sizeof *j);
    if (!j || pthread_mutex_init(&j->mu, NULL)) { free(j); constraint_destroy(spec->con); return SCHED_ENOMEM; }
    pthread_cond_init(&j->cv, NULL); /* from here job_free undoes everything */
    uint32_t n_vocab = tokenizer_n_vocab(engine_tokenizer(s->eng));
    j->con = spec->con;
    j->prompt = malloc((size_t)spec->n_prompt * sizeof *j->prompt);
    j->toks = malloc((size_t)spec->max_tokens * sizeof *j->toks);
    int oom = !j->prompt || !j->toks;
    if (j->con && !(j->allow = malloc(((size_t)n_vocab + 31) / 32 * sizeof *j->allow))) oom = 1;
    if (spec->n_bias > 0 && !(j->bias = malloc((size_t)spec->n_bias * sizeof *j->bias))) oom = 1;
    if (j->bias) {
        memcpy(j->bias, spec->bias, (size_t)spec->n_bias * sizeof *j->bias);
        j->n_bias = spec->n_bias;
    }
    if (spec->n_logprobs > 0 && !(j->lps = malloc((size_t)spec->max_tokens * sizeof *j->lps))) oom = 1;
    j->n_logprobs = spec->n_logprobs;
    if (oom) { job_free(j); return SCHED_ENOMEM; }
    memcpy(j->prompt, spec->prompt, (size_t)spec->n_prompt * sizeof *j->prompt);
    j->n_prompt = spec->n_prompt;
    j->max_tokens = spec->max_tokens;
    j->t_arrival = spec->t_arrival;
    j->t_submit = monotonic_seconds();
    j->seq = -1;
    atomic_init(&j->cancel, CANCEL_NONE);
    atomic_init(&j->started, 0);
    atomic_init(&j->refs, 2); /* the reader and the scheduler */
    if (sampler_create(&j->smp, &spec->sampling, n_vocab)) {
        j->smp = NULL;
        job_free(j);
        return SCHED_ENOMEM;
    }

    pthread_mutex_lock(&s->mu);
    int rc = SCHED_OK;
    if (s->closed || s->stopping) rc = SCHED_CLOSED;
    else if (s->n_active + s->n_queued >= s->max_seqs + s->max_queue) rc = SCHED_FULL;
    else {
        if (s->tail) s->tail->next = j; else s->head = j;
        s->tail = j;
        s->n_queued++;
        publish_counts(s);
        pthread_cond_signal(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    if (rc != SCHED_OK) { job_free(j); return rc; }
    *out = j;
    return SCHED_OK;
}

/* ---- the engine thread ---- */

/* After a step: deliver item i's token, end the job when it is done. Returns 1 if it ended. */
static int after_step(sched *s, gen_job *j, int32_t tok, double t)
{
    j->prefilled = 1;
    if (j->n_gen == 0) metrics_ttft(s->m, t - j->t_arrival);
    else metrics_itl(s->m, t - j->t_last);
    j->t_last = t;
    engine_stop v = engine_should_stop(s->eng, j->seq, tok, j->n_gen, j->max_tokens);
    if (v == ENGINE_STOP_TOKEN) { job_finish(s, j, JOB_STOP, NULL); return 1; }
    if (j->con && constraint_accept(j->con, tok)) {
        job_finish(s, j, JOB_ERROR, "structured output: the engine chose a token outside the mask");
        return 1;
    }
    if (j->n_gen == 0) j->t_first_out = t;
    j->t_last_out = t;
    j->n_gen++;
    j->last = tok; /* fed back next step; the engine shows it to the sampler then */
    job_push(j, tok);
    if (v == ENGINE_STOP_LENGTH) { job_finish(s, j, JOB_LENGTH, NULL); return 1; }
    return 0;
}

static void fill_item(engine_item *it, gen_job *j)
{
    memset(it, 0, sizeof *it);
    it->seq = j->seq;
    it->tokens = j->prefilled ? &j->last : j->prompt;
    it->n_tokens = j->prefilled ? 1 : j->n_prompt;
    it->smp = j->smp;
    it->allow = j->con ? j->allow : NULL; /* made by make_masks before the step */
    it->bias = j->bias;
    it->n_bias = j->n_bias;
    it->n_logprobs = j->n_logprobs;
    it->lp = j->n_logprobs ? &j->lp_now : NULL;
}

/* the structured-output masks of the step; a job whose grammar allows nothing ends (a bug) */
static int make_masks(sched *s, int n)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        gen_job *j = s->active[i];
        if (j->con && constraint_mask(j->con, j->allow) < 0) {
            job_finish(s, j, JOB_ERROR, "structured output: the grammar allows no token");
            continue;
        }
        s->active[k++] = j;
    }
    return k;
}

static void step_all(sched *s, int n)
{
    char err[256];
    int *failed = s->failed;
    n = make_masks(s, n);
    if (!n) {
        pthread_mutex_lock(&s->mu);
        s->n_active = 0;
        publish_counts(s);
        pthread_mutex_unlock(&s->mu);
        return;
    }
    for (int i = 0; i < n; i++) fill_item(&s->items[i], s->active[i]);
    int rc = engine_step(s->eng, s->items, n, err, sizeof err);
    for (int i = 0; i < n; i++) failed[i] = rc != 0;
    if (rc && n > 1) {
        /* find the culprit: a step refused before the forward (bad item, KV cache full) changed
         * nothing, so run the sequences one at a time */
        for (int i = 0; i < n; i++) {
            fill_item(&s->items[i], s->active[i]);
            failed[i] = engine_step(s->eng, &s->items[i], 1, err, sizeof err) != 0;
        }
    }
    double t = monotonic_seconds();
    int k = 0;
    for (int i = 0; i < n; i++) {
        gen_job *j = s->active[i];
        if (failed[i]) {
            log_line("engine", "engine step failed: %s", err);
            metrics_engine_error(s->m);
            char msg[300];
            snprintf(msg, sizeof msg, "engine failure: %s", err);
            job_finish(s, j, JOB_ERROR, msg);
            continue;
        }
        if (!after_step(s, j, s->items[i].token_out, t)) s->active[k++] = j;
    }
    pthread_mutex_lock(&s->mu);
    s->n_active = k;
    publish_counts(s);
    pthread_mutex_unlock(&s->mu);
}

/* engine thread: the KV pools' blocks for the pool's view (the engine is ours to read here) */
static void publish_kv(sched *s)
{
    engine_kv_stats kv;
    engine_kv_usage(s->eng, &kv);
    metrics_kv(s->m, KVP_FULL, kv.full_blocks, kv.full_free);
    metrics_kv(s->m, KVP_RING, kv.ring_blocks, kv.ring_free);
}

static void *engine_main(void *arg)
{
    sched *s = arg;
    int n = 0; /* running jobs in s->active[0..n) */
    publish_kv(s);
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->stopping && n == 0 && !s->head) pthread_cond_wait(&s->cv, &s->mu);
        if (s->stopping) { pthread_mutex_unlock(&s->mu); break; }
        while (n < s->max_seqs && s->head) {
            gen_job *j = s->head;
            if (atomic_load(&j->cancel) == CANCEL_NONE && !atomic_load(&s->cancel_all)) {
                j->seq = engine_seq_new(s->eng);
                if (j->seq < 0) break; /* KV cache full: wait for a running job to end */
                metrics_queue_wait(s->m, monotonic_seconds() - j->t_submit);
                atomic_store(&j->started, 1);
            }
            s->head = j->next;
            if (!s->head) s->tail = NULL;
            j->next = NULL;
            s->n_queued--;
            s->active[n++] = j;
        }
        s->n_active = n;
        publish_counts(s);
        pthread_mutex_unlock(&s->mu);

        int k = 0;
        for (int i = 0; i < n; i++) {
            gen_job *j = s->active[i];
            if (atomic_load(&s->cancel_all)) {
                int none = CANCEL_NONE;
                atomic_compare_exchange_strong(&j->cancel, &none, CANCEL_ALL);
            }
            if (atomic_load(&j->cancel) != CANCEL_NONE) job_finish(s, j, JOB_CANCELLED, NULL);
            else s->active[k++] = j;
        }
        n = k;
        pthread_mutex_lock(&s->mu);
        s->n_active = n;
        publish_counts(s);
        pthread_mutex_unlock(&s->mu);
        if (n) {
            step_all(s, n);
            pthread_mutex_lock(&s->mu);
            n = s->n_active;
            pthread_mutex_unlock(&s->mu);
        }
        publish_kv(s);
    }
    for (int i = 0; i < n; i++) job_finish(s, s->active[i], JOB_ERROR, "server shutting down");
    pthread_mutex_lock(&s->mu);
    gen_job *q = s->head;
    s->head = s->tail = NULL;
    s->n_queued = s->n_active = 0;
    publish_counts(s);
    pthread_mutex_unlock(&s->mu);
    while (q) {
        gen_job *next = q->next;
        job_finish(s, q, JOB_ERROR, "server shutting down");
        q = next;
    }
    return NULL;
}

int sched_create(sched **out, engine *e, const sched_opts *o, metrics *m, char *err, size_t errlen)
{
    sched *s = calloc(1, sizeof *s);
    if (!s) { snprintf(err, errlen, "out of memory"); return -1; }
    s->eng = e;
    s->m = m;
    if (engine_tokenizer(e) && constraint_vocab_create(&s->vocab, engine_tokenizer(e), err, errlen)) {
        free(s);
        return -1;
    }
    s->max_seqs = o->max_seqs > 0 ? o->max_seqs : 1;
    s->max_queue = o->max_queue >= 0 ? o->max_queue : 0;
    s->active = calloc((size_t)s->max_seqs, sizeof *s->active);
    s->items = calloc((size_t)s->max_seqs, sizeof *s->items);
    s->failed = calloc((size_t)s->max_seqs, sizeof *s->failed);
    if (!s->active || !s->items || !s->failed) {
        constraint_vocab_destroy(s->vocab);
        free(s->active); free(s->items); free(s->failed); free(s);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    atomic_init(&s->cancel_all, 0);
    int rc = pthread_create(&s->thread, NULL, engine_main, s);
    if (rc) {
        snprintf(err, errlen, "cannot start the engine thread: %s", strerror(rc));
        pthread_cond_destroy(&s->cv);
        pthread_mutex_destroy(&s->mu);
        constraint_vocab_destroy(s->vocab);
        free(s->active); free(s->items); free(s->failed); free(s);
        return -1;
    }
    *out = s;
    return 0;
}

void sched_destroy(sched *s)
{
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    constraint_vocab_destroy(s->vocab);
    free(s->active);
    free(s->items);
    free(s->failed);
    free(s);
}

const constraint_vocab *sched_vocab(const sched *s)
{
    return s->vocab;
}

void sched_close(sched *s)
{
    pthread_mutex_lock(&s->mu);
    s->closed = 1;
    pthread_mutex_unlock(&s->mu);
}

void sched_cancel_all(sched *s)
{
    pthread_mutex_lock(&s->mu);
    atomic_store(&s->cancel_all, 1);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

void sched_counts(sched *s, int *active, int *queued)
{
    pthread_mutex_lock(&s->mu);
    *active = s->n_active;
    *queued = s->n_queued;
    pthread_mutex_unlock(&s->mu);
}
