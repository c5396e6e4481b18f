/* http_reader.h — one HTTP/1.x request, fed in pieces as it arrives, parsed by http-parser:
 * method, target, the few headers the worker uses, and the whole body. No I/O here. */
#ifndef CLGEMMA_FCGI_HTTP_READER_H
#define CLGEMMA_FCGI_HTTP_READER_H

#include <http_parser.h>
#include <stddef.h>

#define HTTP_READER_MAX_HEAD (64 * 1024)   /* request line and headers together */

enum { HTTP_READER_MORE = 0, HTTP_READER_DONE = 1 }; /* else an HTTP status (400, 413, 414, 431, 501) */

typedef struct http_reader {
    http_parser p;
    long max_body;
    size_t head_bytes;        /* fed before the headers ended */
    int headers_done, done, status;
    int too_large;            /* over max-body: the rest is read and dropped, then 413 */
    char why[128];
    char method[16];
    char target[2048];
    size_t target_len;
    char content_type[256];
    char request_id[72];
    /* the header being read: its name (lowercased, cut at 31 bytes) and where its value goes */
    char field[32];
    size_t field_len;
    int in_value;
    char *value;
    size_t value_cap, *value_len, ct_len, rid_len, skip_len;
    char *body;
    size_t body_len, body_cap;
} http_reader;

void http_reader_init(http_reader *rd, long max_body);
/* Feeds the next n bytes: HTTP_READER_MORE, HTTP_READER_DONE (bytes after the request are
 * ignored), or an error status with rd->why. Once not MORE, it stays so. */
int  http_reader_feed(http_reader *rd, const char *data, size_t n);
/* The connection ended: DONE if the request was whole, else 400 */
int  http_reader_eof(http_reader *rd);
void http_reader_free(http_reader *rd);

#endif
