/* logprobs.h — OpenAI's logprobs objects from the engine's per-token log-probabilities: chat's
 * {"content": [{token, logprob, bytes, top_logprobs}]} and completions' {tokens, token_logprobs,
 * top_logprobs, text_offset}. */
#ifndef CLGEMMA_FCGI_LOGPROBS_H
#define CLGEMMA_FCGI_LOGPROBS_H

#include <stddef.h>
#include "generate.h"

struct json_object;

/* chat: {"content": [...]} for n tokens, each with its top alternatives */
struct json_object *logprobs_chat(const tokenizer *t, const gen_lp *e, int n, int top);
/* chat: appends n more tokens' entries to an object made by logprobs_chat */
void logprobs_chat_add(struct json_object *o, const tokenizer *t, const gen_lp *e, int n, int top);
/* completions: a new {tokens, token_logprobs, top_logprobs, text_offset} with n tokens, whose text
 * starts at *offset (advanced past them); a token without logprobs (none: a prompt's first) has
 * null in token_logprobs and top_logprobs */
struct json_object *logprobs_completion(const tokenizer *t, const gen_lp *e, int n, int top, size_t *offset);
void logprobs_completion_add(struct json_object *o, const tokenizer *t, const gen_lp *e, int n, int top,
                             size_t *offset);

#endif
