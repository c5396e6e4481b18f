/* http.c — HTTP over a FastCGI request. */
#include "http.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "clock.h"

static const char *param(http_req *r, const char *name)
{
    return FCGX_GetParam(name, r->fr->envp);
}

void http_req_init(http_req *r, FCGX_Request *fr)
{
    memset(r, 0, sizeof *r);
    r->fr = fr;
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
        /* no nginx in front (direct FastCGI): 32 hex digits like nginx's $request_id */
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
        while (FCGX_GetStr(sink, sizeof sink, r->fr->in) > 0) {}
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
        while (FCGX_GetStr(sink, sizeof sink, r->fr->in) > 0) {}
        return api_fail(e, 413, "invalid_request_error", "request_too_large", NULL,
                        "request body of %ld bytes is larger than the limit of %ld bytes", n, max);
    }
    char *b = malloc((size_t)n + 1);
    if (!b) return api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    long got = 0;
    while (got < n) {
        int k = FCGX_GetStr(b + got, (int)(n - got), r->fr->in);
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

static const char *reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
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
    while (n) {
        int chunk = n > (1u << 30) ? (1 << 30) : (int)n;
        if (FCGX_PutStr(data, chunk, r->fr->out) != chunk) { r->write_failed = 1; return -1; }
        data += chunk;
        n -= (size_t)chunk;
    }
    return 0;
}

int http_flush(void *ctx)
{
    http_req *r = ctx;
    if (r->write_failed) return -1;
    if (FCGX_FFlush(r->fr->out) < 0 || FCGX_GetError(r->fr->out)) { r->write_failed = 1; return -1; }
    return 0;
}

static int send_head(http_req *r, int status, const char *content_type, const char *extra)
{
    char head[1024];
    int k = snprintf(head, sizeof head, "Status: %d %s\r\nContent-Type: %s\r\nX-Request-Id: %s\r\n%s\r\n",
                     status, reason(status), content_type, r->request_id, extra ? extra : "");
    if (k < 0 || (size_t)k >= sizeof head) return -1;
    r->status = status;
    return http_write(r, head, (size_t)k);
}

int http_send(http_req *r, int status, const char *content_type, const char *extra_headers,
              const char *body, size_t len)
{
    if (send_head(r, status, content_type, extra_headers)) return -1;
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
                  "Cache-Control: no-cache\r\nX-Accel-Buffering: no\r\n")) return -1;
    return http_flush(r);
}
