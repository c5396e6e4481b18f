/* synth_blocks.h — random but valid tensor data on the host, for synthetic GGUF files.
 *
 * Quantized blocks get random bytes everywhere except their f16 scale fields, which hold small
 * finite values chosen so the block's values span about ±amp (amp = sqrt(3 / row length) keeps a
 * product's output the size of its input, so activations stay finite through any depth). Float
 * tensors get values uniform in [lo, hi). Generation is seeded and deterministic. No OpenCL. */
#ifndef CLGEMMA_SYNTH_BLOCKS_H
#define CLGEMMA_SYNTH_BLOCKS_H

#include <stddef.h>
#include <stdint.h>

/* splitmix64: the state advances by one step per call */
uint64_t synth_rand(uint64_t *state);

/* a tensor's generator state from its name and the file's seed (FNV-1a of the name): each tensor's values
 * depend on nothing else, so a file's other tensors or their order never change them */
uint64_t synth_name_seed(const char *name, uint64_t seed);

/* 1 if synth_blocks can make blocks of this ggml type */
int synth_blocks_supported(uint32_t type);

/* n_blocks blocks (ggml_type_size(type) bytes each; one element per block for F32/F16/BF16) of
 * type at dst: quantized types spanning about ±amp, float types uniform in [lo, hi). */
void synth_blocks(uint32_t type, void *dst, size_t n_blocks, float amp, float lo, float hi, uint64_t *state);

/* the next nbytes of a GGUF being written (a whole tensor's data) as random blocks of type, as synth_blocks makes
 * them, generated cap bytes at a time in buf; 0, or -1 once the writer has failed (its sticky error says why) */
struct gguf_writer;
int synth_blocks_write(struct gguf_writer *w, uint32_t type, uint64_t nbytes, float amp, float lo, float hi,
                       uint64_t *state, uint8_t *buf, size_t cap);

/* IEEE half of f, rounded to nearest even (subnormals included) */
uint16_t synth_f16(float f);

#endif
