/* chat.h — chat templates rendered natively, byte-identical to jinja2 (transformers' settings) rendering
 * the real template on the same conversation. The template a GGUF carries (tokenizer.chat_template) is
 * recognised by hash and mapped to a C renderer; an unknown or broken one falls back to the architecture
 * family's template with one note. Conversations are JSON as OpenAI's API and transformers take them:
 * messages [{role, content (string or parts), tool_calls, tool_call_id, name, reasoning_content, ...}] and
 * tools [{type, function: {name, description, parameters}}]. No OpenCL here. */
#ifndef CLGEMMA_CHAT_H
#define CLGEMMA_CHAT_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer.h"

struct json_object;

/* the template families; an architecture names its family in its row (models/registry.c) */
typedef enum chat_family { CHAT_GEMMA3 = 0, CHAT_GEMMA4 = 1, CHAT_QWEN35 = 2 } chat_family;

/* the templates clgemma renders */
typedef enum chat_kind {
    CHAT_TPL_GEMMA3,             /* google/gemma-3-*-it */
    CHAT_TPL_GEMMA4,             /* tokenizer.chat_template of llama.cpp's ggml-vocab-gemma-4.gguf */
    CHAT_TPL_GEMMA4_INTERLEAVED, /* llama.cpp models/templates/google-gemma-4-31B-it-interleaved.jinja */
    CHAT_TPL_GEMMA4_31B,         /* llama.cpp models/templates/google-gemma-4-31B-it.jinja: tool results
                                  * folded into the model turn; Gemma 4's family default */
    CHAT_TPL_QWEN35,             /* llama.cpp models/templates/Qwen3.5-4B.jinja */
    CHAT_TPL_COUNT
} chat_kind;

const char *chat_kind_name(chat_kind k);  /* "gemma4-31b", ... */
chat_family chat_kind_family(chat_kind k);

/* FNV-1a 64 of a template less one trailing newline (jinja2 drops it), as templates are recognised */
uint64_t chat_template_hash(const char *s, size_t n);
/* Structural check of a template's text: every {{ }}, {% %}, {# #} closed; if/for/macro/... balanced with
 * their end tags; elif/else inside an if (else also in for); no unknown statement. 0, or -1 with
 * "line N: ..." in err. */
int chat_template_check(const char *s, size_t n, char *err, size_t errlen);
/* The renderer for a file: its tokenizer.chat_template (tmpl NULL: the file has none) when known, else the
 * family default. note gets one line (empty when there is nothing to say) naming tokenizer.chat_template
 * when the template is unknown or fails the structural check: both fall back, the file still loads (its
 * weights are fine; /v1/completions needs no template). */
chat_kind chat_pick(chat_family family, const char *tmpl, size_t n, char *note, size_t notelen);

typedef struct chat_opts {
    int add_generation_prompt;
    int enable_thinking;     /* Gemma 4's <|think|>, Qwen's open <think> (0: the empty think block); the templates
                              * read no reasoning_effort */
    const char *bos;         /* bos_token text the template starts with ("<bos>"), NULL for none */
} chat_opts;

/* a rendering: text, and where the template itself wrote control-token text (bos, <|turn>, <|"|>, ...);
 * everything else, conversation text included, is tokenized without special-token parsing */
typedef struct chat_span { size_t off, len; } chat_span;
typedef struct chat_text {
    char *text;              /* NUL-terminated */
    size_t len;
    chat_span *special;
    int n_special;
} chat_text;

/* messages: a JSON array; tools: anything (NULL = none), as the template's `tools`. Returns 0; -1 when the
 * template refuses the conversation (where jinja2 raises), with the reason in err; -2 out of memory. */
int  chat_render(chat_kind k, struct json_object *messages, struct json_object *tools, const chat_opts *o,
                 chat_text *out, char *err, size_t errlen);
void chat_text_free(chat_text *t);
/* Token ids of a rendering: each special span with special-token parsing, the text between them without
 * (so the ids equal llama.cpp's tokenization of the text whenever the conversation holds no control-token
 * text, and message text never becomes control tokens). *ids is malloc'd. Returns the count or -1. */
int  chat_tokenize(const chat_text *t, const tokenizer *tok, int32_t **ids);

#endif
