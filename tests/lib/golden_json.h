/* golden_json.h — reading the fixture generators' golden JSON (compact, as tools/gen_*_fixtures.py write it)
 * in the model tests: numbers of nested arrays, a key's value within a range, integer arrays. */
#ifndef CLGEMMA_GOLDEN_JSON_H
#define CLGEMMA_GOLDEN_JSON_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* p at or before '[': every number of the (nested) array into out (grown); returns the position after
 * the closing bracket, NULL on malformed input */
static inline const char *read_nums(const char *p, double **out, size_t *n)
{
    size_t cap = 0;
    *out = NULL;
    *n = 0;
    p = p ? strchr(p, '[') : NULL;
    if (!p) return NULL;
    int depth = 0;
    do {
        if (*p == '[') { depth++; p++; }
        else if (*p == ']') { depth--; p++; }
        else if (*p == '-' || (*p >= '0' && *p <= '9')) {
            char *e;
            double v = strtod(p, &e);
            if (*n == cap) { cap = cap ? cap * 2 : 64; *out = realloc(*out, cap * sizeof **out); }
            (*out)[(*n)++] = v;
            p = e;
        } else if (!*p) return NULL;
        else p++;
    } while (depth > 0);
    return p;
}

/* the value of "key" inside [p, lim) */
static inline const char *find_in(const char *p, const char *lim, const char *key)
{
    char k[64];
    snprintf(k, sizeof k, "\"%s\":", key);
    const char *q = p ? strstr(p, k) : NULL;
    return q && (!lim || q < lim) ? q + strlen(k) : NULL;
}

static inline int read_ints(const char *p, int32_t *out, size_t want)
{
    double *d;
    size_t n;
    if (!read_nums(p, &d, &n) || n != want) { free(d); return -1; }
    for (size_t i = 0; i < n; i++) out[i] = (int32_t)d[i];
    free(d);
    return 0;
}

#endif
