/* gguf.c — GGUF v2/v3 reader. See gguf.h for the contract.
 *
 * Threat model: the file is hostile. Every count, length and offset is checked against
 * the bytes that remain before it is used, and every allocation is bounded by those bytes
 * (each element we allocate for costs a known minimum number of file bytes), so a small
 * file can never make us allocate much more than a small multiple of its own size.
 *
 * Ownership: gguf_file owns the kv array, the tensor array, the two hash indexes and, per
 * kv, the string tables of string arrays and the sub-kv arrays of nested arrays (freed by
 * walking the kv tree). All strings and numeric data point into the mapping/caller memory.
 */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GGUF_DEFAULT_ALIGNMENT 32
/* Nesting depth for arrays of arrays. Real files never nest; the limit only keeps the
 * recursion (parse and free) bounded for hostile input. */
#define GGUF_MAX_ARRAY_DEPTH 8

/* Minimum file bytes that one element costs; used to bound counts before allocating. */
#define MIN_KV_BYTES      (8 + 4 + 1)     /* key length, value type, smallest value (u8) */
#define MIN_STR_BYTES     8               /* length prefix of an empty string */
#define MIN_SUBARR_BYTES  (4 + 8)         /* element type + count of an empty array */
#define MIN_TENSOR_BYTES  (8 + 4 + 4 + 8) /* name length, n_dims (0 dims), type, offset */

/* ---------------------------------------------------------------- ggml type table */

typedef struct type_info {
    const char *name;
    uint32_t blck;  /* elements per block; 0 = unknown/removed type */
    uint32_t size;  /* bytes per block */
} type_info;

/* llama.cpp numbering and block layouts (ggml/src/ggml-common.h, ggml.c type_traits).
 * Gaps (4, 5, 31-33, 36-38) are types removed from the GGUF format: reject them. */
static const type_info TYPES[GGML_TYPE_COUNT] = {
    [GGML_TYPE_F32]     = {"f32",       1,   4},
    [GGML_TYPE_F16]     = {"f16",       1,   2},
    [GGML_TYPE_Q4_0]    = {"q4_0",     32,  18},
    [GGML_TYPE_Q4_1]    = {"q4_1",     32,  20},
    [GGML_TYPE_Q5_0]    = {"q5_0",     32,  22},
    [GGML_TYPE_Q5_1]    = {"q5_1",     32,  24},
    [GGML_TYPE_Q8_0]    = {"q8_0",     32,  34},
    [GGML_TYPE_Q8_1]    = {"q8_1",     32,  36},
    [GGML_TYPE_Q2_K]    = {"q2_K",    256,  84},
    [GGML_TYPE_Q3_K]    = {"q3_K",    256, 110},
    [GGML_TYPE_Q4_K]    = {"q4_K",    256, 144},
    [GGML_TYPE_Q5_K]    = {"q5_K",    256, 176},
    [GGML_TYPE_Q6_K]    = {"q6_K",    256, 210},
    [GGML_TYPE_Q8_K]    = {"q8_K",    256, 292},
    [GGML_TYPE_IQ2_XXS] = {"iq2_xxs", 256,  66},
    [GGML_TYPE_IQ2_XS]  = {"iq2_xs",  256,  74},
    [GGML_TYPE_IQ3_XXS] = {"iq3_xxs", 256,  98},
    [GGML_TYPE_IQ1_S]   = {"iq1_s",   256,  50},
    [GGML_TYPE_IQ4_NL]  = {"iq4_nl",   32,  18},
    [GGML_TYPE_IQ3_S]   = {"iq3_s",   256, 110},
    [GGML_TYPE_IQ2_S]   = {"iq2_s",   256,  82},
    [GGML_TYPE_IQ4_XS]  = {"iq4_xs",  256, 136},
    [GGML_TYPE_I8]      = {"i8",        1,   1},
    [GGML_TYPE_I16]     = {"i16",       1,   2},
    [GGML_TYPE_I32]     = {"i32",       1,   4},
    [GGML_TYPE_I64]     = {"i64",       1,   8},
    [GGML_TYPE_F64]     = {"f64",       1,   8},
    [GGML_TYPE_IQ1_M]   = {"iq1_m",   256,  56},
    [GGML_TYPE_BF16]    = {"bf16",      1,   2},
    [GGML_TYPE_TQ1_0]   = {"tq1_0",   256,  54},
    [GGML_TYPE_TQ2_0]   = {"tq2_0",   256,  66},
    /* MXFP4 (gpt-oss): not in our enum, but it is type 39 upstream and within
     * GGML_TYPE_COUNT, so describe it correctly rather than calling it unknown. */
    [39]                = {"mxfp4",    32,  17},
};

