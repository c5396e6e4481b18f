/* chat_gemma4.c — Gemma 4's chat templates (three published texts, a table of their differences),
 * rendered as jinja2 renders them: the system turn (thinking switch, system/developer prompt, tool
 * declarations in Gemma's own syntax: dictsort order, <|"|> quoting, upper-cased types), then each message
 * (model turns lose their thoughts; tool calls as call:name{...}; tool results either as turns, as
 * <|tool_response> blocks from legacy `tool_responses`, or, in the 31B template, folded into the model turn
 * that called them), then the generation prompt. Where jinja2 raises (undefined access, a str + None), the
 * conversation is refused with a message saying what is missing. */
#include "chat_int.h"

#include <stdlib.h>
#include <string.h>

typedef enum g4_loop { LOOP_RELEASE, LOOP_INTERLEAVED, LOOP_31B } g4_loop;

typedef struct g4_variant {
    const char *think;          /* the thinking switch opening the system turn */
    const char *image, *video;  /* media placeholders */
    int params_31b;             /* format_parameters: items and nullable before properties, commas checked */
    g4_loop loop;               /* how messages, tool calls and tool results become turns */
} g4_variant;

static const g4_variant variants[CHAT_TPL_COUNT] = {
    [CHAT_TPL_GEMMA4] = { "<|think|>", "\n\n<|image|>\n\n", "\n\n<|video|>\n\n", 0, LOOP_RELEASE },
    [CHAT_TPL_GEMMA4_INTERLEAVED] = { "<|think|>\n", "<|image|>", "<|video|>", 0, LOOP_INTERLEAVED },
    [CHAT_TPL_GEMMA4_31B] = { "<|think|>\n", "<|image|>", "<|video|>", 1, LOOP_31B },
};

/* ns.prev_message_type: what the last message ended with */
enum { PREV_NONE, PREV_THINK, PREV_TOOL, PREV_TOOL_CALL, PREV_TOOL_RESPONSE, PREV_MEDIA };

#define MAX_DEPTH 200 /* nesting of tool schemas and argument values (json-c parses 32 by default) */

typedef struct g4 {
    chat_out *o;
    const g4_variant *v;
    int tool;        /* tools[tool] being declared, for messages */
} g4;

static const char Q[] = "<|\"|>";

static void quoted(chat_out *o, const char *s, size_t n)
{
    co_tpl(o, Q);
    co_data(o, s, n);
    co_tpl(o, Q);
}

static void quoted_str(chat_out *o, json_object *v)
{
    co_tpl(o, Q);
    co_str(o, v, 0);
    co_tpl(o, Q);
}

static int enter(chat_out *o)
{
    if (++o->depth > MAX_DEPTH) { co_fail(o, "values nested more than %d deep", MAX_DEPTH); return 0; }
    return 1;
}

/* str(v).upper(), malloc'd (NULL when out of memory) */
static char *upper_of(chat_out *o, json_object *v)
{
    strbuf s = { 0 }, u = { 0 };
    py_str(&s, v);
    py_case(&u, s.p ? s.p : "", s.n, 1);
    sb_put(&u, "", 0);
    if (s.oom || u.oom) { co_nomem(o); sb_free(&u); }
    sb_free(&s);
    if (!u.p && !u.oom) u.p = calloc(1, 1);
    if (!u.p) co_nomem(o);
    return u.p;
}

/* ---- format_argument ---- */

static void fmt_argument(chat_out *o, json_object *a, int escape_keys);

/* a dict's entries in dictsort order as key:format_argument(value), comma-separated */
static void fmt_pairs(chat_out *o, json_object *obj, int escape_keys)
{
    int n, oom;
    py_item *it = py_dictsort(obj, &n, &oom);
    if (oom) { co_nomem(o); return; }
    for (int i = 0; i < n; i++) {
        if (i) co_tpl(o, ",");
        if (escape_keys) quoted(o, it[i].key, it[i].klen);
        else co_data(o, it[i].key, it[i].klen);
        co_tpl(o, ":");
        fmt_argument(o, it[i].val, escape_keys);
    }
    free(it);
}

