/* api_respond.c — what chat and completions share: readiness and model checks, and running a
 * generation into an OpenAI response, whole (chat.completion / text_completion) or streamed as
 * Server-Sent Events (chat.completion.chunk / text_completion chunks, then [DONE], or an error event
 * and no [DONE] when the generation broke off). */
#include "api_respond.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api_reply.h"
#include "generate.h"
#include "logprobs.h"
#include "sse.h"

int api_require_ready(const api_ctx *c, api_error *e)
{
    if (c->state == WORKER_READY) return 0;
    if (c->state == WORKER_DRAINING)
        return api_fail(e, 503, "server_error", "unavailable", NULL, "the server is shutting down; retry");
    if (c->state == WORKER_FAILED)
        return api_fail(e, 503, "server_error", "unavailable", NULL, "the model failed to load: %s", c->load_error);
    return api_fail(e, 503, "server_error", "unavailable", NULL, "the model is loading; retry shortly");
}

int api_check_model(const api_ctx *c, const char *model, api_error *e)
{
    if (!strcmp(model, c->cfg->model_id)) return 0;
    return api_fail(e, 404, "invalid_request_error", "model_not_found", "model",
                    "the model '%.100s' does not exist; this server has '%s'", model, c->cfg->model_id);
}

int api_reply_error(http_req *r, const api_error *e)
{
    http_send_error(r, e);
    return r->write_failed ? -1 : 0;
}

static const char *to_text(json_object *o)
{
    return json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
}

static json_object *usage_object(const gen_run *g)
{
    json_object *u = json_object_new_object();
    json_object_object_add(u, "prompt_tokens", json_object_new_int(g->n_prompt));
    json_object_object_add(u, "completion_tokens", json_object_new_int(g->n_completion));
    json_object_object_add(u, "total_tokens", json_object_new_int(g->n_prompt + g->n_completion));
    json_object *pd = json_object_new_object();
    json_object_object_add(pd, "cached_tokens", json_object_new_int(gen_cached_tokens(g)));
    if (g->n_image_tokens) /* as vLLM-style servers report them: the images' soft tokens among prompt_tokens */
        json_object_object_add(pd, "image_tokens", json_object_new_int(g->n_image_tokens));
    json_object_object_add(u, "prompt_tokens_details", pd);
    if (g->count_reasoning) {
        json_object *d = json_object_new_object();
        json_object_object_add(d, "reasoning_tokens", json_object_new_int(g->n_reasoning));
        json_object_object_add(u, "completion_tokens_details", d);
    }
    return u;
}

/* the envelope every response and chunk has */
static json_object *envelope(const api_shape *s, const char *id, long created, const char *model, int chunk)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "id", json_object_new_string(id));
    json_object_object_add(o, "object", json_object_new_string(chunk ? s->object_chunk : s->object_full));
    json_object_object_add(o, "created", json_object_new_int64(created));
    json_object_object_add(o, "model", json_object_new_string(model));
    json_object_object_add(o, "system_fingerprint", json_object_new_string("clgemma"));
    return o;
}

/* choice `index`: chat -> {index, delta|message, logprobs, finish_reason}; completions -> {index,
 * text, logprobs, finish_reason}; body (owned): a chat choice's delta or message, else made of role and
 * text; lp (owned) is the choice's logprobs object or NULL */
static json_object *choice(const api_shape *s, int chunk, int index, json_object *body, const char *role,
                           const char *text, size_t len, const char *finish, json_object *lp)
{
    json_object *c = json_object_new_object();
    json_object_object_add(c, "index", json_object_new_int(index));
    if (s->chat) {
        json_object *m = body ? body : json_object_new_object();
        if (!body && role) json_object_object_add(m, "role", json_object_new_string(role));
        if (!body && text) json_object_object_add(m, "content", json_object_new_string_len(text, (int)len));
        json_object_object_add(c, chunk ? "delta" : "message", m);
    } else {
        json_object_object_add(c, "text", json_object_new_string_len(text ? text : "", (int)(text ? len : 0)));
    }
    json_object_object_add(c, "logprobs", lp);
    json_object_object_add(c, "finish_reason", finish ? json_object_new_string(finish) : NULL);
    return c;
}

