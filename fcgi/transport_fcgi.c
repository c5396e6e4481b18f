/* transport_fcgi.c — FastCGI through libfcgi: nginx's fastcgi_pass (--protocol fastcgi). */
#include "transport.h"

#include <fcgiapp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct transport_conn {
    FCGX_Request req;
};

static int fcgi_init(void) { return FCGX_Init(); }

static transport_conn *fcgi_create(int listen_fd, const transport_limits *lim)
{
    (void)lim; /* nginx enforces the body limit; http_read_body drains what is over */
    transport_conn *c = calloc(1, sizeof *c);
    if (c && FCGX_InitRequest(&c->req, listen_fd, FCGI_FAIL_ACCEPT_ON_INTR)) { free(c); return NULL; }
    return c;
}

static void fcgi_destroy(transport_conn *c)
{
    if (!c) return;
    FCGX_Free(&c->req, 1);
    free(c);
}

static int fcgi_accept(transport_conn *c, char *why, size_t whylen)
{
    (void)why; (void)whylen;
    return FCGX_Accept_r(&c->req);
}

static void fcgi_finish(transport_conn *c) { FCGX_Finish_r(&c->req); }

static void fcgi_shutdown(void) { FCGX_ShutdownPending(); }

static const char *fcgi_param(transport_conn *c, const char *name)
{
    return FCGX_GetParam(name, c->req.envp);
}

static long fcgi_read(transport_conn *c, char *buf, size_t n)
{
    int k = FCGX_GetStr(buf, n > (1u << 30) ? (1 << 30) : (int)n, c->req.in);
    return k < 0 ? -1 : k;
}

static int fcgi_write(transport_conn *c, const char *data, size_t n)
{
    while (n) {
        int chunk = n > (1u << 30) ? (1 << 30) : (int)n;
        if (FCGX_PutStr(data, chunk, c->req.out) != chunk) return -1;
        data += chunk;
        n -= (size_t)chunk;
    }
    return 0;
}

static int fcgi_head(transport_conn *c, int status, const char *reason, const char *headers, long length)
{
    (void)length; /* nginx frames the body for the client itself */
    char line[64];
    int k = snprintf(line, sizeof line, "Status: %d %s\r\n", status, reason);
    if (fcgi_write(c, line, (size_t)k)) return -1;
    if (fcgi_write(c, headers, strlen(headers))) return -1;
    return fcgi_write(c, "\r\n", 2);
}

static int fcgi_flush(transport_conn *c)
{
    return FCGX_FFlush(c->req.out) < 0 || FCGX_GetError(c->req.out) ? -1 : 0;
}

const transport transport_fcgi = {
    .name = "fastcgi", .init = fcgi_init, .create = fcgi_create, .destroy = fcgi_destroy,
    .accept = fcgi_accept, .finish = fcgi_finish, .shutdown = fcgi_shutdown, .param = fcgi_param,
    .read = fcgi_read, .head = fcgi_head, .write = fcgi_write, .flush = fcgi_flush,
};
