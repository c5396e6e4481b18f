/* media.h — encoded images kept on the device by content digest: the rows an image's soft tokens put
 * in place of token embeddings, pinned while prompts that hold them step, kept for reuse after
 * (least recently used first out) within a byte budget. A pinned entry is never evicted: the cache
 * may go over its budget rather than refuse a prompt (docs/design-vision.md 4.8). */
#ifndef CLGEMMA_MEDIA_H
#define CLGEMMA_MEDIA_H

#include <stdint.h>

#include "runtime.h"

#define MEDIA_DIGEST 32 /* SHA-256 */

typedef struct media_entry {
    uint8_t digest[MEDIA_DIGEST];
    uint32_t n_rows;
    cl_mem rows;              /* [n_rows][width] f32 */
    int pins;
    uint64_t used;            /* the cache's clock when last pinned */
} media_entry;

typedef struct media_cache {
    media_entry *e;
    int n, cap;
    uint32_t width;           /* floats per row: the text model's embedding width */
    uint64_t bytes, budget;   /* device bytes held; what unpinned entries may fill */
    uint64_t clock, encodes, hits;
} media_cache;

void media_create(media_cache *c, uint32_t width, uint64_t budget);
void media_destroy(media_cache *c);
/* the entry of digest, or NULL */
media_entry *media_find(media_cache *c, const uint8_t *digest);
/* a new unpinned entry for digest with room for n_rows (filled by the caller before use); unpinned
 * entries evicted first to keep to the budget. NULL with err (no device memory). */
media_entry *media_add(media_cache *c, cl_runtime *rt, const uint8_t *digest, uint32_t n_rows, char *err,
                       size_t errlen);
/* drops an entry (a failed encode's): its rows never became valid */
void media_drop(media_cache *c, media_entry *e);
void media_pin(media_cache *c, media_entry *e);
/* one pin of digest's entry off; unknown digests are ignored */
void media_unpin(media_cache *c, const uint8_t *digest);

#endif
