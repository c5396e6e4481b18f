/* kv.h — paged KV cache: per layer a pool of fixed-size blocks on the device (of the cache's type:
 * f16, or q8_0 / q4_0 rows, kv_types),
 * and per sequence a table of the blocks holding its positions. Every attention kernel finds
 * position p of a sequence in table entry p / KV_BLOCK; the cache decides what those entries are:
 *   full-attention layers: blocks handed out on demand as a sequence grows, returned when it is
 *     freed (one pool and table shared by those layers);
 *   sliding-window layers: a ring of kv_ring_blocks() blocks per sequence at most, entry b being
 *     ring block b % ring, so keys older than the window share their block with newer ones and a
 *     long context costs these layers a fixed amount per sequence (their own pool).
 * The ring holds the window plus one forward chunk of a sequence (a chunk writes all its keys
 * before its attention runs), rounded up to whole blocks. Layers that read another
 * layer's cache (Gemma 4 KV sharing) own none and follow their donor.
 * A fork shares its source's blocks (a count per block); a sequence about to write into a block
 * it shares gets its own copy first (copy on write: kv_reserve picks the block, kv_sync copies).
 *
 * Prefix cache (kv_prefix_on): every whole block a sequence writes is registered, as the
 * forward chunk that completes it is enqueued, in a table (prefix.h) under the hash chain of its
 * tokens from position 0, in both pools; the table holds one count of it, so the block outlives the
 * sequence. kv_seq_new_prefix starts a sequence on the longest registered prefix of its prompt
 * (whole blocks, the last prompt token left to compute), sharing those blocks as a fork shares its
 * source's: all of the prefix's full-layer blocks, and the ring blocks of its last window (kv.c
 * says why that is enough). Blocks only the table holds are evicted least recently released first
 * whenever a pool has no free block; an allocation fails only when no block is free or evictable. */
#ifndef CLGEMMA_KV_H
#define CLGEMMA_KV_H

#include "engine.h"
#include "prefix.h"
#include "runtime.h"
#include "state.h"

#define KV_BLOCK 32
#define KV_QK 32 /* values per quant block of a cache row (llama.cpp's QK8_0, QK4_0) */

/* One row per engine_kv_type. A cache row (one token, one KV head: head_dim values) is, for a
 * quantized type, its head_dim / 32 blocks' quants (32 bytes each for q8_0, 16 for q4_0, nibbles
 * as llama.cpp packs them: value j low, j + 16 high) followed by their f16 scales, so rows keep the
 * f16 cache's addressing with a row size in bytes and the quants of 4 values are one 4-byte load. */
typedef struct kv_type_row {
    const char *name;
    uint32_t block_bytes;     /* bytes of KV_QK values: quants and scale (f16: 64) */
    const char *build;        /* the kernels' build option (kernels/kv.cl reads CLG_KV) */
} kv_type_row;

extern const kv_type_row kv_types[ENGINE_KV_TYPES];

/* bytes of n values of a K or V row of type (n a multiple of KV_QK when quantized) */
static inline uint64_t kv_bytes(int type, uint64_t n) { return n * kv_types[type].block_bytes / KV_QK; }

typedef struct kv_view {       /* where one layer's K or V cache lives and how it is paged */
    cl_mem cache;
    cl_mem block_table;
    uint32_t max_blocks, block_size;
    int type;                  /* engine_kv_type of its rows (the program's CLG_KV) */
} kv_view;

typedef struct kv_config {
    uint32_t n_layer;
    const uint32_t *dims;     /* per layer n_kv * head_dim of its own cache (0: reads another layer's) */
    const uint32_t *window;   /* per layer sliding window in keys (0: full attention); NULL: all full */
    uint32_t n_seq, n_ctx;
    uint32_t max_chunk;       /* tokens of one sequence in one forward chunk at most */
    int type;                 /* engine_kv_type of K and V */
    const uint32_t *state;    /* per layer floats of one sequence's recurrent state (0: none); NULL: none */
    const uint32_t *state_rows; /* per layer floats of a token's replay row (state.h's checkpoints; NULL: none) */
    uint32_t state_ck;        /* checkpoints: sequences whose step can be cut back, per step (0: none) */
    uint32_t state_snaps;     /* snapshots of the state for the prefix cache (0: none: no prefix reuse) */
} kv_config;

/* what a config costs: K and V bytes per token of the full layers (all of them together), and
 * per sequence the ring blocks and bytes of the sliding layers */
