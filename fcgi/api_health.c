/* api_health.c — GET /health (JSON; 200 when serving, 503 while loading, draining or failed)
 * and GET /metrics (Prometheus text). */
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

static void gauges(const api_ctx *c, metrics_gauges *g)
{
    memset(g, 0, sizeof *g);
    g->worker = c->worker_index;
    g->loaded = c->eng != NULL;
    g->draining = c->state == WORKER_DRAINING;
    if (c->sched) sched_counts(c->sched, &g->active, &g->queued);
    g->uptime_seconds = monotonic_seconds() - c->t_start;
    g->model = c->cfg->model_id;
    g->device = "";
    if (c->eng) {
        const engine_info *info = engine_get_info(c->eng);
        g->device_bytes = info->device_bytes;
        g->device_total = info->device_total;
        g->device = info->device;
    }
}

int api_health(const api_ctx *c, http_req *r)
{
    metrics_gauges g;
    gauges(c, &g);
    json_object *o = json_object_new_object();
    json_object_object_add(o, "status", json_object_new_string(state_name(c->state)));
    json_object_object_add(o, "model", json_object_new_string(c->cfg->model_id));
    json_object_object_add(o, "device", json_object_new_string(g.device));
    json_object_object_add(o, "worker", json_object_new_int(c->worker_index));
    json_object_object_add(o, "pid", json_object_new_int((int)getpid()));
    if (c->eng) {
        json_object_object_add(o, "context_length", json_object_new_int64(engine_get_info(c->eng)->n_ctx));
        json_object_object_add(o, "device_memory_used_bytes", json_object_new_int64((int64_t)g.device_bytes));
        json_object_object_add(o, "device_memory_free_bytes",
                               json_object_new_int64(g.device_total > g.device_bytes ? (int64_t)(g.device_total - g.device_bytes) : 0));
    }
    json_object_object_add(o, "active", json_object_new_int(g.active));
    json_object_object_add(o, "queue_depth", json_object_new_int(g.queued));
    json_object_object_add(o, "uptime_seconds", json_object_new_double(g.uptime_seconds));
    if (c->state == WORKER_FAILED) json_object_object_add(o, "error", json_object_new_string(c->load_error));
    int rc = http_send_json(r, c->state == WORKER_READY ? 200 : 503,
                            json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
    return rc;
}

int api_metrics(const api_ctx *c, http_req *r)
{
    metrics_gauges g;
    gauges(c, &g);
    size_t len;
    char *text = metrics_render(c->m, &g, &len);
    if (!text) {
        api_error e;
        api_fail(&e, 500, "server_error", NULL, NULL, "out of memory");
        return api_reply_error(r, &e);
    }
    int rc = http_send(r, 200, "text/plain; version=0.0.4; charset=utf-8", NULL, text, len);
    free(text);
    return rc;
}
