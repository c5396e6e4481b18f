/* test_constrain.c — the structured-output constraint (opencl/constrain/): which texts each
 * schema keyword accepts as a whole value, as a prefix, or rejects; the 400 messages for refused
 * schemas (keyword and JSON pointer named); mask invariants on the Gemma 3 and Gemma 4
 * vocabularies (the mask agrees with constraint_allows on every token and with accept on a sample, EOG exactly
 * when the value is complete, only EOG after it), for JSON and for Gemma 4 tool calls. */
#include "check.h"

#include <string.h>

#include "constrain.h"
#include "tokenizer.h"

#define G3 "models/gemma-3-270m-q4_k_m.gguf"
#define G4 ".cache/llama.cpp/models/ggml-vocab-gemma-4.gguf"

static tokenizer *tok3, *tok4;
static constraint_vocab *voc3, *voc4;
static char err[512];

/* 1: text is a whole value, 0: a prefix of one, -1: rejected, -2: schema refused */
static int judge(const char *schema, const char *text) {
    constraint *c;
    if (constraint_create_json(&c, voc3, schema, schema ? strlen(schema) : 0, err, sizeof err)) return -2;
    int r = constraint_accept_bytes(c, text, strlen(text)) ? -1 : constraint_complete(c);
    constraint_destroy(c);
    return r;
}

#define WHOLE(s, t) CHECK(judge(s, t) == 1, "%s should accept %s whole (got %d)", s, t, judge(s, t))
#define PREFIX(s, t) CHECK(judge(s, t) == 0, "%s should accept %s as a prefix only (got %d)", s, t, judge(s, t))
#define REJECT(s, t) CHECK(judge(s, t) == -1, "%s should reject %s (got %d)", s, t, judge(s, t))

static void test_constrain_scalars(void) {
    const char *i = "{\"type\":\"integer\"}", *n = "{\"type\":\"number\"}";
    WHOLE(i, "0"); WHOLE(i, "-12"); WHOLE(i, "123456789012345"); PREFIX(i, "-");
    REJECT(i, "01"); REJECT(i, "1.5"); REJECT(i, "1e3"); REJECT(i, "+1"); REJECT(i, "1234567890123456");
    WHOLE(n, "1.5"); WHOLE(n, "-0.25e-10"); WHOLE(n, "3E+2"); PREFIX(n, "1."); PREFIX(n, "1e");
    REJECT(n, ".5"); REJECT(n, "1e123"); REJECT(n, "NaN");
    const char *b = "{\"type\":\"boolean\"}", *z = "{\"type\":\"null\"}";
    WHOLE(b, "true"); WHOLE(b, "false"); PREFIX(b, "tr"); REJECT(b, "null"); REJECT(b, "true ");
    WHOLE(z, "null"); REJECT(z, "nul1");
    const char *tn = "{\"type\":[\"string\",\"null\"]}";
    WHOLE(tn, "null"); WHOLE(tn, "\"x\""); REJECT(tn, "1");
}

static void test_constrain_strings(void) {
    const char *s = "{\"type\":\"string\"}";
    WHOLE(s, "\"\""); WHOLE(s, "\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\""); WHOLE(s, "\"\\u00e9\\uABCD\"");
    WHOLE(s, "\"h\xc3\xa9llo \xe4\xb8\xad \xf0\x9f\x98\x80\"");
    PREFIX(s, "\"abc"); PREFIX(s, "\"\xe4\xb8");
    REJECT(s, "\"a\nb\""); REJECT(s, "\"\\x\""); REJECT(s, "\"\\ud800"); REJECT(s, "\"\\u12g");
    REJECT(s, "\"\xc0\xaf\""); REJECT(s, "\"\xed\xa0\x80\""); REJECT(s, "\"\x80\""); REJECT(s, "'a'");
    const char *m = "{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}";
    REJECT(m, "\"a\""); WHOLE(m, "\"ab\""); WHOLE(m, "\"\xe4\xb8\xad\\n\xc3\xa9\""); REJECT(m, "\"abcd");
}

