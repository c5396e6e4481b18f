/* test_fcgi_metrics.c — worker metrics on stats boards and the pool's Prometheus text
 * (fcgi/metrics.c, fcgi/board.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "metrics.h"

static int has_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)); p += n)
        if ((p == text || p[-1] == '\n') && p[n] == '\n') return 1;
    return 0;
}

static int count_of(const char *text, const char *needle)
{
    int k = 0;
    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle)) k++;
    return k;
}

/* one anonymous board rendered alone */
static char *render_one(metrics *m)
{
    board_view v = { metrics_board(m), 1, 0 };
    return metrics_render(&v, 1, NULL);
}

static board_id ident(const char *label, const char *device, int index)
{
    board_id id;
    memset(&id, 0, sizeof id);
    snprintf(id.label, sizeof id.label, "%s", label);
    snprintf(id.device, sizeof id.device, "%s", device);
    snprintf(id.model, sizeof id.model, "m\"x");
    snprintf(id.listen, sizeof id.listen, "/run/%s", label);
    id.index = index;
    return id;
}

static pid_t dead_pid(void)
{
    pid_t p = fork();
    if (p == 0) _exit(0);
    waitpid(p, NULL, 0);
    return p;
}

static void test_counters_by_endpoint_and_status(void)
{
    metrics *m;
    CHECK(!metrics_create(&m), "create");
    metrics_request(m, EP_CHAT, 200);
    metrics_request(m, EP_CHAT, 200);
    metrics_request(m, EP_CHAT, 400);
    metrics_request(m, EP_HEALTH, 503);
    metrics_request(m, EP_OTHER, 302);
    const board *b = metrics_board(m);
    CHECK(metrics_requests(b, EP_CHAT, 200) == 2, "chat 200");
    CHECK(metrics_requests(b, EP_CHAT, 0) == 3, "chat any");
    CHECK(metrics_requests(b, EP_COMPLETIONS, 0) == 0, "completions");
    size_t len;
    board_view v = { b, 1, 0 };
    char *t = metrics_render(&v, 1, &len);
    CHECK(t && strlen(t) == len, "render");
    CHECK(has_line(t, "clgemma_requests_total{worker=\"\",device=\"\",endpoint=\"chat\",status=\"200\"} 2"), "chat 200 line:\n%s", t);
    CHECK(has_line(t, "clgemma_requests_total{worker=\"\",device=\"\",endpoint=\"chat\",status=\"400\"} 1"), "chat 400 line");
    CHECK(has_line(t, "clgemma_requests_total{worker=\"\",device=\"\",endpoint=\"health\",status=\"503\"} 1"), "health 503");
    CHECK(has_line(t, "clgemma_requests_total{worker=\"\",device=\"\",endpoint=\"other\",status=\"other\"} 1"), "other");
    CHECK(has_line(t, "# TYPE clgemma_requests_total counter"), "type line");
    free(t);
    metrics_destroy(m, 0);
}

static void test_histogram_is_cumulative(void)
{
    metrics *m;
    metrics_create(&m);
    metrics_ttft(m, 0.01);  /* <= 0.025 */
    metrics_ttft(m, 0.3);   /* <= 0.5 */
    metrics_ttft(m, 100);   /* +Inf only */
    metrics_latency(m, EP_COMPLETIONS, 0.2);
    metrics_latency(m, EP_MODELS, 0.2); /* not a generation: not timed */
    char *t = render_one(m);
#define L "worker=\"\",device=\"\""
    CHECK(has_line(t, "clgemma_time_to_first_token_seconds_bucket{" L ",le=\"0.025\"} 1"), "first bucket:\n%s", t);
    CHECK(has_line(t, "clgemma_time_to_first_token_seconds_bucket{" L ",le=\"0.25\"} 1"), "0.25 bucket");
    CHECK(has_line(t, "clgemma_time_to_first_token_seconds_bucket{" L ",le=\"0.5\"} 2"), "0.5 bucket");
    CHECK(has_line(t, "clgemma_time_to_first_token_seconds_bucket{" L ",le=\"60\"} 2"), "60 bucket");
    CHECK(has_line(t, "clgemma_time_to_first_token_seconds_bucket{" L ",le=\"+Inf\"} 3"), "+Inf bucket");
    CHECK(has_line(t, "clgemma_time_to_first_token_seconds_count{" L "} 3"), "count");
    CHECK(has_line(t, "clgemma_time_to_first_token_seconds_sum{" L "} 100.310000000"), "sum");
    CHECK(has_line(t, "clgemma_inter_token_latency_seconds_count{" L "} 0"), "itl empty");
    CHECK(has_line(t, "clgemma_request_duration_seconds_count{" L ",endpoint=\"completions\"} 1"), "latency");
    CHECK(has_line(t, "clgemma_request_duration_seconds_count{" L ",endpoint=\"chat\"} 0"), "latency chat");
    CHECK(count_of(t, "# TYPE clgemma_request_duration_seconds histogram") == 1, "one family header");
#undef L
    free(t);
    metrics_destroy(m, 0);
}

