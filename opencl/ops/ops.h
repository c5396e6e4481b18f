/* ops.h — the op API: host-side launchers for the kernels in opencl/kernels, one file per family
 * in opencl/ops (launch.c: the context; matmul.c, matmul_q8.c, act_q8.c, norm.c, rope.c,
 * attention.c, rows.c, logits.c, moe.c, delta.c, vision.c). Each op enqueues work on the runtime's in-order queue
 * and returns at once (no clFinish); a failure is kept in the context (sticky, below). */
#ifndef CLGEMMA_OPS_H
#define CLGEMMA_OPS_H

#include "runtime.h"
#include "gguf.h"
#include "policy.h"
#include "kv.h"

#define OPS_MV_R 4     /* rows per item segment in mv4_* and mv_multi (MV_R in gemv.cl) */
#define OPS_MV_MAXT 16  /* tokens per mv launch at most (mv4_*, mv16_* in gemv.cl) */
#define OPS_MMQ8_ROWS 32 /* weight rows per mmq8 work-group (16 * MMQ8_MT in mma_q8.cl) */
#define OPS_MMQ8_NT 4    /* mmq8 kernels per type: 8, 16, 32 and 64 tokens a group (mma_q8.cl NT 1, 2, 4, 8) */
#define OPS_MMH_NT 3      /* mmh kernels per type: 16, 32 and 64 tokens a group (mma_h.cl NT 2, 4, 8) */
#define OPS_MMH_WARPS 4   /* warps per mmh group, 32 weight rows each (mma_h.cl MMH_WARPS) */
#define OPS_MMQ8_MAXT 256 /* tokens an int8 tensor-core product takes at most (groups of 64 beyond 32) */
#define OPS_ATTN_CHUNK 256 /* keys per attention chunk at most (ATTN_MAX_CHUNK in attn_split.cl) */
#define OPS_ATTN_MIN_CHUNK 32
#define OPS_FLASH_ROWS 64   /* query rows of a 4-warp attn_fa group: a KV head's q heads must divide them */
#define OPS_WH_MAX ((size_t)1 << 30) /* f16 rows of one weight for mmta at most (larger: mmt) */
#define OPS_FLASH_MIN_RUN 8 /* shorter runs of one sequence take the split-KV kernels */

/* a weight matrix of rows x cols in its GGUF type, on the device */
typedef struct weight {
    cl_mem buf;
    uint32_t type;
    uint32_t rows, cols;
    uint32_t row_bytes;
} weight;

/* launch shapes bench --profile tells apart (the rest count in their kind's total only) */
#define OPS_PROF_SHAPES 512

/* what bench --profile counts launches under (one name each in launch.c) */
enum op_kernel {
    K_NORM_ROPE, K_ATTN_PARTIAL, K_GEGLU,
    K_GATHER_ROWS, K_ADD_ROWS, K_SCALE_ROWS, K_SOFTCAP, K_ARGMAX, K_QKV_ROPE, K_MV_MULTI,
    K_NORM_FUSE,
    K_MV, K_DEQ, K_EMB, K_MMQ, K_GEMM,
    K_MV_ANY, K_ROUTER, K_MOE_UP, K_GEGLU_SPLIT, K_MOE_DOWN, K_PLE_GATE, K_MOE_SORT, K_MOE_COMBINE,
    K_LOGITS_CONSTRAIN, K_LOGPROBS, K_SAMPLE_TOPK,
    K_DELTA_CONV, K_DELTA_STEP, K_DELTA_PREP, K_DELTA_SCAN, K_RMSNORM_GATED,
    K_POS_ADD2D, K_ROPE2D, K_ATTN_DENSE, K_AVGPOOL, K_CLAMP, K_STANDARDIZE,
    K_MVQ,            /* NVIDIA only from here on */
    K_MMT, K_MMT_CVT,
    K_MMQ8, K_Q8X,
    K_ATTN_DEC,
    K_MVQG, K_MVQ_XQ,
    K_MMTA, K_DEQH, K_MMTW, K_GLU_TILES,
    K_ATTN_FA, K_ATTN_FA_Q,
    K_MMQ8S,
    K_MMQ8P,
    K_MMQ8_SUM,
    K_MMQ8R,
    K_VIS_FA,
    K_ATTN_DECM, K_ATTN_DECM_MERGE,
    K_MMH, K_MMH_X,
    K_COUNT
};

/* One kernel launch: sets the arguments, enqueues (rounding gws up to lws when lws is given),
 * and with profiling on records time, bytes and FLOPs under kind. Arguments: KARG(value) or
 * KLOCAL(bytes), counted by the compiler (OPS_LAUNCH). Every launcher goes through it. */
typedef struct karg { size_t size; const void *ptr; } karg;
#define KARG(x) ((karg){ sizeof(x), &(x) })
#define KLOCAL(n) ((karg){ (n), NULL })

#define OPS_T GGML_TYPE_COUNT

/* The context's members by family; each family's file creates and releases its own (launch.c
 * calls them in turn). Per-type arrays are indexed by GGML type, NULL where a type has none. */
