/* tokenizer_gguf.h — build a tokenizer from a GGUF file's tokenizer.ggml.* metadata.
 * Only SentencePiece vocabularies (tokenizer.ggml.model = "llama") are accepted. Defaults for
 * missing keys follow llama.cpp: bos 1, eos 2, unk 0, no pad, add_bos true, add_eos false,
 * add_space_prefix true. No OpenCL here. */
#ifndef CLGEMMA_TOKENIZER_GGUF_H
#define CLGEMMA_TOKENIZER_GGUF_H

#include <stddef.h>

#include "gguf.h"
#include "tokenizer.h"

/* 0 on success; -1 with a one-line message in err otherwise. The tokenizer copies what it
 * needs, so f may be closed afterwards. */
int tokenizer_from_gguf(tokenizer **out, const gguf_file *f, char *err, size_t errlen);

#endif
