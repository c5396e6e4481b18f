/* chat.h — chat templates per model family. No OpenCL, no tokenizer: text in, text out. */
#ifndef CLGEMMA_CHAT_H
#define CLGEMMA_CHAT_H

#include <stddef.h>
#include "engine.h"

typedef enum chat_family { CHAT_GEMMA3 = 0, CHAT_GEMMA4 = 1 } chat_family;

chat_family chat_family_from_arch(const char *arch);
/* Writes the prompt (NUL-terminated, no BOS). Returns bytes needed excluding NUL, or -1 on a bad
 * role or message order. Output is truncated (still terminated) when cap is too small. */
int chat_format(chat_family fam, const chat_msg *msgs, int n, int add_generation_prompt, char *out, size_t cap);

#endif
