/* test_fcgi_stop.c — stop-string hold-back (fcgi/stop.c), no engine, no FastCGI. */
#include <string.h>

#include "check.h"
#include "stop.h"

/* feeds pieces through a filter; returns everything released, and whether a stop matched */
static int run(const char *const *stops, int n_stops, const char *const *pieces, int n_pieces, char *out,
               size_t cap, int *stopped_at_piece)
{
    size_t lens[STOP_MAX];
    for (int i = 0; i < n_stops; i++) lens[i] = strlen(stops[i]);
    stop_filter f;
    if (stop_filter_init(&f, stops, lens, n_stops)) return -1;
    size_t n = 0;
    int stopped = 0;
    *stopped_at_piece = -1;
    for (int i = 0; i < n_pieces && !stopped; i++) {
        const char *o;
        size_t ol;
        int r = stop_filter_push(&f, pieces[i], strlen(pieces[i]), &o, &ol);
        if (r < 0 || n + ol >= cap) { stop_filter_free(&f); return -1; }
        memcpy(out + n, o, ol);
        n += ol;
        if (r == 1) { stopped = 1; *stopped_at_piece = i; }
    }
    if (!stopped) {
        const char *o;
        size_t ol;
        stop_filter_finish(&f, &o, &ol);
        memcpy(out + n, o, ol);
        n += ol;
    }
    out[n] = 0;
    stop_filter_free(&f);
    return stopped;
}

static void test_no_stops_passes_everything(void)
{
    const char *p[] = { "Hel", "lo", " world" };
    char out[64];
    int at;
    CHECK(run(NULL, 0, p, 3, out, sizeof out, &at) == 0, "no stop expected");
    CHECK(!strcmp(out, "Hello world"), "got '%s'", out);
}

static void test_stop_inside_one_piece(void)
{
    const char *s[] = { "END" };
    const char *p[] = { "abc", "xyENDzz", "more" };
    char out[64];
    int at;
    CHECK(run(s, 1, p, 3, out, sizeof out, &at) == 1, "stop expected");
    CHECK(!strcmp(out, "abcxy"), "got '%s'", out);
    CHECK(at == 1, "stopped at piece %d", at);
}

static void test_stop_straddles_pieces(void)
{
    const char *s[] = { "</answer>" };
    const char *p[] = { "42 is it<", "/ans", "wer> trailing" };
    char out[64];
    int at;
    CHECK(run(s, 1, p, 3, out, sizeof out, &at) == 1, "stop expected");
    CHECK(!strcmp(out, "42 is it"), "got '%s'", out);
    CHECK(at == 2, "stopped at piece %d", at);
}

/* the held-back prefix is released as soon as it can no longer start the stop string */
static void test_false_start_is_released(void)
{
    const char *s[] = { "STOP" };
    size_t l = 4;
    stop_filter f;
    CHECK(!stop_filter_init(&f, s, &l, 1), "init");
    const char *o;
    size_t ol;
    CHECK(stop_filter_push(&f, "go ST", 5, &o, &ol) == 0, "no stop yet");
    CHECK(ol == 3 && !memcmp(o, "go ", 3), "released %zu bytes '%.*s', want 'go '", ol, (int)ol, o);
    CHECK(stop_filter_push(&f, "A", 1, &o, &ol) == 0, "no stop");
    CHECK(ol == 3 && !memcmp(o, "STA", 3), "released '%.*s', want 'STA'", (int)ol, o);
    stop_filter_finish(&f, &o, &ol);
    CHECK(ol == 0, "nothing should be left, got %zu", ol);
    stop_filter_free(&f);
}

static void test_unmatched_tail_released_at_finish(void)
{
    const char *s[] = { "\n\nUser:" };
    const char *p[] = { "The end.", "\n", "\nUs" };
    char out[64];
    int at;
    CHECK(run(s, 1, p, 3, out, sizeof out, &at) == 0, "no stop expected");
    CHECK(!strcmp(out, "The end.\n\nUs"), "got '%s'", out);
}

static void test_earliest_of_several_stops_wins(void)
{
    const char *s[] = { "world", "lo w", "xyz", "o" };
    const char *p[] = { "hel", "lo world" };
    char out[64];
    int at;
    CHECK(run(s, 4, p, 2, out, sizeof out, &at) == 1, "stop expected");
    /* "hello world": "lo w" starts at 3, before "o" (4) and "world" (6) */
    CHECK(!strcmp(out, "hel"), "got '%s'", out);
}

static void test_overlapping_prefixes(void)
{
    /* "aab": after "aa" the tail "aa" is still a possible start; "aaab" must stop after one 'a' */
    const char *s[] = { "aab" };
    const char *p[] = { "a", "a", "a", "b", "c" };
    char out[64];
    int at;
    CHECK(run(s, 1, p, 5, out, sizeof out, &at) == 1, "stop expected");
    CHECK(!strcmp(out, "a"), "got '%s'", out);
}

static void test_utf8_stop_never_splits_characters(void)
{
    /* stop "é!" (c3 a9 21); text "café!" arrives byte-split: released text stays valid UTF-8 */
    const char *s[] = { "\xc3\xa9!" };
    const char *p[] = { "caf\xc3", "\xa9", "!", "x" };
    char out[64];
    int at;
    CHECK(run(s, 1, p, 4, out, sizeof out, &at) == 1, "stop expected");
    CHECK(!strcmp(out, "caf"), "got '%s'", out);
}

static void test_after_stop_nothing_more(void)
{
    const char *s[] = { "X" };
    size_t l = 1;
    stop_filter f;
    stop_filter_init(&f, s, &l, 1);
    const char *o;
    size_t ol;
    CHECK(stop_filter_push(&f, "aXb", 3, &o, &ol) == 1 && ol == 1, "stop after 'a'");
    CHECK(stop_filter_push(&f, "more", 4, &o, &ol) == 1 && ol == 0, "nothing after a stop");
    stop_filter_finish(&f, &o, &ol);
    CHECK(ol == 0, "finish after stop releases nothing");
    stop_filter_free(&f);
}

static void test_bad_arguments(void)
{
    stop_filter f;
    const char *s[] = { "" };
    size_t l = 0;
    CHECK(stop_filter_init(&f, s, &l, 1) == -1, "empty stop string must be refused");
    CHECK(stop_filter_init(&f, s, &l, 5) == -1, "more than STOP_MAX must be refused");
}

int main(void)
{
    RUN_TEST(test_no_stops_passes_everything);
    RUN_TEST(test_stop_inside_one_piece);
    RUN_TEST(test_stop_straddles_pieces);
    RUN_TEST(test_false_start_is_released);
    RUN_TEST(test_unmatched_tail_released_at_finish);
    RUN_TEST(test_earliest_of_several_stops_wins);
    RUN_TEST(test_overlapping_prefixes);
    RUN_TEST(test_utf8_stop_never_splits_characters);
    RUN_TEST(test_after_stop_nothing_more);
    RUN_TEST(test_bad_arguments);
    CHECK_EXIT();
}
