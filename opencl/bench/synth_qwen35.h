/* synth_qwen35.h — `clgemma synth qwen35-27b|qwen35-35b-a3b`: Qwen 3.6 GGUF files of the reported shapes
 * (docs/design-qwen35.md 0) with random weights, in llama.cpp's qwen35 / qwen35moe layout (design 2): the
 * converter's keys, names and shapes with its MTP block, llama-quantize's type mix, and the vocabulary of
 * the given GGUF padded with unused tokens to the real 248,320 (design 8). */
#ifndef CLGEMMA_SYNTH_QWEN35_H
#define CLGEMMA_SYNTH_QWEN35_H

#include <stddef.h>

#include "synth_gguf.h"

/* 1 if model names one of this file's shapes */
int synth_qwen35_model(const char *model);
/* synth_gguf_write for those shapes */
int synth_qwen35_write(const synth_gguf_opts *o, const char *path, synth_gguf_info *info, char *err, size_t errlen);

#endif
