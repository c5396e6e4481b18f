/* generate.c — request-thread side of a generation: queue, decode, stop strings, echo. */
#include "generate.h"

#include "admit.h"
#include "chat_reply.h"
#include "clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

_Static_assert(API_MAX_N <= SCHED_MAX_N, "the scheduler takes every n the API accepts");

static uint64_t random_seed(void)
{
    uint64_t s;
    if (getrandom(&s, sizeof s, 0) == (ssize_t)sizeof s) return s;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)ts.tv_sec;
}

/* the prompt's text for echo: the client's, or its tokens' (control tokens written out) */
static char *echo_text(const tokenizer *t, const gen_prompt *p)
{
    size_t cap = p->text ? p->len + 1 : 64, n = 0;
    char *out = malloc(cap);
    if (!out) return NULL;
    if (p->text) {
        memcpy(out, p->text, p->len);
        out[p->len] = 0;
        return out;
    }
    tok_stream ts;
    tok_stream_init(&ts, t, 1);
    char piece[512];
    for (int i = 0; i <= p->n; i++) {
        int k = i < p->n ? tok_stream_push(&ts, p->ids[i], piece, sizeof piece) : tok_stream_flush(&ts, piece, sizeof piece);
        if (k <= 0) continue;
        if (n + (size_t)k + 1 > cap) {
            char *q = realloc(out, cap = (n + (size_t)k + 1) * 2);
            if (!q) { free(out); return NULL; }
            out = q;
        }
        memcpy(out + n, piece, (size_t)k);
        n += (size_t)k;
    }
    out[n] = 0;
    return out;
}

/* frees what gen_start made before the job owned it */
static void unstart(gen_run *g, constraint **con, int n_con)
{
    for (int i = 0; con && i < n_con; i++) constraint_destroy(con[i]);
    free(con);
    for (int i = 0; g->ch && i < g->n_choices; i++) stop_filter_free(&g->ch[i].sf);
    free(g->ch);
    g->ch = NULL;
    for (int i = 0; g->echo && i < g->n_prompts; i++) free(g->echo[i]);
    free(g->echo);
    g->echo = NULL;
}

static int oom(api_error *e) { return api_fail(e, 500, "server_error", NULL, NULL, "out of memory"); }

/* A prompt's choices within the whole KV cache (else the request could never start): max_tokens is
 * capped to what fits when the client gave none, else a 400 says how many would */
static int check_kv(const api_ctx *c, const api_gen *p, const char *prompt_param, int n_prompt, int *max_tokens,
                    api_error *e)
{
    kv_budget b;
    kv_budget_init(&b, c->eng);
    int most = kv_budget_max_tokens(&b, n_prompt, p->n, *max_tokens);
    if (most == *max_tokens) return 0;
    if (p->max_tokens < 0 && most > 0) { *max_tokens = most; return 0; }
    engine_kv_blocks need = kv_budget_need(&b, n_prompt, *max_tokens, p->n);
    const engine_fit *f = &engine_get_info(c->eng)->fit;
    if (need.full > b.total.full)
        return api_fail(e, 400, "invalid_request_error", "context_length_exceeded", most ? "max_tokens" : prompt_param,
                        "This request needs %llu tokens of KV cache (a prompt of %d tokens and max_tokens %d for each "
                        "of %d choices), more than this server's whole cache of %llu tokens; max_tokens can be at most "
                        "%d here. Please reduce max_tokens or the length of the %s.",
                        (unsigned long long)need.full * f->block_tokens, n_prompt, *max_tokens, p->n,
                        (unsigned long long)f->kv_tokens, most, prompt_param);
    return api_fail(e, 400, "invalid_request_error", "context_length_exceeded", p->n > 1 ? "n" : "max_tokens",
                    "This request's %d choices need %u sliding-window KV blocks of %u tokens (a prompt of %d tokens and "
                    "max_tokens %d each); this server's cache has %u in all; max_tokens can be at most %d here. Please "
                    "reduce n or max_tokens.", p->n, need.ring, f->block_tokens, n_prompt, *max_tokens, f->ring_blocks,
                    most);
}