static void test_constrain_objects(void) {
    const char *o = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"ab\":{\"type\":\"string\"},"
                    "\"c\":{\"type\":\"boolean\"}},\"required\":[\"c\"],\"additionalProperties\":false}";
    WHOLE(o, "{\"c\":true}"); WHOLE(o, "{\"a\":1,\"ab\":\"x\",\"c\":false}"); WHOLE(o, "{\"ab\": \"\", \"c\":true}");
    WHOLE(o, "{\"a\":1,\"c\":true}");
    REJECT(o, "{}"); REJECT(o, "{\"c\":true,\"a\":1}"); REJECT(o, "{\"d\":1}"); REJECT(o, "{\"a\":1}");
    REJECT(o, "{\"a\":  1"); REJECT(o, "{ \"a\""); REJECT(o, "{\"a\":1,\"a\":2");
    PREFIX(o, "{\"a\":1,"); PREFIX(o, "{\"a");
    const char *f = "{\"type\":\"object\"}";
    WHOLE(f, "{}"); WHOLE(f, "{\"x\":[1,{\"y\":null}],\"z\":\"w\"}"); REJECT(f, "[]");
    const char *e = "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}";
    WHOLE(e, "{}"); REJECT(e, "{\"x\"");
    const char *u = "{\"type\":\"object\",\"properties\":{\"k\\\"\\\\/\xc3\xa9\":{\"type\":\"null\"}},\"required\":[\"k\\\"\\\\/\xc3\xa9\"]}";
    WHOLE(u, "{\"k\\\"\\\\/\xc3\xa9\":null}");
    CHECK(judge(NULL, "{\"a\":{\"b\":[true, \"x\"]}}") == 1, "json_object mode takes any object");
    CHECK(judge(NULL, "[1]") == -1, "json_object mode takes only objects");
}

static void test_constrain_arrays(void) {
    const char *a = "{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":2}";
    REJECT(a, "[]"); WHOLE(a, "[1]"); WHOLE(a, "[1, 2]"); REJECT(a, "[1,2,"); REJECT(a, "[ 1]");
    const char *t = "{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"boolean\"}],\"items\":false}";
    WHOLE(t, "[]"); WHOLE(t, "[\"a\",true]"); REJECT(t, "[true"); REJECT(t, "[\"a\",true,");
    const char *any = "{\"type\":\"array\"}";
    WHOLE(any, "[1,\"a\",null,[],{}]");
}

static void test_constrain_enum_anyof_ref(void) {
    const char *e = "{\"enum\":[\"red\",1,12,null,[1,2],{\"k\":\"v\"}]}";
    WHOLE(e, "\"red\""); WHOLE(e, "1"); WHOLE(e, "12"); WHOLE(e, "null"); WHOLE(e, "[1,2]"); WHOLE(e, "{\"k\":\"v\"}");
    REJECT(e, "2"); REJECT(e, "\"re\""); REJECT(e, "123");
    const char *et = "{\"type\":\"string\",\"enum\":[\"a\",1]}";
    WHOLE(et, "\"a\""); REJECT(et, "1");
    const char *c = "{\"const\":\"fixed\"}";
    WHOLE(c, "\"fixed\""); REJECT(c, "\"fixe\"");
    const char *any = "{\"anyOf\":[{\"type\":\"object\",\"properties\":{\"k\":{\"const\":1}},\"required\":[\"k\"]},"
                      "{\"type\":\"object\",\"properties\":{\"k\":{\"const\":2},\"z\":{\"type\":\"string\"}},\"required\":[\"k\",\"z\"]}]}";
    WHOLE(any, "{\"k\":1}"); WHOLE(any, "{\"k\":2,\"z\":\"\"}"); REJECT(any, "{\"k\":1,\"z\""); REJECT(any, "{\"k\":2}");
    const char *tree = "{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},"
                       "\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/n\"}}},\"required\":[\"v\",\"kids\"]}},\"$ref\":\"#/$defs/n\"}";
    WHOLE(tree, "{\"v\":1,\"kids\":[{\"v\":2,\"kids\":[]},{\"v\":3,\"kids\":[{\"v\":4,\"kids\":[]}]}]}");
    REJECT(tree, "{\"v\":1,\"kids\":[{\"v\":2}");
    /* recursion is cut where a finite value would no longer fit: never a dead end */
    char deep[4096] = "";
    for (int i = 0; i < 60; i++) strcat(deep, "{\"v\":0,\"kids\":[");
    CHECK(judge(tree, deep) == -1, "nesting past the stack limit is refused");
}

