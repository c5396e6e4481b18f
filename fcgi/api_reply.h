/* api_reply.h — one chat choice's reply as OpenAI shapes it: the model's text split (chat_reply.h) into
 * content, reasoning_content and tool_calls, either as stream deltas or as a whole message. */
#ifndef CLGEMMA_FCGI_API_REPLY_H
#define CLGEMMA_FCGI_API_REPLY_H

#include <stddef.h>

#include "json_io.h"

struct json_object;
typedef struct api_reply api_reply;

/* p: the request's reply rules (reply_syntax, parse_tools); call_ids: the prefix of tool call ids
 * (unique per request and choice). Returns 0 or -1 (out of memory). */
int  api_reply_create(api_reply **out, const api_gen *p, const char *call_ids);
void api_reply_destroy(api_reply *r);

/* A stream: each delta the text makes ({"content"}, {"reasoning_content"} or {"tool_calls": [one]})
 * goes to fn, which owns it. Returns 0, -1 out of memory, or fn's non-zero value. */
typedef int (*api_delta_fn)(void *ctx, struct json_object *delta);
int  api_reply_stream(api_reply *r, const char *text, size_t len, api_delta_fn fn, void *ctx);
/* the end of a stream: what was held back */
int  api_reply_stream_end(api_reply *r, api_delta_fn fn, void *ctx);

/* A whole response: text accumulates; the message at the end ({role, content, reasoning_content?,
 * tool_calls?}; content null when the reply is tool calls and blank text). NULL when out of memory. */
int  api_reply_add(api_reply *r, const char *text, size_t len);
struct json_object *api_reply_message(api_reply *r);

/* finish_reason: "tool_calls" when the reply made calls and ended by itself, else fin */
const char *api_reply_finish(const api_reply *r, const char *fin);

#endif
