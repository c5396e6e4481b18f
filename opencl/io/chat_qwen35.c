/* chat_qwen35.c — the Qwen 3.5 chat template (llama.cpp models/templates/Qwen3.5-4B.jinja), byte-identical
 * to jinja2 rendering it:
 *   a system turn (the tool declarations as JSON lines plus the calling instructions, then a leading
 *   system message's trimmed content); "<|im_start|>{role}\n{trimmed content}<|im_end|>\n" per user turn;
 *   assistant turns after the last real user query carry "<think>\n{reasoning}\n</think>\n\n" (reasoning
 *   from reasoning_content, else split off the content at "</think>"); tool calls as
 *   <tool_call><function=NAME><parameter=KEY>VALUE</parameter></function></tool_call>; consecutive tool
 *   messages share one user turn of <tool_response> blocks; the generation prompt opens an assistant turn
 *   with an open "<think>\n" or, thinking off, an empty think block.
 * Where jinja2 raises (no messages, no user query, a system message after the first, an unknown role, bad
 * content parts, a tool call without a string name, arguments that are not a mapping) the conversation is
 * refused. Content parts render as the template does: text, and the vision placeholders for image and
 * video parts. */
#include "chat_int.h"

#include <stdlib.h>
#include <string.h>

/* render_content(content) into r (a scratch rendering: its control-token spans kept), then |trim:
 * [*a, *z) of r's text. sys: the leading system message, where images are refused. */
static void content_of(chat_out *o, chat_out *r, json_object *c, int sys, int i, size_t *a, size_t *z)
{
    *r = (chat_out){ .specials = o->specials, .err = o->err, .errlen = o->errlen };
    if (py_is_str(c)) {
        co_str(r, c, 0);
    } else if (py_is_list(c)) {
        for (size_t j = 0; j < json_object_array_length(c) && !r->failed; j++) {
            json_object *it = json_object_array_get_idx(c, j), *ty = py_get(it, "type");
            int has_image = 0, has_video = 0, has_text = 0;
            if (py_is_map(it)) {
                has_image = json_object_object_get_ex(it, "image", NULL) ||
                            json_object_object_get_ex(it, "image_url", NULL);
                has_video = json_object_object_get_ex(it, "video", NULL);
                has_text = json_object_object_get_ex(it, "text", NULL);
            } else if (py_is_str(it)) { /* `'image' in item` of a string is a substring test */
                const char *s = json_object_get_string(it);
                has_image = strstr(s, "image") != NULL;
                has_video = strstr(s, "video") != NULL;
                has_text = strstr(s, "text") != NULL;
            } else if (py_is_list(it)) { /* ... and of a list, an element test */
                json_object *img = json_object_new_string("image"), *url = json_object_new_string("image_url"),
                            *vid = json_object_new_string("video"), *txt = json_object_new_string("text");
                for (size_t e = 0; e < json_object_array_length(it); e++) {
                    json_object *x = json_object_array_get_idx(it, e);
                    has_image |= py_eq(x, img) || py_eq(x, url);
                    has_video |= py_eq(x, vid);
                    has_text |= py_eq(x, txt);
                }
                json_object_put(img); json_object_put(url); json_object_put(vid); json_object_put(txt);
            } else {
                co_fail(r, "messages[%d]: content part %zu is neither an object nor a string", i, j);
                break;
            }
            if (has_image || py_eq_str(ty, "image")) {
                if (sys) co_fail(r, "messages[0]: System message cannot contain images.");
                co_tpl(r, "<|vision_start|><|image_pad|><|vision_end|>");
            } else if (has_video || py_eq_str(ty, "video")) {
                if (sys) co_fail(r, "messages[0]: System message cannot contain videos.");
                co_tpl(r, "<|vision_start|><|video_pad|><|vision_end|>");
            } else if (has_text) {
                co_str(r, py_get(it, "text"), 0);
            } else {
                co_fail(r, "messages[%d]: Unexpected item type in content.", i);
            }
        }
    } else if (c && c != PY_UNDEF) {
        co_fail(r, "messages[%d]: Unexpected content type.", i);
    }
    if (r->failed) {
        o->failed = r->failed; /* r wrote its message into o's buffer */
        *a = *z = 0;
        return;
    }
    const char *s = r->t.p ? r->t.p : "";
    size_t n = r->t.n;
    py_strip(&s, &n);
    *a = (size_t)(s - (r->t.p ? r->t.p : s));
    *z = *a + n;
}

/* r's text [a, z) and the control-token spans inside it onto o (trimming never cuts a span: control-token
 * texts hold no whitespace) */
