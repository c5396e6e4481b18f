/* config.h — server settings: command-line options and the worker config file (conf/clgemma.conf).
 * Every option of the file has the same name as the long command-line option; the command line
 * wins over the file. No OpenCL, no transport here. */
#ifndef CLGEMMA_FCGI_CONFIG_H
#define CLGEMMA_FCGI_CONFIG_H

#include <stddef.h>

#include "fetch.h"

#define CFG_MAX_WORKERS 16
#define CFG_STR 512
#define CFG_MAX_THREADS 1024

typedef struct server_config {
    char model[CFG_STR];          /* -m, --model: GGUF path */
    char model_id[128];           /* --model-id: name clients use; default: file name without .gguf */
    char devices[CFG_MAX_WORKERS][64]; /* --devices 0:0,0:1 -> one worker each ("" = engine default) */
    int  n_workers;
    char listen[CFG_MAX_WORKERS][CFG_STR]; /* --listen unix:PATH|HOST:PORT[,...]: one, or one per worker */
    int  n_listen;                /* 0: inherit the listening socket on fd 0 (spawn-fcgi) */
    int  ctx;                     /* --ctx: tokens per sequence, 0 = engine default */
    int  max_seqs;                /* --max-seqs: sequences decoded together per worker (0: as many as the
                                   * KV cache holds of 2048-token requests, at most 256 on a GPU) */
    int  max_queue;               /* --max-queue: sequences waiting for a slot; more -> 429 (-1: 4 per
                                   * sequence, at most 512) */
    int  queue_timeout;           /* --queue-timeout: seconds a request may wait for a slot and KV room,
                                   * then 503 (0: as long as it takes) */
    int  kv_tokens;               /* --kv-tokens: the KV cache's full-attention tokens (0: from the memory) */
    int  max_batch;               /* --max-batch: tokens per forward chunk, 0 = engine default */
    int  step_tokens;             /* --step-tokens: tokens per engine step, decode first, then prompt chunks
                                   * (0 = max-batch's) */
    int  prefix_cache;            /* --prefix-cache 0|1: prompts reuse the KV of cached prefixes (default 1) */
    int  kv_type;                 /* --kv-type f16|q8_0|q4: the KV cache's engine_kv_type (default f16) */
    int  spec;                    /* --spec off|ngram|mtp|auto: speculative decoding's drafts (spec_step.h's enum spec_mode) */
    char draft[CFG_STR];          /* --draft FILE: an MTP drafter (gemma4-assistant GGUF) beside the model ("": none) */
    int  draft_max;               /* --draft-max K: draft tokens a sequence feeds a step at most, 1..16 */
    char mmproj[CFG_STR];         /* --mmproj FILE: a vision projector (mmproj GGUF) beside the model ("": none) */
    int  image_tokens;            /* --image-tokens N: an image's soft tokens at most (70..1120; 0: 280) */
    int  image_attention;         /* --image-attention auto|causal|bidirectional (engine.h's ENGINE_IMAGE_ATTN_*) */
    int  max_images;              /* --max-images N: images and videos in one request at most (default 16) */
    int  image_cache_mb;          /* --image-cache-mb N: device memory for encoded images kept for reuse (0: 256) */
    fetch_rules image_urls;       /* --image-url-allow LIST (none: no URL fetched), --image-url-max-mb N (20),
                                   * --image-url-timeout S (10) */
    int  threads;                 /* --threads: request threads per worker (0: max-seqs + max-queue + 4) */
    int  drain_timeout;           /* --drain-timeout: seconds in-flight streams get after SIGTERM */
    int  request_timeout;         /* --request-timeout: seconds a generation may run, then "length" (0: none) */
    int  default_max_tokens;      /* --default-max-tokens: the cap of a request without max_tokens (0: the context) */
    long max_body;                /* --max-body: request body bytes; more -> 413 */
    int  socket_mode;             /* --socket-mode: octal permissions of unix sockets we create */
    char cache_dir[CFG_STR];      /* --cache-dir: OpenCL program cache ("" = engine default) */
    char stats_dir[CFG_STR];      /* --stats-dir: the pool's stats boards ("" = the unix socket's directory) */
    char protocol[16];            /* --protocol http|fastcgi: what nginx speaks to the workers */
    int  verbose;                 /* -v */
} server_config;

void config_defaults(server_config *c);
/* Parses argv (after --config FILE, if given, was read). Returns 0; 1 when --help was printed;
 * -1 with one line in err. */
int  config_parse_args(server_config *c, int argc, char **argv, char *err, size_t errlen);
/* Reads "key = value" lines ('#' comments) from path. Returns 0 or -1 with one line in err. */
int  config_load_file(server_config *c, const char *path, char *err, size_t errlen);
/* Checks ranges and fills derived values (model_id; with --max-seqs given, the queue and threads).
 * Returns 0 or -1 with one line in err. */
int  config_finish(server_config *c, char *err, size_t errlen);

/* what a worker runs with once its engine holds engine_seqs sequences */
typedef struct worker_sizes { int max_seqs, max_queue, threads; } worker_sizes;
/* --max-seqs or engine_seqs; --max-queue or 4 per sequence (at most 512); --threads or both + 4
 * (every waiting or running generation holds a request thread, and /health must still answer).
 * -1 with err when --threads is too few for them. */
int  config_sizes(const server_config *c, int engine_seqs, worker_sizes *out, char *err, size_t errlen);
void config_usage(const char *prog);

#endif
