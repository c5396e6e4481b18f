/* tok_test.h — what the tokenizer tests and the tokenizer fuzzer share: the smallest JSON reader
 * the golden files need (tools/gen_golden_tokens.py, tools/gen_tokenizer_corpus.py: strings
 * decoded to UTF-8 with \u escapes and surrogate pairs, numbers as doubles, arrays, objects),
 * strict UTF-8 validation, encode/decode into exact-size buffers, a hash over every piece, and
 * CPU / wall clocks. Static functions only (each includes it once; unused ones are fine). */
#ifndef CLGEMMA_TOK_TEST_H
#define CLGEMMA_TOK_TEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gguf.h"
#include "tokenizer.h"
#include "tokenizer_gguf.h"

#define TT_FN static __attribute__((unused))

enum jtype { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };
typedef struct jval jval;
struct jval {
    enum jtype type;
    double num;
    int boolean;
    char *str; size_t len;       /* J_STR (decoded UTF-8); object keys too */
    jval *items; size_t n;       /* J_ARR elements, J_OBJ values */
    char **keys;                 /* J_OBJ keys */
};

typedef struct { const char *p, *end; int bad; } jparser;

TT_FN void jskip(jparser *j) { while (j->p < j->end && strchr(" \t\r\n", *j->p)) j->p++; }

TT_FN void put_utf8(char **buf, size_t *n, uint32_t cp) {
    char *b = *buf + *n;
    if (cp < 0x80) { b[0] = (char)cp; *n += 1; }
    else if (cp < 0x800) { b[0] = (char)(0xc0 | cp >> 6); b[1] = (char)(0x80 | (cp & 63)); *n += 2; }
    else if (cp < 0x10000) { b[0] = (char)(0xe0 | cp >> 12); b[1] = (char)(0x80 | (cp >> 6 & 63)); b[2] = (char)(0x80 | (cp & 63)); *n += 3; }
    else { b[0] = (char)(0xf0 | cp >> 18); b[1] = (char)(0x80 | (cp >> 12 & 63)); b[2] = (char)(0x80 | (cp >> 6 & 63)); b[3] = (char)(0x80 | (cp & 63)); *n += 4; }
}

TT_FN int hex4(const char *p, uint32_t *v) {
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        *v = *v * 16 + (uint32_t)d;
    }
    return 0;
}

TT_FN char *jstring(jparser *j, size_t *len) {
    if (j->p >= j->end || *j->p != '"') { j->bad = 1; return NULL; }
    j->p++;
    const char *s = j->p;
    while (j->p < j->end && *j->p != '"') j->p += *j->p == '\\' ? 2 : 1;
    if (j->p >= j->end) { j->bad = 1; return NULL; }
    char *out = malloc((size_t)(j->p - s) + 1); /* decoded is never longer */
    size_t n = 0;
    for (const char *q = s; q < j->p;) {
        if (*q != '\\') { out[n++] = *q++; continue; }
        q++;
        switch (*q) {
        case 'n': out[n++] = '\n'; q++; break;
        case 't': out[n++] = '\t'; q++; break;
        case 'r': out[n++] = '\r'; q++; break;
        case 'b': out[n++] = '\b'; q++; break;
        case 'f': out[n++] = '\f'; q++; break;
        case 'u': {
            uint32_t cp, lo;
            if (j->p - q < 5 || hex4(q + 1, &cp)) { j->bad = 1; free(out); return NULL; }
            q += 5;
            if (cp >= 0xd800 && cp < 0xdc00 && j->p - q >= 6 && q[0] == '\\' && q[1] == 'u' && !hex4(q + 2, &lo) &&
                lo >= 0xdc00 && lo < 0xe000) {
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                q += 6;
            }
            put_utf8(&out, &n, cp);
            break;
        }
        default: out[n++] = *q++; break; /* \" \\ \/ */
        }
    }
    j->p++;
    out[n] = 0;
    *len = n;
    return out;
}

