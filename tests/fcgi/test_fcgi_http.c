/* test_fcgi_http.c — the HTTP/1.1 transport: the request reader (fcgi/http_reader.c) on whole,
 * split and bad requests, and the response framing of fcgi/transport_http.c over a real unix
 * socket (Content-Length, chunks, the terminating chunk only from finish). No engine. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "check.h"
#include "http.h"
#include "http_reader.h"
#include "transport.h"

/* feeds s in pieces of step bytes (0: at once); returns the last status */
static int feed(http_reader *rd, const char *s, size_t n, size_t step)
{
    int st = HTTP_READER_MORE;
    if (!step) step = n;
    for (size_t i = 0; i < n && st == HTTP_READER_MORE; i += step)
        st = http_reader_feed(rd, s + i, n - i < step ? n - i : step);
    return st;
}

static void test_reader_get_byte_by_byte(void)
{
    static const char req[] = "GET /v1/models?x=1 HTTP/1.1\r\nHost: a\r\nX-Request-ID: abc123\r\n\r\n";
    http_reader rd;
    http_reader_init(&rd, 1024);
    CHECK(feed(&rd, req, sizeof req - 1, 1) == HTTP_READER_DONE, "done");
    CHECK(!strcmp(rd.method, "GET"), "method %s", rd.method);
    CHECK(!strcmp(rd.target, "/v1/models?x=1"), "target %s", rd.target);
    CHECK(!strcmp(rd.request_id, "abc123"), "header names compare case-insensitively: '%s'", rd.request_id);
    CHECK(rd.body_len == 0, "no body");
    http_reader_free(&rd);
}

static void test_reader_post_body_split(void)
{
    static const char req[] = "POST /v1/completions HTTP/1.1\r\nContent-Type: application/json\r\n"
                              "Content-Length: 11\r\n\r\n{\"a\":\"bcd\"}TRAILING";
    for (size_t step = 0; step < 8; step++) {
        http_reader rd;
        http_reader_init(&rd, 1024);
        int st = feed(&rd, req, sizeof req - 1, step);
        CHECK(st == HTTP_READER_DONE, "step %zu: %d %s", step, st, rd.why);
        CHECK(rd.body_len == 11 && !strcmp(rd.body, "{\"a\":\"bcd\"}"), "step %zu: body '%s'", step, rd.body ? rd.body : "");
        CHECK(!strcmp(rd.content_type, "application/json"), "content type '%s'", rd.content_type);
        http_reader_free(&rd);
    }
}

static void test_reader_chunked_body(void)
{
    static const char req[] = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
    http_reader rd;
    http_reader_init(&rd, 1024);
    CHECK(feed(&rd, req, sizeof req - 1, 3) == HTTP_READER_DONE, "done: %s", rd.why);
    CHECK(rd.body_len == 5 && !strcmp(rd.body, "abcde"), "decoded body '%s'", rd.body ? rd.body : "");
    http_reader_free(&rd);
}

typedef struct bad_case { const char *name, *req; long max_body; int status; } bad_case;

