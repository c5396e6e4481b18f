/* fuzz_http.c — libFuzzer target for the worker's HTTP request reader (fcgi/http_reader.c): any
 * bytes, fed in pieces whose sizes the first byte picks, under a small max-body; the reader must
 * end in MORE, DONE or a 4xx/5xx status, and what it reports must be well-formed. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    size_t step = (size_t)(data[0] % 17) + 1;
    long max_body = 1L << (data[0] >> 5); /* 1 .. 128 bytes */
    data++, size--;
    http_reader rd;
    http_reader_init(&rd, max_body);
    int st = HTTP_READER_MORE;
    for (size_t i = 0; i < size && st == HTTP_READER_MORE; i += step)
        st = http_reader_feed(&rd, (const char *)data + i, size - i < step ? size - i : step);
    if (st == HTTP_READER_MORE) st = http_reader_eof(&rd);
    if (st == HTTP_READER_DONE) {
        if (strlen(rd.method) == 0 || strlen(rd.target) != rd.target_len) abort();
        if ((long)rd.body_len > max_body || (rd.body_len && strlen(rd.body) > rd.body_len)) abort();
        if (strlen(rd.request_id) >= sizeof rd.request_id || strlen(rd.content_type) >= sizeof rd.content_type) abort();
    } else if (st < 400 || st > 599 || !rd.why[0]) {
        abort();
    }
    http_reader_free(&rd);
    return 0;
}
