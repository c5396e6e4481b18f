/* engine.h — the public API of the clgemma engine, used by the CLI and the FastCGI worker (which
 * include only opencl/include/: this, sampler.h, tokenizer.h, clock.h, synth_gguf.h).
 *
 * Batch-first: one engine_step() runs any mix of sequences, each appending one or more tokens
 * (a prefill chunk of one sequence and single decode tokens of many go through the same call).
 * An engine is single-threaded: one thread owns it (the worker's engine thread). */
#ifndef CLGEMMA_ENGINE_H
#define CLGEMMA_ENGINE_H

#include <stddef.h>
#include <stdint.h>
#include "sampler.h"
#include "tokenizer.h"

typedef struct engine engine;

/* Prints the OpenCL platforms and devices (what engine_opts.device names) on stdout; returns how
 * many devices there are. plain: one line a device, "P:D TYPE MEMORY_BYTES NAME" (TYPE GPU, CPU or
 * other), nothing else, for scripts (deploy/devices.sh). */
int engine_list_devices(int plain);

#define ENGINE_MAX_SETTINGS 32 /* engine_opts.n_settings at most */

/* The KV cache's element type (kv.c's table has a row per type). q8_0 and q4_0 are llama.cpp's
 * blocks of 32 values with one f16 scale each; a cache row holds its quants, then its scales. */
typedef enum engine_kv_type {
    ENGINE_KV_F16,   /* 2 bytes per value (the default) */
    ENGINE_KV_Q8_0,  /* 34 bytes per 32 values: 1.9x the tokens of f16 */
    ENGINE_KV_Q4_0,  /* 18 bytes per 32 values: 3.6x */
    ENGINE_KV_TYPES
} engine_kv_type;

/* "f16", "q8_0", "q4" (also "q4_0") to its type; -1 for any other name */
int engine_kv_type_parse(const char *name);
/* the type's name as engine_kv_type_parse reads it; "?" out of range */
const char *engine_kv_type_name(int type);

typedef struct engine_opts {
    const char *device;   /* "P:D" or NULL: env CLGEMMA_DEVICE, else first GPU, else first device */
    int n_ctx;            /* max tokens per sequence; 0 = min(model's, 8192) */
    int max_seqs;         /* sequences that may be live at once; 0 = as many as the KV cache holds of
                           * ENGINE_FIT_TYPICAL tokens each, at most 256 on a GPU and 4 elsewhere */
    int kv_tokens;        /* tokens the full-attention layers' cache holds, all sequences together (at
                           * least n_ctx); 0 = every sequence's whole context where the memory allows */
    int max_batch_tokens; /* tokens per forward chunk (longer steps are chunked); 0 = 2048 on a GPU with
                           * 16 GiB to spare after the weights, else 512 */
    const char *cache_dir;/* program-binary cache; NULL = $XDG_CACHE_HOME/clgemma or ~/.cache/clgemma */
    int verbose;          /* progress lines on stderr */
    int profile;          /* per-kernel timing through profiling events (slower; bench --profile) */
    /* measurement settings "NAME=VALUE" (clgemma bench --set; docs/PERF.md lists them): fields of
     * the ops policy (ops/policy.h) and two build / batch knobs, read while loading; an unknown name
     * or an out-of-range value fails the load. The server passes none. */
    const char *const *settings;
    int n_settings;
    int no_prefix_cache;  /* 1: engine_seq_new_prefix reuses nothing (every prompt computed whole) */
    int kv_type;          /* engine_kv_type of the KV cache (0: f16); quantized types need head dims
                           * in multiples of 32 */
    const char *draft_path; /* an MTP drafter (gemma4-assistant GGUF) loaded beside the model for
                           * engine_draft; NULL: none */
    const char *mmproj_path; /* a vision projector (mmproj GGUF, docs/design-vision.md) loaded beside the
                           * model; NULL: none */
    int image_tokens;     /* the largest budget of soft tokens an image may take (70, 140, 280, 560 or 1120;
                           * 0: 280): sizes the encoder's scratch; at most the forward chunk */
    int image_attention;  /* ENGINE_IMAGE_ATTN_*: how an image's tokens see each other in sliding layers */
    int image_cache_mb;   /* device memory for encoded images kept for reuse (0: 256) */
    int state_checkpoints; /* models with a recurrent state (hybrid: Qwen 3.5): how many sequences of a step may
                           * have a draft verification (2 .. 17 tokens, engine_item.draft) engine_seq_truncate can
                           * undo; each costs a sequence's state and 17 tokens' inputs of its recurrence (a fixed
                           * pool). 0: such models refuse to truncate */
    int state_snapshots;  /* models with a recurrent state: how many prefixes the prefix cache keeps the state at
                           * (a sequence's state each, least recently used evicted first); a prefix is reused only
                           * with its state. 0 (or no_prefix_cache): such models reuse no prefix */
} engine_opts;

