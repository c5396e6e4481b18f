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

/* one choice: chat -> {index, delta|message, logprobs, finish_reason}; completions -> {index, text,
 * logprobs, finish_reason}; body (owned): a chat choice's delta or message, else made of role and text;
 * lp (owned) is the choice's logprobs object or NULL */
static json_object *choice(const api_shape *s, int chunk, json_object *body, const char *role, const char *text,
                           size_t len, const char *finish, json_object *lp)
{
    json_object *c = json_object_new_object();
    json_object_object_add(c, "index", json_object_new_int(0));
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

/* The head (and a chat stream's role chunk) waits for the first thing to send: until then the
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
    size_t text_offset;       /* completions' logprobs.text_offset */
    gen_run *g;
    api_reply *reply;         /* chat: the reply split into content, reasoning and tool calls */
} stream_out;

/* the logprobs of the tokens behind what is sent now (NULL: none asked for, or none new) */
static json_object *take_lp(stream_out *o, gen_run *g)
{
    const gen_lp *e;
    int n = gen_take_logprobs(g, &e);
    if (!g->want_lp) return NULL;
    return o->s->chat ? logprobs_chat(o->tok, e, n, o->top) : logprobs_completion(o->tok, e, n, o->top, &o->text_offset);
}

/* the head, and a chat stream's role chunk (OpenAI's first chunk; completions go straight to text) */
static int open_out(stream_out *o, const gen_run *g)
{
    if (o->opened) return 0;
    o->opened = 1;
    if (http_start_stream(o->r)) return -1;
    return o->s->chat && send_chunk(&o->w, o->s, o->id, o->created, o->model,
                                    choice(o->s, 1, NULL, "assistant", "", 0, NULL, NULL), g, o->include_usage);
}

static int chunk_out(stream_out *o, json_object *ch, const gen_run *g)
{
    if (open_out(o, g)) { json_object_put(ch); return -1; }
    return send_chunk(&o->w, o->s, o->id, o->created, o->model, ch, g, o->include_usage);
}

/* a chat delta made by the reply: one chunk, with the logprobs of the tokens behind it so far */
static int delta_out(void *ctx, json_object *delta)
{
    stream_out *o = ctx;
    return chunk_out(o, choice(o->s, 1, delta, NULL, NULL, 0, NULL, take_lp(o, o->g)), o->g);
}

/* new text: a chat reply's deltas, or a completion's text */
static int text_out(stream_out *o, const char *text, size_t len)
{
    if (o->reply) return api_reply_stream(o->reply, text, len, delta_out, o);
    return chunk_out(o, choice(o->s, 1, NULL, NULL, text, len, NULL, take_lp(o, o->g)), o->g);
}

/* why a generation broke off (engine failure, shutdown deadline) */
static void broke_off(const gen_run *g, api_error *e)
{
    if (g->finish == FINISH_ERROR) api_fail(e, 500, "server_error", NULL, NULL, "%s", g->error);
    else api_fail(e, 503, "server_error", "unavailable", NULL, "the generation was cancelled: the server is shutting down");
}

static int stream(const api_ctx *c, http_req *r, const api_shape *s, const char *id, long created,
                  const api_gen *p, gen_run *g)
{
    stream_out o = { .r = r, .s = s, .id = id, .model = c->cfg->model_id, .created = created,
                     .include_usage = p->include_usage, .tok = engine_tokenizer(c->eng), .top = p->top_logprobs,
                     .g = g };
    char ids[80];
    snprintf(ids, sizeof ids, "call_%.60s_", r->request_id);
    if (s->chat && api_reply_create(&o.reply, p, ids)) {
        api_error e;
        gen_cancel(g);
        api_fail(&e, 500, "server_error", NULL, NULL, "out of memory");
        return api_reply_error(r, &e);
    }
    sse_init(&o.w, http_write, http_flush, r);
    const char *text;
    size_t len;
    int k, rc = 0;
    g->tick_s = HEARTBEAT_S;
    while ((k = gen_next(g, &text, &len))) {
        if (k == 2) { /* still queued or in prefill: open the stream and say so, so nobody times out */
            if (open_out(&o, g) || sse_comment(&o.w, job_started(g->job) ? "prefill" : "queued")) {
                gen_cancel(g);
                rc = -1;
                goto out;
            }
            continue;
        }
        if (text_out(&o, text, len)) {
            gen_cancel(g); /* the client went away: stop at the next token */
            rc = -1;
            goto out;
        }
    }
    const char *fin = gen_finish_reason(g->finish);
    if (fin) {
        if (o.reply && api_reply_stream_end(o.reply, delta_out, &o)) { rc = -1; goto out; }
        fin = api_reply_finish(o.reply, fin);
        if (chunk_out(&o, choice(s, 1, NULL, NULL, s->chat ? NULL : "", 0, fin, take_lp(&o, g)), g) ||
            (o.include_usage && chunk_out(&o, NULL, g))) { rc = -1; goto out; }
        rc = sse_done(&o.w);
        goto out;
    }
    api_error e;
    broke_off(g, &e);
    if (!o.opened) { rc = api_reply_error(r, &e); goto out; }
    /* no [DONE]: clients treat the error event as the stream's end (OpenAI's way) */
    char *b = api_error_body(&e);
    rc = b && !sse_event(&o.w, b, strlen(b)) ? 0 : -1;
    free(b);
out:
    api_reply_destroy(o.reply);
    return rc;
}

