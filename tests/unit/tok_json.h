/* tok_json.h — the smallest JSON reader the tokenizer tests need (golden files written by
 * tools/gen_golden_tokens.py and tools/gen_tokenizer_corpus.py): strings decoded to UTF-8
 * (\u escapes and surrogate pairs), numbers as doubles, arrays, objects. Static functions only:
 * each test includes it once. */
#ifndef CLGEMMA_TOK_JSON_H
#define CLGEMMA_TOK_JSON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static void jskip(jparser *j) { while (j->p < j->end && strchr(" \t\r\n", *j->p)) j->p++; }

static void put_utf8(char **buf, size_t *n, uint32_t cp) {
    char *b = *buf + *n;
    if (cp < 0x80) { b[0] = (char)cp; *n += 1; }
    else if (cp < 0x800) { b[0] = (char)(0xc0 | cp >> 6); b[1] = (char)(0x80 | (cp & 63)); *n += 2; }
    else if (cp < 0x10000) { b[0] = (char)(0xe0 | cp >> 12); b[1] = (char)(0x80 | (cp >> 6 & 63)); b[2] = (char)(0x80 | (cp & 63)); *n += 3; }
    else { b[0] = (char)(0xf0 | cp >> 18); b[1] = (char)(0x80 | (cp >> 12 & 63)); b[2] = (char)(0x80 | (cp >> 6 & 63)); b[3] = (char)(0x80 | (cp & 63)); *n += 4; }
}

static int hex4(const char *p, uint32_t *v) {
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        *v = *v * 16 + (uint32_t)d;
    }
    return 0;
}

static char *jstring(jparser *j, size_t *len) {
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

static void jparse(jparser *j, jval *v) {
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

static void jfree(jval *v) {
    for (size_t i = 0; i < v->n; i++) {
        jfree(&v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items); free(v->keys); free(v->str);
}

static const jval *jget(const jval *o, const char *key) {
    if (!o || o->type != J_OBJ) return NULL;
    for (size_t i = 0; i < o->n; i++)
        if (o->keys[i] && !strcmp(o->keys[i], key)) return &o->items[i];
    return NULL;
}

/* reads a whole JSON file; 0 on success */
static int jload(const char *path, jval *root) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return -1;
    fseek(fp, 0, SEEK_END);
    long sz = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *buf = malloc((size_t)sz + 1);
    size_t got = buf ? fread(buf, 1, (size_t)sz, fp) : 0;
    fclose(fp);
    if (!buf) return -1;
    buf[got] = 0;
    jparser j = { buf, buf + got, 0 };
    jparse(&j, root);
    free(buf);
    return j.bad ? -1 : 0;
}

#endif
