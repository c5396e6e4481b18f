/* chat_py.c — Python's view of JSON values as jinja2 templates see them (json.loads types: dict in
 * insertion order, list, str, int, float, bool, None): truthiness, ==, str()/repr() (float repr is the
 * shortest round-trip form), str.strip() with Unicode whitespace, upper()/lower(), dictsort (case-insensitive,
 * stable). Limits, documented rather than hidden: repr escapes the non-printable code points listed in
 * nonprint[] but not unassigned ones; case mapping covers ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic and
 * fullwidth Latin (plus ß -> SS, İ -> i̇), other letters are left as they are; integers beyond 64 bits arrive
 * clamped by json-c's parser (Python keeps them exact). */
#include "chat_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char py_undef_tag = 0;

/* ---- strbuf ---- */

void sb_put(strbuf *b, const char *s, size_t n)
{
    if (b->oom || n == 0) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) { b->oom = 1; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void sb_puts(strbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

void sb_free(strbuf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* ---- UTF-8 ---- */

/* one code point at s (n > 0): its length; an invalid byte decodes to itself (length 1) */
static size_t u8_dec(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned c = s[0];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || len > n) { *cp = c; return 1; }
    uint32_t v = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) { *cp = c; return 1; }
        v = v << 6 | (s[i] & 0x3f);
    }
    *cp = v;
    return len;
}

static void u8_put(strbuf *b, uint32_t c)
{
    char t[4];
    size_t n;
    if (c < 0x80) { t[0] = (char)c; n = 1; }
    else if (c < 0x800) { t[0] = (char)(0xc0 | c >> 6); t[1] = (char)(0x80 | (c & 0x3f)); n = 2; }
    else if (c < 0x10000) { t[0] = (char)(0xe0 | c >> 12); t[1] = (char)(0x80 | (c >> 6 & 0x3f)); t[2] = (char)(0x80 | (c & 0x3f)); n = 3; }
    else { t[0] = (char)(0xf0 | c >> 18); t[1] = (char)(0x80 | (c >> 12 & 0x3f)); t[2] = (char)(0x80 | (c >> 6 & 0x3f)); t[3] = (char)(0x80 | (c & 0x3f)); n = 4; }
    sb_put(b, t, n);
}

/* ---- values ---- */

json_object *py_get(json_object *v, const char *key)
{
    json_object *r;
    if (v == PY_UNDEF || !v || json_object_get_type(v) != json_type_object) return PY_UNDEF;
    return json_object_object_get_ex(v, key, &r) ? r : PY_UNDEF;
}

json_object *py_dict_get(json_object *v, const char *key)
{
    json_object *r = py_get(v, key);
    return r == PY_UNDEF ? NULL : r;
}

int py_truthy(json_object *v)
{
    if (v == PY_UNDEF || !v) return 0;
    switch (json_object_get_type(v)) {
    case json_type_boolean: return json_object_get_boolean(v);
    case json_type_int: return json_object_get_int64(v) != 0;
    case json_type_double: return json_object_get_double(v) != 0.0;
    case json_type_string: return json_object_get_string_len(v) > 0;
    case json_type_array: return json_object_array_length(v) > 0;
    case json_type_object: return json_object_object_length(v) > 0;
    default: return 0;
    }
}

static int is_type(json_object *v, json_type t) { return v != PY_UNDEF && v && json_object_get_type(v) == t; }
int py_is_str(json_object *v) { return is_type(v, json_type_string); }
int py_is_map(json_object *v) { return is_type(v, json_type_object); }
int py_is_list(json_object *v) { return is_type(v, json_type_array); }
int py_is_seq(json_object *v) { return v == PY_UNDEF || py_is_list(v) || py_is_map(v) || py_is_str(v); }

static int is_num(json_object *v)
{
    return is_type(v, json_type_int) || is_type(v, json_type_double) || is_type(v, json_type_boolean);
}