typedef struct ops_mm {        /* matmul.c: float, f16 and dequantizing products */
    cl_kernel mv4[OPS_T], mv16[OPS_T]; /* decode products on float: <= 4 / <= 16 tokens */
    cl_kernel mv_multi;        /* up to three matrices sharing X, <= 4 tokens */
    cl_kernel mv_any;          /* f32/f16 rows of any length */
    cl_kernel deq[OPS_T];      /* weight rows to float tiles for GEMM */
    cl_mem scratch;            /* those tiles */
    size_t scratch_elems;
    cl_kernel mmqs[OPS_T], mmql[OPS_T]; /* tensor-core products (NVIDIA) */
    cl_kernel mmqe_s[OPS_T], mmqe_l[OPS_T]; /* the same over expert-grouped pairs */
    size_t mmq_wg[2][OPS_T];   /* largest group each mmq kernel can run (registers) */
    cl_kernel mmt[OPS_T];      /* 128 x 128 tiled prefill products (NVIDIA) */
    cl_kernel mmte[OPS_T];     /* the same over expert tiles of 128 pairs */
    cl_kernel mmt_cvt;         /* X to f16: rows for mmt and mmte, tiles for mmta and mmtw */
    cl_mem xh;                 /* those rows (grown on demand; mmh's X too, each product writing it first) */
    size_t xh_bytes;
    cl_kernel mmta;            /* the tiles on f16 rows staged by cp.async */
    cl_kernel mmtw;            /* the same tiles on wgmma, bulk copies (sm_90a; NULL elsewhere) */
    cl_kernel mmtwe;           /* mmtw over expert tiles (prefill MoE) */
    cl_kernel mmt_cvt_xe;      /* their X: the pairs' rows gathered into tiles */
    cl_kernel mmt_cvt_glu;     /* a down product's X tiles from its gate and up rows (the activation fused) */
    cl_kernel deqh[OPS_T];     /* weight rows to f16 tiles for mmta and mmtw (none for f16) */
    cl_mem wh;                 /* those rows (grown on demand, up to OPS_WH_MAX bytes) */
    size_t wh_bytes;
} ops_mm;

typedef struct ops_q8 {        /* matmul_q8.c: products on int8 activations (NVIDIA) */
    cl_kernel mvq[OPS_T];      /* int8 dot-product decode products (q4_k, q8_0, q5_0) */
    cl_kernel mvqg[OPS_T];     /* the same with X quantized beforehand (act_q8) */
    cl_kernel mvqg_q4k2;       /* mvqg of q4_k in sub-block pairs (policy mvqg_pair) */
    cl_kernel mvqn[OPS_T];     /* mvq with the norm chain before it fused in */
    cl_kernel mmq8[OPS_MMQ8_NT][OPS_T]; /* int8 tensor-core products for 5-8, 9-16, 17-32 and 33-256 tokens
                                         * (DT_MMQ8 types) */
    size_t mmq8_wg[OPS_MMQ8_NT][OPS_T];
    /* the same as kernels of the type's own (DT_MMQ8_RING: q4_k): */
    cl_kernel mmq8s[OPS_T];    /* 5-8 tokens with weights staged by cp.async */
    cl_kernel mmq8p[OPS_MMQ8_NT][OPS_T]; /* the same token counts with a per-warp cp.async ring */
    size_t mmq8p_wg[OPS_MMQ8_NT][OPS_T];
    cl_kernel mmq8r[OPS_MMQ8_NT][OPS_T]; /* 9-256 tokens with one ring per group of 4 warps, X staged
                                          * once for their 128 rows (none at 5-8 tokens) */
    cl_kernel mmq8_sum;        /* the k slices' partial Ys of one product added (mma_q8.cl) */
    cl_mem part[3];            /* those partial Ys, one per matrix of a launch (grown on demand) */
    size_t part_bytes[3];
} ops_q8;

typedef struct ops_mmh_fam {       /* matmul_h.c: batched decode on f16 tensor cores, X shared (NVIDIA) */
    cl_kernel mm[OPS_MMH_NT][OPS_T]; /* mmh_T_{2,4,8}: up to 16, 32 and 64 tokens a group */
    cl_kernel x;               /* mmh_x: X (or the activation) to f16 in mmh's order, into ops_mm's xh */
} ops_mmh_fam;

typedef struct ops_act {       /* act_q8.c: the int8 form of the next product's X (NVIDIA) */
    cl_kernel mvq_xq;          /* X to int8 in mvqg's layout (1-4 tokens) */
    cl_kernel q8x;             /* X to int8 per 32 values in mmq8's layout (5-256 tokens) */
    cl_mem xq, xqs;            /* those values and their (scale, scaled sum) pairs (grown on demand) */
    size_t xq_bytes, xqs_bytes;
    cl_mem xq_of;              /* the X whose int8 form xq / xqs hold, as its producer (norm_fuse,
                                * attn_dec) left it; forgotten by any launch but those that read it */
    uint32_t xq_ntok, xq_k;
} ops_act;

typedef struct ops_norm {      /* norm.c */
    cl_kernel fuse;            /* norm_fuse: every RMSNorm chain */
    size_t wg_max;             /* largest group it runs with (power of two, <= 512) */
} ops_norm;

typedef struct ops_rope {      /* rope.c */
    cl_kernel norm_rope, qkv;  /* per-head norm + RoPE (+ cache write); Q/K/V of a batch */
    cl_kernel qkv_w;           /* qkv_rope with a warp per head row (NVIDIA) */
} ops_rope;