static const bad_case bad_cases[] = {
    { "garbage request line", "HELLO\r\n\r\n", 1024, 400 },
    { "no version", "GET /\r\n\r\n", 1024, 400 },
    { "HTTP/2 request line", "GET / HTTP/2.0\r\n\r\n", 1024, 400 },
    { "header without a colon", "GET / HTTP/1.1\r\nNoColon\r\n\r\n", 1024, 400 },
    { "control byte in a header name", "GET / HTTP/1.1\r\nA\001b: x\r\n\r\n", 1024, 400 },
    { "bad Content-Length", "POST / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", 1024, 400 },
    { "two Content-Lengths", "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 1024, 400 },
    { "bad chunk size", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 1024, 400 },
    /* over max-body: read to its end first (nginx is still sending it), then 413 */
    { "Content-Length over max-body", "POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nabcde", 4, 413 },
    { "chunked over max-body", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcde\r\n0\r\n\r\n", 4, 413 },
    { "upgrade", "GET / HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", 1024, 501 },
    { "expect", "POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n", 1024, 417 },
};

static void test_reader_bad_requests(void)
{
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const bad_case *c = &bad_cases[i];
        http_reader rd;
        http_reader_init(&rd, c->max_body);
        int st = feed(&rd, c->req, strlen(c->req), 0);
        CHECK(st == c->status, "%s: got %d (%s), want %d", c->name, st, rd.why, c->status);
        CHECK(http_reader_feed(&rd, "x", 1) == c->status, "%s: the error stays", c->name);
        http_reader_free(&rd);
    }
}

static void test_reader_limits_and_eof(void)
{
    http_reader rd;
    http_reader_init(&rd, 1024);
    char *big = malloc(HTTP_READER_MAX_HEAD + 100);
    memset(big, 'a', HTTP_READER_MAX_HEAD + 100);
    memcpy(big, "GET / HTTP/1.1\r\nX-Big: ", 23);
    int st = feed(&rd, big, HTTP_READER_MAX_HEAD + 100, 1000);
    CHECK(st == 431, "oversize head: %d", st);
    http_reader_free(&rd);

    http_reader_init(&rd, 1024);
    memset(big, 'a', 3000);
    memcpy(big, "GET /", 5);
    st = feed(&rd, big, 3000, 0);
    CHECK(st == 414, "long target: %d", st);
    http_reader_free(&rd);
    free(big);

    http_reader_init(&rd, 1024);
    CHECK(feed(&rd, "GET / HTTP/1.1\r\nHost:", 21, 0) == HTTP_READER_MORE, "partial head");
    CHECK(http_reader_eof(&rd) == 400, "eof in the head is 400");
    http_reader_free(&rd);

    http_reader_init(&rd, 1024);
    CHECK(feed(&rd, "POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nab", 40, 0) == HTTP_READER_MORE, "partial body");
    CHECK(http_reader_eof(&rd) == 400, "eof in the body is 400");
    http_reader_free(&rd);
}

/* ---- the transport over a unix socket ---- */

static int listen_unix(char *path, size_t cap)
{
    snprintf(path, cap, "/tmp/clgemma-test-http-%d.sock", (int)getpid());
    unlink(path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 8)) return -1;
    return fd;
}

static int connect_send(const char *path, const char *req)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) return -1;
    if (req && write(fd, req, strlen(req)) != (ssize_t)strlen(req)) return -1;
    return fd;
}

/* everything the server sends until it closes (or 2 s pass) */
static size_t read_all(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    struct pollfd p = { fd, POLLIN, 0 };
    while (n < cap - 1 && poll(&p, 1, 2000) > 0) {
        ssize_t k = read(fd, buf + n, cap - 1 - n);
        if (k <= 0) break;
        n += (size_t)k;
    }
    buf[n] = 0;
    return n;
}

