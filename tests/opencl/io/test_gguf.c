/* test_gguf.c — the GGUF reader against images built here byte by byte, hostile variants of
 * them, and (when present) the real Gemma 3 270M model file.
 *
 * The writer below is deliberately independent of opencl/gguf.c: it emits the format from the
 * spec, so a shared misunderstanding would have to be made twice. Every hostile image is
 * copied into a buffer of exactly its size, so under ASan (tests/suites/asan_gguf.sh) any
 * read past the end is caught, not just wrong results. */
#include "check.h"
#include "gguf.h"

#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#define MODEL_PATH "models/gemma-3-270m-q4_k_m.gguf"

/* ------------------------------------------------------------------ image writer */

typedef struct buf { uint8_t *p; size_t n, cap; } buf;

static void put(buf *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        size_t c = b->cap ? b->cap : 256;
        while (c < b->n + n) c *= 2;
        uint8_t *q = realloc(b->p, c);
        if (!q) { printf("FAIL %s: out of memory in test writer\n", check_current); exit(1); }
        b->p = q;
        b->cap = c;
    }
    if (n) memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void w_u8(buf *b, uint8_t v) { put(b, &v, 1); }
static void w_u16(buf *b, uint16_t v) { uint8_t x[2] = {(uint8_t)v, (uint8_t)(v >> 8)}; put(b, x, 2); }
static void w_u32(buf *b, uint32_t v) {
    uint8_t x[4];
    for (int i = 0; i < 4; i++) x[i] = (uint8_t)(v >> (8 * i));
    put(b, x, 4);
}
static void w_u64(buf *b, uint64_t v) {
    uint8_t x[8];
    for (int i = 0; i < 8; i++) x[i] = (uint8_t)(v >> (8 * i));
    put(b, x, 8);
}
static void w_f32(buf *b, float f) { uint32_t v; memcpy(&v, &f, 4); w_u32(b, v); }
static void w_f64(buf *b, double f) { uint64_t v; memcpy(&v, &f, 8); w_u64(b, v); }
static void w_strn(buf *b, const char *s, size_t n) { w_u64(b, n); put(b, s, n); }
static void w_str(buf *b, const char *s) { w_strn(b, s, strlen(s)); }
static void w_zeros(buf *b, size_t n) { while (n--) w_u8(b, 0); }
static void w_pad(buf *b, size_t align) { while (b->n % align) w_u8(b, 0); }

static void w_hdr(buf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    put(b, "GGUF", 4);
    w_u32(b, version);
    w_u64(b, n_tensors);
    w_u64(b, n_kv);
}
static void w_key(buf *b, const char *key, uint32_t type) { w_str(b, key); w_u32(b, type); }
static void kv_u32(buf *b, const char *key, uint32_t v) { w_key(b, key, GGUF_VT_U32); w_u32(b, v); }
static void kv_str(buf *b, const char *key, const char *v) { w_key(b, key, GGUF_VT_STRING); w_str(b, v); }

static void w_tinfo(buf *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t off) {
    w_str(b, name);
    w_u32(b, n_dims);
    for (uint32_t i = 0; i < n_dims; i++) w_u64(b, ne[i]);
    w_u32(b, type);
    w_u64(b, off);
}

/* ------------------------------------------------------------------ helpers */

/* Opens an exact-size private copy so ASan sees any over-read. */
static int open_copy(gguf_file **f, const uint8_t *p, size_t n, char *err, size_t errlen, uint8_t **copy) {
    *copy = malloc(n ? n : 1);
    if (n) memcpy(*copy, p, n);
    return gguf_open_memory(f, *copy, n, err, errlen);
}

static int err_is_one_line(const char *err) {
    return strncmp(err, "gguf: ", 6) == 0 && !strchr(err, '\n') && strlen(err) > 6;
}

/* Expects the image to be rejected with an error containing `want`. */
#define EXPECT_FAIL(b, want) expect_fail((b)->p, (b)->n, want, __LINE__)
static void expect_fail(const uint8_t *p, size_t n, const char *want, int line) {
    char err[256] = "";
    gguf_file *f = (gguf_file *)1;
    uint8_t *copy;
    int rc = open_copy(&f, p, n, err, sizeof err, &copy);
    CHECK(rc == -1, "line %d: expected failure ('%s'), got rc %d", line, want, rc);
    CHECK(f == NULL, "line %d: handle not NULL on failure", line);
    CHECK(err_is_one_line(err), "line %d: bad error text '%s'", line, err);
    CHECK(strstr(err, want) != NULL, "line %d: error '%s' lacks '%s'", line, err, want);
    if (rc == 0) gguf_close(f);
    free(copy);
}

