/* tokenizer_gguf.h — build a tokenizer from a GGUF file's tokenizer.ggml.* metadata.
 * tokenizer.ggml.model "llama" (SentencePiece) and "gemma4" (BPE; needs tokenizer.ggml.merges)
 * are accepted. Defaults for missing keys follow llama.cpp: "llama": bos 1, eos 2, unk 0,
 * add_bos true, add_space_prefix true; "gemma4": no default ids, add_bos forced true,
 * add_space_prefix false; both: no pad, add_eos false. No OpenCL here. */
#ifndef CLGEMMA_TOKENIZER_GGUF_H
#define CLGEMMA_TOKENIZER_GGUF_H

#include <stddef.h>

#include "gguf.h"
#include "tokenizer.h"

/* 0 on success; -1 with a one-line message in err otherwise. The tokenizer copies what it
 * needs, so f may be closed afterwards. */
int tokenizer_from_gguf(tokenizer **out, const gguf_file *f, char *err, size_t errlen);

#endif