const char *ggml_type_name(uint32_t type) {
    return type < GGML_TYPE_COUNT && TYPES[type].blck ? TYPES[type].name : "unknown";
}

uint32_t ggml_blck_size(uint32_t type) {
    return type < GGML_TYPE_COUNT ? TYPES[type].blck : 0;
}

uint32_t ggml_type_size(uint32_t type) {
    return type < GGML_TYPE_COUNT && TYPES[type].blck ? TYPES[type].size : 0;
}

uint64_t ggml_row_bytes(uint32_t type, uint64_t n) {
    uint32_t blck = ggml_blck_size(type);
    if (!blck || n % blck) return 0;
    uint64_t blocks = n / blck, size = TYPES[type].size;
    if (blocks > UINT64_MAX / size) return 0;
    return blocks * size;
}

/* ---------------------------------------------------------------- file object */

struct gguf_file {
    const uint8_t *base;
    size_t size;
    int mapped;             /* 1: base is our mmap, unmapped in gguf_close */
    uint32_t version;
    uint64_t alignment;
    uint64_t data_off;      /* absolute offset of the data section */
    uint64_t virt_size;     /* > size: tensor data may extend up to here (data NULL past size) */

    size_t n_kv;
    gguf_kv *kvs;
    size_t n_tensors;
    gguf_tensor *tensors;

    /* open-addressing hash indexes: slot holds index+1, 0 = empty; capacity is 2^k */
    size_t *kv_slots;
    size_t kv_cap;
    size_t *t_slots;
    size_t t_cap;
};

/* ---------------------------------------------------------------- reader */

typedef struct reader {
    const uint8_t *base;
    size_t size;
    size_t pos;
    char *err;
    size_t errlen;
} reader;

static void fail(reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(reader *r, const char *fmt, ...) {
    if (!r->err || !r->errlen) return;
    int n = snprintf(r->err, r->errlen, "gguf: ");
    if (n < 0 || (size_t)n >= r->errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err + n, r->errlen - (size_t)n, fmt, ap);
    va_end(ap);
}

static size_t remaining(const reader *r) { return r->size - r->pos; }

/* Printable rendering of a file string for error messages: hostile names may hold
 * control bytes or be megabytes long, and err must stay one readable line. */
typedef struct name_buf { char s[80]; } name_buf;

static name_buf show(gguf_str str) {
    static const char hex[] = "0123456789abcdef";
    name_buf b;
    size_t o = 0;
    for (uint64_t i = 0; i < str.len; i++) {
        unsigned char c = (unsigned char)str.ptr[i];
        if (o + 8 >= sizeof b.s) { memcpy(b.s + o, "...", 4); return b; }
        if (c >= 0x20 && c < 0x7f && c != '\\') {
            b.s[o++] = (char)c;
        } else {
            b.s[o++] = '\\'; b.s[o++] = 'x';
            b.s[o++] = hex[c >> 4]; b.s[o++] = hex[c & 15];
        }
    }
    b.s[o] = 0;
    return b;
}

/* "'name': " for messages about a named kv/tensor, "" when there is no name yet */
static name_buf where(gguf_str ctx) {
    name_buf b;
    if (!ctx.ptr) { b.s[0] = 0; return b; }
    name_buf n = show(ctx);
    snprintf(b.s, sizeof b.s, "'%.72s': ", n.s);
    return b;
}

static const gguf_str NO_NAME = {NULL, 0};

static int rd_u32(reader *r, uint32_t *v, const char *what, gguf_str ctx) {
    if (remaining(r) < 4) {
        fail(r, "%s%s at offset %zu lies past the end of the file (size %zu)",
             where(ctx).s, what, r->pos, r->size);
        return -1;
    }
    memcpy(v, r->base + r->pos, 4);
    r->pos += 4;
    return 0;
}

static int rd_u64(reader *r, uint64_t *v, const char *what, gguf_str ctx) {
    if (remaining(r) < 8) {
        fail(r, "%s%s at offset %zu lies past the end of the file (size %zu)",
             where(ctx).s, what, r->pos, r->size);
        return -1;
    }
    memcpy(v, r->base + r->pos, 8);
    r->pos += 8;
    return 0;
}

static int rd_str(reader *r, gguf_str *s, const char *what, gguf_str ctx) {
    uint64_t len;
    size_t at = r->pos;
    if (rd_u64(r, &len, what, ctx)) return -1;
    if (len > remaining(r)) {
        fail(r, "%s%s of %llu bytes at offset %zu runs past the end of the file (size %zu)",
             where(ctx).s, what, (unsigned long long)len, at, r->size);
        return -1;
    }
    s->ptr = (const char *)r->base + r->pos;
    s->len = len;
    r->pos += (size_t)len;
    return 0;
}

/* bytes of one scalar value; 0 for STRING/ARRAY/unknown */
static size_t scalar_size(uint32_t t) {
    switch (t) {
    case GGUF_VT_U8: case GGUF_VT_I8: case GGUF_VT_BOOL: return 1;
    case GGUF_VT_U16: case GGUF_VT_I16: return 2;
    case GGUF_VT_U32: case GGUF_VT_I32: case GGUF_VT_F32: return 4;
    case GGUF_VT_U64: case GGUF_VT_I64: case GGUF_VT_F64: return 8;
    default: return 0;
    }
}

static const char *vtype_name(uint32_t t) {
    static const char *names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool",
                                  "string", "array", "u64", "i64", "f64"};
    return t <= GGUF_VT_F64 ? names[t] : "unknown";
}

