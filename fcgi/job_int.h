/* job_int.h — a generation job as the scheduler and its readers share it: its prompts (groups) and
 * choices, their token channels, and the calls the engine thread makes on it (job.c); sched.h has
 * the readers' side. Private to fcgi/sched.c and fcgi/job.c. */
#ifndef CLGEMMA_JOB_INT_H
#define CLGEMMA_JOB_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "sched.h"
#include "spec_step.h"

enum { CANCEL_NONE = 0, CANCEL_STOP, CANCEL_CLIENT, CANCEL_ALL };

/* where a choice is: its prompt not started; the prompt going into a group's first choice (the
 * other n - 1 slots kept for its forks); generating; ended */
enum { PH_WAIT, PH_PROMPT, PH_DECODE, PH_ENDED };

/* one choice: a sequence of the engine's (engine thread) and the channel of its tokens (under mu) */
typedef struct job_choice {
    int seq, phase, fed, n_gen; /* fed: prompt tokens in its KV (PH_PROMPT) */
    int32_t last;
    sampler *smp;
    constraint *con;          /* structured output, or NULL */
    uint32_t *allow;          /* its mask, n_vocab bits, remade before each step */
    engine_logprobs lp_now;   /* the step's logprobs of its token */
    double t_last, t_first_out, t_last_out; /* any token chosen; first and last token handed out */
    atomic_int stop;          /* the reader has what it wanted from it */
    int held;                 /* it counts in its prompt's KV reservation */
    int32_t *toks;            /* generated tokens, capacity the group's max_tokens */
    spec_seq sp;              /* its drafts (off unless the job may take them: spec_step.h) */
    engine_logprobs *lps;     /* theirs, when n_logprobs > 0 */
    int n_toks, n_read;
    enum job_end end;
} job_choice;

/* one prompt and its n choices */
typedef struct job_group {
    int32_t *prompt;
    int n_prompt, max_tokens;
    float *rows;              /* PH_PROMPT with prompt logprobs (PLP_PIECE rows of logits) or forks to
                               * come (the last prompt token's row, which they choose from) */
    engine_logprobs *plp;     /* prompt logprobs, token i + 1's at i */
    int plp_ready;            /* under mu */
    int holding;              /* its choices that count in its KV reservation (engine thread) */
    engine_span *spans;       /* its images' soft tokens in prompt (owned) */
    engine_span *cut;         /* the spans of the prompt chunk being stepped (n_spans entries) */
    int n_spans;
    engine_image **images;    /* owned */
    int n_images;
    int pinned;               /* its images are encoded and pinned (engine thread) */
} job_group;

struct gen_job {
    /* fixed at submit */
    int n_groups, n, n_choices;
    job_group *g;
    job_choice *ch;
    double t_arrival, t_submit;
    engine_bias *bias;
    int n_bias, n_logprobs, prompt_lp, ignore_eos, priority;
    /* engine thread only */
    int next_group;           /* groups started */
    int live;                 /* choices not ended, + 1 while queued: the scheduler's reference lasts as long */
    int ttft_done, cancel_counted;
    gen_job *next;            /* queue link (under sched.mu) */
    /* shared */
    atomic_int cancel;
    atomic_int started;       /* the engine took its first prompt from the queue */
    atomic_int cached;        /* prompt tokens whose KV came from the prefix cache, over the prompts started */
    atomic_int refs;
    pthread_mutex_t mu;       /* guards the channels, plp_ready and below */
    pthread_cond_t cv;
    unsigned events;          /* tokens pushed and choices ended so far */
    char error[256];
};

/* a job for spec with its channels, one reference for the reader and one for the scheduler (live: its
 * choices + 1 while queued); 0, or -1 out of memory with spec's constraints destroyed */
int  job_create(gen_job **out, const job_spec *spec, uint32_t n_vocab, int spec_mode, int draft_max);
/* frees a job nobody else holds (a submit that failed after job_create) */
void job_destroy(gen_job *j);
/* engine thread: hand choice c's token (with ch->lp_now) to the reader */
void job_push(gen_job *j, int c, int32_t tok);
/* engine thread: choice c ended so (error: the job's first error message); wakes the reader */
void job_choice_end(gen_job *j, int c, enum job_end end, const char *error);
/* engine thread: prompt p's logprobs are complete (before any of its tokens) */
void job_prompt_logprobs_ready(gen_job *j, int p);
/* engine thread: a choice ended, or the job left the queue; the last drops the scheduler's reference */
void job_live_drop(gen_job *j);

#endif