typedef struct ops_attn {      /* attention.c */
    cl_kernel partial;         /* split-KV attention, any device */
    cl_kernel dec[2];          /* split-KV, one warp per key run, head dims 256 / 512 (NVIDIA) */
    cl_kernel decq[2];         /* the same from the raw Q/K/V of a decode batch (qkv_rope inside) */
    cl_kernel decm[2];         /* split-KV on tensor cores, a KV head's q heads in one product (NVIDIA) */
    cl_kernel decm_merge;      /* its chunks merged, a group per (token, head) */
    cl_kernel fa[2][3];        /* tensor-core prefill attention, 4 / 8 warps, head dims 128 / 256 / 512 (NVIDIA) */
    cl_kernel fa_q;            /* its Q as f16 A fragments in the order the warps read them */
} ops_attn;

typedef struct ops_rows {      /* rows.c */
    cl_kernel emb[OPS_T];      /* embedding rows */
    cl_kernel geglu, ple_gate; /* gelu(g) * u: flat, and over a slice of wider u rows */
    cl_kernel swiglu, mul_sigmoid, add_gated; /* silu(g) * u; x * sigmoid(g); x + sigmoid(s) * y (Qwen) */
    cl_kernel gather, add, scale, softcap;
    cl_kernel argmax_part, argmax_final;
    cl_mem am_val, am_idx;     /* argmax partials: up to 256 rows x 256 parts */
} ops_rows;

typedef struct ops_logits {    /* logits.c */
    cl_kernel constrain;       /* token mask and logit bias of choice rows, in place */
    cl_kernel lp_part, lp_final; /* log-sum-exp and top k per row, in two stages like argmax */
    cl_kernel sample_topk;     /* a sampled row's best values, sorted */
    cl_mem lp_m, lp_s, lp_v, lp_i; /* stage 1's partials (grown on demand) */
    size_t lp_m_bytes, lp_s_bytes, lp_v_bytes, lp_i_bytes;
} ops_logits;

typedef struct ops_moe {       /* moe.c */
    cl_kernel router_topk, router_topk_w; /* the latter one warp per token (NVIDIA) */
    cl_kernel moe_up, moe_down, geglu_split;
    cl_kernel moe_up_mv, moe_down_mv; /* decode (ntok <= 4) layouts of moe_up / moe_down */
    cl_kernel moe_sort, moe_combine;  /* tensor-core path: pairs grouped by expert, per-pair sums */
    cl_kernel mvqe[OPS_T];     /* decode expert products on int8 dot products (NVIDIA; DT_GEMV_Q8 types) */
} ops_moe;

typedef struct ops_delta {     /* delta.c: the gated-delta layers */
    cl_kernel conv, conv_state, step, prep, scan, norm_gated, runs;
    cl_mem wu, pg;             /* the chunk form's per-token scratch (grown on demand) */
    size_t wu_bytes, pg_bytes;
} ops_delta;

#define OPS_VATT_L 64   /* keys per tile and items per group of op_attention_dense (VA_L in vision.cl) */
#define OPS_VFA_WIDTHS 4 /* head widths of vis_fa (op_attention_dense_f16): 32, 64, 80, 128 */

typedef struct ops_vision {   /* vision.c: the vision encoder's ops */
    cl_kernel pos_add, norm_rope2d, attn, avgpool, clamp, standardize;
    cl_kernel fa[OPS_VFA_WIDTHS]; /* vis_fa_HDP, one per width (NVIDIA) */
} ops_vision;

typedef struct ops {
    cl_runtime *rt;
    int has_mma;               /* tensor-core kernels built (NVIDIA) */
    int act_int8;              /* products may round X to int8 (mvq, mmq8, mvqe): 1 after ops_init; the
                                * engine clears it for prompt chunks, whose logits keep f16/f32 accuracy */
    size_t local_mem;          /* bytes of local memory per group on the device */
    uint32_t n_cu;
    size_t wg;                 /* default work-group size for row kernels */
    ops_policy pol;            /* thresholds and launch geometry (policy.h): defaults from ops_init */
    cl_kernel nop;             /* the empty kernel LAUNCH_EMPTY runs in a kind's place */
    ops_mm mm;
    ops_q8 q8;
    ops_mmh_fam mmh;
    ops_act act;
    ops_norm norm;
    ops_rope rope;
    ops_attn attn;
    ops_rows rows;
    ops_logits logits;
    ops_moe moe;
    ops_delta delta;
    ops_vision vision;
    /* profiling (bench --profile, profile.c): time and launches per op kind, and the device's idle
     * time between kernels of one step; events wait in prof_pend until the step has finished */
    double prof_ms[K_COUNT];
    long prof_n[K_COUNT];
    double prof_bytes[K_COUNT];
    double prof_flop[K_COUNT];
    double prof_gap_ms, prof_span_ms;
    struct prof_pending *prof_pend;
    size_t prof_npend, prof_cap;
    struct prof_shape *prof_shapes; /* OPS_PROF_SHAPES of them, from the first launch read */
    size_t prof_nshapes;
    /* the first failure since ops_clear ("op: what"); while set every op is a no-op returning -1 */
    int failed;
    char err[256];
} ops;

/* Sticky errors: an op that fails records "op: what" once (ops_fail, which returns -1) and every
 * later op does nothing and returns -1, so a forward calls its ops unchecked and ends with
 * ops_status, which copies the first failure into err (-1) or returns 0. ops_clear forgets it
 * (the engine calls it before each step). Every op below returns 0, or -1 with the error kept. */
