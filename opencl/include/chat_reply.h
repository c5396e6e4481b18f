/* chat_reply.h — a chat model's reply split as its template family writes it: the thought channel
 * (reasoning), tool calls in the model's own syntax (turned into OpenAI tool calls: a name and JSON
 * arguments) and the text around them (content). Fed the generated text with control tokens rendered,
 * in pieces of any size (a marker may be split across pieces). No OpenCL here. */
#ifndef CLGEMMA_CHAT_REPLY_H
#define CLGEMMA_CHAT_REPLY_H

#include <stddef.h>

typedef enum reply_syntax {
    REPLY_PLAIN,   /* everything is content (Gemma 3, /v1/completions) */
    REPLY_GEMMA4   /* <|channel>thought\n...<channel|>, <|tool_call>call:NAME{...}<tool_call|> */
} reply_syntax;

typedef enum reply_part { REPLY_CONTENT, REPLY_REASONING, REPLY_TOOL_CALL } reply_part;

/* text: content or reasoning text; for a tool call, its arguments as a JSON object's text, with name
 * the function's name. Valid during the callback only. */
typedef struct reply_event {
    reply_part part;
    const char *text;
    size_t len;
    const char *name;
} reply_event;

/* returns 0 to go on; anything else stops the push and is returned by it (the client went away) */
typedef int (*reply_fn)(void *ctx, const reply_event *ev);

typedef struct chat_reply chat_reply;

/* tools: tool calls are parsed (else their text, markers included, stays content) */
int  chat_reply_create(chat_reply **out, reply_syntax syntax, int tools);
void chat_reply_destroy(chat_reply *r);
/* Feeds n bytes; events go to fn as soon as they are certain. Returns 0, -1 out of memory, or fn's
 * non-zero value. */
int  chat_reply_push(chat_reply *r, const char *s, size_t n, reply_fn fn, void *ctx);
/* The reply ended: what is held back goes out (an unterminated tool call as content). */
int  chat_reply_finish(chat_reply *r, reply_fn fn, void *ctx);
/* tool calls emitted so far */
int  chat_reply_calls(const chat_reply *r);

/* One Gemma 4 call body, "call:NAME{key:value,...}" (between <|tool_call> and <tool_call|>), as the
 * function name and its arguments as JSON text (both malloc'd). Strings are <|"|>...<|"|>, keys bare
 * or quoted, None/null, true/false, numbers, lists and objects. Returns 0, -1 when malformed (or out
 * of memory). */
int  reply_gemma4_call(const char *s, size_t n, char **name, char **args_json);

#endif