/* engine_opts.image_attention. AUTO: bidirectional, but causal for the models with per-layer inputs
 * (Gemma 4 E2B / E4B), as llama.cpp's mtmd decides by their width */
enum { ENGINE_IMAGE_ATTN_AUTO, ENGINE_IMAGE_ATTN_CAUSAL, ENGINE_IMAGE_ATTN_BIDIR };

#define ENGINE_FIT_TYPICAL 2048 /* tokens of a typical request (prompt + max_tokens): what sizes max_seqs */

/* How a model fits a device: what the file needs (from its metadata alone) and what the engine
 * makes of the device's memory. engine_fit_file computes it before anything is loaded or allocated,
 * so it answers for a model too big for the device too; a loaded engine's engine_info.fit is the
 * one it allocated by the same rule. KV bytes are of the cache's element type (opts.kv_type). */
typedef struct engine_fit {
    char device[256];
    int is_gpu;
    uint64_t device_bytes;       /* the device's memory */
    uint64_t weight_bytes;       /* weights on the device */
    uint64_t host_weight_bytes;  /* weights kept in host memory (Gemma 4 per-layer token embeddings) */
    uint64_t kv_room;            /* what the KV cache may take: a third of the memory the weights leave */
    uint32_t n_layer, n_ctx, n_ctx_train, max_batch; /* n_ctx: the context per sequence asked for, or the default */
    uint32_t seq_chunk;          /* one sequence's tokens in one forward at most (a ring's room beyond its window) */
    /* K and V bytes per token by kind of layer, at this context */
    uint32_t full_layers;        /* full attention (and sliding ones whose ring would span the context) */
    uint32_t sliding_layers;     /* sliding window: a ring of ring_tokens per sequence at most */
    uint32_t shared_layers;      /* reading an earlier layer's cache: none of their own */
    uint32_t window;             /* the sliding layers' window in keys (the largest); 0: none */
    int kv_type;                 /* engine_kv_type the bytes below are of */
    uint64_t full_token_bytes;   /* one token in all full layers: every position of every sequence */
    uint64_t sliding_token_bytes;/* one token in all sliding layers' rings */
    uint32_t ring_tokens;        /* a ring holds the window and one forward chunk, in whole blocks; 0: none */
    uint64_t ring_seq_bytes;     /* the rings of one sequence */
    uint64_t state_seq_bytes;    /* the recurrent state of one sequence (hybrid models; 0: none) */
    /* what kv_room holds */
    uint64_t room_tokens;        /* full-layer tokens beside one sequence's rings: one sequence's most */
    uint32_t seqs_at_ctx;        /* sequences that may each reach the whole context */
    uint32_t seqs_typical;       /* sequences of ENGINE_FIT_TYPICAL tokens (or the context) each */
    /* the plan: what engine_load allocates */
    int fits;                    /* 0: why says what does not fit */
    char why[320];
    uint32_t n_seq;              /* sequences: max_seqs, else seqs_typical at most 256 (GPU) or 4 */
    uint32_t block_tokens;       /* tokens per KV block */
    uint32_t full_blocks, ring_blocks; /* the pools: what admission shares out */
    uint64_t kv_tokens;          /* full_blocks x block_tokens */
    uint64_t kv_bytes;           /* the pools' K and V */
    uint32_t rec_ctx, rec_seqs;  /* recommended --ctx and --max-seqs (0: nothing fits) */
} engine_fit;