static void fmt_argument(chat_out *o, json_object *a, int escape_keys)
{
    if (o->failed) return;
    if (py_is_str(a)) { quoted_str(o, a); return; }
    if (a && a != PY_UNDEF && json_object_get_type(a) == json_type_boolean) {
        co_tpl(o, json_object_get_boolean(a) ? "true" : "false");
        return;
    }
    if (py_is_map(a)) {
        if (!enter(o)) return;
        co_tpl(o, "{");
        fmt_pairs(o, a, escape_keys);
        co_tpl(o, "}");
        o->depth--;
        return;
    }
    if (py_is_list(a) || a == PY_UNDEF) { /* Undefined is an empty sequence to jinja2 */
        if (!enter(o)) return;
        co_tpl(o, "[");
        size_t n = a == PY_UNDEF ? 0 : json_object_array_length(a);
        for (size_t i = 0; i < n; i++) {
            if (i) co_tpl(o, ",");
            fmt_argument(o, json_object_array_get_idx(a, i), escape_keys);
        }
        co_tpl(o, "]");
        o->depth--;
        return;
    }
    co_str(o, a, 0); /* numbers as Python prints them, None */
}

/* ---- tool declarations ---- */

static void quoted_item(chat_out *o, const char *s, size_t n, int index, int last, void *ctx)
{
    (void)index;
    if (ctx) { /* upper-cased */
        strbuf u = { 0 };
        py_case(&u, s, n, 1);
        if (u.oom) co_nomem(o);
        quoted(o, u.p ? u.p : "", u.n);
        sb_free(&u);
    } else {
        quoted(o, s, n);
    }
    if (!last) co_tpl(o, ",");
}

/* the elements of a `for` over v, quoted and comma-separated */
static void quoted_list(g4 *r, json_object *v, int upper, const char *what)
{
    static const char up = 1;
    if (py_each_str(r->o, v, quoted_item, upper ? (void *)&up : NULL) < 0)
        co_fail(r->o, "tools[%d]: '%s' must be a list", r->tool, what);
}

static void comma(chat_out *o, int *add)
{
    if (*add) co_tpl(o, ",");
    else *add = 1;
}

static void fmt_parameters(g4 *r, json_object *props);

static void items_body(g4 *r, json_object *items)
{
    chat_out *o = r->o;
    int n, oom, found = 0;
    py_item *it = py_dictsort(items, &n, &oom);
    if (oom) { co_nomem(o); return; }
    for (int i = 0; i < n && !o->failed; i++) {
        const char *k = it[i].key;
        json_object *v = it[i].val;
        if (!v) continue; /* "is not none" */
        if (found) co_tpl(o, ",");
        found = 1;
        if (!strcmp(k, "properties")) {
            co_tpl(o, "properties:{");
            if (py_is_map(v)) fmt_parameters(r, v);
            co_tpl(o, "}");
        } else if (!strcmp(k, "required")) {
            co_tpl(o, "required:[");
            quoted_list(r, v, 0, "items.required");
            co_tpl(o, "]");
        } else if (!strcmp(k, "type")) {
            co_tpl(o, "type:");
            if (py_is_str(v)) {
                char *u = upper_of(o, v);
                if (u) quoted(o, u, strlen(u));
                free(u);
            } else {
                co_tpl(o, "[");
                quoted_list(r, v, 1, "items.type");
                co_tpl(o, "]");
            }
        } else {
            co_data(o, k, it[i].klen);
            co_tpl(o, ":");
            fmt_argument(o, v, 1);
        }
    }
    free(it);
}

static int standard_key(const char *k)
{
    static const char *const keys[] = { "description", "type", "properties", "required", "nullable" };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!strcmp(k, keys[i])) return 1;
    return 0;
}

static void opt_nullable(chat_out *o, json_object *v, int *add)
{
    if (!py_truthy(py_get(v, "nullable"))) return;
    comma(o, add);
    co_tpl(o, "nullable:true");
}