static void check_refused(const char *schema, const char *want) {
    constraint *c = NULL;
    int rc = constraint_create_json(&c, voc3, schema, strlen(schema), err, sizeof err);
    CHECK(rc == -1 && !c, "%s should be refused", schema);
    CHECK(rc == -1 && strstr(err, want) && !strncmp(err, "response_format.json_schema.schema: ", 36),
          "%s: message '%s' should contain '%s'", schema, err, want);
    constraint_destroy(c);
}

static void test_constrain_refusals(void) {
    check_refused("{\"type\":\"object\",\"properties\":{\"a\":{\"patternProperties\":{}}}}",
                  "keyword 'patternProperties' at /properties/a is not supported");
    check_refused("{\"type\":\"string\",\"pattern\":\"^a\"}", "keyword 'pattern' at / is not supported");
    check_refused("{\"type\":\"string\",\"format\":\"date\"}", "keyword 'format' at / is not supported");
    check_refused("{\"type\":\"integer\",\"minimum\":0}", "keyword 'minimum'");
    check_refused("{\"properties\":{\"x/y~\":{\"allOf\":[]}}}", "keyword 'allOf' at /properties/x~1y~0 is not supported");
    check_refused("{\"type\":\"array\",\"items\":[{\"type\":\"integer\",\"maximum\":3}]}", "schema at /items must be an object");
    check_refused("{\"type\":\"strin\"}", "keyword 'type' at /: 'strin' is not a JSON Schema type");
    check_refused("{\"$ref\":\"http://x/y\"}", "keyword '$ref' at /");
    check_refused("{\"$ref\":\"#/$defs/missing\"}", "'#/$defs/missing' is not supported");
    check_refused("{\"type\":\"object\",\"properties\":{\"a\":{}},\"required\":[\"b\"]}", "required property 'b'");
    check_refused("{\"type\":\"string\",\"minLength\":5,\"maxLength\":2}", "minLength");
    check_refused("{\"type\":\"array\",\"minItems\":3,\"maxItems\":1}", "minItems");
    check_refused("{\"enum\":[]}", "keyword 'enum' at / leaves no value");
    check_refused("{\"type\":\"integer\",\"enum\":[\"a\"]}", "leaves no value of the given type");
    check_refused("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}}", "additionalProperties");
    check_refused("{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/a\"}},\"$ref\":\"#/$defs/a\"}", "no value of finite size");
    check_refused("{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"n\":{\"$ref\":\"#/$defs/n\"}},\"required\":[\"n\"]}},\"$ref\":\"#/$defs/n\"}",
                  "no value of finite size");
    check_refused("{\"type\":", "not valid JSON");
    check_refused("[1]", "schema at / must be an object");
    char deep[8192] = "";
    for (int i = 0; i < 40; i++) strcat(deep, "{\"type\":\"array\",\"items\":");
    strcat(deep, "{}");
    for (int i = 0; i < 40; i++) strcat(deep, "}");
    check_refused(deep, "schema nesting deeper than 32");
    char big[32768] = "{\"enum\":[";
    for (int i = 0; i < 1100; i++) sprintf(big + strlen(big), "%s%d", i ? "," : "", i);
    strcat(big, "]}");
    check_refused(big, "more than 1024 values");
    WHOLE("{\"title\":\"t\",\"description\":\"d\",\"$schema\":\"x\",\"default\":1,\"examples\":[1],\"type\":\"integer\"}", "7");
}

/* a JSON schema (NULL: json_object mode), or tools for parallel tool calls */
typedef struct target { const char *schema, *tools; } target;