int py_eq(json_object *a, json_object *b)
{
    if (a == PY_UNDEF || b == PY_UNDEF) return a == b;
    if (!a || !b) return a == b;
    if (is_num(a) && is_num(b)) {
        int ad = is_type(a, json_type_double), bd = is_type(b, json_type_double);
        if (!ad && !bd) return json_object_get_int64(a) == json_object_get_int64(b) &&
                               json_object_get_uint64(a) == json_object_get_uint64(b);
        return json_object_get_double(a) == json_object_get_double(b);
    }
    json_type t = json_object_get_type(a);
    if (t != json_object_get_type(b)) return 0;
    if (t == json_type_string)
        return json_object_get_string_len(a) == json_object_get_string_len(b) &&
               memcmp(json_object_get_string(a), json_object_get_string(b), (size_t)json_object_get_string_len(a)) == 0;
    if (t == json_type_array) {
        size_t n = json_object_array_length(a);
        if (n != json_object_array_length(b)) return 0;
        for (size_t i = 0; i < n; i++)
            if (!py_eq(json_object_array_get_idx(a, i), json_object_array_get_idx(b, i))) return 0;
        return 1;
    }
    if (t == json_type_object) {
        if (json_object_object_length(a) != json_object_object_length(b)) return 0;
        json_object_object_foreach(a, k, va) {
            json_object *vb;
            if (!json_object_object_get_ex(b, k, &vb) || !py_eq(va, vb)) return 0;
        }
        return 1;
    }
    return 0;
}

int py_eq_str(json_object *v, const char *s)
{
    return py_is_str(v) && (size_t)json_object_get_string_len(v) == strlen(s) &&
           memcmp(json_object_get_string(v), s, strlen(s)) == 0;
}

/* ---- str() and repr() ---- */

/* code points str.isprintable() rejects beyond ASCII (categories Cc, Cf, Cs, Co, Zl, Zp, Zs; not Cn) */
static const uint32_t nonprint[][2] = {
    { 0x80, 0xa0 }, { 0xad, 0xad }, { 0x600, 0x605 }, { 0x61c, 0x61c }, { 0x6dd, 0x6dd }, { 0x70f, 0x70f },
    { 0x890, 0x891 }, { 0x8e2, 0x8e2 }, { 0x1680, 0x1680 }, { 0x180e, 0x180e }, { 0x2000, 0x200f },
    { 0x2028, 0x202f }, { 0x205f, 0x206f }, { 0x3000, 0x3000 }, { 0xd800, 0xf8ff }, { 0xfeff, 0xfeff },
    { 0xfff9, 0xfffb }, { 0xfffe, 0xffff }, { 0x110bd, 0x110bd }, { 0x110cd, 0x110cd }, { 0x13430, 0x1343f },
    { 0x1bca0, 0x1bca3 }, { 0x1d173, 0x1d17a }, { 0xe0001, 0xe0001 }, { 0xe0020, 0xe007f }, { 0xf0000, 0x10ffff },
};

static int printable(uint32_t c)
{
    if (c < 0x80) return c >= 0x20 && c != 0x7f;
    for (size_t i = 0; i < sizeof nonprint / sizeof nonprint[0]; i++)
        if (c >= nonprint[i][0] && c <= nonprint[i][1]) return 0;
    return 1;
}

static void repr_string(strbuf *b, const char *s, size_t n)
{
    char q = memchr(s, '\'', n) && !memchr(s, '"', n) ? '"' : '\'';
    sb_put(b, &q, 1);
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        uint32_t c;
        size_t len = u8_dec(u + i, n - i, &c);
        char esc[16];
        if (c == '\\' || c == (uint32_t)q) { esc[0] = '\\'; esc[1] = (char)c; sb_put(b, esc, 2); }
        else if (c == '\t') sb_puts(b, "\\t");
        else if (c == '\n') sb_puts(b, "\\n");
        else if (c == '\r') sb_puts(b, "\\r");
        else if (printable(c)) sb_put(b, s + i, len);
        else {
            snprintf(esc, sizeof esc, c <= 0xff ? "\\x%02x" : c <= 0xffff ? "\\u%04x" : "\\U%08x", (unsigned)c);
            sb_puts(b, esc);
        }
        i += len;
    }
    sb_put(b, &q, 1);
}