/* Touches every byte the handle points at; ASan flags any pointer outside the image. */
static unsigned walk_kv(const gguf_kv *kv, int depth);
static unsigned walk_bytes(const void *p, uint64_t n) {
    /* volatile: the sums are never used, and without it the optimizer drops the loads
     * before ASan can instrument them */
    volatile uint8_t sink = 0;
    unsigned s = 0;
    for (uint64_t i = 0; i < n; i++) { sink = ((const uint8_t *)p)[i]; s += sink; }
    return s;
}
static unsigned walk_kv(const gguf_kv *kv, int depth) {
    unsigned s = walk_bytes(kv->key.ptr, kv->key.len);
    if (depth > 16) return s;
    static const uint8_t sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (kv->type == GGUF_VT_STRING) s += walk_bytes(kv->str.ptr, kv->str.len);
    else if (kv->type == GGUF_VT_ARRAY) {
        if (kv->arr_type == GGUF_VT_STRING)
            for (uint64_t i = 0; i < kv->arr_n; i++) s += walk_bytes(kv->arr_strs[i].ptr, kv->arr_strs[i].len);
        else if (kv->arr_type == GGUF_VT_ARRAY)
            for (uint64_t i = 0; i < kv->arr_n; i++) s += walk_kv(&kv->arr_sub[i], depth + 1);
        else if (kv->arr_type < 13) s += walk_bytes(kv->data, kv->arr_n * sizes[kv->arr_type]);
    } else if (kv->type < 13) s += walk_bytes(kv->data, sizes[kv->type]);
    return s;
}
static unsigned walk_all(const gguf_file *f) {
    unsigned s = 0;
    for (size_t i = 0; i < gguf_kv_count(f); i++) s += walk_kv(gguf_kv_at(f, i), 0);
    for (size_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        s += walk_bytes(t->name.ptr, t->name.len) + walk_bytes(t->data, t->nbytes);
    }
    return s;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------------ the rich image */

/* Tensors of the rich image: name, type, dims, and where they go (relative to data start). */
typedef struct tdef { const char *name; uint32_t type, n_dims; uint64_t ne[4]; uint64_t off, nbytes; } tdef;
static const tdef RICH_T[] = {
    {"a.f32",     GGML_TYPE_F32,  2, {4, 3, 1, 1},    0,   48},
    {"b.q4_k",    GGML_TYPE_Q4_K, 2, {512, 2, 1, 1},  64,  4 * 144},
    {"c.q8_0",    GGML_TYPE_Q8_0, 1, {64, 1, 1, 1},   640, 2 * 34},
    {"d.f16",     GGML_TYPE_F16,  3, {8, 2, 2, 1},    768, 64},
    {"e.q6_k",    GGML_TYPE_Q6_K, 4, {256, 1, 2, 1},  896, 2 * 210}, /* last: ends the file */
};
#define RICH_NT (sizeof RICH_T / sizeof RICH_T[0])
#define RICH_ALIGN 64

/* Builds the rich image: every value type, string arrays, nested arrays, 5 tensors of
 * different types at 64-byte alignment with gaps between them. Tensor bytes are
 * (offset + i) & 0xff so the test can verify data pointers. */
static void build_rich(buf *b, uint32_t version) {
    size_t nkv = 0;
    buf kv = {0};
    kv_str(&kv, "general.architecture", "gemma3"); nkv++;
    kv_u32(&kv, "general.alignment", RICH_ALIGN); nkv++;
    w_key(&kv, "t.u8", GGUF_VT_U8);     w_u8(&kv, 200); nkv++;
    w_key(&kv, "t.i8", GGUF_VT_I8);     w_u8(&kv, (uint8_t)-5); nkv++;
    w_key(&kv, "t.u16", GGUF_VT_U16);   w_u16(&kv, 60000); nkv++;
    w_key(&kv, "t.i16", GGUF_VT_I16);   w_u16(&kv, (uint16_t)-30000); nkv++;
    w_key(&kv, "t.u32", GGUF_VT_U32);   w_u32(&kv, 4000000000u); nkv++;
    w_key(&kv, "t.i32", GGUF_VT_I32);   w_u32(&kv, (uint32_t)-2000000000); nkv++;
    w_key(&kv, "t.f32", GGUF_VT_F32);   w_f32(&kv, 1.5f); nkv++;
    w_key(&kv, "t.bool", GGUF_VT_BOOL); w_u8(&kv, 1); nkv++;
    w_key(&kv, "t.false", GGUF_VT_BOOL); w_u8(&kv, 0); nkv++;
    w_key(&kv, "t.u64", GGUF_VT_U64);   w_u64(&kv, 1ull << 40); nkv++;
    w_key(&kv, "t.u64max", GGUF_VT_U64); w_u64(&kv, UINT64_MAX); nkv++;
    w_key(&kv, "t.i64", GGUF_VT_I64);   w_u64(&kv, (uint64_t)-(1ll << 40)); nkv++;
    w_key(&kv, "t.f64", GGUF_VT_F64);   w_f64(&kv, -2.25); nkv++;
    kv_str(&kv, "t.str", "hello"); nkv++;
    kv_str(&kv, "t.empty", ""); nkv++;
    w_key(&kv, "t.utf8", GGUF_VT_STRING); w_str(&kv, "\xe2\x96\x81the"); nkv++;
    /* numeric arrays */
    w_key(&kv, "t.arr_i32", GGUF_VT_ARRAY); w_u32(&kv, GGUF_VT_I32); w_u64(&kv, 3);
    w_u32(&kv, 1); w_u32(&kv, (uint32_t)-2); w_u32(&kv, 3); nkv++;
    w_key(&kv, "t.arr_f32", GGUF_VT_ARRAY); w_u32(&kv, GGUF_VT_F32); w_u64(&kv, 2);
    w_f32(&kv, 0.25f); w_f32(&kv, -1000.0f); nkv++;
    w_key(&kv, "t.arr_u8", GGUF_VT_ARRAY); w_u32(&kv, GGUF_VT_U8); w_u64(&kv, 5);
    for (int i = 0; i < 5; i++) w_u8(&kv, (uint8_t)(10 * i));
    nkv++;
    w_key(&kv, "t.arr_bool", GGUF_VT_ARRAY); w_u32(&kv, GGUF_VT_BOOL); w_u64(&kv, 2);
    w_u8(&kv, 1); w_u8(&kv, 0); nkv++;
    w_key(&kv, "t.arr_f64", GGUF_VT_ARRAY); w_u32(&kv, GGUF_VT_F64); w_u64(&kv, 1); w_f64(&kv, 3.5); nkv++;
    w_key(&kv, "t.arr_empty", GGUF_VT_ARRAY); w_u32(&kv, GGUF_VT_U32); w_u64(&kv, 0); nkv++;
    /* string arrays */
    w_key(&kv, "t.arr_str", GGUF_VT_ARRAY); w_u32(&kv, GGUF_VT_STRING); w_u64(&kv, 3);
    w_str(&kv, "a"); w_str(&kv, ""); w_strn(&kv, "c\0c", 3); nkv++; /* NUL allowed in values */
    w_key(&kv, "t.arr_str0", GGUF_VT_ARRAY); w_u32(&kv, GGUF_VT_STRING); w_u64(&kv, 0); nkv++;
    /* [[1, 2], [3]] of i16 */
    w_key(&kv, "t.nested", GGUF_VT_ARRAY); w_u32(&kv, GGUF_VT_ARRAY); w_u64(&kv, 2);
    w_u32(&kv, GGUF_VT_I16); w_u64(&kv, 2); w_u16(&kv, 1); w_u16(&kv, 2);
    w_u32(&kv, GGUF_VT_I16); w_u64(&kv, 1); w_u16(&kv, 3); nkv++;
    /* [[["x", "yz"]], []] : three levels, strings at the bottom, an empty middle array */
    w_key(&kv, "t.nested3", GGUF_VT_ARRAY); w_u32(&kv, GGUF_VT_ARRAY); w_u64(&kv, 2);
    w_u32(&kv, GGUF_VT_ARRAY); w_u64(&kv, 1);
    w_u32(&kv, GGUF_VT_STRING); w_u64(&kv, 2); w_str(&kv, "x"); w_str(&kv, "yz");
    w_u32(&kv, GGUF_VT_ARRAY); w_u64(&kv, 0); nkv++;

    w_hdr(b, version, RICH_NT, nkv);
    put(b, kv.p, kv.n);
    free(kv.p);
    for (size_t i = 0; i < RICH_NT; i++)
        w_tinfo(b, RICH_T[i].name, RICH_T[i].n_dims, RICH_T[i].ne, RICH_T[i].type, RICH_T[i].off);
    w_pad(b, RICH_ALIGN);
    size_t data = b->n;
    const tdef *last = &RICH_T[RICH_NT - 1];
    for (uint64_t o = 0; o < last->off + last->nbytes; o++) w_u8(b, (uint8_t)(o + data));
}

/* Checks everything about an opened rich image. base = the memory it was opened from. */
static void check_rich(const gguf_file *f, const uint8_t *base, size_t size, uint32_t version) {
    CHECK(gguf_version(f) == version, "version %u", gguf_version(f));
    CHECK(gguf_alignment(f) == RICH_ALIGN, "alignment %llu", (unsigned long long)gguf_alignment(f));
    CHECK(gguf_file_size(f) == size, "size %zu", gguf_file_size(f));
    CHECK(gguf_kv_count(f) == 28, "kv count %zu", gguf_kv_count(f));
    CHECK(gguf_kv_at(f, 28) == NULL, "kv_at past end");
    CHECK(gguf_str_eq(gguf_kv_at(f, 0)->key, "general.architecture"), "kv 0 key");
    CHECK(gguf_str_eq(gguf_kv_at(f, 27)->key, "t.nested3"), "kv 27 key");

    int64_t i;
    double d;
    gguf_str s;
    CHECK(gguf_get_str(f, "general.architecture", &s) == 0 && gguf_str_eq(s, "gemma3"), "arch");
    CHECK(gguf_get_int(f, "t.u8", &i) == 0 && i == 200, "u8 %lld", (long long)i);
    CHECK(gguf_get_int(f, "t.i8", &i) == 0 && i == -5, "i8 %lld", (long long)i);
    CHECK(gguf_get_int(f, "t.u16", &i) == 0 && i == 60000, "u16");
    CHECK(gguf_get_int(f, "t.i16", &i) == 0 && i == -30000, "i16");
    CHECK(gguf_get_int(f, "t.u32", &i) == 0 && i == 4000000000ll, "u32");
    CHECK(gguf_get_int(f, "t.i32", &i) == 0 && i == -2000000000ll, "i32");
    CHECK(gguf_get_int(f, "t.bool", &i) == 0 && i == 1, "bool");
    CHECK(gguf_get_int(f, "t.false", &i) == 0 && i == 0, "false");
    CHECK(gguf_get_int(f, "t.u64", &i) == 0 && i == 1ll << 40, "u64");
    CHECK(gguf_get_int(f, "t.i64", &i) == 0 && i == -(1ll << 40), "i64");
    CHECK(gguf_get_int(f, "t.u64max", &i) == -2, "u64 above INT64_MAX must not fit int64");
    CHECK(gguf_get_float(f, "t.u64max", &d) == 0 && d == 18446744073709551615.0, "u64max as float");
    CHECK(gguf_get_float(f, "t.f32", &d) == 0 && d == 1.5, "f32");
    CHECK(gguf_get_float(f, "t.f64", &d) == 0 && d == -2.25, "f64");
    CHECK(gguf_get_float(f, "t.i32", &d) == 0 && d == -2000000000.0, "int as float");
    CHECK(gguf_get_float(f, "t.u8", &d) == 0 && d == 200.0, "u8 as float");
    CHECK(gguf_get_str(f, "t.str", &s) == 0 && gguf_str_eq(s, "hello") && s.len == 5, "str");
    CHECK(gguf_get_str(f, "t.empty", &s) == 0 && s.len == 0 && gguf_str_eq(s, ""), "empty str");
    CHECK(gguf_get_str(f, "t.utf8", &s) == 0 && s.len == 6 && memcmp(s.ptr, "\xe2\x96\x81the", 6) == 0, "utf8");
    /* strings point into the image, not copies */
    CHECK(gguf_get_str(f, "t.str", &s) == 0 && (const uint8_t *)s.ptr > base &&
          (const uint8_t *)s.ptr + s.len <= base + size, "string not inside the image");

    /* wrong type: -2; missing: -1 */
    CHECK(gguf_get_int(f, "t.str", &i) == -2, "int from string");
    CHECK(gguf_get_int(f, "t.f32", &i) == -2, "int from float");
    CHECK(gguf_get_int(f, "t.arr_i32", &i) == -2, "int from array");
    CHECK(gguf_get_float(f, "t.str", &d) == -2, "float from string");
    CHECK(gguf_get_str(f, "t.u32", &s) == -2, "string from int");
    CHECK(gguf_get_str(f, "t.arr_str", &s) == -2, "string from string array");
    CHECK(gguf_get_int(f, "t.nope", &i) == -1, "missing int");
    CHECK(gguf_get_float(f, "t.nope", &d) == -1, "missing float");
    CHECK(gguf_get_str(f, "t.nope", &s) == -1, "missing str");
    CHECK(gguf_get_int(f, "t.u", &i) == -1, "prefix of a key must not match");
    CHECK(gguf_get_int(f, "t.u88", &i) == -1, "extension of a key must not match");
    CHECK(gguf_find_kv(f, "") == NULL && gguf_find_kv(f, NULL) == NULL, "empty/NULL key");

    uint32_t et;
    uint64_t n;
    const void *p;
    CHECK(gguf_get_arr(f, "t.arr_i32", &et, &n, &p) == 0 && et == GGUF_VT_I32 && n == 3, "arr_i32");
    if (n == 3) {
        int32_t v[3];
        memcpy(v, p, sizeof v);
        CHECK(v[0] == 1 && v[1] == -2 && v[2] == 3, "arr_i32 values %d %d %d", v[0], v[1], v[2]);
    }
    CHECK(gguf_get_arr(f, "t.arr_f32", &et, &n, &p) == 0 && et == GGUF_VT_F32 && n == 2, "arr_f32");
    if (n == 2) {
        float v[2];
        memcpy(v, p, sizeof v);
        CHECK(v[0] == 0.25f && v[1] == -1000.0f, "arr_f32 values");
    }
    CHECK(gguf_get_arr(f, "t.arr_u8", &et, &n, &p) == 0 && et == GGUF_VT_U8 && n == 5 &&
          ((const uint8_t *)p)[4] == 40, "arr_u8");
    CHECK(gguf_get_arr(f, "t.arr_bool", &et, &n, &p) == 0 && et == GGUF_VT_BOOL && n == 2 &&
          ((const uint8_t *)p)[0] == 1 && ((const uint8_t *)p)[1] == 0, "arr_bool");
    CHECK(gguf_get_arr(f, "t.arr_f64", &et, &n, &p) == 0 && et == GGUF_VT_F64 && n == 1, "arr_f64");
    if (n == 1) { double v; memcpy(&v, p, 8); CHECK(v == 3.5, "arr_f64 value"); }
    CHECK(gguf_get_arr(f, "t.arr_empty", &et, &n, &p) == 0 && et == GGUF_VT_U32 && n == 0, "empty arr");
    CHECK(gguf_get_arr(f, "t.arr_str", &et, &n, &p) == -2, "numeric getter on string array");
    CHECK(gguf_get_arr(f, "t.nested", &et, &n, &p) == -2, "numeric getter on nested array");
    CHECK(gguf_get_arr(f, "t.u32", &et, &n, &p) == -2, "array getter on scalar");
    CHECK(gguf_get_arr(f, "t.nope", &et, &n, &p) == -1, "missing arr");

    const gguf_str *ss;
    CHECK(gguf_get_str_arr(f, "t.arr_str", &ss, &n) == 0 && n == 3, "arr_str");
    if (n == 3) {
        CHECK(gguf_str_eq(ss[0], "a") && ss[1].len == 0 && ss[2].len == 3 &&
              memcmp(ss[2].ptr, "c\0c", 3) == 0, "arr_str values");
    }
    CHECK(gguf_get_str_arr(f, "t.arr_str0", &ss, &n) == 0 && n == 0, "empty string array");
    CHECK(gguf_get_str_arr(f, "t.arr_i32", &ss, &n) == -2, "string getter on numeric array");
    CHECK(gguf_get_str_arr(f, "t.str", &ss, &n) == -2, "string-array getter on string");
    CHECK(gguf_get_str_arr(f, "t.nope", &ss, &n) == -1, "missing str arr");

    /* nested arrays through the kv */
    const gguf_kv *kv = gguf_find_kv(f, "t.nested");
    CHECK(kv && kv->type == GGUF_VT_ARRAY && kv->arr_type == GGUF_VT_ARRAY && kv->arr_n == 2 && kv->arr_sub,
          "nested kv");
    if (kv && kv->arr_sub && kv->arr_n == 2) {
        const gguf_kv *a = &kv->arr_sub[0], *b2 = &kv->arr_sub[1];
        CHECK(a->type == GGUF_VT_ARRAY && a->arr_type == GGUF_VT_I16 && a->arr_n == 2 && a->key.len == 0, "sub 0");
        CHECK(b2->arr_type == GGUF_VT_I16 && b2->arr_n == 1, "sub 1");
        int16_t v[2];
        memcpy(v, a->data, 4);
        CHECK(v[0] == 1 && v[1] == 2, "sub 0 values");
        memcpy(v, b2->data, 2);
        CHECK(v[0] == 3, "sub 1 value");
    }
    kv = gguf_find_kv(f, "t.nested3");
    CHECK(kv && kv->arr_type == GGUF_VT_ARRAY && kv->arr_n == 2, "nested3");
    if (kv && kv->arr_n == 2 && kv->arr_sub) {
        const gguf_kv *l1 = &kv->arr_sub[0];
        CHECK(l1->arr_type == GGUF_VT_ARRAY && l1->arr_n == 1 && l1->arr_sub, "nested3[0]");
        if (l1->arr_sub) {
            const gguf_kv *l2 = &l1->arr_sub[0];
            CHECK(l2->arr_type == GGUF_VT_STRING && l2->arr_n == 2 && l2->arr_strs &&
                  gguf_str_eq(l2->arr_strs[0], "x") && gguf_str_eq(l2->arr_strs[1], "yz"), "nested3[0][0]");
        }
        CHECK(kv->arr_sub[1].arr_type == GGUF_VT_ARRAY && kv->arr_sub[1].arr_n == 0, "nested3[1] empty");
    }
    /* kv scalar data points at raw bytes */
    kv = gguf_find_kv(f, "t.u16");
    CHECK(kv && kv->type == GGUF_VT_U16 && kv->data && kv->data[0] == (60000 & 0xff), "raw scalar bytes");

    /* tensors */
    CHECK(gguf_tensor_count(f) == RICH_NT, "tensor count %zu", gguf_tensor_count(f));
    CHECK(gguf_tensor_at(f, RICH_NT) == NULL, "tensor_at past end");
    const tdef *last = &RICH_T[RICH_NT - 1];
    size_t data_off = size - (size_t)(last->off + last->nbytes);
    CHECK(data_off % RICH_ALIGN == 0, "data section offset %zu not aligned", data_off);
    for (size_t k = 0; k < RICH_NT; k++) {
        const tdef *e = &RICH_T[k];
        const gguf_tensor *t = gguf_find_tensor(f, e->name);
        CHECK(t == gguf_tensor_at(f, k), "%s: find/at mismatch", e->name);
        if (!t) continue;
        CHECK(gguf_str_eq(t->name, e->name), "%s: name", e->name);
        CHECK(t->type == e->type && t->n_dims == e->n_dims, "%s: type %u dims %u", e->name, t->type, t->n_dims);
        for (int d2 = 0; d2 < 4; d2++)
            CHECK(t->ne[d2] == e->ne[d2], "%s: ne[%d] = %llu", e->name, d2, (unsigned long long)t->ne[d2]);
        CHECK(t->offset == e->off, "%s: offset %llu", e->name, (unsigned long long)t->offset);
        CHECK(t->nbytes == e->nbytes, "%s: nbytes %llu want %llu", e->name,
              (unsigned long long)t->nbytes, (unsigned long long)e->nbytes);
        CHECK((const uint8_t *)t->data == base + data_off + e->off, "%s: data pointer", e->name);
        const uint8_t *q = t->data;
        int ok = 1;
        for (uint64_t o = 0; o < t->nbytes; o++)
            if (q[o] != (uint8_t)(data_off + e->off + o)) ok = 0;
        CHECK(ok, "%s: data bytes differ", e->name);
    }
    CHECK(gguf_find_tensor(f, "a.f3") == NULL && gguf_find_tensor(f, "a.f32x") == NULL &&
          gguf_find_tensor(f, "") == NULL && gguf_find_tensor(f, NULL) == NULL, "tensor lookup misses");
}

/* ------------------------------------------------------------------ tests */

static void test_type_table(void) {
    static const struct { uint32_t t; const char *name; uint32_t blck, size; } want[] = {
        {GGML_TYPE_F32, "f32", 1, 4},        {GGML_TYPE_F16, "f16", 1, 2},
        {GGML_TYPE_Q4_0, "q4_0", 32, 18},    {GGML_TYPE_Q4_1, "q4_1", 32, 20},
        {GGML_TYPE_Q5_0, "q5_0", 32, 22},    {GGML_TYPE_Q5_1, "q5_1", 32, 24},
        {GGML_TYPE_Q8_0, "q8_0", 32, 34},    {GGML_TYPE_Q8_1, "q8_1", 32, 36},
        {GGML_TYPE_Q2_K, "q2_K", 256, 84},   {GGML_TYPE_Q3_K, "q3_K", 256, 110},
        {GGML_TYPE_Q4_K, "q4_K", 256, 144},  {GGML_TYPE_Q5_K, "q5_K", 256, 176},
        {GGML_TYPE_Q6_K, "q6_K", 256, 210},  {GGML_TYPE_Q8_K, "q8_K", 256, 292},
        {GGML_TYPE_IQ2_XXS, "iq2_xxs", 256, 66}, {GGML_TYPE_IQ2_XS, "iq2_xs", 256, 74},
        {GGML_TYPE_IQ3_XXS, "iq3_xxs", 256, 98}, {GGML_TYPE_IQ1_S, "iq1_s", 256, 50},
        {GGML_TYPE_IQ4_NL, "iq4_nl", 32, 18},    {GGML_TYPE_IQ3_S, "iq3_s", 256, 110},
        {GGML_TYPE_IQ2_S, "iq2_s", 256, 82},     {GGML_TYPE_IQ4_XS, "iq4_xs", 256, 136},
        {GGML_TYPE_I8, "i8", 1, 1},   {GGML_TYPE_I16, "i16", 1, 2}, {GGML_TYPE_I32, "i32", 1, 4},
        {GGML_TYPE_I64, "i64", 1, 8}, {GGML_TYPE_F64, "f64", 1, 8},
        {GGML_TYPE_IQ1_M, "iq1_m", 256, 56}, {GGML_TYPE_BF16, "bf16", 1, 2},
        {GGML_TYPE_TQ1_0, "tq1_0", 256, 54}, {GGML_TYPE_TQ2_0, "tq2_0", 256, 66},
        {39, "mxfp4", 32, 17},
    };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        CHECK(ggml_blck_size(want[k].t) == want[k].blck, "type %u blck %u", want[k].t, ggml_blck_size(want[k].t));
        CHECK(ggml_type_size(want[k].t) == want[k].size, "type %u size %u", want[k].t, ggml_type_size(want[k].t));
        CHECK(strcmp(ggml_type_name(want[k].t), want[k].name) == 0, "type %u name %s", want[k].t,
              ggml_type_name(want[k].t));
    }
    static const uint32_t removed[] = {4, 5, 31, 32, 33, 36, 37, 38, 40, 41, 1000, UINT32_MAX};
    for (size_t k = 0; k < sizeof removed / sizeof removed[0]; k++) {
        uint32_t t = removed[k];
        CHECK(ggml_blck_size(t) == 0 && ggml_type_size(t) == 0 && strcmp(ggml_type_name(t), "unknown") == 0,
              "type %u should be unknown", t);
        CHECK(ggml_row_bytes(t, 256) == 0, "row bytes of unknown type %u", t);
    }
    CHECK(ggml_row_bytes(GGML_TYPE_Q4_K, 512) == 288, "q4_K row");
    CHECK(ggml_row_bytes(GGML_TYPE_Q8_0, 640) == 680, "q8_0 row");
    CHECK(ggml_row_bytes(GGML_TYPE_F32, 3) == 12, "f32 row");
    CHECK(ggml_row_bytes(GGML_TYPE_Q4_K, 100) == 0, "q4_K partial block");
    CHECK(ggml_row_bytes(GGML_TYPE_F64, UINT64_MAX / 4) == 0, "overflow must give 0");
}