static void test_gauges_tokens_cancellations(void)
{
    metrics *m;
    metrics_create(&m);
    metrics_tokens(m, 15, 8);
    metrics_tokens(m, 5, 0);
    metrics_cancel(m, CANCEL_CLIENT_GONE);
    metrics_cancel(m, CANCEL_DRAIN);
    metrics_cancel(m, CANCEL_CLIENT_GONE);
    metrics_load(m, 1, 3);
    metrics_engine(m, "cpu", 1000, 5000, 1024);
    metrics_kv(m, KVP_FULL, 64, 60, 7);
    metrics_prefix(m, 300, 224);
    metrics_prefix(m, 100, 0);
    metrics_state(m, BOARD_READY);
    CHECK(metrics_cancellations(metrics_board(m)) == 3, "cancellations");
    char *t = render_one(m);
#define L "{worker=\"\",device=\"\""
    CHECK(has_line(t, "clgemma_prompt_tokens_total" L "} 20"), "prompt tokens:\n%s", t);
    CHECK(has_line(t, "clgemma_completion_tokens_total" L "} 8"), "completion tokens");
    CHECK(has_line(t, "clgemma_cancellations_total" L ",reason=\"client_gone\"} 2"), "client_gone");
    CHECK(has_line(t, "clgemma_cancellations_total" L ",reason=\"drain\"} 1"), "drain");
    CHECK(has_line(t, "clgemma_requests_active" L "} 1"), "active");
    CHECK(has_line(t, "clgemma_requests_queued" L "} 3"), "queued");
    CHECK(has_line(t, "clgemma_device_memory_used_bytes" L "} 1000"), "device memory");
    CHECK(has_line(t, "clgemma_model_loaded" L "} 1"), "loaded");
    CHECK(has_line(t, "clgemma_kv_blocks_used" L ",pool=\"full\"} 4"), "kv used");
    CHECK(has_line(t, "clgemma_kv_blocks_free" L ",pool=\"full\"} 60"), "kv free");
    CHECK(has_line(t, "clgemma_kv_blocks_cached" L ",pool=\"full\"} 7"), "kv cached");
    CHECK(has_line(t, "clgemma_prefix_cache_prompt_tokens_total" L "} 400"), "prefix lookups");
    CHECK(has_line(t, "clgemma_prefix_cache_hit_tokens_total" L "} 224"), "prefix hits");
    CHECK(has_line(t, "clgemma_prefix_cache_hit_ratio" L "} 0.560000"), "prefix hit ratio");
    CHECK(!strstr(t, "pool=\"sliding\""), "a pool of no blocks is not shown");
    CHECK(strstr(t, ",model=\"m\\\"x\"") == NULL, "no model set on an anonymous board");
#undef L
    free(t);
    metrics_destroy(m, 0);
}

