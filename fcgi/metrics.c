/* metrics.c — worker metrics and their Prometheus text. */
#include "metrics.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_STATUS 16

static const char *const ep_names[EP_COUNT] = { "chat", "completions", "models", "health", "metrics", "other" };
static const char *const cancel_names[CANCEL_REASONS] = { "client_gone", "drain" };

static const double ttft_bounds[] = { 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60 };
static const double itl_bounds[] = { 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5 };
#define N_TTFT (sizeof ttft_bounds / sizeof ttft_bounds[0])
#define N_ITL (sizeof itl_bounds / sizeof itl_bounds[0])

typedef struct histogram {
    const double *bounds;
    size_t n;
    uint64_t buckets[16]; /* non-cumulative per bound; the last slot is +Inf */
    uint64_t count;
    double sum;
} histogram;

struct metrics {
    pthread_mutex_t mu;
    int status_codes[MAX_STATUS];
    int n_status;
    uint64_t requests[EP_COUNT][MAX_STATUS];
    uint64_t prompt_tokens, completion_tokens;
    uint64_t cancels[CANCEL_REASONS];
    uint64_t engine_errors;
    histogram ttft, itl;
};

int metrics_create(metrics **out)
{
    metrics *m = calloc(1, sizeof *m);
    if (!m) return -1;
    if (pthread_mutex_init(&m->mu, NULL)) { free(m); return -1; }
    m->ttft.bounds = ttft_bounds;
    m->ttft.n = N_TTFT;
    m->itl.bounds = itl_bounds;
    m->itl.n = N_ITL;
    *out = m;
    return 0;
}

void metrics_destroy(metrics *m)
{
    if (!m) return;
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static int status_slot(metrics *m, int status)
{
    for (int i = 0; i < m->n_status; i++)
        if (m->status_codes[i] == status) return i;
    if (m->n_status == MAX_STATUS) return MAX_STATUS - 1; /* the last slot collects the rest */
    m->status_codes[m->n_status] = status;
    return m->n_status++;
}

void metrics_request(metrics *m, enum metric_endpoint ep, int status)
{
    if ((unsigned)ep >= EP_COUNT) ep = EP_OTHER;
    pthread_mutex_lock(&m->mu);
    m->requests[ep][status_slot(m, status)]++;
    pthread_mutex_unlock(&m->mu);
}

void metrics_tokens(metrics *m, long prompt_tokens, long completion_tokens)
{
    pthread_mutex_lock(&m->mu);
    m->prompt_tokens += (uint64_t)(prompt_tokens > 0 ? prompt_tokens : 0);
    m->completion_tokens += (uint64_t)(completion_tokens > 0 ? completion_tokens : 0);
    pthread_mutex_unlock(&m->mu);
}

static void observe(histogram *h, double v)
{
    size_t i = 0;
    while (i < h->n && v > h->bounds[i]) i++;
    h->buckets[i]++;
    h->count++;
    h->sum += v;
}

void metrics_ttft(metrics *m, double s)
{
    pthread_mutex_lock(&m->mu);
    observe(&m->ttft, s);
    pthread_mutex_unlock(&m->mu);
}

void metrics_itl(metrics *m, double s)
{
    pthread_mutex_lock(&m->mu);
    observe(&m->itl, s);
    pthread_mutex_unlock(&m->mu);
}

void metrics_cancel(metrics *m, enum metric_cancel why)
{
    pthread_mutex_lock(&m->mu);
    m->cancels[(unsigned)why < CANCEL_REASONS ? why : CANCEL_CLIENT_GONE]++;
    pthread_mutex_unlock(&m->mu);
}

void metrics_engine_error(metrics *m)
{
    pthread_mutex_lock(&m->mu);
    m->engine_errors++;
    pthread_mutex_unlock(&m->mu);
}

uint64_t metrics_requests(metrics *m, enum metric_endpoint ep, int status)
{
    uint64_t n = 0;
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < m->n_status; i++)
        if (!status || m->status_codes[i] == status) n += m->requests[ep][i];
    pthread_mutex_unlock(&m->mu);
    return n;
}

uint64_t metrics_cancellations(metrics *m)
{
    uint64_t n = 0;
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < CANCEL_REASONS; i++) n += m->cancels[i];
    pthread_mutex_unlock(&m->mu);
    return n;
}

/* ---- text output ---- */

typedef struct textbuf { char *p; size_t n, cap; int oom; } textbuf;

static void put(textbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(textbuf *b, const char *fmt, ...)
{
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
        va_end(ap);
        if (k < 0) { b->oom = 1; return; }
        if ((size_t)k < b->cap - b->n) { b->n += (size_t)k; return; }
        size_t cap = (b->cap + (size_t)k + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p) { b->oom = 1; return; }
        b->p = p;
        b->cap = cap;
    }
}