static int make(const constraint_vocab *voc, const target *t, constraint **c) {
    if (t->tools) return constraint_create_tool_calls(c, voc, t->tools, strlen(t->tools), NULL, 1, err, sizeof err);
    return constraint_create_json(c, voc, t->schema, t->schema ? strlen(t->schema) : 0, err, sizeof err);
}

/* mask invariants along a fixed text, token by token as the vocabulary encodes it (control
 * tokens' texts as those tokens for tool calls) */
static void mask_walk(const tokenizer *tok, const constraint_vocab *voc, target tg, const char *text) {
    constraint *c;
    if (make(voc, &tg, &c)) {
        CHECK(0, "schema refused: %s", err);
        return;
    }
    uint32_t n = tokenizer_n_vocab(tok), *bits = malloc((n + 31) / 32 * 4);
    int32_t ids[512];
    int nid = tokenizer_encode(tok, text, strlen(text), 0, tg.tools != NULL, ids, 512);
    CHECK(nid > 0 && nid <= 512, "encode %s", text);
    int32_t eog = tokenizer_eos(tok);
    for (int step = 0; step <= nid && nid <= 512; step++) {
        int cnt = constraint_mask(c, bits), seen = 0, eog_ok = 0;
        CHECK(cnt >= 1, "step %d: empty mask", step);
        for (uint32_t t = 0; t < n; t++) {
            int on = bits[t / 32] >> (t % 32) & 1;
            seen += on;
            if (tokenizer_is_eog(tok, (int32_t)t)) { if (on) eog_ok = 1; continue; }
            /* every token: the mask (trie walk) and the byte-by-byte check agree */
            CHECK(constraint_allows(c, (int32_t)t) == on, "step %d token %u: mask says %d, allows says %d", step, t, on, !on);
            if (t % 4001 != (uint32_t)step % 4001) continue; /* a sample through the real accept */
            constraint *probe;
            if (make(voc, &tg, &probe)) break;
            int ok = 1;
            for (int k = 0; k < step && ok; k++) ok = !constraint_accept(probe, ids[k]);
            int acc = ok && !constraint_accept(probe, (int32_t)t);
            CHECK(acc == on, "step %d token %u: mask says %d, accept says %d", step, t, on, acc);
            constraint_destroy(probe);
            if (check_failures_here > 5) break;
        }
        CHECK(seen == cnt, "count %d != bits %d", cnt, seen);
        CHECK(eog_ok == constraint_complete(c), "step %d: EOG allowed %d, complete %d", step, eog_ok, constraint_complete(c));
        if (step == nid) {
            CHECK(constraint_complete(c), "whole text complete");
            CHECK(eog >= 0 && constraint_accept(c, eog) == 0, "EOG accepted at the end");
            CHECK(constraint_mask(c, bits) == -1, "nothing after EOG");
            break;
        }
        CHECK(constraint_accept(c, ids[step]) == 0, "step %d: token %d of the text not accepted", step, ids[step]);
        if (check_failures_here > 5) break;
    }
    free(bits);
    constraint_destroy(c);
}

static const char *walk_schema =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":12},\"n\":{\"type\":\"integer\"},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"x\",\"yz\"]}}},\"required\":[\"name\",\"n\",\"tags\"],\"additionalProperties\":false}";
static const char *walk_text = "{\"name\": \"Zo\\u00e9 \xc3\xa9t\xc3\xa9\", \"n\":42,\"tags\":[\"yz\",\"x\"]}";

static void test_constrain_mask_gemma3(void) { mask_walk(tok3, voc3, (target){walk_schema, NULL}, walk_text); }
static void test_constrain_mask_gemma4(void) { mask_walk(tok4, voc4, (target){walk_schema, NULL}, walk_text); }
static void test_constrain_mask_json_object(void) { mask_walk(tok4, voc4, (target){NULL, NULL}, "{\"a\": [1, {\"b\": null}],\"c\":\"d\"}"); }

/* strings with quotes, newlines, a backslash and the first bytes of <|"|> at and across token
 * boundaries; a bounded string; free keys; two calls */
