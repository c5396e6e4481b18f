/* worker.c — a worker process: request threads on the transport's accept, routing, model load, drain.
 *
 * Signals: SIGTERM/SIGINT are blocked in every thread and taken by the main thread with
 * sigtimedwait; a real-time signal (WAKE_SIG) is the wake-up the main thread sends to request
 * threads blocked in accept() when the worker stops (their accept then fails with EINTR).
 * Not SIGUSR2: the OpenCL stack (LLVM inside PoCL) registers its own handler for it, and a worker
 * was seen dying of signal 12 during shutdown; real-time signals are left alone by libraries. */
#include "worker.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "api_respond.h"
#include "clock.h"
#include "http.h"
#include "log.h"
#include "spec_step.h"

typedef struct worker worker;

typedef struct req_thread {
    worker *w;
    pthread_t tid;
    atomic_int exited;
    int started;
} req_thread;

struct worker {
    const server_config *cfg;
    const transport *tp;      /* --protocol */
    int index, listen_fd;
    atomic_int state;         /* enum worker_state */
    engine *eng;              /* published before state becomes READY */
    sched *sched;
    metrics *m;               /* our stats board, in stats_dir when there is one */
    char stats_dir[CFG_STR];
    double t_start;
    long created;
    char load_error[256];
    atomic_int busy;          /* generation handlers running */
    atomic_int stopping;      /* request threads should leave their accept loop */
    req_thread *threads;
    int n_threads;
};

#define WAKE_SIG (SIGRTMIN + 5)

static void on_wake(int sig) { (void)sig; }

/* api_ctx's states as the board shows them to the pool */
static const enum board_state board_states[] = {
    [WORKER_LOADING] = BOARD_LOADING, [WORKER_READY] = BOARD_READY,
    [WORKER_DRAINING] = BOARD_DRAINING, [WORKER_FAILED] = BOARD_FAILED,
};

static void set_state(worker *w, enum worker_state s)
{
    atomic_store(&w->state, s);
    metrics_state(w->m, board_states[s]);
}

#define LOG(w, ...) do { char who_[48]; snprintf(who_, sizeof who_, "worker %d pid %d", (w)->index, (int)getpid()); \
    log_line(who_, __VA_ARGS__); } while (0)

/* ---- routing ---- */

typedef int (*handler_fn)(const api_ctx *, http_req *);

typedef struct route {
    const char *path;
    int prefix;               /* path matches itself and path + "/..." */
    const char *method;
    handler_fn fn;
    enum metric_endpoint ep;
    int generation;           /* counts as in-flight work for the drain */
} route;

static const route routes[] = {
    { "/v1/chat/completions", 0, "POST", api_chat, EP_CHAT, 1 },
    { "/v1/completions", 0, "POST", api_completions, EP_COMPLETIONS, 1 },
    { "/v1/models", 1, "GET", api_models, EP_MODELS, 0 },
    { "/health", 0, "GET", api_health, EP_HEALTH, 0 },
    { "/metrics", 0, "GET", api_metrics, EP_METRICS, 0 },
};

static const route *find_route(const char *path)
{
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        size_t n = strlen(routes[i].path);
        if (!strncmp(path, routes[i].path, n) && (path[n] == 0 || (routes[i].prefix && path[n] == '/')))
            return &routes[i];
    }
    return NULL;
}

static void snapshot(worker *w, api_ctx *c)
{
    memset(c, 0, sizeof *c);
    c->cfg = w->cfg;
    c->worker_index = w->index;
    c->state = (enum worker_state)atomic_load(&w->state);
    if (c->state == WORKER_READY || c->state == WORKER_DRAINING) {
        c->eng = w->eng;
        c->sched = w->sched;
    }
    c->m = w->m;
    c->stats_dir = w->stats_dir;
    c->t_start = w->t_start;
    c->created = w->created;
    memcpy(c->load_error, w->load_error, sizeof c->load_error);
}

