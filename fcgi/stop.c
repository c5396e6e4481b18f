/* stop.c — stop-string hold-back (see stop.h). */
#include "stop.h"

#include <stdlib.h>
#include <string.h>

int stop_filter_init(stop_filter *f, const char *const *stops, const size_t *lens, int n)
{
    memset(f, 0, sizeof *f);
    if (n < 0 || n > STOP_MAX) return -1;
    for (int i = 0; i < n; i++) {
        if (!stops[i] || lens[i] == 0) return -1;
        f->stop[i] = stops[i];
        f->stop_len[i] = lens[i];
    }
    f->n_stop = n;
    return 0;
}

void stop_filter_free(stop_filter *f)
{
    free(f->held);
    free(f->out);
    memset(f, 0, sizeof *f);
}

static int reserve(char **buf, size_t *cap, size_t need)
{
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    char *p = realloc(*buf, c);
    if (!p) return -1;
    *buf = p;
    *cap = c;
    return 0;
}

/* earliest position of any stop string in s[0..n), or n when none occurs */
static size_t first_match(const stop_filter *f, const char *s, size_t n)
{
    size_t best = n;
    for (int i = 0; i < f->n_stop; i++) {
        size_t L = f->stop_len[i];
        if (L > n) continue;
        const char *p = memmem(s, n, f->stop[i], L);
        if (p && (size_t)(p - s) < best) best = (size_t)(p - s);
    }
    return best;
}

/* length of the longest suffix of s[0..n) that is a proper prefix of some stop string */
static size_t partial_tail(const stop_filter *f, const char *s, size_t n)
{
    size_t best = 0;
    for (int i = 0; i < f->n_stop; i++) {
        size_t L = f->stop_len[i];
        size_t k = L - 1 < n ? L - 1 : n;
        for (; k > best; k--) {
            if (!memcmp(s + n - k, f->stop[i], k)) { best = k; break; }
        }
    }
    return best;
}

/* moves held[0..n) to the output buffer and the rest of held to its front */
static int release(stop_filter *f, size_t n, const char **out, size_t *out_len)
{
    if (reserve(&f->out, &f->cap_out, n + 1)) return -1;
    memcpy(f->out, f->held, n);
    f->out[n] = 0;
    memmove(f->held, f->held + n, f->n_held - n);
    f->n_held -= n;
    *out = f->out;
    *out_len = n;
    return 0;
}

int stop_filter_push(stop_filter *f, const char *text, size_t len, const char **out, size_t *out_len)
{
    *out = "";
    *out_len = 0;
    if (f->stopped) return 1;
    if (reserve(&f->held, &f->cap_held, f->n_held + len + 1)) return -1;
    memcpy(f->held + f->n_held, text, len);
    f->n_held += len;
    size_t m = first_match(f, f->held, f->n_held);
    if (m < f->n_held) {
        if (release(f, m, out, out_len)) return -1;
        f->stopped = 1;
        f->n_held = 0;
        return 1;
    }
    return release(f, f->n_held - partial_tail(f, f->held, f->n_held), out, out_len);
}

void stop_filter_finish(stop_filter *f, const char **out, size_t *out_len)
{
    *out = "";
    *out_len = 0;
    if (f->stopped || f->n_held == 0) return;
    if (release(f, f->n_held, out, out_len)) {
        /* no memory for a copy: hand out the held bytes themselves (the filter is done) */
        *out = f->held;
        *out_len = f->n_held;
        f->n_held = 0;
    }
}