static int scalar_int(uint32_t type, const uint8_t *p, int64_t *out);

static void free_kv_tree(gguf_kv *kv) {
    if (kv->type != GGUF_VT_ARRAY) return;
    if (kv->arr_type == GGUF_VT_STRING) {
        free((void *)kv->arr_strs);
    } else if (kv->arr_type == GGUF_VT_ARRAY && kv->arr_sub) {
        gguf_kv *sub = (gguf_kv *)kv->arr_sub;
        for (uint64_t i = 0; i < kv->arr_n; i++) free_kv_tree(&sub[i]);
        free(sub);
    }
    kv->arr_strs = NULL;
    kv->arr_sub = NULL;
}

/* Parses the body of an array (element type, count, elements) into kv, which already has
 * type ARRAY. kv->arr_n is only set once the matching table is allocated, so a failure at
 * any point leaves a tree free_kv_tree can release. */
static int parse_array(reader *r, gguf_kv *kv, int depth, gguf_str ctx) {
    uint32_t et;
    uint64_t n;
    size_t at = r->pos;
    if (rd_u32(r, &et, "array element type", ctx)) return -1;
    if (et > GGUF_VT_F64) {
        fail(r, "'%s': unknown array element type %u at offset %zu", show(ctx).s, et, at);
        return -1;
    }
    if (et == GGUF_VT_ARRAY && depth + 1 >= GGUF_MAX_ARRAY_DEPTH) {
        fail(r, "'%s': arrays nested deeper than %d levels at offset %zu",
             show(ctx).s, GGUF_MAX_ARRAY_DEPTH, at);
        return -1;
    }
    kv->arr_type = et;
    at = r->pos;
    if (rd_u64(r, &n, "array length", ctx)) return -1;

    size_t min = et == GGUF_VT_STRING ? MIN_STR_BYTES
               : et == GGUF_VT_ARRAY  ? MIN_SUBARR_BYTES : scalar_size(et);
    if (n > remaining(r) / min) {
        fail(r, "'%s': array of %llu %s at offset %zu needs at least %llu bytes but only %zu remain "
             "(file size %zu)", show(ctx).s, (unsigned long long)n, vtype_name(et), at,
             n > UINT64_MAX / min ? (unsigned long long)UINT64_MAX : (unsigned long long)(n * min),
             remaining(r), r->size);
        return -1;
    }

    if (et != GGUF_VT_STRING && et != GGUF_VT_ARRAY) {
        kv->data = r->base + r->pos;
        kv->arr_n = n;
        r->pos += (size_t)n * min;
        return 0;
    }
    if (n == 0) return 0;

    if (et == GGUF_VT_STRING) {
        gguf_str *strs = malloc((size_t)n * sizeof *strs);
        if (!strs) { fail(r, "'%s': out of memory for %llu strings", show(ctx).s, (unsigned long long)n); return -1; }
        kv->arr_strs = strs;
        kv->arr_n = n;
        for (uint64_t i = 0; i < n; i++)
            if (rd_str(r, &strs[i], "array string", ctx)) return -1;
        return 0;
    }

    gguf_kv *sub = calloc((size_t)n, sizeof *sub);
    if (!sub) { fail(r, "'%s': out of memory for %llu sub-arrays", show(ctx).s, (unsigned long long)n); return -1; }
    kv->arr_sub = sub;
    kv->arr_n = n;
    for (uint64_t i = 0; i < n; i++) {
        sub[i].key.ptr = "";
        sub[i].type = GGUF_VT_ARRAY;
        if (parse_array(r, &sub[i], depth + 1, ctx)) return -1;
    }
    return 0;
}

