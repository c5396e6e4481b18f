/* config.c — command-line and config-file options of clgemma-fcgi. */
#include "config.h"

#include "engine.h"
#include "spec_step.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void config_defaults(server_config *c)
{
    memset(c, 0, sizeof *c);
    c->n_workers = 1;
    c->max_seqs = 0;           /* sized from the KV cache at load */
    c->max_queue = -1;         /* derived from max_seqs */
    c->queue_timeout = 30;
    c->prefix_cache = 1;
    c->spec = SPEC_MODE_DEFAULT;
    c->draft_max = SPEC_DRAFT_DEFAULT;
    c->threads = 0;            /* derived from both */
    c->drain_timeout = 60;
    c->default_max_tokens = 1024;
    c->request_timeout = 300;
    c->max_body = 0;           /* 1 MiB; 32 MiB with --mmproj (base64 images): config_finish */
    c->max_images = 16;
    c->image_urls.max_bytes = 20u << 20;
    c->image_urls.timeout_s = 10;
    c->socket_mode = 0660;
    strcpy(c->protocol, "http");
}

void config_usage(const char *prog)
{
    fprintf(stderr,
        "usage: %s -m MODEL [options]\n"
        "  -m, --model PATH        GGUF model file\n"
        "      --model-id NAME     model name for clients (default: file name without .gguf)\n"
        "      --devices LIST      OpenCL devices P:D[,P:D...], one worker process each (default: engine's pick)\n"
        "      --listen ADDR[,...] unix:PATH or HOST:PORT, one or one per worker\n"
        "                          (default: the listening socket on fd 0, as spawn-fcgi passes it)\n"
        "      --ctx N             context tokens per sequence (default: engine's)\n"
        "      --max-seqs N        sequences decoded together per worker (default: as many as the KV cache\n"
        "                          holds of 2048-token requests, at most 256 on a GPU and 4 elsewhere)\n"
        "      --max-queue N       sequences waiting for a slot before 429; a request takes one per\n"
        "                          choice, prompts x n (default 4 per sequence, at most 512)\n"
        "      --queue-timeout S   seconds a request may wait for a slot and room in the KV cache, then\n"
        "                          503 with Retry-After (default 30; 0: as long as it takes)\n"
        "      --kv-tokens N       tokens the KV cache holds in its full-attention layers, all sequences\n"
        "                          together, at least --ctx (default: a third of the memory the weights leave)\n"
        "      --max-batch N       tokens per forward chunk; longer prompts are split (default: engine's,\n"
        "                          2048 on a GPU with 16 GiB to spare after the weights, else 512)\n"
        "      --step-tokens N     tokens per engine step: every decoding sequence's one, then chunks of\n"
        "                          waiting prompts (oldest first) in the rest, so running streams keep\n"
        "                          flowing while a long prompt enters; the oldest prompt gets at least 32\n"
        "                          (default: max-batch's)\n"
        "      --prefix-cache 0|1  1: a prompt starts on the KV blocks of the longest prefix of it an earlier\n"
        "                          sequence computed (whole blocks; usage.prompt_tokens_details.cached_tokens);\n"
        "                          0: every prompt is computed whole (default 1)\n"
        "      --kv-type T         the KV cache's type: f16 (default), q8_0 (1.9x the tokens in the same\n"
        "                          memory), q4 (3.6x; llama.cpp's q4_0), at some accuracy: README\n"
        "      --spec MODE         speculative decoding: ngram (requests without logprobs, logit_bias or\n"
        "                          response_format feed drafts copied from their prompt and output, verified in\n"
        "                          the same step; greedy output unchanged (on GPUs an MoE model may part\n"
        "                          where int8 rounding flips a near-tied expert), sampled output of the same\n"
        "                          distribution but not a seed's plain tokens), mtp (drafts from --draft's\n"
        "                          model), off, or auto: mtp with --draft, else ngram on GPUs whose decode\n"
        "                          products take drafts at little cost, else off (default %s)\n"
        "      --draft FILE        an MTP drafter (gemma4-assistant GGUF) loaded beside a Gemma 4 model\n"
        "      --draft-max K       draft tokens a sequence feeds a step at most, 1..%d (default %d); each\n"
        "                          sequence's length adapts to what the model accepts\n"
        "      --mmproj FILE       a vision projector (mmproj GGUF) beside a Gemma 4 model: image_url parts\n"
        "                          (data: URLs of JPEG, PNG, WebP, GIF) in chat messages\n"
        "      --image-tokens N    soft tokens an image takes at most: 70, 140, 280, 560, 1120 (default 280;\n"
        "                          detail \"low\" takes 70)\n"
        "      --image-attention M auto, causal or bidirectional: how an image's tokens see each other in\n"
        "                          sliding-window layers (auto: bidirectional but on E-series models)\n"
        "      --max-images N      images and videos in one request at most (default 16); a video part\n"
        "                          {\"type\": \"video\", \"frames\": [data URLs], \"timestamps\": [s]} takes 32\n"
        "                          frames at most, each at 70 tokens; so does a {\"type\": \"video_url\"} file\n"
        "                          (MP4, QuickTime, WebM, Matroska), sampled as transformers samples it\n"
        "      --image-cache-mb N  device memory for encoded images kept for reuse by later prompts\n"
        "                          (default 256)\n"
        "      --image-url-allow L image_url / frame URLs fetched from these hosts only (none by default: a\n"
        "                          server fetching any URL a client names is an SSRF hazard): comma-separated\n"
        "                          [http://|https://]HOST[:PORT], HOST a name, *.name (its subdomains) or an IP;\n"
        "                          no scheme: https; no port: the scheme's. Redirects are not followed\n"
        "      --image-url-max-mb N  largest fetched image (default 20)\n"
        "      --image-url-timeout S seconds a fetch may take (default 10)\n"
        "      --protocol P        http (HTTP/1.1, nginx proxy_pass; default) or fastcgi (fastcgi_pass);\n"
        "                          the same for every worker and for nginx (deploy/render-conf.sh PROTOCOL)\n"
        "      --threads N         request threads per worker (default max-seqs + max-queue + 4)\n"
        "      --drain-timeout S   seconds in-flight streams may run after SIGTERM (default 60)\n"
        "      --request-timeout S seconds a generation may run from its arrival, then it ends with\n"
        "                          finish_reason \"length\" (default 300, below nginx's 600 s; 0: none)\n"
        "      --default-max-tokens N  tokens a request without max_tokens may generate (default 1024;\n"
        "                          0: up to the context)\n"
        "      --max-body BYTES    largest request body (default 1048576; 33554432 with --mmproj)\n"
        "      --socket-mode OCT   permissions of unix sockets (default 0660)\n"
        "      --cache-dir DIR     OpenCL program binary cache\n"
        "      --stats-dir DIR     where each worker keeps its stats board (<label>.stats), read by every\n"
        "                          worker of the pool for /metrics and /health (default: the directory of\n"
        "                          the unix listening socket; with a TCP listener and none given, each\n"
        "                          worker shows only itself)\n"
        "      --config FILE       read options from FILE (key = value, same names), then the command line\n"
        "  -v, --verbose           engine progress on stderr\n", prog, spec_mode_name(SPEC_MODE_DEFAULT), SPEC_MAX_DRAFT,
        SPEC_DRAFT_DEFAULT);
}

