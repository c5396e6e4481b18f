/* test_fcgi_metrics.c — worker metrics and their Prometheus text (fcgi/metrics.c). */
#include <string.h>

#include "check.h"
#include "metrics.h"

static metrics_gauges gauges(void)
{
    metrics_gauges g = { .worker = 2, .loaded = 1, .active = 1, .queued = 3, .device_bytes = 1000,
                         .device_total = 5000, .uptime_seconds = 1.5, .model = "m\"x", .device = "cpu" };
    return g;
}

static int has_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)); p += n)
        if ((p == text || p[-1] == '\n') && p[n] == '\n') return 1;
    return 0;
}

static void test_counters_by_endpoint_and_status(void)
{
    metrics *m;
    CHECK(!metrics_create(&m), "create");
    metrics_request(m, EP_CHAT, 200);
    metrics_request(m, EP_CHAT, 200);
    metrics_request(m, EP_CHAT, 400);
    metrics_request(m, EP_HEALTH, 503);
    CHECK(metrics_requests(m, EP_CHAT, 200) == 2, "chat 200");
    CHECK(metrics_requests(m, EP_CHAT, 0) == 3, "chat any");
    CHECK(metrics_requests(m, EP_COMPLETIONS, 0) == 0, "completions");
    metrics_gauges g = gauges();
    size_t len;
    char *t = metrics_render(m, &g, &len);
    CHECK(t && strlen(t) == len, "render");
    CHECK(has_line(t, "clgemma_requests_total{endpoint=\"chat\",status=\"200\"} 2"), "chat 200 line:\n%s", t);
    CHECK(has_line(t, "clgemma_requests_total{endpoint=\"chat\",status=\"400\"} 1"), "chat 400 line");
    CHECK(has_line(t, "clgemma_requests_total{endpoint=\"health\",status=\"503\"} 1"), "health 503 line");
    CHECK(has_line(t, "# TYPE clgemma_requests_total counter"), "type line");
    free(t);
    metrics_destroy(m);
}

static void test_histogram_is_cumulative(void)
{
    metrics *m;
    metrics_create(&m);
    metrics_ttft(m, 0.01);  /* <= 0.025 */
    metrics_ttft(m, 0.3);   /* <= 0.5 */
    metrics_ttft(m, 100);   /* +Inf only */
    metrics_gauges g = gauges();
    char *t = metrics_render(m, &g, NULL);
    CHECK(has_line(t, "clgemma_time_to_first_token_seconds_bucket{le=\"0.025\"} 1"), "first bucket:\n%s", t);
    CHECK(has_line(t, "clgemma_time_to_first_token_seconds_bucket{le=\"0.25\"} 1"), "0.25 bucket");
    CHECK(has_line(t, "clgemma_time_to_first_token_seconds_bucket{le=\"0.5\"} 2"), "0.5 bucket");
    CHECK(has_line(t, "clgemma_time_to_first_token_seconds_bucket{le=\"60\"} 2"), "60 bucket");
    CHECK(has_line(t, "clgemma_time_to_first_token_seconds_bucket{le=\"+Inf\"} 3"), "+Inf bucket");
    CHECK(has_line(t, "clgemma_time_to_first_token_seconds_count 3"), "count");
    CHECK(has_line(t, "clgemma_time_to_first_token_seconds_sum 100.310000"), "sum");
    CHECK(has_line(t, "clgemma_inter_token_latency_seconds_count 0"), "itl empty");
    free(t);
    metrics_destroy(m);
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
    CHECK(metrics_cancellations(m) == 3, "cancellations");
    metrics_gauges g = gauges();
    char *t = metrics_render(m, &g, NULL);
    CHECK(has_line(t, "clgemma_prompt_tokens_total 20"), "prompt tokens:\n%s", t);
    CHECK(has_line(t, "clgemma_completion_tokens_total 8"), "completion tokens");
    CHECK(has_line(t, "clgemma_cancellations_total{reason=\"client_gone\"} 2"), "client_gone");
    CHECK(has_line(t, "clgemma_cancellations_total{reason=\"drain\"} 1"), "drain");
    CHECK(has_line(t, "clgemma_requests_active 1"), "active");
    CHECK(has_line(t, "clgemma_requests_queued 3"), "queued");
    CHECK(has_line(t, "clgemma_device_memory_used_bytes 1000"), "device memory");
    CHECK(has_line(t, "clgemma_worker_info{worker=\"2\",model=\"m\\\"x\",device=\"cpu\"} 1"), "escaped label");
    free(t);
    metrics_destroy(m);
}

int main(void)
{
    RUN_TEST(test_counters_by_endpoint_and_status);
    RUN_TEST(test_histogram_is_cumulative);
    RUN_TEST(test_gauges_tokens_cancellations);
    CHECK_EXIT();
}
