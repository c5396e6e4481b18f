/* json_io_cases.c — unit cases of the request parser (fcgi/json_io.c): typed fields, OpenAI
 * defaults, and the 400 each malformed request gets, with the parameter it names. Built and run by
 * tests/suites/fuzz_request.sh with the parser's sources under ASan and UBSan. */
#include <json-c/json.h>
#include <math.h>
#include <string.h>

#include "check.h"
#include "json_io.h"

#define M "\"model\":\"m\""
#define USER "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"

static int chat(const char *body, api_chat_request *r, api_error *e)
{
    return json_parse_chat(body, strlen(body), r, e);
}

/* expects a 400 naming param ("" = no param) */
static void expect_chat_400(const char *body, const char *param)
{
    api_chat_request r;
    api_error e;
    int rc = chat(body, &r, &e);
    CHECK(rc == -1, "accepted: %s", body);
    if (rc == -1) {
        CHECK(e.status == 400, "status %d for %s", e.status, body);
        CHECK(!strcmp(e.param, param), "param '%s', want '%s' for %s (%s)", e.param, param, body, e.message);
        CHECK(!strcmp(e.type, "invalid_request_error"), "type %s", e.type);
    } else {
        api_chat_request_free(&r);
    }
}

static void test_full_chat_request(void)
{
    const char *b = "{" M ",\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},"
                    "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]},"
                    "{\"role\":\"assistant\",\"content\":\"ok\"}],"
                    "\"max_tokens\":8,\"temperature\":0.5,\"top_p\":0.9,\"top_k\":40,\"min_p\":0.1,\"seed\":7,"
                    "\"stop\":[\"x\",\"yz\"],\"stream\":true,\"stream_options\":{\"include_usage\":true},"
                    "\"frequency_penalty\":0.5,\"presence_penalty\":-1,\"repetition_penalty\":1.2,\"n\":1,"
                    "\"user\":\"u\",\"metadata\":{\"k\":\"v\"},\"store\":false,"
                    "\"tools\":[],\"logprobs\":false,\"response_format\":{\"type\":\"text\"},\"logit_bias\":{}}";
    api_chat_request r;
    api_error e;
    CHECK(chat(b, &r, &e) == 0, "rejected: %s", e.message);
    CHECK(!strcmp(r.model, "m"), "model");
    CHECK(r.n_msgs == 3, "n_msgs %d", r.n_msgs);
    CHECK(r.msgs[0].role == ROLE_SYSTEM && r.msgs[1].role == ROLE_USER && r.msgs[2].role == ROLE_ASSISTANT, "roles");
    CHECK(!strcmp(r.msgs[1].content, "ab") && r.msgs[1].len == 2, "text parts joined: '%s'", r.msgs[1].content);
    CHECK(r.gen.max_tokens == 8, "max_tokens");
    CHECK(fabsf(r.gen.sampling.temperature - 0.5f) < 1e-6, "temperature");
    CHECK(fabsf(r.gen.sampling.top_p - 0.9f) < 1e-6 && r.gen.sampling.top_k == 40, "top_p/top_k");
    CHECK(fabsf(r.gen.sampling.min_p - 0.1f) < 1e-6, "min_p");
    CHECK(r.gen.seed_given && r.gen.sampling.seed == 7, "seed");
    CHECK(r.gen.n_stop == 2 && !strcmp(r.gen.stop[1], "yz") && r.gen.stop_len[1] == 2, "stop");
    CHECK(r.gen.stream && r.gen.include_usage, "stream");
    CHECK(fabsf(r.gen.sampling.frequency_penalty - 0.5f) < 1e-6 && r.gen.sampling.presence_penalty == -1, "penalties");
    CHECK(fabsf(r.gen.sampling.repetition_penalty - 1.2f) < 1e-6, "repetition_penalty");
    api_chat_request_free(&r);
}

