/* metrics.c — recording into the worker's stats board; the pool's Prometheus text. */
#include "metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct metrics {
    board *b;
    char path[4096];         /* "" when anonymous */
};

static const char *const ep_names[EP_COUNT] = { "chat", "completions", "models", "health", "metrics", "other" };
static const char *const cancel_names[CANCEL_REASONS] = { "client_gone", "drain" };
static const char *const kv_pool_names[KVP_POOLS] = { "full", "sliding" };

static const double ttft_bounds[] = { 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60 };
static const double itl_bounds[] = { 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5 };
static const double latency_bounds[] = { 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600 };
static const double wait_bounds[] = { 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60 };
#define N(a) (sizeof a / sizeof a[0])

/* one row per histogram of the board; rows of one family (same name) are adjacent */
static const struct hist_row {
    enum board_hist id;
    const char *name, *help;
    const char *label;        /* extra label of this row, or "" */
    const double *bounds;
    size_t n;
} hist_rows[H_COUNT] = {
    { H_TTFT, "clgemma_time_to_first_token_seconds", "From request arrival to the first generated token.", "",
      ttft_bounds, N(ttft_bounds) },
    { H_ITL, "clgemma_inter_token_latency_seconds", "Between consecutive tokens of one generation.", "",
      itl_bounds, N(itl_bounds) },
    { H_LATENCY_CHAT, "clgemma_request_duration_seconds",
      "Generation requests from arrival to their last byte, by endpoint.", "endpoint=\"chat\"",
      latency_bounds, N(latency_bounds) },
    { H_LATENCY_COMPLETIONS, "clgemma_request_duration_seconds", NULL, "endpoint=\"completions\"",
      latency_bounds, N(latency_bounds) },
    { H_QUEUE_WAIT, "clgemma_queue_wait_seconds", "From submission to the engine until first scheduled into a step.",
      "", wait_bounds, N(wait_bounds) },
    { H_TPOT, "clgemma_time_per_output_token_seconds",
      "Per finished generation of 2+ tokens: (last token - first token) / (tokens - 1).", "",
      itl_bounds, N(itl_bounds) },
};
static_assert(N(latency_bounds) <= BOARD_MAX_BOUNDS && N(wait_bounds) <= BOARD_MAX_BOUNDS, "bounds fit the board");

/* plain fields of the board, one family each */
static const struct scalar_row {
    const char *name, *type, *help;
    size_t off;
} scalar_rows[] = {
    { "clgemma_prompt_tokens_total", "counter", "Prompt tokens of generation requests.", offsetof(board, prompt_tokens) },
    { "clgemma_completion_tokens_total", "counter", "Tokens generated.", offsetof(board, completion_tokens) },
    { "clgemma_engine_errors_total", "counter", "Engine steps that failed (answered with 500).", offsetof(board, engine_errors) },
    { "clgemma_prefill_chunks_total", "counter",
      "Prompt chunks fed to the engine: one per step a prompt is in (the step token budget cuts long ones).",
      offsetof(board, prefill_chunks) },
    { "clgemma_spec_steps_total", "counter",
      "Speculative decoding: drafts verified, one per decoding sequence and step that fed one (--spec).",
      offsetof(board, spec_steps) },
    { "clgemma_spec_draft_tokens_total", "counter", "Speculative decoding: draft tokens proposed and verified.",
      offsetof(board, spec_draft_tokens) },
    { "clgemma_spec_accepted_tokens_total", "counter",
      "Speculative decoding: draft tokens the model agreed with (output without a step of their own).",
      offsetof(board, spec_accepted_tokens) },
    { "clgemma_prefix_cache_prompt_tokens_total", "counter",
      "Prompt tokens of the prompts started (each once, whatever its n), the prefix cache's lookups.",
      offsetof(board, prefix_tokens) },
    { "clgemma_prefix_cache_hit_tokens_total", "counter",
      "Prompt tokens whose KV came from the prefix cache instead of being computed.",
      offsetof(board, prefix_hit_tokens) },
    { "clgemma_images_total", "counter", "Images in the prompts started (--mmproj), encoded or found in the image cache.",
      offsetof(board, images) },
    { "clgemma_requests_active", "gauge", "Generations running on the engine.", offsetof(board, active) },
    { "clgemma_requests_queued", "gauge", "Generations waiting for an engine slot.", offsetof(board, queued) },
    { "clgemma_device_memory_used_bytes", "gauge", "Device memory held by the engine (weights, KV cache, scratch).",
      offsetof(board, device_bytes) },
    { "clgemma_device_memory_total_bytes", "gauge", "Global memory of the device.", offsetof(board, device_total) },
};

