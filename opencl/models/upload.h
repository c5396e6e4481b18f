/* upload.h — tensor bytes from the mapped file into device buffers through a ring of pinned staging
 * slots: copy threads fill one slot (their page faults on the mapping run in parallel) while the
 * device reads the slots filled before it, so the weights are read once and resident when loading
 * ends (no driver copy of a host pointer, no migration at the first forward). */
#ifndef CLGEMMA_UPLOAD_H
#define CLGEMMA_UPLOAD_H

#include "runtime.h"

typedef struct uploader uploader;

/* staging for about total bytes of puts (it sizes the slots; more is fine, the slots are reused)
 * and the copy threads; -1 with err when the pinned memory or a thread cannot be had */
int  upload_create(uploader **u, cl_runtime *rt, uint64_t total, char *err, size_t errlen);
/* waits for the writes still queued, then frees the staging and stops the threads; NULL is fine */
void upload_destroy(uploader *u);

/* queues src[0, n) to dst at dst_off; src may be reused at return, dst is written when upload_finish
 * returns. Errors are sticky: -1 from the first failed put on, each later put doing nothing. */
int  upload_put(uploader *u, cl_mem dst, size_t dst_off, const void *src, size_t n);
/* waits for every queued write; -1 with the first error of any put or write in err */
int  upload_finish(uploader *u, char *err, size_t errlen);

#endif
