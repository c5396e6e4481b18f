/* model.h — weights and forward pass of one architecture, over a batch of tokens that belong
 * to any mix of sequences. The engine owns batching, the KV cache and sampling. Architectures are
 * rows of one table (registry.c): a new one is its own file plus a row; nothing here names one. */
#ifndef CLGEMMA_MODEL_H
#define CLGEMMA_MODEL_H

#include "chat.h"
#include "gguf.h"
#include "ops.h"
#include "kv.h"
#include "upload.h"

typedef struct model_hparams {
    char arch[32];
    uint32_t n_layer, n_embd, n_head, n_kv, head_dim, n_ff, n_vocab, n_ctx_train;
    float eps;
    float rope_base_global, rope_base_local, rope_scale_global;
    uint32_t window;          /* sliding window on local layers */
    float attn_scale;
    float final_softcap;      /* 0 = none */
    float attn_softcap;       /* 0 = none */
    float embd_scale;         /* sqrt(n_embd) */
    uint32_t n_embd_per_layer;/* per-layer input width (Gemma 4 E-models); 0: none */
} model_hparams;

typedef struct layer_weights {
    weight q, k, v, o, gate, up, down;
    cl_mem attn_norm, q_norm, k_norm, post_attn_norm, ffn_norm, post_ffw_norm;
    int is_swa;               /* sliding-window (local) layer */
} layer_weights;

struct model_arch;

typedef struct model {
    const struct model_arch *arch;
    void *priv;               /* the architecture's own state: made by its load, freed by its unload */
    model_hparams hp;         /* where layers differ in shape: the largest of each */
    layer_weights *layers;    /* architectures whose layers all have these weights (else NULL) */
    uint32_t *kv_dims;        /* per layer n_kv*head_dim of its KV cache (0 = none); NULL = uniform */
    uint32_t *state_floats;   /* per layer floats of one sequence's recurrent state (0 = none); NULL = none */
    uint32_t *replay_floats;  /* per layer floats of one token's replay row (state.h's checkpoints) beside it */
    weight tok_embd, output;  /* output == tok_embd when tied */
    cl_mem output_norm;
    cl_mem freq_local, freq_global; /* RoPE frequency per rotated pair */
    uint64_t weight_bytes;    /* device memory of the weights */
    uint64_t host_bytes;      /* weights kept in host memory, a few rows read per step */
    size_t max_weight_elems;  /* largest layer matrix (GEMM scratch sizing) */
} model;

/* device buffers for one forward over up to max_tok tokens */
typedef struct fwd_bufs {
    const struct model_arch *arch; /* whose bufs functions made (and release) ext */
    uint32_t max_tok, max_out;
    cl_mem ids, pos, seq, out_rows;
    cl_mem hi;                /* per token the last key it sees in sliding layers (fwd_args.hi) */
    resid x;                  /* the residual stream: x.cur holds it; x.spare, of its size, takes the
                               * normed inputs of products (ops that write the new stream there flip x) */
    cl_mem q, k, v, att, o, g, u;
    cl_mem xo, logits, argmax;
    cl_mem part_acc, part_ml, part_cnt; /* split-KV attention partials and their counters */
    size_t part_elems;        /* floats in part_acc */
    cl_mem ext[20];           /* architecture-specific scratch (the row's bufs_create / bufs_destroy) */
} fwd_bufs;

/* one forward: tokens already uploaded to b->ids/pos/seq; for the n_out rows listed in
 * b->out_rows (device), logits land in b->logits [n_out][n_vocab] (n_out <= b->max_out).
 * max_pos: the largest position in the batch (sizes the attention split). */
/* rows that take the place of token embeddings (an image's soft tokens, unscaled): the batch's rows
 * [dst, dst + n) are src's rows [src_row, src_row + n) */
typedef struct fwd_rows { cl_mem src; uint32_t src_row, dst, n; } fwd_rows;

typedef struct fwd_args {
    uint32_t ntok, n_out;
    uint32_t max_pos;
    const int32_t *seq;       /* host copy of the tokens' sequences (NULL: unknown) */
    const int32_t *ids;       /* host copy of the token ids (tables kept on the host read their rows; an image
                               * token's is 0, the pad row, as transformers looks it up) */
    const int32_t *pos;       /* host copy of the positions (recurrent layers cut the batch into runs; NULL: unknown) */
    const fwd_rows *rows;     /* n_rows runs of given rows (NULL: none) */
    uint32_t n_rows;
    int hi;                   /* b->hi holds each token's last visible key in sliding layers (an image's
                               * tokens see the whole image); 0: causal */
    uint32_t hi_extra;        /* the most a token's last key exceeds its position */
} fwd_args;