static void opt_enum(chat_out *o, json_object *v, int *add)
{
    json_object *e = py_get(v, "enum");
    if (!py_truthy(e)) return;
    comma(o, add);
    co_tpl(o, "enum:");
    fmt_argument(o, e, 1);
}

static void fmt_parameters(g4 *r, json_object *props)
{
    chat_out *o = r->o;
    if (!py_is_map(props)) { co_fail(o, "tools[%d]: 'properties' must be an object", r->tool); return; }
    if (!enter(o)) return;
    int n, oom, found = 0;
    py_item *it = py_dictsort(props, &n, &oom);
    if (oom) { co_nomem(o); return; }
    for (int i = 0; i < n && !o->failed; i++) {
        json_object *v = it[i].val;
        if (standard_key(it[i].key)) continue;
        if (found) co_tpl(o, ",");
        found = 1;
        co_data(o, it[i].key, it[i].klen);
        co_tpl(o, ":{");
        int add = 0;
        json_object *desc = py_get(v, "description"), *items = py_get(v, "items"), *sub = py_get(v, "properties"),
                    *req = py_get(v, "required");
        if (py_truthy(desc)) {
            co_tpl(o, "description:");
            quoted_str(o, desc);
            add = 1;
        }
        char *t = upper_of(o, py_get(v, "type"));
        if (!t) break;
        int is_str = !strcmp(t, "STRING"), is_obj = !strcmp(t, "OBJECT"), is_arr = !strcmp(t, "ARRAY");
        int has_items = is_arr && py_is_map(items) && py_truthy(items);
        if (!r->v->params_31b) {
            opt_nullable(o, v, &add);
            if (is_str) opt_enum(o, v, &add);
            else if (is_obj) {
                co_tpl(o, ",properties:{");
                fmt_parameters(r, py_is_map(sub) ? sub : v);
                co_tpl(o, "}");
                if (py_truthy(req)) {
                    co_tpl(o, ",required:[");
                    quoted_list(r, req, 0, "required");
                    co_tpl(o, "]");
                }
            } else if (has_items) {
                co_tpl(o, ",items:{");
                items_body(r, items);
                co_tpl(o, "}");
            }
        } else {
            if (is_str) opt_enum(o, v, &add);
            else if (has_items) {
                comma(o, &add);
                co_tpl(o, "items:{");
                items_body(r, items);
                co_tpl(o, "}");
            }
            opt_nullable(o, v, &add);
            if (is_obj) {
                comma(o, &add);
                co_tpl(o, "properties:{");
                fmt_parameters(r, py_is_map(sub) ? sub : v);
                co_tpl(o, "}");
                if (py_truthy(req)) {
                    comma(o, &add);
                    co_tpl(o, "required:[");
                    quoted_list(r, req, 0, "required");
                    co_tpl(o, "]");
                }
            }
        }
        comma(o, &add);
        co_tpl(o, "type:");
        quoted(o, t, strlen(t));
        co_tpl(o, "}");
        free(t);
    }
    free(it);
    o->depth--;
}

/* 'response' in function: a key of a dict, a substring of a string, an element of a list */
static int has_response(g4 *r, json_object *fn)
{
    if (py_is_map(fn)) return py_get(fn, "response") != PY_UNDEF;
    if (py_is_str(fn))
        return memmem(json_object_get_string(fn), (size_t)json_object_get_string_len(fn), "response", 8) != NULL;
    if (py_is_list(fn)) {
        for (size_t i = 0; i < json_object_array_length(fn); i++)
            if (py_eq_str(json_object_array_get_idx(fn, i), "response")) return 1;
        return 0;
    }
    co_fail(r->o, "tools[%d]: 'function' must be an object", r->tool);
    return 0;
}

