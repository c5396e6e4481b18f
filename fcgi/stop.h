/* stop.h — the stop-string filter: holds back text which may be the start of a stop string, also
 * across tokens, and drops everything from the first match on. Pure C: no FastCGI, no engine. */
#ifndef CLGEMMA_FCGI_STOP_H
#define CLGEMMA_FCGI_STOP_H

#include <stddef.h>

#define STOP_MAX 4

typedef struct stop_filter {
    const char *stop[STOP_MAX]; /* borrowed, non-empty */
    size_t stop_len[STOP_MAX];
    int n_stop;
    char *held;                 /* text not yet released: a possible start of a stop string */
    size_t n_held, cap_held;
    char *out;                  /* text released by the last call */
    size_t cap_out;
    int stopped;                /* a stop string matched: nothing more is ever released */
} stop_filter;

/* stops: n (0..STOP_MAX) strings that must outlive the filter. Returns 0 or -1 (bad arguments). */
int  stop_filter_init(stop_filter *f, const char *const *stops, const size_t *lens, int n);
void stop_filter_free(stop_filter *f);
/* Appends text; *out and *out_len receive the text that is now safe to send (points into the
 * filter, valid until the next call). Returns 1 when a stop string matched (the text before it
 * is in *out, the stop string and anything after it are dropped), 0 otherwise, -1 on OOM. */
int  stop_filter_push(stop_filter *f, const char *text, size_t len, const char **out, size_t *out_len);
/* End of generation without a stop string: releases what was held back. */
void stop_filter_finish(stop_filter *f, const char **out, size_t *out_len);

#endif