static void test_rich_v3(void) {
    buf b = {0};
    build_rich(&b, 3);
    gguf_file *f;
    char err[256];
    uint8_t *copy;
    int rc = open_copy(&f, b.p, b.n, err, sizeof err, &copy);
    CHECK(rc == 0, "open: %s", err);
    if (rc == 0) {
        check_rich(f, copy, b.n, 3);
        gguf_close(f);
    }
    free(copy);
    free(b.p);
}

static void test_rich_v2(void) {
    buf b = {0};
    build_rich(&b, 2);
    gguf_file *f;
    char err[256];
    uint8_t *copy;
    int rc = open_copy(&f, b.p, b.n, err, sizeof err, &copy);
    CHECK(rc == 0, "open v2: %s", err);
    if (rc == 0) {
        check_rich(f, copy, b.n, 2);
        gguf_close(f);
    }
    free(copy);
    free(b.p);
}

/* gguf_open maps the file; the same checks must hold against the mapping. */
static void test_open_file(void) {
    buf b = {0};
    build_rich(&b, 3);
    char path[] = "/tmp/test_gguf_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0) { free(b.p); return; }
    CHECK(write(fd, b.p, b.n) == (ssize_t)b.n, "write");
    gguf_file *f;
    char err[512];
    int rc = gguf_open(&f, path, err, sizeof err);
    CHECK(rc == 0, "open: %s", err);
    if (rc == 0) {
        const gguf_tensor *t = gguf_tensor_at(f, 0);
        /* base of the mapping = first tensor data minus its absolute file offset */
        const uint8_t *base = (const uint8_t *)t->data - (b.n - (RICH_T[RICH_NT - 1].off + RICH_T[RICH_NT - 1].nbytes));
        check_rich(f, base, b.n, 3);
        gguf_close(f);
    }
    /* a truncated file on disk: error names the file */
    CHECK(ftruncate(fd, (off_t)b.n - 1) == 0, "ftruncate");
    rc = gguf_open(&f, path, err, sizeof err);
    CHECK(rc == -1 && err_is_one_line(err) && strstr(err, path) && strstr(err, "past the end"),
          "truncated file: rc %d '%s'", rc, err);
    CHECK(ftruncate(fd, 0) == 0, "ftruncate 0");
    rc = gguf_open(&f, path, err, sizeof err);
    CHECK(rc == -1 && err_is_one_line(err) && strstr(err, "empty"), "empty file: '%s'", err);
    close(fd);
    unlink(path);
    rc = gguf_open(&f, path, err, sizeof err);
    CHECK(rc == -1 && err_is_one_line(err) && strstr(err, path) && strstr(err, "No such file"),
          "missing file: '%s'", err);
    rc = gguf_open(&f, "/tmp", err, sizeof err);
    CHECK(rc == -1 && err_is_one_line(err) && strstr(err, "not a regular file"), "directory: '%s'", err);
    /* tiny error buffers are respected */
    char small[8];
    memset(small, 'x', sizeof small);
    rc = gguf_open(&f, path, small, sizeof small);
    CHECK(rc == -1 && memchr(small, 0, sizeof small), "small err buffer not terminated");
    rc = gguf_open(&f, path, NULL, 0);
    CHECK(rc == -1, "NULL err buffer");
    free(b.p);
}

