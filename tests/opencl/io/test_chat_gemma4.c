/* Chat templates against jinja2: every conversation of tests/golden/chat_gemma4.json and chat_qwen35.json
 * (rendered by tools/gen_chat_corpus.py with transformers' jinja2 environment from the GGUF's own
 * tokenizer.chat_template, llama.cpp's two Gemma 4 31B templates and its Qwen3.5-4B.jinja) must render
 * byte-identical, or be refused where jinja2 raised. Also: each template text in a corpus is recognised as its
 * renderer, and the control-token spans the renderer marks are exactly the template's own (conversation text
 * holding control-token text gets none). One PASS line per conversation and template. Reference: jinja2
 * 3.1.6 via transformers; tolerance: none. */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"

static int fails;

static chat_kind kind_of(const char *name)
{
    for (int k = 0; k < CHAT_TPL_COUNT; k++)
        if (!strcmp(chat_kind_name((chat_kind)k), name)) return (chat_kind)k;
    return CHAT_TPL_COUNT;
}

/* where two strings first differ, for a readable failure */
static void report_diff(const char *name, const char *tpl, const char *got, size_t glen, const char *want, size_t wlen)
{
    size_t i = 0;
    while (i < glen && i < wlen && got[i] == want[i]) i++;
    size_t from = i > 40 ? i - 40 : 0;
    printf("FAIL chat_gemma4 %s %s: differs at byte %zu (lengths %zu, %zu):\n  got  '%.*s'\n  want '%.*s'\n", tpl, name, i,
           glen, wlen, (int)((glen - from) < 120 ? glen - from : 120), got + from,
           (int)((wlen - from) < 120 ? wlen - from : 120), want + from);
    fails++;
}

static void check_case(json_object *c, const char *tpl, json_object *want)
{
    const char *name = json_object_get_string(json_object_object_get(c, "name"));
    json_object *opts = json_object_object_get(c, "options"), *v;
    chat_opts o = { 0, 0, "<bos>" };
    if (json_object_object_get_ex(opts, "add_generation_prompt", &v)) o.add_generation_prompt = json_object_get_boolean(v);
    if (json_object_object_get_ex(opts, "enable_thinking", &v)) o.enable_thinking = json_object_get_boolean(v);
    chat_text t;
    char err[256];
    int rc = chat_render(kind_of(tpl), json_object_object_get(c, "messages"), json_object_object_get(c, "tools"), &o,
                         &t, err, sizeof err);
    json_object *exp = NULL;
    if (!json_object_object_get_ex(want, "expected", &exp)) {
        if (rc == -1 && err[0]) printf("PASS chat_gemma4 %s %s (refused: %s)\n", tpl, name, err);
        else { printf("FAIL chat_gemma4 %s %s: jinja2 raised, the renderer returned %d\n", tpl, name, rc); fails++; }
        if (rc == 0) chat_text_free(&t);
        return;
    }
    if (rc) { printf("FAIL chat_gemma4 %s %s: refused (%d): %s\n", tpl, name, rc, err); fails++; return; }
    const char *w = json_object_get_string(exp);
    size_t wl = (size_t)json_object_get_string_len(exp);
    if (t.len != wl || memcmp(t.text, w, wl)) report_diff(name, tpl, t.text, t.len, w, wl);
    else printf("PASS chat_gemma4 %s %s (%zu bytes, %d control tokens)\n", tpl, name, t.len, t.n_special);
    chat_text_free(&t);
}

/* Control-token spans are the template's own: the conversation with its control-token texts defused (the
 * second character of each made '!', same length; texts the template itself parses out of content are kept:
 * Gemma's thought markers and Qwen's think tags in a model turn, Qwen's tool-response tags in a user turn,
 * which tell a tool result from a query) must give the same spans, and its text must hold control-token
 * text nowhere else. */
typedef struct family_specials {
    const char *const *all;   /* NULL-terminated */
    const char *const *model; /* kept in an assistant / model turn's content */
    const char *const *user;  /* kept in a user turn's content */
} family_specials;
static const char *const g4_all[] = { "<bos>", "<|turn>", "<turn|>", "<|think|>", "<|channel>", "<channel|>",
                                      "<|tool>", "<tool|>", "<|tool_call>", "<tool_call|>", "<|tool_response>",
                                      "<tool_response|>", "<|\"|>", "<|image|>", "<|audio|>", "<|video|>", NULL };
static const char *const g4_model[] = { "<|channel>", "<channel|>", NULL };
static const char *const q35_all[] = { "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>",
                                       "</tool_call>", "<tool_response>", "</tool_response>", "<|vision_start|>",
                                       "<|vision_end|>", "<|image_pad|>", "<|video_pad|>", NULL };
static const char *const q35_model[] = { "<think>", "</think>", NULL };
static const char *const q35_user[] = { "<tool_response>", "</tool_response>", NULL };
static const char *const none[] = { NULL };
static const family_specials G4 = { g4_all, g4_model, none }, Q35 = { q35_all, q35_model, q35_user };

static const family_specials *specials_of(const char *tpl) { return !strcmp(tpl, "qwen35") ? &Q35 : &G4; }

static int listed(const char *const *l, const char *s, size_t n)
{
    for (; *l; l++)
        if (strlen(*l) <= n && !strncmp(s, *l, strlen(*l))) return (int)strlen(*l);
    return 0;
}

