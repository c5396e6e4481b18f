/* The reply splitter (opencl/include/chat_reply.h):
 * - Gemma 4 call syntax against jinja2: every tool call of tests/golden/chat_gemma4.json's conversations
 *   (arguments given as objects), as jinja2 rendered it with the real templates, parses back to the
 *   conversation's name and arguments (json-c equality; tolerance: none);
 * - splitting is independent of how the text is cut: a reply with a thought, content and two calls fed
 *   whole, in every two-piece cut and byte by byte gives the same events;
 * - malformed calls become content, markers are content when tools are off, REPLY_PLAIN passes text. */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_reply.h"
#include "check.h"

/* events concatenated per part: "C:" content, "R:" reasoning, "T:name(args)" per call */
typedef struct sink { char content[4096], reasoning[4096], calls[4096]; } sink;

static void cat(char *dst, size_t cap, const char *s, size_t n)
{
    size_t l = strlen(dst);
    if (l + n + 1 > cap) n = cap - l - 1;
    memcpy(dst + l, s, n);
    dst[l + n] = 0;
}

static int to_sink(void *ctx, const reply_event *ev)
{
    sink *k = ctx;
    if (ev->part == REPLY_CONTENT) cat(k->content, sizeof k->content, ev->text, ev->len);
    else if (ev->part == REPLY_REASONING) cat(k->reasoning, sizeof k->reasoning, ev->text, ev->len);
    else {
        cat(k->calls, sizeof k->calls, ev->name, strlen(ev->name));
        cat(k->calls, sizeof k->calls, "(", 1);
        cat(k->calls, sizeof k->calls, ev->text, ev->len);
        cat(k->calls, sizeof k->calls, ")", 1);
    }
    return 0;
}

/* feeds s in pieces of the given cut points */
static void run(sink *k, reply_syntax syn, int tools, const char *s, const size_t *cuts, int n_cuts)
{
    memset(k, 0, sizeof *k);
    chat_reply *r;
    CHECK(chat_reply_create(&r, syn, tools) == 0, "create");
    size_t prev = 0, len = strlen(s);
    for (int i = 0; i <= n_cuts; i++) {
        size_t at = i < n_cuts ? cuts[i] : len;
        CHECK(chat_reply_push(r, s + prev, at - prev, to_sink, k) == 0, "push");
        prev = at;
    }
    CHECK(chat_reply_finish(r, to_sink, k) == 0, "finish");
    chat_reply_destroy(r);
}

static int same(const sink *a, const sink *b)
{
    return !strcmp(a->content, b->content) && !strcmp(a->reasoning, b->reasoning) && !strcmp(a->calls, b->calls);
}

static void test_split_anywhere(void)
{
    const char *s = "<|channel>thought\nLet me <think> about <b>it</b>.<channel|>Sure: <|tool_call>call:get_weather"
                    "{city:<|\"|>Paris, <France><|\"|>,days:3}<tool_call|><|tool_call>call:f{}<tool_call|> <tool";
    sink whole, part;
    run(&whole, REPLY_GEMMA4, 1, s, NULL, 0);
    CHECK(!strcmp(whole.reasoning, "Let me <think> about <b>it</b>."), "reasoning '%s'", whole.reasoning);
    CHECK(!strcmp(whole.content, "Sure:  <tool"), "content '%s'", whole.content);
    CHECK(!strcmp(whole.calls, "get_weather({\"city\":\"Paris, <France>\",\"days\":3})f({})"), "calls '%s'", whole.calls);
    size_t len = strlen(s);
    int bad = 0;
    for (size_t c = 1; c < len && bad < 3; c++) {
        run(&part, REPLY_GEMMA4, 1, s, &c, 1);
        if (!same(&whole, &part)) { bad++; CHECK(0, "cut at %zu: content '%s' reasoning '%s' calls '%s'", c, part.content, part.reasoning, part.calls); }
    }
    size_t *cuts = malloc(len * sizeof *cuts);
    for (size_t i = 0; i + 1 < len; i++) cuts[i] = i + 1;
    run(&part, REPLY_GEMMA4, 1, s, cuts, (int)len - 1);
    CHECK(same(&whole, &part), "byte by byte: content '%s' calls '%s'", part.content, part.calls);
    free(cuts);
}