/* the request's limits: n, the sequences it takes, each prompt's budget (into jp), logit_bias */
static int check(gen_run *g, const api_ctx *c, const gen_prompt *prompts, const api_gen *p, const char *prompt_param,
                 job_prompt *jp, engine_bias *bias, api_error *e)
{
    int max_seqs, max_queue;
    sched_limits(c->sched, &max_seqs, &max_queue);
    int places = max_seqs + max_queue;
    if (p->n > max_seqs)
        return api_fail(e, 400, "invalid_request_error", NULL, "n", "'n' is %d; this server runs at most %d sequences at "
                        "once, and the choices of a prompt run together", p->n, max_seqs);
    if (g->n_choices > places)
        return api_fail(e, 400, "invalid_request_error", NULL, g->n_prompts > 1 ? "prompt" : "n",
                        "%d prompts of %d choices each make %d sequences; this server takes at most %d at once "
                        "(running and queued)", g->n_prompts, p->n, g->n_choices, places);
    char why[sizeof e->message];
    for (int i = 0; i < g->n_prompts; i++) {
        int max_tokens = engine_budget(c->eng, prompts[i].n, p->max_tokens, why, sizeof why);
        if (max_tokens < 0)
            return api_fail(e, 400, "invalid_request_error", "context_length_exceeded",
                            max_tokens == -1 ? prompt_param : "max_tokens", "%s", why);
        /* a request without max_tokens would otherwise hold a slot for the whole context */
        if (p->max_tokens < 0 && c->cfg->default_max_tokens > 0 && max_tokens > c->cfg->default_max_tokens)
            max_tokens = c->cfg->default_max_tokens;
        if (check_kv(c, p, prompt_param, prompts[i].n, &max_tokens, e)) return -1;
        jp[i] = (job_prompt){ prompts[i].ids, prompts[i].n, max_tokens, prompts[i].spans, prompts[i].n_spans,
                              prompts[i].images, prompts[i].n_images };
        g->n_prompt += prompts[i].n;
        for (int s = 0; s < prompts[i].n_spans; s++) g->n_image_tokens += prompts[i].spans[s].n;
    }
    uint32_t n_vocab = tokenizer_n_vocab(engine_tokenizer(c->eng));
    for (int i = 0; i < p->n_bias; i++) {
        if ((uint32_t)p->bias_tok[i] >= n_vocab)
            return api_fail(e, 400, "invalid_request_error", NULL, "logit_bias",
                            "'logit_bias' names token %d; this model's vocabulary has %u tokens", p->bias_tok[i], n_vocab);
        bias[i] = (engine_bias){ p->bias_tok[i], p->bias_val[i] };
    }
    return 0;
}

/* what the job does not own: each choice's stop filter and text stream, each prompt's echo */
static int make_outputs(gen_run *g, const gen_prompt *prompts, const api_gen *p, api_error *e)
{
    const tokenizer *t = engine_tokenizer(g->c->eng);
    if (!(g->ch = calloc((size_t)g->n_choices, sizeof *g->ch))) return oom(e);
    for (int i = 0; i < g->n_choices; i++) {
        if (stop_filter_init(&g->ch[i].sf, (const char *const *)p->stop, p->stop_len, p->n_stop))
            return api_fail(e, 500, "server_error", NULL, "stop", "bad stop strings");
        /* Gemma 4's replies are read by their markers (<|channel>, <|tool_call>, ...): they stay in the text */
        tok_stream_init(&g->ch[i].ts, t, p->reply_syntax == REPLY_GEMMA4);
    }
    if (p->echo && !(g->echo = calloc((size_t)g->n_prompts, sizeof *g->echo))) return oom(e);
    for (int i = 0; p->echo && i < g->n_prompts; i++)
        if (!(g->echo[i] = echo_text(t, &prompts[i]))) return oom(e);
    return 0;
}

/* one choice's constraint: tool_choice required / named (calls in the model's syntax) or response_format;
 * with thinking on, one thought may come first */
