/* fuzz_tools.c — libFuzzer target for the tools-array compiler (Gemma 4 tool calls) and the
 * matcher in the Gemma dialect (tests/suites/fuzz_schema.sh). Input: one flags byte (bit 0:
 * parallel; bit 1: only "get_weather", bit 2: only "f"), a tools array text, then optionally "\0"
 * and bytes to feed the matcher (0xf8..0xfa stand for <|"|>, <|tool_call>, <tool_call|>). Any
 * tools text must compile or be refused with a message; fed bytes must never crash. */
#include <stdint.h>
#include <string.h>

#include "grammar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!size) return 0;
    int flags = data[0];
    data++; size--;
    const uint8_t *nul = memchr(data, 0, size);
    size_t tlen = nul ? (size_t)(nul - data) : size;
    const char *only = flags & 2 ? "get_weather" : flags & 4 ? "f" : NULL;
    grammar g;
    char err[256];
    if (grammar_compile_tools(&g, (const char *)data, tlen, only, flags & 1, err, sizeof err)) {
        if (!err[0]) __builtin_trap(); /* a refusal always says why */
        return 0;
    }
    static g_state a, b; /* large: keep them off the stack */
    uint32_t room, quoted;
    g_state_init(&a, &g);
    for (size_t i = tlen + 1; nul && i < size; i++) {
        if (!g_step(&g, &a, data[i], &b)) break;
        g_state_copy(&a, &b);
        (void)g_complete(&g, &a);
        (void)g_free_text(&g, &a, &room, &quoted);
    }
    grammar_free(&g);
    return 0;
}