static void test_default_alignment_and_no_tensors(void) {
    /* no general.alignment: 32; one f32 tensor */
    buf b = {0};
    uint64_t ne[1] = {3};
    w_hdr(&b, 3, 1, 1);
    kv_str(&b, "general.name", "x");
    w_tinfo(&b, "w", 1, ne, GGML_TYPE_F32, 0);
    w_pad(&b, 32);
    size_t data = b.n;
    w_f32(&b, 1); w_f32(&b, 2); w_f32(&b, 3);
    gguf_file *f;
    char err[256];
    uint8_t *copy;
    int rc = open_copy(&f, b.p, b.n, err, sizeof err, &copy);
    CHECK(rc == 0, "open: %s", err);
    if (rc == 0) {
        CHECK(gguf_alignment(f) == 32, "default alignment %llu", (unsigned long long)gguf_alignment(f));
        const gguf_tensor *t = gguf_find_tensor(f, "w");
        CHECK(t && t->nbytes == 12 && (const uint8_t *)t->data == copy + data, "tensor w");
        gguf_close(f);
    }
    free(copy);

    /* metadata only, no tensors, no trailing padding: fine */
    b.n = 0;
    w_hdr(&b, 3, 0, 1);
    kv_u32(&b, "a", 7);
    rc = open_copy(&f, b.p, b.n, err, sizeof err, &copy);
    CHECK(rc == 0, "metadata-only: %s", err);
    if (rc == 0) {
        CHECK(gguf_tensor_count(f) == 0 && gguf_find_tensor(f, "a") == NULL && gguf_tensor_at(f, 0) == NULL,
              "no tensors");
        gguf_close(f);
    }
    free(copy);

    /* nothing at all but a header */
    b.n = 0;
    w_hdr(&b, 3, 0, 0);
    rc = open_copy(&f, b.p, b.n, err, sizeof err, &copy);
    CHECK(rc == 0, "header-only: %s", err);
    if (rc == 0) {
        CHECK(gguf_kv_count(f) == 0 && gguf_find_kv(f, "a") == NULL, "no kvs");
        gguf_close(f);
    }
    free(copy);

    /* zero-size tensors sharing an offset with a real one do not overlap anything */
    b.n = 0;
    uint64_t ne0[2] = {0, 4}, ne4[1] = {4};
    w_hdr(&b, 3, 3, 0);
    w_tinfo(&b, "empty1", 2, ne0, GGML_TYPE_F32, 0);
    w_tinfo(&b, "real", 1, ne4, GGML_TYPE_F32, 0);
    w_tinfo(&b, "empty2", 2, ne0, GGML_TYPE_Q4_K, 0);
    w_pad(&b, 32);
    w_zeros(&b, 16);
    rc = open_copy(&f, b.p, b.n, err, sizeof err, &copy);
    CHECK(rc == 0, "zero-size tensors: %s", err);
    if (rc == 0) {
        CHECK(gguf_find_tensor(f, "empty2") && gguf_find_tensor(f, "empty2")->nbytes == 0, "empty2");
        gguf_close(f);
    }
    free(copy);
    free(b.p);
}