static void put_range(chat_out *o, const chat_out *r, size_t a, size_t z)
{
    size_t at = a;
    for (int k = 0; k < r->nsp && !o->failed; k++) {
        const chat_span *sp = &r->sp[k];
        char tok[64];
        if (sp->off < a || sp->off + sp->len > z || sp->len >= sizeof tok) continue;
        co_data(o, r->t.p + at, sp->off - at);
        memcpy(tok, r->t.p + sp->off, sp->len);
        tok[sp->len] = 0;
        co_special(o, tok);
        at = sp->off + sp->len;
    }
    if (z > at) co_data(o, r->t.p + at, z - at);
}

static void scratch_free(chat_out *r)
{
    sb_free(&r->t);
    free(r->sp);
}

/* the index of the last user message that is not only a tool response, or -1 */
static int last_query(chat_out *o, json_object *msgs, int n)
{
    for (int i = n - 1; i >= 0 && !o->failed; i--) {
        json_object *m = json_object_array_get_idx(msgs, i);
        if (!py_eq_str(py_get(m, "role"), "user")) continue;
        chat_out r;
        size_t a, z;
        content_of(o, &r, py_get(m, "content"), 0, i, &a, &z);
        int resp = !o->failed && z - a >= 16 && !memcmp(r.t.p + a, "<tool_response>", 15) &&
                   !memcmp(r.t.p + z - 16, "</tool_response>", 16);
        scratch_free(&r);
        if (!o->failed && !resp) return i;
    }
    return -1;
}

static void put_json(chat_out *o, json_object *v)
{
    strbuf b = { 0 };
    py_tojson(&b, v);
    if (b.oom) co_nomem(o);
    else co_data(o, b.p ? b.p : "", b.n);
    sb_free(&b);
}

/* a string's characters as the template's `for tool in tools` meets them: one JSON string each */
static void tool_char(chat_out *o, const char *s, size_t n, int index, int last, void *ctx)
{
    (void)index, (void)last, (void)ctx;
    json_object *c = json_object_new_string_len(s, (int)n);
    if (!c) { co_nomem(o); return; }
    co_tpl(o, "\n");
    put_json(o, c);
    json_object_put(c);
}

static void tool_call(chat_out *o, json_object *tc, int first, int content_nonempty, int i)
{
    json_object *fn = py_get(tc, "function");
    if (fn != PY_UNDEF) tc = fn;
    json_object *name = py_get(tc, "name"), *args = py_get(tc, "arguments");
    if (!py_is_str(name)) { co_fail(o, "messages[%d]: a tool call's name must be a string", i); return; }
    co_tpl(o, first ? (content_nonempty ? "\n\n<tool_call>\n<function=" : "<tool_call>\n<function=")
                    : "\n<tool_call>\n<function=");
    co_str(o, name, 0);
    co_tpl(o, ">\n");
    if (args != PY_UNDEF) {
        if (!py_is_map(args)) { co_fail(o, "messages[%d]: Can only get item pairs from a mapping.", i); return; }
        json_object_object_foreach(args, key, val) {
            co_tpl(o, "<parameter=");
            co_data(o, key, strlen(key));
            co_tpl(o, ">\n");
            if (py_is_map(val) || py_is_list(val)) put_json(o, val);
            else co_str(o, val, 0);
            co_tpl(o, "\n</parameter>\n");
        }
    }
    co_tpl(o, "</function>\n</tool_call>");
}

/* an assistant turn: content (r's [a, z)) with its reasoning, then the tool calls */
static void assistant(chat_out *o, json_object *m, const chat_out *r, size_t a, size_t z, int after_query, int i)
{
    json_object *rc = py_get(m, "reasoning_content");
    const char *t = r->t.p ? r->t.p : "";
    size_t ra = 0, rz = 0, ca = a, cz = z; /* reasoning and content, as ranges of r's text */
    const char *rs = t;
    if (py_is_str(rc)) {
        rs = json_object_get_string(rc);
        rz = (size_t)json_object_get_string_len(rc);
    } else {
        const char *end = memmem(t + a, z - a, "</think>", 8);
        if (end) {
            /* content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') */
            size_t e = (size_t)(end - t);
            while (e > a && t[e - 1] == '\n') e--;
            size_t s = a;
            for (const char *p = t + a; (p = memmem(p, t + e - p, "<think>", 7)); p += 7) s = (size_t)(p - t) + 7;
            while (s < e && t[s] == '\n') s++;
            ra = s, rz = e;
            /* content.split('</think>')[-1].lstrip('\n') */
            size_t last = (size_t)(end - t) + 8;
            for (const char *p = t + last; (p = memmem(p, t + z - p, "</think>", 8)); p += 8) last = (size_t)(p - t) + 8;
            ca = last;
            while (ca < cz && t[ca] == '\n') ca++;
        }
    }
    const char *rp = rs + ra;
    size_t rn = rz - ra;
    py_strip(&rp, &rn);
    co_tpl(o, "<|im_start|>assistant\n");
    if (after_query) {
        co_tpl(o, "<think>\n");
        co_data(o, rp, rn);
        co_tpl(o, "\n</think>\n\n");
    }
    put_range(o, r, ca, cz);
    json_object *tcs = py_get(m, "tool_calls");
    if (py_truthy(tcs) && (py_is_list(tcs) || py_is_str(tcs))) {
        const char *cp = t + ca;
        size_t cn = cz - ca;
        py_strip(&cp, &cn);
        size_t k = py_is_list(tcs) ? json_object_array_length(tcs) : 0;
        if (py_is_str(tcs)) co_fail(o, "messages[%d]: a tool call's name must be a string", i);
        for (size_t j = 0; j < k && !o->failed; j++) tool_call(o, json_object_array_get_idx(tcs, j), j == 0, cn > 0, i);
    }
    co_tpl(o, "<|im_end|>\n");
}