/* ---- the owner ---- */

int metrics_open(metrics **out, const char *path, const board_id *id, char *err, size_t errlen)
{
    metrics *m = calloc(1, sizeof *m);
    if (!m) { snprintf(err, errlen, "out of memory"); return -1; }
    if (path && strlen(path) >= sizeof m->path) { snprintf(err, errlen, "stats path too long"); free(m); return -1; }
    m->b = board_create(path, id, err, errlen);
    if (!m->b) { free(m); return -1; }
    if (path) strcpy(m->path, path);
    *out = m;
    return 0;
}

int metrics_create(metrics **out)
{
    board_id id;
    memset(&id, 0, sizeof id);
    char err[256];
    return metrics_open(out, NULL, &id, err, sizeof err);
}

void metrics_destroy(metrics *m, int keep_file)
{
    if (!m) return;
    board_destroy(m->b, m->path[0] && !keep_file ? m->path : NULL);
    free(m);
}

const board *metrics_board(const metrics *m) { return m->b; }
board *metrics_board_rw(metrics *m) { return m->b; }

#define ADD(field, v) atomic_fetch_add_explicit(&(field), (v), memory_order_relaxed)
#define SET(field, v) atomic_store_explicit(&(field), (v), memory_order_relaxed)
#define GET(field) atomic_load_explicit(&(field), memory_order_relaxed)

static int status_slot(int status)
{
    for (int i = 0; i < BOARD_N_STATUS - 1; i++)
        if (board_status_codes[i] == status) return i;
    return BOARD_N_STATUS - 1;
}

void metrics_request(metrics *m, enum metric_endpoint ep, int status)
{
    if ((unsigned)ep >= EP_COUNT) ep = EP_OTHER;
    ADD(m->b->requests[ep][status_slot(status)], 1);
}

static void observe(board_histogram *h, enum board_hist id, double v)
{
    const struct hist_row *r = &hist_rows[id];
    size_t i = 0;
    while (i < r->n && v > r->bounds[i]) i++;
    ADD(h->bucket[i], 1);
    ADD(h->sum_ns, v > 0 ? (uint64_t)(v * 1e9 + 0.5) : 0);
}

void metrics_latency(metrics *m, enum metric_endpoint ep, double s)
{
    if (ep == EP_CHAT) observe(&m->b->hist[H_LATENCY_CHAT], H_LATENCY_CHAT, s);
    else if (ep == EP_COMPLETIONS) observe(&m->b->hist[H_LATENCY_COMPLETIONS], H_LATENCY_COMPLETIONS, s);
}

void metrics_tokens(metrics *m, long prompt_tokens, long completion_tokens)
{
    ADD(m->b->prompt_tokens, (uint64_t)(prompt_tokens > 0 ? prompt_tokens : 0));
    ADD(m->b->completion_tokens, (uint64_t)(completion_tokens > 0 ? completion_tokens : 0));
}

void metrics_ttft(metrics *m, double s) { observe(&m->b->hist[H_TTFT], H_TTFT, s); }
void metrics_itl(metrics *m, double s) { observe(&m->b->hist[H_ITL], H_ITL, s); }
void metrics_queue_wait(metrics *m, double s) { observe(&m->b->hist[H_QUEUE_WAIT], H_QUEUE_WAIT, s); }
void metrics_tpot(metrics *m, double s) { observe(&m->b->hist[H_TPOT], H_TPOT, s); }