static void test_tools_off_and_plain(void)
{
    const char *s = "a<|tool_call>call:f{x:1}<tool_call|>b";
    sink k;
    run(&k, REPLY_GEMMA4, 0, s, NULL, 0);
    CHECK(!strcmp(k.content, s) && !k.calls[0], "tools off: content '%s'", k.content);
    run(&k, REPLY_PLAIN, 1, "<|channel>x<channel|>", NULL, 0);
    CHECK(!strcmp(k.content, "<|channel>x<channel|>") && !k.reasoning[0], "plain: '%s'", k.content);
}

static void test_malformed_calls(void)
{
    static const char *const bad[] = {
        "<|tool_call>call:f{x:<|\"|>open}<tool_call|>", "<|tool_call>call:{x:1}<tool_call|>",
        "<|tool_call>cal:f{x:1}<tool_call|>", "<|tool_call>call:f{x:1}}<tool_call|>", "<|tool_call>call:f{x}<tool_call|>",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sink k;
        run(&k, REPLY_GEMMA4, 1, bad[i], NULL, 0);
        CHECK(!k.calls[0] && !strcmp(k.content, bad[i]), "'%s': calls '%s' content '%s'", bad[i], k.calls, k.content);
    }
    /* cut off by max_tokens inside a call: what parses once closed is the call, as OpenAI returns a cut
     * call; cut before the name is whole, nothing */
    static const char *const cut[][2] = {
        { "<|tool_call>call:f{x:[1,", "f({\"x\":[1]})" },
        { "<|tool_call>call:f{x:<|\"|>ab c", "f({\"x\":\"ab c\"})" },
        { "<|tool_call>call:f{x:1,y:", "f({\"x\":1})" },
        { "<|tool_call>call:f{x:{a:tr", "f({\"x\":{\"a\":\"tr\"}})" },
        { "<|tool_call>call:get_w", "" },
        { "<|tool_call>", "" },
    };
    for (size_t i = 0; i < sizeof cut / sizeof cut[0]; i++) {
        sink k;
        run(&k, REPLY_GEMMA4, 1, cut[i][0], NULL, 0);
        CHECK(!strcmp(k.calls, cut[i][1]) && !k.content[0], "cut '%s': calls '%s' content '%s'", cut[i][0], k.calls, k.content);
    }
    char *name, *args; /* nesting is bounded */
    char deep[400] = "call:f{a:";
    for (int i = 0; i < 100; i++) strcat(deep, "[");
    CHECK(reply_gemma4_call(deep, strlen(deep), &name, &args) == -1, "deep nesting accepted");
    /* up to json-c's default parse depth, counting the arguments object: 31 lists in it parse back, 32 don't */
    for (int d = 31; d <= 32; d++) {
        char b[200] = "call:f{a:";
        for (int i = 0; i < d; i++) strcat(b, "[");
        for (int i = 0; i < d; i++) strcat(b, "]");
        strcat(b, "}");
        int rc = reply_gemma4_call(b, strlen(b), &name, &args);
        json_object *o = rc == 0 ? json_tokener_parse(args) : NULL;
        CHECK(d == 31 ? o != NULL : rc == -1, "depth %d: rc %d", d, rc);
        json_object_put(o);
        if (rc == 0) { free(name); free(args); }
    }
    /* a cut call nested past that heals to what a client can parse (found by fuzz_reply) */
    sink k;
    char cutdeep[200] = "<|tool_call>call:f{x:";
    for (int i = 0; i < 33; i++) strcat(cutdeep, "[");
    strcat(cutdeep, "0,{y");
    run(&k, REPLY_GEMMA4, 1, cutdeep, NULL, 0);
    size_t kl = strlen(k.calls);
    json_object *healed = kl > 3 && !strncmp(k.calls, "f(", 2) ? (k.calls[kl - 1] = 0, json_tokener_parse(k.calls + 2)) : NULL;
    CHECK(healed && !k.content[0], "cut deep call: calls '%s' content '%s'", k.calls, k.content);
    json_object_put(healed);
}

