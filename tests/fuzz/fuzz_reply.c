/* fuzz_reply.c — libFuzzer target for the reply splitter (opencl/io/chat_reply.c): the first byte picks the
 * syntax and whether tools are parsed, the next ones where the text is cut into pieces; the splitter must
 * never crash, every event's text must lie in bounds, tool calls' arguments must be JSON objects, and the
 * call parser alone must agree on a body fed whole. */
#include <json-c/json.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chat_reply.h"

#define ASSERT(c) do { if (!(c)) abort(); } while (0)

static int check(void *ctx, const reply_event *ev)
{
    (void)ctx;
    ASSERT(ev->text || !ev->len);
    for (size_t i = 0; i < ev->len; i++) (void)*(volatile const char *)&ev->text[i];
    if (ev->part == REPLY_TOOL_CALL) {
        ASSERT(ev->name && ev->name[0]);
        json_object *o = json_tokener_parse(ev->text);
        ASSERT(o && json_object_is_type(o, json_type_object));
        json_object_put(o);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    if (n < 2) return 0;
    reply_syntax syn = d[0] & 1 ? REPLY_GEMMA4 : REPLY_PLAIN;
    int tools = (d[0] >> 1) & 1;
    size_t step = (size_t)(d[1] % 16) + 1;
    const char *s = (const char *)d + 2;
    n -= 2;
    chat_reply *r;
    if (chat_reply_create(&r, syn, tools)) return 0;
    for (size_t i = 0; i < n; i += step) ASSERT(chat_reply_push(r, s + i, n - i < step ? n - i : step, check, NULL) == 0);
    ASSERT(chat_reply_finish(r, check, NULL) == 0);
    chat_reply_destroy(r);
    char *name, *args;
    if (reply_gemma4_call(s, n, &name, &args) == 0) {
        ASSERT(name && args);
        free(name);
        free(args);
    }
    return 0;
}