/* contents of the tensors a file has no data for (gguf_open_virtual), supplied by whoever made the
 * file: the engine's synthetic models. Without a maker such a tensor is an error. */
typedef struct tensor_maker {
    int (*fill)(cl_runtime *rt, cl_mem m, const gguf_tensor *t, char *err, size_t errlen); /* on the device */
    gguf_bytes_fn bytes;      /* the same bytes on the host (tables kept in host memory) */
} tensor_maker;

/* what an architecture's loader reads: the file, the device, the maker of missing contents (or NULL),
 * the uploader of the file's tensors (NULL: each buffer is made from the mapping itself) */
typedef struct model_src {
    const gguf_file *f;
    cl_runtime *rt;
    const tensor_maker *make;
    uploader *up;
} model_src;

/* A file's KV cache shape from its metadata alone (no weights, no device): per layer the width of
 * its own K (and V) cache per token, n_kv x head_dim (0: it reads another layer's), and its
 * sliding window in keys (0: full attention). What sizing and `clgemma info` start from. */
typedef struct model_kv_layout {
    uint32_t n_layer, n_ctx_train;
    uint32_t *dims, *window;
    uint32_t *state;          /* per layer floats of one sequence's recurrent state (0: none) */
    uint32_t *replay;         /* per layer floats of one token's replay row for its checkpoints (0: none) */
} model_kv_layout;

/* ---- the architecture table (registry.c) --------------------------------------------------- */

/* what each row points at; a loader fills m (m->arch and hp.arch are set, the rest zero) and on
 * failure leaves what it made for unload; unload frees priv and the layers, model_free the rest */
typedef int  model_load_fn(model *m, const model_src *src, char *err, size_t errlen);
typedef void model_unload_fn(model *m);
typedef int  model_bufs_create_fn(fwd_bufs *b, const model *m, cl_runtime *rt, char *err, size_t errlen);
typedef void model_bufs_destroy_fn(fwd_bufs *b);
typedef uint32_t model_layer_window_fn(const model *m, uint32_t l);
typedef int  model_forward_fn(const model *m, ops *o, fwd_bufs *b, kv_cache *kv, const fwd_args *a, char *err,
                              size_t errlen);
typedef int  model_kv_layout_fn(const gguf_file *f, model_kv_layout *out, char *err, size_t errlen);
/* Recurrent models: sequence seq's state (just restored to its checkpoint, state_restore) carried over its first
 * n tokens again from the replay rows the checkpointed step's forward kept: the rollback of rejected drafts.
 * Writes the state only (no cache, no logits). */
typedef int  model_replay_fn(const model *m, ops *o, fwd_bufs *b, kv_cache *kv, int seq, uint32_t n, char *err,
                             size_t errlen);

/* The cache a drafter reads from its target, per kind of layer: the cache the target's last layer of that
 * kind reads (its own or, KV-shared, another's) and that cache's shape. */
typedef struct model_kv_ref {
    int32_t layer;            /* the target layer owning the cache (kv_layer_k / kv_layer_v); -1: no such kind */
    uint32_t n_kv, head_dim;  /* K and V heads, their width */
    uint32_t rot;             /* rotated dims of K */
    float theta;              /* RoPE base of K */
    uint32_t window;          /* sliding window in keys (0: full attention) */
} model_kv_ref;
enum { MODEL_KV_FULL, MODEL_KV_SLIDING, MODEL_KV_KINDS };
typedef void model_kv_export_fn(const model *m, model_kv_ref out[MODEL_KV_KINDS]);
/* a loaded drafter against the loaded target it reads: 0, or -1 with what does not match */
typedef int  model_pair_check_fn(const model *drafter, const model *target, char *err, size_t errlen);
/* One drafter step over a->ntok rows, one per sequence (b from fwd_bufs_create for the drafter): each row's
 * token (b->ids) at the position it takes (b->pos: its sequence's length p, the target's cache holding
 * 0 .. p - 1; ext[FWD_DRAFT_PREV] holds p - 1) with its target-width row (ext[FWD_DRAFT_H]: the target's
 * normed hidden state of position p - 1, or the step before's). Leaves the row's logits in b->logits, its
 * greedy next token in b->ids and the next step's row in ext[FWD_DRAFT_H]; writes no cache. */
