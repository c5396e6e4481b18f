/* synth_quant.h — what the GGUF writers of `clgemma synth` (synth_gguf.c: Gemma 4, synth_qwen35.c: Qwen
 * 3.5/3.6) share: the tensor record, llama_model_loader's tensor order, llama-quant.cpp's rules that do not
 * depend on the architecture, per-tensor seeds and the type summary. No OpenCL. */
#ifndef CLGEMMA_SYNTH_QUANT_H
#define CLGEMMA_SYNTH_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "gguf_write.h"
#include "synth_blocks.h" /* synth_name_seed */
#include "synth_gguf.h"

enum { SYNTH_CHUNK = 8u << 20 }; /* bytes of random blocks made per write */

typedef struct synth_tens {
    char name[48];
    uint32_t n_dims, type;
    uint64_t ne[3];
    uint64_t nbytes;
} synth_tens;

/* a type mix: llama-quantize's ftype, or the converter's outtype */
typedef struct synth_mix {
    const char *name;
    uint32_t ftype;     /* general.file_type (llama_ftype) */
    uint32_t base;      /* every quantizable weight, or the converter's outtype */
    uint32_t embd;      /* the output matrix, and the token tables tied to it (Gemma 4's per_layer_token_embd) */
    uint32_t more_bits; /* attn_v-like and ffn_down* where use_more_bits picks them */
    int quantized;      /* 1: llama-quantize of a bf16 convert; 0: convert_hf_to_gguf's own output */
} synth_mix;

/* the mix called name (one of synth_gguf_mixes), or NULL */
const synth_mix *synth_mix_find(const char *name);
/* the converter's first keys: general.architecture, general.type "model", general.name */
void synth_general_keys(gguf_writer *w, const char *arch, const char *name);
/* t named part ("blk.il.part" for a layer's, il >= 0), of n_dims dims [a, b, c], its type and size unset */
void synth_tens_set(synth_tens *t, uint32_t n_dims, uint64_t a, uint64_t b, uint64_t c, const char *part, int il);
/* llama-quant.cpp's tensor_type_fallback: type, or its fallback when ne0 is no whole number of its blocks */
uint32_t synth_fallback(uint32_t type, uint64_t ne0);
/* llama-quant.cpp: layers that get more bits in *_M mixes */
int synth_use_more_bits(int i, int n);
/* the N of "blk.N.", or -1 */
int synth_layer_of(const char *name);
/* qsort order of llama_model_loader's weight_name_comparer: layer (none first), then name */
int synth_tens_cmp(const void *x, const void *y);
/* "q4_K 361 (9.43 GiB), q6_K 61 (...)", largest first */
void synth_type_summary(const synth_tens *t, size_t n, char *out, size_t cap);

/* writes the data of model m's tensors, in table order, through buf (SYNTH_CHUNK bytes); sparse: holes */
typedef int synth_data_fn(gguf_writer *w, const void *m, uint64_t seed, int sparse, uint8_t *buf);
/* what follows the metadata in every writer: the tensor table t (each type checked to have random blocks),
 * the file at path, its data by data(m), info's tensor count, size and types; 0 or -1 with err */
int synth_finish(gguf_writer *w, synth_tens *t, size_t n, const char *path, synth_data_fn *data, const void *m,
                 const synth_gguf_opts *o, synth_gguf_info *info, char *err, size_t errlen);

#endif