static void test_transport_whole_response(void)
{
    char path[108], why[256], got[4096];
    int lfd = listen_unix(path, sizeof path);
    CHECK(lfd >= 0, "listen");
    transport_limits lim = { .max_body = 1024, .read_timeout_ms = 2000 };
    transport_conn *c = transport_http.create(lfd, &lim);
    int cfd = connect_send(path, "POST /v1/completions?q HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                 "X-Request-Id: 0123abcd\r\nContent-Length: 7\r\n\r\n{\"a\":1}");
    CHECK(transport_http.accept(c, why, sizeof why) == 0, "accept: %s", why);
    http_req r;
    http_req_init(&r, &transport_http, c);
    CHECK(!strcmp(r.method, "POST") && !strcmp(r.path, "/v1/completions"), "%s %s", r.method, r.path);
    CHECK(!strcmp(r.request_id, "0123abcd"), "request id %s", r.request_id);
    char *body;
    size_t len;
    api_error e;
    CHECK(http_read_body(&r, 1024, &body, &len, &e) == 0 && len == 7 && !strcmp(body, "{\"a\":1}"), "body");
    free(body);
    CHECK(http_send_json(&r, 200, "{\"ok\":true}") == 0, "send");
    transport_http.finish(c);
    read_all(cfd, got, sizeof got);
    CHECK(!strncmp(got, "HTTP/1.1 200 OK\r\n", 17), "status line: %.40s", got);
    CHECK(strstr(got, "\r\nContent-Length: 11\r\n") && strstr(got, "\r\nConnection: close\r\n"), "head: %s", got);
    CHECK(strstr(got, "\r\nX-Request-Id: 0123abcd\r\n") && !strstr(got, "chunked"), "head: %s", got);
    const char *b = strstr(got, "\r\n\r\n");
    CHECK(b && !strcmp(b + 4, "{\"ok\":true}"), "body after the head: %s", b ? b + 4 : "(none)");
    close(cfd);
    transport_http.destroy(c);
    close(lfd);
    unlink(path);
}

/* a stream: one chunk per flush; finish adds the terminating chunk, an abandoned one does not */
static void stream_case(int finish, const char *want_tail)
{
    char path[108], why[256], got[4096];
    int lfd = listen_unix(path, sizeof path);
    transport_limits lim = { .max_body = 1024, .read_timeout_ms = 2000 };
    transport_conn *c = transport_http.create(lfd, &lim);
    int cfd = connect_send(path, "POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
    CHECK(transport_http.accept(c, why, sizeof why) == 0, "accept: %s", why);
    http_req r;
    http_req_init(&r, &transport_http, c);
    CHECK(http_start_stream(&r) == 0, "head");
    CHECK(http_write(&r, "data: 1\n\n", 9) == 0 && http_flush(&r) == 0, "first event");
    CHECK(http_write(&r, "data: ", 6) == 0 && http_write(&r, "two\n\n", 5) == 0 && http_flush(&r) == 0, "second");
    CHECK(http_flush(&r) == 0, "an empty flush sends nothing (a 0 chunk would end the body)");
    if (finish) transport_http.finish(c);
    else transport_http.destroy(c); /* as if the handler never returned: the worker died */
    read_all(cfd, got, sizeof got);
    CHECK(strstr(got, "\r\nTransfer-Encoding: chunked\r\n") && !strstr(got, "Content-Length"), "head: %s", got);
    CHECK(strstr(got, "text/event-stream"), "content type: %s", got);
    const char *b = strstr(got, "\r\n\r\n");
    CHECK(b && !strcmp(b + 4, want_tail), "chunks: '%s'", b ? b + 4 : "(none)");
    close(cfd);
    if (finish) transport_http.destroy(c);
    close(lfd);
    unlink(path);
}

static void test_transport_stream_chunks(void)
{
    stream_case(1, "9\r\ndata: 1\n\n\r\nb\r\ndata: two\n\n\r\n0\r\n\r\n");
    stream_case(0, "9\r\ndata: 1\n\n\r\nb\r\ndata: two\n\n\r\n");
}

/* bad input is answered by the transport itself, in the API's error shape, and closed */
static void refused(const char *req, int timeout_ms, int want_status, const char *want_text)
{
    char path[108], why[256], got[4096];
    int lfd = listen_unix(path, sizeof path);
    transport_limits lim = { .max_body = 16, .read_timeout_ms = timeout_ms };
    transport_conn *c = transport_http.create(lfd, &lim);
    int cfd = connect_send(path, req);
    CHECK(transport_http.accept(c, why, sizeof why) == 1, "refused: %s", why);
    read_all(cfd, got, sizeof got);
    char line[64];
    snprintf(line, sizeof line, "HTTP/1.1 %d ", want_status);
    CHECK(!strncmp(got, line, strlen(line)), "want %d, got: %.60s", want_status, got);
    CHECK(strstr(got, "\"invalid_request_error\"") && strstr(got, want_text), "body: %s", got);
    close(cfd);
    transport_http.destroy(c);
    close(lfd);
    unlink(path);
}

static void test_transport_refuses_bad_input(void)
{
    refused("NOT HTTP AT ALL\r\n\r\n", 2000, 400, "malformed request");
    refused("POST / HTTP/1.1\r\nContent-Length: 20\r\n\r\n01234567890123456789", 2000, 413, "max-body");
    refused("POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\n0123456789", 200, 408, "did not arrive in time");
    refused("POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc", 200, 408, "did not arrive in time");
    refused("GET / HTTP/1.1\r\nHost", 200, 408, "did not arrive in time");
}

int main(void)
{
    RUN_TEST(test_reader_get_byte_by_byte);
    RUN_TEST(test_reader_post_body_split);
    RUN_TEST(test_reader_chunked_body);
    RUN_TEST(test_reader_bad_requests);
    RUN_TEST(test_reader_limits_and_eof);
    RUN_TEST(test_transport_whole_response);
    RUN_TEST(test_transport_stream_chunks);
    RUN_TEST(test_transport_refuses_bad_input);
    CHECK_EXIT();
}
