/* media.c — see media.h. A flat array: a server holds tens to hundreds of images, found by a scan. */
#include "media.h"

#include <stdlib.h>
#include <string.h>

#include "errf.h"

void media_create(media_cache *c, uint32_t width, uint64_t budget)
{
    memset(c, 0, sizeof *c);
    c->width = width;
    c->budget = budget;
}

static void entry_free(media_cache *c, int i)
{
    c->bytes -= (uint64_t)c->e[i].n_rows * c->width * 4;
    clReleaseMemObject(c->e[i].rows);
    c->e[i] = c->e[--c->n];
}

void media_destroy(media_cache *c)
{
    while (c->n) entry_free(c, c->n - 1);
    free(c->e);
    memset(c, 0, sizeof *c);
}

media_entry *media_find(media_cache *c, const uint8_t *digest)
{
    for (int i = 0; i < c->n; i++)
        if (!memcmp(c->e[i].digest, digest, MEDIA_DIGEST)) return &c->e[i];
    return NULL;
}

/* unpinned entries out, least recently used first, until need more bytes fit the budget */
static void evict(media_cache *c, uint64_t need)
{
    while (c->bytes + need > c->budget) {
        int lru = -1;
        for (int i = 0; i < c->n; i++)
            if (!c->e[i].pins && (lru < 0 || c->e[i].used < c->e[lru].used)) lru = i;
        if (lru < 0) return; /* all pinned: over budget rather than refuse a prompt */
        entry_free(c, lru);
    }
}

media_entry *media_add(media_cache *c, cl_runtime *rt, const uint8_t *digest, uint32_t n_rows, char *err,
                       size_t errlen)
{
    uint64_t bytes = (uint64_t)n_rows * c->width * 4;
    evict(c, bytes);
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 16;
        media_entry *e = realloc(c->e, (size_t)cap * sizeof *e);
        if (!e) { ERR("out of memory for the image cache"); return NULL; }
        c->e = e;
        c->cap = cap;
    }
    cl_mem rows = rt_alloc(rt, bytes, NULL, err, errlen);
    if (!rows) return NULL;
    media_entry *e = &c->e[c->n++];
    memset(e, 0, sizeof *e);
    memcpy(e->digest, digest, MEDIA_DIGEST);
    e->n_rows = n_rows;
    e->rows = rows;
    e->used = ++c->clock;
    c->bytes += bytes;
    return e;
}

void media_drop(media_cache *c, media_entry *e) { entry_free(c, (int)(e - c->e)); }

void media_pin(media_cache *c, media_entry *e)
{
    e->pins++;
    e->used = ++c->clock;
}

void media_unpin(media_cache *c, const uint8_t *digest)
{
    media_entry *e = media_find(c, digest);
    if (e && e->pins > 0) e->pins--;
}
