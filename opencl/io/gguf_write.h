/* gguf_write.h — streaming GGUF v3 writer.
 *
 * Metadata and the tensor table are collected first (in the order given: that is the file's
 * order), then gguf_w_open writes the header and each tensor's bytes follow in table order
 * through one large buffer, so a model of any size is written without holding it in memory.
 * Tensor offsets follow one another, each padded to the alignment, as ggml and gguf-py lay them
 * out. Errors are sticky: after the first failure every call does nothing, and gguf_w_close
 * reports that first failure. No OpenCL here. */
#ifndef CLGEMMA_GGUF_WRITE_H
#define CLGEMMA_GGUF_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

typedef struct gguf_writer gguf_writer;

/* alignment: 0 = GGUF's default of 32 (then no general.alignment key is needed). NULL: no memory. */
gguf_writer *gguf_writer_create(uint32_t alignment);
/* frees everything; a file still open is closed as it is (call gguf_w_close to finish it) */
void gguf_writer_destroy(gguf_writer *w);

/* metadata pairs */
void gguf_w_u32(gguf_writer *w, const char *key, uint32_t v);
void gguf_w_f32(gguf_writer *w, const char *key, float v);
void gguf_w_bool(gguf_writer *w, const char *key, int v);
void gguf_w_str(gguf_writer *w, const char *key, const char *v);
/* array of n numbers or bools of elem_type, packed little-endian at elems */
void gguf_w_arr(gguf_writer *w, const char *key, uint32_t elem_type, const void *elems, uint64_t n);
/* a copy of a pair read by gguf.h (any type, string and nested arrays included) */
void gguf_w_kv(gguf_writer *w, const gguf_kv *kv);

/* one tensor of the table; ne[0] is the row length. Returns its data size in bytes (0 on error). */
uint64_t gguf_w_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims, const uint64_t *ne);

/* creates path and writes the header; then gguf_w_write the data */
int gguf_w_open(gguf_writer *w, const char *path);
/* the next n bytes of tensor data, in table order (any split across calls); the padding between
 * tensors is the writer's. data NULL: leave the n bytes a hole (sparse file, reads as zeros). */
int gguf_w_write(gguf_writer *w, const void *data, size_t n);
/* bytes of the whole file once complete (header, data and padding) */
uint64_t gguf_w_file_size(const gguf_writer *w);
/* checks every tensor got its bytes, pads, closes. 0, or -1 with the first error in err. */
int gguf_w_close(gguf_writer *w, char *err, size_t errlen);

#endif
