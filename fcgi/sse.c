/* sse.c — SSE framing (see sse.h). */
#include "sse.h"

#include <string.h>

void sse_init(sse_writer *w, sse_write_fn write, sse_flush_fn flush, void *ctx)
{
    memset(w, 0, sizeof *w);
    w->write = write;
    w->flush = flush;
    w->ctx = ctx;
}

int sse_event(sse_writer *w, const char *payload, size_t n)
{
    if (w->failed) return -1;
    if (memchr(payload, '\n', n) || memchr(payload, '\r', n)) return -1; /* would break the framing */
    if (w->write(w->ctx, "data: ", 6) || w->write(w->ctx, payload, n) || w->write(w->ctx, "\n\n", 2) ||
        (w->flush && w->flush(w->ctx))) {
        w->failed = 1;
        return -1;
    }
    w->events++;
    return 0;
}

int sse_done(sse_writer *w)
{
    return sse_event(w, "[DONE]", 6);
}

int sse_comment(sse_writer *w, const char *text)
{
    size_t n = strlen(text);
    if (w->failed) return -1;
    if (memchr(text, '\n', n) || memchr(text, '\r', n)) return -1;
    if (w->write(w->ctx, ": ", 2) || w->write(w->ctx, text, n) || w->write(w->ctx, "\n\n", 2) ||
        (w->flush && w->flush(w->ctx))) {
        w->failed = 1;
        return -1;
    }
    return 0;
}