TT_FN void jparse(jparser *j, jval *v) {
    memset(v, 0, sizeof *v);
    jskip(j);
    if (j->p >= j->end) { j->bad = 1; return; }
    char c = *j->p;
    if (c == '"') { v->type = J_STR; v->str = jstring(j, &v->len); return; }
    if (c == '[' || c == '{') {
        int obj = c == '{';
        v->type = obj ? J_OBJ : J_ARR;
        j->p++;
        size_t cap = 0;
        for (;;) {
            jskip(j);
            if (j->p < j->end && *j->p == (obj ? '}' : ']')) { j->p++; return; }
            if (v->n) {
                if (j->p >= j->end || *j->p != ',') { j->bad = 1; return; }
                j->p++;
                jskip(j);
            }
            if (v->n == cap) {
                cap = cap ? cap * 2 : 8;
                v->items = realloc(v->items, cap * sizeof *v->items);
                if (obj) v->keys = realloc(v->keys, cap * sizeof *v->keys);
            }
            if (obj) {
                size_t kl;
                v->keys[v->n] = jstring(j, &kl);
                jskip(j);
                if (j->bad || j->p >= j->end || *j->p != ':') { j->bad = 1; return; }
                j->p++;
            }
            jparse(j, &v->items[v->n++]);
            if (j->bad) return;
        }
    }
    if (!strncmp(j->p, "true", 4)) { v->type = J_BOOL; v->boolean = 1; j->p += 4; return; }
    if (!strncmp(j->p, "false", 5)) { v->type = J_BOOL; j->p += 5; return; }
    if (!strncmp(j->p, "null", 4)) { v->type = J_NULL; j->p += 4; return; }
    char *e;
    v->type = J_NUM;
    v->num = strtod(j->p, &e);
    if (e == j->p) j->bad = 1;
    j->p = e;
}

TT_FN void jfree(jval *v) {
    for (size_t i = 0; i < v->n; i++) {
        jfree(&v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items); free(v->keys); free(v->str);
}

TT_FN const jval *jget(const jval *o, const char *key) {
    if (!o || o->type != J_OBJ) return NULL;
    for (size_t i = 0; i < o->n; i++)
        if (o->keys[i] && !strcmp(o->keys[i], key)) return &o->items[i];
    return NULL;
}

/* a whole file, NUL-terminated (not counted in *n); NULL when unreadable */
TT_FN char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long s = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = s >= 0 ? malloc((size_t)s + 1) : NULL;
    *n = b ? fread(b, 1, (size_t)s, f) : 0;
    fclose(f);
    if (b) b[*n] = 0;
    return b;
}

/* reads a whole JSON file; 0 on success */
TT_FN int jload(const char *path, jval *root) {
    size_t n;
    char *buf = slurp(path, &n);
    if (!buf) return -1;
    jparser j = { buf, buf + n, 0 };
    jparse(&j, root);
    free(buf);
    return j.bad ? -1 : 0;
}

/* a golden file's "cases" array (NULL when the file or the array is missing) */
TT_FN const jval *jload_cases(const char *path, jval *root) {
    if (jload(path, root)) return NULL;
    const jval *cs = jget(root, "cases");
    return cs && cs->type == J_ARR ? cs : NULL;
}

/* an array of numbers as token ids (malloc'd; NULL if a is no array) */
TT_FN int32_t *ids_of(const jval *a, int *n) {
    *n = 0;
    if (!a || a->type != J_ARR) return NULL;
    int32_t *ids = malloc((a->n ? a->n : 1) * sizeof *ids);
    for (size_t i = 0; i < a->n; i++) ids[i] = (int32_t)a->items[i].num;
    *n = (int)a->n;
    return ids;
}

/* decodes a J_STR of hex digits in place (then marks it J_NULL: it holds bytes now) */
TT_FN int unhex(jval *v) {
    if (!v || v->type != J_STR || v->len % 2) return -1;
    size_t n = 0;
    for (size_t i = 0; i < v->len; i += 2) {
        char b[3] = { v->str[i], v->str[i + 1], 0 }, *e;
        long x = strtol(b, &e, 16);
        if (*e) return -1;
        v->str[n++] = (char)x;
    }
    v->len = n;
    v->type = J_NULL;
    return 0;
}

/* bytes of a golden field: "key" as UTF-8 text, or "key_hex" as hex digits (decoded in place) */
typedef struct jbytes { const char *p; size_t n; int ok; } jbytes;