static int make_constraint(constraint **out, const constraint_vocab *v, const api_gen *p, api_error *e)
{
    char why[sizeof e->message];
    const api_tools *t = p->force_tools;
    if (t && constraint_create_tool_calls(out, v, t->json, t->json_len, t->choice == TOOL_CHOICE_NAMED ? t->name : NULL,
                                          t->parallel, why, sizeof why))
        return api_fail(e, 400, "invalid_request_error", "unsupported_schema", "tools", "%s", why);
    if (!t && constraint_create_json(out, v, p->schema, p->schema_len, why, sizeof why))
        return api_fail(e, 400, "invalid_request_error", "unsupported_schema", "response_format", "%s", why);
    if (p->thinking) constraint_allow_thought(*out, p->think_open, p->think_close);
    return 0;
}

int gen_start(gen_run *g, const api_ctx *c, const gen_prompt *prompts, int n_prompts, const api_gen *p,
              const char *prompt_param, double t_arrival, api_error *e)
{
    memset(g, 0, sizeof *g);
    g->c = c;
    g->n = p->n;
    g->n_prompts = n_prompts;
    g->n_choices = n_prompts * p->n;
    g->prompts = prompts;
    g->want_lp = p->logprobs;
    g->think_open = p->think_open;
    g->think_close = p->think_close;
    g->count_reasoning = p->reply_syntax == REPLY_GEMMA4;
    if (c->cfg->request_timeout > 0) g->deadline = t_arrival + c->cfg->request_timeout;
    engine_bias bias[API_MAX_BIAS];
    job_prompt *jp = malloc((size_t)n_prompts * sizeof *jp);
    job_spec spec = { .prompts = jp, .n_prompts = n_prompts, .n = p->n, .sampling = p->sampling,
                      .t_arrival = t_arrival, .bias = bias, .n_bias = p->n_bias,
                      .n_logprobs = p->logprobs ? (p->top_logprobs > 0 ? p->top_logprobs : 1) : 0,
                      .prompt_logprobs = p->echo && p->logprobs, .ignore_eos = p->ignore_eos,
                      .priority = p->priority };
    if (!p->seed_given) spec.sampling.seed = random_seed();
    int n_con = 0, rc = !jp ? oom(e) : check(g, c, prompts, p, prompt_param, jp, bias, e);
    if (!rc && p->ignore_eos && (p->constrained || p->force_tools)) /* a finished grammar allows only the end */
        rc = api_fail(e, 400, "invalid_request_error", NULL, "ignore_eos", "'ignore_eos' cannot be combined with %s",
                      p->force_tools ? "a forced tool_choice" : "response_format");
    if (!rc && (p->constrained || p->force_tools)) { /* one grammar state per choice */
        const constraint_vocab *v = sched_vocab(c->sched);
        if (!v)
            rc = api_fail(e, 400, "invalid_request_error", NULL, p->force_tools ? "tool_choice" : "response_format",
                          "constraining the output needs the model's tokenizer, which this model has not");
        else if (!(spec.con = calloc((size_t)g->n_choices, sizeof *spec.con)))
            rc = oom(e);
        while (!rc && n_con < g->n_choices)
            rc = make_constraint(&spec.con[n_con++], v, p, e);
    }
    if (!rc) rc = make_outputs(g, prompts, p, e);
    if (rc) {
        free(jp);
        unstart(g, spec.con, n_con);
        return -1;
    }
    int sub = sched_submit(c->sched, &spec, &g->job); /* owns the constraints from here */
    free(spec.con);
    free(jp);
    if (sub == SCHED_OK) return 0;
    unstart(g, NULL, 0);
    if (sub == SCHED_FULL)
        return api_fail(e, 429, "rate_limit_error", "queue_full", NULL,
                        "the server is busy: every generation slot and queue place is taken; retry later");
    if (sub == SCHED_CLOSED)
        return api_fail(e, 503, "server_error", "unavailable", NULL, "the server is shutting down; retry");
    if (sub == SCHED_TOO_BIG) /* check_kv let none through: a backstop */
        return api_fail(e, 400, "invalid_request_error", "context_length_exceeded", "max_tokens",
                        "the request needs more KV cache than this server has; reduce max_tokens");
    return api_fail(e, 500, "server_error", NULL, NULL, "cannot queue the request (out of memory)");
}

enum { PH_ECHO, PH_TOKENS, PH_FLUSH, PH_HELD, PH_END, PH_DONE };