/* Every proper prefix of a valid image must be rejected with one clean line, and every
 * read must stay inside the prefix (exact-size copies; ASan catches the rest). */
static void test_truncation_everywhere(void) {
    buf b = {0};
    build_rich(&b, 3);
    int bad = 0;
    for (size_t k = 0; k < b.n; k++) {
        char err[256] = "";
        gguf_file *f;
        uint8_t *copy;
        int rc = open_copy(&f, b.p, k, err, sizeof err, &copy);
        if (rc != -1 || f != NULL || !err_is_one_line(err)) {
            if (bad++ < 5) CHECK(0, "prefix of %zu/%zu bytes: rc %d err '%s'", k, b.n, rc, err);
            if (rc == 0) gguf_close(f);
        }
        free(copy);
    }
    CHECK(bad == 0, "%d prefixes misbehaved", bad);
    free(b.p);
}

/* The same over small images, one per value type, each as the LAST kv (with and without a
 * tensor after it): in the rich image the up-front kv-count bound rejects most truncations
 * before the per-value checks are reached, so those checks need images of their own. */
static void test_truncation_per_type(void) {
    int bad = 0, images = 0;
    for (uint32_t vt = 0; vt <= GGUF_VT_F64; vt++) {
        for (int with_tensor = 0; with_tensor < 2; with_tensor++) {
            buf b = {0};
            w_hdr(&b, 3, (uint64_t)with_tensor, 1);
            w_key(&b, "key", vt);
            static const uint8_t sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
            if (vt == GGUF_VT_STRING) w_str(&b, "value");
            else if (vt == GGUF_VT_ARRAY) { /* [["ab"], [7u32, 8u32]] */
                w_u32(&b, GGUF_VT_ARRAY); w_u64(&b, 2);
                w_u32(&b, GGUF_VT_STRING); w_u64(&b, 1); w_str(&b, "ab");
                w_u32(&b, GGUF_VT_U32); w_u64(&b, 2); w_u32(&b, 7); w_u32(&b, 8);
            } else for (int i = 0; i < sizes[vt]; i++) w_u8(&b, 1);
            if (with_tensor) {
                uint64_t ne[1] = {2};
                w_tinfo(&b, "t", 1, ne, GGML_TYPE_F32, 0);
                w_pad(&b, 32);
                w_f32(&b, 1); w_f32(&b, 2);
            }
            images++;
            gguf_file *f;
            char err[256];
            uint8_t *copy;
            int rc = open_copy(&f, b.p, b.n, err, sizeof err, &copy);
            CHECK(rc == 0, "type %u tensor %d: full image rejected: %s", vt, with_tensor, err);
            if (rc == 0) gguf_close(f);
            free(copy);
            for (size_t k = 0; k < b.n; k++) {
                err[0] = 0;
                rc = open_copy(&f, b.p, k, err, sizeof err, &copy);
                if (rc != -1 || !err_is_one_line(err)) {
                    if (bad++ < 5) CHECK(0, "type %u tensor %d prefix %zu/%zu: rc %d err '%s'",
                                         vt, with_tensor, k, b.n, rc, err);
                    if (rc == 0) gguf_close(f);
                }
                free(copy);
            }
            free(b.p);
        }
    }
    CHECK(bad == 0 && images == 26, "%d prefixes misbehaved", bad);
}

/* Single-byte corruption at every offset: either a clean error or a handle whose every
 * pointer stays inside the image. Deterministic, so failures reproduce. */
static void test_byte_corruption(void) {
    buf b = {0};
    build_rich(&b, 3);
    uint8_t *img = malloc(b.n);
    int bad = 0, opened = 0, rejected = 0;
    for (size_t k = 0; k < b.n; k++) {
        const uint8_t vals[4] = {0x00, 0xff, (uint8_t)(b.p[k] ^ 0x01), (uint8_t)(b.p[k] ^ 0x80)};
        for (int v = 0; v < 4; v++) {
            memcpy(img, b.p, b.n);
            img[k] = vals[v];
            char err[256] = "";
            gguf_file *f;
            if (gguf_open_memory(&f, img, b.n, err, sizeof err) == 0) {
                opened++;
                walk_all(f);
                gguf_close(f);
            } else {
                rejected++;
                if (!err_is_one_line(err) && bad++ < 5) CHECK(0, "byte %zu = %02x: err '%s'", k, vals[v], err);
            }
        }
    }
    CHECK(bad == 0, "%d corrupted images gave a bad error", bad);
    CHECK(opened > 0 && rejected > 0, "opened %d rejected %d: corruption should do both", opened, rejected);
    free(img);
    free(b.p);
}