static void fmt_declaration(g4 *r, json_object *tool)
{
    chat_out *o = r->o;
    json_object *fn = py_get(tool, "function");
    if (fn == PY_UNDEF) { co_fail(o, "tools[%d] has no 'function'", r->tool); return; }
    co_tpl(o, "declaration:");
    co_str(o, py_get(fn, "name"), 0);
    co_tpl(o, "{description:");
    quoted_str(o, py_get(fn, "description"));
    json_object *params = py_get(fn, "parameters");
    if (py_truthy(params)) {
        co_tpl(o, ",parameters:{");
        json_object *props = py_get(params, "properties"), *req = py_get(params, "required"),
                    *type = py_get(params, "type");
        if (py_truthy(props)) {
            co_tpl(o, "properties:{");
            fmt_parameters(r, props);
            co_tpl(o, "},");
        }
        if (py_truthy(req)) {
            co_tpl(o, "required:[");
            quoted_list(r, req, 0, "required");
            co_tpl(o, "],");
        }
        if (py_truthy(type)) {
            char *t = upper_of(o, type);
            co_tpl(o, "type:");
            if (t) quoted(o, t, strlen(t));
            co_tpl(o, "}");
            free(t);
        }
    }
    if (has_response(r, fn)) {
        json_object *rd = py_get(fn, "response");
        if (rd == PY_UNDEF) { co_fail(o, "tools[%d]: 'function' must be an object", r->tool); return; }
        co_tpl(o, ",response:{");
        json_object *d = py_get(rd, "description");
        if (py_truthy(d)) {
            co_tpl(o, "description:");
            quoted_str(o, d);
            co_tpl(o, ",");
        }
        char *t = upper_of(o, py_get(rd, "type"));
        if (t && !strcmp(t, "OBJECT")) {
            co_tpl(o, "type:");
            quoted(o, t, strlen(t));
            co_tpl(o, "}");
        }
        free(t);
    }
    co_tpl(o, "}");
}

/* ---- messages ---- */

static void turn_header(chat_out *o, json_object *role, int i)
{
    if (!py_is_str(role)) { co_fail(o, "messages[%d] has no string 'role'", i); return; }
    co_tpl(o, "<|turn>");
    if (py_eq_str(role, "assistant")) co_data(o, "model", 5);
    else co_str(o, role, 0);
    co_tpl(o, "\n");
}

static int is_model(json_object *role) { return py_eq_str(role, "assistant") || py_eq_str(role, "model"); }

static void tool_calls(chat_out *o, json_object *tc, int i)
{
    if (!py_is_list(tc)) { co_fail(o, "messages[%d].tool_calls must be an array", i); return; }
    for (size_t k = 0; k < json_object_array_length(tc) && !o->failed; k++) {
        json_object *fn = py_get(json_object_array_get_idx(tc, k), "function");
        if (fn == PY_UNDEF) { co_fail(o, "messages[%d].tool_calls[%zu] has no 'function'", i, k); return; }
        json_object *name = py_get(fn, "name"), *args = py_get(fn, "arguments");
        if (!py_is_str(name)) { co_fail(o, "messages[%d].tool_calls[%zu].function.name must be a string", i, k); return; }
        co_tpl(o, "<|tool_call>call:");
        co_str(o, name, 0);
        co_tpl(o, "{");
        if (py_is_map(args)) {
            fmt_pairs(o, args, 0);
        } else if (py_is_str(args)) {
            co_str(o, args, 0);
        }
        co_tpl(o, "}<tool_call|>");
    }
}

/* format_tool_response_block: name is a Python str (the caller checked) */
static void response_block(chat_out *o, const char *name, size_t nlen, json_object *resp)
{
    co_tpl(o, "<|tool_response>");
    co_tpl(o, "response:");
    co_data(o, name, nlen);
    if (py_is_map(resp)) {
        co_tpl(o, "{");
        fmt_pairs(o, resp, 0);
        co_tpl(o, "}");
    } else {
        co_tpl(o, "{value:");
        fmt_argument(o, resp, 0);
        co_tpl(o, "}");
    }
    co_tpl(o, "<tool_response|>");
}

static void unknown_block(chat_out *o, const char *s, size_t n, int index, int last, void *ctx)
{
    (void)s; (void)n; (void)index; (void)last; (void)ctx;
    response_block(o, "unknown", 7, PY_UNDEF);
}

