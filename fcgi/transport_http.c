/* transport_http.c — HTTP/1.1 to nginx's proxy_pass (--protocol http), one request per
 * connection. Streams go out with Transfer-Encoding: chunked, one chunk per flush, and the
 * terminating chunk only from finish(): a worker that dies mid-stream leaves nginx an
 * unterminated body, which it passes on as a cut-short response (issue 18). */
#include "transport.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "api_error.h"
#include "clock.h"
#include "http.h"
#include "http_reader.h"

struct transport_conn {
    int listen_fd, fd;
    transport_limits lim;
    http_reader rd;
    char content_length[24];
    size_t body_off;
    char head[2048];          /* the response head, sent with the first flush */
    size_t head_len;
    int chunked;
    char *out;                /* written, not yet flushed */
    size_t out_len, out_cap;
};

static transport_conn *wire_create(int listen_fd, const transport_limits *lim)
{
    transport_conn *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->listen_fd = listen_fd;
    c->fd = -1;
    c->lim = *lim;
    return c;
}

static void close_conn(transport_conn *c)
{
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    http_reader_free(&c->rd);
    c->head_len = c->out_len = 0;
    c->chunked = 0;
    c->body_off = 0;
}

static void wire_destroy(transport_conn *c)
{
    if (!c) return;
    close_conn(c);
    free(c->out);
    free(c);
}