static void test_bad_header(void) {
    buf b = {0};
    EXPECT_FAIL(&b, "too small");
    put(&b, "GGU", 3);
    EXPECT_FAIL(&b, "too small");
    b.n = 0;
    w_hdr(&b, 3, 0, 0);
    b.p[0] = 'g';
    EXPECT_FAIL(&b, "bad magic");
    b.n = 0; w_hdr(&b, 1, 0, 0);
    EXPECT_FAIL(&b, "version 1 is not supported");
    b.n = 0; w_hdr(&b, 0, 0, 0);
    EXPECT_FAIL(&b, "unsupported GGUF version 0");
    b.n = 0; w_hdr(&b, 4, 0, 0);
    EXPECT_FAIL(&b, "unsupported GGUF version 4");
    b.n = 0; w_hdr(&b, 0x03000000u, 0, 0);
    EXPECT_FAIL(&b, "big-endian");
    b.n = 0; w_hdr(&b, 3, 0, 0);
    b.n -= 1;
    EXPECT_FAIL(&b, "kv count at offset 16 lies past the end of the file (size 23)");

    char err[64] = "";
    gguf_file *f;
    CHECK(gguf_open_memory(&f, NULL, 10, err, sizeof err) == -1 && f == NULL && err_is_one_line(err), "NULL data");
    free(b.p);
}

static void test_huge_counts(void) {
    buf b = {0};
    w_hdr(&b, 3, 0, UINT64_MAX);
    w_zeros(&b, 64);
    EXPECT_FAIL(&b, "kv count 18446744073709551615 is impossible");
    b.n = 0;
    w_hdr(&b, 3, 0, 6); /* 6 kvs need >= 78 bytes; 64 remain */
    w_zeros(&b, 64);
    EXPECT_FAIL(&b, "kv count 6 is impossible");
    b.n = 0;
    w_hdr(&b, 3, 1ull << 40, 0);
    w_zeros(&b, 64);
    EXPECT_FAIL(&b, "tensor count 1099511627776 is impossible");
    b.n = 0;
    w_hdr(&b, 3, 3, 1); /* 3 tensors need >= 72 bytes; after the kv 60 remain */
    kv_u32(&b, "k", 1);
    w_zeros(&b, 60);
    EXPECT_FAIL(&b, "tensor count 3 is impossible");

    /* string lengths */
    b.n = 0;
    w_hdr(&b, 3, 0, 1);
    w_u64(&b, UINT64_MAX); /* key length */
    w_zeros(&b, 32);
    EXPECT_FAIL(&b, "key of kv #0 of 18446744073709551615 bytes at offset 24 runs past the end");
    b.n = 0;
    w_hdr(&b, 3, 0, 1);
    w_key(&b, "s", GGUF_VT_STRING);
    w_u64(&b, 1ull << 62);
    w_zeros(&b, 32);
    EXPECT_FAIL(&b, "'s': string value of 4611686018427387904 bytes");

    /* array lengths: n * element size would overflow 64 bits if computed naively */
    static const uint32_t et[] = {GGUF_VT_U8, GGUF_VT_U32, GGUF_VT_F64, GGUF_VT_STRING, GGUF_VT_ARRAY};
    static const uint64_t ns[] = {UINT64_MAX, 1ull << 61, 1ull << 62, 1ull << 32, 33};
    for (size_t i = 0; i < sizeof et / sizeof et[0]; i++) {
        for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++) {
            b.n = 0;
            w_hdr(&b, 3, 0, 1);
            w_key(&b, "arr", GGUF_VT_ARRAY);
            w_u32(&b, et[i]);
            w_u64(&b, ns[j]);
            w_zeros(&b, 32); /* 32 bytes: 33 u8 does not fit either */
            EXPECT_FAIL(&b, "'arr': array of");
        }
    }
    /* a string array whose count fits the 8-byte minimum but whose strings do not */
    b.n = 0;
    w_hdr(&b, 3, 0, 1);
    w_key(&b, "sa", GGUF_VT_ARRAY);
    w_u32(&b, GGUF_VT_STRING);
    w_u64(&b, 4);
    w_str(&b, "abc"); w_str(&b, "def"); w_u64(&b, 100); w_zeros(&b, 10);
    EXPECT_FAIL(&b, "'sa': array string of 100 bytes");
    /* nested: inner array count too big */
    b.n = 0;
    w_hdr(&b, 3, 0, 1);
    w_key(&b, "na", GGUF_VT_ARRAY);
    w_u32(&b, GGUF_VT_ARRAY); w_u64(&b, 1);
    w_u32(&b, GGUF_VT_U64); w_u64(&b, 1ull << 60);
    w_zeros(&b, 16);
    EXPECT_FAIL(&b, "'na': array of 1152921504606846976 u64");
    free(b.p);
}

static void test_bad_values(void) {
    buf b = {0};
    w_hdr(&b, 3, 0, 1);
    w_key(&b, "k", 13);
    w_zeros(&b, 8);
    EXPECT_FAIL(&b, "'k': unknown value type 13");
    b.n = 0;
    w_hdr(&b, 3, 0, 1);
    w_key(&b, "k", GGUF_VT_ARRAY);
    w_u32(&b, 0xffffffffu); w_u64(&b, 0);
    EXPECT_FAIL(&b, "'k': unknown array element type 4294967295");
    /* nesting deeper than the limit */
    b.n = 0;
    w_hdr(&b, 3, 0, 1);
    w_key(&b, "deep", GGUF_VT_ARRAY);
    for (int i = 0; i < 20; i++) { w_u32(&b, GGUF_VT_ARRAY); w_u64(&b, 1); }
    w_u32(&b, GGUF_VT_U8); w_u64(&b, 0);
    EXPECT_FAIL(&b, "'deep': arrays nested deeper than");
    /* ...but 4 levels are fine */
    b.n = 0;
    w_hdr(&b, 3, 0, 1);
    w_key(&b, "deep", GGUF_VT_ARRAY);
    for (int i = 0; i < 3; i++) { w_u32(&b, GGUF_VT_ARRAY); w_u64(&b, 1); }
    w_u32(&b, GGUF_VT_U8); w_u64(&b, 1); w_u8(&b, 42);
    gguf_file *f;
    char err[256];
    uint8_t *copy;
    int rc = open_copy(&f, b.p, b.n, err, sizeof err, &copy);
    CHECK(rc == 0, "4-level nesting: %s", err);
    if (rc == 0) {
        const gguf_kv *kv = gguf_find_kv(f, "deep");
        for (int i = 0; kv && i < 3; i++) kv = kv->arr_n == 1 ? &kv->arr_sub[0] : NULL;
        CHECK(kv && kv->arr_type == GGUF_VT_U8 && kv->arr_n == 1 && kv->data[0] == 42, "4-level leaf");
        gguf_close(f);
    }
    free(copy);

    /* a bool byte other than 0/1 still reads as true (the spec allows only 0/1; writers vary) */
    b.n = 0;
    w_hdr(&b, 3, 0, 1);
    w_key(&b, "b", GGUF_VT_BOOL); w_u8(&b, 2);
    rc = open_copy(&f, b.p, b.n, err, sizeof err, &copy);
    CHECK(rc == 0, "bool 2: %s", err);
    if (rc == 0) {
        int64_t v = -1;
        double d = -1;
        CHECK(gguf_get_int(f, "b", &v) == 0 && v == 1, "bool 2 as int: %lld", (long long)v);
        CHECK(gguf_get_float(f, "b", &d) == 0 && d == 1.0, "bool 2 as float: %g", d);
        gguf_close(f);
    }
    free(copy);

    /* NUL inside a key */
    b.n = 0;
    w_hdr(&b, 3, 0, 1);
    w_strn(&b, "gen\0eral", 8); w_u32(&b, GGUF_VT_U8); w_u8(&b, 1);
    EXPECT_FAIL(&b, "kv #0 key 'gen\\x00eral' at offset 24 contains a NUL byte");
    /* duplicate keys */
    b.n = 0;
    w_hdr(&b, 3, 0, 3);
    kv_u32(&b, "a.b", 1);
    kv_str(&b, "c", "x");
    kv_u32(&b, "a.b", 2);
    EXPECT_FAIL(&b, "duplicate key 'a.b' (kv #2");
    free(b.p);
}