/* The fit of a file on a device for opts (device, n_ctx, max_seqs, max_batch_tokens, kv_tokens),
 * from metadata and device facts only. Returns 0 (out->fits says whether it fits, out->why why not),
 * or -1 with err when the file cannot be read or there is no such device. */
int engine_fit_file(const char *path, const engine_opts *opts, engine_fit *out, char *err, size_t errlen);
/* The fit in one paragraph of words (the worker's start line); returns its length as snprintf does. */
int engine_fit_summary(const engine_fit *f, char *out, size_t cap);

typedef struct engine_info {
    char arch[32];        /* "gemma3", "gemma4" */
    char name[128];       /* general.name */
    char device[256];     /* device name */
    char platform[128];
    uint32_t n_vocab;
    uint32_t n_ctx;       /* effective context per sequence */
    uint32_t n_ctx_train;
    uint32_t n_layer, n_embd;
    uint64_t weight_bytes;   /* device memory held by weights */
    uint64_t device_bytes;   /* all device memory the engine allocated */
    uint64_t device_total;   /* CL_DEVICE_GLOBAL_MEM_SIZE */
    uint64_t host_weight_bytes; /* weights kept in host memory, a few rows read per step (Gemma 4
                              * E-models' per-layer token embeddings): device memory they save */
    uint64_t kv_bytes;       /* device memory of the KV cache (part of device_bytes) */
    uint64_t kv_bytes_per_token;    /* K and V of one token in the full-attention layers */
    uint64_t kv_ring_bytes_per_seq; /* fixed per sequence: the sliding-window layers' rings */
    uint32_t kv_ring_tokens;        /* tokens a ring holds (window + a forward chunk); 0: no ring */
    double load_seconds;
    char types[256];         /* weight types: "q4_k 302, q5_0 60 (ffn_down, ffn_down_exps), f32 423" */
    int tensor_cores;        /* batches above 4 tokens run on f16-input tensor-core kernels */
    int int8_decode;         /* decode steps (one token per sequence) of the int8 types' weights round X to
                              * int8 (mvq_T up to 4 sequences, mmq8_T up to 64, q4_k's mmq8p up to 256);
                              * prompts never do */
    engine_fit fit;          /* how it fits the device: fit.n_seq sequences, the KV pools' blocks */
    uint32_t max_rows;       /* output rows (tokens whose logits or choice are read) one forward holds: a step
                              * with more runs as several forwards */
    uint32_t draft_rows;     /* tokens a step of single tokens and drafts may hold and still run the int8
                              * decode products (ENGINE_DECODE_ROWS where int8_decode; 0: no such bound).
                              * Measured when the int8 products ended at 16 tokens (H200, 270M at 16
                              * sequences: one draft token each doubled the step); wider draft steps on
                              * today's int8 products are not measured yet */
    /* the MTP drafter (opts.draft_path): its architecture ("" without one), layers, width, weights */
    char draft_arch[32];
    uint32_t draft_layers, draft_embd;
    uint64_t draft_bytes;
    /* the vision projector (opts.mmproj_path): its type ("" without one), weights and encoder scratch */
    char vision_proj[16];
    uint64_t vision_bytes;
    uint32_t image_tokens;   /* the largest budget an image may take (opts.image_tokens); 0 without a projector */
    int image_bidir;         /* an image's tokens see each other in sliding layers (else causal) */
    /* the chat template's image tokens (-1: the vocabulary lacks it): begin, end, and the placeholder the
     * template writes where an image goes */
    int32_t boi_token, eoi_token, image_token;
    int state_checkpoints;   /* verifications per step a recurrent state can be cut back after (opts.state_checkpoints;
                              * 0: none, or no recurrent state) */
    int state_snapshots;     /* prefixes a recurrent state is kept at for the prefix cache (opts.state_snapshots) */
} engine_info;

