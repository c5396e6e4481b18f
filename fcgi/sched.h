/* sched.h — the engine thread of a worker: a bounded queue of generation jobs, a scheduler loop
 * that steps every running sequence together through engine_step (prefill chunks and decode
 * tokens in one batch), and per-job channels (mutex + condvar) that carry tokens back to the
 * request threads. The engine is touched by the engine thread only. */
#ifndef CLGEMMA_FCGI_SCHED_H
#define CLGEMMA_FCGI_SCHED_H

#include <stddef.h>
#include <stdint.h>
#include "constrain.h"
#include "engine.h"
#include "metrics.h"

typedef struct sched sched;
typedef struct gen_job gen_job;

typedef struct sched_opts {
    int max_seqs;    /* sequences stepped together */
    int max_queue;   /* jobs waiting beyond max_seqs before submissions are refused */
} sched_opts;

/* How a job ended. */
enum job_end {
    JOB_RUNNING = 0,
    JOB_STOP,        /* the model produced an end-of-generation token, or the reader asked to stop */
    JOB_LENGTH,      /* max_tokens or the context is used up */
    JOB_CANCELLED,   /* the reader cancelled (client gone, drain deadline) */
    JOB_ERROR        /* engine failure or shutdown; see the message */
};

typedef struct job_spec {
    const int32_t *prompt;  /* copied */
    int n_prompt;           /* >= 1 */
    int max_tokens;         /* >= 1 */
    sampler_params sampling;
    double t_arrival;       /* monotonic seconds when the request arrived (TTFT is measured from it) */
    constraint *con;        /* NULL, or structured output; the job owns it from sched_submit on,
                               also when the submission is refused */
    const engine_bias *bias;/* logit_bias, copied */
    int n_bias;
    int n_logprobs;         /* 0, or 1..ENGINE_MAX_LOGPROBS: each token comes with its logprobs */
} job_spec;

enum { SCHED_OK = 0, SCHED_FULL = 1, SCHED_CLOSED = 2, SCHED_ENOMEM = -1 };

/* Starts the engine thread; the engine then belongs to it until sched_destroy. */
int  sched_create(sched **out, engine *e, const sched_opts *o, metrics *m, char *err, size_t errlen);
/* The vocabulary's byte strings for structured output (built once with the scheduler; NULL when
 * the engine has no tokenizer). Read-only, for any thread. */
const constraint_vocab *sched_vocab(const sched *s);
/* Stops the engine thread; running and queued jobs end with JOB_ERROR. The engine is the
 * caller's again afterwards. */
void sched_destroy(sched *s);
/* Refuse new jobs from now on (drain). */
void sched_close(sched *s);
/* Cancel every running and queued job (the drain deadline passed). */
void sched_cancel_all(sched *s);
void sched_counts(sched *s, int *active, int *queued);

/* Queues a job. Returns SCHED_OK with *out (release it with job_release), SCHED_FULL,
 * SCHED_CLOSED, or SCHED_ENOMEM. */
int  sched_submit(sched *s, const job_spec *spec, gen_job **out);

/* ---- the request thread's side of a job ---- */

typedef struct job_status {
    enum job_end end;       /* JOB_RUNNING while tokens may still come */
    char error[256];        /* for JOB_ERROR */
} job_status;

/* Blocks until the job has tokens the reader has not seen, or has ended. Copies up to cap of
 * them to toks (and their logprobs to lps, when the job has them and lps is not NULL) and returns
 * their count; st->end is set once the job ended and every token was read. With timeout_s > 0,
 * returns -1 when that passed with nothing new. */
int  job_wait(gen_job *j, int32_t *toks, engine_logprobs *lps, int cap, job_status *st, double timeout_s);
/* 1 once the engine took the job from the queue (it is in prefill or decoding) */
int  job_started(gen_job *j);
/* Ask the engine to stop this job at its next step. client_gone: count it as a cancellation
 * (otherwise the reader just has what it wanted, e.g. a stop string matched). */
void job_cancel(gen_job *j, int client_gone);
/* Drops the reader's reference; the job is freed when the engine thread is done with it too. */
void job_release(gen_job *j);

#endif
