/* fuzz_gguf.c — libFuzzer target for the GGUF reader.
 *
 * Opens the input with gguf_open_memory and, when it is accepted, checks the reader's promises
 * rather than just touching memory: every pointer stays inside the input, every lookup finds
 * what the index walk finds, every getter agrees with the kv's type, tensors are aligned,
 * sized by the type table and pairwise disjoint. A broken promise traps, so the fuzzer
 * reports it like a crash. Rejected inputs must leave one clean "gguf: ..." line in err.
 *
 * Build: tests/suites/fuzz_gguf.sh (clang -fsanitize=fuzzer,address,undefined). */
#include "gguf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(c) do { if (!(c)) __builtin_trap(); } while (0)

static const uint8_t *g_lo, *g_hi; /* the input, for range checks */

static void in_input(const void *p, uint64_t n) {
    const uint8_t *q = p;
    REQUIRE(n == 0 || (q >= g_lo && q <= g_hi && n <= (uint64_t)(g_hi - q)));
    volatile uint8_t sink = 0;
    for (uint64_t i = 0; i < n; i++) sink ^= q[i]; /* ASan checks each byte too */
    (void)sink;
}

static size_t vsize(uint32_t t) {
    static const uint8_t sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return t < sizeof sizes ? sizes[t] : 0;
}

static void walk_kv(const gguf_kv *kv, int depth) {
    REQUIRE(depth < 64);
    in_input(kv->key.ptr, kv->key.len);
    REQUIRE(kv->type <= GGUF_VT_F64);
    if (kv->type == GGUF_VT_STRING) {
        in_input(kv->str.ptr, kv->str.len);
    } else if (kv->type == GGUF_VT_ARRAY) {
        REQUIRE(kv->arr_type <= GGUF_VT_F64);
        if (kv->arr_type == GGUF_VT_STRING) {
            REQUIRE(kv->arr_n == 0 || kv->arr_strs);
            for (uint64_t i = 0; i < kv->arr_n; i++) in_input(kv->arr_strs[i].ptr, kv->arr_strs[i].len);
        } else if (kv->arr_type == GGUF_VT_ARRAY) {
            REQUIRE(kv->arr_n == 0 || kv->arr_sub);
            for (uint64_t i = 0; i < kv->arr_n; i++) {
                REQUIRE(kv->arr_sub[i].type == GGUF_VT_ARRAY && kv->arr_sub[i].key.len == 0);
                walk_kv(&kv->arr_sub[i], depth + 1);
            }
        } else {
            REQUIRE(kv->arr_n <= UINT64_MAX / vsize(kv->arr_type));
            in_input(kv->data, kv->arr_n * vsize(kv->arr_type));
        }
    } else {
        in_input(kv->data, vsize(kv->type));
    }
}

/* Every getter on this key must agree with the kv's type. */
static void check_getters(const gguf_file *f, const gguf_kv *kv, const char *key) {
    int64_t i;
    double d;
    gguf_str s;
    uint32_t et;
    uint64_t n;
    const void *p;
    const gguf_str *ss;
    int is_int = kv->type <= GGUF_VT_I32 && kv->type != GGUF_VT_F32;
    is_int |= kv->type == GGUF_VT_BOOL || kv->type == GGUF_VT_U64 || kv->type == GGUF_VT_I64;

    int rc = gguf_get_int(f, key, &i);
    if (kv->type == GGUF_VT_U64) {
        uint64_t u;
        memcpy(&u, kv->data, 8);
        REQUIRE(rc == (u > (uint64_t)INT64_MAX ? -2 : 0));
    } else {
        REQUIRE(rc == (is_int ? 0 : -2));
    }
    rc = gguf_get_float(f, key, &d);
    REQUIRE(rc == (is_int || kv->type == GGUF_VT_F32 || kv->type == GGUF_VT_F64 ? 0 : -2));
    rc = gguf_get_str(f, key, &s);
    REQUIRE(rc == (kv->type == GGUF_VT_STRING ? 0 : -2));
    if (!rc) REQUIRE(s.ptr == kv->str.ptr && s.len == kv->str.len);
    int num_arr = kv->type == GGUF_VT_ARRAY && vsize(kv->arr_type) != 0;
    rc = gguf_get_arr(f, key, &et, &n, &p);
    REQUIRE(rc == (num_arr ? 0 : -2));
    if (!rc) REQUIRE(et == kv->arr_type && n == kv->arr_n && p == kv->data);
    int str_arr = kv->type == GGUF_VT_ARRAY && kv->arr_type == GGUF_VT_STRING;
    rc = gguf_get_str_arr(f, key, &ss, &n);
    REQUIRE(rc == (str_arr ? 0 : -2));
    if (!rc) REQUIRE(ss == kv->arr_strs && n == kv->arr_n);
}