static void test_defaults_follow_openai(void)
{
    api_chat_request r;
    api_error e;
    CHECK(chat("{" M "," USER "}", &r, &e) == 0, "rejected: %s", e.message);
    CHECK(r.gen.max_tokens == -1, "max_tokens unset");
    CHECK(r.gen.sampling.temperature == 1.0f, "OpenAI's default temperature is 1, got %g", r.gen.sampling.temperature);
    CHECK(r.gen.sampling.top_p == 1.0f && r.gen.sampling.top_k == 0, "top_p/top_k off");
    CHECK(!r.gen.seed_given && !r.gen.stream && r.gen.n_stop == 0, "no seed, no stream, no stop");
    api_chat_request_free(&r);
}

static void test_nulls_mean_absent_and_newer_name_wins(void)
{
    api_chat_request r;
    api_error e;
    CHECK(chat("{" M "," USER ",\"temperature\":null,\"stop\":null,\"max_tokens\":5,\"max_completion_tokens\":9,"
               "\"stream_options\":null}", &r, &e) == 0, "rejected: %s", e.message);
    CHECK(r.gen.sampling.temperature == 1.0f, "null temperature = default");
    CHECK(r.gen.max_tokens == 9, "max_completion_tokens wins, got %d", r.gen.max_tokens);
    api_chat_request_free(&r);
}

static void test_integral_float_is_an_integer(void)
{
    api_chat_request r;
    api_error e;
    CHECK(chat("{" M "," USER ",\"max_tokens\":8.0}", &r, &e) == 0, "8.0 rejected: %s", e.message);
    CHECK(r.gen.max_tokens == 8, "max_tokens %d", r.gen.max_tokens);
    api_chat_request_free(&r);
    expect_chat_400("{" M "," USER ",\"max_tokens\":8.5}", "max_tokens");
}

static void test_malformed_bodies(void)
{
    expect_chat_400("", "");
    expect_chat_400("{", "");
    expect_chat_400("{" M "," USER "} x", "");
    expect_chat_400("[1,2]", "");
    expect_chat_400("{'model':'m'}", "");
    expect_chat_400("{" M ",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}", "");
}

static void test_field_errors_name_the_field(void)
{
    expect_chat_400("{" USER "}", "model");
    expect_chat_400("{\"model\":5," USER "}", "model");
    expect_chat_400("{" M "}", "messages");
    expect_chat_400("{" M ",\"messages\":[]}", "messages");
    expect_chat_400("{" M ",\"messages\":{}}", "messages");
    expect_chat_400("{" M ",\"messages\":[\"hi\"]}", "messages[0]");
    expect_chat_400("{" M ",\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}", "messages[0].role");
    expect_chat_400("{" M ",\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"tool\",\"content\":\"x\"}]}",
                    "messages[1].tool_call_id");
    expect_chat_400("{" M ",\"messages\":[{\"role\":\"user\"}]}", "messages[0].content");
    expect_chat_400("{" M ",\"messages\":[{\"role\":\"user\",\"content\":7}]}", "messages[0].content");
    expect_chat_400("{" M ",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{}}]}]}",
                    "messages[0].content[0].image_url.url");
    expect_chat_400("{" M ",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_audio\"}]}]}",
                    "messages[0].content");
    expect_chat_400("{" M ",\"messages\":[{\"role\":\"user\",\"content\":\"a\\u0000b\"}]}", "messages[0].content");
    expect_chat_400("{" M "," USER ",\"max_tokens\":0}", "max_tokens");
    expect_chat_400("{" M "," USER ",\"max_tokens\":\"8\"}", "max_tokens");
    expect_chat_400("{" M "," USER ",\"max_completion_tokens\":-3}", "max_completion_tokens");
    expect_chat_400("{" M "," USER ",\"temperature\":2.5}", "temperature");
    expect_chat_400("{" M "," USER ",\"temperature\":true}", "temperature");
    expect_chat_400("{" M "," USER ",\"top_p\":1.5}", "top_p");
    expect_chat_400("{" M "," USER ",\"top_k\":-2}", "top_k");
    expect_chat_400("{" M "," USER ",\"min_p\":-0.1}", "min_p");
    expect_chat_400("{" M "," USER ",\"frequency_penalty\":3}", "frequency_penalty");
    expect_chat_400("{" M "," USER ",\"presence_penalty\":-2.5}", "presence_penalty");
    expect_chat_400("{" M "," USER ",\"repetition_penalty\":0}", "repetition_penalty");
    expect_chat_400("{" M "," USER ",\"seed\":1.5}", "seed");
    expect_chat_400("{" M "," USER ",\"n\":17}", "n");
    expect_chat_400("{" M "," USER ",\"n\":0}", "n");
    expect_chat_400("{" M "," USER ",\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}", "stop");
    expect_chat_400("{" M "," USER ",\"stop\":\"\"}", "stop");
    expect_chat_400("{" M "," USER ",\"stop\":[1]}", "stop");
    expect_chat_400("{" M "," USER ",\"stream\":\"yes\"}", "stream");
    expect_chat_400("{" M "," USER ",\"stream_options\":{\"include_usage\":true}}", "stream_options");
    expect_chat_400("{" M "," USER ",\"stream\":true,\"stream_options\":{\"include_usage\":1}}",
                    "stream_options.include_usage");
    expect_chat_400("{" M "," USER ",\"user\":5}", "user");
}