#define ENGINE_DECODE_ROWS 16 /* draft_rows: see there */

/* Returns 0, or -1 with one line in err (no OpenCL device, bad file, unsupported model, OOM...). */
int  engine_load(engine **out, const char *path, const engine_opts *opts, char *err, size_t errlen);
/* A synthetic Gemma 4 of a real shape with random weights made on the device, for benchmarks:
 * model "gemma4-26b-a4b" | "gemma4-31b" | "gemma4-e4b" | "gemma4-e2b", type "q4_k" | "q8_0" | "bf16"
 * (see synth.h for the fallbacks); layers 0 = the real count (else fewer, for tests). Same
 * loader, forward and API as a file model, but without a tokenizer (engine_tokenizer is NULL):
 * feed token ids. info.name is "synthetic <model> <type>". */
int  engine_load_synthetic(engine **out, const char *model, const char *type, int layers, const engine_opts *opts,
                           char *err, size_t errlen);
void engine_destroy(engine *e);

const engine_info *engine_get_info(const engine *e);
const tokenizer   *engine_tokenizer(const engine *e);

/* Chat: the file's chat template applied to an OpenAI-style conversation, rendered natively as jinja2
 * renders it (opencl/chat.h: tokenizer.chat_template when clgemma knows the text, else the architecture
 * family's). messages: a json-c array of {role, content, tool_calls, ...}; tools: NULL or the `tools` array.
 * Returns the prompt's token count with *ids malloc'd (BOS first; control tokens only where the template
 * writes them, never from message text); -1 when the template refuses the conversation (a client error,
 * err says why); -2 on other failures (no tokenizer, out of memory). */
struct json_object;
typedef struct engine_chat_opts { int add_generation_prompt; int enable_thinking; } engine_chat_opts;
int engine_chat_encode(const engine *e, struct json_object *messages, struct json_object *tools,
                       const engine_chat_opts *o, int32_t **ids, char *err, size_t errlen);
/* the template in use: "gemma4", "gemma4-interleaved", "gemma4-31b", "gemma3" */
const char *engine_chat_template(const engine *e);
/* how the model's chat replies are written (a reply_syntax of chat_reply.h): REPLY_GEMMA4 for Gemma 4's
 * templates (thought channel, tool calls, tools declared to the model), REPLY_PLAIN otherwise */
int engine_chat_reply_syntax(const engine *e);
/* The same rendering as text, without BOS and thinking off, for plain role/content messages: writes a
 * NUL-terminated prompt; returns bytes needed (excluding NUL), -1 when refused or out of memory. */
typedef struct chat_msg { const char *role; const char *content; } chat_msg;
int engine_chat_prompt(const engine *e, const chat_msg *msgs, int n, int add_generation_prompt,
                       char *out, size_t cap);
/* 1 when id ends a generation for this model (eos, <end_of_turn>, ...) */
int engine_is_stop_token(const engine *e, int32_t id);

/* ---- one generation: the rules the server and the CLI share ---- */

/* The tokens a generation after a prompt of n_prompt tokens may produce: max_tokens, or what the
 * context leaves when max_tokens < 0 (not given). -1 when the prompt leaves no room (n_prompt >=
 * n_ctx); -2 when prompt + max_tokens is over the context (a caller that goes on anyway ends at the
 * context: engine_should_stop). err says which, in words fit for an API client. */
int engine_budget(const engine *e, int n_prompt, int max_tokens, char *err, size_t errlen);

/* How a generation goes on after a step chose token for seq, n_generated tokens having been output
 * before it: ENGINE_STOP_TOKEN, an end-of-generation token (not output: finish_reason "stop");
 * ENGINE_STOP_LENGTH, output it as the last one (max_tokens reached, or no room in the context to
 * feed it back: "length"); ENGINE_GO, output it and feed it back in the next step. */
typedef enum engine_stop { ENGINE_GO = 0, ENGINE_STOP_TOKEN, ENGINE_STOP_LENGTH } engine_stop;
engine_stop engine_should_stop(const engine *e, int seq, int32_t token, int n_generated, int max_tokens);

