/* api.h — the HTTP endpoints of a worker and what they see of it. */
#ifndef CLGEMMA_FCGI_API_H
#define CLGEMMA_FCGI_API_H

#include "config.h"
#include "engine.h"
#include "http.h"
#include "metrics.h"
#include "sched.h"

enum worker_state { WORKER_LOADING, WORKER_READY, WORKER_DRAINING, WORKER_FAILED };

/* A snapshot of the worker taken when a request arrives. The engine's const functions
 * (tokenizer, chat template, info, stop tokens) are read-only and safe beside the engine thread. */
typedef struct api_ctx {
    const server_config *cfg;
    int worker_index;
    enum worker_state state;
    const engine *eng;       /* NULL until loaded */
    sched *sched;            /* NULL until loaded */
    metrics *m;              /* this worker's board */
    const char *stats_dir;   /* where the pool's boards are ("": this worker's only) */
    double t_start;          /* monotonic seconds when the worker started */
    long created;            /* wall-clock seconds when the worker started */
    char load_error[256];
} api_ctx;

/* Each handler answers the request (status in r->status) and returns 0; -1 only when the
 * connection failed. */
int api_chat(const api_ctx *c, http_req *r);
int api_completions(const api_ctx *c, http_req *r);
int api_models(const api_ctx *c, http_req *r);      /* /v1/models and /v1/models/{id} */
int api_health(const api_ctx *c, http_req *r);
int api_metrics(const api_ctx *c, http_req *r);

/* 503 unless the model is loaded and the worker is not draining; returns 0 when ready */
int api_require_ready(const api_ctx *c, api_error *e);
/* 404 unless model names the loaded model */
int api_check_model(const api_ctx *c, const char *model, api_error *e);

#endif
