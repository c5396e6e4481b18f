/* generate.h — one request's generation seen from a request thread: checks the prompts against
 * the context, queues the job, then hands out each choice's text pieces (UTF-8 whole, stop strings
 * removed, the prompt first for echo) until every choice ended. Shared by /v1/chat/completions and
 * /v1/completions. Choice i is prompt i / n's (i % n)-th, as OpenAI numbers them. */
#ifndef CLGEMMA_FCGI_GENERATE_H
#define CLGEMMA_FCGI_GENERATE_H

#include "api.h"
#include "json_io.h"
#include "stop.h"
#include "tokenizer.h"

/* FINISH_EXPIRED: it waited in the queue past --queue-timeout and never started */
enum gen_finish { FINISH_NONE, FINISH_STOP, FINISH_LENGTH, FINISH_CANCELLED, FINISH_ERROR, FINISH_EXPIRED };

/* one token with its logprobs (requests that asked for them); none: a prompt's first token, which
 * has no logprob (echo) */
typedef struct gen_lp {
    int32_t tok;
    engine_logprobs lp;
    int none;
} gen_lp;

/* one prompt: its tokens, and for echo its text as the client wrote it (NULL: the tokens' text) */
typedef struct gen_prompt {
    const int32_t *ids;
    int n;
    const char *text;
    size_t len;
    const engine_span *spans; /* where ids are images' soft tokens (engine.h), in order */
    int n_spans;
    engine_image **images;    /* the spans' images: the job takes each (the entry set NULL) once submitted */
    int n_images;
} gen_prompt;

/* one choice's text on its way out */
typedef struct gen_choice {
    tok_stream ts;
    stop_filter sf;
    gen_lp *pend;             /* tokens behind the text handed out since the last gen_take_logprobs */
    int n_pend, cap_pend;
    job_status st;
    int phase;                /* echo, tokens, flush the UTF-8 tail, release held text, report the end, done */
    int n_completion;
    int in_thought;           /* inside the thought channel */
    enum gen_finish finish;
    char error[256];
} gen_choice;

typedef struct gen_run {
    const api_ctx *c;
    gen_job *job;
    int n, n_prompts, n_choices; /* choices per prompt; prompts; choices in all */
    gen_choice *ch;
    char **echo;              /* per prompt, with echo: its text (NUL-terminated) */
    const gen_prompt *prompts;/* the caller's, for echo */
    int want_lp;
    int32_t toks[64];         /* tokens of choice `cur` fetched from the job and not yet decoded */
    engine_logprobs lps[64];  /* theirs, when logprobs were asked for */
    int n_toks, i_tok, cur;
    unsigned seen;            /* the job's events seen (job_wait) */
    int timed_out;
    char piece[512];          /* decoded text of the current token(s) */
    double deadline;          /* monotonic seconds; past it every running choice ends as "length" (0: none) */
    double tick_s;            /* > 0: gen_next returns GEN_TICK after this long without a token */
    int32_t think_open, think_close; /* the thought channel's tokens (reasoning_tokens), -1: none */
    /* results */
    int n_prompt, n_completion; /* every prompt's tokens (each once); every choice's tokens so far */
    int n_image_tokens;       /* the prompts' images' soft tokens (part of n_prompt) */
    int count_reasoning;      /* the reply has a thought channel: usage reports reasoning_tokens */
    int n_reasoning;          /* completion tokens spent in it, its markers included, all choices */
} gen_run;

/* Validates n, lengths, the KV cache each prompt's choices need (a request without max_tokens gets
 * what fits) and logit_bias (400; prompt_param names the prompt in a context error), queues (429
 * full, 503 draining). n_prompts * p->n choices. Returns 0, or -1 with e. */
int  gen_start(gen_run *g, const api_ctx *c, const gen_prompt *prompts, int n_prompts, const api_gen *p,
               const char *prompt_param, double t_arrival, api_error *e);

enum { GEN_DONE = 0, GEN_TEXT, GEN_TICK, GEN_END };
/* The next thing to send: GEN_TEXT, a piece of *choice's text in *text and *len (valid until the
 * next call); GEN_END, *choice ended (g->ch[*choice].finish says why); GEN_TICK, nothing yet, each
 * g->tick_s seconds spent waiting for the first token; GEN_DONE once every choice's end was
 * reported. Past --request-timeout the job is dropped and the running choices end as
 * FINISH_LENGTH, like a max_tokens cap. */
int  gen_next(gen_run *g, int *choice, const char **text, size_t *len);
/* The tokens (with logprobs) behind choice i's text handed out since the last call; valid until the
 * next gen_next. 0 when the request asked for no logprobs. */
int  gen_take_logprobs(gen_run *g, int i, const gen_lp **out);
/* The client went away: cancel every choice at the next token (counted in metrics). */
void gen_cancel(gen_run *g);
/* Records usage in metrics, stops choices still running (the response broke off) and frees everything. */
void gen_end(gen_run *g);

const char *gen_finish_reason(enum gen_finish f); /* "stop" / "length" / null for the others */
/* prompt tokens whose KV the engine's prefix cache held (usage.prompt_tokens_details.cached_tokens) */
int gen_cached_tokens(const gen_run *g);

#endif