static void check_file(const gguf_file *f, const uint8_t *data, size_t size) {
    REQUIRE(gguf_file_size(f) == size);
    REQUIRE(gguf_version(f) == 2 || gguf_version(f) == 3);
    uint64_t align = gguf_alignment(f);
    REQUIRE(align && !(align & (align - 1)));

    size_t nkv = gguf_kv_count(f);
    REQUIRE(gguf_kv_at(f, nkv) == NULL);
    for (size_t i = 0; i < nkv; i++) {
        const gguf_kv *kv = gguf_kv_at(f, i);
        REQUIRE(kv);
        walk_kv(kv, 0);
        REQUIRE(!memchr(kv->key.ptr, 0, kv->key.len));
        char *key = malloc(kv->key.len + 1);
        memcpy(key, kv->key.ptr, kv->key.len);
        key[kv->key.len] = 0;
        REQUIRE(gguf_find_kv(f, key) == kv); /* keys are unique */
        check_getters(f, kv, key);
        free(key);
    }

    size_t nt = gguf_tensor_count(f);
    REQUIRE(gguf_tensor_at(f, nt) == NULL);
    for (size_t i = 0; i < nt; i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        REQUIRE(t && t->n_dims <= GGUF_MAX_DIMS);
        in_input(t->name.ptr, t->name.len);
        REQUIRE(!memchr(t->name.ptr, 0, t->name.len));
        char *name = malloc(t->name.len + 1);
        memcpy(name, t->name.ptr, t->name.len);
        name[t->name.len] = 0;
        REQUIRE(gguf_find_tensor(f, name) == t);
        free(name);
        REQUIRE(ggml_blck_size(t->type) != 0);
        REQUIRE(strcmp(ggml_type_name(t->type), "unknown") != 0);
        for (uint32_t d = t->n_dims; d < GGUF_MAX_DIMS; d++) REQUIRE(t->ne[d] == 1);
        unsigned __int128 nb = (unsigned __int128)(t->ne[0] / ggml_blck_size(t->type)) * ggml_type_size(t->type);
        for (int d = 1; d < GGUF_MAX_DIMS; d++) nb *= t->ne[d];
        REQUIRE(t->ne[0] % ggml_blck_size(t->type) == 0);
        REQUIRE(nb == t->nbytes);
        REQUIRE(t->offset % align == 0);
        REQUIRE((uintptr_t)((const uint8_t *)t->data - data) % align == 0 ||
                t->nbytes == 0); /* absolute position aligned too (data section is aligned) */
        in_input(t->data, t->nbytes);
    }
    /* pairwise disjoint (quadratic, so only for small tables) */
    if (nt <= 512) {
        for (size_t i = 0; i < nt; i++) {
            const gguf_tensor *a = gguf_tensor_at(f, i);
            for (size_t j = i + 1; j < nt && a->nbytes; j++) {
                const gguf_tensor *b = gguf_tensor_at(f, j);
                if (!b->nbytes) continue;
                REQUIRE(a->offset + a->nbytes <= b->offset || b->offset + b->nbytes <= a->offset);
            }
        }
    }
}

static void check_err(const char *err, size_t errlen) {
    size_t n = strnlen(err, errlen);
    REQUIRE(n < errlen); /* NUL-terminated within the buffer */
    REQUIRE(!memchr(err, '\n', n));
    if (errlen > 7) REQUIRE(n > 6 && memcmp(err, "gguf: ", 6) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    g_lo = data;
    g_hi = data + size;
    char err[256];
    memset(err, 0x5a, sizeof err);
    gguf_file *f = (gguf_file *)&err;
    if (gguf_open_memory(&f, data, size, err, sizeof err) == 0) {
        REQUIRE(f != NULL);
        check_file(f, data, size);
        gguf_close(f);
    } else {
        REQUIRE(f == NULL);
        check_err(err, sizeof err);
        /* the same failure into a tiny buffer must still be truncated safely */
        char small[9];
        size_t len = 1 + size % sizeof small;
        memset(small, 0x5a, sizeof small);
        REQUIRE(gguf_open_memory(&f, data, size, small, len) == -1);
        check_err(small, len);
    }
    return 0;
}
