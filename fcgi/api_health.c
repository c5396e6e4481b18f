/* api_health.c — GET /health (JSON: this worker and the whole pool; 200 when a worker of the pool
 * is ready, else 503) and GET /metrics (Prometheus text of every worker of the pool). */
#include <json-c/json.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api.h"
#include "api_respond.h"
#include "clock.h"
#include "spec_step.h"

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

/* a worker slot's failed loads since it last loaded, and the last one's reason (it restarts with back-off, so
 * while it loads again this is the only place the reason shows) */
static void add_load_failures(json_object *o, const board *b)
{
    uint64_t n = atomic_load(&((board *)b)->load_failures);
    if (!n) return;
    char last[sizeof b->last_error];
    memcpy(last, b->last_error, sizeof last);
    last[sizeof last - 1] = 0;
    json_object_object_add(o, "load_failures", json_object_new_int64((int64_t)n));
    json_object_object_add(o, "last_error", json_object_new_string(last));
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
        add_load_failures(w, b);
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

/* the fit report's numbers in /health: group (NULL: the fit object itself), key, the engine_fit field */
#define FIT(group, key, field) { group, key, offsetof(engine_fit, field), sizeof ((engine_fit *)0)->field }
static const struct fit_field { const char *group, *key; size_t off, size; } FIT_FIELDS[] = {
    FIT(NULL, "device_bytes", device_bytes),          FIT(NULL, "weight_bytes", weight_bytes),
    FIT(NULL, "host_weight_bytes", host_weight_bytes), FIT(NULL, "kv_room_bytes", kv_room),
    FIT(NULL, "context_length", n_ctx),
    FIT("kv_full", "layers", full_layers),            FIT("kv_full", "bytes_per_token", full_token_bytes),
    FIT("kv_sliding", "layers", sliding_layers),      FIT("kv_sliding", "window", window),
    FIT("kv_sliding", "bytes_per_token", sliding_token_bytes), FIT("kv_sliding", "ring_tokens", ring_tokens),
    FIT("kv_sliding", "bytes_per_sequence", ring_seq_bytes), FIT("kv_shared", "layers", shared_layers),
    FIT("room_holds", "tokens_one_sequence", room_tokens), FIT("room_holds", "sequences_whole_context", seqs_at_ctx),
    FIT("room_holds", "sequences_typical", seqs_typical),
    FIT("plan", "sequences", n_seq),                  FIT("plan", "kv_tokens", kv_tokens),
    FIT("plan", "kv_bytes", kv_bytes),                FIT("plan", "full_blocks", full_blocks),
    FIT("plan", "ring_blocks", ring_blocks),          FIT("plan", "block_tokens", block_tokens),
    FIT("recommended", "ctx", rec_ctx),               FIT("recommended", "max_seqs", rec_seqs),
};
#undef FIT

/* how the model fits the device (engine_fit, FIT_FIELDS) and the sizes the worker runs with */
static json_object *fit_object(const engine_fit *f, const sched *s)
{
    json_object *o = json_object_new_object(), *g;
    for (size_t i = 0; i < sizeof FIT_FIELDS / sizeof *FIT_FIELDS; i++) {
        const struct fit_field *d = &FIT_FIELDS[i];
        uint64_t v = 0;
        uint32_t v32;
        if (d->size == sizeof v32) { memcpy(&v32, (const char *)f + d->off, sizeof v32); v = v32; }
        else memcpy(&v, (const char *)f + d->off, sizeof v);
        g = o;
        if (d->group && !json_object_object_get_ex(o, d->group, &g))
            json_object_object_add(o, d->group, g = json_object_new_object());
        json_object_object_add(g, d->key, json_object_new_int64((int64_t)v));
    }
    int max_seqs = 0, max_queue = 0;
    if (s) sched_limits(s, &max_seqs, &max_queue);
    json_object_object_get_ex(o, "plan", &g);
    json_object_object_add(g, "max_seqs", json_object_new_int(max_seqs));
    json_object_object_add(g, "max_queue", json_object_new_int(max_queue));
    char text[1024];
    engine_fit_summary(f, text, sizeof text);
    json_object_object_add(o, "summary", json_object_new_string(text));
    return o;
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
        json_object_object_add(o, "fit", fit_object(&info->fit, c->sched));
    }
    if (c->sched) json_object_object_add(o, "step_tokens", json_object_new_int(sched_step_tokens(c->sched)));
    json_object *sp = json_object_new_object(); /* speculative decoding: as run (auto resolved), as configured */
    json_object_object_add(sp, "mode", json_object_new_string(spec_mode_name(info ? spec_mode_effective(c->cfg->spec,
                                                                                                    info) : c->cfg->spec)));
    json_object_object_add(sp, "configured", json_object_new_string(spec_mode_name(c->cfg->spec)));
    json_object_object_add(sp, "draft_max", json_object_new_int(c->cfg->draft_max));
    if (info && info->draft_arch[0]) { /* --draft's model */
        json_object *d = json_object_new_object();
        json_object_object_add(d, "arch", json_object_new_string(info->draft_arch));
        json_object_object_add(d, "layers", json_object_new_int((int)info->draft_layers));
        json_object_object_add(d, "embedding_length", json_object_new_int((int)info->draft_embd));
        json_object_object_add(d, "weight_bytes", json_object_new_int64((int64_t)info->draft_bytes));
        json_object_object_add(sp, "drafter", d);
    }
    json_object_object_add(o, "spec", sp);
    json_object_object_add(o, "active", json_object_new_int(active));
    json_object_object_add(o, "queue_depth", json_object_new_int(queued));
    json_object_object_add(o, "uptime_seconds", json_object_new_double(monotonic_seconds() - c->t_start));
    if (c->state == WORKER_FAILED) json_object_object_add(o, "error", json_object_new_string(c->load_error));
    add_load_failures(o, me);
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