/* the <|tool_call>...<tool_call|> bodies of text, in order */
static int bodies(const char *text, const char **b, size_t *n, int cap)
{
    int k = 0;
    for (const char *p = text; k < cap && (p = strstr(p, "<|tool_call>")); k++) {
        p += strlen("<|tool_call>");
        const char *e = strstr(p, "<tool_call|>");
        if (!e) break;
        b[k] = p;
        n[k] = (size_t)(e - p);
        p = e;
    }
    return k;
}

static void test_jinja2_calls_parse_back(void)
{
    json_object *doc = json_object_from_file("tests/golden/chat_gemma4.json");
    CHECK(doc, "tests/golden/chat_gemma4.json");
    if (!doc) return;
    json_object *cases = json_object_object_get(doc, "cases");
    int checked = 0;
    for (size_t i = 0; i < json_object_array_length(cases); i++) {
        json_object *c = json_object_array_get_idx(cases, i), *msgs = json_object_object_get(c, "messages");
        /* the conversation's calls, in order; cases with string arguments are printed raw by jinja2 */
        json_object *calls[32];
        int nc = 0, raw = 0;
        for (size_t m = 0; m < json_object_array_length(msgs); m++) {
            json_object *tc = json_object_object_get(json_object_array_get_idx(msgs, m), "tool_calls");
            if (!json_object_is_type(tc, json_type_array)) continue;
            for (size_t t = 0; t < json_object_array_length(tc) && nc < 32; t++) {
                json_object *fn = json_object_object_get(json_object_array_get_idx(tc, t), "function");
                json_object *args = json_object_object_get(fn, "arguments");
                if (!json_object_is_type(args, json_type_object) || !json_object_is_type(json_object_object_get(fn, "name"), json_type_string)) raw = 1;
                calls[nc++] = fn;
            }
        }
        if (!nc || raw) continue;
        json_object *exp = json_object_object_get(json_object_object_get(json_object_object_get(c, "render"), "gemma4-31b"), "expected");
        if (!exp) continue;
        const char *b[32];
        size_t bn[32];
        int nb = bodies(json_object_get_string(exp), b, bn, 32);
        CHECK(nb == nc, "%s: %d calls rendered, %d in the conversation", json_object_get_string(json_object_object_get(c, "name")), nb, nc);
        for (int k = 0; k < nb && k < nc; k++) {
            char *name, *args;
            if (reply_gemma4_call(b[k], bn[k], &name, &args)) { CHECK(0, "call %.*s does not parse", (int)bn[k], b[k]); continue; }
            json_object *got = json_tokener_parse(args), *want = json_object_object_get(calls[k], "arguments");
            CHECK(!strcmp(name, json_object_get_string(json_object_object_get(calls[k], "name"))), "name %s", name);
            CHECK(json_object_equal(got, want), "%.*s -> %s, want %s", (int)bn[k], b[k], args, json_object_to_json_string(want));
            json_object_put(got);
            free(name);
            free(args);
            checked++;
        }
    }
    CHECK(checked >= 10, "only %d calls checked", checked);
    printf("# %d jinja2-rendered calls parsed back\n", checked);
    json_object_put(doc);
}

int main(void)
{
    RUN_TEST(test_split_anywhere);
    RUN_TEST(test_tools_off_and_plain);
    RUN_TEST(test_malformed_calls);
    RUN_TEST(test_jinja2_calls_parse_back);
    CHECK_EXIT();
}