void py_float_repr(char out[40], double d)
{
    if (isnan(d)) { strcpy(out, "nan"); return; }
    if (isinf(d)) { strcpy(out, d < 0 ? "-inf" : "inf"); return; }
    if (d == 0) { strcpy(out, signbit(d) ? "-0.0" : "0.0"); return; }
    char e[40];
    for (int p = 1; p <= 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, d);
        if (strtod(e, NULL) == d) break;
    }
    /* e = [-]D[.DDD]e[+-]XX: digits and the decimal point's position */
    char dig[24];
    int nd = 0, neg = e[0] == '-';
    const char *p = e + neg;
    for (; *p && *p != 'e'; p++)
        if (*p != '.') dig[nd++] = *p;
    while (nd > 1 && dig[nd - 1] == '0') nd--;
    int exp10 = atoi(p + 1), decpt = exp10 + 1;
    size_t o = 0;
    if (neg) out[o++] = '-';
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            out[o++] = '0';
            out[o++] = '.';
            for (int i = 0; i < -decpt; i++) out[o++] = '0';
            for (int i = 0; i < nd; i++) out[o++] = dig[i];
        } else {
            for (int i = 0; i < decpt; i++) out[o++] = i < nd ? dig[i] : '0';
            out[o++] = '.';
            if (decpt >= nd) out[o++] = '0';
            for (int i = decpt; i < nd; i++) out[o++] = dig[i];
        }
        out[o] = 0;
    } else {
        out[o++] = dig[0];
        if (nd > 1) {
            out[o++] = '.';
            for (int i = 1; i < nd; i++) out[o++] = dig[i];
        }
        snprintf(out + o, 40 - o, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    }
}

static void scalar(strbuf *b, json_object *v)
{
    switch (json_object_get_type(v)) {
    case json_type_boolean: sb_puts(b, json_object_get_boolean(v) ? "True" : "False"); break;
    case json_type_int: sb_puts(b, json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN)); break;
    case json_type_double: {
        char t[40];
        py_float_repr(t, json_object_get_double(v));
        sb_puts(b, t);
        break;
    }
    default: break;
    }
}

/* Python's json.dumps(v, ensure_ascii=False): ", " and ": " separators, control characters, quote and
 * backslash escaped, everything else as it is; floats as repr (NaN, Infinity as Python writes them) */
static void json_string(strbuf *b, const char *s, size_t n)
{
    sb_puts(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *e = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\r' ? "\\r" :
                        c == '\t' ? "\\t" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
        char u[8];
        if (!e && c < 0x20) {
            snprintf(u, sizeof u, "\\u%04x", c);
            e = u;
        }
        if (e) sb_puts(b, e);
        else sb_put(b, s + i, 1);
    }
    sb_puts(b, "\"");
}

/* repr(v) (json 0) or json.dumps(v, ensure_ascii=False) (json 1): containers alike, strings and scalars as
 * each writes them */
static void dump(strbuf *b, json_object *v, int json)
{
    if (v == PY_UNDEF && !json) return;
    if (!v || v == PY_UNDEF) { sb_puts(b, json ? "null" : "None"); return; }
    switch (json_object_get_type(v)) {
    case json_type_string:
        (json ? json_string : repr_string)(b, json_object_get_string(v), (size_t)json_object_get_string_len(v));
        break;
    case json_type_array: {
        size_t n = json_object_array_length(v);
        sb_puts(b, "[");
        for (size_t i = 0; i < n; i++) {
            if (i) sb_puts(b, ", ");
            dump(b, json_object_array_get_idx(v, i), json);
        }
        sb_puts(b, "]");
        break;
    }
    case json_type_object: {
        int first = 1;
        sb_puts(b, "{");
        json_object_object_foreach(v, k, val) {
            if (!first) sb_puts(b, ", ");
            first = 0;
            (json ? json_string : repr_string)(b, k, strlen(k));
            sb_puts(b, ": ");
            dump(b, val, json);
        }
        sb_puts(b, "}");
        break;
    }
    case json_type_boolean:
        if (json) sb_puts(b, json_object_get_boolean(v) ? "true" : "false");
        else scalar(b, v);
        break;
    case json_type_double: {
        double x = json_object_get_double(v);
        if (json && x != x) sb_puts(b, "NaN");
        else if (json && (x > 1.7976931348623157e308 || x < -1.7976931348623157e308))
            sb_puts(b, x > 0 ? "Infinity" : "-Infinity");
        else scalar(b, v);
        break;
    }
    default: scalar(b, v);
    }
}