/* the system turn: the tools' declarations and instructions, and a leading system message */
static void system_turn(chat_out *o, json_object *msgs, json_object *tools)
{
    json_object *m0 = json_object_array_get_idx(msgs, 0);
    int sys = py_eq_str(py_get(m0, "role"), "system");
    int with_tools = py_truthy(tools) && (py_is_list(tools) || py_is_str(tools)); /* iterable, not a mapping */
    chat_out r = { 0 };
    size_t a = 0, z = 0;
    if (sys) content_of(o, &r, py_get(m0, "content"), 1, 0, &a, &z);
    if (with_tools && !o->failed) {
        co_tpl(o, "<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>");
        if (py_is_list(tools))
            for (size_t j = 0; j < json_object_array_length(tools) && !o->failed; j++) {
                co_tpl(o, "\n");
                put_json(o, json_object_array_get_idx(tools, j));
            }
        else py_each_str(o, tools, tool_char, NULL);
        co_tpl(o, "\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
                  "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n"
                  "</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second parameter\n"
                  "that can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n"
                  "- Function calls MUST follow the specified format: an inner <function=...></function> block must "
                  "be nested within <tool_call></tool_call> XML tags\n- Required parameters MUST be specified\n"
                  "- You may provide optional reasoning for your function call in natural language BEFORE the "
                  "function call, but NOT after\n- If there is no function call available, answer the question "
                  "like normal with your current knowledge and do not tell the user about function calls\n"
                  "</IMPORTANT>");
        if (sys && z > a) {
            co_tpl(o, "\n\n");
            put_range(o, &r, a, z);
        }
        co_tpl(o, "<|im_end|>\n");
    } else if (sys && !o->failed) {
        co_tpl(o, "<|im_start|>system\n");
        put_range(o, &r, a, z);
        co_tpl(o, "<|im_end|>\n");
    }
    if (sys) scratch_free(&r);
}

void chat_render_qwen35(chat_out *o, json_object *msgs, json_object *tools, const chat_opts *opt)
{
    int n = (int)json_object_array_length(msgs);
    if (n == 0) { co_fail(o, "No messages provided."); return; }
    system_turn(o, msgs, tools);
    int q = last_query(o, msgs, n);
    if (q < 0 && !o->failed) co_fail(o, "No user query found in messages.");
    for (int i = 0; i < n && !o->failed; i++) {
        json_object *m = json_object_array_get_idx(msgs, i), *role = py_get(m, "role");
        chat_out r;
        size_t a, z;
        content_of(o, &r, py_get(m, "content"), 0, i, &a, &z);
        if (o->failed) { scratch_free(&r); break; }
        if (py_eq_str(role, "system")) {
            if (i > 0) co_fail(o, "messages[%d]: System message must be at the beginning.", i);
        } else if (py_eq_str(role, "user")) {
            co_tpl(o, "<|im_start|>user\n");
            put_range(o, &r, a, z);
            co_tpl(o, "<|im_end|>\n");
        } else if (py_eq_str(role, "assistant")) {
            assistant(o, m, &r, a, z, i > q, i);
        } else if (py_eq_str(role, "tool")) {
            json_object *prev = i > 0 ? json_object_array_get_idx(msgs, i - 1) : PY_UNDEF;
            if (py_truthy(prev) && !py_eq_str(py_get(prev, "role"), "tool")) co_tpl(o, "<|im_start|>user");
            co_tpl(o, "\n<tool_response>\n");
            put_range(o, &r, a, z);
            co_tpl(o, "\n</tool_response>");
            if (i == n - 1 || !py_eq_str(py_get(json_object_array_get_idx(msgs, i + 1), "role"), "tool"))
                co_tpl(o, "<|im_end|>\n");
        } else {
            co_fail(o, "messages[%d]: Unexpected message role.", i);
        }
        scratch_free(&r);
    }
    if (opt->add_generation_prompt)
        co_tpl(o, opt->enable_thinking ? "<|im_start|>assistant\n<think>\n" : "<|im_start|>assistant\n<think>\n\n</think>\n\n");
}