TT_FN jbytes jget_bytes(const jval *obj, const char *key) {
    const jval *v = jget(obj, key);
    if (v && v->type == J_STR) return (jbytes){ v->str, v->len, 1 };
    char hk[64];
    snprintf(hk, sizeof hk, "%s_hex", key);
    jval *h = (jval *)jget(obj, hk);
    if (unhex(h)) return (jbytes){ NULL, 0, 0 };
    return (jbytes){ h->str, h->len, 1 };
}

TT_FN int bytes_eq(const char *a, size_t na, jbytes b) { return b.ok && na == b.n && (na == 0 || !memcmp(a, b.p, na)); }

/* llama.cpp's tests/test-tokenizer-0 cases of a vocabulary, read as that test reads them: VOCAB.inp
 * holds the texts separated (newer files: each followed) by "\n__ggml_vocab_test__\n", VOCAB.out one
 * line of ids per text.
 * Calls fn for each case (k counts from 0); returns the number of cases, -1 when a file is
 * unreadable or has a line too few or too many ids. */
typedef void tt_case_fn(void *ctx, int k, const char *text, size_t len, const int32_t *ids, int n);

TT_FN int for_llama_cases(const char *vocab, tt_case_fn *fn, void *ctx) {
    char path[512];
    size_t ni, no;
    snprintf(path, sizeof path, "%s.inp", vocab);
    char *inp = slurp(path, &ni);
    snprintf(path, sizeof path, "%s.out", vocab);
    char *out = slurp(path, &no);
    static const char sep[] = "\n__ggml_vocab_test__\n";
    int k = inp && out ? 0 : -1;
    for (char *p = inp, *o = out; k >= 0;) {
        char *nx = strstr(p, sep);
        size_t l = nx ? (size_t)(nx - p) : strlen(p);
        char *eol = strchr(o, '\n');
        if (!eol && !*o) { k = -1; break; }
        if (eol) *eol = 0;
        int32_t want[4096];
        int nw = 0;
        for (char *q = o, *e; *q && nw < 4096;) {
            long v = strtol(q, &e, 10);
            if (e == q) { q++; continue; }
            want[nw++] = (int32_t)v;
            q = e;
        }
        fn(ctx, k++, p, l, want, nw);
        if (!nx) break;
        p = nx + sizeof sep - 1;
        o = eol ? eol + 1 : o + strlen(o);
        if (!*p && !*o) break; /* a separator after the last text */
    }
    free(inp); free(out);
    return k;
}

/* ------------------------------------------------------------------ tokenizer helpers */

/* time bounds are multiplied by this: sanitizers slow everything down, and bounds stay meaningful */
#if defined(__SANITIZE_ADDRESS__)
#define TT_TIME_SCALE 10.0
#else
#define TT_TIME_SCALE 1.0
#endif

/* Timing bounds use this thread's CPU time: the build machine is shared (parallel builds of
 * other parts), and waiting for a core is not the tokenizer's cost. Wall time is printed too. */
TT_FN double cpu_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

TT_FN double wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

TT_FN int ids_eq(const int32_t *a, int na, const int32_t *b, int nb) {
    return na == nb && (na == 0 || memcmp(a, b, (size_t)na * sizeof *a) == 0);
}

TT_FN void print_ids(const char *label, const int32_t *ids, int n) {
    printf("  %s (%d):", label, n);
    for (int i = 0; i < n && i < 64; i++) printf(" %d", ids[i]);
    printf("%s\n", n > 64 ? " ..." : "");
}

/* strict UTF-8: no overlong forms, surrogates or code points past U+10FFFF */
TT_FN int valid_utf8(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t need = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
        if (!need || i + need > n) return 0;
        for (size_t k = 1; k < need; k++) if ((s[i + k] & 0xc0) != 0x80) return 0;
        if ((c == 0xe0 && s[i + 1] < 0xa0) || (c == 0xed && s[i + 1] > 0x9f) ||
            (c == 0xf0 && s[i + 1] < 0x90) || (c == 0xf4 && s[i + 1] > 0x8f)) return 0;
        i += need;
    }
    return 1;
}

/* ids in a buffer of exactly the right size, found by a first call with cap 0 */
TT_FN int32_t *encode_alloc(const tokenizer *t, const char *text, size_t len, int add_special, int parse_special, int *n) {
    *n = tokenizer_encode(t, text, len, add_special, parse_special, NULL, 0);
    if (*n < 0) return NULL;
    int32_t *ids = malloc((size_t)(*n ? *n : 1) * sizeof *ids);
    if (tokenizer_encode(t, text, len, add_special, parse_special, ids, *n) != *n) { free(ids); *n = -1; return NULL; }
    return ids;
}

