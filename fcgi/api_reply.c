/* api_reply.c — chat choices' replies in OpenAI's shapes (api_reply.h). */
#include "api_reply.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_reply.h"

struct api_reply {
    chat_reply *split;
    char ids[64];
    int calls;
    /* a whole message */
    char *text[2];       /* content, reasoning */
    size_t len[2], cap[2];
    json_object *tool_calls;
    int oom;
};

int api_reply_create(api_reply **out, const api_gen *p, const char *call_ids)
{
    api_reply *r = calloc(1, sizeof *r);
    *out = r;
    if (!r) return -1;
    snprintf(r->ids, sizeof r->ids, "%s", call_ids);
    if (chat_reply_create(&r->split, (reply_syntax)p->reply_syntax, p->parse_tools)) {
        api_reply_destroy(r);
        *out = NULL;
        return -1;
    }
    return 0;
}

void api_reply_destroy(api_reply *r)
{
    if (!r) return;
    chat_reply_destroy(r->split);
    free(r->text[0]);
    free(r->text[1]);
    json_object_put(r->tool_calls);
    free(r);
}

/* {"index", "id", "type": "function", "function": {"name", "arguments"}} */
static json_object *tool_call(api_reply *r, const reply_event *ev, int with_index)
{
    char id[96];
    snprintf(id, sizeof id, "%s%d", r->ids, r->calls);
    json_object *c = json_object_new_object(), *f = json_object_new_object();
    if (!c || !f) { json_object_put(c); json_object_put(f); return NULL; }
    if (with_index) json_object_object_add(c, "index", json_object_new_int(r->calls));
    json_object_object_add(c, "id", json_object_new_string(id));
    json_object_object_add(c, "type", json_object_new_string("function"));
    json_object_object_add(f, "name", json_object_new_string(ev->name));
    json_object_object_add(f, "arguments", json_object_new_string_len(ev->text, (int)ev->len));
    json_object_object_add(c, "function", f);
    r->calls++;
    return c;
}

typedef struct delta_ctx { api_reply *r; api_delta_fn fn; void *ctx; } delta_ctx;

static int to_delta(void *ctx, const reply_event *ev)
{
    delta_ctx *d = ctx;
    json_object *o = json_object_new_object();
    if (!o) return -1;
    if (ev->part == REPLY_TOOL_CALL) {
        json_object *arr = json_object_new_array(), *c = tool_call(d->r, ev, 1);
        if (!arr || !c || json_object_array_add(arr, c)) { json_object_put(arr); json_object_put(c); json_object_put(o); return -1; }
        json_object_object_add(o, "tool_calls", arr);
    } else {
        json_object_object_add(o, ev->part == REPLY_REASONING ? "reasoning_content" : "content",
                               json_object_new_string_len(ev->text, (int)ev->len));
    }
    return d->fn(d->ctx, o);
}

int api_reply_stream(api_reply *r, const char *text, size_t len, api_delta_fn fn, void *ctx)
{
    delta_ctx d = { r, fn, ctx };
    return chat_reply_push(r->split, text, len, to_delta, &d);
}

int api_reply_stream_end(api_reply *r, api_delta_fn fn, void *ctx)
{
    delta_ctx d = { r, fn, ctx };
    return chat_reply_finish(r->split, to_delta, &d);
}

static int to_message(void *ctx, const reply_event *ev)
{
    api_reply *r = ctx;
    if (ev->part == REPLY_TOOL_CALL) {
        if (!r->tool_calls && !(r->tool_calls = json_object_new_array())) return -1;
        json_object *c = tool_call(r, ev, 0);
        if (!c || json_object_array_add(r->tool_calls, c)) { json_object_put(c); return -1; }
        return 0;
    }
    int k = ev->part == REPLY_REASONING;
    if (r->len[k] + ev->len + 1 > r->cap[k]) {
        size_t cap = (r->len[k] + ev->len + 1) * 2;
        char *p = realloc(r->text[k], cap);
        if (!p) return -1;
        r->text[k] = p;
        r->cap[k] = cap;
    }
    memcpy(r->text[k] + r->len[k], ev->text, ev->len);
    r->len[k] += ev->len;
    return 0;
}

int api_reply_add(api_reply *r, const char *text, size_t len)
{
    if (chat_reply_push(r->split, text, len, to_message, r)) r->oom = 1;
    return r->oom ? -1 : 0;
}

static int blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strchr(" \t\r\n", s[i])) return 0;
    return 1;
}

json_object *api_reply_message(api_reply *r)
{
    if (chat_reply_finish(r->split, to_message, r) || r->oom) return NULL;
    json_object *m = json_object_new_object();
    if (!m) return NULL;
    json_object_object_add(m, "role", json_object_new_string("assistant"));
    int no_content = r->tool_calls && blank(r->text[0], r->len[0]);
    json_object_object_add(m, "content", no_content ? NULL : json_object_new_string_len(r->text[0] ? r->text[0] : "", (int)r->len[0]));
    if (r->len[1]) json_object_object_add(m, "reasoning_content", json_object_new_string_len(r->text[1], (int)r->len[1]));
    if (r->tool_calls) json_object_object_add(m, "tool_calls", json_object_get(r->tool_calls));
    return m;
}

const char *api_reply_finish(const api_reply *r, const char *fin)
{
    return r && r->calls && fin && !strcmp(fin, "stop") ? "tool_calls" : fin;
}