static int parse_kv(reader *r, gguf_kv *kv, size_t idx) {
    char what[48];
    snprintf(what, sizeof what, "key of kv #%zu", idx);
    size_t at = r->pos;
    if (rd_str(r, &kv->key, what, NO_NAME)) return -1;
    if (memchr(kv->key.ptr, 0, (size_t)kv->key.len)) {
        fail(r, "kv #%zu key '%s' at offset %zu contains a NUL byte", idx, show(kv->key).s, at);
        return -1;
    }
    uint32_t t;
    at = r->pos;
    if (rd_u32(r, &t, "value type", kv->key)) return -1;
    if (t > GGUF_VT_F64) {
        fail(r, "'%s': unknown value type %u at offset %zu", show(kv->key).s, t, at);
        return -1;
    }
    kv->type = t;
    if (t == GGUF_VT_STRING) return rd_str(r, &kv->str, "string value", kv->key);
    if (t == GGUF_VT_ARRAY) return parse_array(r, kv, 0, kv->key);
    size_t sz = scalar_size(t);
    if (remaining(r) < sz) {
        fail(r, "'%s': %s value at offset %zu lies past the end of the file (size %zu)",
             show(kv->key).s, vtype_name(t), r->pos, r->size);
        return -1;
    }
    kv->data = r->base + r->pos;
    r->pos += sz;
    return 0;
}

/* ---------------------------------------------------------------- hash index */

static uint64_t hash_bytes(const char *p, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a: simple, good enough for names */
    for (size_t i = 0; i < n; i++) { h ^= (unsigned char)p[i]; h *= 1099511628211ull; }
    return h;
}

/* capacity: power of two at least 2n, so probes stay short */
static size_t *index_alloc(size_t n, size_t *cap) {
    size_t c = 8;
    while (c < 2 * n) c *= 2;
    *cap = c;
    return calloc(c, sizeof(size_t));
}

typedef const gguf_str *(*name_of_fn)(const void *items, size_t i);
static const gguf_str *kv_name(const void *items, size_t i) { return &((const gguf_kv *)items)[i].key; }
static const gguf_str *t_name(const void *items, size_t i) { return &((const gguf_tensor *)items)[i].name; }

/* Returns the index of an item with that name, or SIZE_MAX. */
static size_t index_find(const size_t *slots, size_t cap, const void *items, name_of_fn name_of,
                         const char *p, size_t n) {
    if (!slots) return SIZE_MAX;
    for (size_t s = hash_bytes(p, n) & (cap - 1);; s = (s + 1) & (cap - 1)) {
        if (!slots[s]) return SIZE_MAX;
        const gguf_str *k = name_of(items, slots[s] - 1);
        if (k->len == n && memcmp(k->ptr, p, n) == 0) return slots[s] - 1;
    }
}

/* Inserts item i; returns the index of an existing item with the same name, or SIZE_MAX. */
static size_t index_insert(size_t *slots, size_t cap, const void *items, name_of_fn name_of, size_t i) {
    const gguf_str *k = name_of(items, i);
    size_t s = hash_bytes(k->ptr, (size_t)k->len) & (cap - 1);
    for (;; s = (s + 1) & (cap - 1)) {
        if (!slots[s]) { slots[s] = i + 1; return SIZE_MAX; }
        const gguf_str *o = name_of(items, slots[s] - 1);
        if (o->len == k->len && memcmp(o->ptr, k->ptr, (size_t)k->len) == 0) return slots[s] - 1;
    }
}

/* ---------------------------------------------------------------- tensors */

static int parse_tensor_info(reader *r, gguf_tensor *t, size_t idx) {
    char what[48];
    snprintf(what, sizeof what, "name of tensor #%zu", idx);
    size_t at = r->pos;
    if (rd_str(r, &t->name, what, NO_NAME)) return -1;
    if (memchr(t->name.ptr, 0, (size_t)t->name.len)) {
        fail(r, "tensor #%zu name '%s' at offset %zu contains a NUL byte", idx, show(t->name).s, at);
        return -1;
    }
    at = r->pos;
    if (rd_u32(r, &t->n_dims, "tensor n_dims", t->name)) return -1;
    if (t->n_dims > GGUF_MAX_DIMS) {
        fail(r, "tensor '%s': n_dims %u at offset %zu exceeds %d",
             show(t->name).s, t->n_dims, at, GGUF_MAX_DIMS);
        return -1;
    }
    for (int d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        at = r->pos;
        if (rd_u64(r, &t->ne[d], "tensor dimension", t->name)) return -1;
        /* the engine does signed index arithmetic (as ggml does), so stay within int64 */
        if (t->ne[d] > (uint64_t)INT64_MAX) {
            fail(r, "tensor '%s': ne[%u] = %llu at offset %zu is out of range",
                 show(t->name).s, d, (unsigned long long)t->ne[d], at);
            return -1;
        }
    }
    if (rd_u32(r, &t->type, "tensor type", t->name)) return -1;
    if (rd_u64(r, &t->offset, "tensor data offset", t->name)) return -1;
    return 0;
}

