/* fetch.c — see fetch.h. libcurl parses the URLs (its URL API) and fetches them. */
#include "fetch.h"

#include <ctype.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int fetch_global_init(void) { return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1; }

static void lower(char *s)
{
    for (; *s; s++) *s = (char)tolower((unsigned char)*s);
}

/* scheme, host (lower case) and port of url; -1 with why where it is not an absolute http(s) URL with a host,
 * or carries credentials */
static int url_parts(const char *url, int *http, char *host, size_t hostlen, int *port, char *why, size_t whylen)
{
    CURLU *u = curl_url();
    char *scheme = NULL, *h = NULL, *p = NULL, *user = NULL;
    int rc = -1;
    if (!u || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK) {
        snprintf(why, whylen, "not a valid URL");
    } else if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
               (strcmp(scheme, "http") && strcmp(scheme, "https"))) {
        snprintf(why, whylen, "only http and https URLs are fetched");
    } else if (curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK) {
        snprintf(why, whylen, "URLs with credentials are not fetched");
    } else if (curl_url_get(u, CURLUPART_HOST, &h, 0) != CURLUE_OK || strlen(h) >= hostlen) {
        snprintf(why, whylen, "the URL has no usable host");
    } else if (curl_url_get(u, CURLUPART_PORT, &p, CURLU_DEFAULT_PORT) != CURLUE_OK) {
        snprintf(why, whylen, "the URL has no usable port");
    } else {
        *http = !strcmp(scheme, "http");
        snprintf(host, hostlen, "%s", h);
        lower(host);
        size_t n = strlen(host);
        if (n > 1 && host[n - 1] == '.') host[n - 1] = 0; /* "example.com." is example.com */
        *port = atoi(p);
        rc = 0;
    }
    curl_free(scheme);
    curl_free(h);
    curl_free(p);
    curl_free(user);
    curl_url_cleanup(u);
    return rc;
}

int fetch_rules_parse(fetch_rules *r, const char *list, char *err, size_t errlen)
{
    r->n = 0;
    const char *p = list;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char entry[300], url[320], why[128];
        if (len == 0 || len >= sizeof entry) {
            snprintf(err, errlen, "--image-url-allow: an entry is empty or longer than %zu characters",
                     sizeof entry - 1);
            return -1;
        }
        if (r->n == FETCH_MAX_RULES) {
            snprintf(err, errlen, "--image-url-allow: more than %d entries", FETCH_MAX_RULES);
            return -1;
        }
        memcpy(entry, p, len);
        entry[len] = 0;
        fetch_rule *q = &r->rule[r->n];
        int has_scheme = strstr(entry, "://") != NULL;
        const char *host = has_scheme ? strstr(entry, "://") + 3 : entry;
        q->wildcard = !strncmp(host, "*.", 2);
        /* the wildcard's "*" is not a host character: parse the rest as the host */
        snprintf(url, sizeof url, "%.*s%s%s", has_scheme ? (int)(host - entry) : 0, entry, has_scheme ? "" : "https://",
                 host + (q->wildcard ? 2 : 0));
        if (strchr(url + (strstr(url, "://") - url) + 3, '/') ||
            url_parts(url, &q->http, q->host + q->wildcard, sizeof q->host - 1, &q->port, why, sizeof why)) {
            snprintf(err, errlen, "--image-url-allow: '%s' is not [http://|https://]HOST[:PORT] (HOST a name, *.name "
                     "or an IP address)", entry);
            return -1;
        }
        if (q->wildcard) q->host[0] = '.';
        r->n++;
        p += len + (comma ? 1 : 0);
        if (comma && !*p) {
            snprintf(err, errlen, "--image-url-allow: the list ends with a comma");
            return -1;
        }
    }
    return 0;
}

int fetch_allowed(const fetch_rules *r, const char *url, char *why, size_t whylen)
{
    if (!r->n) {
        snprintf(why, whylen, "this server does not fetch URLs: only data: URLs are accepted");
        return -1;
    }
    char host[256];
    int http, port;
    if (url_parts(url, &http, host, sizeof host, &port, why, whylen)) return -1;
    for (int i = 0; i < r->n; i++) {
        const fetch_rule *q = &r->rule[i];
        size_t hl = strlen(host), ql = strlen(q->host);
        int host_ok = q->wildcard ? hl > ql && !strcmp(host + hl - ql, q->host) : !strcmp(host, q->host);
        if (host_ok && q->http == http && q->port == port) return 0;
    }
    snprintf(why, whylen, "%s://%s:%d is not among the hosts this server fetches images from", http ? "http" : "https",
             host, port);
    return -1;
}

typedef struct sink {
    unsigned char *buf;
    size_t len, cap, max;
    int over;
} sink;

static size_t on_data(char *p, size_t size, size_t n, void *ud)
{
    sink *s = ud;
    size_t k = size * n;
    if (s->len + k > s->max) {
        s->over = 1;
        return 0; /* aborts the transfer */
    }
    if (s->len + k > s->cap) {
        size_t cap = s->cap ? s->cap : 65536;
        while (cap < s->len + k) cap *= 2;
        if (cap > s->max) cap = s->max;
        unsigned char *b = realloc(s->buf, cap);
        if (!b) return 0;
        s->buf = b;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, p, k);
    s->len += k;
    return k;
}

int fetch_get(const fetch_rules *r, const char *url, unsigned char **out, size_t *len, char *why, size_t whylen)
{
    if (fetch_allowed(r, url, why, whylen)) return -1;
    CURL *c = curl_easy_init();
    if (!c) {
        snprintf(why, whylen, "fetching the URL: out of memory");
        return -1;
    }
    sink s = { .max = r->max_bytes };
    char cerr[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L); /* a redirect could leave the allowlist */
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");       /* the environment's proxies are not the operator's list */
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);       /* request threads: no SIGALRM for DNS timeouts */
    curl_easy_setopt(c, CURLOPT_TIMEOUT, (long)r->timeout_s);
    curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)r->max_bytes);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "clgemma");
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    if (s.over || rc == CURLE_FILESIZE_EXCEEDED)
        snprintf(why, whylen, "the image at the URL is larger than this server's limit of %zu bytes", r->max_bytes);
    else if (rc == CURLE_OPERATION_TIMEDOUT)
        snprintf(why, whylen, "fetching the URL took longer than %d s", r->timeout_s);
    else if (rc != CURLE_OK)
        snprintf(why, whylen, "fetching the URL failed: %s", cerr[0] ? cerr : curl_easy_strerror(rc));
    else if (status != 200)
        snprintf(why, whylen, "fetching the URL answered HTTP %ld%s", status,
                 status / 100 == 3 ? " (redirects are not followed)" : "");
    else if (!s.len)
        snprintf(why, whylen, "the URL's body is empty");
    if (s.over || rc != CURLE_OK || status != 200 || !s.len) {
        free(s.buf);
        return -1;
    }
    *out = s.buf;
    *len = s.len;
    return 0;
}
