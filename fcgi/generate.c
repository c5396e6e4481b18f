/* generate.c — request-thread side of a generation: queue, decode, stop strings. */
#include "generate.h"

#include "chat_reply.h"
#include "clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

static uint64_t random_seed(void)
{
    uint64_t s;
    if (getrandom(&s, sizeof s, 0) == (ssize_t)sizeof s) return s;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)ts.tv_sec;
}

int gen_start(gen_run *g, const api_ctx *c, const int32_t *prompt, int n_prompt, const api_gen *p,
              double t_arrival, api_error *e)
{
    memset(g, 0, sizeof *g);
    g->c = c;
    g->n_prompt = n_prompt;
    if (c->cfg->request_timeout > 0) g->deadline = t_arrival + c->cfg->request_timeout;
    char why[sizeof e->message];
    int max_tokens = engine_budget(c->eng, n_prompt, p->max_tokens, why, sizeof why);
    if (max_tokens < 0)
        return api_fail(e, 400, "invalid_request_error", "context_length_exceeded",
                        max_tokens == -1 ? "messages" : "max_tokens", "%s", why);
    /* a request without max_tokens would otherwise hold a slot for the whole context */
    if (p->max_tokens < 0 && c->cfg->default_max_tokens > 0 && max_tokens > c->cfg->default_max_tokens)
        max_tokens = c->cfg->default_max_tokens;
    engine_bias bias[API_MAX_BIAS];
    uint32_t n_vocab = tokenizer_n_vocab(engine_tokenizer(c->eng));
    for (int i = 0; i < p->n_bias; i++) {
        if ((uint32_t)p->bias_tok[i] >= n_vocab)
            return api_fail(e, 400, "invalid_request_error", NULL, "logit_bias",
                            "'logit_bias' names token %d; this model's vocabulary has %u tokens", p->bias_tok[i], n_vocab);
        bias[i] = (engine_bias){ p->bias_tok[i], p->bias_val[i] };
    }
    job_spec spec = { .prompt = prompt, .n_prompt = n_prompt, .max_tokens = max_tokens,
                      .sampling = p->sampling, .t_arrival = t_arrival, .bias = bias, .n_bias = p->n_bias,
                      .n_logprobs = p->logprobs ? (p->top_logprobs > 0 ? p->top_logprobs : 1) : 0 };
    g->want_lp = p->logprobs;
    if (!p->seed_given) spec.sampling.seed = random_seed();
    if (p->force_tools) { /* tool_choice required / named: the reply is one call or more, in the model's syntax */
        const constraint_vocab *v = sched_vocab(c->sched);
        char why[sizeof e->message];
        const api_tools *t = p->force_tools;
        if (!v)
            return api_fail(e, 400, "invalid_request_error", NULL, "tool_choice",
                            "forcing a tool call needs the model's tokenizer, which this model has not");
        if (constraint_create_tool_calls(&spec.con, v, t->json, t->json_len, t->choice == TOOL_CHOICE_NAMED ? t->name : NULL,
                                         t->parallel, why, sizeof why))
            return api_fail(e, 400, "invalid_request_error", "unsupported_schema", "tools", "%s", why);
    }
    if (p->constrained) {
        const constraint_vocab *v = sched_vocab(c->sched);
        char why[sizeof e->message];
        if (!v)
            return api_fail(e, 400, "invalid_request_error", NULL, "response_format",
                            "structured output needs the model's tokenizer, which this model has not");
        if (constraint_create_json(&spec.con, v, p->schema, p->schema_len, why, sizeof why))
            return api_fail(e, 400, "invalid_request_error", "unsupported_schema", "response_format", "%s", why);
    }
    if (spec.con && p->thinking) constraint_allow_thought(spec.con, p->think_open, p->think_close);
    if (stop_filter_init(&g->sf, (const char *const *)p->stop, p->stop_len, p->n_stop)) {
        constraint_destroy(spec.con);
        return api_fail(e, 500, "server_error", NULL, "stop", "bad stop strings");
    }
    int rc = sched_submit(c->sched, &spec, &g->job); /* owns spec.con from here */
    if (rc == SCHED_OK) {
        /* Gemma 4's replies are read by their markers (<|channel>, <|tool_call>, ...): they stay in the text */
        tok_stream_init(&g->ts, engine_tokenizer(c->eng), p->reply_syntax == REPLY_GEMMA4);
        g->think_open = p->think_open;
        g->think_close = p->think_close;
        g->count_reasoning = p->reply_syntax == REPLY_GEMMA4;
        return 0;
    }
    stop_filter_free(&g->sf);
    if (rc == SCHED_FULL)
        return api_fail(e, 429, "rate_limit_error", "queue_full", NULL,
                        "the server is busy: every generation slot and queue place is taken; retry later");
    if (rc == SCHED_CLOSED)
        return api_fail(e, 503, "server_error", "unavailable", NULL, "the server is shutting down; retry");
    return api_fail(e, 500, "server_error", NULL, NULL, "cannot queue the request (out of memory)");
}

