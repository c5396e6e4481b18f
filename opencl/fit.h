/* fit.h — how the engine sizes itself to a device, one rule for engine_load and engine_fit_file:
 * the context and forward chunk when not given, the memory the KV cache may take, its pools'
 * blocks and (when not given) the number of sequences, and the fit report's figures. No OpenCL
 * calls here: the report is computed before anything is loaded. */
#ifndef CLGEMMA_FIT_H
#define CLGEMMA_FIT_H

#include "engine.h"
#include "gguf.h"
#include "kv.h"

#define FIT_SEQS_GPU 256    /* sized sequences at most on a GPU */
#define FIT_SEQS_OTHER 4    /* ... on other devices: a CPU gains little from wide batches */

/* the device facts sizing reads */
typedef struct fit_device {
    int is_gpu;
    uint64_t global_mem, max_alloc;
} fit_device;

/* opts->n_ctx, else the model's at most 8192; never past the model's */
uint32_t fit_ctx(const engine_opts *opts, uint32_t n_ctx_train);
/* opts->max_batch_tokens, else 2048 on a GPU with 16 GiB to spare after the weights, else 512 */
uint32_t fit_max_batch(const engine_opts *opts, const fit_device *d, uint64_t weight_bytes);
/* One sequence's tokens in one forward at most. A sliding-window ring holds its window and this many
 * more: the whole forward (max_batch) where c names its sequences (c->n_seq > 0) and their rings at that
 * size take at most a quarter of room (a prompt then runs in forwards of max_batch: 26B-A4B's prefill of
 * 2,048 tokens 7,595 -> 14k tok/s on the H200); else min(max_batch, FIT_SEQ_CHUNK), which keeps the rings
 * (most of a Gemma 4's KV per sequence) small when memory is shared out among many sequences, a step's
 * budget going to several prompts' chunks instead. c->max_chunk is ignored. */
#define FIT_SEQ_CHUNK 512
#define FIT_RING_SHARE 4 /* rings of whole forwards may take 1/this of the room */
uint32_t fit_seq_chunk(const kv_config *c, uint32_t max_batch, uint64_t room);
/* -1 with err when the weights cannot live on the device: more than its memory, or largest (the
 * largest tensor, or NULL) over one buffer; refused early, with numbers, rather than half-way */
int fit_weights(const char *device_name, const fit_device *d, uint64_t weight_bytes, const gguf_tensor *largest,
                char *err, size_t errlen);
/* what the KV cache may take: a third of the memory the weights leave (forward buffers, scratch and
 * the driver's own need the rest) */
uint64_t fit_kv_room(const fit_device *d, uint64_t weight_bytes);

typedef struct kv_fit_in {
    kv_config c;            /* c.n_seq 0: sized from the room, ENGINE_FIT_TYPICAL tokens each */
    uint64_t room;          /* bytes the cache may take */
    uint64_t max_alloc;     /* one buffer (a layer's K or V) at most */
    uint32_t kv_tokens;     /* the full-attention pool in tokens; 0: as the room allows */
    uint32_t seq_cap;       /* sized sequences at most */
    uint32_t max_batch;     /* tokens of one forward (c.max_chunk: of one sequence in it) */
} kv_fit_in;

typedef struct kv_fit_plan {
    kv_sizes s;
    uint32_t n_seq;
    uint32_t blocks[KV_POOLS];
    uint64_t bytes;         /* the pools' K and V */
} kv_fit_plan;

/* Rings first (each sequence's is what lets it run at all: every sequence gets one where that
 * leaves room for one whole context in the full-attention layers, else as many as do), then the
 * full-attention blocks (every sequence may reach n_ctx where they fit, one whole context at least;
 * kv_tokens when given). Returns 0, or -1 with err saying in numbers what does not fit. */
int kv_fit(const kv_fit_in *in, kv_fit_plan *out, char *err, size_t errlen);

/* The report of a plan: every figure of engine_fit but the device's and the weights', which the
 * caller sets. err_plan: why nothing fits (kv_fit's error, or the weights'), or NULL when p is the
 * plan made; weights_fit: 0 when the weights alone do not fit (nothing is recommended then). */
void fit_report(engine_fit *f, const kv_fit_in *in, const kv_fit_plan *p, const char *err_plan, int weights_fit);

#endif