/* choice i ends as an error; the engine drops the whole job (the response cannot be whole) */
static void out_of_memory(gen_run *g, int i)
{
    snprintf(g->ch[i].error, sizeof g->ch[i].error, "out of memory");
    g->ch[i].finish = FINISH_ERROR;
    job_cancel(g->job, 0);
    g->ch[i].phase = PH_END;
}

static int pend_push(gen_choice *ch, int32_t tok, const engine_logprobs *lp)
{
    if (ch->n_pend == ch->cap_pend) {
        int cap = ch->cap_pend ? ch->cap_pend * 2 : 16;
        gen_lp *p = realloc(ch->pend, (size_t)cap * sizeof *p);
        if (!p) return -1;
        ch->pend = p;
        ch->cap_pend = cap;
    }
    ch->pend[ch->n_pend++] = (gen_lp){ tok, lp ? *lp : (engine_logprobs){ 0 }, !lp };
    return 0;
}

int gen_take_logprobs(gen_run *g, int i, const gen_lp **out)
{
    gen_choice *ch = &g->ch[i];
    *out = ch->pend;
    int n = ch->n_pend;
    ch->n_pend = 0;
    return n;
}

static enum gen_finish finish_of(const job_status *st)
{
    switch (st->end) {
    case JOB_STOP: return FINISH_STOP;
    case JOB_LENGTH: return FINISH_LENGTH;
    case JOB_CANCELLED: return FINISH_CANCELLED;
    case JOB_ERROR: return FINISH_ERROR;
    case JOB_EXPIRED: return FINISH_EXPIRED;
    default: return FINISH_NONE;
    }
}

/* new text of choice i through its stop filter; returns 1 when *text has something to hand out */
static int filter(gen_run *g, int i, const char *in, size_t n, const char **text, size_t *len)
{
    gen_choice *ch = &g->ch[i];
    int r = stop_filter_push(&ch->sf, in, n, text, len);
    if (r < 0) {
        out_of_memory(g, i);
        *len = 0;
        return 0;
    }
    if (r == 1) {
        /* a stop string: the client has what it asked for from this choice; the engine drops it */
        job_stop_choice(g->job, i);
        ch->finish = FINISH_STOP;
        ch->phase = PH_END;
    }
    return *len > 0;
}

/* choice i's prompt ahead of its text (echo), with its tokens' logprobs, once its first token came */
static int echo(gen_run *g, int i, const char **text, size_t *len)
{
    gen_choice *ch = &g->ch[i];
    ch->phase = PH_TOKENS;
    if (!g->echo || ch->st.end == JOB_ERROR || ch->st.end == JOB_CANCELLED) return 0;
    int p = i / g->n;
    const gen_prompt *gp = &g->prompts[p];
    const engine_logprobs *plp = g->want_lp ? job_prompt_logprobs(g->job, p) : NULL;
    for (int t = 0; g->want_lp && t < gp->n; t++)
        if (pend_push(ch, gp->ids[t], t > 0 && plp ? &plp[t - 1] : NULL)) { out_of_memory(g, i); return 0; }
    *text = g->echo[p];
    *len = strlen(g->echo[p]);
    return *len > 0 || ch->n_pend > 0;
}

/* Advances choice i as far as it goes without waiting: GEN_TEXT or GEN_END as gen_next, or 0 when
 * it has nothing now (or is done). */
