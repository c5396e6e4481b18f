/* test_fcgi_fetch.c — the image-URL allowlist (fcgi/fetch.c, --image-url-allow): entries parsed or refused
 * naming the option, and which URLs each lets through (scheme, host, wildcard subdomains, port, credentials,
 * case and a trailing dot). The fetch itself (redirects, size, time, HTTP errors) runs in e2e_images against a
 * local server. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "config.h"
#include "fetch.h"

static void test_rules_parsed(void)
{
    fetch_rules r = { 0 };
    char err[256] = "";
    CHECK(fetch_rules_parse(&r, "Example.com,*.img.example.org,http://127.0.0.1:8080,https://[::1]:8443", err,
                            sizeof err) == 0 && r.n == 4, "a valid list refused: %s", err);
    CHECK(!strcmp(r.rule[0].host, "example.com") && !r.rule[0].http && r.rule[0].port == 443 && !r.rule[0].wildcard,
          "bare host: %s http %d port %d", r.rule[0].host, r.rule[0].http, r.rule[0].port);
    CHECK(r.rule[1].wildcard && !strcmp(r.rule[1].host, ".img.example.org"), "wildcard: %s", r.rule[1].host);
    CHECK(r.rule[2].http && r.rule[2].port == 8080, "http entry: http %d port %d", r.rule[2].http, r.rule[2].port);
    CHECK(fetch_rules_parse(&r, "", err, sizeof err) == 0 && r.n == 0, "an empty list (none fetched): %s", err);
    static const char *const bad[] = { "a,,b", "a,", "ftp://x", "http://x/path", "https://u:p@x",
                                       "exa mple.com", "http://", "*.", "x:99999" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        fetch_rules b = { 0 };
        err[0] = 0;
        CHECK(fetch_rules_parse(&b, bad[i], err, sizeof err) == -1 && strstr(err, "--image-url-allow"),
              "'%s' not refused (%s)", bad[i], err);
    }
    char many[40 * 4] = "";
    for (int i = 0; i < FETCH_MAX_RULES + 1; i++) snprintf(many + strlen(many), sizeof many - strlen(many), "%sh%d",
                                                           i ? "," : "", i);
    CHECK(fetch_rules_parse(&r, many, err, sizeof err) == -1 && strstr(err, "more than"), "%d entries: %s",
          FETCH_MAX_RULES + 1, err);
}

static void test_urls_allowed(void)
{
    fetch_rules r = { 0 };
    char why[256];
    CHECK(fetch_allowed(&r, "https://example.com/a.png", why, sizeof why) == -1 && strstr(why, "data: URLs"),
          "no rules: '%s'", why);
    CHECK(fetch_rules_parse(&r, "example.com,*.img.example.org,http://127.0.0.1:8080", why, sizeof why) == 0, "%s",
          why);
    static const struct { const char *url; int ok; } cases[] = {
        { "https://example.com/a.png", 1 },
        { "HTTPS://EXAMPLE.com./a.png?x=1", 1 },
        { "https://example.com:443/a.png", 1 },
        { "http://example.com/a.png", 0 },          /* the entry has no scheme: https only */
        { "https://example.com:444/a.png", 0 },     /* nor a port: 443 only */
        { "https://www.example.com/a.png", 0 },     /* a bare host covers itself, not its subdomains */
        { "https://a.img.example.org/x", 1 },
        { "https://b.a.img.example.org/x", 1 },
        { "https://img.example.org/x", 0 },         /* *.name: subdomains only */
        { "https://evilimg.example.org/x", 0 },
        { "https://example.com.evil.net/a.png", 0 },
        { "http://127.0.0.1:8080/p.png", 1 },
        { "http://127.0.0.1/p.png", 0 },
        { "https://127.0.0.1:8080/p.png", 0 },
        { "http://localhost:8080/p.png", 0 },
        { "https://user:pw@example.com/a.png", 0 },
        { "https://example.com@evil.net/a.png", 0 },
        { "ftp://example.com/a.png", 0 },
        { "not a url", 0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        why[0] = 0;
        int got = fetch_allowed(&r, cases[i].url, why, sizeof why) == 0;
        CHECK(got == cases[i].ok, "%s: %s (%s)", cases[i].url, got ? "allowed" : "refused", why);
    }
}

/* the options through the config parser: the list, the size and time limits */
static void test_options(void)
{
    server_config c;
    config_defaults(&c);
    char err[256] = "";
    CHECK(c.image_urls.n == 0 && c.image_urls.max_bytes == 20u << 20 && c.image_urls.timeout_s == 10, "defaults");
    char *argv[] = { "clgemma-fcgi", "--image-url-allow", "http://127.0.0.1:9", "--image-url-max-mb", "2",
                     "--image-url-timeout", "3" };
    CHECK(config_parse_args(&c, 7, argv, err, sizeof err) == 0 && c.image_urls.n == 1 &&
          c.image_urls.max_bytes == 2u << 20 && c.image_urls.timeout_s == 3, "options: %s", err);
    char *bad[] = { "clgemma-fcgi", "--image-url-allow", "gopher://x" };
    CHECK(config_parse_args(&c, 3, bad, err, sizeof err) == -1 && strstr(err, "--image-url-allow"), "%s", err);
}

int main(void)
{
    RUN_TEST(test_rules_parsed);
    RUN_TEST(test_urls_allowed);
    RUN_TEST(test_options);
    CHECK_EXIT();
}
