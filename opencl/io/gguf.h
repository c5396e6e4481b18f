/* gguf.h — read-only GGUF v2/v3 reader over an mmap'd file (or a caller's memory).
 *
 * Everything returned points into the mapping and lives until gguf_close().
 * Strings are length-delimited, NOT NUL-terminated. Numeric data may be unaligned:
 * read it with memcpy. The reader validates every count, length and offset
 * against the file size before use, so a hostile file gets an error, never a crash
 * or an unbounded allocation. No OpenCL here. */
#ifndef CLGEMMA_GGUF_H
#define CLGEMMA_GGUF_H

#include <stddef.h>
#include <stdint.h>

/* metadata value types (GGUF spec numbering) */
enum gguf_vtype {
    GGUF_VT_U8 = 0, GGUF_VT_I8 = 1, GGUF_VT_U16 = 2, GGUF_VT_I16 = 3,
    GGUF_VT_U32 = 4, GGUF_VT_I32 = 5, GGUF_VT_F32 = 6, GGUF_VT_BOOL = 7,
    GGUF_VT_STRING = 8, GGUF_VT_ARRAY = 9, GGUF_VT_U64 = 10, GGUF_VT_I64 = 11,
    GGUF_VT_F64 = 12
};

/* ggml tensor types (llama.cpp numbering) */
enum ggml_type {
    GGML_TYPE_F32 = 0, GGML_TYPE_F16 = 1, GGML_TYPE_Q4_0 = 2, GGML_TYPE_Q4_1 = 3,
    GGML_TYPE_Q5_0 = 6, GGML_TYPE_Q5_1 = 7, GGML_TYPE_Q8_0 = 8, GGML_TYPE_Q8_1 = 9,
    GGML_TYPE_Q2_K = 10, GGML_TYPE_Q3_K = 11, GGML_TYPE_Q4_K = 12, GGML_TYPE_Q5_K = 13,
    GGML_TYPE_Q6_K = 14, GGML_TYPE_Q8_K = 15, GGML_TYPE_IQ2_XXS = 16, GGML_TYPE_IQ2_XS = 17,
    GGML_TYPE_IQ3_XXS = 18, GGML_TYPE_IQ1_S = 19, GGML_TYPE_IQ4_NL = 20, GGML_TYPE_IQ3_S = 21,
    GGML_TYPE_IQ2_S = 22, GGML_TYPE_IQ4_XS = 23, GGML_TYPE_I8 = 24, GGML_TYPE_I16 = 25,
    GGML_TYPE_I32 = 26, GGML_TYPE_I64 = 27, GGML_TYPE_F64 = 28, GGML_TYPE_IQ1_M = 29,
    GGML_TYPE_BF16 = 30, GGML_TYPE_TQ1_0 = 34, GGML_TYPE_TQ2_0 = 35,
    GGML_TYPE_COUNT = 40
};

typedef struct gguf_str {
    const char *ptr; /* into the mapping; not NUL-terminated */
    uint64_t len;
} gguf_str;

typedef struct gguf_kv gguf_kv;
struct gguf_kv {
    gguf_str key;
    uint32_t type;          /* enum gguf_vtype */
    /* scalars (type != STRING/ARRAY): raw little-endian bytes of the value */
    const uint8_t *data;
    /* STRING: the value */
    gguf_str str;
    /* ARRAY: element type and count */
    uint32_t arr_type;      /* enum gguf_vtype of elements */
    uint64_t arr_n;
    /* ARRAY of numbers/bools: packed raw elements at `data` (arr_n * size) */
    /* ARRAY of STRING: parsed table of arr_n strings */
    const gguf_str *arr_strs;
    /* ARRAY of ARRAY: arr_n parsed sub-arrays (each a gguf_kv with empty key) */
    const gguf_kv *arr_sub;
};

#define GGUF_MAX_DIMS 4

typedef struct gguf_tensor {
    gguf_str name;
    uint32_t type;            /* enum ggml_type */
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS]; /* ne[0] is the contiguous (row) dimension; unused dims are 1 */
    uint64_t offset;          /* relative to the data section start */
    uint64_t nbytes;
    const void *data;         /* into the mapping */
} gguf_tensor;

typedef struct gguf_file gguf_file;

/* Open and fully validate. On error returns -1 and writes one line (no newline) into err. */
int  gguf_open(gguf_file **out, const char *path, char *err, size_t errlen);
/* Same over caller-owned memory (used by fuzzers and tests); memory must outlive the handle. */
int  gguf_open_memory(gguf_file **out, const void *data, size_t size, char *err, size_t errlen);
/* A header whose tensor data lies (in part) past the buffer: the data section is taken to be
 * virt_size bytes long for validation, and every tensor not wholly inside the buffer gets
 * data == NULL (its maker supplies the contents: synthetic benchmark models). */
int  gguf_open_virtual(gguf_file **out, const void *data, size_t size, uint64_t virt_size, char *err,
                       size_t errlen);
/* makes bytes [off, off + n) of a tensor that has no data (a virtual file's): its maker's, not gguf's */
typedef int (*gguf_bytes_fn)(const gguf_tensor *t, uint64_t off, size_t n, uint8_t *dst, char *err, size_t errlen);
void gguf_close(gguf_file *f);

uint32_t gguf_version(const gguf_file *f);
uint64_t gguf_alignment(const gguf_file *f);
size_t   gguf_file_size(const gguf_file *f);

size_t         gguf_kv_count(const gguf_file *f);
const gguf_kv *gguf_kv_at(const gguf_file *f, size_t i);
const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key);

/* Typed getters: 0 on success, -1 if missing, -2 if present with an incompatible type. */
int gguf_get_int(const gguf_file *f, const char *key, int64_t *out);   /* any integer or bool */
int gguf_get_float(const gguf_file *f, const char *key, double *out);  /* f32/f64 or integer */
int gguf_get_str(const gguf_file *f, const char *key, gguf_str *out);
/* numeric/bool array: element type, count and a pointer to packed raw elements */
int gguf_get_arr(const gguf_file *f, const char *key, uint32_t *elem_type, uint64_t *n, const void **data);
int gguf_get_str_arr(const gguf_file *f, const char *key, const gguf_str **strs, uint64_t *n);

size_t             gguf_tensor_count(const gguf_file *f);
const gguf_tensor *gguf_tensor_at(const gguf_file *f, size_t i);
const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name);

/* 1 if s equals the NUL-terminated c string */
int gguf_str_eq(gguf_str s, const char *c);

/* ggml type facts. Unknown types: block 0, size 0, name "unknown". */
const char *ggml_type_name(uint32_t type);
uint32_t    ggml_blck_size(uint32_t type);   /* elements per block */
uint32_t    ggml_type_size(uint32_t type);   /* bytes per block */
/* bytes of n elements of type (n must be a multiple of the block size); 0 on error */
uint64_t    ggml_row_bytes(uint32_t type, uint64_t n);

#endif