static void test_bad_alignment(void) {
    buf b = {0};
    static const uint32_t bad[] = {0, 3, 48, 0x80000001u};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        b.n = 0;
        w_hdr(&b, 3, 0, 1);
        kv_u32(&b, "general.alignment", bad[i]);
        EXPECT_FAIL(&b, "is not a nonzero power of two");
    }
    b.n = 0;
    w_hdr(&b, 3, 0, 1);
    kv_str(&b, "general.alignment", "32");
    EXPECT_FAIL(&b, "general.alignment has type string");
    b.n = 0;
    w_hdr(&b, 3, 0, 1);
    w_key(&b, "general.alignment", GGUF_VT_I32); w_u32(&b, (uint32_t)-32);
    EXPECT_FAIL(&b, "general.alignment = -32 is not");
    b.n = 0;
    w_hdr(&b, 3, 0, 1);
    w_key(&b, "general.alignment", GGUF_VT_F32); w_f32(&b, 32.0f);
    EXPECT_FAIL(&b, "general.alignment has type f32");

    /* tensor offset not a multiple of the alignment */
    uint64_t ne[1] = {4};
    b.n = 0;
    w_hdr(&b, 3, 1, 1);
    kv_u32(&b, "general.alignment", 16);
    w_tinfo(&b, "t", 1, ne, GGML_TYPE_F32, 8);
    w_pad(&b, 16);
    w_zeros(&b, 32);
    EXPECT_FAIL(&b, "tensor 't' data offset 8 is not a multiple of the alignment 16");
    /* default 32 applies without the key */
    b.n = 0;
    w_hdr(&b, 3, 1, 0);
    w_tinfo(&b, "t", 1, ne, GGML_TYPE_F32, 16);
    w_pad(&b, 32);
    w_zeros(&b, 64);
    EXPECT_FAIL(&b, "not a multiple of the alignment 32");
    /* a huge (valid) alignment puts the data section past the end */
    b.n = 0;
    w_hdr(&b, 3, 1, 1);
    w_key(&b, "general.alignment", GGUF_VT_U64); w_u64(&b, 1ull << 40);
    w_tinfo(&b, "t", 1, ne, GGML_TYPE_F32, 0);
    w_zeros(&b, 64);
    EXPECT_FAIL(&b, "data section at offset 1099511627776 starts past the end");
    free(b.p);
}

static void test_bad_tensors(void) {
    buf b = {0};
    uint64_t ne[5] = {32, 2, 1, 1, 1};

    /* n_dims 5 */
    w_hdr(&b, 3, 1, 0);
    w_tinfo(&b, "blk.0.attn_q.weight", 5, ne, GGML_TYPE_F32, 0);
    w_pad(&b, 32); w_zeros(&b, 256);
    EXPECT_FAIL(&b, "tensor 'blk.0.attn_q.weight': n_dims 5 at offset");
    /* ne above INT64_MAX */
    b.n = 0;
    uint64_t big[2] = {32, 1ull << 63};
    w_hdr(&b, 3, 1, 0);
    w_tinfo(&b, "t", 2, big, GGML_TYPE_F32, 0);
    w_pad(&b, 32); w_zeros(&b, 64);
    EXPECT_FAIL(&b, "tensor 't': ne[1] = 9223372036854775808");
    /* element count overflowing int64 */
    b.n = 0;
    uint64_t ovf[4] = {1ull << 32, 1ull << 31, 1, 1};
    w_hdr(&b, 3, 1, 0);
    w_tinfo(&b, "t", 4, ovf, GGML_TYPE_F32, 0);
    w_pad(&b, 32); w_zeros(&b, 64);
    EXPECT_FAIL(&b, "tensor 't' element count 4294967296 x 2147483648 x 1 x 1 overflows");
    /* element count fits, byte count does not (8 bytes per f64) */
    b.n = 0;
    uint64_t ovb[1] = {1ull << 62};
    w_hdr(&b, 3, 1, 0);
    w_tinfo(&b, "t", 1, ovb, GGML_TYPE_F64, 0);
    w_pad(&b, 32); w_zeros(&b, 64);
    EXPECT_FAIL(&b, "byte size (4611686018427387904 x 1 x 1 x 1 of f64) overflows 64 bits");
    /* unknown/removed ggml types */
    static const uint32_t types[] = {4, 5, 31, 36, 40, 12345};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        b.n = 0;
        w_hdr(&b, 3, 1, 0);
        w_tinfo(&b, "t", 2, ne, types[i], 0);
        w_pad(&b, 32); w_zeros(&b, 256);
        char want[64];
        snprintf(want, sizeof want, "tensor 't' has unknown ggml type %u", types[i]);
        EXPECT_FAIL(&b, want);
    }
    /* ne[0] not a multiple of the block size */
    b.n = 0;
    uint64_t ne_q[2] = {640, 2};
    w_hdr(&b, 3, 1, 0);
    w_tinfo(&b, "q", 2, ne_q, GGML_TYPE_Q4_K, 0);
    w_pad(&b, 32); w_zeros(&b, 1024);
    EXPECT_FAIL(&b, "tensor 'q' ne[0] = 640 is not a multiple of the q4_K block size 256");
    /* data past the end: exact message */
    b.n = 0;
    w_hdr(&b, 3, 1, 0);
    w_tinfo(&b, "blk.0.attn_q.weight", 2, ne, GGML_TYPE_F32, 64);
    w_pad(&b, 32);
    size_t data = b.n;
    w_zeros(&b, 64 + 255);
    {
        char want[160];
        snprintf(want, sizeof want,
                 "gguf: tensor 'blk.0.attn_q.weight' data [%zu..%zu) lies past the end of the file (size %zu)",
                 data + 64, data + 64 + 256, b.n);
        char err[256] = "";
        gguf_file *f;
        uint8_t *copy;
        CHECK(open_copy(&f, b.p, b.n, err, sizeof err, &copy) == -1 && strcmp(err, want) == 0,
              "got '%s' want '%s'", err, want);
        free(copy);
    }
    /* offset itself past the end, and an offset that would wrap when added */
    b.n = 0;
    w_hdr(&b, 3, 1, 0);
    w_tinfo(&b, "t", 2, ne, GGML_TYPE_F32, 1ull << 20);
    w_pad(&b, 32); w_zeros(&b, 256);
    EXPECT_FAIL(&b, "lies past the end of the file");
    b.n = 0;
    w_hdr(&b, 3, 1, 0);
    w_tinfo(&b, "t", 2, ne, GGML_TYPE_F32, UINT64_MAX - 31);
    w_pad(&b, 32); w_zeros(&b, 256);
    EXPECT_FAIL(&b, "tensor 't' data offset 18446744073709551584 + 256 bytes lies past the end");
    /* overlapping tensors (and not just adjacent ones: b starts inside a) */
    b.n = 0;
    uint64_t n64[1] = {64};
    w_hdr(&b, 3, 3, 0);
    w_tinfo(&b, "a", 1, n64, GGML_TYPE_F32, 0);     /* [0..256) */
    w_tinfo(&b, "c", 1, n64, GGML_TYPE_F32, 512);   /* [512..768) */
    w_tinfo(&b, "b", 1, n64, GGML_TYPE_F32, 224);   /* [224..480) overlaps a */
    w_pad(&b, 32); w_zeros(&b, 768);
    EXPECT_FAIL(&b, "tensor 'b' data [224..480) overlaps tensor 'a' data [0..256)");
    /* same start */
    b.n = 0;
    w_hdr(&b, 3, 2, 0);
    w_tinfo(&b, "a", 1, n64, GGML_TYPE_F32, 256);
    w_tinfo(&b, "b", 1, n64, GGML_TYPE_F16, 256);
    w_pad(&b, 32); w_zeros(&b, 512);
    EXPECT_FAIL(&b, "overlaps tensor");
    /* one tensor entirely inside a bigger one that starts earlier, with a third in between */
    b.n = 0;
    uint64_t n256[1] = {256}, n8[1] = {8};
    w_hdr(&b, 3, 3, 0);
    w_tinfo(&b, "big", 1, n256, GGML_TYPE_F32, 0);  /* [0..1024) */
    w_tinfo(&b, "s1", 1, n8, GGML_TYPE_F32, 64);     /* [64..96) */
    w_tinfo(&b, "s2", 1, n8, GGML_TYPE_F32, 512);    /* [512..544) */
    w_pad(&b, 32); w_zeros(&b, 1024);
    EXPECT_FAIL(&b, "tensor 's1' data [64..96) overlaps tensor 'big'");
    /* adjacent is fine */
    b.n = 0;
    w_hdr(&b, 3, 2, 0);
    w_tinfo(&b, "a", 1, n64, GGML_TYPE_F32, 256);
    w_tinfo(&b, "b", 1, n64, GGML_TYPE_F32, 0);
    w_pad(&b, 32); w_zeros(&b, 512);
    {
        gguf_file *f;
        char err[256];
        uint8_t *copy;
        int rc = open_copy(&f, b.p, b.n, err, sizeof err, &copy);
        CHECK(rc == 0, "adjacent tensors: %s", err);
        if (rc == 0) gguf_close(f);
        free(copy);
    }
    /* duplicate tensor names */
    b.n = 0;
    w_hdr(&b, 3, 3, 0);
    w_tinfo(&b, "a", 1, n8, GGML_TYPE_F32, 0);
    w_tinfo(&b, "b", 1, n8, GGML_TYPE_F32, 32);
    w_tinfo(&b, "a", 1, n8, GGML_TYPE_F32, 64);
    w_pad(&b, 32); w_zeros(&b, 96);
    EXPECT_FAIL(&b, "duplicate tensor name 'a' (tensor #2, first seen as tensor #0)");
    /* NUL in a tensor name */
    b.n = 0;
    w_hdr(&b, 3, 1, 0);
    w_strn(&b, "a\0b", 3); w_u32(&b, 1); w_u64(&b, 8); w_u32(&b, GGML_TYPE_F32); w_u64(&b, 0);
    w_pad(&b, 32); w_zeros(&b, 32);
    EXPECT_FAIL(&b, "tensor #0 name 'a\\x00b'");
    /* infos end, but the data section does not fit */
    b.n = 0;
    w_hdr(&b, 3, 1, 0);
    w_tinfo(&b, "t", 1, n8, GGML_TYPE_F32, 0);
    EXPECT_FAIL(&b, "data section at offset");
    /* hostile names in messages are escaped and cut, keeping err one line */
    b.n = 0;
    char name[300];
    for (int i = 0; i < 299; i++) name[i] = (char)(i % 2 ? '\n' : 'x');
    name[299] = 0;
    w_hdr(&b, 3, 1, 0);
    w_tinfo(&b, name, 1, n8, 99, 0);
    w_pad(&b, 32); w_zeros(&b, 32);
    EXPECT_FAIL(&b, "x\\x0ax\\x0a");
    free(b.p);
}