typedef struct kv_sizes {
    uint64_t full_per_token;
    uint64_t ring_per_seq;
    uint32_t ring_blocks;     /* 0: no sliding layer keeps a ring */
    uint32_t full_dim_max, ring_dim_max; /* the widest layer of each pool (its buffers are the largest) */
    uint32_t full_layers, ring_layers;   /* layers with a cache of their own in each pool */
    uint32_t ring_window;     /* the widest window of the ring layers */
    uint64_t state_per_seq;   /* bytes of one sequence's recurrent state (state.h; 0: none) */
    uint64_t state_ck_bytes;  /* bytes of all the state's checkpoints (0: none) */
    uint64_t state_snap_bytes;/* bytes of all the state's snapshots (0: none) */
} kv_sizes;

enum { KV_FULL, KV_RING, KV_POOLS };

/* the blocks and tables of one kind of layer */
typedef struct kv_pool {
    uint32_t n_blocks;
    uint32_t ring;            /* blocks per sequence at most, table entry b = entry b % ring (0: grows) */
    cl_mem block_table;       /* [n_seq][max_blocks] int (NULL: no layer uses this pool) */
    int32_t *table;           /* host copy */
    uint32_t *seq_blocks;     /* table entries in use per sequence */
    int32_t *free_list;
    uint32_t n_free;
    uint32_t *refs;           /* per block: the sequences holding it (a ring's aliases count once), + 1
                               * while the prefix table does */
    int32_t *cached;          /* per block: the prefix entry naming its contents, -1: none */
    int32_t *lru_prev, *lru_next; /* the blocks only the prefix table holds, least recently released first */
    int32_t lru_head, lru_tail;
    uint32_t n_lru;
    uint32_t dirty_lo, dirty_hi; /* sequences whose rows changed since the last upload: [lo, hi) */
} kv_pool;

/* a block's contents to copy into a sequence's own new block before the next forward */
typedef struct kv_copy { int32_t pool, src, dst; } kv_copy;
/* a block a step registered under a prefix entry (kv_abort takes it back) */
typedef struct kv_reg { int32_t pool, block, entry; } kv_reg;

typedef struct kv_cache {
    uint32_t n_layer, n_seq, max_blocks;  /* max_blocks: table entries per sequence (n_ctx / KV_BLOCK) */
    int type;                 /* engine_kv_type of K and V */
    kv_pool pool[KV_POOLS];
    uint8_t *layer_pool;      /* per layer KV_FULL or KV_RING */
    uint32_t *dims;           /* per layer n_kv * head_dim of its own cache (0: none) */
    cl_mem *k, *v;            /* per layer: [n_blocks of its pool][n_kv][KV_BLOCK] rows of head_dim values */
    kv_copy *copies;          /* pending, in order (a copy's source may be an earlier one's target) */
    uint32_t n_copies;        /* at most one per held block: each target is a distinct held block */
    int32_t *seq_len;         /* tokens per sequence; -1 = slot free */
    uint64_t bytes;           /* device memory of the blocks and tables */
    kv_sizes sizes;
    prefix_table prefix;      /* cap 0: the prefix cache is off */
    uint64_t seed;            /* the chain of an empty prefix */
    uint64_t *chain;          /* per sequence: the hash chain through its last whole block written */
    int32_t *part;            /* [n_seq][KV_BLOCK]: each sequence's tokens of its last block */
    uint64_t *chain_at;       /* the same at seq_len (kv_commit), where kv_abort goes back to */
    int32_t *part_at;
    int32_t *walk;            /* [max_blocks]: a lookup's entries */
    kv_reg *log;              /* the step's registrations (kv_abort) */
    uint32_t n_log, log_cap;
    int32_t *last_entry;      /* per sequence: the prefix entry of the last block it registered (-1: none) */
    int32_t *snap_log;        /* the entries the step gave a state snapshot (kv_abort drops them) */
    uint32_t n_snap_log;
    state_store *state;       /* the recurrent state, a slot per sequence (NULL: no layer has one); its
                               * lifecycle follows the sequences': new, free, fork, sync. A prefix is reused
                               * only where its last block's entry has a snapshot of it (kv_snapshot), without
                               * snapshots not at all. kv_truncate cuts the blocks only: the engine restores the
                               * state (state_restore + model_replay). */
} kv_cache;