/* tool_responses on the assistant message (Gemma's native form); returns 1 if any was written */
static int legacy_responses(chat_out *o, json_object *trs, int i)
{
    if (!py_is_list(trs)) { /* a dict's keys or a string's characters: no name, no response */
        int n = py_each_str(o, trs, unknown_block, NULL);
        if (n < 0) co_fail(o, "messages[%d].tool_responses must be an array", i);
        return n > 0;
    }
    size_t n = json_object_array_length(trs);
    for (size_t k = 0; k < n && !o->failed; k++) {
        json_object *e = json_object_array_get_idx(trs, k), *nm = py_get(e, "name");
        if (nm != PY_UNDEF && !py_is_str(nm)) {
            co_fail(o, "messages[%d].tool_responses[%zu].name must be a string", i, k);
            return 0;
        }
        if (nm == PY_UNDEF) response_block(o, "unknown", 7, py_get(e, "response"));
        else response_block(o, json_object_get_string(nm), (size_t)json_object_get_string_len(nm), py_get(e, "response"));
    }
    return n > 0;
}

/* strip_thinking: drop every "<|channel>...<channel|>" thought (text up to a "<channel|>" keeps only what
 * precedes its "<|channel>"), then trim */
static void strip_thinking(chat_out *o, json_object *text)
{
    const char *s = json_object_get_string(text), *end = s + json_object_get_string_len(text);
    strbuf res = { 0 };
    for (;;) {
        const char *hit = memmem(s, (size_t)(end - s), "<channel|>", 10), *pe = hit ? hit : end;
        const char *open = memmem(s, (size_t)(pe - s), "<|channel>", 10);
        sb_put(&res, s, (size_t)((open ? open : pe) - s));
        if (!hit) break;
        s = hit + 10;
    }
    if (res.oom) co_nomem(o);
    const char *p = res.p ? res.p : "";
    size_t n = res.n;
    py_strip(&p, &n);
    co_data(o, p, n);
    sb_free(&res);
}

static void content(g4 *r, json_object *m, int i, int model, int *prev)
{
    chat_out *o = r->o;
    json_object *c = py_get(m, "content");
    if (py_is_str(c)) {
        if (model) strip_thinking(o, c);
        else co_str(o, c, 1);
        return;
    }
    if (!py_is_list(c)) return; /* dicts iterate keys (no parts), None and numbers print nothing */
    for (size_t j = 0; j < json_object_array_length(c) && !o->failed; j++) {
        json_object *it = json_object_array_get_idx(c, j), *ty = py_get(it, "type");
        if (py_eq_str(ty, "text")) {
            json_object *tx = py_get(it, "text");
            if (!model) co_str(o, tx, 1);
            else if (py_is_str(tx)) strip_thinking(o, tx);
            else co_fail(o, "messages[%d].content[%zu].text must be a string", i, j);
        } else if (py_eq_str(ty, "image")) {
            co_tpl(o, r->v->image);
            *prev = PREV_MEDIA;
        } else if (py_eq_str(ty, "audio")) {
            co_tpl(o, "<|audio|>");
            *prev = PREV_MEDIA;
        } else if (py_eq_str(ty, "video")) {
            co_tpl(o, r->v->video);
            *prev = PREV_MEDIA;
        }
    }
}

/* the index among the messages after the system one of the last user message, -1 if none */
static int last_user_index(json_object *msgs, int start)
{
    int last = -1;
    for (int i = start; i < (int)json_object_array_length(msgs); i++)
        if (py_eq_str(py_get(json_object_array_get_idx(msgs, i), "role"), "user")) last = i - start;
    return last;
}

