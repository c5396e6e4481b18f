/* test_fcgi_sse.c — SSE framing (fcgi/sse.c), no engine, no FastCGI. */
#include <string.h>

#include "check.h"
#include "sse.h"

typedef struct sink { char buf[512]; size_t n; int flushes; int fail_after; } sink;

static int sink_write(void *ctx, const char *d, size_t n)
{
    sink *s = ctx;
    if (s->fail_after >= 0 && s->n + n > (size_t)s->fail_after) return -1;
    memcpy(s->buf + s->n, d, n);
    s->n += n;
    s->buf[s->n] = 0;
    return 0;
}
static int sink_flush(void *ctx) { ((sink *)ctx)->flushes++; return 0; }

static void test_sse_framing_and_flush(void)
{
    sink s = { .fail_after = -1 };
    sse_writer w;
    sse_init(&w, sink_write, sink_flush, &s);
    CHECK(sse_event(&w, "{\"a\":1}", 7) == 0, "event");
    CHECK(sse_done(&w) == 0, "done");
    CHECK(!strcmp(s.buf, "data: {\"a\":1}\n\ndata: [DONE]\n\n"), "got '%s'", s.buf);
    CHECK(s.flushes == 2, "one flush per event, got %d", s.flushes);
    CHECK(w.events == 2, "events %lu", w.events);
}

static void test_sse_refuses_newlines(void)
{
    sink s = { .fail_after = -1 };
    sse_writer w;
    sse_init(&w, sink_write, sink_flush, &s);
    CHECK(sse_event(&w, "a\nb", 3) == -1, "a payload with a newline would break the framing");
    CHECK(s.n == 0, "nothing written");
}

static void test_sse_write_error_is_sticky(void)
{
    sink s = { .fail_after = 20 };
    sse_writer w;
    sse_init(&w, sink_write, sink_flush, &s);
    CHECK(sse_event(&w, "0123456789", 10) == 0, "first event fits");
    CHECK(sse_event(&w, "0123456789", 10) == -1, "second fails");
    s.fail_after = -1;
    CHECK(sse_event(&w, "x", 1) == -1, "after a failure every event fails (client gone)");
}

int main(void)
{
    RUN_TEST(test_sse_framing_and_flush);
    RUN_TEST(test_sse_refuses_newlines);
    RUN_TEST(test_sse_write_error_is_sticky);
    CHECK_EXIT();
}