/* label value with \, " and newline escaped */
static void put_label(textbuf *b, const char *s)
{
    for (; s && *s; s++) {
        if (*s == '\\') put(b, "\\\\");
        else if (*s == '"') put(b, "\\\"");
        else if (*s == '\n') put(b, "\\n");
        else put(b, "%c", *s);
    }
}

static void header(textbuf *b, const char *name, const char *type, const char *help)
{
    put(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void put_histogram(textbuf *b, const char *name, const char *help, const histogram *h)
{
    header(b, name, "histogram", help);
    uint64_t cum = 0;
    for (size_t i = 0; i < h->n; i++) {
        cum += h->buckets[i];
        put(b, "%s_bucket{le=\"%g\"} %llu\n", name, h->bounds[i], (unsigned long long)cum);
    }
    cum += h->buckets[h->n];
    put(b, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)cum);
    put(b, "%s_sum %.6f\n%s_count %llu\n", name, h->sum, name, (unsigned long long)h->count);
}

char *metrics_render(metrics *m, const metrics_gauges *g, size_t *len)
{
    textbuf b = { malloc(8192), 0, 8192, 0 };
    if (!b.p) return NULL;
    pthread_mutex_lock(&m->mu);

    header(&b, "clgemma_requests_total", "counter", "HTTP requests answered by this worker, by endpoint and status.");
    for (int e = 0; e < EP_COUNT; e++)
        for (int i = 0; i < m->n_status; i++)
            if (m->requests[e][i])
                put(&b, "clgemma_requests_total{endpoint=\"%s\",status=\"%d\"} %llu\n", ep_names[e],
                    m->status_codes[i], (unsigned long long)m->requests[e][i]);
    header(&b, "clgemma_prompt_tokens_total", "counter", "Prompt tokens of generation requests.");
    put(&b, "clgemma_prompt_tokens_total %llu\n", (unsigned long long)m->prompt_tokens);
    header(&b, "clgemma_completion_tokens_total", "counter", "Tokens generated.");
    put(&b, "clgemma_completion_tokens_total %llu\n", (unsigned long long)m->completion_tokens);
    header(&b, "clgemma_cancellations_total", "counter", "Generations cancelled before their end, by reason.");
    for (int i = 0; i < CANCEL_REASONS; i++)
        put(&b, "clgemma_cancellations_total{reason=\"%s\"} %llu\n", cancel_names[i], (unsigned long long)m->cancels[i]);
    header(&b, "clgemma_engine_errors_total", "counter", "Engine steps that failed (answered with 500).");
    put(&b, "clgemma_engine_errors_total %llu\n", (unsigned long long)m->engine_errors);
    put_histogram(&b, "clgemma_time_to_first_token_seconds", "From request arrival to the first generated token.", &m->ttft);
    put_histogram(&b, "clgemma_inter_token_latency_seconds", "Between consecutive tokens of one generation.", &m->itl);
    pthread_mutex_unlock(&m->mu);

    header(&b, "clgemma_requests_active", "gauge", "Generations running on the engine.");
    put(&b, "clgemma_requests_active %d\n", g->active);
    header(&b, "clgemma_requests_queued", "gauge", "Generations waiting for an engine slot.");
    put(&b, "clgemma_requests_queued %d\n", g->queued);
    header(&b, "clgemma_model_loaded", "gauge", "1 when the model is loaded and the worker serves.");
    put(&b, "clgemma_model_loaded %d\n", g->loaded);
    header(&b, "clgemma_draining", "gauge", "1 while the worker drains after SIGTERM.");
    put(&b, "clgemma_draining %d\n", g->draining);
    header(&b, "clgemma_device_memory_used_bytes", "gauge", "Device memory held by the engine (weights, KV cache, scratch).");
    put(&b, "clgemma_device_memory_used_bytes %llu\n", (unsigned long long)g->device_bytes);
    header(&b, "clgemma_device_memory_total_bytes", "gauge", "Global memory of the device.");
    put(&b, "clgemma_device_memory_total_bytes %llu\n", (unsigned long long)g->device_total);
    header(&b, "clgemma_uptime_seconds", "gauge", "Seconds since the worker started.");
    put(&b, "clgemma_uptime_seconds %.3f\n", g->uptime_seconds);
    header(&b, "clgemma_worker_info", "gauge", "The worker, its model and device.");
    put(&b, "clgemma_worker_info{worker=\"%d\",model=\"", g->worker);
    put_label(&b, g->model);
    put(&b, "\",device=\"");
    put_label(&b, g->device);
    put(&b, "\"} 1\n");

    if (b.oom) { free(b.p); return NULL; }
    if (len) *len = b.n;
    return b.p;
}