static void test_developer_role_is_system(void)
{
    api_chat_request r;
    api_error e;
    CHECK(chat("{" M ",\"messages\":[{\"role\":\"developer\",\"content\":\"x\"},{\"role\":\"user\",\"content\":\"y\"}]}",
               &r, &e) == 0, "rejected: %s", e.message);
    CHECK(r.msgs[0].role == ROLE_SYSTEM, "developer -> system");
    api_chat_request_free(&r);
}

static void test_completions(void)
{
    api_completion_request r;
    api_error e;
    const char *ok = "{" M ",\"prompt\":[\"once upon\"],\"max_tokens\":4,\"echo\":false,\"stop\":\"\\n\"}";
    CHECK(json_parse_completion(ok, strlen(ok), &r, &e) == 0, "rejected: %s", e.message);
    CHECK(r.n_prompts == 1 && !strcmp(r.prompts[0].text, "once upon") && r.prompts[0].len == 9 && !r.prompts[0].ids,
          "prompt '%s'", r.n_prompts ? r.prompts[0].text : "");
    CHECK(r.gen.max_tokens == 4 && r.gen.n_stop == 1 && !strcmp(r.gen.stop[0], "\n") && r.gen.n == 1 && !r.gen.echo,
          "fields");
    api_completion_request_free(&r);
    /* every prompt form, n, echo, an empty suffix */
    const char *forms = "{" M ",\"prompt\":[\"a\",\"bc\"],\"n\":3,\"echo\":true,\"suffix\":\"\"}";
    CHECK(json_parse_completion(forms, strlen(forms), &r, &e) == 0, "rejected: %s", e.message);
    CHECK(r.n_prompts == 2 && !strcmp(r.prompts[1].text, "bc") && r.gen.n == 3 && r.gen.echo, "strings, n, echo");
    api_completion_request_free(&r);
    const char *ids = "{" M ",\"prompt\":[2,9259,1902]}";
    CHECK(json_parse_completion(ids, strlen(ids), &r, &e) == 0, "rejected: %s", e.message);
    CHECK(r.n_prompts == 1 && !r.prompts[0].text && r.prompts[0].n_ids == 3 && r.prompts[0].ids[2] == 1902, "ids");
    api_completion_request_free(&r);
    const char *arrs = "{" M ",\"prompt\":[[2,5],[7]]}";
    CHECK(json_parse_completion(arrs, strlen(arrs), &r, &e) == 0, "rejected: %s", e.message);
    CHECK(r.n_prompts == 2 && r.prompts[0].n_ids == 2 && r.prompts[1].n_ids == 1 && r.prompts[1].ids[0] == 7,
          "arrays of ids");
    api_completion_request_free(&r);
    const char *bad[][2] = {
        { "{" M "}", "prompt" },
        { "{" M ",\"prompt\":[]}", "prompt" },
        { "{" M ",\"prompt\":[[]]}", "prompt[0]" },
        { "{" M ",\"prompt\":[1,-2,3]}", "prompt[1]" },
        { "{" M ",\"prompt\":[1,2.5]}", "prompt[1]" },
        { "{" M ",\"prompt\":[1,4294967296]}", "prompt[1]" },
        { "{" M ",\"prompt\":[[1],[2,\"x\"]]}", "prompt[1][1]" },
        { "{" M ",\"prompt\":[\"a\",1]}", "prompt" },
        { "{" M ",\"prompt\":[[1],\"a\"]}", "prompt" },
        { "{" M ",\"prompt\":[\"a\\u0000\"]}", "prompt[0]" },
        { "{" M ",\"prompt\":5}", "prompt" },
        { "{" M ",\"prompt\":\"a\",\"echo\":1}", "echo" },
        { "{" M ",\"prompt\":\"a\",\"n\":17}", "n" },
        { "{" M ",\"prompt\":\"a\",\"suffix\":\"b\"}", "suffix" },
        { "{" M ",\"prompt\":\"a\",\"suffix\":5}", "suffix" },
        { "{" M ",\"prompt\":\"a\",\"best_of\":2}", "best_of" },
        { "{" M ",\"prompt\":\"a\",\"max_completion_tokens\":0,\"max_tokens\":0}", "max_completion_tokens" },  /* a chat-only name: unknown here */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = json_parse_completion(bad[i][0], strlen(bad[i][0]), &r, &e);
        CHECK(rc == -1 && e.status == 400 && !strcmp(e.param, bad[i][1]), "%s: rc %d param '%s' (%s)", bad[i][0], rc,
              e.param, e.message);
        if (rc == 0) api_completion_request_free(&r);
    }
    const char *fim = "{" M ",\"prompt\":\"a\",\"suffix\":\"b\"}";
    CHECK(json_parse_completion(fim, strlen(fim), &r, &e) == -1 && strstr(e.message, "fill-in-the-middle"), "%s",
          e.message);
}

