/* api_health.c — GET /health (JSON: this worker and the whole pool; 200 when a worker of the pool
 * is ready, else 503) and GET /metrics (Prometheus text of every worker of the pool). */
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api.h"
#include "api_respond.h"
#include "clock.h"

static const char *state_name(enum worker_state s)
{
    return s == WORKER_READY ? "ok" : s == WORKER_LOADING ? "loading" : s == WORKER_DRAINING ? "draining" : "failed";
}

static const char *board_state_name(const board_view *v)
{
    if (!v->up) return "down";
    switch (atomic_load(&((board *)v->b)->state)) {
    case BOARD_READY: return "ok";
    case BOARD_LOADING: return "loading";
    case BOARD_DRAINING: return "draining";
    default: return "failed";
    }
}

/* the pool's entries; returns how many workers are ready */
static int pool(const api_ctx *c, json_object *o)
{
    board_view v[BOARD_SCAN_MAX];
    int n = board_scan(c->stats_dir, metrics_board(c->m), v, BOARD_SCAN_MAX), ready = 0;
    json_object *arr = json_object_new_array();
    for (int i = 0; i < n; i++) {
        const board *b = v[i].b;
        const char *st = board_state_name(&v[i]);
        ready += !strcmp(st, "ok");
        json_object *w = json_object_new_object();
        json_object_object_add(w, "worker", json_object_new_string(b->label));
        json_object_object_add(w, "index", json_object_new_int(b->index));
        json_object_object_add(w, "pid", json_object_new_int64(b->pid));
        json_object_object_add(w, "state", json_object_new_string(st));
        json_object_object_add(w, "device", json_object_new_string(b->device));
        json_object_object_add(w, "active", json_object_new_int64((int64_t)atomic_load(&((board *)b)->active)));
        json_object_object_add(w, "queue_depth", json_object_new_int64((int64_t)atomic_load(&((board *)b)->queued)));
        json_object_array_add(arr, w);
    }
    board_scan_free(v, n);
    json_object *counts = json_object_new_object();
    json_object_object_add(counts, "ready", json_object_new_int(ready));
    json_object_object_add(counts, "total", json_object_new_int(n));
    json_object_object_add(o, "workers", counts);
    json_object_object_add(o, "pool", arr);
    return ready;
}

int api_health(const api_ctx *c, http_req *r)
{
    const board *me = metrics_board(c->m);
    int active = 0, queued = 0;
    if (c->sched) sched_counts(c->sched, &active, &queued);
    const engine_info *info = c->eng ? engine_get_info(c->eng) : NULL;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "status", json_object_new_string(state_name(c->state)));
    json_object_object_add(o, "model", json_object_new_string(c->cfg->model_id));
    json_object_object_add(o, "device", json_object_new_string(info ? info->device : ""));
    json_object_object_add(o, "worker", json_object_new_int(c->worker_index));
    json_object_object_add(o, "label", json_object_new_string(me->label));
    json_object_object_add(o, "pid", json_object_new_int((int)getpid()));
    if (info) {
        json_object_object_add(o, "context_length", json_object_new_int64(info->n_ctx));
        json_object_object_add(o, "device_memory_used_bytes", json_object_new_int64((int64_t)info->device_bytes));
        json_object_object_add(o, "device_memory_free_bytes",
                               json_object_new_int64(info->device_total > info->device_bytes ? (int64_t)(info->device_total - info->device_bytes) : 0));
    }
    if (c->sched) json_object_object_add(o, "step_tokens", json_object_new_int(sched_step_tokens(c->sched)));
    json_object_object_add(o, "active", json_object_new_int(active));
    json_object_object_add(o, "queue_depth", json_object_new_int(queued));
    json_object_object_add(o, "uptime_seconds", json_object_new_double(monotonic_seconds() - c->t_start));
    if (c->state == WORKER_FAILED) json_object_object_add(o, "error", json_object_new_string(c->load_error));
    int ready = pool(c, o);
    int rc = http_send_json(r, ready > 0 ? 200 : 503,
                            json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
    return rc;
}

int api_metrics(const api_ctx *c, http_req *r)
{
    board_view v[BOARD_SCAN_MAX];
    int n = board_scan(c->stats_dir, metrics_board(c->m), v, BOARD_SCAN_MAX);
    size_t len;
    char *text = metrics_render(v, n, &len);
    board_scan_free(v, n);
    if (!text) {
        api_error e;
        api_fail(&e, 500, "server_error", NULL, NULL, "out of memory");
        return api_reply_error(r, &e);
    }
    int rc = http_send(r, 200, "text/plain; version=0.0.4; charset=utf-8", NULL, text, len);
    free(text);
    return rc;
}