static int parse_int(const char *v, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi) return -1;
    *out = x;
    return 0;
}

static int split_list(const char *v, char (*dst)[CFG_STR], size_t each, int max, int *n)
{
    int k = 0;
    const char *p = v;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (k == max || len == 0 || len >= each) return -1;
        memcpy((char *)dst + (size_t)k * each, p, len);
        ((char *)dst + (size_t)k * each)[len] = 0;
        k++;
        p += len + (comma ? 1 : 0);
        if (comma && !*p) return -1;
    }
    *n = k;
    return k ? 0 : -1;
}

static int copy_str(char *dst, size_t cap, const char *v)
{
    size_t n = strlen(v);
    if (n >= cap) return -1;
    memcpy(dst, v, n + 1);
    return 0;
}

/* one option by its long name; returns 0, or -1 with err */
static int config_set(server_config *c, const char *key, const char *v, char *err, size_t errlen)
{
    long x;
#define INT_OPT(name, field, lo, hi) \
    if (!strcmp(key, name)) { \
        if (parse_int(v, lo, hi, &x)) { \
            snprintf(err, errlen, "--%s: expected an integer in [%ld, %ld], got '%s'", name, (long)(lo), (long)(hi), v); \
            return -1; } \
        c->field = x; return 0; }
    INT_OPT("ctx", ctx, 0, 1 << 24)
    INT_OPT("max-seqs", max_seqs, 1, 256)
    INT_OPT("max-queue", max_queue, 0, 100000)
    INT_OPT("queue-timeout", queue_timeout, 0, 86400)
    INT_OPT("kv-tokens", kv_tokens, 0, 1 << 30)
    INT_OPT("max-batch", max_batch, 0, 65536)
    INT_OPT("step-tokens", step_tokens, 0, 1 << 20)
    INT_OPT("prefix-cache", prefix_cache, 0, 1)
    INT_OPT("threads", threads, 1, CFG_MAX_THREADS)
    INT_OPT("drain-timeout", drain_timeout, 0, 86400)
    INT_OPT("default-max-tokens", default_max_tokens, 0, 1 << 24)
    INT_OPT("request-timeout", request_timeout, 0, 86400)
    INT_OPT("max-body", max_body, 1024, 1L << 30)
    INT_OPT("draft-max", draft_max, 1, SPEC_MAX_DRAFT)
    INT_OPT("image-tokens", image_tokens, 70, 1120)
    INT_OPT("max-images", max_images, 1, 256)
    INT_OPT("image-cache-mb", image_cache_mb, 1, 1 << 20)
    INT_OPT("image-url-timeout", image_urls.timeout_s, 1, 600)
#undef INT_OPT
    if (!strcmp(key, "image-url-max-mb")) {
        if (parse_int(v, 1, 1024, &x)) {
            snprintf(err, errlen, "--image-url-max-mb: expected an integer in [1, 1024], got '%s'", v);
            return -1;
        }
        c->image_urls.max_bytes = (size_t)x << 20;
        return 0;
    }
    if (!strcmp(key, "image-url-allow")) return fetch_rules_parse(&c->image_urls, v, err, errlen);
    if (!strcmp(key, "kv-type")) {
        if ((x = engine_kv_type_parse(v)) < 0) {
            snprintf(err, errlen, "--kv-type: expected f16, q8_0 or q4, got '%s'", v);
            return -1;
        }
        c->kv_type = (int)x;
        return 0;
    }
    if (!strcmp(key, "image-attention")) {
        static const char *const modes[] = { [ENGINE_IMAGE_ATTN_AUTO] = "auto", [ENGINE_IMAGE_ATTN_CAUSAL] = "causal",
                                             [ENGINE_IMAGE_ATTN_BIDIR] = "bidirectional" };
        for (int m = 0; m < 3; m++)
            if (!strcmp(v, modes[m])) { c->image_attention = m; return 0; }
        snprintf(err, errlen, "--image-attention: expected auto, causal or bidirectional, got '%s'", v);
        return -1;
    }
    if (!strcmp(key, "spec")) {
        if ((x = spec_mode_parse(v)) < 0) {
            snprintf(err, errlen, "--spec: expected ngram, mtp, off or auto, got '%s'", v);
            return -1;
        }
        c->spec = (int)x;
        return 0;
    }
    if (!strcmp(key, "socket-mode")) {
        char *end;
        errno = 0;
        x = strtol(v, &end, 8);
        if (errno || end == v || *end || x < 0 || x > 0777) {
            snprintf(err, errlen, "--socket-mode: expected octal permissions such as 0660, got '%s'", v);
            return -1;
        }
        c->socket_mode = (int)x;
        return 0;
    }
    if (!strcmp(key, "model") || !strcmp(key, "model-id") || !strcmp(key, "cache-dir") || !strcmp(key, "stats-dir") ||
        !strcmp(key, "draft") || !strcmp(key, "mmproj")) {
        char *dst = !strcmp(key, "model") ? c->model : !strcmp(key, "cache-dir") ? c->cache_dir
                  : !strcmp(key, "stats-dir") ? c->stats_dir : !strcmp(key, "draft") ? c->draft
                  : !strcmp(key, "mmproj") ? c->mmproj : c->model_id;
        size_t cap = !strcmp(key, "model-id") ? sizeof c->model_id : CFG_STR;
        if (copy_str(dst, cap, v)) { snprintf(err, errlen, "--%s: value too long", key); return -1; }
        return 0;
    }
    if (!strcmp(key, "devices")) {
        char tmp[CFG_MAX_WORKERS][CFG_STR];
        int n;
        if (split_list(v, tmp, CFG_STR, CFG_MAX_WORKERS, &n)) {
            snprintf(err, errlen, "--devices: expected P:D[,P:D...] (at most %d), got '%s'", CFG_MAX_WORKERS, v);
            return -1;
        }
        for (int i = 0; i < n; i++) {
            if (copy_str(c->devices[i], sizeof c->devices[i], tmp[i])) {
                snprintf(err, errlen, "--devices: '%s' too long", tmp[i]);
                return -1;
            }
        }
        c->n_workers = n;
        return 0;
    }
    if (!strcmp(key, "listen")) {
        if (split_list(v, c->listen, CFG_STR, CFG_MAX_WORKERS, &c->n_listen)) {
            snprintf(err, errlen, "--listen: expected unix:PATH or HOST:PORT[,...], got '%s'", v);
            return -1;
        }
        return 0;
    }
    if (!strcmp(key, "protocol")) {
        if (strcmp(v, "http") && strcmp(v, "fastcgi")) {
            snprintf(err, errlen, "--protocol: expected http or fastcgi, got '%s'", v);
            return -1;
        }
        snprintf(c->protocol, sizeof c->protocol, "%s", v);
        return 0;
    }
    if (!strcmp(key, "verbose")) {
        if (parse_int(v, 0, 9, &x)) { snprintf(err, errlen, "verbose: expected 0..9, got '%s'", v); return -1; }
        c->verbose = (int)x;
        return 0;
    }
    snprintf(err, errlen, "unknown option '%s'", key);
    return -1;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = 0;
    return s;
}