/* Checks everything about one tensor except overlap; fills nbytes and data. */
static int check_tensor(reader *r, const gguf_file *f, gguf_tensor *t) {
    name_buf nm = show(t->name);
    uint32_t blck = ggml_blck_size(t->type);
    if (!blck) {
        fail(r, "tensor '%s' has unknown ggml type %u", nm.s, t->type);
        return -1;
    }
    uint64_t nel = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) {
        if (t->ne[d] && nel > (uint64_t)INT64_MAX / t->ne[d]) {
            fail(r, "tensor '%s' element count %llu x %llu x %llu x %llu overflows int64", nm.s,
                 (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
                 (unsigned long long)t->ne[2], (unsigned long long)t->ne[3]);
            return -1;
        }
        nel *= t->ne[d];
    }
    if (t->ne[0] % blck) {
        fail(r, "tensor '%s' ne[0] = %llu is not a multiple of the %s block size %u",
             nm.s, (unsigned long long)t->ne[0], ggml_type_name(t->type), blck);
        return -1;
    }
    /* An element count within int64 can still be up to 8x that in bytes (f64, i64). */
    uint64_t nb = t->ne[0] / blck, bsize = ggml_type_size(t->type);
    int over = nb > UINT64_MAX / bsize;
    nb *= bsize;
    for (int d = 1; d < GGUF_MAX_DIMS && !over; d++) {
        over = t->ne[d] && nb > UINT64_MAX / t->ne[d];
        nb *= t->ne[d];
    }
    if (over) {
        fail(r, "tensor '%s' byte size (%llu x %llu x %llu x %llu of %s) overflows 64 bits", nm.s,
             (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
             (unsigned long long)t->ne[2], (unsigned long long)t->ne[3], ggml_type_name(t->type));
        return -1;
    }
    t->nbytes = nb;
    if (t->offset % f->alignment) {
        fail(r, "tensor '%s' data offset %llu is not a multiple of the alignment %llu",
             nm.s, (unsigned long long)t->offset, (unsigned long long)f->alignment);
        return -1;
    }
    uint64_t avail = (f->virt_size > f->size ? f->virt_size : f->size) - f->data_off;
    if (t->offset > avail || nb > avail - t->offset) {
        unsigned long long s = (unsigned long long)f->data_off + t->offset;
        unsigned long long e = s + nb;
        if (s < t->offset || e < s) /* wrapped: show the relative values instead */
            fail(r, "tensor '%s' data offset %llu + %llu bytes lies past the end of the file (size %zu)",
                 nm.s, (unsigned long long)t->offset, (unsigned long long)nb, f->size);
        else
            fail(r, "tensor '%s' data [%llu..%llu) lies past the end of the file (size %zu)",
                 nm.s, s, e, f->size);
        return -1;
    }
    /* virtual tensors (gguf_open_virtual): bytes past the buffer are made elsewhere */
    int in_buf = t->offset <= f->size - f->data_off && nb <= f->size - f->data_off - t->offset;
    t->data = in_buf ? f->base + f->data_off + t->offset : NULL;
    return 0;
}

typedef struct span { uint64_t off, end; size_t idx; } span;

static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    if (x->off != y->off) return x->off < y->off ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static int check_overlap(reader *r, const gguf_file *f) {
    size_t n = f->n_tensors, m = 0;
    if (n < 2) return 0;
    span *s = malloc(n * sizeof *s);
    if (!s) { fail(r, "out of memory sorting %zu tensors", n); return -1; }
    /* empty tensors occupy no bytes and so cannot overlap anything */
    for (size_t i = 0; i < n; i++)
        if (f->tensors[i].nbytes)
            s[m++] = (span){f->tensors[i].offset, f->tensors[i].offset + f->tensors[i].nbytes, i};
    qsort(s, m, sizeof *s, cmp_span);
    /* sorted by start, the spans are disjoint iff each starts at or after the previous end
     * (the previous one reaches furthest so far, or an overlap would already be reported) */
    int rc = 0;
    for (size_t k = 1; k < m; k++) {
        if (s[k].off < s[k - 1].end) {
            const gguf_tensor *a = &f->tensors[s[k].idx], *b = &f->tensors[s[k - 1].idx];
            fail(r, "tensor '%s' data [%llu..%llu) overlaps tensor '%s' data [%llu..%llu) "
                 "(offsets relative to the data section)",
                 show(a->name).s, (unsigned long long)s[k].off, (unsigned long long)s[k].end,
                 show(b->name).s, (unsigned long long)s[k - 1].off, (unsigned long long)s[k - 1].end);
            rc = -1;
            break;
        }
    }
    free(s);
    return rc;
}

/* ---------------------------------------------------------------- open / close */

void gguf_close(gguf_file *f) {
    if (!f) return;
    for (size_t i = 0; i < f->n_kv; i++) free_kv_tree(&f->kvs[i]);
    free(f->kvs);
    free(f->tensors);
    free(f->kv_slots);
    free(f->t_slots);
    if (f->mapped) munmap((void *)f->base, f->size);
    free(f);
}

static int read_alignment(reader *r, gguf_file *f) {
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    const gguf_kv *kv = gguf_find_kv(f, "general.alignment");
    if (!kv) return 0;
    uint64_t v = 0;
    switch (kv->type) { /* the spec says u32; accept any integer width a writer might pick */
    case GGUF_VT_U8:  { uint8_t x;  memcpy(&x, kv->data, 1); v = x; break; }
    case GGUF_VT_U16: { uint16_t x; memcpy(&x, kv->data, 2); v = x; break; }
    case GGUF_VT_U32: { uint32_t x; memcpy(&x, kv->data, 4); v = x; break; }
    case GGUF_VT_U64: memcpy(&v, kv->data, 8); break;
    case GGUF_VT_I8: case GGUF_VT_I16: case GGUF_VT_I32: case GGUF_VT_I64: {
        int64_t x;
        scalar_int(kv->type, kv->data, &x);
        if (x < 0) {
            fail(r, "general.alignment = %lld is not a nonzero power of two", (long long)x);
            return -1;
        }
        v = (uint64_t)x;
        break;
    }
    default:
        fail(r, "general.alignment has type %s, expected an unsigned integer", vtype_name(kv->type));
        return -1;
    }
    if (v == 0 || (v & (v - 1))) {
        fail(r, "general.alignment = %llu is not a nonzero power of two", (unsigned long long)v);
        return -1;
    }
    f->alignment = v;
    return 0;
}

static int parse(gguf_file *f, reader *r) {
    gguf_str hdr = NO_NAME;
    if (r->size < 4 || memcmp(r->base, "GGUF", 4) != 0) {
        if (r->size < 4) fail(r, "file is too small for a GGUF header (size %zu)", r->size);
        else fail(r, "bad magic %02x %02x %02x %02x (expected \"GGUF\")",
                  r->base[0], r->base[1], r->base[2], r->base[3]);
        return -1;
    }
    r->pos = 4;
    if (rd_u32(r, &f->version, "version", hdr)) return -1;
    if (f->version == 1) {
        fail(r, "GGUF version 1 is not supported (only versions 2 and 3)");
        return -1;
    }
    if (f->version != 2 && f->version != 3) {
        /* a byte-swapped small number means a big-endian file */
        uint32_t v = f->version;
        uint32_t sw = (v >> 24) | ((v >> 8) & 0xff00) | ((v << 8) & 0xff0000) | (v << 24);
        if (sw >= 1 && sw <= 3) fail(r, "big-endian GGUF files are not supported (version %u byte-swapped)", sw);
        else fail(r, "unsupported GGUF version %u (only versions 2 and 3)", v);
        return -1;
    }
    uint64_t n_tensors, n_kv;
    if (rd_u64(r, &n_tensors, "tensor count", hdr)) return -1;
    if (rd_u64(r, &n_kv, "kv count", hdr)) return -1;

    /* kvs come first in the file: the count must fit what remains */
    if (n_kv > remaining(r) / MIN_KV_BYTES) {
        fail(r, "kv count %llu is impossible: %zu bytes remain (file size %zu)",
             (unsigned long long)n_kv, remaining(r), r->size);
        return -1;
    }
    if (n_kv) {
        f->kvs = calloc((size_t)n_kv, sizeof *f->kvs);
        f->kv_slots = index_alloc((size_t)n_kv, &f->kv_cap);
        if (!f->kvs || !f->kv_slots) { fail(r, "out of memory for %llu kvs", (unsigned long long)n_kv); return -1; }
    }
    for (size_t i = 0; i < n_kv; i++) {
        f->n_kv = i + 1; /* counted before parsing so close() frees a partial tree */
        size_t at = r->pos;
        if (parse_kv(r, &f->kvs[i], i)) return -1;
        size_t dup = index_insert(f->kv_slots, f->kv_cap, f->kvs, kv_name, i);
        if (dup != SIZE_MAX) {
            fail(r, "duplicate key '%s' (kv #%zu at offset %zu, first seen as kv #%zu)",
                 show(f->kvs[i].key).s, i, at, dup);
            return -1;
        }
    }
    if (read_alignment(r, f)) return -1;

    /* tensor infos follow the kvs */
    if (n_tensors > remaining(r) / MIN_TENSOR_BYTES) {
        fail(r, "tensor count %llu is impossible: %zu bytes remain after the metadata (file size %zu)",
             (unsigned long long)n_tensors, remaining(r), r->size);
        return -1;
    }
    if (n_tensors) {
        f->tensors = calloc((size_t)n_tensors, sizeof *f->tensors);
        f->t_slots = index_alloc((size_t)n_tensors, &f->t_cap);
        if (!f->tensors || !f->t_slots) { fail(r, "out of memory for %llu tensors", (unsigned long long)n_tensors); return -1; }
    }
    f->n_tensors = (size_t)n_tensors;
    for (size_t i = 0; i < f->n_tensors; i++) {
        if (parse_tensor_info(r, &f->tensors[i], i)) return -1;
        size_t dup = index_insert(f->t_slots, f->t_cap, f->tensors, t_name, i);
        if (dup != SIZE_MAX) {
            fail(r, "duplicate tensor name '%s' (tensor #%zu, first seen as tensor #%zu)",
                 show(f->tensors[i].name).s, i, dup);
            return -1;
        }
    }

    /* data section: the tensor-info end rounded up to the alignment */
    uint64_t pad = (f->alignment - r->pos % f->alignment) % f->alignment;
    if (pad > remaining(r)) {
        if (f->n_tensors) {
            fail(r, "data section at offset %llu starts past the end of the file (size %zu)",
                 (unsigned long long)r->pos + pad, r->size);
            return -1;
        }
        pad = remaining(r); /* no tensors: a file may end without the padding */
    }
    f->data_off = r->pos + pad;
    for (size_t i = 0; i < f->n_tensors; i++)
        if (check_tensor(r, f, &f->tensors[i])) return -1;
    return check_overlap(r, f);
}

int gguf_open_memory(gguf_file **out, const void *data, size_t size, char *err, size_t errlen) {
    reader r = {data, size, 0, err, errlen};
    if (err && errlen) err[0] = 0;
    *out = NULL;
    if (!data && size) { fail(&r, "NULL data"); return -1; }
    if (!data) r.base = (const uint8_t *)"";
    gguf_file *f = calloc(1, sizeof *f);
    if (!f) { fail(&r, "out of memory"); return -1; }
    f->base = r.base;
    f->size = size;
    if (parse(f, &r)) { gguf_close(f); return -1; }
    *out = f;
    return 0;
}

int gguf_open_virtual(gguf_file **out, const void *data, size_t size, uint64_t virt_size, char *err,
                      size_t errlen) {
    reader r = {data, size, 0, err, errlen};
    if (err && errlen) err[0] = 0;
    *out = NULL;
    if (!data) { fail(&r, "NULL data"); return -1; }
    gguf_file *f = calloc(1, sizeof *f);
    if (!f) { fail(&r, "out of memory"); return -1; }
    f->base = data;
    f->size = size;
    f->virt_size = virt_size;
    if (parse(f, &r)) { gguf_close(f); return -1; }
    *out = f;
    return 0;
}

int gguf_open(gguf_file **out, const char *path, char *err, size_t errlen) {
    reader r = {NULL, 0, 0, err, errlen};
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) { fail(&r, "%s: %s", path, strerror(errno)); return -1; }
    struct stat st;
    if (fstat(fd, &st) != 0) { fail(&r, "%s: %s", path, strerror(errno)); close(fd); return -1; }
    if (!S_ISREG(st.st_mode)) { fail(&r, "%s: not a regular file", path); close(fd); return -1; }
    if (st.st_size == 0) { fail(&r, "%s: file is empty", path); close(fd); return -1; }
    size_t size = (size_t)st.st_size;
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int map_errno = errno;
    close(fd); /* the mapping keeps the file alive */
    if (map == MAP_FAILED) { fail(&r, "%s: mmap: %s", path, strerror(map_errno)); return -1; }
    gguf_file *f;
    if (gguf_open_memory(&f, map, size, err, errlen)) {
        /* prefix the path so a server log says which file was bad */
        if (err && errlen) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", err);
            const char *rest = strncmp(msg, "gguf: ", 6) == 0 ? msg + 6 : msg;
            snprintf(err, errlen, "gguf: %s: %s", path, rest);
        }
        munmap(map, size);
        return -1;
    }
    f->mapped = 1;
    *out = f;
    return 0;
}