static void test_real_model(void) {
    struct stat st;
    if (stat(MODEL_PATH, &st) != 0) {
        printf("SKIP test_real_model: %s not present (make model fetches it)\n", MODEL_PATH);
        return;
    }
    gguf_file *f;
    char err[512];
    double t0 = now_s();
    int rc = gguf_open(&f, MODEL_PATH, err, sizeof err);
    double dt = now_s() - t0;
    CHECK(rc == 0, "open: %s", err);
    if (rc) return;
    CHECK(dt < 0.5, "opening took %.3f s", dt);
    CHECK(gguf_version(f) == 3, "version %u", gguf_version(f));
    CHECK(gguf_tensor_count(f) == 236, "tensors %zu", gguf_tensor_count(f));
    CHECK(gguf_kv_count(f) == 33, "kvs %zu", gguf_kv_count(f));
    CHECK(gguf_file_size(f) == (size_t)st.st_size, "file size");
    CHECK(gguf_alignment(f) == 32, "alignment");
    gguf_str s;
    CHECK(gguf_get_str(f, "general.architecture", &s) == 0 && gguf_str_eq(s, "gemma3"), "architecture");
    int64_t v;
    CHECK(gguf_get_int(f, "gemma3.embedding_length", &v) == 0 && v == 640, "embedding_length");
    CHECK(gguf_get_int(f, "gemma3.block_count", &v) == 0 && v == 18, "block_count");
    CHECK(gguf_get_int(f, "tokenizer.ggml.add_bos_token", &v) == 0 && v == 1, "add_bos");
    double d;
    CHECK(gguf_get_float(f, "gemma3.rope.freq_base", &d) == 0 && d == 1000000.0, "freq_base");
    const gguf_tensor *t = gguf_find_tensor(f, "token_embd.weight");
    CHECK(t && t->type == GGML_TYPE_Q8_0 && t->n_dims == 2 && t->ne[0] == 640 && t->ne[1] == 262144 &&
          t->ne[2] == 1 && t->ne[3] == 1, "token_embd.weight");
    if (t) CHECK(t->nbytes == 640ull / 32 * 34 * 262144, "token_embd nbytes %llu", (unsigned long long)t->nbytes);
    const gguf_str *toks;
    uint64_t n;
    CHECK(gguf_get_str_arr(f, "tokenizer.ggml.tokens", &toks, &n) == 0 && n == 262144, "tokens");
    if (n == 262144) CHECK(gguf_str_eq(toks[0], "<pad>") && gguf_str_eq(toks[2], "<bos>"), "first tokens");
    uint32_t et;
    const void *p;
    CHECK(gguf_get_arr(f, "tokenizer.ggml.scores", &et, &n, &p) == 0 && et == GGUF_VT_F32 && n == 262144, "scores");
    CHECK(gguf_get_arr(f, "tokenizer.ggml.token_type", &et, &n, &p) == 0 && et == GGUF_VT_I32 && n == 262144,
          "token_type");
    uint64_t total = 0;
    for (size_t i = 0; i < gguf_tensor_count(f); i++) {
        t = gguf_tensor_at(f, i);
        total += t->nbytes;
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        CHECK(gguf_find_tensor(f, name) == t, "lookup of %s", name);
    }
    CHECK(total > 200000000ull && total < (uint64_t)st.st_size, "tensor bytes %llu", (unsigned long long)total);
    CHECK(gguf_find_tensor(f, "blk.17.ffn_down.weight") != NULL, "last block");
    gguf_close(f);
    printf("# opened %s in %.1f ms\n", MODEL_PATH, dt * 1e3);
}

/* check.h's RUN_TEST puts fflush() on the line of an unbraced if, which gcc's
 * -Wmisleading-indentation flags at every use; the code is correct, so silence just that. */
#pragma GCC diagnostic ignored "-Wmisleading-indentation"
int main(void) {
    RUN_TEST(test_type_table);
    RUN_TEST(test_rich_v3);
    RUN_TEST(test_rich_v2);
    RUN_TEST(test_open_file);
    RUN_TEST(test_default_alignment_and_no_tensors);
    RUN_TEST(test_truncation_everywhere);
    RUN_TEST(test_truncation_per_type);
    RUN_TEST(test_byte_corruption);
    RUN_TEST(test_bad_header);
    RUN_TEST(test_huge_counts);
    RUN_TEST(test_bad_values);
    RUN_TEST(test_bad_alignment);
    RUN_TEST(test_bad_tensors);
    RUN_TEST(test_real_model);
    CHECK_EXIT();
}