static void test_error_body_shape(void)
{
    api_error e;
    api_fail(&e, 404, "invalid_request_error", "model_not_found", "model", "no model \"%s\"", "x/y");
    char *b = api_error_body(&e);
    CHECK(b != NULL, "body");
    CHECK(!strcmp(b, "{\"error\":{\"message\":\"no model \\\"x/y\\\"\",\"type\":\"invalid_request_error\","
                     "\"param\":\"model\",\"code\":\"model_not_found\"}}"), "got %s", b);
    free(b);
    api_fail(&e, 400, "invalid_request_error", NULL, NULL, "bad");
    b = api_error_body(&e);
    CHECK(strstr(b, "\"param\":null") && strstr(b, "\"code\":null"), "nulls: %s", b);
    free(b);
}

/* nothing silently ignored: an unknown field or an unsupported one with a non-neutral value is a
 * 400 naming it; neutral values (null, false, [], {"type":"text"}) and the documented no-ops pass */
static void test_unknown_and_unsupported_fields_are_named(void)
{
    expect_chat_400("{" M "," USER ",\"some_future_field\":1}", "some_future_field");
    expect_chat_400("{" M "," USER ",\"response_format\":{\"type\":\"yaml\"}}", "response_format.type");
    expect_chat_400("{" M "," USER ",\"response_format\":{\"type\":\"json_object\",\"schema\":{}}}",
                    "response_format.schema");
    expect_chat_400("{" M "," USER ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":{}}}}",
                    "response_format.json_schema.name");
    expect_chat_400("{" M "," USER ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"a\","
                    "\"schema\":[]}}}", "response_format.json_schema.schema");
    expect_chat_400("{" M "," USER ",\"logit_bias\":{\"x\":1}}", "logit_bias");
    expect_chat_400("{" M "," USER ",\"logit_bias\":{\"5\":101}}", "logit_bias");
    expect_chat_400("{" M "," USER ",\"logit_bias\":[1]}", "logit_bias");
    expect_chat_400("{" M "," USER ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"x\":1}}]}",
                    "tools[0].function.x");
    expect_chat_400("{" M "," USER ",\"logprobs\":1}", "logprobs");
    expect_chat_400("{" M "," USER ",\"top_logprobs\":3}", "top_logprobs");
    expect_chat_400("{" M "," USER ",\"logprobs\":true,\"top_logprobs\":21}", "top_logprobs");
    expect_chat_400("{" M "," USER ",\"reasoning_effort\":\"lots\"}", "reasoning_effort");
    expect_chat_400("{" M ",\"messages\":[{\"role\":\"user\",\"content\":\"a\",\"name\":7}]}",
                    "messages[0].name");
    expect_chat_400("{" M ",\"messages\":[{\"role\":\"user\",\"content\":\"a\",\"colour\":1}]}",
                    "messages[0].colour");
    api_chat_request r;
    api_error e;
    const char *named = "{" M ",\"messages\":[{\"role\":\"user\",\"content\":\"a\",\"name\":\"bob\"}]}";
    CHECK(chat(named, &r, &e) == 0 && !r.msgs[0].name, "a participant's name is a no-op: %s", e.message);
    api_chat_request_free(&r);
    const char *ok = "{" M "," USER ",\"tools\":null,\"tool_choice\":\"none\",\"logprobs\":null,"
                     "\"user\":\"u\",\"safety_identifier\":\"s\",\"metadata\":null,\"store\":true}";
    int rc = chat(ok, &r, &e);
    CHECK(rc == 0, "neutral values rejected: %s", e.message);
    if (rc == 0) api_chat_request_free(&r);
    api_completion_request c;
    const char *cb = "{" M ",\"prompt\":\"x\",\"suffix\":\"tail\"}";
    CHECK(json_parse_completion(cb, strlen(cb), &c, &e) == -1 && !strcmp(e.param, "suffix"), "suffix: %s", e.param);
    cb = "{" M ",\"prompt\":\"x\",\"best_of\":1,\"suffix\":null}";
    CHECK(json_parse_completion(cb, strlen(cb), &c, &e) == 0, "best_of 1: %s", e.message);
    api_completion_request_free(&c);
}