void py_repr(strbuf *b, json_object *v) { dump(b, v, 0); }
void py_tojson(strbuf *b, json_object *v) { dump(b, v, 1); }

void py_str(strbuf *b, json_object *v)
{
    if (py_is_str(v)) sb_put(b, json_object_get_string(v), (size_t)json_object_get_string_len(v));
    else py_repr(b, v);
}

/* ---- strip, case ---- */

static int is_space(uint32_t c)
{
    return (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

void py_strip(const char **s, size_t *n)
{
    const unsigned char *u = (const unsigned char *)*s;
    size_t a = 0, z = *n;
    while (a < z) {
        uint32_t c;
        size_t len = u8_dec(u + a, z - a, &c);
        if (!is_space(c)) break;
        a += len;
    }
    while (z > a) {
        size_t st = z - 1;
        while (st > a && z - st < 4 && (u[st] & 0xc0) == 0x80) st--;
        uint32_t c;
        if (u8_dec(u + st, z - st, &c) != z - st || !is_space(c)) break;
        z = st;
    }
    *s += a;
    *n = z - a;
}

/* one code point's simple case mapping (0 = unchanged) */
static uint32_t case_map(uint32_t c, int upper)
{
    if (upper) {
        if (c >= 'a' && c <= 'z') return c - 32;
        if (c == 0xb5) return 0x39c;
        if (c >= 0xe0 && c <= 0xfe && c != 0xf7) return c - 32;
        if (c == 0xff) return 0x178;
        if (c == 0x131) return 'I';
        if (c == 0x17f) return 'S';
        if ((c >= 0x101 && c <= 0x137 && (c & 1)) || (c >= 0x13a && c <= 0x148 && !(c & 1)) ||
            (c >= 0x14b && c <= 0x177 && (c & 1)) || (c >= 0x17a && c <= 0x17e && !(c & 1)))
            return c - 1;
        if (c == 0x3ac) return 0x386;
        if (c >= 0x3ad && c <= 0x3af) return c - 37;
        if (c == 0x3cc) return 0x38c;
        if (c >= 0x3cd && c <= 0x3ce) return c - 63;
        if (c == 0x3c2) return 0x3a3;
        if ((c >= 0x3b1 && c <= 0x3c1) || (c >= 0x3c3 && c <= 0x3cb)) return c - 32;
        if (c >= 0x430 && c <= 0x44f) return c - 32;
        if (c >= 0x450 && c <= 0x45f) return c - 80;
        if ((c >= 0x461 && c <= 0x481 && (c & 1)) || (c >= 0x48b && c <= 0x4bf && (c & 1)) ||
            (c >= 0x4c2 && c <= 0x4ce && !(c & 1)) || (c >= 0x4d1 && c <= 0x52f && (c & 1)))
            return c - 1;
        if (c == 0x4cf) return 0x4c0;
        if (c >= 0xff41 && c <= 0xff5a) return c - 32;
        return 0;
    }
    if (c >= 'A' && c <= 'Z') return c + 32;
    if (c >= 0xc0 && c <= 0xde && c != 0xd7) return c + 32;
    if (c == 0x178) return 0xff;
    if ((c >= 0x100 && c <= 0x137 && !(c & 1) && c != 0x130) || (c >= 0x139 && c <= 0x148 && (c & 1)) ||
        (c >= 0x14a && c <= 0x177 && !(c & 1)) || (c >= 0x179 && c <= 0x17e && (c & 1)))
        return c + 1;
    if (c == 0x386) return 0x3ac;
    if (c >= 0x388 && c <= 0x38a) return c + 37;
    if (c == 0x38c) return 0x3cc;
    if (c >= 0x38e && c <= 0x38f) return c + 63;
    if ((c >= 0x391 && c <= 0x3a1) || (c >= 0x3a3 && c <= 0x3ab)) return c + 32;
    if (c >= 0x400 && c <= 0x40f) return c + 80;
    if (c >= 0x410 && c <= 0x42f) return c + 32;
    if ((c >= 0x460 && c <= 0x481 && !(c & 1)) || (c >= 0x48a && c <= 0x4bf && !(c & 1)) ||
        (c >= 0x4c1 && c <= 0x4ce && (c & 1)) || (c >= 0x4d0 && c <= 0x52f && !(c & 1)))
        return c + 1;
    if (c == 0x4c0) return 0x4cf;
    if (c >= 0xff21 && c <= 0xff3a) return c + 32;
    return 0;
}

void py_case(strbuf *b, const char *s, size_t n, int upper)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        uint32_t c, m;
        size_t len = u8_dec(u + i, n - i, &c);
        if (upper && c == 0xdf) sb_puts(b, "SS");
        else if (upper && c == 0x149) sb_puts(b, "\xca\xbcN");
        else if (!upper && c == 0x130) sb_puts(b, "i\xcc\x87");
        else if ((m = case_map(c, upper)) != 0) u8_put(b, m);
        else sb_put(b, s + i, len);
        i += len;
    }
}