static int choice_next(gen_run *g, int i, const char **text, size_t *len)
{
    gen_choice *ch = &g->ch[i];
    for (;;) {
        switch (ch->phase) {
        case PH_ECHO:
        case PH_TOKENS: {
            int have = g->cur == i && g->i_tok < g->n_toks;
            if (ch->phase == PH_ECHO && (have || ch->st.end != JOB_RUNNING || g->timed_out)) {
                if (echo(g, i, text, len)) return GEN_TEXT;
                continue;
            }
            if (have) {
                int32_t tok = g->toks[g->i_tok++];
                ch->n_completion++;
                g->n_completion++;
                if (tok == g->think_open && tok >= 0) ch->in_thought = 1;
                g->n_reasoning += ch->in_thought;
                if (tok == g->think_close && tok >= 0) ch->in_thought = 0;
                if (g->want_lp && pend_push(ch, tok, &g->lps[g->i_tok - 1])) {
                    out_of_memory(g, i);
                    continue;
                }
                int k = tok_stream_push(&ch->ts, tok, g->piece, sizeof g->piece);
                if (k > 0 && filter(g, i, g->piece, (size_t)k, text, len)) return GEN_TEXT;
                continue;
            }
            if (ch->st.end != JOB_RUNNING) {
                ch->finish = finish_of(&ch->st);
                if (ch->finish == FINISH_ERROR) snprintf(ch->error, sizeof ch->error, "%s", ch->st.error);
                ch->phase = ch->finish == FINISH_STOP || ch->finish == FINISH_LENGTH ? PH_FLUSH : PH_END;
                continue;
            }
            if (g->timed_out) { /* the engine drops the job; the client gets what was made */
                ch->finish = FINISH_LENGTH;
                ch->phase = PH_FLUSH;
                continue;
            }
            g->cur = i;
            g->i_tok = 0;
            g->n_toks = job_take(g->job, i, g->toks, g->want_lp ? g->lps : NULL,
                                 (int)(sizeof g->toks / sizeof g->toks[0]), &ch->st);
            if (g->n_toks == 0 && ch->st.end == JOB_RUNNING) return 0;
            continue;
        }
        case PH_FLUSH: { /* an incomplete UTF-8 tail becomes U+FFFD */
            ch->phase = PH_HELD;
            int k = tok_stream_flush(&ch->ts, g->piece, sizeof g->piece);
            if (k > 0 && filter(g, i, g->piece, (size_t)k, text, len)) return GEN_TEXT;
            continue;
        }
        case PH_HELD: /* no stop string came: what was held back is text after all */
            ch->phase = PH_END;
            stop_filter_finish(&ch->sf, text, len);
            if (*len) return GEN_TEXT;
            continue;
        case PH_END:
            ch->phase = PH_DONE;
            return GEN_END;
        default:
            return 0;
        }
    }
}

int gen_next(gen_run *g, int *choice, const char **text, size_t *len)
{
    *text = "";
    *len = 0;
    for (;;) {
        /* the choice whose tokens are fetched first, then each in turn */
        int done = 0;
        for (int k = 0; k < g->n_choices; k++) {
            int i = (g->cur + k) % g->n_choices, r = choice_next(g, i, text, len);
            if (r) { *choice = i; return r; }
            done += g->ch[i].phase == PH_DONE;
        }
        if (done == g->n_choices) return GEN_DONE;
        if (!g->timed_out && g->deadline > 0 && monotonic_seconds() > g->deadline) {
            g->timed_out = 1;
            job_cancel(g->job, 0);
            continue;
        }
        int any = 0; /* ticks only until the first token */
        for (int i = 0; i < g->n_choices && !any; i++) any = g->ch[i].n_completion > 0;
        if (job_wait(g->job, &g->seen, any ? 0 : g->tick_s) < 0) return GEN_TICK;
    }
}

void gen_cancel(gen_run *g)
{
    if (g->job) job_cancel(g->job, 1);
    for (int i = 0; i < g->n_choices; i++) {
        if (g->ch[i].phase == PH_DONE) continue;
        g->ch[i].finish = FINISH_CANCELLED;
        g->ch[i].phase = PH_DONE;
    }
}

void gen_end(gen_run *g)
{
    if (g->c && g->c->m) metrics_tokens(g->c->m, g->n_prompt, g->n_completion);
    if (g->job) job_cancel(g->job, 0); /* a response that broke off stops the choices still running */
    job_release(g->job);
    g->job = NULL;
    for (int i = 0; g->ch && i < g->n_choices; i++) {
        stop_filter_free(&g->ch[i].sf);
        free(g->ch[i].pend);
    }
    free(g->ch);
    g->ch = NULL;
    for (int i = 0; g->echo && i < g->n_prompts; i++) free(g->echo[i]);
    free(g->echo);
    g->echo = NULL;
}

int gen_cached_tokens(const gen_run *g)
{
    return g->job ? job_cached_tokens(g->job) : 0;
}

const char *gen_finish_reason(enum gen_finish f)
{
    return f == FINISH_STOP ? "stop" : f == FINISH_LENGTH ? "length" : NULL;
}
