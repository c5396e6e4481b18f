/* json_io.h — OpenAI request bodies parsed and validated into typed structs (json-c). Strict: wrong
 * types, out-of-range values and unsupported values are errors (api_error.h) that name the offending
 * field, and so are unknown fields and ones not supported (json_fields.h). No engine, no FastCGI here. */
#ifndef CLGEMMA_FCGI_JSON_IO_H
#define CLGEMMA_FCGI_JSON_IO_H

#include <stddef.h>
#include <stdint.h>
#include "api_error.h"
#include "api_image.h"
#include "sampler.h"

#define API_MAX_STOP 4
#define API_MAX_BIAS 300  /* OpenAI's limit on logit_bias entries */
#define API_MAX_N 16      /* choices per prompt */
#define API_MAX_PROMPTS 2048 /* prompts of one /v1/completions request (OpenAI's limit) */

enum api_role { ROLE_SYSTEM, ROLE_USER, ROLE_ASSISTANT, ROLE_TOOL };

struct json_object;

typedef struct api_message {
    enum api_role role;
    char *content;        /* owned, NUL-terminated, no interior NUL; NULL: none (an assistant turn of
                             tool calls only) */
    size_t len;
    struct json_object *tool_calls; /* assistant: [{id, type, function: {name, arguments}}] with the
                                       arguments parsed into an object (the template prints them), owned */
    char *tool_call_id;   /* tool: the call this answers (owned) */
    char *name;           /* tool: the function's name, when given (owned) */
    char *reasoning;      /* assistant: reasoning_content (owned; the templates drop past thoughts) */
    struct json_object *parts; /* content with images: its parts for the template, text and {"type": "image"}
                                  in the client's order (owned; content holds the text joined) */
    api_image *images;    /* the image_url parts and the video parts' frames, in order (owned) */
    int n_images;
    int n_videos;         /* video parts among them */
} api_message;


/* tool_choice */
enum api_tool_choice { TOOL_CHOICE_AUTO, TOOL_CHOICE_NONE, TOOL_CHOICE_REQUIRED, TOOL_CHOICE_NAMED };

typedef struct api_tools {
    struct json_object *list; /* the validated tools array (owned), NULL: none */
    char *json;               /* the same as compact JSON text (owned) */
    size_t json_len;
    enum api_tool_choice choice;
    char *name;               /* TOOL_CHOICE_NAMED: the function (owned) */
    int parallel;             /* parallel_tool_calls (default true) */
} api_tools;

/* Generation settings shared by chat and completions. */
typedef struct api_gen {
    int n;                /* choices per prompt, 1..API_MAX_N */
    int echo;             /* completions: each choice's text starts with its prompt */
    int max_tokens;       /* -1: not given (up to the context) */
    sampler_params sampling;
    int seed_given;
    int priority;         /* vLLM's extension: queue order, lower first */
    int ignore_eos;       /* vLLM's and llama-server's extension: an end-of-generation token does not end it */
    int n_stop;
    char *stop[API_MAX_STOP]; /* owned, non-empty */
    size_t stop_len[API_MAX_STOP];
    int stream;
    int include_usage;    /* stream_options.include_usage */
    /* response_format: json_object (constrained, schema NULL) or json_schema (its schema's text) */
    int constrained;
    char *schema;         /* owned, NUL-terminated; NULL: any JSON object */
    size_t schema_len;
    /* logit_bias: token id -> bias in [-100, 100] (ids are checked against the vocabulary later) */
    /* logprobs: chat logprobs + top_logprobs (0..20), completions logprobs (0..5) */
    int logprobs;         /* report the chosen tokens' logprobs */
    int top_logprobs;     /* and this many alternatives per token */
    int n_bias;
    int32_t bias_tok[API_MAX_BIAS];
    float bias_val[API_MAX_BIAS];
    /* chat replies: set by api_chat from the model and the request (not parsed), zero for completions */
    int reply_syntax;     /* reply_syntax of chat_reply.h: how the output is read */
    int parse_tools;      /* tool calls in the output become tool_calls */
    int32_t think_open, think_close; /* the tokens around the thought channel (reasoning_tokens), or -1 */
    int thinking;         /* thinking on: a constrained reply may follow one thought */
    const api_tools *force_tools;    /* tool_choice required / named: the output is constrained to calls */
} api_gen;

typedef struct api_chat_request {
    char *model;          /* owned */
    api_message *msgs;    /* owned array */
    int n_msgs;
    api_tools tools;
    int thinking;         /* reasoning_effort / chat_template_kwargs.enable_thinking: 1 on, 0 off, -1 not given */
    api_gen gen;
} api_chat_request;

/* one prompt of /v1/completions: text, or token ids as given */
typedef struct api_prompt {
    char *text;           /* owned, NUL-terminated; NULL for ids */
    size_t len;
    int32_t *ids;         /* owned, each >= 0 (checked against the vocabulary later); NULL for text */
    int n_ids;            /* >= 1 */
} api_prompt;

typedef struct api_completion_request {
    char *model;
    api_prompt *prompts;  /* owned: a string, an array of strings, of ids, or of arrays of ids */
    int n_prompts;        /* 1..API_MAX_PROMPTS */
    api_gen gen;
} api_completion_request;

/* Parse body (len bytes, need not be NUL-terminated). Returns 0, or -1 with err filled (status 400).
 * On success the caller frees with the matching *_free (also safe on a zeroed struct). */
int  json_parse_chat(const char *body, size_t len, api_chat_request *out, api_error *err);
void api_chat_request_free(api_chat_request *r);
int  json_parse_completion(const char *body, size_t len, api_completion_request *out, api_error *err);
void api_completion_request_free(api_completion_request *r);

#endif
