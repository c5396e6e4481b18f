/* synth.h — synthetic Gemma 4 models of the real shapes, for benchmarks (bench --synthetic).
 *
 * synth_build writes the model description as a GGUF header in memory: the same metadata keys
 * and tensor names/shapes/types a converted checkpoint has (docs/GEMMA4.md §1–3), plus the data
 * of the small F32 vectors (norms = 1, scales, rope_freqs). The matrices get offsets past the end
 * of that buffer: opened with gguf_open_virtual they have data == NULL, and the loader
 * (models/gemma4.c) allocates them on the device, where the engine has synth_fill fill them. So the
 * synthetic model goes through the same loader and forward as a file, and no host copy of the
 * weights is ever made. */
#ifndef CLGEMMA_SYNTH_H
#define CLGEMMA_SYNTH_H

#include <stddef.h>
#include <stdint.h>

#include "gguf.h"
#include "runtime.h"

/* "gemma4-26b-a4b", "gemma4-31b", "gemma4-e4b", "gemma4-e2b" */
extern const char *const synth_models[];

/* one public shape (docs/GEMMA4.md §1; head dims 256 sliding / 512 full, vocabulary 262144):
 * full-attention layers are those with (il + 1) % full_every == 0, and always the last one */
typedef struct synth_spec {
    const char *name;
    uint32_t H, L, nh, nkv_swa, nkv_full, full_every, k_eq_v, ff, wide_shared;
    uint32_t n_exp, n_used, ff_exp, P, shared, window, ctx;
} synth_spec;

/* the shape called model (one of synth_models), or NULL */
const synth_spec *synth_spec_find(const char *model);

/* model: one of synth_models; type: "q4_k", "q8_0", "bf16" (matrices; with q4_k a row length that
 * is not a multiple of 256 falls back to Q5_0 as llama.cpp's quantizer does, with q8_0 one not a
 * multiple of 32 to F16); layers: 0 = the real count, else the first `layers` layers' pattern
 * (smaller test models; the last layer is made full and KV sharing scaled down).
 * On success *buf (malloc'd) holds *size bytes of GGUF, and *virt_size is the size the file would
 * have with all its data; name (>= 96 bytes) gets "synthetic <model> <type>". */
int synth_build(const char *model, const char *type, int layers, void **buf, size_t *size, uint64_t *virt_size,
                char *name, char *err, size_t errlen);

/* fills device buffer m (t->nbytes bytes) with valid random blocks of t's type, seeded by its name.
 * Types: F32, F16, BF16, Q8_0, Q5_0, Q4_K. Enqueued only (no wait). */
int synth_fill(cl_runtime *rt, cl_mem m, const gguf_tensor *t, char *err, size_t errlen);
/* the same bytes [off, off + n) of t made on the host, bit for bit (for tables the engine keeps in
 * host memory) */
int synth_bytes(const gguf_tensor *t, uint64_t off, size_t n, uint8_t *dst, char *err, size_t errlen);

#endif