/* two workers' boards in one directory: one text with both, told apart by their labels */
static void test_pool_of_two_boards(void)
{
    char dir[] = "/tmp/clgemma-boards.XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char p0[512], p1[512], err[256];
    board_path(dir, "w0.sock", p0, sizeof p0);
    board_path(dir, "w1.sock", p1, sizeof p1);
    metrics *a, *b;
    board_id ia = ident("w0.sock", "0:0", 0), ib = ident("w1.sock", "0:1", 1);
    CHECK(!metrics_open(&a, p0, &ia, err, sizeof err), "open a: %s", err);
    CHECK(!metrics_open(&b, p1, &ib, err, sizeof err), "open b: %s", err);
    /* b plays a worker of another process of the same master */
    pid_t child = fork();
    if (child == 0) { pause(); _exit(0); }
    metrics_board_rw(b)->pid = child;
    for (int i = 0; i < 3; i++) metrics_request(a, EP_CHAT, 200);
    for (int i = 0; i < 5; i++) metrics_request(b, EP_COMPLETIONS, 200);
    metrics_ttft(a, 0.1);
    metrics_ttft(b, 0.2);
    metrics_ttft(b, 99);
    board_view v[8];
    int n = board_scan(dir, metrics_board(a), v, 8);
    CHECK(n == 2, "two boards, got %d", n);
    char *t = metrics_render(v, n, NULL);
    board_scan_free(v, n);
    CHECK(has_line(t, "clgemma_requests_total{worker=\"w0.sock\",device=\"0:0\",endpoint=\"chat\",status=\"200\"} 3"),
          "a's requests:\n%s", t);
    CHECK(has_line(t, "clgemma_requests_total{worker=\"w1.sock\",device=\"0:1\",endpoint=\"completions\",status=\"200\"} 5"),
          "b's requests");
    CHECK(has_line(t, "clgemma_worker_up{worker=\"w0.sock\",device=\"0:0\"} 1"), "a up");
    CHECK(has_line(t, "clgemma_worker_up{worker=\"w1.sock\",device=\"0:1\"} 1"), "b up");
    CHECK(has_line(t, "clgemma_time_to_first_token_seconds_bucket{worker=\"w1.sock\",device=\"0:1\",le=\"+Inf\"} 2"), "b +Inf");
    CHECK(has_line(t, "clgemma_time_to_first_token_seconds_count{worker=\"w1.sock\",device=\"0:1\"} 2"), "b count = +Inf");
    CHECK(has_line(t, "clgemma_time_to_first_token_seconds_count{worker=\"w0.sock\",device=\"0:0\"} 1"), "a count");
    CHECK(count_of(t, "# TYPE clgemma_requests_total counter") == 1, "each family once");
    CHECK(count_of(t, "# HELP ") == count_of(t, "# TYPE "), "HELP and TYPE pair");
    char pidinfo[64];
    snprintf(pidinfo, sizeof pidinfo, "pid=\"%d\"", (int)child);
    CHECK(strstr(t, pidinfo) != NULL, "b's pid in its info metric");
    free(t);

    /* b's process dies, its master (us) lives: restarting, shown as up 0 without samples */
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    n = board_scan(dir, metrics_board(a), v, 8);
    t = metrics_render(v, n, NULL);
    board_scan_free(v, n);
    CHECK(n == 2, "still two boards");
    CHECK(has_line(t, "clgemma_worker_up{worker=\"w1.sock\",device=\"0:1\"} 0"), "b down:\n%s", t);
    CHECK(!strstr(t, "clgemma_requests_total{worker=\"w1.sock\""), "no samples of a down worker");
    free(t);

    /* and when its master is gone too, the file is an earlier run's: skipped and removed */
    metrics_board_rw(b)->master_pid = dead_pid();
    n = board_scan(dir, metrics_board(a), v, 8);
    board_scan_free(v, n);
    CHECK(n == 1 && v[0].b == metrics_board(a), "stale board skipped, got %d", n);
    CHECK(access(p1, F_OK) != 0, "stale board removed");

    /* a clean exit removes the file; a failed one keeps it for the pool to see */
    metrics_destroy(b, 0);
    metrics_destroy(a, 1);
    CHECK(access(p0, F_OK) == 0, "kept");
    unlink(p0);
    rmdir(dir);
}

/* a restarted worker takes its file back and starts from zero; a live owner keeps it */
static void test_board_taken_back_not_stolen(void)
{
    char dir[] = "/tmp/clgemma-boards.XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char p[512], err[256];
    board_path(dir, "a b/c", p, sizeof p);
    CHECK(strstr(p, "/a_b_c.stats") != NULL, "sanitised name %s", p);
    board_id id = ident("a b/c", "", 0);
    metrics *a, *again;
    CHECK(!metrics_open(&a, p, &id, err, sizeof err), "open: %s", err);
    metrics_request(a, EP_CHAT, 200);
    pid_t child = fork();
    if (child == 0) { pause(); _exit(0); }
    metrics_board_rw(a)->pid = child;
    CHECK(metrics_open(&again, p, &id, err, sizeof err) != 0, "a live owner keeps its board");
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    CHECK(!metrics_open(&again, p, &id, err, sizeof err), "taken back: %s", err);
    CHECK(metrics_requests(metrics_board(again), EP_CHAT, 0) == 0, "from zero");
    CHECK(metrics_board(again)->pid == getpid(), "new owner");
    metrics_destroy(again, 0);
    metrics_destroy(a, 1);
    CHECK(access(p, F_OK) != 0, "removed");
    rmdir(dir);
}

/* the label comes from the listening socket */
static void test_identify_from_socket(void)
{
    char dir[] = "/tmp/clgemma-boards.XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s/worker-3.sock", dir);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(fd >= 0 && !bind(fd, (struct sockaddr *)&sa, sizeof sa) && !listen(fd, 1), "listen");
    board_id id;
    char sdir[512];
    board_identify(fd, 0, 0, &id, sdir, sizeof sdir);
    CHECK(!strcmp(id.label, "worker-3.sock"), "label %s", id.label);
    CHECK(!strcmp(sdir, dir), "dir %s", sdir);
    CHECK(!strcmp(id.listen, sa.sun_path), "listen %s", id.listen);
    board_identify(fd, 2, 1, &id, sdir, sizeof sdir);
    CHECK(!strcmp(id.label, "worker-3.sock#2"), "shared label %s", id.label);
    close(fd);
    unlink(sa.sun_path);
    rmdir(dir);
}

int main(void)
{
    RUN_TEST(test_counters_by_endpoint_and_status);
    RUN_TEST(test_histogram_is_cumulative);
    RUN_TEST(test_gauges_tokens_cancellations);
    RUN_TEST(test_pool_of_two_boards);
    RUN_TEST(test_board_taken_back_not_stolen);
    RUN_TEST(test_identify_from_socket);
    CHECK_EXIT();
}
