/* http.c — the handlers' view of a request over either transport (transport.h). */
#include "http.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "clock.h"

static const transport *const transports[] = { &transport_http, &transport_fcgi };

const transport *transport_find(const char *name)
{
    for (size_t i = 0; i < sizeof transports / sizeof transports[0]; i++)
        if (!strcmp(transports[i]->name, name)) return transports[i];
    return NULL;
}

static const char *param(http_req *r, const char *name)
{
    return r->t->param(r->conn, name);
}

void http_req_init(http_req *r, const transport *t, transport_conn *conn)
{
    memset(r, 0, sizeof *r);
    r->t = t;
    r->conn = conn;
    r->t_start = monotonic_seconds();
    r->method = param(r, "REQUEST_METHOD");
    if (!r->method) r->method = "";
    const char *uri = param(r, "DOCUMENT_URI");
    if (!uri) uri = param(r, "REQUEST_URI");
    if (!uri) uri = "/";
    size_t n = strcspn(uri, "?");
    if (n >= sizeof r->path) n = sizeof r->path - 1;
    memcpy(r->path, uri, n);
    r->path[n] = 0;
    r->request_id = param(r, "REQUEST_ID");
    if (!r->request_id || !*r->request_id || strlen(r->request_id) > 64) {
        /* no nginx in front (a direct connection): 32 hex digits like nginx's $request_id */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        snprintf(r->own_id, sizeof r->own_id, "%016llx%08x%08lx", (unsigned long long)ts.tv_sec,
                 (unsigned)ts.tv_nsec, (unsigned long)((uintptr_t)r >> 4) & 0xffffffffUL);
        r->request_id = r->own_id;
    }
}

/* application/json with parameters (charset) or none; media types compare case-insensitively (RFC 9110) */
static int is_json(const char *ct)
{
    static const char json[] = "application/json";
    if (!ct || strncasecmp(ct, json, sizeof json - 1)) return 0;
    ct += sizeof json - 1;
    ct += strspn(ct, " \t");
    return *ct == 0 || *ct == ';';
}

int http_read_body(http_req *r, long max, char **body, size_t *len, api_error *e)
{
    *body = NULL;
    *len = 0;
    const char *ct = param(r, "CONTENT_TYPE");
    if (!is_json(ct)) {
        char sink[8192];
        while (r->t->read(r->conn, sink, sizeof sink) > 0) {}
        return api_fail(e, 415, "invalid_request_error", "unsupported_media_type", NULL,
                        "Content-Type must be application/json, not '%.100s'", ct && *ct ? ct : "(none)");
    }
    const char *cl = param(r, "CONTENT_LENGTH");
    long n = 0;
    if (cl && *cl) {
        char *end;
        n = strtol(cl, &end, 10);
        if (*end || n < 0) return api_fail(e, 400, "invalid_request_error", NULL, NULL, "bad Content-Length");
    }
    if (n > max) {
        char sink[8192];
        while (r->t->read(r->conn, sink, sizeof sink) > 0) {}
        return api_fail(e, 413, "invalid_request_error", "request_too_large", NULL,
                        "request body of %ld bytes is larger than the limit of %ld bytes", n, max);
    }
    char *b = malloc((size_t)n + 1);
    if (!b) return api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    long got = 0;
    while (got < n) {
        long k = r->t->read(r->conn, b + got, (size_t)(n - got));
        if (k <= 0) break;
        got += k;
    }
    if (got != n) {
        free(b);
        return api_fail(e, 400, "invalid_request_error", NULL, NULL, "request body ended after %ld of %ld bytes", got, n);
    }
    b[n] = 0;
    *body = b;
    *len = (size_t)n;
    return 0;
}

const char *http_reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Unknown";
    }
}

int http_write(void *ctx, const char *data, size_t n)
{
    http_req *r = ctx;
    if (r->write_failed) return -1;
    if (n && r->t->write(r->conn, data, n)) { r->write_failed = 1; return -1; }
    return 0;
}

int http_flush(void *ctx)
{
    http_req *r = ctx;
    if (r->write_failed) return -1;
    if (r->t->flush(r->conn)) { r->write_failed = 1; return -1; }
    return 0;
}

static int send_head(http_req *r, int status, const char *content_type, const char *extra, long length)
{
    char head[1024];
    int k = snprintf(head, sizeof head, "Content-Type: %s\r\nX-Request-Id: %s\r\n%s",
                     content_type, r->request_id, extra ? extra : "");
    if (k < 0 || (size_t)k >= sizeof head) return -1;
    if (r->write_failed) return -1;
    r->status = status;
    if (r->t->head(r->conn, status, http_reason(status), head, length)) { r->write_failed = 1; return -1; }
    return 0;
}

int http_send(http_req *r, int status, const char *content_type, const char *extra_headers,
              const char *body, size_t len)
{
    if (send_head(r, status, content_type, extra_headers, (long)len)) return -1;
    if (len && http_write(r, body, len)) return -1;
    return http_flush(r);
}

int http_send_json(http_req *r, int status, const char *json)
{
    return http_send(r, status, "application/json", NULL, json, strlen(json));
}

int http_send_error(http_req *r, const api_error *e)
{
    static const char oom[] =
        "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,\"code\":null}}";
    char extra[64] = "";
    if (e->status == 405) snprintf(extra, sizeof extra, "Allow: %s\r\n", r->allow ? r->allow : "GET, POST");
    if (e->status == 503 || e->status == 429) snprintf(extra, sizeof extra, "Retry-After: 1\r\n");
    char *body = api_error_body(e);
    const char *b = body ? body : oom;
    int rc = http_send(r, e->status, "application/json", extra, b, strlen(b));
    free(body);
    return rc;
}

int http_start_stream(http_req *r)
{
    if (send_head(r, 200, "text/event-stream; charset=utf-8",
                  "Cache-Control: no-cache\r\nX-Accel-Buffering: no\r\n", -1)) return -1;
    return http_flush(r);
}