/* tools, tool_choice, the tool turns and thinking as the chat template gets them */
static void test_tools_and_tool_turns(void)
{
    const char *b = "{" M ",\"messages\":[{\"role\":\"user\",\"content\":\"w?\"},"
                    "{\"role\":\"assistant\",\"content\":null,\"reasoning_content\":\"hm\",\"tool_calls\":[{\"id\":\"c1\","
                    "\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\": [1, \\\"x\\\"]}\"}}]},"
                    "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"name\":\"f\",\"content\":\"ok\"}],"
                    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":\"d\",\"parameters\":"
                    "{\"type\":\"object\"},\"strict\":true}},{\"type\":\"function\",\"function\":{\"name\":\"g-2\"}}],"
                    "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"g-2\"}},\"parallel_tool_calls\":false,"
                    "\"reasoning_effort\":\"high\",\"chat_template_kwargs\":{\"enable_thinking\":false}}";
    api_chat_request r;
    api_error e;
    int rc = chat(b, &r, &e);
    CHECK(rc == 0, "rejected: %s (%s)", e.message, e.param);
    if (rc) return;
    CHECK(r.n_msgs == 3 && r.msgs[1].role == ROLE_ASSISTANT && !r.msgs[1].content, "assistant turn of calls");
    CHECK(r.msgs[1].reasoning && !strcmp(r.msgs[1].reasoning, "hm"), "reasoning_content");
    json_object *args = json_object_object_get(json_object_object_get(json_object_array_get_idx(r.msgs[1].tool_calls, 0),
                                                                      "function"), "arguments");
    CHECK(json_object_is_type(args, json_type_object) && json_object_array_length(json_object_object_get(args, "a")) == 2,
          "arguments parsed into an object");
    CHECK(r.msgs[2].role == ROLE_TOOL && !strcmp(r.msgs[2].tool_call_id, "c1") && !strcmp(r.msgs[2].name, "f"), "tool turn");
    CHECK(r.tools.list && json_object_array_length(r.tools.list) == 2 && r.tools.json && strstr(r.tools.json, "\"g-2\""),
          "tools kept");
    CHECK(r.tools.choice == TOOL_CHOICE_NAMED && !strcmp(r.tools.name, "g-2") && !r.tools.parallel, "tool_choice");
    CHECK(r.thinking == 0, "chat_template_kwargs wins over reasoning_effort: %d", r.thinking);
    api_chat_request_free(&r);
    rc = chat("{" M "," USER ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],"
              "\"reasoning_effort\":\"low\"}", &r, &e);
    CHECK(rc == 0 && r.tools.choice == TOOL_CHOICE_AUTO && r.tools.parallel && r.thinking == 1, "defaults: %s", e.message);
    if (rc == 0) api_chat_request_free(&r);
    expect_chat_400("{" M "," USER ",\"tool_choice\":\"auto\"}", "tool_choice");
    expect_chat_400("{" M "," USER ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],"
                    "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"h\"}}}", "tool_choice.function.name");
    expect_chat_400("{" M "," USER ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],"
                    "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\",\"z\":1}}}", "tool_choice.function.z");
    expect_chat_400("{" M "," USER ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":[]}}]}",
                    "tools[0].function.parameters");
    expect_chat_400("{" M "," USER ",\"tools\":{}}", "tools");
    expect_chat_400("{" M "," USER ",\"parallel_tool_calls\":1}", "parallel_tool_calls");
    expect_chat_400("{" M ",\"messages\":[{\"role\":\"assistant\",\"content\":null}]}", "messages[0].content");
    expect_chat_400("{" M ",\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c\",\"type\":\"function\","
                    "\"function\":{\"name\":\"f\",\"arguments\":\"[1]\"}}]}]}", "messages[0].tool_calls[0].function.arguments");
    expect_chat_400("{" M ",\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"type\":\"function\","
                    "\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}]}", "messages[0].tool_calls[0].id");
    expect_chat_400("{" M ",\"messages\":[{\"role\":\"user\",\"content\":\"a\",\"tool_calls\":[]}]}",
                    "messages[0].tool_calls");
    expect_chat_400("{" M "," USER ",\"chat_template_kwargs\":{\"enable_thinking\":\"yes\"}}",
                    "chat_template_kwargs.enable_thinking");
}

