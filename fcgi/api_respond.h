/* api_respond.h — running a generation into an OpenAI response (whole or streamed). */
#ifndef CLGEMMA_FCGI_API_RESPOND_H
#define CLGEMMA_FCGI_API_RESPOND_H

#include "api.h"
#include "generate.h"
#include "json_io.h"

/* the response shapes of /v1/chat/completions and /v1/completions */
typedef struct api_shape {
    const char *object_full;  /* "chat.completion" | "text_completion" */
    const char *object_chunk; /* "chat.completion.chunk" | "text_completion" */
    const char *id_prefix;    /* "chatcmpl-" | "cmpl-" */
    int chat;                 /* choices carry message/delta (1) or text (0) */
} api_shape;

/* Queues the prompts and answers the request: a JSON error (400/429/503...), a whole response
 * with p->n choices per prompt, or an event stream (each chunk one choice's). prompt_param names
 * the prompt in a context-length error. Returns 0, or -1 when the client went away. */
int api_generate_prompts(const api_ctx *c, http_req *r, const api_shape *s, const api_gen *p,
                         const gen_prompt *prompts, int n_prompts, const char *prompt_param);
/* api_generate_prompts of one prompt, a chat's (its images, if any, go to the job) */
int api_generate(const api_ctx *c, http_req *r, const api_shape *s, const api_gen *p, const gen_prompt *prompt);

/* sends e as the response; returns 0, or -1 when the client went away */
int api_reply_error(http_req *r, const api_error *e);

#endif