int config_load_file(server_config *c, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) { snprintf(err, errlen, "config %s: %s", path, strerror(errno)); return -1; }
    char line[2048], e2[256];
    int lineno = 0, rc = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        char *s = trim(line);
        if (!*s) continue;
        char *sep = strpbrk(s, "= \t");
        if (!sep) { snprintf(err, errlen, "config %s:%d: expected 'key = value'", path, lineno); rc = -1; break; }
        char *key = s, *val = sep + 1;
        *sep = 0;
        key = trim(key);
        val = trim(val);
        if (*val == '=') val = trim(val + 1);
        if (config_set(c, key, val, e2, sizeof e2)) {
            snprintf(err, errlen, "config %s:%d: %s", path, lineno, e2);
            rc = -1;
            break;
        }
    }
    fclose(f);
    return rc;
}

int config_parse_args(server_config *c, int argc, char **argv, char *err, size_t errlen)
{
    /* --config first, so the command line overrides the file whatever the order */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--config")) {
            if (i + 1 >= argc) { snprintf(err, errlen, "--config needs a file"); return -1; }
            if (config_load_file(c, argv[i + 1], err, errlen)) return -1;
        }
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { config_usage(argv[0]); return 1; }
        if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) { c->verbose++; continue; }
        if (!strcmp(a, "--config")) { i++; continue; }
        const char *key;
        const char *val = NULL;
        char keybuf[64];
        if (!strcmp(a, "-m")) key = "model";
        else if (!strncmp(a, "--", 2) && a[2]) {
            const char *eq = strchr(a + 2, '=');
            size_t n = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
            if (n >= sizeof keybuf) { snprintf(err, errlen, "unknown option '%s'", a); return -1; }
            memcpy(keybuf, a + 2, n);
            keybuf[n] = 0;
            key = keybuf;
            if (eq) val = eq + 1;
        } else {
            snprintf(err, errlen, "unexpected argument '%s' (see --help)", a);
            return -1;
        }
        if (!val) {
            if (i + 1 >= argc) { snprintf(err, errlen, "option '%s' needs a value", a); return -1; }
            val = argv[++i];
        }
        if (config_set(c, key, val, err, errlen)) return -1;
    }
    return 0;
}

