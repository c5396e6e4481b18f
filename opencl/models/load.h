/* load.h — what the architecture files share: their GGUF keys, tensors found, checked and uploaded,
 * RoPE frequency tables, the release of a layer's weights, and the logits that end every forward.
 * Only architecture files include it; the engine sees model.h. */
#ifndef CLGEMMA_LOAD_H
#define CLGEMMA_LOAD_H

#include "model.h"

/* ---- metadata: the key "<arch>.<name>" ------------------------------------------------------ */

/* an integer 0 .. 2^31 - 1; missing and not required: 0 with *out untouched */
int key_int(const gguf_file *f, const char *arch, const char *name, int64_t *out, int required, char *err,
            size_t errlen);
int key_u32(const gguf_file *f, const char *arch, const char *name, uint32_t *out, int required, char *err,
            size_t errlen);
/* optional: missing keeps *out */
int key_f32(const gguf_file *f, const char *arch, const char *name, float *out, char *err, size_t errlen);
/* a scalar (broadcast to every layer) or an array of n_layer numbers/bools; missing and not required:
 * def for every layer */
int key_per_layer(const gguf_file *f, const char *arch, const char *name, uint32_t n_layer, uint32_t *out,
                  int required, int64_t def, char *err, size_t errlen);

/* ---- tensors -------------------------------------------------------------------------------- */

/* finds a tensor and checks its shape [ne0, ne1, ne2]; vec: must be F32 (norms, scales), else a
 * matrix of a type the ops take */
int tensor_find(const gguf_file *f, const char *name, uint64_t ne0, uint64_t ne1, uint64_t ne2, int vec,
                const gguf_tensor **out, char *err, size_t errlen);
/* t to a new device buffer *m (a tensor without data in the file: made there by src->make);
 * *bytes grows by its size */
int tensor_upload(const model_src *src, const gguf_tensor *t, const char *name, cl_mem *m, uint64_t *bytes,
                  char *err, size_t errlen);
/* 0 if the loader can read t's contents itself (small F32 tensors) */
int tensor_host(const gguf_tensor *t, const char *name, char *err, size_t errlen);
/* find + upload: a matrix of ne2 stacked [ne1 rows][ne0 cols] slices; an F32 vector of n */
int load_mat(const model_src *src, const char *name, uint64_t ne0, uint64_t ne1, uint64_t ne2, weight *w,
             uint64_t *bytes, char *err, size_t errlen);
int load_vec(const model_src *src, const char *name, uint64_t n, cl_mem *m, uint64_t *bytes, char *err,
             size_t errlen);
/* w's rows (F16 or F32) re-laid mult values long (cols rounded up), zeros past the file's, so that the
 * tensor-core products, which take whole 32-value units, run it; X must then carry zeros there too. Call after
 * the upload finished (it copies on the device: synthetic weights have no host copy); *bytes grows by the
 * difference */
int weight_pad_cols(cl_runtime *rt, weight *w, uint32_t mult, uint64_t *bytes, char *err, size_t errlen);

/* the weights every Gemma 4 decoder layer (target or MTP drafter) has: Q and its head norm, O, the MLP and the
 * four block norms of layer l (H wide, qd = heads x hd, n_ff MLP) */
int load_g4_block(const model_src *src, uint32_t l, uint32_t H, uint32_t qd, uint32_t hd, uint32_t n_ff,
                  layer_weights *W, uint64_t *bytes, char *err, size_t errlen);
/* blk.l.layer_output_scale.weight, a scalar; 1 where the file has none */
int load_layer_scalar(const model_src *src, uint32_t l, float *out, char *err, size_t errlen);

/* RoPE frequency per rotated pair: scale * base^(-2i/rot), divided by div[i] where div is given */
cl_mem rope_freqs(cl_runtime *rt, uint32_t rot, double base, double scale, const float *div, char *err,
                  size_t errlen);

void mem_release(cl_mem *m);                    /* releases *m if set and clears it */
void layer_weights_release(layer_weights *W);

/* ---- forward -------------------------------------------------------------------------------- */

/* the logits of the out rows: final norm, output head, final soft-capping */
int fwd_logits(const model *m, ops *o, fwd_bufs *b, const fwd_args *a);

#endif
