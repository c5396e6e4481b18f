/* fetch.h — image URLs fetched for a request, only from the hosts the operator lists (--image-url-allow):
 * a server that fetches whatever URL a client names is an SSRF hazard, so none is fetched by default. URLs are
 * parsed and fetched by libcurl; no redirect is followed, no proxy is used, and size and time are bounded. */
#ifndef CLGEMMA_FCGI_FETCH_H
#define CLGEMMA_FCGI_FETCH_H

#include <stddef.h>

#define FETCH_MAX_RULES 32

/* one allowlist entry: [http://|https://]HOST[:PORT]; HOST a name, "*.name" (its subdomains, not itself) or an
 * IP literal; no scheme: https only; no port: the scheme's default only */
typedef struct fetch_rule {
    char host[256];  /* lower case; "*.name" kept as ".name" */
    int wildcard;
    int http;        /* the scheme: 1 http, 0 https */
    int port;
} fetch_rule;

typedef struct fetch_rules {
    fetch_rule rule[FETCH_MAX_RULES];
    int n;                /* 0: no URL is fetched */
    size_t max_bytes;     /* a body larger than this is refused */
    int timeout_s;        /* the whole transfer, connection included */
} fetch_rules;

/* Once per process, before threads (libcurl's global set-up). */
int  fetch_global_init(void);
/* Parses a comma-separated allowlist into r (replacing its rules). -1 with one line in err. */
int  fetch_rules_parse(fetch_rules *r, const char *list, char *err, size_t errlen);
/* 0 if url may be fetched under r; -1 with why (for the client: names the host, not the list). */
int  fetch_allowed(const fetch_rules *r, const char *url, char *why, size_t whylen);
/* The body of url (allowed, HTTP 200, at most r->max_bytes) into *out (malloc'd). -1 with one line in why. */
int  fetch_get(const fetch_rules *r, const char *url, unsigned char **out, size_t *len, char *why, size_t whylen);

#endif