/* each chat choice's reply splitter (content, reasoning, tool calls); NULL for completions */
static api_reply **make_replies(const api_shape *s, const api_gen *p, const gen_run *g, const char *request_id)
{
    api_reply **r = calloc((size_t)g->n_choices, sizeof *r);
    for (int i = 0; r && s->chat && i < g->n_choices; i++) {
        char ids[96];
        snprintf(ids, sizeof ids, "call_%.60s_%d_", request_id, i);
        if (api_reply_create(&r[i], p, ids)) {
            while (i-- > 0) api_reply_destroy(r[i]);
            free(r);
            return NULL;
        }
    }
    return r;
}

static void free_replies(api_reply **r, int n)
{
    for (int i = 0; r && i < n; i++) api_reply_destroy(r[i]);
    free(r);
}

/* sends one chunk whose only choice is ch (NULL: choices [] and usage) */
static int send_chunk(sse_writer *w, const api_shape *s, const char *id, long created, const char *model,
                      json_object *ch, const gen_run *g, int include_usage)
{
    json_object *o = envelope(s, id, created, model, 1);
    json_object *arr = json_object_new_array();
    if (ch) json_object_array_add(arr, ch);
    json_object_object_add(o, "choices", arr);
    if (include_usage) json_object_object_add(o, "usage", ch ? NULL : usage_object(g));
    const char *t = to_text(o);
    int rc = sse_event(w, t, strlen(t));
    json_object_put(o);
    return rc;
}

/* The head (and a chat stream's role chunks) waits for the first thing to send: until then the
 * request is idempotent, so nginx may retry it elsewhere if this worker dies, and an error is
 * still a plain HTTP error. A first token that takes longer than HEARTBEAT_S opens the stream
 * anyway, with SSE comments (": queued", ": prefill") every HEARTBEAT_S until it comes. */
#define HEARTBEAT_S 2.0
typedef struct stream_out {
    sse_writer w;
    http_req *r;
    const api_shape *s;
    const char *id, *model;
    long created;
    int include_usage, opened;
    const tokenizer *tok;     /* for logprobs' token strings */
    int top;                  /* alternatives per token */
    size_t *text_offset;      /* per choice: completions' logprobs.text_offset */
    gen_run *g;
    api_reply **reply;        /* per chat choice: its reply split into content, reasoning and tool calls */
    int tools;                /* the reply may be tool calls: the role chunk's content is null, as OpenAI's */
} stream_out;

/* the logprobs of the tokens behind what choice i sends now (NULL: none asked for) */
static json_object *take_lp(stream_out *o, gen_run *g, int i)
{
    const gen_lp *e;
    int n = gen_take_logprobs(g, i, &e);
    if (!g->want_lp) return NULL;
    return o->s->chat ? logprobs_chat(o->tok, e, n, o->top)
                      : logprobs_completion(o->tok, e, n, o->top, &o->text_offset[i]);
}

/* the head, and a chat stream's role chunk per choice (OpenAI's first; completions go straight to text) */
static int open_out(stream_out *o, const gen_run *g)
{
    if (o->opened) return 0;
    o->opened = 1;
    if (http_start_stream(o->r)) return -1;
    for (int i = 0; o->s->chat && i < g->n_choices; i++) {
        json_object *role = NULL;
        if (o->tools && (role = json_object_new_object())) {
            json_object_object_add(role, "role", json_object_new_string("assistant"));
            json_object_object_add(role, "content", NULL);
        }
        if (send_chunk(&o->w, o->s, o->id, o->created, o->model, choice(o->s, 1, i, role, "assistant", "", 0, NULL, NULL),
                       g, o->include_usage))
            return -1;
    }
    return 0;
}

static int chunk_out(stream_out *o, json_object *ch, const gen_run *g)
{
    if (open_out(o, g)) { json_object_put(ch); return -1; }
    return send_chunk(&o->w, o->s, o->id, o->created, o->model, ch, g, o->include_usage);
}

typedef struct delta_ctx { stream_out *o; int i; } delta_ctx;

/* a delta of chat choice i made by its reply: one chunk, with the logprobs of the tokens behind it */
static int delta_out(void *ctx, json_object *delta)
{
    delta_ctx *d = ctx;
    return chunk_out(d->o, choice(d->o->s, 1, d->i, delta, NULL, NULL, 0, NULL, take_lp(d->o, d->o->g, d->i)), d->o->g);
}