static const char *walk_tools =
    "[{\"type\":\"function\",\"function\":{\"name\":\"write_note\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"text\":{\"type\":\"string\"},\"code\":{\"type\":\"string\",\"maxLength\":6}},\"required\":[\"text\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"annotate\"}}]";
static const char *walk_calls =
    "<|tool_call>call:write_note{code:<|\"|>a\"b<|\"|>,text:<|\"|>say \"hi\" <|\"| x<|\"<| <|\n\\ \xc3\xa9t\xc3\xa9 "
    "\xe4\xb8\xad<|\"|>}<tool_call|><|tool_call>call:annotate{k_1:[1,{a:<|\"|>z<|\"|>}],zz.9:-2.5e3}<tool_call|>";

static void test_constrain_mask_tool_calls(void) { mask_walk(tok4, voc4, (target){NULL, walk_tools}, walk_calls); }

static void test_constrain_mask_after_end(void) {
    constraint *c;
    CHECK(!constraint_create_json(&c, voc3, "{\"type\":\"integer\"}", 18, err, sizeof err), "%s", err);
    uint32_t n = tokenizer_n_vocab(tok3), *bits = malloc((n + 31) / 32 * 4);
    CHECK(!constraint_accept_bytes(c, "7", 1), "7");
    int cnt = constraint_mask(c, bits), eogs = 0;
    for (uint32_t t = 0; t < n; t++) eogs += tokenizer_is_eog(tok3, (int32_t)t);
    CHECK(cnt > eogs, "digits may follow 7 (%d allowed)", cnt);
    constraint_destroy(c);
    CHECK(!constraint_create_json(&c, voc3, "{\"type\":\"boolean\"}", 18, err, sizeof err), "%s", err);
    CHECK(!constraint_accept_bytes(c, "true", 4), "true");
    cnt = constraint_mask(c, bits);
    CHECK(cnt == eogs, "after a closed value only EOG: %d allowed, %d EOG tokens", cnt, eogs);
    for (uint32_t t = 0; t < n; t++)
        if (bits[t / 32] >> (t % 32) & 1) CHECK(tokenizer_is_eog(tok3, (int32_t)t), "token %u allowed after the end", t);
    CHECK(constraint_accept(c, tokenizer_find(tok3, "<start_of_turn>")) == -1, "control tokens are never allowed");
    CHECK(constraint_accept(c, tokenizer_eos(tok3)) == 0, "EOG accepted");
    CHECK(constraint_accept(c, tokenizer_eos(tok3)) == -1, "nothing after EOG");
    free(bits);
    constraint_destroy(c);
}

/* a thought before the constrained value: open allowed first (beside the grammar's first tokens), then any
 * token but EOG until close, then the grammar; without open first the grammar starts at once */
static void test_constrain_thought_first(void) {
    int32_t open = tokenizer_find(tok4, "<|channel>"), close = tokenizer_find(tok4, "<channel|>");
    int32_t brace = tokenizer_find(tok4, "{"), word = tokenizer_find(tok4, "the"), eos = tokenizer_eos(tok4);
    CHECK(open >= 0 && close >= 0 && brace >= 0 && word >= 0, "tokens %d %d %d %d", open, close, brace, word);
    uint32_t n = tokenizer_n_vocab(tok4), *bits = malloc((n + 31) / 32 * 4);
    constraint *c;
    CHECK(!constraint_create_json(&c, voc4, NULL, 0, err, sizeof err), "%s", err);
    constraint_allow_thought(c, open, close);
    int first = constraint_mask(c, bits);
    CHECK(bits[open / 32] >> (open % 32) & 1 && bits[brace / 32] >> (brace % 32) & 1, "open and { first");
    CHECK(!(bits[word / 32] >> (word % 32) & 1) && constraint_allows(c, open) && !constraint_allows(c, word), "no text first");
    CHECK(constraint_accept(c, open) == 0, "open accepted");
    int inside = constraint_mask(c, bits);
    CHECK(inside > first && bits[word / 32] >> (word % 32) & 1 && !(bits[eos / 32] >> (eos % 32) & 1), "free thought, no EOG");
    CHECK(constraint_accept(c, word) == 0 && constraint_accept(c, eos) == -1 && !constraint_complete(c), "in the thought");
    CHECK(constraint_accept(c, close) == 0, "close accepted");
    CHECK(constraint_accept(c, word) == -1 && constraint_accept(c, brace) == 0, "the grammar after the thought");
    CHECK(constraint_accept(c, open) == -1, "one thought only");
    constraint_destroy(c);
    CHECK(!constraint_create_json(&c, voc4, NULL, 0, err, sizeof err), "%s", err);
    constraint_allow_thought(c, open, close);
    CHECK(constraint_accept(c, brace) == 0 && constraint_accept(c, open) == -1, "no thought after the value began");
    free(bits);
    constraint_destroy(c);
}