static void handle(worker *w, transport_conn *conn)
{
    http_req r;
    http_req_init(&r, w->tp, conn);
    const route *rt = find_route(r.path);
    api_error e;
    if (!rt) {
        api_fail(&e, 404, "invalid_request_error", "not_found", NULL, "no such endpoint: %s %.200s", r.method, r.path);
        api_reply_error(&r, &e);
    } else if (strcmp(r.method, rt->method)) {
        r.allow = rt->method;
        api_fail(&e, 405, "invalid_request_error", "method_not_allowed", NULL, "%s takes %s, not %.16s",
                 rt->path, rt->method, r.method);
        api_reply_error(&r, &e);
    } else {
        if (rt->generation) atomic_fetch_add(&w->busy, 1);
        api_ctx c;
        snapshot(w, &c); /* after counting ourselves busy: a drain that starts now waits for us */
        rt->fn(&c, &r);
        if (rt->generation) atomic_fetch_sub(&w->busy, 1);
    }
    enum metric_endpoint ep = rt ? rt->ep : EP_OTHER;
    metrics_request(w->m, ep, r.status ? r.status : 500);
    metrics_latency(w->m, ep, monotonic_seconds() - r.t_start); /* every byte is written; Finish only flushes */
    if (!(r.status == 200 && (ep == EP_HEALTH || ep == EP_METRICS)))
        LOG(w, "rid=%s %s %s %d %.3fs%s", r.request_id, r.method, r.path, r.status, monotonic_seconds() - r.t_start,
            r.write_failed ? " client-gone" : "");
}

static void *request_thread(void *arg)
{
    req_thread *t = arg;
    worker *w = t->w;
    sigset_t wake;
    sigemptyset(&wake);
    sigaddset(&wake, WAKE_SIG);
    pthread_sigmask(SIG_UNBLOCK, &wake, NULL);
    /* a request must arrive whole within 30 s: nginx sends it buffered (proxy_request_buffering) */
    transport_limits lim = { .max_body = w->cfg->max_body, .read_timeout_ms = 30000 };
    transport_conn *conn = w->tp->create(w->listen_fd, &lim);
    if (!conn) { LOG(w, "no memory for a request thread"); atomic_store(&t->exited, 1); return NULL; }
    while (!atomic_load(&w->stopping)) {
        char why[256] = "";
        int rc = w->tp->accept(conn, why, sizeof why);
        if (rc > 0) { LOG(w, "bad request: %s", why); continue; }
        if (rc < 0) {
            if (atomic_load(&w->stopping)) break;
            if (rc == -EINTR) continue;
            LOG(w, "accept failed: %s", strerror(-rc));
            usleep(100 * 1000); /* e.g. out of file descriptors: do not spin */
            continue;
        }
        handle(w, conn);
        w->tp->finish(conn);
    }
    w->tp->destroy(conn);
    atomic_store(&t->exited, 1);
    return NULL;
}

/* ---- lifecycle ---- */

#define LOAD_THREADS 4 /* while loading, before the sizes are known: /health and 503s */

/* request threads up to n in all (the first call makes room for the most there may be) */
static int start_threads(worker *w, int n)
{
    if (!w->threads && !(w->threads = calloc(CFG_MAX_THREADS, sizeof *w->threads))) return -1;
    for (; w->n_threads < n && w->n_threads < CFG_MAX_THREADS; w->n_threads++) {
        req_thread *t = &w->threads[w->n_threads];
        t->w = w;
        atomic_init(&t->exited, 0);
        int rc = pthread_create(&t->tid, NULL, request_thread, t);
        if (rc) { LOG(w, "cannot start request thread %d: %s", w->n_threads, strerror(rc)); return -1; }
        t->started = 1;
    }
    return 0;
}

/* Wakes the request threads until they leave; returns 1 when all of them did. */
static int stop_threads(worker *w, double give_up_s)
{
    atomic_store(&w->stopping, 1);
    w->tp->shutdown();
    double end = monotonic_seconds() + give_up_s;
    for (;;) {
        int left = 0;
        for (int i = 0; i < w->n_threads; i++) {
            req_thread *t = &w->threads[i];
            if (t->started && !atomic_load(&t->exited)) {
                left++;
                pthread_kill(t->tid, WAKE_SIG);
            }
        }
        if (!left) break;
        if (monotonic_seconds() > end) { LOG(w, "%d request threads still busy; leaving them", left); return 0; }
        usleep(20 * 1000);
    }
    for (int i = 0; i < w->n_threads; i++)
        if (w->threads[i].started) pthread_join(w->threads[i].tid, NULL);
    return 1;
}

/* prefixes the prefix cache keeps a recurrent state at (hybrid models; design-qwen35 3.5): 16 sequences' state,
 * 1 GiB for Qwen3.6-35B-A3B, a fixed pool kv_fit counts before the sequences */
#define WORKER_STATE_SNAPSHOTS 16