/* the release and interleaved templates: every message is a turn (tool results as "tool" turns) */
static int loop_turns(g4 *r, json_object *msgs, int start, int prev)
{
    chat_out *o = r->o;
    int n = (int)json_object_array_length(msgs), last_user = last_user_index(msgs, start);
    for (int i = start; i < n && !o->failed; i++) {
        json_object *m = json_object_array_get_idx(msgs, i), *role = py_get(m, "role"), *tc = py_get(m, "tool_calls");
        if (r->v->loop == LOOP_RELEASE || !(prev == PREV_TOOL_RESPONSE && py_truthy(tc))) turn_header(o, role, i);
        prev = PREV_NONE;
        if (py_truthy(tc)) {
            json_object *rc = py_get(m, "reasoning_content");
            if (r->v->loop == LOOP_INTERLEAVED && py_truthy(rc) && i - start > last_user) {
                co_tpl(o, "<|channel>thought\n");
                co_str(o, rc, 0);
                co_tpl(o, "<channel|>");
            }
            tool_calls(o, tc, i);
            prev = PREV_TOOL_CALL;
        }
        json_object *trs = py_get(m, "tool_responses");
        if (py_truthy(trs)) {
            legacy_responses(o, trs, i);
            prev = PREV_TOOL_RESPONSE;
        }
        content(r, m, i, is_model(role), &prev);
        if (!(py_truthy(trs) && !py_truthy(py_get(m, "content")))) co_tpl(o, "<turn|>\n");
    }
    return prev;
}

/* a role:tool message's content as the 31B template passes it: text parts joined */
static json_object *tool_body(chat_out *o, json_object *body, int k)
{
    if (py_is_str(body) || !(py_is_list(body) || py_is_map(body))) return json_object_get(body);
    if (py_is_map(body)) {
        if (json_object_object_length(body) > 0) co_fail(o, "messages[%d].content must be a string or a list of parts", k);
        return json_object_new_string("");
    }
    strbuf s = { 0 };
    for (size_t j = 0; j < json_object_array_length(body); j++) {
        json_object *part = json_object_array_get_idx(body, j);
        if (!py_is_map(part)) { co_fail(o, "messages[%d].content[%zu] must be an object", k, j); break; }
        if (!py_eq_str(py_dict_get(part, "type"), "text")) continue;
        json_object *t = py_dict_get(part, "text");
        if (!py_is_str(t)) { co_fail(o, "messages[%d].content[%zu].text must be a string", k, j); break; }
        sb_put(&s, json_object_get_string(t), (size_t)json_object_get_string_len(t));
    }
    json_object *r = s.oom ? NULL : json_object_new_string_len(s.p ? s.p : "", (int)s.n);
    sb_free(&s);
    if (!r) co_nomem(o);
    return r;
}

/* the role:tool messages after message i, as <|tool_response> blocks in its turn; returns 1 if any */
static int folded_responses(chat_out *o, json_object *msgs, int i, json_object *tc)
{
    int n = (int)json_object_array_length(msgs), any = 0;
    for (int k = i + 1; k < n && !o->failed; k++) {
        json_object *f = json_object_array_get_idx(msgs, k);
        if (!py_eq_str(py_get(f, "role"), "tool")) break;
        json_object *name = py_dict_get(f, "name"), *id = py_dict_get(f, "tool_call_id");
        for (size_t j = 0; j < json_object_array_length(tc); j++) {
            json_object *c = json_object_array_get_idx(tc, j);
            if (py_eq(py_dict_get(c, "id"), id)) name = py_get(py_get(c, "function"), "name");
        }
        json_object *body = tool_body(o, py_dict_get(f, "content"), k);
        if (!o->failed && !py_is_str(name))
            co_fail(o, "messages[%d]: a tool result with no 'name' and a tool_call_id that matches no call", k);
        if (!o->failed) response_block(o, json_object_get_string(name), (size_t)json_object_get_string_len(name), body);
        json_object_put(body);
        any = 1;
    }
    return any;
}

/* the 31B template: tool results join the model turn that called them; consecutive assistant messages
 * continue one model turn */