/* the pool gives each constraint the mask it gives alone, over many batches (different states each time) */
static void test_constrain_pool_masks(void) {
    enum { N = 6, STEPS = 40 };
    constraint_pool *p;
    CHECK(!constraint_pool_create(&p, 3, err, sizeof err), "%s", err);
    uint32_t n = tokenizer_n_vocab(tok4), words = (n + 31) / 32;
    constraint *c[N], *twin[N];
    uint32_t *bits[N], *want = malloc(words * 4);
    int counts[N];
    for (int i = 0; i < N; i++) {
        CHECK(!constraint_create_json(&c[i], voc4, NULL, 0, err, sizeof err), "%s", err);
        CHECK(!constraint_create_json(&twin[i], voc4, NULL, 0, err, sizeof err), "%s", err);
        bits[i] = malloc(words * 4);
    }
    int bad = 0;
    for (int step = 0; step < STEPS && !bad; step++) {
        constraint_pool_masks(p, c, bits, counts, N - step % 3); /* batches of 6, 5, 4 */
        for (int i = 0; i < N - step % 3; i++) {
            int k = constraint_mask(twin[i], want);
            if (k != counts[i] || memcmp(want, bits[i], words * 4)) { bad = 1; CHECK(0, "step %d seq %d differs", step, i); break; }
            /* advance both by the (step+i)-th allowed token */
            int32_t t = -1;
            for (uint32_t w = 0, seen = 0; w < n && t < 0; w++)
                if (want[w / 32] >> (w % 32) & 1 && !tokenizer_is_eog(tok4, (int32_t)w) && seen++ == (uint32_t)(step + i) % 7) t = (int32_t)w;
            if (t >= 0) { CHECK(!constraint_accept(c[i], t) && !constraint_accept(twin[i], t), "accept"); }
        }
    }
    for (int i = 0; i < N; i++) { constraint_destroy(c[i]); constraint_destroy(twin[i]); free(bits[i]); }
    free(want);
    constraint_pool_destroy(p);
}

int main(void) {
    if (tokenizer_load(&tok3, G3, err, sizeof err) || constraint_vocab_create(&voc3, tok3, err, sizeof err) ||
        tokenizer_load(&tok4, G4, err, sizeof err) || constraint_vocab_create(&voc4, tok4, err, sizeof err)) {
        printf("FAIL constrain_setup: %s (make model; sh deploy/fetch_llama_ref.sh)\n", err);
        return 1;
    }
    RUN_TEST(test_constrain_scalars);
    RUN_TEST(test_constrain_strings);
    RUN_TEST(test_constrain_objects);
    RUN_TEST(test_constrain_arrays);
    RUN_TEST(test_constrain_enum_anyof_ref);
    RUN_TEST(test_constrain_refusals);
    RUN_TEST(test_constrain_mask_gemma3);
    RUN_TEST(test_constrain_mask_gemma4);
    RUN_TEST(test_constrain_mask_json_object);
    RUN_TEST(test_constrain_mask_tool_calls);
    RUN_TEST(test_constrain_mask_after_end);
    RUN_TEST(test_constrain_thought_first);
    RUN_TEST(test_constrain_pool_masks);
    constraint_vocab_destroy(voc3); constraint_vocab_destroy(voc4);
    tokenizer_destroy(tok3); tokenizer_destroy(tok4);
    CHECK_EXIT();
}
