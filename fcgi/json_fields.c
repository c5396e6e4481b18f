/* json_fields.c — the table of request fields (see json_fields.h). */
#include "json_fields.h"

#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

enum field_use {
    USE_PARSED,      /* json_io.c reads and validates it */
    USE_NOOP,        /* accepted and has no effect here, documented: bookkeeping for OpenAI's platform */
    USE_UNSUPPORTED  /* a 400 unless the value is neutral (null, or what neutral() accepts) */
};

enum { B_CHAT = 1 << BODY_CHAT, B_COMPL = 1 << BODY_COMPLETION, B_MSG = 1 << BODY_MESSAGE, B_REQ = B_CHAT | B_COMPL };

typedef struct field_rule {
    const char *name;
    unsigned bodies;
    enum field_use use;
    const char *neutral;   /* USE_UNSUPPORTED: the value (as compact JSON) that asks for nothing, or NULL */
} field_rule;

static const field_rule rules[] = {
    /* both endpoints */
    { "model", B_REQ, USE_PARSED, NULL },
    { "max_tokens", B_REQ, USE_PARSED, NULL },
    { "temperature", B_REQ, USE_PARSED, NULL },
    { "top_p", B_REQ, USE_PARSED, NULL },
    { "top_k", B_REQ, USE_PARSED, NULL },
    { "min_p", B_REQ, USE_PARSED, NULL },
    { "frequency_penalty", B_REQ, USE_PARSED, NULL },
    { "presence_penalty", B_REQ, USE_PARSED, NULL },
    { "repetition_penalty", B_REQ, USE_PARSED, NULL },
    { "seed", B_REQ, USE_PARSED, NULL },
    { "n", B_REQ, USE_PARSED, NULL },
    { "stop", B_REQ, USE_PARSED, NULL },
    { "stream", B_REQ, USE_PARSED, NULL },
    { "stream_options", B_REQ, USE_PARSED, NULL },
    { "user", B_REQ, USE_NOOP, NULL },
    { "safety_identifier", B_CHAT, USE_NOOP, NULL },
    { "metadata", B_CHAT, USE_NOOP, NULL },
    { "store", B_CHAT, USE_NOOP, NULL },
    { "logit_bias", B_REQ, USE_PARSED, NULL },
    { "ignore_eos", B_REQ, USE_PARSED, NULL },
    { "priority", B_REQ, USE_PARSED, NULL },
    /* chat */
    { "messages", B_CHAT, USE_PARSED, NULL },
    { "max_completion_tokens", B_CHAT, USE_PARSED, NULL },
    { "logprobs", B_REQ, USE_PARSED, NULL },
    { "top_logprobs", B_CHAT, USE_PARSED, NULL },
    { "response_format", B_CHAT, USE_PARSED, NULL },
    { "tools", B_CHAT, USE_PARSED, NULL },
    { "tool_choice", B_CHAT, USE_PARSED, NULL },
    { "parallel_tool_calls", B_CHAT, USE_PARSED, NULL },
    { "functions", B_CHAT, USE_UNSUPPORTED, "[]" },
    { "function_call", B_CHAT, USE_UNSUPPORTED, "\"none\"" },
    { "reasoning_effort", B_CHAT, USE_PARSED, NULL },
    { "chat_template_kwargs", B_CHAT, USE_PARSED, NULL },
    { "modalities", B_CHAT, USE_UNSUPPORTED, "[\"text\"]" },
    { "audio", B_CHAT, USE_UNSUPPORTED, NULL },
    { "prediction", B_CHAT, USE_UNSUPPORTED, NULL },
    { "web_search_options", B_CHAT, USE_UNSUPPORTED, NULL },
    { "verbosity", B_CHAT, USE_UNSUPPORTED, NULL },
    { "service_tier", B_CHAT, USE_UNSUPPORTED, "\"auto\"" },
    { "prompt_cache_key", B_CHAT, USE_UNSUPPORTED, NULL },
    /* completions */
    { "prompt", B_COMPL, USE_PARSED, NULL },
    { "echo", B_COMPL, USE_PARSED, NULL },
    { "best_of", B_COMPL, USE_UNSUPPORTED, "1" },
    { "suffix", B_COMPL, USE_PARSED, NULL },
    /* one chat message */
    { "role", B_MSG, USE_PARSED, NULL },
    { "content", B_MSG, USE_PARSED, NULL },
    { "name", B_MSG, USE_PARSED, NULL },
    { "tool_calls", B_MSG, USE_PARSED, NULL },
    { "tool_call_id", B_MSG, USE_PARSED, NULL },
    { "reasoning_content", B_MSG, USE_PARSED, NULL },
    { "function_call", B_MSG, USE_UNSUPPORTED, NULL },
    { "refusal", B_MSG, USE_UNSUPPORTED, NULL },
    { "audio", B_MSG, USE_UNSUPPORTED, NULL },
};

static const field_rule *find(const char *name, enum api_body body)
{
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
        if ((rules[i].bodies & (1u << body)) && !strcmp(rules[i].name, name)) return &rules[i];
    return NULL;
}

static int is_neutral(json_object *v, const char *neutral)
{
    if (!v) return 1; /* JSON null: not given */
    if (!neutral) return 0;
    const char *t = json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
    return t && !strcmp(t, neutral);
}

int json_check_fields(json_object *obj, enum api_body body, const char *param, api_error *e)
{
    json_object_object_foreach(obj, key, val) {
        char where[160];
        if (param) snprintf(where, sizeof where, "%s.%.100s", param, key);
        else snprintf(where, sizeof where, "%.100s", key);
        const field_rule *r = find(key, body);
        if (!r)  /* OpenAI's wording for a field it does not know */
            return api_fail(e, 400, "invalid_request_error", "unknown_parameter", where,
                            "Unrecognized request argument supplied: %s", where);
        if (r->use == USE_UNSUPPORTED && !is_neutral(val, r->neutral))
            return api_fail(e, 400, "invalid_request_error", "unsupported_parameter", where,
                            "'%s' is not supported by this server%s%s", where, r->neutral ? "; only " : "",
                            r->neutral ? r->neutral : "");
    }
    return 0;
}