/* one chunk of choice i: a piece of its text, or (finish set) its end */
static int stream_choice(stream_out *o, gen_run *g, int i, const char *text, size_t len, const char *finish)
{
    delta_ctx d = { o, i };
    api_reply *rp = o->reply ? o->reply[i] : NULL;
    if (rp && !finish) return api_reply_stream(rp, text, len, delta_out, &d);
    if (rp && api_reply_stream_end(rp, delta_out, &d)) return -1;
    if (finish && o->s->chat) text = NULL; /* a chat's last delta is empty */
    return chunk_out(o, choice(o->s, 1, i, NULL, NULL, text, len, api_reply_finish(rp, finish), take_lp(o, g, i)), g);
}

/* why choice i broke off (engine failure, shutdown deadline, no room before the queue timeout) */
static void broke_off(const gen_run *g, int i, api_error *e)
{
    if (g->ch[i].finish == FINISH_ERROR) api_fail(e, 500, "server_error", NULL, NULL, "%s", g->ch[i].error);
    else if (g->ch[i].finish == FINISH_EXPIRED)
        api_fail(e, 503, "server_error", "queue_timeout", NULL, "the server is busy: the request waited %d s in the "
                 "queue for room in the KV cache or a sequence slot; retry later", g->c->cfg->queue_timeout);
    else api_fail(e, 503, "server_error", "unavailable", NULL, "the generation was cancelled: the server is shutting down");
}

static int stream(const api_ctx *c, http_req *r, const api_shape *s, const char *id, long created,
                  const api_gen *p, gen_run *g)
{
    stream_out o = { .r = r, .s = s, .id = id, .model = c->cfg->model_id, .created = created,
                     .include_usage = p->include_usage, .tok = engine_tokenizer(c->eng), .top = p->top_logprobs,
                     .g = g, .tools = p->parse_tools };
    api_error e;
    o.text_offset = calloc((size_t)g->n_choices, sizeof *o.text_offset);
    o.reply = make_replies(s, p, g, r->request_id);
    if (!o.text_offset || !o.reply) {
        free(o.text_offset);
        free_replies(o.reply, g->n_choices);
        gen_cancel(g);
        return api_reply_error(r, (api_fail(&e, 500, "server_error", NULL, NULL, "out of memory"), &e));
    }
    sse_init(&o.w, http_write, http_flush, r);
    const char *text;
    size_t len;
    int k, i, broke = -1, rc = 0;
    g->tick_s = HEARTBEAT_S;
    while (broke < 0 && (k = gen_next(g, &i, &text, &len)) != GEN_DONE) {
        if (k == GEN_TICK) { /* still queued or in prefill: open the stream and say so, so nobody times out */
            rc = open_out(&o, g) || sse_comment(&o.w, job_started(g->job) ? "prefill" : "queued");
        } else if (k == GEN_TEXT) {
            rc = stream_choice(&o, g, i, text, len, NULL);
        } else if (gen_finish_reason(g->ch[i].finish)) {
            rc = stream_choice(&o, g, i, s->chat ? NULL : "", 0, gen_finish_reason(g->ch[i].finish));
        } else {
            broke = i;
        }
        if (rc) { /* the client went away: stop at the next token */
            gen_cancel(g);
            free(o.text_offset);
            free_replies(o.reply, g->n_choices);
            return -1;
        }
    }
    free(o.text_offset);
    free_replies(o.reply, g->n_choices);
    if (broke < 0) {
        if (o.include_usage && chunk_out(&o, NULL, g)) return -1;
        return sse_done(&o.w);
    }
    broke_off(g, broke, &e);
    if (!o.opened) return api_reply_error(r, &e);
    /* no [DONE]: clients treat the error event as the stream's end (OpenAI's way) */
    char *b = api_error_body(&e);
    rc = b ? sse_event(&o.w, b, strlen(b)) : -1;
    free(b);
    return rc ? -1 : 0;
}

/* one choice of a whole response as it grows: its text and logprobs */
typedef struct whole_out {
    char *buf;
    size_t n, cap;
    json_object *lp;          /* NULL: none asked for */
    size_t offset;            /* completions' logprobs.text_offset */
    api_reply *reply;         /* chat: the reply split into content, reasoning and tool calls */
} whole_out;