static int load(worker *w)
{
    const server_config *cfg = w->cfg;
    engine_opts o;
    memset(&o, 0, sizeof o);
    o.device = cfg->devices[w->index][0] ? cfg->devices[w->index] : NULL;
    o.n_ctx = cfg->ctx;
    o.max_seqs = cfg->max_seqs;
    o.kv_tokens = cfg->kv_tokens;
    o.max_batch_tokens = cfg->max_batch;
    o.no_prefix_cache = !cfg->prefix_cache;
    o.kv_type = cfg->kv_type;
    o.cache_dir = cfg->cache_dir[0] ? cfg->cache_dir : NULL;
    o.draft_path = cfg->draft[0] ? cfg->draft : NULL;
    o.mmproj_path = cfg->mmproj[0] ? cfg->mmproj : NULL;
    o.image_tokens = cfg->image_tokens;
    o.image_attention = cfg->image_attention;
    o.image_cache_mb = cfg->image_cache_mb;
    o.state_checkpoints = cfg->spec != SPEC_OFF ? SPEC_STATE_CHECKPOINTS : 0; /* only models with state use them */
    o.state_snapshots = cfg->prefix_cache ? WORKER_STATE_SNAPSHOTS : 0;
    o.verbose = cfg->verbose;
    char err[256];
    if (engine_load(&w->eng, cfg->model, &o, err, sizeof err)) {
        snprintf(w->load_error, sizeof w->load_error, "%s", err);
        w->eng = NULL;
        return -1;
    }
    const engine_info *info = engine_get_info(w->eng);
    worker_sizes ws;
    sched_opts so = { 0 };
    int rc = config_sizes(cfg, (int)info->fit.n_seq, &ws, err, sizeof err);
    if (!rc) {
        so = (sched_opts){ .max_seqs = ws.max_seqs, .max_queue = ws.max_queue, .queue_timeout = cfg->queue_timeout,
                            .step_tokens = cfg->step_tokens, .spec = spec_mode_effective(cfg->spec, info),
                            .draft_max = cfg->draft_max };
        rc = sched_create(&w->sched, w->eng, &so, w->m, err, sizeof err);
    }
    if (rc) {
        snprintf(w->load_error, sizeof w->load_error, "%s", err);
        engine_destroy(w->eng);
        w->eng = NULL;
        return -1;
    }
    metrics_engine(w->m, info->device, info->device_bytes, info->device_total, info->n_ctx);
    char drafts[48] = "";
    int spec = spec_mode_effective(cfg->spec, info);
    if (spec != SPEC_OFF) snprintf(drafts, sizeof drafts, ", drafts of up to %d tokens", cfg->draft_max);
    if (info->draft_arch[0])
        LOG(w, "drafter: %s (%s, %u layers, width %u, %.1f MiB on the device)", cfg->draft, info->draft_arch,
            info->draft_layers, info->draft_embd, info->draft_bytes / 1048576.0);
    if (info->vision_proj[0])
        LOG(w, "vision projector: %s (%s, %.1f MiB on the device with its scratch); images of up to %u tokens, %s "
            "among their tokens; up to %d images or videos a request", cfg->mmproj, info->vision_proj,
            info->vision_bytes / 1048576.0, info->image_tokens, info->image_bidir ? "bidirectional" : "causal",
            cfg->max_images);
    LOG(w, "ready: model %s (%s) on %s, context %u, loaded in %.2fs; %d sequences%s, %d queue places, queue timeout "
        "%d s, %d request threads; steps of %d tokens (forward chunks of %u); speculative decoding %s%s", cfg->model_id,
        info->name, info->device, info->n_ctx, info->load_seconds, ws.max_seqs,
        cfg->max_seqs ? "" : " (sized from the KV cache)", ws.max_queue, cfg->queue_timeout, ws.threads,
        sched_step_tokens(w->sched), info->fit.max_batch, spec_mode_name(spec), drafts);
    char fit[1024];
    engine_fit_summary(&info->fit, fit, sizeof fit);
    LOG(w, "%s", fit);
    start_threads(w, ws.threads); /* a thread that would not start was logged; the others serve */
    return 0;
}

/* Waits for SIGTERM/SIGINT; returns 1 when one came within timeout_ms. */
static int wait_signal(int timeout_ms)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    struct timespec ts = { timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L };
    return sigtimedwait(&set, NULL, &ts) > 0;
}

