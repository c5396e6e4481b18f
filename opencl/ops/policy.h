/* policy.h — the thresholds and launch geometry the ops choose kernels and shapes by: one struct,
 * its defaults (policy.c says why each is what it is), and the NAME under which tests and
 * `clgemma bench --set NAME=VALUE` may change a field for a measurement. The server never does;
 * nothing here reads the environment. docs/PERF.md lists the names. */
#ifndef CLGEMMA_POLICY_H
#define CLGEMMA_POLICY_H

#include "runtime.h"

typedef struct ops_policy {
    /* decode products (1-16 tokens) */
    uint32_t mv_wg;               /* MV_WG: work-group of the float GEMV (mv4, mv16, mv_multi; capped by the device) */
    uint32_t mv_tpr;              /* MV_TPR: items per row in it at most (capped by mv_wg) */
    uint32_t mv_warps_per_cu;     /* MV_WARPS_PER_CU: past MV_TPR, items per row double until the grid has this many warps a CU */
    uint32_t mvqg_min_elems;      /* MVQG_MIN_ELEMS: int8 GEMV products of at least this many weights quantize X
                                   * once beforehand (mvqg) instead of per group (mvq) ... */
    uint32_t mvqg_min_k;          /* MVQG_MIN_K: ... when their rows hold at least this many values */
    uint32_t mvqg_rpg;            /* MVQG_RPG: rows per mvqg group (rounded down to whole warps of 4 rows) */
    uint32_t mvqg_pair;           /* MVQG_PAIR: q4_k on mvqg in sub-block pairs (mvqg_q4_k2): 0 never, 1 where a
                                   * row takes no more of a warp's passes than in halves, 2 always */
    uint32_t mvq_groups_per_cu;   /* MVQ_GROUPS_PER_CU: mvq / mvqn groups a compute unit gets (rows per group follow) */
    uint32_t q8x_min_k;           /* Q8X_MIN_K: producers leave mmq8's int8 X for rows at least this long */
    uint32_t mmq8_min_elems;      /* MMQ8_MIN_ELEMS: int8 tensor-core products (mmq8) from this many weights */
    uint32_t mmq8_max_tok;        /* MMQ8_MAX_TOK: int8 tensor-core products up to this many tokens (5..256) ... */
    uint32_t mmq8g_max_tok;       /* MMQ8G_MAX_TOK: ... and on the kernel of all types (mmq8_T, no ring) up to this many */
    uint32_t mmq8_slices_max;     /* MMQ8_SLICES_MAX: k slices across groups of one int8 tensor-core product at most */
    uint32_t mmq8_slice_units;    /* MMQ8_SLICE_UNITS: ... each leaving every warp this many 64-value units at least */
    uint32_t mmq8_warps;          /* MMQ8_WARPS: warps per mmq8 / mmq8p group (0: split of k chosen per launch) */
    uint32_t mmq8p_stages;        /* MMQ8P_STAGES: units in flight per mmq8p warp (and per mmq8r group, as
                                   * many as fit) */
    uint32_t mmq8r_min_tok;       /* MMQ8R_MIN_TOK: q4_k's products on mmq8r (X shared by 4 warps) from this many
                                   * tokens, on mmq8p below */
    uint32_t mmh_min_tok;         /* MMH_MIN_TOK: batched products on mmh (f16 tensor cores, X shared) from this
                                   * many tokens ... */
    uint32_t mmh_min_tok_q6k;     /* MMH_MIN_TOK_Q6K: ... and q6_k's from this many where its rows make fewer
                                   * groups than MMH_SLOTS (its int8 products read the 2-byte-aligned blocks
                                   * unstaged, mmh through its ring in k slices) */
    uint32_t mmh_max_tok;         /* MMH_MAX_TOK: ... up to this many (past it the prefill tiles) */
    uint32_t mmh_prefetch;        /* MMH_PREFETCH: mmh_T's lanes ask L2 for their rows' bytes this many units
                                   * ahead (0: not) */
    uint32_t mmh_slice_shared_max_tok; /* MMH_SLICE_SHARED_MAX_TOK: products sharing X (gate/up, Q/K/V) take k
                                        * slices in mmh token tiles of at most this many (0: never) */
    uint32_t mmh_slots;           /* MMH_SLOTS: mmh groups that run at once; k slices are chosen against waves
                                   * of this many */
    uint32_t mmh_unit_bytes;      /* MMH_UNIT_BYTES: partial-Y bytes whose writing and adding cost as long as
                                   * one 64-value unit of an mmh group */
    uint32_t mmq_warps_target;    /* MMQ_WARPS_TARGET: batched products split k until about this many warps */
    uint32_t mmq8p_warps_target;  /* MMQ8P_WARPS_TARGET: the same for the int8 ones (mmq8, mmq8p) */
    /* prefill products */
    uint32_t mmt_min_groups;      /* MMT_MIN_GROUPS: the 128 x 128 tiles only for grids of this many groups */
    /* attention and RoPE */
    uint32_t attn_min_chunk;      /* ATTN_MIN_CHUNK: keys per split-KV chunk at least (rounded up to a power of
                                   * two, 32..256) */
    uint32_t attn_max_chunk;      /* ATTN_MAX_CHUNK: keys per split-KV chunk at most where attn_dec takes the
                                   * layer (f16 rows of head dim 256 / 512); attn_partial's stay OPS_ATTN_CHUNK */
    uint32_t attn_decm_min_keys;  /* ATTN_DECM_MIN_KEYS: layers whose tokens see this many keys run on attn_decm
                                   * (NVIDIA; a KV head's q heads in one tensor-core product) */
    uint32_t attn_groups_per_cu;  /* ATTN_GROUPS_PER_CU: split-KV chunks shrink until this many groups per compute
                                   * unit */
    uint32_t attn_decq_max_tok;   /* ATTN_DECQ_MAX_TOK: decode batches of up to this many tokens run qkv_rope inside
                                   * the attention launch (attn_decq) */
    uint32_t fa_warps;            /* FA_WARPS: warps per attn_fa group (4 or 8; each takes 16 query rows) */
    uint32_t wgmma;               /* WGMMA: 1: the prefill tiles on mmtw (wgmma) where the device has it, 0: mmta */
    uint32_t qkv_rope_w_min_rows; /* QKV_ROPE_W_MIN_ROWS: qkv_rope with a warp per head row from this many rows */
    /* gated-delta layers */
    uint32_t delta_chunk;         /* DELTA_CHUNK: tokens per chunk of the chunked scan (C, 1..64) */
    uint32_t delta_chunk_min;     /* DELTA_CHUNK_MIN: runs of this many tokens or more take the chunked scan,
                                   * shorter ones delta_step */
    uint32_t delta_cols;          /* DELTA_COLS: columns of S per work-group of delta_step */
    uint32_t delta_scan_cols;     /* DELTA_SCAN_COLS: ... and of delta_chunk_scan */
    /* vision encoder */
    uint32_t vis_fa;              /* VIS_FA: 1: its attention on the f16 tensor-core kernel where the device has
                                   * one (vis_fa_*), 0: on the f32 kernel (vis_attn) */
    /* measurement */
    uint32_t launch_twice;        /* LAUNCH_TWICE: N > 0 enqueues every launch of the kind whose bench
                                   * --profile row says N under "twice" twice: with bench --hold the added
                                   * device time is that kind's cost, gaps included (events overstate it) */
    uint32_t launch_empty;        /* LAUNCH_EMPTY: N > 0 runs an empty kernel of the same grid in place of every
                                   * launch of that kind (its outputs are left as they were): with bench --hold
                                   * the time saved is its work, what remains its launches' cost */
} ops_policy;

/* the defaults for the device of rt (some scale with its compute units) */
void ops_policy_defaults(ops_policy *p, const cl_runtime *rt);
/* Applies one "NAME=VALUE". Returns 0, or -1 with one line in err naming the setting when NAME is
 * not a field's name or VALUE not a whole number within the field's range. */
int ops_policy_set(ops_policy *p, const char *setting, char *err, size_t errlen);
/* Applies rt's settings (engine_opts.settings) but those the runtime or engine read themselves
 * (rt_setting_known): -1 with err at the first that ops_policy_set refuses. */
int ops_policy_apply(ops_policy *p, const cl_runtime *rt, char *err, size_t errlen);

#endif
