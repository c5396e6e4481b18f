/* test_constrain_tools.c — tool calls constrained to Gemma 4's own syntax
 * (constraint_create_tool_calls): which call texts each tools array accepts whole, as a prefix, or
 * rejects (<|tool_call>, <tool_call|> and <|"|> written as the bytes the vocabulary maps them to);
 * the 400 messages for bad tools arrays; the mapped tokens in masks of both dialects. */
#include "check.h"

#include <string.h>

#include "constrain.h"
#include "tokenizer.h"

#define G3 "models/gemma-3-270m-q4_k_m.gguf"
#define G4 ".cache/llama.cpp/models/ggml-vocab-gemma-4.gguf"
#define Q "\xf8"           /* <|"|> */
#define C "\xf9" "call:"   /* <|tool_call>call: */
#define E "\xfa"           /* <tool_call|> */

static tokenizer *tok3, *tok4;
static constraint_vocab *voc3, *voc4;
static char err[512];

static const char *weather =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"location\":{\"type\":\"string\",\"maxLength\":3},\"unit\":{\"enum\":[\"c\",\"f\"]},"
    "\"days\":{\"type\":\"integer\"}},\"required\":[\"location\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"get\",\"parameters\":{}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"get_time\"}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"reset\",\"parameters\":{\"type\":\"object\",\"properties\":{},"
    "\"additionalProperties\":false}}}]";

/* 1: text is whole calls, 0: a prefix of some, -1: rejected, -2: tools refused */
static int judge(const char *tools, const char *only, int parallel, const char *text) {
    constraint *c;
    if (constraint_create_tool_calls(&c, voc4, tools, strlen(tools), only, parallel, err, sizeof err)) return -2;
    int r = constraint_accept_bytes(c, text, strlen(text)) ? -1 : constraint_complete(c);
    constraint_destroy(c);
    return r;
}

#define WHOLE(t, s) CHECK(judge(t, NULL, 0, s) == 1, "should accept %s whole (got %d)", s, judge(t, NULL, 0, s))
#define PREFIX(t, s) CHECK(judge(t, NULL, 0, s) == 0, "should accept %s as a prefix only (got %d)", s, judge(t, NULL, 0, s))
#define REJECT(t, s) CHECK(judge(t, NULL, 0, s) == -1, "should reject %s (got %d)", s, judge(t, NULL, 0, s))

static void test_tools_call_syntax(void) {
    const char *w = weather;
    WHOLE(w, C "get_weather{location:" Q "Rio" Q "}" E);
    WHOLE(w, C "get_weather{days:-3,location:" Q "" Q ",unit:" Q "f" Q "}" E);
    REJECT(w, C "get_weather{location:" Q "Rio" Q ",days:3}" E);   /* dictsort order */
    REJECT(w, C "get_weather{location: " Q);                       /* no whitespace */
    REJECT(w, C "get_weather{ location");
    REJECT(w, C "get_weather{\"location\"");                       /* bare keys */
    REJECT(w, C "get_weather{location:\"Rio\"}");                  /* <|"|> strings */
    REJECT(w, C "get_weather{}");                                  /* location is required */
    REJECT(w, C "get_weather{days:1.5");
    REJECT(w, C "get_weather{unit:" Q "k");
    REJECT(w, C "get_weathr{");
    REJECT(w, "call:get_weather{");                                 /* <|tool_call> first */
    REJECT(w, C "get_weather{location:" Q "Rio" Q "}" E "x");
    REJECT(w, C "get_weather{location:" Q "Rio" Q "}" E C);         /* one call unless parallel */
    PREFIX(w, C "get_weather{location:" Q "Rio" Q "}");
    PREFIX(w, C "get");
    WHOLE(w, C "get{}" E);
    WHOLE(w, C "get{b.c:1,a_b-9:{y:[" Q "s" Q ",null,true]}}" E);  /* free keys, in any order */
    REJECT(w, C "get{a b:1}");
    REJECT(w, C "get{\"a\":1}");
    WHOLE(w, C "get_time{x:{}}" E);
    WHOLE(w, C "reset{}" E);
    REJECT(w, C "reset{x");
    const char *alt = "[{\"function\":{\"name\":\"f\",\"parameters\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"object\"}]}}}]";
    REJECT(alt, C "f" Q);                                           /* arguments are an object */
    WHOLE(alt, C "f{}" E);
    char key[128] = C "get{";
    for (int i = 0; i < 64; i++) strcat(key, "k");
    PREFIX(w, key);
    strcat(key, "k");
    REJECT(w, key);
}

