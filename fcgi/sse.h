/* sse.h — Server-Sent Events framing (one flushed "data:" event per call) and the stop-string
 * filter that holds back text which may be the start of a stop string, also across tokens.
 * Pure C: output goes through a write callback, so this needs neither FastCGI nor the engine. */
#ifndef CLGEMMA_FCGI_SSE_H
#define CLGEMMA_FCGI_SSE_H

#include <stddef.h>

/* ---- stop strings ---- */

#define STOP_MAX 4

typedef struct stop_filter {
    const char *stop[STOP_MAX]; /* borrowed, non-empty */
    size_t stop_len[STOP_MAX];
    int n_stop;
    char *held;                 /* text not yet released: a possible start of a stop string */
    size_t n_held, cap_held;
    char *out;                  /* text released by the last call */
    size_t cap_out;
    int stopped;                /* a stop string matched: nothing more is ever released */
} stop_filter;

/* stops: n (0..STOP_MAX) strings that must outlive the filter. Returns 0 or -1 (bad arguments). */
int  stop_filter_init(stop_filter *f, const char *const *stops, const size_t *lens, int n);
void stop_filter_free(stop_filter *f);
/* Appends text; *out and *out_len receive the text that is now safe to send (points into the
 * filter, valid until the next call). Returns 1 when a stop string matched (the text before it
 * is in *out, the stop string and anything after it are dropped), 0 otherwise, -1 on OOM. */
int  stop_filter_push(stop_filter *f, const char *text, size_t len, const char **out, size_t *out_len);
/* End of generation without a stop string: releases what was held back. */
void stop_filter_finish(stop_filter *f, const char **out, size_t *out_len);

/* ---- event stream ---- */

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

#endif