static int loop_folded(g4 *r, json_object *msgs, int start, int prev)
{
    chat_out *o = r->o;
    int n = (int)json_object_array_length(msgs), last_user = last_user_index(msgs, start);
    for (int i = start; i < n && !o->failed; i++) {
        json_object *m = json_object_array_get_idx(msgs, i), *role = py_get(m, "role");
        if (py_eq_str(role, "tool")) continue;
        prev = PREV_NONE;
        json_object *prev_role = NULL;
        for (int j = i - 1; j >= start; j--) {
            json_object *rj = py_get(json_object_array_get_idx(msgs, j), "role");
            if (!py_eq_str(rj, "tool")) { prev_role = rj; break; }
        }
        if (!(is_model(role) && py_eq_str(prev_role, "assistant"))) turn_header(o, role, i);
        if (o->failed) break;
        json_object *tc = py_get(m, "tool_calls"), *think = py_dict_get(m, "reasoning");
        if (!py_truthy(think)) think = py_dict_get(m, "reasoning_content");
        if (py_truthy(think) && i - start > last_user && py_truthy(tc)) {
            if (!py_is_str(think)) { co_fail(o, "messages[%d]: reasoning must be a string", i); break; }
            co_tpl(o, "<|channel>thought\n");
            co_str(o, think, 0);
            co_tpl(o, "\n<channel|>");
        }
        if (py_truthy(tc)) {
            tool_calls(o, tc, i);
            prev = PREV_TOOL_CALL;
        }
        int wrote = 0;
        json_object *trs = py_dict_get(m, "tool_responses");
        if (py_truthy(trs)) {
            wrote = legacy_responses(o, trs, i);
            prev = PREV_TOOL_RESPONSE;
        } else if (py_truthy(tc)) {
            wrote = folded_responses(o, msgs, i, tc);
            if (wrote) prev = PREV_TOOL_RESPONSE;
        }
        content(r, m, i, is_model(role), &prev);
        if (prev == PREV_TOOL_CALL && !wrote) co_tpl(o, "<|tool_response>");
        else if (!(wrote && !py_truthy(py_dict_get(m, "content")))) co_tpl(o, "<turn|>\n");
    }
    return prev;
}

void chat_render_gemma4(chat_out *o, chat_kind k, json_object *msgs, json_object *tools, const chat_opts *opt)
{
    g4 r = { o, &variants[k], 0 };
    int n = (int)json_object_array_length(msgs), prev = PREV_NONE, start = 0;
    if (opt->bos) co_special(o, opt->bos);
    if (n == 0) { co_fail(o, "messages is empty"); return; }
    json_object *m0 = json_object_array_get_idx(msgs, 0), *role0 = py_get(m0, "role");
    int sys0 = py_eq_str(role0, "system") || py_eq_str(role0, "developer");
    if (opt->enable_thinking || py_truthy(tools) || sys0) {
        co_tpl(o, "<|turn>system\n");
        if (opt->enable_thinking) {
            co_tpl(o, r.v->think);
            prev = PREV_THINK;
        }
        if (sys0) {
            co_str(o, py_get(m0, "content"), 1);
            start = 1;
        }
        if (py_truthy(tools)) {
            if (!py_is_list(tools)) { co_fail(o, "tools must be an array of {\"type\": \"function\", \"function\": ...}"); return; }
            for (r.tool = 0; r.tool < (int)json_object_array_length(tools) && !o->failed; r.tool++) {
                co_tpl(o, "<|tool>");
                fmt_declaration(&r, json_object_array_get_idx(tools, r.tool));
                co_tpl(o, "<tool|>");
            }
            prev = PREV_TOOL;
        }
        co_tpl(o, "<turn|>\n");
    }
    prev = r.v->loop == LOOP_31B ? loop_folded(&r, msgs, start, prev) : loop_turns(&r, msgs, start, prev);
    if (!opt->add_generation_prompt) return;
    int header = prev != PREV_TOOL_RESPONSE && (r.v->loop != LOOP_31B || prev != PREV_TOOL_CALL);
    if (header) co_tpl(o, "<|turn>model\n");
    /* thinking off: an empty thought channel (the 31B template writes it only after its own header) */
    if (!opt->enable_thinking && (header || r.v->loop != LOOP_31B)) co_tpl(o, "<|channel>thought\n<channel|>");
}
