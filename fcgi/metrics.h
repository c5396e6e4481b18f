/* metrics.h — counters and histograms of one worker, rendered as Prometheus text (/metrics).
 * Thread-safe: request threads and the engine thread record into it concurrently. */
#ifndef CLGEMMA_FCGI_METRICS_H
#define CLGEMMA_FCGI_METRICS_H

#include <stddef.h>
#include <stdint.h>

enum metric_endpoint { EP_CHAT, EP_COMPLETIONS, EP_MODELS, EP_HEALTH, EP_METRICS, EP_OTHER, EP_COUNT };
enum metric_cancel { CANCEL_CLIENT_GONE, CANCEL_DRAIN, CANCEL_REASONS };

typedef struct metrics metrics;

int  metrics_create(metrics **out);
void metrics_destroy(metrics *m);

void metrics_request(metrics *m, enum metric_endpoint ep, int status);
void metrics_tokens(metrics *m, long prompt_tokens, long completion_tokens);
void metrics_ttft(metrics *m, double seconds);          /* time to first token */
void metrics_itl(metrics *m, double seconds);           /* between two tokens of one stream */
void metrics_cancel(metrics *m, enum metric_cancel why);
void metrics_engine_error(metrics *m);

/* values owned by others, sampled when rendering */
typedef struct metrics_gauges {
    int worker;               /* index of this worker process */
    int loaded;               /* model loaded and serving */
    int draining;
    int active, queued;       /* generations running / waiting */
    uint64_t device_bytes;    /* device memory the engine holds */
    uint64_t device_total;
    double uptime_seconds;
    const char *model, *device;
} metrics_gauges;

/* Prometheus text exposition format 0.0.4. Returns a malloc'd NUL-terminated text (length in
 * *len), or NULL on OOM. */
char *metrics_render(metrics *m, const metrics_gauges *g, size_t *len);

/* reads one counter back (tests, /health): requests of an endpoint with a status (0 = any) */
uint64_t metrics_requests(metrics *m, enum metric_endpoint ep, int status);
uint64_t metrics_cancellations(metrics *m);

#endif