static void test_response_format_and_logit_bias(void)
{
    api_chat_request r;
    api_error e;
    const char *b = "{" M "," USER ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"p\","
                    "\"strict\":true,\"schema\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}}},"
                    "\"logit_bias\":{\"17\":-100,\"3\":2.5}}";
    int rc = chat(b, &r, &e);
    CHECK(rc == 0, "rejected: %s", e.message);
    if (rc) return;
    CHECK(r.gen.constrained && r.gen.schema && strstr(r.gen.schema, "\"integer\"") && r.gen.schema_len == strlen(r.gen.schema),
          "schema '%s'", r.gen.schema ? r.gen.schema : "(null)");
    CHECK(r.gen.n_bias == 2, "n_bias %d", r.gen.n_bias);
    for (int i = 0; i < r.gen.n_bias; i++)
        CHECK((r.gen.bias_tok[i] == 17 && r.gen.bias_val[i] == -100) || (r.gen.bias_tok[i] == 3 && r.gen.bias_val[i] == 2.5f),
              "bias %d: %d %g", i, r.gen.bias_tok[i], r.gen.bias_val[i]);
    api_chat_request_free(&r);
    b = "{" M "," USER ",\"response_format\":{\"type\":\"json_object\"}}";
    rc = chat(b, &r, &e);
    CHECK(rc == 0 && r.gen.constrained && !r.gen.schema, "json_object: %s", rc ? e.message : "");
    if (rc == 0) api_chat_request_free(&r);
    b = "{" M "," USER ",\"response_format\":{\"type\":\"text\"}}";
    rc = chat(b, &r, &e);
    CHECK(rc == 0 && !r.gen.constrained, "text: %s", rc ? e.message : "");
    if (rc == 0) api_chat_request_free(&r);
}

#define IMG(url) "{\"type\":\"image_url\",\"image_url\":{\"url\":\"" url "\"}}"

#define ONE(part) "{" M ",\"messages\":[{\"role\":\"user\",\"content\":[" part "]}]}"

/* the parts the template reads, as JSON */
static void check_parts(const api_message *m, const char *want)
{
    const char *parts = json_object_to_json_string_ext(m->parts, JSON_C_TO_STRING_PLAIN);
    CHECK(!strcmp(parts, want), "parts %s", parts);
}

/* body parsed into r and its first message (NULL, with the failure checked, when it is refused) */
static const api_message *first_message(const char *body, api_chat_request *r)
{
    api_error e;
    int rc = chat(body, r, &e);
    CHECK(rc == 0, "%s", rc ? e.message : "");
    return rc ? NULL : &r->msgs[0];
}