/* The KV blocks a prompt of n_prompt tokens and its n choices of up to max_tokens tokens each take
 * at most, per pool (forks share the prompt's whole blocks; a sliding-window ring is at most its size
 * per sequence). A scheduler that starts a prompt only when this fits the blocks of info.fit not yet
 * promised to running ones never finds the cache full. Any thread: it reads nothing that changes. */
typedef struct engine_kv_blocks { uint32_t full, ring; } engine_kv_blocks;
void engine_kv_need(const engine *e, int n_prompt, int max_tokens, int n, engine_kv_blocks *out);

/* Sequences: a slot in the paged KV cache. -1 when all max_seqs slots are in use. */
int  engine_seq_new(engine *e);
void engine_seq_free(engine *e, int seq);      /* releases its KV blocks */
/* A new sequence whose KV cache holds what src's does (engine_seq_len equal), for several
 * continuations of one prompt prefilled once. The two share src's blocks; a step that writes into
 * a shared block first gives its sequence a copy of it (the device copies it before the forward),
 * so a fork costs no device work and no memory until the sequences diverge. Which sampler sees
 * which tokens is the caller's: a fork's sampler has seen nothing. -1 when all max_seqs slots are
 * in use or src is not a live sequence. */
int  engine_seq_fork(engine *e, int src);
int  engine_seq_len(const engine *e, int seq);   /* tokens in its KV cache */
/* Speculative decoding's rollback: seq's cache cut back to its first len tokens (len < engine_seq_len),
 * tokens[0, len) being them, as if the rest had never been stepped (drafts the target rejected). At most
 * the sliding-window rings' spare may go at once (fit_seq_chunk tokens: far more than a draft). A model with
 * a recurrent state goes back only within seq's last step, before the next one, when that step was
 * one of info.state_checkpoints drafts (2 .. 17 tokens, engine_item.draft or ids_all) it could keep the state
 * before. 0, or -1 with err (nothing changed). */
int  engine_seq_truncate(engine *e, int seq, int len, const int32_t *tokens, char *err, size_t errlen);
/* Automatic prefix caching: every whole KV block a step writes (engine_kv_stats.block_tokens tokens)
 * stays registered under the tokens from position 0 through it, after its sequence is freed too,
 * until the pool needs the block (least recently released first). A new sequence that already holds
 * the longest such prefix of tokens[0, n) that leaves the last token out (whole blocks, each layer's
 * every key a later query reads: for sliding-window layers the window before the prefix's end), so
 * the caller steps only tokens[*cached, n) and gets the last token's logits as a cold prefill would
 * give them; it is engine_seq_new when nothing is registered (or opts.no_prefix_cache). The caller's
 * sampler has not seen tokens[0, *cached). -1 when all max_seqs slots are in use. */
int  engine_seq_new_prefix(engine *e, const int32_t *tokens, int n, int *cached);

/* The paged KV cache's blocks now, per pool: the full-attention layers' blocks (shared by all
 * sequences as they grow) and the sliding-window layers' ring blocks (0 blocks: no such pool).
 * Free blocks are those a sequence may take: unused, or held only by the prefix cache (cached,
 * evicted when taken). Call from the thread that owns the engine (it reads the pools' free lists). */
typedef struct engine_kv_stats {
    uint32_t full_blocks, full_free, full_cached;
    uint32_t ring_blocks, ring_free, ring_cached;
    uint32_t block_tokens;   /* tokens one block holds */
} engine_kv_stats;
void engine_kv_usage(const engine *e, engine_kv_stats *out);

#define ENGINE_MAX_BIAS 300                       /* engine_item.n_bias at most (OpenAI's limit) */
#define ENGINE_MAX_LOGPROBS SAMPLER_MAX_LOGPROBS  /* engine_item.n_logprobs at most: 20 */
typedef struct engine_bias { int32_t token; float bias; } engine_bias;
typedef sampler_logprobs engine_logprobs;          /* {chosen, top_id[20], top_lp[20], n_top}: sampler.h */

