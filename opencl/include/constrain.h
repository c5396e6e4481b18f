/* constrain.h — structured output: for one sequence, which tokens may come next so that the text
 * is one JSON value (json_object mode: any object; json_schema mode: a value valid against a JSON
 * Schema subset), or tool calls in Gemma 4's own syntax (tool_choice "required" or named).
 * Host side only; the caller applies the bit mask to the logits.
 *
 * Supported schema (draft 2020-12 subset, docs in opencl/constrain/schema.c): type (and type
 * arrays), properties, required, additionalProperties, enum, const, anyOf, oneOf (as anyOf),
 * $ref to #/$defs/.. or #/definitions/.. (recursion too), items, prefixItems, minItems, maxItems,
 * minLength, maxLength; annotations (title, description, default, examples, $schema, ...) are
 * ignored; anything else is refused with a message naming the keyword and its JSON pointer.
 * Output shape: properties in the schema's order, no whitespace except at most one space after
 * ':' and ','; nothing after the top-level value but end of generation. */
#ifndef CLGEMMA_CONSTRAIN_H
#define CLGEMMA_CONSTRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer.h"

typedef struct constraint_vocab constraint_vocab; /* per tokenizer, built once, read-only, shared by threads */
typedef struct constraint constraint;             /* one sequence's state */

/* the token byte strings (as the detokenizer appends them mid-text) in a trie; tok must outlive v */
int  constraint_vocab_create(constraint_vocab **out, const tokenizer *tok, char *err, size_t errlen);
void constraint_vocab_destroy(constraint_vocab *v);
uint32_t constraint_vocab_n(const constraint_vocab *v);

/* schema_json: a JSON Schema text (len bytes), or NULL for "any JSON object" (json_object mode).
 * Returns 0, or -1 with a message fit for an HTTP 400 that names the unsupported/invalid keyword
 * and its JSON pointer ("response_format.json_schema.schema: keyword 'patternProperties' at
 * /properties/a is not supported"). */
int  constraint_create_json(constraint **out, const constraint_vocab *v, const char *schema_json,
                            size_t len, char *err, size_t errlen);
/* tools_json: the OpenAI tools array ([{"type":"function","function":{"name","description",
 * "parameters"}}], len bytes). The output is tool calls as Gemma 4's chat template writes them:
 *     <|tool_call>call:NAME{key:VALUE,...}<tool_call|>
 * (<|tool_call>, <tool_call|> and <|"|> single tokens), then end of generation. NAME: one of the
 * functions, or only (tool_choice naming one; not in tools: an error); parallel 0: exactly one
 * call, 1: one to 8. The arguments follow the function's parameters schema (the subset above;
 * absent or {}: an object with any keys): strings <|"|>raw text<|"|> (no escapes; never holding
 * the text <|"|> or NUL), numbers as JSON, true/false/null, [..], {..} with bare keys, declared
 * keys in the template's dictsort order (lower-cased, ties in the schema's order), free keys of
 * [A-Za-z0-9_.-]{1,64}, no whitespace. Returns 0, or -1 with a 400-ready message naming the place
 * ("tools[2].function.parameters: keyword 'pattern' at /properties/x is not supported"); -1 too
 * when the vocabulary lacks the three control tokens (not a Gemma 4 model). */
int  constraint_create_tool_calls(constraint **out, const constraint_vocab *v, const char *tools_json,
                                  size_t len, const char *only, int parallel, char *err, size_t errlen);
void constraint_destroy(constraint *c);

/* n_vocab bits (bit i of word i/32 = token i may come next). End-of-generation tokens are allowed
 * exactly when the text so far is a complete value; once the top-level value has closed only they
 * are. Returns the count of allowed tokens (>= 1), or -1 when nothing is allowed: a bug, or the
 * sequence already ended with an accepted EOG. */
int  constraint_mask(constraint *c, uint32_t *bits);
/* advance by a chosen token; -1 if it was not allowed (state unchanged). An EOG token is accepted
 * when complete and ends the sequence (then nothing else is accepted). */
int  constraint_accept(constraint *c, int32_t token);
/* 1 when token may come next, without advancing: checks one sampled token without the whole mask */
int  constraint_allows(constraint *c, int32_t token);
/* advance by raw bytes (tests, forced prefixes); -1 if they are not a prefix of a valid value */
int  constraint_accept_bytes(constraint *c, const char *bytes, size_t n);
/* Reasoning models: the constrained output may follow one thought, from token open to token close
 * (Gemma 4's <|channel> ... <channel|>): the first token may be open as well as what the grammar allows;
 * after open every token but end of generation may come until close, then the grammar starts. Without
 * open first, the grammar starts at once. */
void constraint_allow_thought(constraint *c, int32_t open, int32_t close);
/* the output so far is one whole valid value (or whole tool calls) */
int  constraint_complete(const constraint *c);

/* A step's masks on several threads: `threads` helpers beside the caller (0: the caller alone).
 * constraint_pool_masks computes counts[i] = constraint_mask(c[i], bits[i]) for i < n, the c[i]
 * distinct; one batch at a time (the engine thread's). */
typedef struct constraint_pool constraint_pool;
int  constraint_pool_create(constraint_pool **out, int threads, char *err, size_t errlen);
void constraint_pool_destroy(constraint_pool *p);
void constraint_pool_masks(constraint_pool *p, constraint *const *c, uint32_t *const *bits, int *counts, int n);

#endif