/* the pieces of ids joined (NUL-terminated, *len without it) */
TT_FN char *pieces_alloc(const tokenizer *t, const int32_t *ids, int n, int render_special, size_t *len) {
    size_t cap = 64, l = 0;
    char *out = malloc(cap);
    for (int i = 0; i < n; i++) {
        int k = tokenizer_piece(t, ids[i], render_special, NULL, 0);
        if (k < 0) { free(out); return NULL; }
        while (l + (size_t)k + 1 > cap) out = realloc(out, cap *= 2);
        tokenizer_piece(t, ids[i], render_special, out + l, k);
        l += (size_t)k;
    }
    out[l] = 0;
    *len = l;
    return out;
}

/* tokenizer_detokenize into a buffer of exactly the right size (NUL-terminated, *len without it) */
TT_FN char *detok_alloc(const tokenizer *t, const int32_t *ids, int n, int remove_special, int unparse_special, size_t *len) {
    int k = tokenizer_detokenize(t, ids, n, remove_special, unparse_special, NULL, 0);
    if (k < 0) return NULL;
    char *out = malloc((size_t)k + 1);
    if (tokenizer_detokenize(t, ids, n, remove_special, unparse_special, out, k) != k) { free(out); return NULL; }
    out[k] = 0;
    *len = (size_t)k;
    return out;
}

/* FNV-1a-64 over every token's piece (length as 4 little-endian bytes, then the bytes), as the
 * generators compute it from llama_token_to_piece */
TT_FN uint64_t fnv_pieces(const tokenizer *t, int render_special) {
    uint64_t h = 0xcbf29ce484222325ull;
    char buf[256];
    for (uint32_t id = 0; id < tokenizer_n_vocab(t); id++) {
        int n = tokenizer_piece(t, (int32_t)id, render_special, buf, (int)sizeof buf);
        if (n < 0 || n > (int)sizeof buf) return 0;
        unsigned char hdr[4] = { (unsigned char)n, (unsigned char)(n >> 8), (unsigned char)(n >> 16), (unsigned char)(n >> 24) };
        for (int k = 0; k < 4; k++) { h ^= hdr[k]; h *= 0x100000001b3ull; }
        for (int k = 0; k < n; k++) { h ^= (unsigned char)buf[k]; h *= 0x100000001b3ull; }
    }
    return h;
}

/* Opens path and builds its tokenizer (the tokenizer keeps its own copy, the file is closed),
 * timing both. On failure prints "FAIL <setup>: why" and returns -1. */
TT_FN int load_timed(const char *path, const char *setup, tokenizer **t, double *cpu, double *wall) {
    char err[256] = "";
    gguf_file *f = NULL;
    double t0 = cpu_ms(), w0 = wall_ms();
    if (gguf_open(&f, path, err, sizeof err) != 0) {
        printf("FAIL %s: cannot open %s: %s\n", setup, path, err);
        return -1;
    }
    int rc = tokenizer_from_gguf(t, f, err, sizeof err);
    *cpu = cpu_ms() - t0;
    *wall = wall_ms() - w0;
    gguf_close(f);
    if (rc != 0) printf("FAIL %s: tokenizer_from_gguf(%s): %s\n", setup, path, err);
    return rc;
}

/* compares fnv_pieces with the golden's "pieces_fnv1a64" / "pieces_special_fnv1a64"; 0 when
 * both match, else -1 with what differs in why */
TT_FN int check_piece_hashes(const tokenizer *t, const jval *golden, char *why, size_t whylen) {
    static const char *const keys[2] = { "pieces_fnv1a64", "pieces_special_fnv1a64" };
    for (int special = 0; special < 2; special++) {
        const jval *want = jget(golden, keys[special]);
        char got[17];
        snprintf(got, sizeof got, "%016llx", (unsigned long long)fnv_pieces(t, special));
        if (!want || want->type != J_STR || strcmp(got, want->str)) {
            snprintf(why, whylen, "%s: ours %s, llama.cpp %s", keys[special], got, want && want->type == J_STR ? want->str : "missing");
            return -1;
        }
    }
    return 0;
}

#endif