enum { PH_TOKENS, PH_FLUSH, PH_HELD, PH_DONE };

/* the run ends as an error; the engine drops the job */
static void out_of_memory(gen_run *g)
{
    snprintf(g->error, sizeof g->error, "out of memory");
    g->finish = FINISH_ERROR;
    job_cancel(g->job, 0);
    g->phase = PH_DONE;
}

static int pend_push(gen_run *g, int32_t tok, const engine_logprobs *lp)
{
    if (g->n_pend == g->cap_pend) {
        int cap = g->cap_pend ? g->cap_pend * 2 : 16;
        gen_lp *p = realloc(g->pend, (size_t)cap * sizeof *p);
        if (!p) return -1;
        g->pend = p;
        g->cap_pend = cap;
    }
    g->pend[g->n_pend++] = (gen_lp){ tok, *lp };
    return 0;
}

int gen_take_logprobs(gen_run *g, const gen_lp **out)
{
    *out = g->pend;
    int n = g->n_pend;
    g->n_pend = 0;
    return n;
}

static enum gen_finish finish_of(const job_status *st)
{
    switch (st->end) {
    case JOB_STOP: return FINISH_STOP;
    case JOB_LENGTH: return FINISH_LENGTH;
    case JOB_CANCELLED: return FINISH_CANCELLED;
    case JOB_ERROR: return FINISH_ERROR;
    default: return FINISH_NONE;
    }
}


/* new text through the stop filter; returns 1 when *text has something to hand out */
static int filter(gen_run *g, const char *in, size_t n, const char **text, size_t *len)
{
    int r = stop_filter_push(&g->sf, in, n, text, len);
    if (r < 0) {
        out_of_memory(g);
        *len = 0;
        return 0;
    }
    if (r == 1) {
        /* a stop string: the client has what it asked for; the engine drops the job */
        job_cancel(g->job, 0);
        g->finish = FINISH_STOP;
        g->phase = PH_DONE;
    }
    return *len > 0;
}

int gen_next(gen_run *g, const char **text, size_t *len)
{
    *text = "";
    *len = 0;
    for (;;) {
        switch (g->phase) {
        case PH_TOKENS:
            if (g->i_tok == g->n_toks) {
                if (g->st.end != JOB_RUNNING) {
                    g->finish = finish_of(&g->st);
                    if (g->finish == FINISH_ERROR) snprintf(g->error, sizeof g->error, "%s", g->st.error);
                    g->phase = g->finish == FINISH_STOP || g->finish == FINISH_LENGTH ? PH_FLUSH : PH_DONE;
                    continue;
                }
                if (g->deadline > 0 && monotonic_seconds() > g->deadline) {
                    job_cancel(g->job, 0); /* the engine drops it; the client gets what was made */
                    g->finish = FINISH_LENGTH;
                    g->phase = PH_FLUSH;
                    continue;
                }
                int k = job_wait(g->job, g->toks, g->want_lp ? g->lps : NULL,
                                 (int)(sizeof g->toks / sizeof g->toks[0]), &g->st,
                                 g->n_completion == 0 ? g->tick_s : 0);
                g->i_tok = 0;
                g->n_toks = k < 0 ? 0 : k;
                if (k < 0) return 2;
                continue;
            } else {
                int32_t tok = g->toks[g->i_tok++];
                g->n_completion++;
                if (tok == g->think_open && tok >= 0) g->in_thought = 1;
                g->n_reasoning += g->in_thought;
                if (tok == g->think_close && tok >= 0) g->in_thought = 0;
                if (g->want_lp && pend_push(g, tok, &g->lps[g->i_tok - 1])) {
                    out_of_memory(g);
                    continue;
                }
                int k = tok_stream_push(&g->ts, tok, g->piece, sizeof g->piece);
                if (k > 0 && filter(g, g->piece, (size_t)k, text, len)) return 1;
            }
            continue;
        case PH_FLUSH: { /* an incomplete UTF-8 tail becomes U+FFFD */
            g->phase = PH_HELD;
            int k = tok_stream_flush(&g->ts, g->piece, sizeof g->piece);
            if (k > 0 && filter(g, g->piece, (size_t)k, text, len)) return 1;
            continue;
        }
        case PH_HELD: /* no stop string came: what was held back is text after all */
            g->phase = PH_DONE;
            stop_filter_finish(&g->sf, text, len);
            if (*len) return 1;
            continue;
        default:
            return 0;
        }
    }
}

void gen_cancel(gen_run *g)
{
    if (g->job) job_cancel(g->job, 1);
    g->finish = FINISH_CANCELLED;
    g->phase = PH_DONE;
}

void gen_end(gen_run *g)
{
    if (g->c && g->c->m) metrics_tokens(g->c->m, g->n_prompt, g->n_completion);
    job_release(g->job);
    g->job = NULL;
    stop_filter_free(&g->sf);
    free(g->pend);
    g->pend = NULL;
}

const char *gen_finish_reason(enum gen_finish f)
{
    return f == FINISH_STOP ? "stop" : f == FINISH_LENGTH ? "length" : NULL;
}
