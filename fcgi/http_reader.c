/* http_reader.c — an HTTP/1.x request through http-parser's callbacks. */
#include "http_reader.h"

#include <ctype.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static http_reader *of(http_parser *p) { return p->data; }

static int fail(http_reader *rd, int status, const char *why)
{
    if (!rd->status) {
        rd->status = status;
        snprintf(rd->why, sizeof rd->why, "%s", why);
    }
    return -1; /* stops the parser */
}

/* appends to a NUL-terminated field of cap bytes */
static int append(char *dst, size_t cap, size_t *len, const char *s, size_t n)
{
    if (*len + n >= cap) return -1;
    memcpy(dst + *len, s, n);
    *len += n;
    dst[*len] = 0;
    return 0;
}

static int on_url(http_parser *p, const char *s, size_t n)
{
    http_reader *rd = of(p);
    if (append(rd->target, sizeof rd->target, &rd->target_len, s, n)) return fail(rd, 414, "request target too long");
    return 0;
}

static int on_header_field(http_parser *p, const char *s, size_t n)
{
    http_reader *rd = of(p);
    if (rd->in_value) { rd->field_len = 0; rd->field[0] = 0; rd->in_value = 0; }
    for (size_t i = 0; i < n && rd->field_len < sizeof rd->field - 1; i++)
        rd->field[rd->field_len++] = (char)tolower((unsigned char)s[i]);
    rd->field[rd->field_len] = 0;
    return 0;
}

static int on_header_value(http_parser *p, const char *s, size_t n)
{
    http_reader *rd = of(p);
    if (!rd->in_value) { /* a header's first value bytes: pick where they go; a repeat replaces */
        rd->in_value = 1;
        rd->value = NULL;
        if (!strcmp(rd->field, "content-type")) {
            rd->value = rd->content_type, rd->value_cap = sizeof rd->content_type, rd->value_len = &rd->ct_len;
        } else if (!strcmp(rd->field, "x-request-id")) {
            rd->value = rd->request_id, rd->value_cap = sizeof rd->request_id, rd->value_len = &rd->rid_len;
        } else if (!strcmp(rd->field, "expect")) {
            return fail(rd, 417, "Expect is not supported");
        }
        if (rd->value) { *rd->value_len = 0; rd->value[0] = 0; }
    }
    if (rd->value && append(rd->value, rd->value_cap, rd->value_len, s, n)) {
        if (rd->value == rd->content_type) return fail(rd, 400, "Content-Type too long");
        rd->request_id[0] = 0; /* too long to be nginx's: make our own */
        rd->value = NULL;
    }
    return 0;
}

static int on_headers_complete(http_parser *p)
{
    http_reader *rd = of(p);
    rd->headers_done = 1;
    snprintf(rd->method, sizeof rd->method, "%s", http_method_str((enum http_method)p->method));
    if (p->http_major != 1) return fail(rd, 400, "only HTTP/1.x is spoken here");
    if (p->upgrade) return fail(rd, 501, "protocol upgrades are not supported");
    if ((p->flags & F_CONTENTLENGTH) && p->content_length != ULLONG_MAX) {
        if (p->content_length > (uint64_t)rd->max_body) { rd->too_large = 1; return 0; }
        rd->body_cap = (size_t)p->content_length + 1;
        rd->body = malloc(rd->body_cap);
        if (!rd->body) return fail(rd, 413, "no memory for the request body");
    }
    return 0;
}

static int on_body(http_parser *p, const char *s, size_t n)
{
    http_reader *rd = of(p);
    if (rd->too_large || rd->body_len + n > (size_t)rd->max_body) {
        /* read to the end, then 413: nginx is still sending it, and a close now would reset the answer away */
        rd->too_large = 1;
        return 0;
    }
    if (rd->body_len + n + 1 > rd->body_cap) { /* chunked: grow */
        size_t cap = rd->body_cap ? rd->body_cap : 4096;
        while (cap < rd->body_len + n + 1) cap *= 2;
        char *b = realloc(rd->body, cap);
        if (!b) return fail(rd, 413, "no memory for the request body");
        rd->body = b;
        rd->body_cap = cap;
    }
    memcpy(rd->body + rd->body_len, s, n);
    rd->body_len += n;
    rd->body[rd->body_len] = 0;
    return 0;
}

static int on_message_complete(http_parser *p)
{
    http_reader *rd = of(p);
    rd->done = 1;
    http_parser_pause(p, 1); /* one request per connection: what follows is not read */
    if (rd->too_large) fail(rd, 413, "request body larger than max-body");
    return 0;
}

static const http_parser_settings settings = {
    .on_url = on_url, .on_header_field = on_header_field, .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete, .on_body = on_body, .on_message_complete = on_message_complete,
};

void http_reader_init(http_reader *rd, long max_body)
{
    memset(rd, 0, sizeof *rd);
    http_parser_init(&rd->p, HTTP_REQUEST);
    rd->p.data = rd;
    rd->max_body = max_body;
}

int http_reader_feed(http_reader *rd, const char *data, size_t n)
{
    if (rd->status) return rd->status;
    if (rd->done) return HTTP_READER_DONE;
    size_t used = http_parser_execute(&rd->p, &settings, data, n);
    if (rd->status) return rd->status;
    if (rd->done) return HTTP_READER_DONE;
    enum http_errno err = HTTP_PARSER_ERRNO(&rd->p);
    if (err == HPE_HEADER_OVERFLOW) { fail(rd, 431, "request headers too large"); return rd->status; }
    if (err != HPE_OK || used != n) {
        char why[128];
        snprintf(why, sizeof why, "malformed request: %s", http_errno_description(err));
        fail(rd, 400, why);
        return rd->status;
    }
    if (!rd->headers_done) {
        rd->head_bytes += n;
        if (rd->head_bytes > HTTP_READER_MAX_HEAD) { fail(rd, 431, "request headers too large"); return rd->status; }
    }
    return HTTP_READER_MORE;
}

int http_reader_eof(http_reader *rd)
{
    if (rd->status) return rd->status;
    if (rd->done) return HTTP_READER_DONE;
    fail(rd, 400, rd->headers_done ? "the connection ended inside the request body"
                                   : "the connection ended inside the request head");
    return rd->status;
}

void http_reader_free(http_reader *rd)
{
    free(rd->body);
    rd->body = NULL;
}
