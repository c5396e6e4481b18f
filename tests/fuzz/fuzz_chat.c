/* fuzz_chat.c — libFuzzer harness for the chat templates (opencl/io/chat*.c). The first byte picks the
 * template (low two bits), add_generation_prompt and enable_thinking; the rest is either a JSON
 * conversation ({"messages": ..., "tools": ...} or a bare messages array) or, when it is not JSON, a
 * template text for the structural check and recognition. Rendering never crashes or leaks; a rendering
 * has a terminated text and spans inside it that hold control-token text; a refusal has a message. */
#include <json-c/json.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"

#define ASSERT(c) do { if (!(c)) { __builtin_trap(); } } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    unsigned flags = data[0];
    const char *d = (const char *)data + 1;
    size_t n = size - 1;
    json_tokener *tk = json_tokener_new();
    json_object *root = tk ? json_tokener_parse_ex(tk, d, (int)n) : NULL;
    if (tk) json_tokener_free(tk);
    if (!root) {
        char err[200], note[512];
        if (chat_template_check(d, n, err, sizeof err)) ASSERT(err[0]);
        chat_pick((flags & 1) ? CHAT_GEMMA4 : CHAT_GEMMA3, d, n, note, sizeof note);
        return 0;
    }
    json_object *msgs = root, *tools = NULL;
    if (json_object_get_type(root) == json_type_object) {
        msgs = json_object_object_get(root, "messages");
        tools = json_object_object_get(root, "tools");
    }
    chat_opts o = { (flags >> 2) & 1, (flags >> 3) & 1, (flags >> 4) & 1 ? "<bos>" : NULL };
    chat_text t;
    char err[256];
    /* bits 0, 1 and 7: every template */
    int rc = chat_render((chat_kind)(((flags & 3) | ((flags >> 5) & 4)) % CHAT_TPL_COUNT), msgs, tools, &o, &t, err,
                         sizeof err);
    if (rc == 0) {
        ASSERT(t.text && t.text[t.len] == 0);
        for (int i = 0; i < t.n_special; i++) {
            ASSERT(t.special[i].len > 0 && t.special[i].off + t.special[i].len <= t.len);
            ASSERT(i == 0 || t.special[i].off >= t.special[i - 1].off + t.special[i - 1].len);
            ASSERT(t.text[t.special[i].off] == '<' && t.text[t.special[i].off + t.special[i].len - 1] == '>');
        }
        chat_text_free(&t);
    } else {
        ASSERT((rc == -1 || rc == -2) && err[0]);
    }
    json_object_put(root);
    return 0;
}