void metrics_cancel(metrics *m, enum metric_cancel why)
{
    ADD(m->b->cancels[(unsigned)why < CANCEL_REASONS ? why : CANCEL_CLIENT_GONE], 1);
}

void metrics_engine_error(metrics *m) { ADD(m->b->engine_errors, 1); }
void metrics_prefill_chunks(metrics *m, int chunks) { ADD(m->b->prefill_chunks, (uint64_t)(chunks > 0 ? chunks : 0)); }

void metrics_spec(metrics *m, int proposed, int accepted)
{
    ADD(m->b->spec_steps, 1);
    ADD(m->b->spec_draft_tokens, (uint64_t)(proposed > 0 ? proposed : 0));
    ADD(m->b->spec_accepted_tokens, (uint64_t)(accepted > 0 ? accepted : 0));
}
void metrics_state(metrics *m, enum board_state s) { SET(m->b->state, (uint64_t)s); }

void metrics_load_result(metrics *m, const char *err)
{
    if (err) board_load_failed(m->b, err);
    else board_loaded(m->b);
}

void metrics_load(metrics *m, int active, int queued)
{
    SET(m->b->active, (uint64_t)(active > 0 ? active : 0));
    SET(m->b->queued, (uint64_t)(queued > 0 ? queued : 0));
}

void metrics_engine(metrics *m, const char *device_name, uint64_t device_bytes, uint64_t device_total, uint64_t n_ctx)
{
    if (!atomic_load(&m->b->engine_known)) { /* written once, before the flag readers check */
        snprintf(m->b->device_name, sizeof m->b->device_name, "%s", device_name ? device_name : "");
        atomic_store_explicit(&m->b->engine_known, 1, memory_order_release);
    }
    SET(m->b->device_bytes, device_bytes);
    SET(m->b->device_total, device_total);
    SET(m->b->n_ctx, n_ctx);
}

void metrics_kv(metrics *m, int pool, uint64_t blocks, uint64_t free_blocks, uint64_t cached_blocks)
{
    if ((unsigned)pool >= KVP_POOLS) return;
    SET(m->b->kv_blocks[pool], blocks);
    SET(m->b->kv_free[pool], free_blocks);
    SET(m->b->kv_cached[pool], cached_blocks);
}

void metrics_images(metrics *m, int n, double seconds)
{
    ADD(m->b->images, (uint64_t)(n > 0 ? n : 0));
    ADD(m->b->image_encode_us, (uint64_t)(seconds > 0 ? seconds * 1e6 : 0));
}

void metrics_prefix(metrics *m, long prompt_tokens, long cached_tokens)
{
    ADD(m->b->prefix_tokens, (uint64_t)(prompt_tokens > 0 ? prompt_tokens : 0));
    ADD(m->b->prefix_hit_tokens, (uint64_t)(cached_tokens > 0 ? cached_tokens : 0));
}

/* ---- reading back ---- */

uint64_t metrics_requests(const board *b, enum metric_endpoint ep, int status)
{
    uint64_t n = 0;
    for (int i = 0; i < BOARD_N_STATUS; i++)
        if (!status || (i < BOARD_N_STATUS - 1 ? board_status_codes[i] == status : status_slot(status) == i))
            n += GET(((board *)b)->requests[ep][i]);
    return n;
}

uint64_t metrics_cancellations(const board *b)
{
    uint64_t n = 0;
    for (int i = 0; i < CANCEL_REASONS; i++) n += GET(((board *)b)->cancels[i]);
    return n;
}

double metrics_uptime(const board *b)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double s = (double)ts.tv_sec + ts.tv_nsec * 1e-9 - (double)b->started_ns * 1e-9;
    return s > 0 ? s : 0;
}

/* ---- text output ---- */

typedef struct textbuf { char *p; size_t n, cap; int oom; } textbuf;

