/* synth_gguf.h — `clgemma synth`: Gemma 4 GGUF files of the real shapes with random weights, laid
 * out as llama.cpp's convert_hf_to_gguf.py (bf16, f32) and llama-quantize (q4_k_m, q8_0, q4_k)
 * write them: llama.cpp's tensor names, shapes, metadata keys, value types and key order, the
 * tensor order and per-tensor types llama-quantize picks for the architecture without an imatrix,
 * and every tokenizer.* key copied from a vocabulary GGUF. The same file can then be run by
 * clgemma and by llama.cpp. Written in one streaming pass. */
#ifndef CLGEMMA_SYNTH_GGUF_H
#define CLGEMMA_SYNTH_GGUF_H

#include <stddef.h>
#include <stdint.h>

/* the four public shapes of synth.h, then small test shapes with the same structure:
 * "gemma4-tiny" (dense, K=V full layers), "gemma4-tiny-moe", "gemma4-tiny-e" (PLE, KV sharing); the Qwen 3.6
 * shapes of synth_qwen35.h */
extern const char *const synth_gguf_models[];
/* "q4_k_m", "q8_0", "q4_k" (llama-quantize --pure Q4_K_S), "bf16", "f32" (converter outtypes) */
extern const char *const synth_gguf_mixes[];

typedef struct synth_gguf_opts {
    const char *model;  /* one of synth_gguf_models */
    const char *mix;    /* one of synth_gguf_mixes */
    const char *vocab;  /* GGUF whose tokenizer.* keys are copied; its token count is the vocabulary */
    int layers;         /* 0 = the model's count; else the first `layers` of its pattern */
    uint64_t seed;
    int sparse;         /* header only, the data left a hole (for type checks: llama-quantize --dry-run) */
} synth_gguf_opts;

typedef struct synth_gguf_info {
    char name[96];       /* general.name */
    uint32_t n_layer, n_tensors;
    uint64_t file_bytes;
    double seconds;      /* wall time of the whole write */
    char types[320];     /* "q4_K 361 (9.43 GiB), q6_K 61 (...)", largest first */
} synth_gguf_info;

/* the embedding width of text model `model` (one of synth_gguf_models); 0 for any other name */
uint32_t synth_gguf_width(const char *model);

/* writes path; 0, or -1 with one line in err naming the option, key or file */
int synth_gguf_write(const synth_gguf_opts *o, const char *path, synth_gguf_info *info, char *err, size_t errlen);

#endif
