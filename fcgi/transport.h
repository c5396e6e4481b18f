/* transport.h — how request threads take requests off the listening socket and answer them:
 * FastCGI (libfcgi) or HTTP/1.1 (http-parser). One table per protocol, so the handlers, which
 * see only http.h, do not know which one nginx speaks. */
#ifndef CLGEMMA_FCGI_TRANSPORT_H
#define CLGEMMA_FCGI_TRANSPORT_H

#include <stddef.h>

typedef struct http_req http_req;
typedef struct transport_conn transport_conn; /* one request thread's connection state */

typedef struct transport_limits {
    long max_body;            /* larger bodies are refused with 413 before any handler runs (HTTP) */
    int read_timeout_ms;      /* a request (head and body) must arrive within this, else 408 (HTTP) */
} transport_limits;

typedef struct transport {
    const char *name;         /* the --protocol value */
    int  (*init)(void);       /* once per process; 0 ok */
    transport_conn *(*create)(int listen_fd, const transport_limits *lim);
    void (*destroy)(transport_conn *c);
    /* Waits for the next request: 0 when one is ready for http_req_init; 1 when bad input was
     * answered (4xx) and closed, why says what; -errno (-EINTR when woken) */
    int  (*accept)(transport_conn *c, char *why, size_t whylen);
    void (*finish)(transport_conn *c);   /* ends the response (FastCGI END_REQUEST, final chunk) */
    void (*shutdown)(void);              /* the worker stops: leave accept */
    /* the request's CGI-style parameters: REQUEST_METHOD, REQUEST_URI, DOCUMENT_URI, REQUEST_ID,
     * CONTENT_TYPE, CONTENT_LENGTH; NULL when absent */
    const char *(*param)(transport_conn *c, const char *name);
    long (*read)(transport_conn *c, char *buf, size_t n);   /* body bytes; 0 at its end, -1 error */
    /* status line and header lines (each ending "\r\n"); content_length < 0: a stream */
    int  (*head)(transport_conn *c, int status, const char *reason, const char *headers, long content_length);
    int  (*write)(transport_conn *c, const char *data, size_t n);
    int  (*flush)(transport_conn *c);    /* what was written reaches nginx now (HTTP: one chunk) */
} transport;

extern const transport transport_fcgi, transport_http;

/* by --protocol name; NULL if unknown */
const transport *transport_find(const char *name);

#endif
