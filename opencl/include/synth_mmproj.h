/* synth_mmproj.h — `clgemma synth gemma4v-*`: Gemma 4 vision projector (mmproj) GGUF files of the reported
 * tower shapes with random weights, laid out as llama.cpp's `convert_hf_to_gguf.py --mmproj` writes them
 * (docs/design-vision.md 2.1-2.2): general.architecture clip, projector type gemma4v, the clip.vision.* keys in the
 * converter's order, the v.* and mm.* tensors in the checkpoint's name order, the converter's types (matrices of the
 * outtype, the patch kernel F16 at f16 and F32 otherwise, 1-D tensors, clamps and the position table F32). Each
 * shape names the `clgemma synth` text model it pairs with: that model's width is the projection's, so the two
 * files load together (clgemma --mmproj, llama.cpp -m ... --mmproj). The vision tower only: the E-series
 * checkpoints' files also carry the audio tower, which neither engine's vision path reads. Written in one
 * streaming pass. */
#ifndef CLGEMMA_SYNTH_MMPROJ_H
#define CLGEMMA_SYNTH_MMPROJ_H

#include "synth_gguf.h"

/* "gemma4v-e2b", "gemma4v-e4b", "gemma4v-26b-a4b", "gemma4v-31b" (the reported towers), then "gemma4v-tiny" and
 * "gemma4v-tiny-e" (a 96-wide tower of 2 layers, without and with clipped linears, for gemma4-tiny and
 * gemma4-tiny-e: tests) */
extern const char *const synth_mmproj_models[];
/* "f16" (the default: --outtype f16, as mmproj files are published), "bf16" (--outtype auto on the bf16
 * checkpoints: the patch kernel F32), "f32" */
extern const char *const synth_mmproj_mixes[];

/* 1 if model is one of synth_mmproj_models */
int synth_mmproj_known(const char *model);

/* writes path from o (model, mix: NULL = "f16", layers: 0 = the tower's count, seed, sparse; vocab unused);
 * 0, or -1 with one line in err naming the option or file (a partial file is removed) */
int synth_mmproj_write(const synth_gguf_opts *o, const char *path, synth_gguf_info *info, char *err, size_t errlen);

#endif