static json_object *defuse(json_object *v, const family_specials *f, const char *const *keep)
{
    switch (json_object_get_type(v)) {
    case json_type_string: {
        size_t n = (size_t)json_object_get_string_len(v);
        char *s = malloc(n + 1);
        memcpy(s, json_object_get_string(v), n + 1);
        for (size_t p = 0; p < n; p++) {
            int l = listed(keep, s + p, n - p);
            if (l) { p += (size_t)l - 1; continue; }
            if (listed(f->all, s + p, n - p)) s[p + 1] = '!';
        }
        json_object *r = json_object_new_string_len(s, (int)n);
        free(s);
        return r;
    }
    case json_type_array: {
        json_object *r = json_object_new_array();
        for (size_t i = 0; i < json_object_array_length(v); i++)
            json_object_array_add(r, defuse(json_object_array_get_idx(v, i), f, keep));
        return r;
    }
    case json_type_object: {
        json_object *r = json_object_new_object(), *role;
        int str = json_object_object_get_ex(v, "role", &role) && json_object_get_type(role) == json_type_string;
        const char *rs = str ? json_object_get_string(role) : "";
        const char *const *mine = !strcmp(rs, "assistant") || !strcmp(rs, "model") ? f->model
                                  : !strcmp(rs, "user")                             ? f->user
                                                                                    : NULL;
        json_object_object_foreach(v, k, x)
            json_object_object_add(r, k, defuse(x, f, mine && !strcmp(k, "content") ? mine : keep));
        return r;
    }
    default: return json_object_get(v);
    }
}

static void check_spans(json_object *c, const char *tpl)
{
    const char *name = json_object_get_string(json_object_object_get(c, "name"));
    chat_opts o = { 1, 0, "<bos>" };
    json_object *msgs = json_object_object_get(c, "messages"), *tools = json_object_object_get(c, "tools");
    const family_specials *f = specials_of(tpl);
    json_object *dm = defuse(msgs, f, none), *dt = tools ? defuse(tools, f, none) : NULL;
    chat_text a, b;
    char err[256];
    int ra = chat_render(kind_of(tpl), msgs, tools, &o, &a, err, sizeof err);
    int rb = chat_render(kind_of(tpl), dm, dt, &o, &b, err, sizeof err);
    json_object_put(dm);
    json_object_put(dt);
    if (ra || rb) {
        if (ra == 0) chat_text_free(&a);
        if (rb == 0) chat_text_free(&b);
        return;
    }
    const char *why = NULL;
    if (a.n_special != b.n_special) why = "span counts differ";
    for (int i = 0; !why && i < a.n_special; i++)
        if (a.special[i].off != b.special[i].off || a.special[i].len != b.special[i].len) why = "span offsets differ";
    /* every control-token text in the defused rendering is a span (but for texts kept in conversation
     * text, which may also stand there) */
    int found = 0;
    for (size_t p = 0; !why && p < b.len; p++) {
        int l = listed(f->all, b.text + p, b.len - p);
        if (!l) continue;
        int ok = 0;
        for (int i = 0; i < b.n_special; i++) ok |= b.special[i].off == p && b.special[i].len == (size_t)l;
        if (ok) found++;
        else if (!listed(f->model, b.text + p, b.len - p) && !listed(f->user, b.text + p, b.len - p))
            why = "control-token text outside a span";
    }
    if (!why && found != b.n_special) why = "a span that is not control-token text";
    if (why) { printf("FAIL chat_gemma4 spans %s %s: %s\n", tpl, name, why); fails++; }
    chat_text_free(&a);
    chat_text_free(&b);
}

static int corpus(const char *path)
{
    json_object *doc = json_object_from_file(path);
    if (!doc) { printf("FAIL chat_gemma4: cannot read %s\n", path); fails++; return 0; }
    json_object *tpls = json_object_object_get(doc, "templates");
    json_object_object_foreach(tpls, name, t) {
        json_object *text = json_object_object_get(t, "text");
        char note[512];
        chat_kind want = kind_of(name);
        chat_kind k = chat_pick(chat_kind_family(want), json_object_get_string(text),
                                (size_t)json_object_get_string_len(text), note, sizeof note);
        if (want == CHAT_TPL_COUNT || k != want || note[0]) {
            printf("FAIL chat_gemma4 recognise %s: picked %s (%s)\n", name, chat_kind_name(k), note);
            fails++;
        } else {
            printf("PASS chat_gemma4 recognise %s\n", name);
        }
    }
    json_object *cases = json_object_object_get(doc, "cases");
    int n = 0;
    for (size_t i = 0; i < json_object_array_length(cases); i++) {
        json_object *c = json_object_array_get_idx(cases, i);
        json_object_object_foreach(json_object_object_get(c, "render"), tpl, want) {
            check_case(c, tpl, want);
            check_spans(c, tpl);
            n++;
        }
    }
    json_object_put(doc);
    return n;
}

/* argument: another corpus of the same form (tools/gen_chat_fuzz.py writes random ones) */
int main(int argc, char **argv)
{
    int n = 0;
    if (argc > 1) n += corpus(argv[1]);
    else n += corpus("tests/golden/chat_gemma4.json") + corpus("tests/golden/chat_qwen35.json");
    printf("%d renderings, %d failed\n", n, fails);
    return fails ? 1 : 0;
}