/* appends choice i's piece and the logprobs behind it; -1 out of memory */
static int whole_add(whole_out *w, const api_shape *s, const tokenizer *tok, gen_run *g, int i, int top,
                     const char *text, size_t len)
{
    const gen_lp *en;
    int k = gen_take_logprobs(g, i, &en);
    if (w->lp && s->chat) logprobs_chat_add(w->lp, tok, en, k, top);
    else if (w->lp) logprobs_completion_add(w->lp, tok, en, k, top, &w->offset);
    if (w->reply) return api_reply_add(w->reply, text, len);
    if (w->n + len + 1 > w->cap) {
        size_t nc = (w->n + len + 1) * 2;
        char *p = realloc(w->buf, nc);
        if (!p) return -1;
        w->buf = p;
        w->cap = nc;
    }
    memcpy(w->buf + w->n, text, len);
    w->n += len;
    return 0;
}

/* choice i of a whole response (takes its logprobs object); NULL when out of memory */
static json_object *whole_choice(const api_shape *s, whole_out *w, int i, const char *finish)
{
    json_object *msg = w->reply ? api_reply_message(w->reply) : NULL;
    if (w->reply && !msg) return NULL;
    json_object *lp = w->lp;
    w->lp = NULL;
    return choice(s, 0, i, msg, "assistant", w->buf ? w->buf : "", w->n, api_reply_finish(w->reply, finish), lp);
}

static int whole(const api_ctx *c, http_req *r, const api_shape *s, const char *id, long created,
                 const api_gen *p, gen_run *g)
{
    const tokenizer *tok = engine_tokenizer(c->eng);
    api_error e;
    whole_out *w = calloc((size_t)g->n_choices, sizeof *w);
    int oom = !w, broke = -1, k, i;
    for (int j = 0; !oom && g->want_lp && j < g->n_choices; j++)
        w[j].lp = s->chat ? logprobs_chat(tok, NULL, 0, 0) : logprobs_completion(tok, NULL, 0, 0, &w[j].offset);
    api_reply **replies = oom ? NULL : make_replies(s, p, g, r->request_id);
    oom |= !replies;
    for (int j = 0; !oom && j < g->n_choices; j++) w[j].reply = replies[j];
    if (oom) gen_cancel(g);
    const char *text;
    size_t len;
    while (!oom && broke < 0 && (k = gen_next(g, &i, &text, &len)) != GEN_DONE) {
        if (whole_add(&w[i], s, tok, g, i, p->top_logprobs, text, k == GEN_TEXT ? len : 0)) oom = 1;
        else if (k == GEN_END && !gen_finish_reason(g->ch[i].finish)) broke = i;
    }
    int rc;
    if (oom || broke >= 0) {
        if (oom) api_fail(&e, 500, "server_error", NULL, NULL, "out of memory");
        else broke_off(g, broke, &e);
        rc = api_reply_error(r, &e);
    } else {
        json_object *o = envelope(s, id, created, c->cfg->model_id, 0);
        json_object *arr = json_object_new_array();
        for (int j = 0; j < g->n_choices && !oom; j++) {
            json_object *ch = whole_choice(s, &w[j], j, gen_finish_reason(g->ch[j].finish));
            oom = !ch || json_object_array_add(arr, ch);
        }
        json_object_object_add(o, "choices", arr);
        json_object_object_add(o, "usage", usage_object(g));
        rc = oom ? api_reply_error(r, (api_fail(&e, 500, "server_error", NULL, NULL, "out of memory"), &e))
                 : http_send_json(r, 200, to_text(o));
        json_object_put(o);
    }
    free_replies(replies, g->n_choices);
    for (int j = 0; w && j < g->n_choices; j++) {
        json_object_put(w[j].lp);
        free(w[j].buf);
    }
    free(w);
    return rc;
}

int api_generate_prompts(const api_ctx *c, http_req *r, const api_shape *s, const api_gen *p,
                         const gen_prompt *prompts, int n_prompts, const char *prompt_param)
{
    api_error e;
    gen_run g;
    if (gen_start(&g, c, prompts, n_prompts, p, prompt_param, r->t_start, &e)) return api_reply_error(r, &e);
    char id[96];
    snprintf(id, sizeof id, "%s%s", s->id_prefix, r->request_id);
    long created = (long)time(NULL);
    int rc = p->stream ? stream(c, r, s, id, created, p, &g) : whole(c, r, s, id, created, p, &g);
    gen_end(&g);
    return rc;
}

int api_generate(const api_ctx *c, http_req *r, const api_shape *s, const api_gen *p, const gen_prompt *prompt)
{
    return api_generate_prompts(c, r, s, p, prompt, 1, "messages");
}
