/* sse.h — Server-Sent Events framing: one flushed "data:" event per call. Pure C: output goes
 * through a write callback, so this needs neither FastCGI nor the engine. */
#ifndef CLGEMMA_FCGI_SSE_H
#define CLGEMMA_FCGI_SSE_H

#include <stddef.h>

/* write all n bytes, then flush; return 0 or -1 (the client is gone) */
typedef int (*sse_write_fn)(void *ctx, const char *data, size_t n);
typedef int (*sse_flush_fn)(void *ctx);

typedef struct sse_writer {
    sse_write_fn write;
    sse_flush_fn flush;
    void *ctx;
    int failed;                 /* sticky: after one failed write every call fails at once */
    unsigned long events;
} sse_writer;

void sse_init(sse_writer *w, sse_write_fn write, sse_flush_fn flush, void *ctx);
/* "data: <payload>\n\n" then flush. payload must not contain a newline (JSON from json-c has
 * none). Returns 0 or -1. */
int  sse_event(sse_writer *w, const char *payload, size_t n);
/* "data: [DONE]\n\n" */
int  sse_done(sse_writer *w);
/* ": <text>\n\n", a comment clients skip (it keeps proxies and clients from timing out); text
 * without newlines */
int  sse_comment(sse_writer *w, const char *text);

#endif