int config_finish(server_config *c, char *err, size_t errlen)
{
    if (!c->model[0]) { snprintf(err, errlen, "no model: pass -m MODEL.gguf"); return -1; }
    if (c->spec == SPEC_MTP && !c->draft[0]) { snprintf(err, errlen, "--spec mtp needs --draft FILE"); return -1; }
    if (c->max_body == 0) c->max_body = c->mmproj[0] ? 32L << 20 : 1L << 20;
    if (c->n_listen > 1 && c->n_listen != c->n_workers) {
        snprintf(err, errlen, "--listen has %d addresses for %d workers: give one, or one per device",
                 c->n_listen, c->n_workers);
        return -1;
    }
    if (!c->model_id[0]) {
        const char *base = strrchr(c->model, '/');
        base = base ? base + 1 : c->model;
        size_t n = strlen(base);
        if (n > 5 && !strcmp(base + n - 5, ".gguf")) n -= 5;
        if (n >= sizeof c->model_id) n = sizeof c->model_id - 1;
        memcpy(c->model_id, base, n);
        c->model_id[n] = 0;
    }
    if (c->max_seqs == 0) return 0; /* sized at load: config_sizes */
    worker_sizes ws;
    if (config_sizes(c, c->max_seqs, &ws, err, errlen)) return -1;
    c->max_queue = ws.max_queue;
    c->threads = ws.threads;
    return 0;
}

int config_sizes(const server_config *c, int engine_seqs, worker_sizes *out, char *err, size_t errlen)
{
    out->max_seqs = c->max_seqs > 0 ? c->max_seqs : engine_seqs;
    out->max_queue = c->max_queue >= 0 ? c->max_queue : out->max_seqs * 4 < 512 ? out->max_seqs * 4 : 512;
    /* every waiting or running generation holds a request thread; keep spare ones so /health
     * and /metrics answer however busy the engine is */
    int need = out->max_seqs + out->max_queue + 2;
    out->threads = c->threads ? c->threads : need + 2 < CFG_MAX_THREADS ? need + 2 : CFG_MAX_THREADS;
    if (out->threads < need) {
        snprintf(err, errlen, "--threads %d is too few for --max-seqs %d + --max-queue %d (need >= %d)",
                 out->threads, out->max_seqs, out->max_queue, need);
        return -1;
    }
    return 0;
}