/* ---------------------------------------------------------------- accessors */

uint32_t gguf_version(const gguf_file *f) { return f->version; }
uint64_t gguf_alignment(const gguf_file *f) { return f->alignment; }
size_t gguf_file_size(const gguf_file *f) { return f->size; }
size_t gguf_kv_count(const gguf_file *f) { return f->n_kv; }
size_t gguf_tensor_count(const gguf_file *f) { return f->n_tensors; }

const gguf_kv *gguf_kv_at(const gguf_file *f, size_t i) {
    return i < f->n_kv ? &f->kvs[i] : NULL;
}

const gguf_tensor *gguf_tensor_at(const gguf_file *f, size_t i) {
    return i < f->n_tensors ? &f->tensors[i] : NULL;
}

const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key) {
    if (!key) return NULL;
    size_t i = index_find(f->kv_slots, f->kv_cap, f->kvs, kv_name, key, strlen(key));
    return i == SIZE_MAX ? NULL : &f->kvs[i];
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name) {
    if (!name) return NULL;
    size_t i = index_find(f->t_slots, f->t_cap, f->tensors, t_name, name, strlen(name));
    return i == SIZE_MAX ? NULL : &f->tensors[i];
}

int gguf_str_eq(gguf_str s, const char *c) {
    size_t n = strlen(c);
    return s.len == n && (n == 0 || memcmp(s.ptr, c, n) == 0);
}

