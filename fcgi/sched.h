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
    int step_tokens; /* tokens per step: every decoding sequence's one, then prompt chunks in what is
                      * left (step_plan.h); 0 = the engine's max_batch_tokens */
    int max_seqs;    /* sequences stepped together (at most the engine's) */
    int max_queue;   /* sequences waiting beyond max_seqs before submissions are refused (a job takes
                      * one per choice: n_prompts * n) */
    double queue_timeout; /* seconds a job may wait for its first prompt to start, then JOB_EXPIRED
                      * (0: as long as it takes) */
    double pass_s;   /* seconds a job that does not fit may be passed by later ones that do; 0: a
                      * quarter of queue_timeout (the rest is the running ones' time to make room),
                      * SCHED_PASS_S without one. Tests set it; the server leaves it 0 */
    int spec;        /* enum spec_mode (spec_step.h): drafts for the choices that may take them */
    int draft_max;   /* their most draft tokens a step, 1..SPEC_MAX_DRAFT (0: SPEC_DRAFT_DEFAULT) */
} sched_opts;

#define SCHED_PASS_S 8.0

/* How a choice ended. */
enum job_end {
    JOB_RUNNING = 0,
    JOB_STOP,        /* the model produced an end-of-generation token, or the reader asked to stop */
    JOB_LENGTH,      /* max_tokens or the context is used up */
    JOB_CANCELLED,   /* the reader cancelled (client gone, drain deadline) */
    JOB_ERROR,       /* engine failure or shutdown; see the message */
    JOB_EXPIRED      /* it waited in the queue past the queue timeout (no slot or KV room came free) */
};

#define SCHED_MAX_N 16 /* choices per prompt at most */

/* one prompt of a job */
typedef struct job_prompt {
    const int32_t *ids;     /* copied */
    int n;                  /* >= 1 */
    int max_tokens;         /* >= 1, for each of its choices */
    const engine_span *spans; /* images' soft tokens among ids (copied); encoded when the prompt starts */
    int n_spans;
    engine_image **images;  /* the spans' images, which the job takes (entries set NULL) */
    int n_images;
} job_prompt;

/* A job: n choices (continuations) of each of its prompts, choice p * n + i being prompt p's i-th.
 * A prompt with several choices (or whose tokens' logprobs are asked for) is prefilled once but for
 * its last token, then its sequence is forked (engine_seq_fork), and each choice steps the last
 * token with its own sampler and goes on alone. */
typedef struct job_spec {
    const job_prompt *prompts; /* copied */
    int n_prompts;          /* >= 1 */
    int n;                  /* choices per prompt, 1..max_seqs: a prompt starts once n slots are free */
    sampler_params sampling;/* choice c draws with seed sampling.seed + c */
    double t_arrival;       /* monotonic seconds when the request arrived (TTFT is measured from it) */
    constraint **con;       /* NULL, or structured output: one per choice (n_prompts * n), which the job
                               owns from sched_submit on, also when the submission is refused */
    const engine_bias *bias;/* logit_bias, copied */
    int n_bias;
    int n_logprobs;         /* 0, or 1..ENGINE_MAX_LOGPROBS: each token comes with its logprobs */
    int prompt_logprobs;    /* with n_logprobs: each prompt token's too (job_prompt_logprobs) */
    int priority;           /* the queue's order: lower first, arrival order within one (default 0) */
    int ignore_eos;         /* an end-of-generation token is output and fed back like any other: only
                               max_tokens or the context ends a choice (load tests) */
} job_spec;

enum { SCHED_OK = 0, SCHED_FULL = 1, SCHED_CLOSED = 2, SCHED_TOO_BIG = 3, SCHED_ENOMEM = -1 };

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
/* the step's token budget in use (sched_opts.step_tokens or its default) */
int  sched_step_tokens(const sched *s);
/* jobs with a running sequence; jobs with a prompt not yet started */
void sched_counts(sched *s, int *active, int *queued);
/* the sizes it runs with (sched_opts as taken); any thread */
void sched_limits(const sched *s, int *max_seqs, int *max_queue);

/* Queues a job: its prompts start in order as slots and KV blocks come free (each prompt's n
 * choices reserve the blocks they can ever take: engine_kv_need), or it expires in the queue.
 * Returns SCHED_OK with *out (release it with job_release), SCHED_FULL (its sequences would take
 * more than the free slots and queue places: running and queued sequences plus n_prompts * n over
 * max_seqs + max_queue), SCHED_CLOSED, SCHED_TOO_BIG (a prompt could never fit the KV cache:
 * kv_budget_whole), or SCHED_ENOMEM (also for a spec out of range). */
int  sched_submit(sched *s, const job_spec *spec, gen_job **out);

/* ---- the request thread's side of a job ---- */

typedef struct job_status {
    enum job_end end;       /* JOB_RUNNING while tokens may still come */
    char error[256];        /* for JOB_ERROR */
} job_status;

/* Choice c's tokens the reader has not seen, without blocking: copies up to cap of them to toks
 * (and their logprobs to lps, when the job has them and lps is not NULL) and returns their count;
 * st->end is set once the choice ended and every token was read. */
int  job_take(gen_job *j, int c, int32_t *toks, engine_logprobs *lps, int cap, job_status *st);
/* Blocks until some choice got a token or ended since *seen (0 before the first call), which it
 * then updates. With timeout_s > 0, returns -1 when that passed first, else 0. */
int  job_wait(gen_job *j, unsigned *seen, double timeout_s);
/* Prompt p's tokens' logprobs (the job's prompt_logprobs): n - 1 entries, entry i for token i + 1
 * (the first token has none). NULL until one of its choices has a token or ended, and when its
 * prefill failed. */
const engine_logprobs *job_prompt_logprobs(gen_job *j, int p);
/* 1 once the engine took the job from the queue (it is in prefill or decoding) */
int  job_started(gen_job *j);
/* prompt tokens the engine did not compute, their KV taken from its prefix cache, summed over the
 * prompts started so far (each prompt once, whatever its n) */
int  job_cached_tokens(gen_job *j);
/* Ask the engine to stop every choice of this job at its next step. client_gone: count it as a
 * cancellation (otherwise the reader just has what it wanted). */
void job_cancel(gen_job *j, int client_gone);
/* The reader has what it wanted from choice c (a stop string): the engine stops it. */
void job_stop_choice(gen_job *j, int c);
/* Drops the reader's reference; the job is freed when the engine thread is done with it too. */
void job_release(gen_job *j);

#endif