/* the tokens behind the text taken since the last call, into a whole response's logprobs (lp NULL: none) */
static void add_lp(json_object *lp, const api_shape *s, const tokenizer *tok, gen_run *g, int top, size_t *offset)
{
    const gen_lp *en;
    int k = gen_take_logprobs(g, &en);
    if (lp && s->chat) logprobs_chat_add(lp, tok, en, k, top);
    else if (lp) logprobs_completion_add(lp, tok, en, k, top, offset);
}

static int whole(const api_ctx *c, http_req *r, const api_shape *s, const char *id, long created,
                 const api_gen *p, gen_run *g)
{
    char *buf = NULL;
    size_t n = 0, cap = 0;
    const char *text;
    size_t len;
    int oom = 0;
    const tokenizer *tok = engine_tokenizer(c->eng);
    size_t offset = 0;
    char ids[80];
    snprintf(ids, sizeof ids, "call_%.60s_", r->request_id);
    api_reply *reply = NULL;
    if (s->chat && api_reply_create(&reply, p, ids)) oom = 1;
    json_object *lp = !g->want_lp ? NULL : s->chat ? logprobs_chat(tok, NULL, 0, 0)
                                                   : logprobs_completion(tok, NULL, 0, 0, &offset);
    while (!oom && gen_next(g, &text, &len)) {
        if (reply) {
            oom = api_reply_add(reply, text, len) != 0;
        } else if (n + len + 1 > cap) {
            size_t nc = (n + len + 1) * 2;
            char *q = realloc(buf, nc);
            if (!q) oom = 1;
            else { buf = q; cap = nc; }
        }
        if (oom) break;
        if (!reply) {
            memcpy(buf + n, text, len);
            n += len;
        }
        add_lp(lp, s, tok, g, p->top_logprobs, &offset);
    }
    if (oom) gen_cancel(g);
    add_lp(lp, s, tok, g, p->top_logprobs, &offset);
    const char *fin = gen_finish_reason(g->finish);
    json_object *msg = reply && !oom && fin ? api_reply_message(reply) : NULL;
    if (reply && !oom && fin && !msg) oom = 1;
    api_error e;
    if (oom || !fin) {
        json_object_put(lp);
        if (oom) api_fail(&e, 500, "server_error", NULL, NULL, "out of memory");
        else broke_off(g, &e);
        free(buf);
        api_reply_destroy(reply);
        return api_reply_error(r, &e);
    }
    json_object *o = envelope(s, id, created, c->cfg->model_id, 0);
    json_object *arr = json_object_new_array();
    json_object_array_add(arr, choice(s, 0, msg, "assistant", buf ? buf : "", n, api_reply_finish(reply, fin), lp));
    json_object_object_add(o, "choices", arr);
    json_object_object_add(o, "usage", usage_object(g));
    int rc = http_send_json(r, 200, to_text(o));
    json_object_put(o);
    free(buf);
    api_reply_destroy(reply);
    return rc;
}

int api_generate(const api_ctx *c, http_req *r, const api_shape *s, const api_gen *p,
                 const int32_t *prompt, int n_prompt)
{
    api_error e;
    gen_run g;
    if (gen_start(&g, c, prompt, n_prompt, p, r->t_start, &e)) return api_reply_error(r, &e);
    char id[96];
    snprintf(id, sizeof id, "%s%s", s->id_prefix, r->request_id);
    long created = (long)time(NULL);
    int rc = p->stream ? stream(c, r, s, id, created, p, &g) : whole(c, r, s, id, created, p, &g);
    gen_end(&g);
    return rc;
}