static void test_tools_strings(void) {
    const char *t = "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\","
                    "\"properties\":{\"s\":{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}},\"required\":[\"s\"]}}},"
                    "{\"type\":\"function\",\"function\":{\"name\":\"g\",\"parameters\":{\"properties\":{\"s\":{\"type\":\"string\"}}}}}]";
    WHOLE(t, C "f{s:" Q "h\xc3\xa9\xe4\xb8\xad" Q "}" E);          /* characters, not bytes */
    REJECT(t, C "f{s:" Q "a" Q);
    REJECT(t, C "f{s:" Q "abcd");
    WHOLE(t, C "g{s:" Q "say \"hi\"\\n\nline\t2 {a:1} <|tool_call> <|\"| >" Q "}" E); /* raw text, no escapes */
    REJECT(t, C "g{s:" Q "a<|\"|>");                               /* the text of <|"|> would end it */
    PREFIX(t, C "g{s:" Q "a<|\"|");
    constraint *c;
    CHECK(!constraint_create_tool_calls(&c, voc4, t, strlen(t), "g", 0, err, sizeof err), "%s", err);
    CHECK(constraint_accept_bytes(c, C "g{s:" Q "a\0", sizeof(C "g{s:" Q "a\0") - 1) == -1, "NUL in a string");
    constraint_destroy(c);
    REJECT(t, C "g{s:" Q "\xc3(");
    REJECT(t, C "g{s:" Q "\xf9");
    WHOLE(t, C "g{}" E);
}

static void test_tools_order_and_literals(void) {
    const char *t = "[{\"function\":{\"name\":\"u\",\"parameters\":{\"type\":\"object\",\"properties\":{"
                    "\"Zeta\":{\"type\":\"integer\"},\"beta\":{\"type\":\"null\"},\"alpha\":{\"type\":\"boolean\"},"
                    "\"Beta\":{\"type\":\"boolean\"},\"\xc3\x89mile\":{\"type\":\"integer\"},\"\xc3\xa9" "clair\":{\"type\":\"integer\"},"
                    "\"p\":{\"enum\":[{\"Name\":\"eco\",\"fan\":1,\"Boost\":false},[\"x\",null]]}}}}}]";
    WHOLE(t, C "u{alpha:true,beta:null,Beta:false,Zeta:1,\xc3\xa9" "clair:2,\xc3\x89mile:3}" E);
    REJECT(t, C "u{Beta:false,beta:null}" E);                      /* ties keep the schema's order */
    REJECT(t, C "u{Zeta:1,alpha:true}" E);
    REJECT(t, C "u{\xc3\x89mile:3,\xc3\xa9" "clair:2}" E);
    WHOLE(t, C "u{p:{Boost:false,fan:1,Name:" Q "eco" Q "}}" E);
    WHOLE(t, C "u{p:[" Q "x" Q ",null]}" E);
    REJECT(t, C "u{p:{Name:");
}

static void test_tools_choice_and_parallel(void) {
    const char *w = weather, *one = C "get{}" E;
    CHECK(judge(w, "get_time", 0, C "get_time{}" E) == 1, "the named function");
    CHECK(judge(w, "get_time", 0, one) == -1, "only the named function");
    CHECK(judge(w, "get", 0, one) == 1, "a name that is a prefix of others");
    char calls[512] = "";
    for (int i = 0; i < 8; i++) strcat(calls, i % 2 ? one : C "reset{}" E);
    CHECK(judge(w, NULL, 1, calls) == 1, "8 parallel calls");
    CHECK(judge(w, NULL, 1, one) == 1, "1 parallel call");
    strcat(calls, "\xf9");
    CHECK(judge(w, NULL, 1, calls) == -1, "no 9th call");
    CHECK(judge(w, NULL, 0, C "get{}" E C "get{}" E) == -1, "one call without parallel");
}

static void refused(const char *tools, const char *only, const char *want) {
    constraint *c = NULL;
    int rc = constraint_create_tool_calls(&c, voc4, tools, tools ? strlen(tools) : 0, only, 0, err, sizeof err);
    CHECK(rc == -1 && !c && strstr(err, want), "%s: '%s' should contain '%s'", tools ? tools : "NULL", err, want);
    constraint_destroy(c);
}