/* blocks one sequence's ring needs for a window and chunk (capped at a whole context of max_blocks) */
uint32_t kv_ring_blocks(uint32_t window, uint32_t max_chunk, uint32_t max_blocks);
kv_sizes kv_plan(const kv_config *c);
/* The blocks of each pool that n sequences take at most when they share a prompt of n_prompt
 * tokens (one prefilled it, the others are forks of it) and each grows to n_total tokens: the
 * prompt's whole blocks once, every block from the one holding its end on once per sequence (copy
 * on write), and of a ring never more than its size per sequence. What admission reserves. */
void kv_need(const kv_sizes *s, uint32_t n_prompt, uint32_t n_total, uint32_t n, uint32_t out[KV_POOLS]);
/* blocks[KV_FULL], blocks[KV_RING]: the pools' sizes, shared by all sequences, which take blocks as
 * they grow (a ring's at most sizes.ring_blocks) */
int  kv_create(kv_cache *kv, cl_runtime *rt, const kv_config *c, const uint32_t blocks[KV_POOLS], char *err,
               size_t errlen);
void kv_destroy(kv_cache *kv);
/* turns the prefix cache on, before any sequence starts: chains begin at seed (prefix_seed of the
 * model's name); 0, or -1 out of host memory */
int  kv_prefix_on(kv_cache *kv, uint64_t seed, char *err, size_t errlen);
int  kv_seq_new(kv_cache *kv);
void kv_seq_free(kv_cache *kv, int seq);
/* a new sequence holding what src holds (its blocks shared, seq_len equal); -1 when no slot is free */
int  kv_seq_fork(kv_cache *kv, int src);
/* a new sequence holding the longest registered prefix of tokens[0, n) that leaves the last token
 * out, in whole blocks; *cached gets its length (seq_len). -1 when no slot is free. */
int  kv_seq_new_prefix(kv_cache *kv, const int32_t *tokens, uint32_t n, uint32_t *cached);
/* A step's chunks, each of which a forward writes: kv_step_begin; for every chunk, kv_own on the
 * positions it writes (blocks registered since kv_reserve are shared again: they get copies, made at
 * the next kv_sync, or the table lets go of them; cannot fail after a kv_reserve of the whole step),
 * kv_sync, the forward, kv_written (the blocks the chunk completed are registered: a ring block
 * before the ring comes round to it); then kv_commit per sequence, or kv_abort (the step's
 * registrations taken back) and kv_trim. */
void kv_step_begin(kv_cache *kv);
int  kv_own(kv_cache *kv, int seq, uint32_t from, uint32_t to);
void kv_written(kv_cache *kv, int seq, const int32_t *tokens, uint32_t from, uint32_t to);
void kv_commit(kv_cache *kv, int seq, uint32_t len);
void kv_abort(kv_cache *kv);
/* makes room for positions [0, new_len) of seq and makes the blocks that positions [seq_len, new_len)
 * are written to its own (copies of shared ones, made at the next kv_sync); returns -1 when a pool
 * is exhausted (kv_trim undoes the growth; blocks already made its own stay so) */
int  kv_reserve(kv_cache *kv, int seq, uint32_t new_len);
/* gives back blocks beyond len (undo of a failed reserve) */
void kv_trim(kv_cache *kv, int seq, uint32_t len);
/* seq (committed) shortened to len < its length, tokens[0, len) its tokens (the prefix cache's chain is
 * rebuilt from them where a whole block goes): rejected draft tokens. Blocks a dropped tail completed stay
 * registered under their tokens (their contents are those tokens'); the next write copies a shared one.
 * A sliding-window ring that came round keeps the keys len needs only when at most its spare (ring -
 * window - a block) goes: -1 otherwise, or for len >= the length. */
int  kv_truncate(kv_cache *kv, int seq, uint32_t len, const int32_t *tokens);
/* seq's state, its written length a block boundary whose block the step just registered (kv_written), kept as
 * a snapshot on that block's prefix entry (the least recently used snapshot goes if none is free); nothing
 * without snapshots or when the entry has one */
void kv_snapshot(kv_cache *kv, int seq);
/* 1 when the cache keeps a recurrent state beside the blocks (kv_truncate leaves it as it is: going back
 * is the engine's, from a checkpoint) */
int  kv_has_state(const kv_cache *kv);
/* enqueues the pending block copies, then uploads the block tables that changed */
int  kv_sync(kv_cache *kv, cl_runtime *rt, char *err, size_t errlen);
kv_view kv_layer_k(const kv_cache *kv, uint32_t l);
kv_view kv_layer_v(const kv_cache *kv, uint32_t l);

#endif