/* ---- images (opts.mmproj_path; docs/design-vision.md) ---- */

/* An image decoded and prepared as the model's processor does, with its content digest. */
typedef struct engine_image engine_image;
/* bytes (JPEG, PNG, WebP or GIF, told by their magic bytes, never by a declared type) decoded and
 * prepared for a budget of max_tokens soft tokens (70, 140, 280, 560, 1120 up to info.image_tokens;
 * 0: info.image_tokens). Any thread: it reads only what the load fixed. NULL with one line in err:
 * the client's error (a corrupt, hostile or too large image, a bad budget, no vision projector). */
engine_image *engine_image_prepare(const engine *e, const void *bytes, size_t n, int max_tokens, char *err,
                                   size_t errlen);
/* the same from pixels already decoded (a video's frame, video.h): h rows of w RGB8 pixels, read only; the
 * digest is of the same things, so a frame and the same picture sent as an image share their rows */
engine_image *engine_image_prepare_rgb(const engine *e, const uint8_t *rgb, int w, int h, int max_tokens, char *err,
                                       size_t errlen);
void engine_image_destroy(engine_image *im);
/* the positions it takes in a prompt (its soft tokens; boi / eoi around it are the caller's) */
int engine_image_tokens(const engine_image *im);
/* the prompt id of its soft token j: negative, from its digest (SHA-256 of the budget, size and
 * pixels), so the prefix cache reuses an image's KV for the same picture only */
int32_t engine_image_token(const engine_image *im, int j);
/* Engine thread: encodes those of the n images whose rows the engine does not hold yet, and pins
 * each once (their rows stay until as many engine_image_release); what may step them. 0, or -1 with
 * err (nothing pinned). */
int engine_image_encode(engine *e, engine_image *const *ims, int n, char *err, size_t errlen);
void engine_image_release(engine *e, const engine_image *im);
/* Engine thread: returns once the device has done the encodes enqueued so far (engine_image_encode returns when
 * they are enqueued; a step after them waits on its own): what times an encode alone (clgemma vbench). 0, or -1
 * with err (a device error) */
int engine_image_wait(engine *e, char *err, size_t errlen);
/* encoded images held (pinned or kept for reuse), their device bytes, and encodes run / found held */
typedef struct engine_image_stats { uint32_t held, pinned; uint64_t bytes, encodes, hits; } engine_image_stats;
void engine_image_usage(const engine *e, engine_image_stats *out);

/* where an item's tokens are an image's: tokens[offset, offset + n) are soft tokens first .. first + n - 1
 * of image (engine_image_token ids), which end the image (first + n = its tokens: a prefix-cache hit may
 * start inside an image, a prompt never ends inside one). Pinned by engine_image_encode. */
typedef struct engine_span { int offset, n, first; const engine_image *image; } engine_span;

typedef struct engine_item {
    int seq;                 /* from engine_seq_new */
    const int32_t *tokens;   /* appended at the sequence's current end */
    int n_tokens;            /* >= 1; may exceed max_batch_tokens (the engine chunks it) */
    sampler *smp;            /* NULL: no token chosen; else the sampler sees tokens (its penalties
                                count them), then token_out gets the next token */
    float *logits;           /* NULL, or receives n_vocab floats of the last token's logits
                                (n_tokens * n_vocab when logits_all); the chosen row after allow and bias */
    int logits_all;
    int32_t token_out;       /* output */
    int32_t *ids_all;        /* NULL, or n_tokens entries: the greedy choice after every token of the item
                                (draft verification; a greedy sampler, no allow, bias or logprobs); the
                                last is token_out */
    int draft;               /* 1: tokens after the first are a draft being verified (ids_all implies it): a
                                step of drafts and single tokens keeps decode's precision (int8 activations
                                on GPUs), so its rows are those decoding a token a step gives */
    /* Constraints on the choice (smp set; zeroed: none). They apply on the device to the row the
     * token is chosen from, before the choice: greedy rows are still argmaxed there, other rows
     * download the processed row, to which the sampler adds its penalties. Rows of logits_all
     * before the last token are left raw. */
    const uint32_t *allow;   /* NULL, or n_vocab bits (bit i of word i/32): only these tokens may be
                                chosen (structured output); the others get -inf, whatever their bias.
                                At least one must be allowed. */
    const engine_bias *bias; /* logit_bias: added to the logits (any finite value; +100 / -100 force /
                                ban a token as OpenAI's do); a token listed twice gets both */
    int n_bias;              /* 0..ENGINE_MAX_BIAS */
    int n_logprobs;          /* 0: none; 1..ENGINE_MAX_LOGPROBS: fill *lp */
    engine_logprobs *lp;     /* out: log-softmax of the distribution the token was drawn from: the
                                logits after allow, bias and penalties, divided by the temperature
                                (greedy: 1), before top-k / top-p / min-p cut it (as vLLM reports);
                                the chosen token's and the n_logprobs best (masked tokens never listed).
                                Greedy rows compute it on the device (only the n best travel back),
                                others on the host from the row the sampler drew from. */
    const engine_span *spans;/* the item's image tokens, in order, not overlapping (NULL: none); the
                                rows of an image are computed in one forward (it is never cut) */
    int n_spans;
} engine_item;