/* Drain: refuse new generations, let running ones finish until the deadline, then cancel. */
static void drain(worker *w)
{
    set_state(w, WORKER_DRAINING);
    if (w->sched) sched_close(w->sched);
    double deadline = monotonic_seconds() + w->cfg->drain_timeout, hard = 0;
    LOG(w, "draining: %d generation(s) in flight, up to %ds", atomic_load(&w->busy), w->cfg->drain_timeout);
    for (;;) {
        int active = 0, queued = 0;
        if (w->sched) sched_counts(w->sched, &active, &queued);
        if (!atomic_load(&w->busy) && !active && !queued) break;
        double now = monotonic_seconds();
        if (!hard && now >= deadline) {
            LOG(w, "drain deadline passed: cancelling %d running, %d queued", active, queued);
            if (w->sched) sched_cancel_all(w->sched);
            hard = now + 5;
        }
        if (hard && now >= hard) { LOG(w, "generations did not end after cancelling; exiting anyway"); break; }
        if (wait_signal(50)) LOG(w, "already draining");
    }
}

/* The stats board: <stats-dir or the socket's directory>/<label>.stats, so every worker of the
 * pool renders all of them; without a directory (TCP, no --stats-dir) or when the file cannot
 * be made, anonymous memory that only this worker shows. */
static int open_board(worker *w)
{
    const server_config *cfg = w->cfg;
    board_id id;
    char sock_dir[CFG_STR], path[4096 + 16], err[512];
    board_identify(w->listen_fd, w->index, cfg->n_workers > 1 && cfg->n_listen <= 1, &id, sock_dir, sizeof sock_dir);
    snprintf(id.device, sizeof id.device, "%s", cfg->devices[w->index]);
    snprintf(id.model, sizeof id.model, "%s", cfg->model_id);
    snprintf(w->stats_dir, sizeof w->stats_dir, "%s", cfg->stats_dir[0] ? cfg->stats_dir : sock_dir);
    if (w->stats_dir[0]) {
        if (board_path(w->stats_dir, id.label, path, sizeof path) == 0 && metrics_open(&w->m, path, &id, err, sizeof err) == 0)
            return 0;
        LOG(w, "stats board: %s; /metrics and /health show this worker only", err);
        w->stats_dir[0] = 0;
    }
    if (metrics_open(&w->m, NULL, &id, err, sizeof err)) { LOG(w, "stats board: %s", err); return -1; }
    return 0;
}

int worker_run(const server_config *cfg, int index, int listen_fd, double load_delay)
{
    worker w;
    memset(&w, 0, sizeof w);
    w.cfg = cfg;
    w.tp = transport_find(cfg->protocol);
    w.index = index;
    w.listen_fd = listen_fd;
    w.t_start = monotonic_seconds();
    w.created = (long)time(NULL);
    atomic_init(&w.state, WORKER_LOADING);
    atomic_init(&w.busy, 0);
    atomic_init(&w.stopping, 0);
    if (open_board(&w)) return WORKER_EXIT_ERROR;

    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigaddset(&block, WAKE_SIG);
    pthread_sigmask(SIG_BLOCK, &block, NULL); /* inherited by every thread we start */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_wake; /* no SA_RESTART: accept() returns EINTR */
    sigemptyset(&sa.sa_mask);
    sigaction(WAKE_SIG, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);   /* a closed socket is a write error, not a death */

    if (!w.tp || w.tp->init()) { LOG(&w, "cannot start the %s transport", cfg->protocol); metrics_destroy(w.m, 1); return WORKER_EXIT_ERROR; }
    int rc = WORKER_EXIT_OK;
    if (start_threads(&w, cfg->threads ? cfg->threads : LOAD_THREADS)) {
        rc = WORKER_EXIT_ERROR;
    } else if (load_delay > 0 && wait_signal((int)(load_delay * 1000))) {
        LOG(&w, "stopped before loading");
    } else if (load(&w)) {
        LOG(&w, "cannot load %s: %s", cfg->model, w.load_error);
        metrics_load_result(w.m, w.load_error);
        set_state(&w, WORKER_FAILED);
        rc = WORKER_EXIT_LOAD;
    } else {
        metrics_load_result(w.m, NULL);
        set_state(&w, WORKER_READY);
        while (!wait_signal(1000)) {}
        drain(&w);
    }
    int joined = stop_threads(&w, 5.0);
    if (joined) {
        sched_destroy(w.sched);
        if (w.eng) engine_destroy(w.eng);
        metrics_destroy(w.m, rc != WORKER_EXIT_OK); /* a failed worker stays on the board until restarted */
        free(w.threads);
    }
    LOG(&w, "exit %d", rc);
    return rc;
}