static void put(textbuf *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(textbuf *t, const char *fmt, ...)
{
    if (t->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(t->p + t->n, t->cap - t->n, fmt, ap);
        va_end(ap);
        if (k < 0) { t->oom = 1; return; }
        if ((size_t)k < t->cap - t->n) { t->n += (size_t)k; return; }
        size_t cap = (t->cap + (size_t)k + 1) * 2;
        char *p = realloc(t->p, cap);
        if (!p) { t->oom = 1; return; }
        t->p = p;
        t->cap = cap;
    }
}

/* label value with \, " and newline escaped */
static void put_label(textbuf *t, const char *s)
{
    for (; s && *s; s++) {
        if (*s == '\\') put(t, "\\\\");
        else if (*s == '"') put(t, "\\\"");
        else if (*s == '\n') put(t, "\\n");
        else put(t, "%c", *s);
    }
}

static void header(textbuf *t, const char *name, const char *type, const char *help)
{
    put(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* the labels every sample of a worker carries */
static void put_worker(textbuf *t, const board *b)
{
    put(t, "worker=\"");
    put_label(t, b->label);
    put(t, "\",device=\"");
    put_label(t, b->device);
    put(t, "\"");
}

static void put_histogram(textbuf *t, const struct hist_row *r, const board *b)
{
    const board_histogram *h = &b->hist[r->id];
    uint64_t cum = 0;
    for (size_t i = 0; i <= r->n; i++) {
        cum += GET(((board_histogram *)h)->bucket[i]);
        put(t, "%s_bucket{", r->name);
        put_worker(t, b);
        if (r->label[0]) put(t, ",%s", r->label);
        if (i < r->n) put(t, ",le=\"%g\"} %llu\n", r->bounds[i], (unsigned long long)cum);
        else put(t, ",le=\"+Inf\"} %llu\n", (unsigned long long)cum);
    }
    const char *sep = r->label[0] ? "," : "";
    put(t, "%s_sum{", r->name);
    put_worker(t, b);
    put(t, "%s%s} %.9f\n%s_count{", sep, r->label, (double)GET(((board_histogram *)h)->sum_ns) * 1e-9, r->name);
    put_worker(t, b);
    put(t, "%s%s} %llu\n", sep, r->label, (unsigned long long)cum);
}

static int loaded(const board *b)
{
    uint64_t s = GET(((board *)b)->state);
    return s == BOARD_READY || s == BOARD_DRAINING;
}

char *metrics_render(const board_view *v, int n, size_t *len)
{
    textbuf t = { malloc(16384), 0, 16384, 0 };
    if (!t.p) return NULL;
#define EACH_UP(...) for (int w = 0; w < n; w++) if (v[w].up) { const board *b = v[w].b; __VA_ARGS__; }
#define LBL(name) do { put(&t, "%s{", name); put_worker(&t, b); } while (0)

    header(&t, "clgemma_worker_up", "gauge", "1 while the worker process runs; 0 while its master restarts it.");
    for (int w = 0; w < n; w++) {
        const board *b = v[w].b;
        LBL("clgemma_worker_up");
        put(&t, "} %d\n", v[w].up);
    }
    header(&t, "clgemma_worker_info", "gauge", "The worker: its process, socket, model and device.");
    EACH_UP({
        LBL("clgemma_worker_info");
        put(&t, ",index=\"%d\",pid=\"%lld\",master_pid=\"%lld\",listen=\"", b->index, (long long)b->pid,
            (long long)b->master_pid);
        put_label(&t, b->listen);
        put(&t, "\",model=\"");
        put_label(&t, b->model);
        put(&t, "\",device_name=\"");
        if (atomic_load_explicit(&((board *)b)->engine_known, memory_order_acquire)) put_label(&t, b->device_name);
        put(&t, "\"} 1\n");
    })

    header(&t, "clgemma_requests_total", "counter", "HTTP requests answered by the worker, by endpoint and status.");
    EACH_UP({
        for (int e = 0; e < EP_COUNT; e++)
            for (int i = 0; i < BOARD_N_STATUS; i++) {
                uint64_t k = GET(((board *)b)->requests[e][i]);
                if (!k) continue;
                LBL("clgemma_requests_total");
                if (i < BOARD_N_STATUS - 1) put(&t, ",endpoint=\"%s\",status=\"%d\"} %llu\n", ep_names[e], board_status_codes[i], (unsigned long long)k);
                else put(&t, ",endpoint=\"%s\",status=\"other\"} %llu\n", ep_names[e], (unsigned long long)k);
            }
    })
    header(&t, "clgemma_cancellations_total", "counter", "Generations cancelled before their end, by reason.");
    EACH_UP({
        for (int i = 0; i < CANCEL_REASONS; i++) {
            LBL("clgemma_cancellations_total");
            put(&t, ",reason=\"%s\"} %llu\n", cancel_names[i], (unsigned long long)GET(((board *)b)->cancels[i]));
        }
    })
    for (size_t r = 0; r < N(scalar_rows); r++) {
        const struct scalar_row *s = &scalar_rows[r];
        header(&t, s->name, s->type, s->help);
        EACH_UP({
            LBL(s->name);
            put(&t, "} %llu\n", (unsigned long long)atomic_load_explicit((_Atomic uint64_t *)((char *)b + s->off),
                                                                          memory_order_relaxed));
        })
    }
    header(&t, "clgemma_model_loaded", "gauge", "1 when the model is loaded and the worker serves.");
    EACH_UP({ LBL("clgemma_model_loaded"); put(&t, "} %d\n", loaded(b)); })
    header(&t, "clgemma_draining", "gauge", "1 while the worker drains after SIGTERM.");
    EACH_UP({ LBL("clgemma_draining"); put(&t, "} %d\n", GET(((board *)b)->state) == BOARD_DRAINING); })
    header(&t, "clgemma_uptime_seconds", "gauge", "Seconds since the worker started.");
    EACH_UP({ LBL("clgemma_uptime_seconds"); put(&t, "} %.3f\n", metrics_uptime(b)); })
    header(&t, "clgemma_prefix_cache_hit_ratio", "gauge",
           "Prompt tokens taken from the prefix cache over prompt tokens looked up, since the worker started.");
    EACH_UP({
        uint64_t all = GET(((board *)b)->prefix_tokens), hit = GET(((board *)b)->prefix_hit_tokens);
        LBL("clgemma_prefix_cache_hit_ratio");
        put(&t, "} %.6f\n", all ? (double)hit / (double)all : 0.0);
    })
    header(&t, "clgemma_image_encode_seconds_total", "counter",
           "Engine time spent encoding the images of prompts started (those found in the image cache take none).");
    EACH_UP({ LBL("clgemma_image_encode_seconds_total"); put(&t, "} %.6f\n", GET(((board *)b)->image_encode_us) / 1e6); })
    static const char *const kv_names[3] = { "clgemma_kv_blocks_used", "clgemma_kv_blocks_free",
                                             "clgemma_kv_blocks_cached" };
    static const char *const kv_help[3] = {
        "Paged KV cache blocks held by sequences, by pool (full attention, sliding-window rings).",
        "Paged KV cache blocks a sequence may take, by pool (cached ones included).",
        "Paged KV cache blocks held only by the prefix cache (part of the free ones: evicted when taken), by pool.",
    };
    for (int k = 0; k < 3; k++) {
        header(&t, kv_names[k], "gauge", kv_help[k]);
        EACH_UP({
            for (int p = 0; p < KVP_POOLS; p++) {
                uint64_t total = GET(((board *)b)->kv_blocks[p]), fr = GET(((board *)b)->kv_free[p]);
                uint64_t v = k == 0 ? total - fr : k == 1 ? fr : GET(((board *)b)->kv_cached[p]);
                if (!total) continue; /* no such pool in this model, or not loaded yet */
                LBL(kv_names[k]);
                put(&t, ",pool=\"%s\"} %llu\n", kv_pool_names[p], (unsigned long long)v);
            }
        })
    }
    for (int r = 0; r < H_COUNT; r++) {
        const struct hist_row *h = &hist_rows[r];
        if (h->help) header(&t, h->name, "histogram", h->help);
        /* a family's rows are adjacent: all of it comes before the next header */
        EACH_UP(put_histogram(&t, h, b));
    }
#undef EACH_UP
#undef LBL
    if (t.oom) { free(t.p); return NULL; }
    if (len) *len = t.n;
    return t.p;
}