/* Reads a scalar integer/bool. -2 for other types and for u64 values above INT64_MAX,
 * which an int64_t cannot carry. */
static int scalar_int(uint32_t type, const uint8_t *p, int64_t *out) {
    switch (type) {
    case GGUF_VT_U8:   { uint8_t v;  memcpy(&v, p, 1); *out = v; return 0; }
    case GGUF_VT_I8:   { int8_t v;   memcpy(&v, p, 1); *out = v; return 0; }
    case GGUF_VT_BOOL: { uint8_t v;  memcpy(&v, p, 1); *out = v != 0; return 0; }
    case GGUF_VT_U16:  { uint16_t v; memcpy(&v, p, 2); *out = v; return 0; }
    case GGUF_VT_I16:  { int16_t v;  memcpy(&v, p, 2); *out = v; return 0; }
    case GGUF_VT_U32:  { uint32_t v; memcpy(&v, p, 4); *out = v; return 0; }
    case GGUF_VT_I32:  { int32_t v;  memcpy(&v, p, 4); *out = v; return 0; }
    case GGUF_VT_I64:  { int64_t v;  memcpy(&v, p, 8); *out = v; return 0; }
    case GGUF_VT_U64: {
        uint64_t v;
        memcpy(&v, p, 8);
        if (v > (uint64_t)INT64_MAX) return -2;
        *out = (int64_t)v;
        return 0;
    }
    default: return -2;
    }
}

