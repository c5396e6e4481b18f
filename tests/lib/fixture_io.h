/* fixture_io.h — fixture files for the tests: read whole, and copied with some bytes replaced (broken files). */
#ifndef CLGEMMA_TEST_FIXTURE_IO_H
#define CLGEMMA_TEST_FIXTURE_IO_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* path's bytes, NUL-terminated (free() them), *len their count when len is given; NULL if unreadable */
static inline char *slurp(const char *path, long *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) { free(s); s = NULL; }
    if (s) s[n] = 0;
    fclose(f);
    if (len) *len = n;
    return s;
}

/* src copied to dst with the plen bytes at (first occurrence of find) + after replaced by patch: 0, or -1 with
 * why (src unreadable, find not in it, dst unwritable) */
static inline int patch_copy(const char *src, const char *find, size_t after, const void *patch, size_t plen,
                             const char *dst, const char **why)
{
    long n;
    char *buf = slurp(src, &n), *hit = NULL;
    size_t fl = strlen(find);
    for (long i = 0; buf && i + (long)fl <= n && !hit; i++)
        if (memcmp(buf + i, find, fl) == 0) hit = buf + i;
    FILE *o = NULL;
    *why = !buf ? "cannot read the source" : !hit || hit + after + plen > buf + n ? "pattern not in the source" : NULL;
    if (!*why) {
        memcpy(hit + after, patch, plen);
        o = fopen(dst, "wb");
        if (!o || fwrite(buf, 1, (size_t)n, o) != (size_t)n) *why = "cannot write the copy";
    }
    if (o) fclose(o);
    free(buf);
    return *why ? -1 : 0;
}

#endif