/* every iov byte to the socket; a signal does not cut it short */
static int send_all(int fd, struct iovec *iov, int n)
{
    while (n > 0) {
        ssize_t k = writev(fd, iov, n);
        if (k < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        while (n > 0 && (size_t)k >= iov->iov_len) { k -= (ssize_t)iov->iov_len; iov++; n--; }
        if (n > 0) { iov->iov_base = (char *)iov->iov_base + k; iov->iov_len -= (size_t)k; }
    }
    return 0;
}

static int wire_flush(transport_conn *c)
{
    if (c->fd < 0) return -1;
    struct iovec iov[4];
    int n = 0;
    char size[24];
    if (c->head_len) iov[n++] = (struct iovec){ c->head, c->head_len };
    if (c->out_len && c->chunked) {
        iov[n++] = (struct iovec){ size, (size_t)snprintf(size, sizeof size, "%zx\r\n", c->out_len) };
        iov[n++] = (struct iovec){ c->out, c->out_len };
        iov[n++] = (struct iovec){ "\r\n", 2 };
    } else if (c->out_len) {
        iov[n++] = (struct iovec){ c->out, c->out_len };
    }
    c->head_len = c->out_len = 0;
    return n ? send_all(c->fd, iov, n) : 0;
}

static int wire_write(transport_conn *c, const char *data, size_t n)
{
    if (c->fd < 0) return -1;
    if (c->out_len + n > c->out_cap) {
        size_t cap = c->out_cap ? c->out_cap : 16384;
        while (cap < c->out_len + n) cap *= 2;
        char *b = realloc(c->out, cap);
        if (!b) return -1;
        c->out = b;
        c->out_cap = cap;
    }
    memcpy(c->out + c->out_len, data, n);
    c->out_len += n;
    return 0;
}

static int wire_head(transport_conn *c, int status, const char *reason, const char *headers, long length)
{
    if (c->fd < 0) return -1;
    char framing[64];
    if (length >= 0) snprintf(framing, sizeof framing, "Content-Length: %ld\r\n", length);
    else snprintf(framing, sizeof framing, "Transfer-Encoding: chunked\r\n");
    int k = snprintf(c->head, sizeof c->head, "HTTP/1.1 %d %s\r\n%s%sConnection: close\r\n\r\n",
                     status, reason, headers, framing);
    if (k < 0 || (size_t)k >= sizeof c->head) { c->head_len = 0; return -1; }
    c->head_len = (size_t)k;
    c->chunked = length < 0;
    return 0;
}

/* The handler returned: what is left, the terminating chunk of a stream, then close. */
static void wire_finish(transport_conn *c)
{
    if (c->fd >= 0 && !wire_flush(c) && c->chunked) {
        struct iovec end = { "0\r\n\r\n", 5 };
        send_all(c->fd, &end, 1);
    }
    close_conn(c);
}

/* Answers bad input with a JSON error in the API's shape, then closes. */
static void refuse(transport_conn *c, int status, const char *why)
{
    http_req r;
    http_req_init(&r, &transport_http, c);
    api_error e;
    api_fail(&e, status, "invalid_request_error", status == 413 ? "request_too_large" : NULL, NULL, "%s", why);
    http_send_error(&r, &e);
    wire_flush(c);
    shutdown(c->fd, SHUT_WR); /* then close: unread input must not reset the answer away */
    char sink[4096];
    struct pollfd pfd = { c->fd, POLLIN, 0 };
    for (int i = 0; i < 16 && poll(&pfd, 1, 100) > 0 && read(c->fd, sink, sizeof sink) > 0; i++) {}
    close_conn(c);
}

/* Reads the whole request (head and body) within the read timeout. */
static int read_request(transport_conn *c, char *why, size_t whylen)
{
    http_reader_init(&c->rd, c->lim.max_body);
    double deadline = monotonic_seconds() + c->lim.read_timeout_ms / 1000.0;
    char buf[16384];
    size_t fed = 0;
    for (;;) {
        int left = (int)((deadline - monotonic_seconds()) * 1000);
        struct pollfd pfd = { c->fd, POLLIN, 0 };
        int rc = left > 0 ? poll(&pfd, 1, left) : 0;
        if (rc < 0 && errno == EINTR) { /* only a stopping worker wakes its threads */
            refuse(c, 503, "the worker is stopping");
            snprintf(why, whylen, "request read cut short: the worker is stopping");
            return 1;
        }
        if (rc <= 0) {
            refuse(c, 408, "the request did not arrive in time");
            snprintf(why, whylen, "408: request incomplete after %d ms (%zu bytes)", c->lim.read_timeout_ms, fed);
            return 1;
        }
        ssize_t k = read(c->fd, buf, sizeof buf);
        if (k < 0 && errno == EINTR) continue;
        int st;
        if (k <= 0) {
            if (fed == 0) { snprintf(why, whylen, "connection closed before a request"); close_conn(c); return 1; }
            st = http_reader_eof(&c->rd);
        } else {
            fed += (size_t)k;
            st = http_reader_feed(&c->rd, buf, (size_t)k);
        }
        if (st == HTTP_READER_DONE) break;
        if (st != HTTP_READER_MORE) {
            snprintf(why, whylen, "%d: %s", st, c->rd.why);
            char msg[160];
            snprintf(msg, sizeof msg, "%s", c->rd.why);
            refuse(c, st, msg);
            return 1;
        }
    }
    snprintf(c->content_length, sizeof c->content_length, "%zu", c->rd.body_len);
    return 0;
}

static int wire_accept(transport_conn *c, char *why, size_t whylen)
{
    close_conn(c);
    int fd = accept4(c->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) return -errno;
    c->fd = fd;
    return read_request(c, why, whylen);
}

static const char *wire_param(transport_conn *c, const char *name)
{
    const http_reader *rd = &c->rd;
    if (!strcmp(name, "REQUEST_METHOD")) return rd->method[0] ? rd->method : NULL;
    if (!strcmp(name, "REQUEST_URI")) return rd->target[0] ? rd->target : NULL;
    if (!strcmp(name, "REQUEST_ID")) return rd->request_id[0] ? rd->request_id : NULL;
    if (!strcmp(name, "CONTENT_TYPE")) return rd->content_type[0] ? rd->content_type : NULL;
    if (!strcmp(name, "CONTENT_LENGTH")) return c->content_length[0] ? c->content_length : NULL;
    return NULL; /* DOCUMENT_URI: nginx passes the request URI as it came */
}

static long wire_read(transport_conn *c, char *buf, size_t n)
{
    size_t left = c->rd.body_len - c->body_off;
    if (n > left) n = left;
    if (n) memcpy(buf, c->rd.body + c->body_off, n);
    c->body_off += n;
    return (long)n;
}

static int wire_init(void) { return 0; }
static void wire_shutdown(void) {}

const transport transport_http = {
    .name = "http", .init = wire_init, .create = wire_create, .destroy = wire_destroy,
    .accept = wire_accept, .finish = wire_finish, .shutdown = wire_shutdown, .param = wire_param,
    .read = wire_read, .head = wire_head, .write = wire_write, .flush = wire_flush,
};