int gguf_get_int(const gguf_file *f, const char *key, int64_t *out) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return -1;
    return scalar_int(kv->type, kv->data, out);
}

int gguf_get_float(const gguf_file *f, const char *key, double *out) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return -1;
    if (kv->type == GGUF_VT_F32) { float v; memcpy(&v, kv->data, 4); *out = v; return 0; }
    if (kv->type == GGUF_VT_F64) { double v; memcpy(&v, kv->data, 8); *out = v; return 0; }
    if (kv->type == GGUF_VT_U64) { uint64_t v; memcpy(&v, kv->data, 8); *out = (double)v; return 0; }
    int64_t i;
    if (scalar_int(kv->type, kv->data, &i)) return -2;
    *out = (double)i;
    return 0;
}

int gguf_get_str(const gguf_file *f, const char *key, gguf_str *out) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return -1;
    if (kv->type != GGUF_VT_STRING) return -2;
    *out = kv->str;
    return 0;
}

int gguf_get_arr(const gguf_file *f, const char *key, uint32_t *elem_type, uint64_t *n, const void **data) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return -1;
    if (kv->type != GGUF_VT_ARRAY || !scalar_size(kv->arr_type)) return -2;
    *elem_type = kv->arr_type;
    *n = kv->arr_n;
    *data = kv->data;
    return 0;
}

int gguf_get_str_arr(const gguf_file *f, const char *key, const gguf_str **strs, uint64_t *n) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return -1;
    if (kv->type != GGUF_VT_ARRAY || kv->arr_type != GGUF_VT_STRING) return -2;
    *strs = kv->arr_strs;
    *n = kv->arr_n;
    return 0;
}
