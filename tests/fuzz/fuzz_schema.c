/* fuzz_schema.c — libFuzzer target for the JSON Schema compiler and the matcher
 * (tests/suites/fuzz_schema.sh). Input: a schema text, then optionally "\0" and bytes to feed the
 * matcher. Any schema must compile or be refused with a message; fed bytes must never crash. */
#include <stdint.h>
#include <string.h>

#include "grammar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t slen = nul ? (size_t)(nul - data) : size;
    grammar g;
    char err[256];
    if (grammar_compile(&g, (const char *)data, slen, "", err, sizeof err)) { /* no prefix: the message alone */
        if (!err[0]) __builtin_trap(); /* a refusal always says why */
        return 0;
    }
    static g_state a, b; /* large: keep them off the stack */
    g_state_init(&a, &g);
    for (size_t i = slen + 1; nul && i < size; i++) {
        if (!g_step(&g, &a, data[i], &b)) break;
        g_state_copy(&a, &b);
        (void)g_complete(&g, &a);
    }
    grammar_free(&g);
    return 0;
}