typedef int  model_draft_fn(const model *drafter, const model *target, ops *o, fwd_bufs *b, kv_cache *kv,
                            const fwd_args *a, char *err, size_t errlen);
enum { FWD_DRAFT_PREV, FWD_DRAFT_H }; /* a drafter's fwd_bufs.ext that its caller fills */

typedef struct model_arch {
    const char *name;                     /* general.architecture */
    chat_family chat;                     /* the family of its chat templates */
    const char *const *stop_texts;        /* end-of-turn token texts beyond eos/eot, NULL-terminated */
    const char *const *host_tensors;      /* tensors kept in host memory, not uploaded (NULL: none) */
    model_load_fn *load;
    model_unload_fn *unload;
    model_bufs_create_fn *bufs_create;    /* its scratch in fwd_bufs.ext (NULL: none) */
    model_bufs_destroy_fn *bufs_destroy;
    model_layer_window_fn *layer_window;  /* layer l's sliding window in keys (0: full attention) */
    model_forward_fn *forward;
    model_kv_layout_fn *kv_layout;        /* the KV shape from the keys alone (model_kv_layout_read) */
    model_kv_export_fn *kv_export;        /* the cache a drafter of it reads (NULL: none drafts for it) */
    model_replay_fn *replay;              /* models with recurrent state (NULL: none) */
    /* drafters (MTP heads that read another model's cache): the architecture of the models they draft for;
     * loaded only beside one (model_load_drafter), their row has no forward of the target kind */
    const char *drafts_for;
    model_pair_check_fn *pair_check;
    model_draft_fn *draft;
} model_arch;

/* the row of an architecture name (len bytes, not NUL-terminated), or NULL */
const model_arch *model_arch_find(const char *name, size_t len);
/* the row of a file's general.architecture; -1 with "unsupported architecture '...' (supported: ...)"
 * or "no general.architecture key" in err */
int  model_arch_of(const gguf_file *f, const model_arch **out, char *err, size_t errlen);
/* the supported names in table order, comma-separated (as error messages list them) */
void model_arch_names(char *out, size_t cap);

/* ---- a model (model.c: the calls go to its row) -------------------------------------------- */

/* make: the maker of tensors f has no data for (NULL: f has all its data) */
int  model_load(model *m, const gguf_file *f, cl_runtime *rt, const tensor_maker *make, char *err, size_t errlen);
/* a drafter file beside target (loaded): the drafter row's load, then its pair check; -1 with err when f is
 * not a drafter, drafts for another architecture or does not fit target's cache, embedding or vocabulary */
int  model_load_drafter(model *d, const gguf_file *f, const model *target, cl_runtime *rt, char *err,
                        size_t errlen);
/* device memory a file's weights need: every tensor but those the loader keeps in host memory;
 * *largest: the largest of those tensors (NULL if none) */
uint64_t model_device_bytes(const gguf_file *f, const gguf_tensor **largest);
/* out's arrays for n layers (zeroed); -1 with err out of memory */
int  model_kv_layout_alloc(model_kv_layout *out, uint32_t n_layer, char *err, size_t errlen);
/* the KV shape of a file through its architecture's row; free it with model_kv_layout_free */
int  model_kv_layout_read(const gguf_file *f, model_kv_layout *out, char *err, size_t errlen);
void model_kv_layout_free(model_kv_layout *l);
/* the sliding window of layer l's attention in keys (0: full attention) */
uint32_t model_layer_window(const model *m, uint32_t l);
void model_free(model *m);
int  fwd_bufs_create(fwd_bufs *b, const model *m, cl_runtime *rt, uint32_t max_tok, uint32_t max_out,
                     uint32_t n_ctx, char *err, size_t errlen);
void fwd_bufs_destroy(fwd_bufs *b);
/* runs layers over the batch (writes KV) and computes logits for the out rows */
int  model_forward(const model *m, ops *o, fwd_bufs *b, kv_cache *kv, const fwd_args *a, char *err, size_t errlen);
/* the row's replay (model_replay_fn); -1 with err for a row without one */
int  model_replay(const model *m, ops *o, fwd_bufs *b, kv_cache *kv, int seq, uint32_t n, char *err, size_t errlen);

#endif