/* image_url parts: data URLs decoded (base64 strictly: padding only at the end), the parts kept in order for the
 * template; the refusals name the part */
static void test_image_parts(void)
{
    const char *b = "{" M ",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
                    IMG("data:image/png;base64,iVBORw0K") ",{\"type\":\"text\",\"text\":\"b\"},"
                    "{\"type\":\"image_url\",\"image_url\":\"data:image/gif;base64,R0lGOA==\"},"
                    "{\"type\":\"video\",\"frames\":[\"data:image/jpeg;base64,/9j/\"],\"timestamps\":[61.5]}]}]}";
    api_chat_request r;
    const api_message *m = first_message(b, &r);
    if (!m) return;
    CHECK(!strcmp(m->content, "ab"), "text joined: '%s'", m->content);
    CHECK(m->n_images == 3 && m->n_videos == 1, "%d images, %d videos", m->n_images, m->n_videos);
    CHECK(m->n_images == 3 && m->images[0].len == 6 && !memcmp(m->images[0].bytes, "\x89PNG\r\n", 6) &&
          m->images[1].len == 4 && !memcmp(m->images[1].bytes, "GIF8", 4) && m->images[1].frame == -1 &&
          m->images[2].frame == 0 && m->images[2].seconds == 61.5 && m->images[2].max_tokens == 70, "decoded parts");
    check_parts(m, "[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"image\"},{\"type\":\"text\",\"text\":\"b\"},"
                   "{\"type\":\"image\"},{\"type\":\"video\"}]");
    api_chat_request_free(&r);
    /* http(s) URLs are kept for the server's fetch rules (fetch.h), with the field that names them */
    m = first_message(ONE(IMG("HTTPS://x/y.png") ",{\"type\":\"video\",\"frames\":[\"http://x/f.png\"]},"
                          "{\"type\":\"video_url\",\"video_url\":\"https://x/v.mp4\"}"), &r);
    if (m) {
        const api_image *im = m->images;
        CHECK(m->n_images == 3 && im[0].url && !strcmp(im[0].url, "HTTPS://x/y.png") && !im[0].bytes &&
              !strcmp(im[0].url_param, "messages[0].content[0].image_url.url") && im[1].url &&
              !strcmp(im[1].url_param, "messages[0].content[1].frames[0]") && im[2].url && im[2].video &&
              !strcmp(im[2].url_param, "messages[0].content[2].video_url"), "URL parts kept");
        api_chat_request_free(&r);
    }
    expect_chat_400(ONE(IMG("data:image/png;base64,iVBO=w0K")), "messages[0].content[0].image_url.url");
    expect_chat_400(ONE(IMG("data:image/png;base64,iVBORw0")), "messages[0].content[0].image_url.url");
    expect_chat_400(ONE(IMG("data:image/png;base64,")), "messages[0].content[0].image_url.url");
    expect_chat_400(ONE(IMG("data:image/svg+xml;base64,PHN2Zz4=")), "messages[0].content[0].image_url.url");
    expect_chat_400(ONE(IMG("data:image/png,rawbytes")), "messages[0].content[0].image_url.url");
    expect_chat_400(ONE("{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,iVBORw0K\","
                        "\"detail\":\"max\"}}"), "messages[0].content[0].image_url.detail");
    expect_chat_400(ONE("{\"type\":\"image_url\",\"image_url\":7}"), "messages[0].content[0].image_url");
    expect_chat_400(ONE("{\"type\":\"video\",\"frames\":\"x\"}"), "messages[0].content[0].frames");
    expect_chat_400(ONE("{\"type\":\"video\",\"frames\":[7]}"), "messages[0].content[0].frames[0]");
    expect_chat_400(ONE("{\"type\":\"video\",\"frames\":[\"data:image/png;base64,iVBORw0K\"],\"timestamps\":[\"0\"]}"),
                    "messages[0].content[0].timestamps[0]");
}

#define VID(url) "{\"type\":\"video_url\",\"video_url\":{\"url\":\"" url "\"}}"

