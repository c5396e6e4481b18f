/* http.h — one request as the handlers see it, whichever transport carried it (transport.h):
 * parameters, body, status and headers, JSON replies, event streams. A write that fails (the
 * client or nginx went away) is remembered. */
#ifndef CLGEMMA_FCGI_HTTP_H
#define CLGEMMA_FCGI_HTTP_H

#include <stddef.h>
#include "api_error.h"
#include "transport.h"

struct http_req {
    const transport *t;
    transport_conn *conn;
    const char *method;      /* "GET", "POST", ... ("" if missing) */
    char path[512];          /* URI path without the query string */
    const char *request_id;  /* nginx's $request_id (REQUEST_ID / X-Request-Id), or one we made */
    char own_id[40];
    double t_start;          /* monotonic seconds */
    int status;              /* status sent, 0 before */
    int write_failed;
    const char *allow;       /* methods of the matched route, for a 405's Allow header */
};

void http_req_init(http_req *r, const transport *t, transport_conn *conn);
/* Reads the body (CONTENT_LENGTH bytes). Larger than max: drains it and fails with 413.
 * Returns 0 with a malloc'd NUL-terminated *body, or -1 with e. */
int  http_read_body(http_req *r, long max, char **body, size_t *len, api_error *e);
/* status line + Content-Type + extra header lines (each ending "\r\n", may be NULL) + body */
int  http_send(http_req *r, int status, const char *content_type, const char *extra_headers,
               const char *body, size_t len);
int  http_send_json(http_req *r, int status, const char *json);
int  http_send_error(http_req *r, const api_error *e);
/* 200 with text/event-stream headers (no buffering in nginx), flushed */
int  http_start_stream(http_req *r);
/* sse_writer callbacks over the request's output stream */
int  http_write(void *r, const char *data, size_t n);
int  http_flush(void *r);
const char *http_reason(int status);

#endif