/* ---- dictsort, iteration ---- */

typedef struct sort_ent { py_item it; char *low; size_t lowlen; int idx; } sort_ent;

static int ent_cmp(const void *pa, const void *pb)
{
    const sort_ent *a = pa, *b = pb;
    size_t n = a->lowlen < b->lowlen ? a->lowlen : b->lowlen;
    int c = memcmp(a->low, b->low, n);
    if (c) return c;
    if (a->lowlen != b->lowlen) return a->lowlen < b->lowlen ? -1 : 1;
    return a->idx - b->idx;
}

py_item *py_dictsort(json_object *obj, int *n, int *oom)
{
    *n = 0;
    *oom = 0;
    int cnt = json_object_object_length(obj);
    if (cnt <= 0) return NULL;
    sort_ent *e = calloc((size_t)cnt, sizeof *e);
    py_item *out = malloc((size_t)cnt * sizeof *out);
    strbuf low = { 0 };
    int i = 0;
    if (!e || !out) goto nomem;
    json_object_object_foreach(obj, k, v) {
        size_t kl = strlen(k);
        e[i].it = (py_item){ k, kl, v };
        e[i].idx = i;
        low.n = 0;
        py_case(&low, k, kl, 0);
        if (low.oom) goto nomem;
        e[i].lowlen = low.n;
        e[i].low = malloc(low.n + 1);
        if (!e[i].low) goto nomem;
        memcpy(e[i].low, low.p ? low.p : "", low.n);
        i++;
    }
    qsort(e, (size_t)cnt, sizeof *e, ent_cmp);
    for (int j = 0; j < cnt; j++) out[j] = e[j].it;
    *n = cnt;
    for (int j = 0; j < cnt; j++) free(e[j].low);
    free(e);
    sb_free(&low);
    return out;
nomem:
    if (e) for (int j = 0; j < cnt; j++) free(e[j].low);
    free(e);
    free(out);
    sb_free(&low);
    *oom = 1;
    return NULL;
}

int py_each_str(chat_out *o, json_object *v, py_each_fn fn, void *ctx)
{
    if (v == PY_UNDEF) return 0;
    if (py_is_list(v)) {
        int n = (int)json_object_array_length(v);
        strbuf t = { 0 };
        for (int i = 0; i < n; i++) {
            t.n = 0;
            py_str(&t, json_object_array_get_idx(v, i));
            if (t.oom) { sb_free(&t); co_nomem(o); return n; }
            fn(o, t.p ? t.p : "", t.n, i, i == n - 1, ctx);
        }
        sb_free(&t);
        return n;
    }
    if (py_is_map(v)) {
        int n = json_object_object_length(v), i = 0;
        json_object_object_foreach(v, k, val) {
            (void)val;
            fn(o, k, strlen(k), i, i == n - 1, ctx);
            i++;
        }
        return n;
    }
    if (py_is_str(v)) {
        const unsigned char *s = (const unsigned char *)json_object_get_string(v);
        size_t len = (size_t)json_object_get_string_len(v);
        int n = 0;
        for (size_t i = 0; i < len; n++) { uint32_t c; i += u8_dec(s + i, len - i, &c); }
        int idx = 0;
        for (size_t i = 0; i < len; idx++) {
            uint32_t c;
            size_t l = u8_dec(s + i, len - i, &c);
            fn(o, (const char *)s + i, l, idx, idx == n - 1, ctx);
            i += l;
        }
        return n;
    }
    return -1;
}