/* Runs one step over n items (distinct sequences). An item's sampler is fed the item's tokens
 * (sampler_accept) just before it chooses, so a sequence that always steps with the same sampler has
 * had its whole prompt and every token fed back counted once, the chosen token when it is fed back.
 * Items without allow, bias or logprobs cost no extra launch or transfer.
 * Returns 0, ENGINE_KV_FULL when the KV cache has no free block for an item, or -1; either failure
 * with one line in err. Fails when a sequence would exceed n_ctx; then, as on any error found before
 * the forward (bad item, KV cache full), nothing changes. A device error later changes no sequence's
 * KV state, but samplers that already chose have seen their tokens. */
#define ENGINE_KV_FULL (-2)
int engine_step(engine *e, engine_item *items, int n, char *err, size_t errlen);

/* MTP drafting (opts.draft_path): up to k greedy draft tokens per sequence, continuing from token (the
 * target's choice after the sequence's cache, not yet stepped) at the position it takes. The drafter reads the
 * target's cache and its normed hidden state of the cache's last position, which the engine keeps from the
 * step that computed it (one of its last ENGINE_DRAFT_KEEP output rows). A sequence without that row (new,
 * forked, cut back before its last step) drafts nothing (n = 0). Writes no cache: nothing to roll back.
 * 0, or -1 with err (no drafter, a bad item, a device error). */
#define ENGINE_DRAFT_KEEP 17 /* rows of a step kept per sequence: a verification of 16 drafts */
typedef struct engine_draft_item {
    int seq;
    int32_t token;
    int k;                   /* 1..16 */
    int32_t *out;            /* k entries */
    int n;                   /* out: tokens drafted (k, or 0 without the hidden row) */
    float *logits;           /* NULL, or k * n_vocab floats: each draft step's logits (tests) */
} engine_draft_item;
int engine_draft(engine *e, engine_draft_item *items, int n, char *err, size_t errlen);

/* Per-kernel profile (bench --profile): needs an engine loaded with opts.profile. engine_profile_reset
 * starts the count afresh; engine_profile_print writes the tables of time, launches, GB/s and TFLOP/s per op
 * and per launch shape, and how the wall divides, to stderr. */
void engine_profile_reset(engine *e);
void engine_profile_print(engine *e, double wall_ms, int steps);
/* seconds spent so far enqueuing steps (host side, before waiting for the sampled ids): set against
 * wall time it tells whether decode waits on the GPU or on launches */
double engine_enqueue_seconds(const engine *e);
/* bench --hold: each forward's launches wait behind a gate opened once they are all enqueued, so
 * engine_device_seconds sums the device's time for them with the host out of the way (what faster
 * launching could reach); on steps then cost enqueue plus device time */
void engine_hold_steps(engine *e, int on);
double engine_device_seconds(const engine *e);

#endif