int  ops_fail(ops *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int  ops_status(const ops *o, char *err, size_t errlen);
void ops_clear(ops *o);

int ops_launch_args(ops *o, int kind, cl_kernel k, int dims, const size_t *gws, const size_t *lws, double bytes,
                    double flop, const karg *args, size_t nargs);
#define OPS_LAUNCH(o, kind, k, dims, gws, lws, bytes, flop, ...)                                             \
    ops_launch_args(o, kind, k, dims, gws, lws, bytes, flop, (const karg[]){ __VA_ARGS__ },                 \
                    sizeof((const karg[]){ __VA_ARGS__ }) / sizeof(karg))

/* 1 if the engine has kernels for this tensor type (ops/types.c) */
int  ops_type_supported(uint32_t type);
/* the context and every family's kernels; scratch_elems: floats of GEMM dequantization tiles */
int  ops_init(ops *o, cl_runtime *rt, size_t scratch_elems, char *err, size_t errlen);
void ops_destroy(ops *o);
const char *ops_kernel_name(int k);
/* 1 for the kinds whose outputs steer later launches' reads (expert and token ids) */
int ops_kind_writes_indices(int kind);

/* Y[t][r] (ldy) = sum_k W[r][k] X[t][k] (ldx, a multiple of 4) for t < ntok. Uses mv for ntok <= 4;
 * above that the tensor-core mmq kernels where the device has them, else mv up to OPS_MV_MAXT,
 * else dequantized tiles and GEMM; rows whose length is not a multiple of 32 (f32/f16) take
 * mv_any. One dispatcher over the families in matmul.c's table, in order of preference. */
int op_matmul(ops *o, const weight *w, cl_mem X, uint32_t ldx, cl_mem Y, uint32_t ldy, uint32_t ntok);
/* 1 if op_matmul / op_matmul_multi run this type, k and token count (<= 4) on the int8
 * dot-product kernels (X rounded to int8 per 32 values) */
int ops_mvq_fits(const ops *o, uint32_t type, uint32_t k, uint32_t ntok);
/* 1 if the device has the int8 decode products at all (engine_info reports it) */
int ops_int8_decode(const ops *o);
/* 1 if op_matmul / op_matmul_multi / op_matmul_geglu run this type, shape (rows: of all the
 * matrices sharing X) and token count (5 to the policy's mmq8_max_tok) on the int8 tensor-core
 * kernels (mmq8: X rounded to int8 per 32 values) */
int ops_mmq8_fits(const ops *o, uint32_t type, uint32_t rows, uint32_t k, uint32_t ntok);
/* 1 if they run it on f16 tensor cores with X shared (mmh, NVIDIA: the policy's mmh_min_tok, q6_k's
 * few-row products mmh_min_tok_q6k, to mmh_max_tok tokens, any quantized type), which the dispatchers
 * try before mmq8 */
int ops_mmh_fits(const ops *o, uint32_t type, uint32_t rows, uint32_t k, uint32_t ntok);
/* the tokens mmq8's int8 X is padded to: 8, 16, 32, then multiples of 64 (its kernels' token tiles) */
uint32_t ops_q8x_tpad(uint32_t ntok);
/* 1 if op_matmul runs this product on the tiled tensor-core kernel (mmt) */
int ops_mmt_fits(const ops *o, uint32_t type, uint32_t rows, uint32_t k, uint32_t ntok);
/* y = norm(x) * w (y may be x): an op_norm_chain, so rows of n % 4 == 0 values
 * (both loaders ask for multiples of 32; other n fail with an error) */
int op_rmsnorm(ops *o, cl_mem x, cl_mem w, cl_mem y, uint32_t rows, uint32_t n, float eps);

/* One RMSNorm chain in one launch (kernel norm_fuse; rows of n values, n % 4 == 0):
 *   t = norm(x)·wx [+ norm(x2)·wx2], or x itself when wx is NULL;  t = norm(t)·wt when wt is set;
 *   r = (res + t)·scale written to res when res is set, else r = t;  out[j].y = norm(r)·out[j].w. */
typedef struct norm_out { cl_mem w, y; } norm_out;
typedef struct norm_chain {
    cl_mem x, wx, x2, wx2, wt, res;
    float scale;
    norm_out out[3];
    int nout;
} norm_chain;
int op_norm_chain(ops *o, const norm_chain *c, uint32_t rows, uint32_t n, float eps);

/* Y = W . (gelu(G) * U), G rows ldg apart, U's at U + u_off, ldu apart: one launch where the
 * int8 product folds the activation into its X quantization (decode), else G = gelu(G) * U in place
 * (geglu where U is laid out as G, the strided PLE gate where u_off is a multiple of k) and
 * op_matmul. G must be rows of k = w->cols values (ldg == k). */
int op_matmul_geglu(ops *o, const weight *w, cl_mem G, uint32_t ldg, cl_mem U, uint32_t u_off, uint32_t ldu, cl_mem Y,
                    uint32_t ldy, uint32_t ntok);
/* the same with the activation act: OPS_ACT_GELU (GELU-tanh, Gemma: op_matmul_geglu) or OPS_ACT_SILU
 * (SwiGLU, Qwen; U laid out as G only) */
enum { OPS_ACT_GELU = 1, OPS_ACT_SILU = 2 }; /* the kernels' geglu flag (quant_q8.cl ld_x4) */
int op_matmul_glu(ops *o, int act, const weight *w, cl_mem G, uint32_t ldg, cl_mem U, uint32_t u_off, uint32_t ldu,
                  cl_mem Y, uint32_t ldy, uint32_t ntok);
/* several products of the same X (Q/K/V or gate/up): one launch when ntok <= 4, else one each */
typedef struct mm_out { const weight *w; cl_mem y; uint32_t ldy; } mm_out;
int op_matmul_multi(ops *o, const mm_out *outs, int n, cl_mem X, uint32_t ldx, uint32_t ntok);
/* The residual stream's two buffers: cur holds x; spare is scratch of the same size. An op that
 * writes the new x into spare (op_norm_matmul's fused kernel) flips them, so cur always holds x. */
typedef struct resid { cl_mem cur, spare; } resid;
/* The norm chain c with r->cur as its residual (c->res is ignored), then the products outs (0-3
 * matrices of k columns; 0: the chain alone) of the chain's first output, or of the new residual
 * itself where c has no outputs. The first output lands in r->spare as it is at the call (c's
 * out[0].y is ignored: a caller's copy of spare goes stale once an earlier op flipped r). One launch (mvqn: NVIDIA, one token, a plain chain: x·wx, no x2 / wt, at most one
 * output, products that take mvq) that writes the new residual into r->spare and flips r, the
 * chain's y not written; else op_norm_chain then op_matmul (one matrix) or op_matmul_multi. */
int op_norm_matmul(ops *o, resid *r, const norm_chain *c, const mm_out *outs, int n, uint32_t k, uint32_t ntok,
                   float eps);
/* Q/K/V of a batch in one launch: Q normed + roped in place, K normed + roped into its cache,
 * V into its cache. Norm modes (qk_norm for Q and K, v_norm for V): 0 none, 1 RMS norm times the
 * head weight (qw, kw), 2 RMS norm without weight. */
int op_qkv_rope(ops *o, cl_mem Q, cl_mem K, cl_mem V, uint32_t ntok, uint32_t nh, uint32_t nkv, uint32_t hd,
                cl_mem qw, cl_mem kw, int qk_norm, int v_norm, float eps, cl_mem freq, uint32_t rot,
                cl_mem tok_pos, cl_mem tok_seq, const kv_view *kc, const kv_view *vc);
int op_norm_rope(ops *o, cl_mem x, uint32_t ntok, uint32_t nh, uint32_t hd, cl_mem w, int norm, float eps,
                 cl_mem freq, uint32_t rot, cl_mem tok_pos, cl_mem tok_seq, const kv_view *to_cache);
/* the split-KV kernels a layer can run on: attn_partial (any device), attn_dec / attn_decq (NVIDIA,
 * a warp per run of keys, head dims 256 / 512 over f16 rows), attn_decm (the same on tensor cores) */
enum { OPS_ATTN_PARTIAL, OPS_ATTN_DEC, OPS_ATTN_DECM };
/* which of them takes a layer of head dim hd over a cache of kv_type, nh q heads on nkv KV heads,
 * tokens seeing span keys at most: attn_decm from pol.attn_decm_min_keys keys */
int ops_attn_kind(const ops *o, uint32_t hd, int kv_type, uint32_t nh, uint32_t nkv, uint32_t span);
/* how to split span keys for ntok tokens of a layer on kernel kind: keys per chunk and chunk count,
 * so that short decode steps still spread over the device (small chunks) and long prefills do not;
 * attn_dec's and attn_decm's chunks may reach pol.attn_max_chunk */
void ops_attn_split(const ops *o, uint32_t span, uint32_t ntok, uint32_t nh, uint32_t nkv, uint32_t hd, int kind,
                    uint32_t *chunk, uint32_t *nchunk);
/* attention for tokens [t0, t0+ntok); part buffers hold ntok*nh*nchunk*(hd+2) floats; part_cnt
 * ntok*nh counters, zero before the launch and zero again after it (the group that completes a
 * (token, head) merges its chunks and resets its counter); chunk (keys per chunk, <=
 * OPS_ATTN_CHUNK, or pol.attn_max_chunk on attn_dec) and nchunk cover the longest span in the batch */
int op_attention(ops *o, cl_mem Q, uint32_t t0, uint32_t ntok, uint32_t nh, uint32_t nkv, uint32_t hd,
                 const kv_view *k, const kv_view *v, cl_mem tok_pos, cl_mem tok_seq, int window,
                 float scale, float softcap, int kind, uint32_t nchunk, uint32_t chunk, cl_mem part_acc,
                 cl_mem part_ml, cl_mem part_cnt, cl_mem out);
/* one layer's attention shape and KV cache */
typedef struct attn_layer {
    uint32_t nh, nkv, hd;
    int window;                 /* > 0: keys limited to (pos - window, pos] */
    float scale, softcap;
    const kv_view *k, *v;
} attn_layer;
/* one forward batch: Q and out are [ntok][nh][hd]; pos/seq per token on the device, h_seq on the
 * host (the tokens of one sequence are contiguous, at consecutive positions). The split-KV
 * partials hold part_elems floats, sized for head dim part_hd. */
typedef struct attn_batch {
    cl_mem q, out, pos, seq;
    const int32_t *h_seq;       /* NULL: no runs known, split-KV kernels only */
    uint32_t ntok, max_pos;
    cl_mem part_acc, part_ml, part_cnt; /* part_cnt: part_elems / part_hd zeroed counters */
    size_t part_elems;
    uint32_t part_hd;
    cl_mem hi;                  /* NULL, or per token the last key it sees in sliding layers (at least its
                                 * position: an image's tokens see the whole image); full layers stay causal */
    uint32_t hi_extra;          /* the most any token's hi exceeds its position */
} attn_batch;
/* attention of a whole batch: runs of >= OPS_FLASH_MIN_RUN tokens of one sequence on the flash
 * kernel (attn_fa) where the device has it for the head dim, everything else on the split-KV kernels */
int op_attention_batch(ops *o, const attn_batch *b, const attn_layer *l);
/* a layer's raw projections and op_qkv_rope's other arguments (b->q is the raw Q) */
typedef struct qkv_raw {
    cl_mem k, v, qw, kw, freq;
    int qk_norm, v_norm;
    float eps;
    uint32_t rot;
} qkv_raw;
/* op_qkv_rope then op_attention_batch; one launch (attn_decq) for a decode batch of 1-4 tokens (one
 * per sequence, b->h_seq given) on NVIDIA, which leaves b->q raw */
int op_qkv_attention(ops *o, const qkv_raw *r, const attn_batch *b, const attn_layer *l);
/* flash kernel (attn_fa) available for this head shape and KV type (it reads f16 rows only) */
int ops_flash_ok(const ops *o, uint32_t nh, uint32_t nkv, uint32_t hd, int kv_type);
/* tokens [t0, t0+ntok), one sequence at consecutive positions, on the flash kernel; span: the
 * longest key span of a token (for the profile's byte and FLOP counts) */
int op_attention_flash(ops *o, cl_mem Q, uint32_t t0, uint32_t ntok, uint32_t nh, uint32_t nkv, uint32_t hd,
                       const kv_view *k, const kv_view *v, cl_mem tok_pos, cl_mem tok_seq, int window,
                       float scale, float softcap, uint32_t span, cl_mem out);
/* rows.c: embedding rows times scale; out = gelu(g) * u; dst[r] = src[idx[r]]; x += y; x *= s;
 * x = cap * tanh(x / cap) (n values each) */
int op_embed(ops *o, const weight *w, cl_mem ids, uint32_t ntok, float scale, cl_mem out);
int op_geglu(ops *o, cl_mem g, cl_mem u, cl_mem out, uint32_t n);
/* out = silu(g) * u; x *= sigmoid(g) (n values each) */
int op_swiglu(ops *o, cl_mem g, cl_mem u, cl_mem out, uint32_t n);
int op_mul_sigmoid(ops *o, cl_mem x, cl_mem g, uint32_t n);
/* x[r][:] += sigmoid(s[r]) * y[r][:] for rows of n values (Qwen's gated shared expert) */
int op_add_gated(ops *o, cl_mem x, cl_mem y, cl_mem s, uint32_t rows, uint32_t n);
int op_gather_rows(ops *o, cl_mem src, cl_mem idx, cl_mem dst, uint32_t rows, uint32_t n);
/* dst rows [dst_row, + rows) = src rows [src_row, + rows), rows of n floats (a copy on the queue) */
int op_copy_rows(ops *o, cl_mem src, size_t src_row, cl_mem dst, size_t dst_row, size_t rows, uint32_t n);
int op_add(ops *o, cl_mem x, cl_mem y, uint32_t n);
int op_scale(ops *o, cl_mem x, float s, uint32_t n);
int op_softcap(ops *o, cl_mem x, float cap, uint32_t n);
/* rows <= 256 */
int op_argmax(ops *o, cl_mem x, uint32_t rows, uint32_t n, cl_mem out);

/* logits.c. Choice rows of x (rows of n values; row indices relative to row0, the chunk's first
 * output row) as the rules buffer describes them (kernels/logits.cl: 4-int descriptors from d0 on,
 * bitsets, sorted bias pairs): masked tokens to -inf, the others plus their bias, in place. */
int op_logits_constrain(ops *o, cl_mem x, uint32_t n, cl_mem rules, uint32_t d0, uint32_t nrows, uint32_t row0);
#define OPS_MAX_LOGPROBS 20 /* LP_MAXK in logits.cl */
/* log-softmax of nrows rows of x (row ids[roff + j] - row0): out row j gets OPS_MAX_LOGPROBS floats,
 * the k (1..OPS_MAX_LOGPROBS) best log-probabilities, then OPS_MAX_LOGPROBS ids (int bits; -1 past
 * the row's finite values); ties to the lower id, as op_argmax */
int op_logprobs(ops *o, cl_mem x, uint32_t n, cl_mem ids, uint32_t roff, uint32_t nrows, uint32_t row0, uint32_t k,
                cl_mem out);

#define OPS_SAMPLE_MAXK 2048 /* SMP_MAXK in logits.cl */
/* sampled rows' candidates: nrows rows of x as 4-int descriptors from d0 on describe them ({row, k,
 * pen_off, n_pen}; row relative to row0): row d0 + j of out (2 * OPS_SAMPLE_MAXK words) gets the row's k
 * (<= OPS_SAMPLE_MAXK) best values sorted best first (ties to the lower id), then their ids; pval gets
 * the row's values at the n_pen tokens pen[pen_off ...] */
int op_sample_topk(ops *o, cl_mem x, uint32_t n, cl_mem desc, uint32_t d0, uint32_t nrows, uint32_t row0, cl_mem pen,
                   cl_mem pval, cl_mem out);

/* moe.c: z [ntok][n_exp] router logits -> sel/wsel [ntok][n_used] (n_exp <= 256) */
int op_router_topk(ops *o, cl_mem z, uint32_t n_exp, uint32_t n_used, cl_mem exp_scale, cl_mem sel, cl_mem wsel,
                   uint32_t ntok);
/* expert products: W holds n_exp experts of rows_e rows x k (weight.rows = n_exp * rows_e). With
 * tensor cores and more than 4 tokens, op_moe_up groups the pairs by expert into ord
 * (ops_moe_ord_ints) and op_moe_down reuses that grouping, its per-pair products going through yd
 * (ntok * n_used * rows_e floats). */
size_t ops_moe_ord_ints(uint32_t n_exp, uint32_t nsel);
int op_moe_up(ops *o, const weight *w, uint32_t rows_e, cl_mem X, uint32_t ldx, cl_mem sel, uint32_t n_used,
              cl_mem gu, cl_mem ord, uint32_t ntok);
/* act = gelu(gate) * up of gu's [f gate | f up] rows (nsel of them) */
int op_geglu_split(ops *o, cl_mem gu, uint32_t f, cl_mem act, uint32_t nsel);
/* the same with the activation fn (OPS_ACT_*) */
int op_glu_split(ops *o, int fn, cl_mem gu, uint32_t f, cl_mem act, uint32_t nsel);
/* Y [ntok][rows_e] = sum over a token's experts of wsel * W_e . geglu(gate, up), from gu's rows of
 * [k gate | k up] values per (token, slot) pair; act (nsel * k floats) holds geglu's output where a
 * path needs it materialised (the int8 decode path folds it into its X quantization). */
int op_moe_down(ops *o, const weight *w, uint32_t rows_e, cl_mem gu, cl_mem act, cl_mem sel, cl_mem wsel,
                uint32_t n_used, cl_mem Y, cl_mem ord, cl_mem yd, uint32_t ntok);
/* the same with the activation fn (OPS_ACT_GELU: op_moe_down; OPS_ACT_SILU: Qwen's experts) */
int op_moe_down_glu(ops *o, int fn, const weight *w, uint32_t rows_e, cl_mem gu, cl_mem act, cl_mem sel,
                    cl_mem wsel, uint32_t n_used, cl_mem Y, cl_mem ord, cl_mem yd, uint32_t ntok);

/* delta.c: the gated-delta (linear attention) layers of Qwen 3.5 / 3.6 on FP32 state (kernels/delta.cl
 * gives the math and layouts). A forward's T token rows are cut into runs, one per sequence: */
typedef struct delta_run {
    int32_t t0, len;            /* first token row, tokens (>= 1) */
    int32_t pos;                /* the sequence position of the first token (chunks end at multiples of C) */
    int32_t src, dst;           /* state slots read and written (equal: in place) */
} delta_run;
#define OPS_DELTA_RUN_INTS 5    /* DR_INTS in delta.cl */
#define OPS_DELTA_DK_MAX 128    /* DELTA_DK_MAX */
#define OPS_DELTA_C_MAX 64      /* DELTA_C_MAX */
#define OPS_DELTA_KC_MAX 8
/* the runs on the host (sorted by t0, not overlapping, t0 + len <= ntok; a run's dst is no other run's
 * src or dst) and the same table on the device */
typedef struct delta_runs { const delta_run *h; cl_mem d; uint32_t n, ntok; } delta_runs;
/* the run table d of a batch of ntok tokens from their sequences and positions on the device: a run per
 * stretch of one sequence at consecutive positions, src = dst = the sequence (a slot per sequence) */
int op_delta_runs(ops *o, cl_mem seq, cl_mem pos, uint32_t ntok, cl_mem d);
/* a layer's shape: Hk q/k heads of dk, Hv value heads of dv (a multiple of Hk), conv kernel kc;
 * tiled: value head h reads q/k head h % Hk (the GGUF's order), else h / (Hv / Hk) */
typedef struct delta_shape { uint32_t hk, hv, dk, dv, kc; int tiled; } delta_shape;
/* the layer's state: n_slots slots of slot_floats floats, the conv state [kc-1][Dc] at conv_off and
 * S [Hv][dk][dv] at ssm_off within each */
typedef struct delta_state { cl_mem buf; uint32_t n_slots, slot_floats, conv_off, ssm_off; } delta_state;
/* The conv of the runs' rows of x [T][Dc] (Dc = 2·Hk·dk + Hv·dv: q, k, v) with weights cw [Dc][kc],
 * earlier inputs from each run's source slot, then SiLU, into y [T][Dc] (y != x): q and k heads
 * L2-normalised (x·rsqrt(Σx² + eps)), q also times dk^-1/2; beta [T][Hv] = sigmoid(b), g [T][Hv] =
 * ssm_a · softplus(a + dt_bias) (ssm_a = −exp(A_log), as the GGUF holds it); each run's last kc-1 raw
 * inputs to its destination slot's conv state. Rows outside the runs are not written. */
int op_delta_conv(ops *o, const delta_shape *sh, const delta_runs *r, cl_mem x, cl_mem cw, cl_mem a, cl_mem b,
                  cl_mem ssm_a, cl_mem dt_bias, float eps, const delta_state *st, cl_mem y, cl_mem beta, cl_mem g);
/* The delta rule over each run from its source slot's S to its destination slot's, with y, beta, g
 * as op_delta_conv left them: per token S ← e^g S; u = β(v − Sᵀk); S ← S + k uᵀ; out [T][Hv][dv] =
 * Sᵀq. Runs shorter than the policy's delta_chunk_min on delta_step, the others on the chunk form
 * (chunks of delta_chunk tokens at absolute positions). */
int op_delta_scan(ops *o, const delta_shape *sh, const delta_runs *r, cl_mem y, cl_mem beta, cl_mem g,
                  const delta_state *st, cl_mem out);
/* y = x·rsqrt(mean(x²) + eps)·w·silu(z) per row of n values (rows of x, z, y alike; w [n]; y may be x) */
int op_rmsnorm_gated(ops *o, cl_mem x, cl_mem z, cl_mem w, cl_mem y, uint32_t rows, uint32_t n, float eps);

/* vision.c: the vision encoder's ops (kernels/vision.cl; docs/design-vision.md 4.4). Rows are float, contiguous;
 * pos is [ntok][2] int (x, y) on the device. */

#define OPS_VATT_DPT 8  /* its output values per item: head dims up to OPS_VATT_L * OPS_VATT_DPT */
/* x [ntok][n] += table[pos.x] + table[n_pos + pos.y]: table holds the x rows then the y rows ([2][n_pos][n]); a
 * position outside [0, n_pos) makes its row NaN (the caller checks positions on the host) */
int op_pos_add2d(ops *o, cl_mem x, cl_mem table, uint32_t n_pos, cl_mem pos, uint32_t ntok, uint32_t n);
/* In place on x [ntok][nh][hd] per head: norm 1: x / rms(x) · w (w [hd]), 2: x / rms(x), 0: none; then, when pos
 * is set, the axial 2-D RoPE (transformers' Gemma4 vision): the head's first half rotated by pos.x, the second by
 * pos.y, NEOX pairs (i, i + hd/4) in each half at frequency theta^(-4i/hd). hd <= OPS_VNORM_MAX, a multiple of
 * 4 when roped. With
 * h16 set, also the result as f16 [nh][ntok][hdp], zero past hd (hdp >= hd: op_attention_dense_f16's operands). */
#define OPS_VNORM_MAX 512 /* head dims of op_norm_rope2d at most (VN_MAX in vision.cl) */
int op_norm_rope2d(ops *o, cl_mem x, uint32_t ntok, uint32_t nh, uint32_t hd, cl_mem w, int norm, float eps,
                   cl_mem pos, float theta, cl_mem h16, uint32_t hdp);
/* the padded head width op_attention_dense_f16 takes head dim hd at (its operands' hdp), 0 where it has no kernel
 * for it; ops_vision_fa_width does not ask the policy (for sizing buffers at load), ops_vision_fa does */
uint32_t ops_vision_fa_width(const cl_runtime *rt, uint32_t hd);
uint32_t ops_vision_fa(const ops *o, uint32_t hd);
/* Dense non-causal attention: out [ntok][nh][hd] = softmax(q·kᵀ·scale) v per head over the keys
 * [ranges[t].x, ranges[t].y) of query t (its image: no attention across ranges, none masked inside); q as out,
 * k and v [ntok][nkv][hd] (nh a multiple of nkv, hd <= OPS_VATT_L · OPS_VATT_DPT); every range non-empty, within
 * [0, ntok). Online softmax over key tiles: no score matrix. */
int op_attention_dense(ops *o, cl_mem q, cl_mem k, cl_mem v, cl_mem out, cl_mem ranges, uint32_t ntok, uint32_t nh,
                       uint32_t nkv, uint32_t hd, float scale);
/* The same on f16 tensor cores (vis_fa): q16 [nh][ntok][hdp], k16 and v16 [nkv][ntok][hdp] as op_norm_rope2d
 * writes them, hdp = ops_vision_fa(o, hd); tiles [n_tiles][2] int: [first, end) query rows, at most
 * OPS_VFA_TILE, all of one range (ops_vision_tiles makes them: an image's rows from its first, so that its
 * result does not depend on what else is encoded). Every row is in a tile. */
#define OPS_VFA_TILE 64
int op_attention_dense_f16(ops *o, cl_mem q16, cl_mem k16, cl_mem v16, uint32_t hdp, cl_mem out, cl_mem ranges,
                           cl_mem tiles, uint32_t n_tiles, uint32_t ntok, uint32_t nh, uint32_t nkv, uint32_t hd,
                           float scale);
/* the tiles of rows [r0, r0 + n) (one image) into tiles [2 * i], from i = *nt on; *nt grows by their count,
 * at most (n + OPS_VFA_TILE - 1) / OPS_VFA_TILE */
void ops_vision_tiles(int32_t *tiles, uint32_t *nt, uint32_t r0, uint32_t n);
/* out [nout][n]: row c = s · Σ of the k x k rows of x at cells[c].x + dy · cells[c].y + dx (dy, dx < k): the
 * top-left patch row of its cell and its grid's width */
int op_avgpool(ops *o, cl_mem x, cl_mem cells, cl_mem out, uint32_t nout, uint32_t n, uint32_t k, float s);
/* y = min(max(x, lo), hi) over n values (y may be x); lo <= hi, neither NaN (infinite: no bound) */
int op_clamp(ops *o, cl_mem x, cl_mem y, float lo, float hi, uint32_t n);
/* y [rows][n] = (x - bias) · scale per column (bias, scale [n]; y may be x) */
int op_standardize(ops *o, cl_mem x, cl_mem y, cl_mem bias, cl_mem scale, uint32_t rows, uint32_t n);

void ops_profile_reset(ops *o);
/* reads the finished launches' times (after the queue drained: a step's end) */
void ops_profile_harvest(ops *o);
/* prints the per-op profile table to stderr (draining the queue first) */
void ops_profile_print(ops *o, double wall_ms, int steps);

#endif
