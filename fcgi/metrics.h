/* metrics.h — a worker's counters, gauges and histograms, recorded into its stats board
 * (board.h) and rendered as Prometheus text for the whole pool (/metrics).
 * Recording is lock-free: request threads and the engine thread record concurrently. */
#ifndef CLGEMMA_FCGI_METRICS_H
#define CLGEMMA_FCGI_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include "board.h"

typedef struct metrics metrics;

/* The worker's metrics in the board file at path (NULL: anonymous shared memory, seen by this
 * worker only). Returns 0, or -1 with err. */
int  metrics_open(metrics **out, const char *path, const board_id *id, char *err, size_t errlen);
int  metrics_create(metrics **out); /* anonymous, no labels (tests) */
/* keep_file: leave the board for the pool to show as down (the master restarts us); else unlink */
void metrics_destroy(metrics *m, int keep_file);
const board *metrics_board(const metrics *m);
board *metrics_board_rw(metrics *m); /* tests: to play another worker */

void metrics_request(metrics *m, enum metric_endpoint ep, int status);
void metrics_latency(metrics *m, enum metric_endpoint ep, double seconds); /* arrival to last byte; chat, completions */
void metrics_tokens(metrics *m, long prompt_tokens, long completion_tokens);
void metrics_ttft(metrics *m, double seconds);          /* time to first token */
void metrics_itl(metrics *m, double seconds);           /* between two tokens of one stream */
void metrics_queue_wait(metrics *m, double seconds);    /* submitted to first scheduled */
void metrics_tpot(metrics *m, double seconds);          /* time per output token of a finished generation */
void metrics_cancel(metrics *m, enum metric_cancel why);
void metrics_prefix(metrics *m, long prompt_tokens, long cached_tokens); /* a prompt's sequence started */
void metrics_images(metrics *m, int n, double seconds); /* a prompt's n images encoded (or found) in seconds */
void metrics_prefill_chunks(metrics *m, int chunks);   /* prompt pieces a step fed */
void metrics_spec(metrics *m, int proposed, int accepted); /* a sequence's draft verified: its tokens, those taken */
void metrics_engine_error(metrics *m);

/* gauges the owner publishes */
void metrics_state(metrics *m, enum board_state s);
/* the load's outcome on the board: err NULL when it loaded (clears earlier failures), else why it did not */
void metrics_load_result(metrics *m, const char *err);
void metrics_load(metrics *m, int active, int queued);
void metrics_engine(metrics *m, const char *device_name, uint64_t device_bytes, uint64_t device_total, uint64_t n_ctx);
/* free_blocks: those a sequence may take, cached ones (held only by the prefix cache) included */
void metrics_kv(metrics *m, int pool, uint64_t blocks, uint64_t free_blocks, uint64_t cached_blocks);

/* Prometheus text exposition format 0.0.4 of every board: each family once, then every worker's
 * samples labelled worker="..." and device="..."; a worker that is down shows only
 * clgemma_worker_up 0. Returns a malloc'd NUL-terminated text (length in *len), or NULL on OOM. */
char *metrics_render(const board_view *views, int n, size_t *len);

/* reads back (tests, /health): requests of an endpoint with a status (0 = any) */
uint64_t metrics_requests(const board *b, enum metric_endpoint ep, int status);
uint64_t metrics_cancellations(const board *b);
double   metrics_uptime(const board *b);

#endif