/* video_url parts: one entry per file (video set, frame 0, 70 tokens), decoded into frames later (api_video.c); the
 * template sees {"type": "video"}; every media type but the four video ones refused, naming the part's url */
static void test_video_url_parts(void)
{
    const char *b = "{" M ",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
                    VID("data:video/mp4;base64,AAAAIGZ0eXA=") ",{\"type\":\"video_url\",\"video_url\":"
                    "\"data:video/webm;base64,GkXfow==\"}," IMG("data:image/png;base64,iVBORw0K") ","
                    VID("data:video/quicktime;base64,AAAA") "," VID("data:video/x-matroska;base64,GkXf") "]}]}";
    api_chat_request r;
    const api_message *m = first_message(b, &r);
    if (!m) return;
    CHECK(m->n_images == 5 && m->n_videos == 4, "%d entries, %d videos", m->n_images, m->n_videos);
    if (m->n_images == 5) {
        const api_image *v = &m->images[0];
        CHECK(v->video && v->frame == 0 && v->max_tokens == 70 && v->len == 8 && !memcmp(v->bytes, "\0\0\0 ftyp", 8) &&
              !v->ready && !strcmp(v->param, "messages[0].content[1]"), "the mp4 entry");
        CHECK(m->images[1].video && m->images[1].len == 4 && !memcmp(m->images[1].bytes, "\x1a\x45\xdf\xa3", 4),
              "the webm entry (URL string)");
        CHECK(!m->images[2].video && m->images[2].frame == -1, "the image between them");
        CHECK(m->images[3].video && m->images[4].video, "quicktime and x-matroska");
    }
    check_parts(m, "[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"video\"},{\"type\":\"video\"},"
                   "{\"type\":\"image\"},{\"type\":\"video\"},{\"type\":\"video\"}]");
    api_chat_request_free(&r);
    expect_chat_400(ONE(VID("data:image/png;base64,iVBORw0K")), "messages[0].content[0].video_url.url");
    expect_chat_400(ONE(VID("data:video/avi;base64,AAAA")), "messages[0].content[0].video_url.url");
    expect_chat_400(ONE(VID("data:video/mp4,rawbytes")), "messages[0].content[0].video_url.url");
    expect_chat_400(ONE(VID("data:video/mp4;base64,AAA")), "messages[0].content[0].video_url.url");
    expect_chat_400(ONE(VID("data:video/mp4;base64,")), "messages[0].content[0].video_url.url");
    expect_chat_400(ONE("{\"type\":\"video_url\",\"video_url\":7}"), "messages[0].content[0].video_url");
    expect_chat_400(ONE("{\"type\":\"video_url\"}"), "messages[0].content[0].video_url");
    expect_chat_400(ONE("{\"type\":\"video_url\",\"video_url\":{}}"), "messages[0].content[0].video_url.url");
    expect_chat_400(ONE(IMG("data:video/mp4;base64,AAAA")), "messages[0].content[0].image_url.url");
    /* an http(s) URL is kept for the server's fetch rules, naming its field (fetch.h) */
    m = first_message(ONE(VID("http://x/y.mp4")), &r);
    if (m) {
        CHECK(m->n_images == 1 && m->images[0].video && m->images[0].url && !m->images[0].bytes &&
              !strcmp(m->images[0].url_param, "messages[0].content[0].video_url.url"), "the video URL kept");
        api_chat_request_free(&r);
    }
#undef ONE
}

int main(void)
{
    RUN_TEST(test_image_parts);
    RUN_TEST(test_video_url_parts);
    RUN_TEST(test_response_format_and_logit_bias);
    RUN_TEST(test_tools_and_tool_turns);
    RUN_TEST(test_unknown_and_unsupported_fields_are_named);
    RUN_TEST(test_full_chat_request);
    RUN_TEST(test_defaults_follow_openai);
    RUN_TEST(test_nulls_mean_absent_and_newer_name_wins);
    RUN_TEST(test_integral_float_is_an_integer);
    RUN_TEST(test_malformed_bodies);
    RUN_TEST(test_field_errors_name_the_field);
    RUN_TEST(test_developer_role_is_system);
    RUN_TEST(test_completions);
    RUN_TEST(test_error_body_shape);
    CHECK_EXIT();
}
