/* generate.h — one generation seen from a request thread: checks the prompt against the
 * context, queues the job, then hands out text pieces (UTF-8 whole, stop strings removed)
 * until the job ends. Shared by /v1/chat/completions and /v1/completions. */
#ifndef CLGEMMA_FCGI_GENERATE_H
#define CLGEMMA_FCGI_GENERATE_H

#include "api.h"
#include "json_io.h"
#include "stop.h"
#include "tokenizer.h"

enum gen_finish { FINISH_NONE, FINISH_STOP, FINISH_LENGTH, FINISH_CANCELLED, FINISH_ERROR };

/* one output token with its logprobs (requests that asked for them) */
typedef struct gen_lp {
    int32_t tok;
    engine_logprobs lp;
} gen_lp;

typedef struct gen_run {
    const api_ctx *c;
    gen_job *job;
    tok_stream ts;
    stop_filter sf;
    int32_t toks[64];
    engine_logprobs lps[64];  /* theirs, when logprobs were asked for */
    int n_toks, i_tok;        /* tokens fetched from the job and not yet decoded */
    int want_lp;
    gen_lp *pend;             /* tokens decoded since the last gen_take_logprobs */
    int n_pend, cap_pend;
    job_status st;
    int phase;                /* tokens, flush the UTF-8 tail, release held text, done */
    char piece[512];          /* decoded text of the current token(s) */
    double deadline;          /* monotonic seconds; past it the generation ends as "length" (0: none) */
    double tick_s;            /* > 0: gen_next returns 2 after this long without the first token */
    int32_t think_open, think_close; /* the thought channel's tokens (reasoning_tokens), -1: none */
    int in_thought;
    /* results */
    int n_prompt, n_completion;
    int count_reasoning;      /* the reply has a thought channel: usage reports reasoning_tokens */
    int n_reasoning;          /* completion tokens spent in it, its markers included */
    enum gen_finish finish;
    char error[256];
} gen_run;

/* Validates lengths (400), queues (429 full, 503 draining). Returns 0, or -1 with e. */
int  gen_start(gen_run *g, const api_ctx *c, const int32_t *prompt, int n_prompt, const api_gen *p,
               double t_arrival, api_error *e);
/* Next piece of text: returns 1 with *text and *len (valid until the next call), or 0 at the end
 * (then g->finish says why), or 2 (nothing yet) each g->tick_s seconds spent waiting for the
 * first token. Past --request-timeout the job is dropped and the run ends as
 * FINISH_LENGTH, like a max_tokens cap. */
int  gen_next(gen_run *g, const char **text, size_t *len);
/* The tokens (with logprobs) behind the text handed out since the last call; valid until the next
 * gen_next. 0 when the request asked for no logprobs. */
int  gen_take_logprobs(gen_run *g, const gen_lp **out);
/* The client went away: cancel at the next token (counted in metrics). */
void gen_cancel(gen_run *g);
/* Records usage in metrics and frees everything. */
void gen_end(gen_run *g);

const char *gen_finish_reason(enum gen_finish f); /* "stop" / "length" / null for the others */

#endif