static void test_tools_refusals(void) {
    refused("{\"type\":\"function\"}", NULL, "tools must be a non-empty array of functions");
    refused("[]", NULL, "tools must be a non-empty array of functions");
    refused(NULL, NULL, "no tools");
    refused("[{", NULL, "tools: not valid JSON");
    refused("[{\"type\":\"function\",\"function\":{\"name\":\"a\"}},3]", NULL, "tools[1] must be an object");
    refused("[{\"type\":\"retrieval\",\"function\":{\"name\":\"a\"}}]", NULL, "tools[0].type must be \"function\"");
    refused("[{\"type\":\"function\"}]", NULL, "tools[0].function must be an object");
    refused("[{\"type\":\"function\",\"function\":{\"name\":7}}]", NULL, "tools[0].function.name must be a string");
    refused("[{\"type\":\"function\",\"function\":{\"name\":\"a b\"}}]", NULL, "tools[0].function.name 'a b' must be 1 to 64");
    refused("[{\"function\":{\"name\":\"a\"}},{\"function\":{\"name\":\"a\"}}]", NULL, "tools[1].function.name 'a' repeats tools[0]");
    refused(weather, "nope", "tool_choice names the function 'nope', which is not in tools");
    refused("[{\"function\":{\"name\":\"a\"}},{\"function\":{\"name\":\"b\"}},{\"function\":{\"name\":\"c\",\"parameters\":"
            "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"string\",\"pattern\":\"^a\"}}}}}]", NULL,
            "tools[2].function.parameters: keyword 'pattern' at /properties/x is not supported");
    refused("[{\"function\":{\"name\":\"a\",\"parameters\":{\"type\":\"string\"}}}]", NULL,
            "tools[0].function.parameters: must describe an object");
    refused("[{\"function\":{\"name\":\"a\",\"parameters\":{\"properties\":{\"a:b\":{}}}}}]", NULL,
            "tools[0].function.parameters: property name 'a:b' at /properties cannot be written bare");
    refused("[{\"function\":{\"name\":\"a\",\"parameters\":{\"properties\":{\"s\":{\"const\":\"x<|\\\"|>\"}}}}}]", NULL,
            "tools[0].function.parameters: keyword 'const' at /properties/s holds a string with <|\"|>");
    refused("[{\"function\":{\"name\":\"a\",\"parameters\":{\"$ref\":\"#/$defs/x\"}}}]", NULL,
            "tools[0].function.parameters: keyword '$ref' at /");
    /* only the named function is compiled: another one's schema does not matter */
    CHECK(judge("[{\"function\":{\"name\":\"a\"}},{\"function\":{\"name\":\"b\",\"parameters\":{\"pattern\":\"x\"}}}]",
                "a", 0, C "a{}" E) == 1, "named: the others' parameters are not compiled");
    constraint *c = NULL;
    CHECK(constraint_create_tool_calls(&c, voc3, weather, strlen(weather), NULL, 0, err, sizeof err) == -1 && !c &&
          strstr(err, "lacks Gemma 4's tool-call tokens"), "Gemma 3 vocabulary: %s", err);
}

static int bit(const uint32_t *bits, int32_t t) { return t >= 0 && (bits[t / 32] >> (t % 32) & 1); }

/* JSON grammars never take the three tokens (nor their bytes); tool calls open with <|tool_call> alone */
static void test_tools_tokens_in_masks(void) {
    int32_t ids[3] = {tokenizer_find(tok4, "<|\"|>"), tokenizer_find(tok4, "<|tool_call>"), tokenizer_find(tok4, "<tool_call|>")};
    CHECK(ids[0] >= 0 && ids[1] >= 0 && ids[2] >= 0, "Gemma 4 has the three tokens");
    uint32_t *bits = malloc((tokenizer_n_vocab(tok4) + 31) / 32 * 4);
    const char *schemas[] = {"{\"type\":\"string\"}", "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}}}", NULL};
    const char *prefixes[] = {"", "\"", "\"a", "{", "{\"a\":\"x"};
    for (int s = 0; s < 3; s++)
        for (int p = 0; p < 5; p++) {
            constraint *c;
            if (constraint_create_json(&c, voc4, schemas[s], schemas[s] ? strlen(schemas[s]) : 0, err, sizeof err)) { CHECK(0, "%s", err); continue; }
            if (!constraint_accept_bytes(c, prefixes[p], strlen(prefixes[p]))) {
                CHECK(constraint_mask(c, bits) > 0, "a mask");
                for (int k = 0; k < 3; k++) {
                    CHECK(!bit(bits, ids[k]) && !constraint_allows(c, ids[k]), "JSON after '%s' allows token %d", prefixes[p], ids[k]);
                    CHECK(constraint_accept(c, ids[k]) == -1, "JSON accepts token %d", ids[k]);
                }
                for (int b = 0xf8; b <= 0xfa; b++) {
                    char x = (char)b;
                    CHECK(constraint_accept_bytes(c, &x, 1) == -1, "JSON after '%s' accepts byte %x", prefixes[p], b);
                }
            }
            constraint_destroy(c);
        }
    constraint *c;
    CHECK(!constraint_create_tool_calls(&c, voc4, weather, strlen(weather), NULL, 0, err, sizeof err), "%s", err);
    CHECK(constraint_mask(c, bits) == 1 && bit(bits, ids[1]), "only <|tool_call> opens the output");
    CHECK(constraint_accept(c, ids[1]) == 0, "<|tool_call> accepted");
    CHECK(!constraint_allows(c, ids[1]) && !constraint_allows(c, ids[0]), "then call:");
    constraint_destroy(c);
    free(bits);
}

int main(void) {
    if (tokenizer_load(&tok3, G3, err, sizeof err) || constraint_vocab_create(&voc3, tok3, err, sizeof err) ||
        tokenizer_load(&tok4, G4, err, sizeof err) || constraint_vocab_create(&voc4, tok4, err, sizeof err)) {
        printf("FAIL constrain_tools_setup: %s (make model; sh deploy/fetch_llama_ref.sh)\n", err);
        return 1;
    }
    RUN_TEST(test_tools_call_syntax);
    RUN_TEST(test_tools_strings);
    RUN_TEST(test_tools_order_and_literals);
    RUN_TEST(test_tools_choice_and_parallel);
    RUN_TEST(test_tools_refusals);
    RUN_TEST(test_tools_tokens_in_masks);
    constraint_vocab_destroy(voc3); constraint_vocab_destroy(voc4);
    tokenizer_destroy(tok3); tokenizer_destroy(tok4);
    CHECK_EXIT();
}
