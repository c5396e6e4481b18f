/* draft.h — the engine's MTP drafter (issue 22, docs/design-mtp-drafter.md): a drafter model loaded beside
 * the target, the target's normed hidden rows it starts from (kept per sequence from the step that computed
 * them), and the k-step draft loop over many sequences at once. Engine-internal: engine_draft is the API. */
#ifndef CLGEMMA_DRAFT_H
#define CLGEMMA_DRAFT_H

#include "engine.h"
#include "gguf.h"
#include "kv.h"
#include "model.h"

typedef struct drafter {
    gguf_file *f;
    model m;
    int loaded;
    fwd_bufs b;
    uint32_t rows;            /* sequences one draft forward holds */
    uint32_t hb;              /* the target's width: a kept row's floats */
    uint32_t n_seq;
    cl_mem keep;              /* [n_seq][ENGINE_DRAFT_KEEP][hb]: rows of each sequence's last step, slot tok % KEEP */
    int32_t *keep_pos0;       /* per sequence: the position of its last step's first token */
    int32_t *keep_n;          /* that step's tokens (0: nothing kept) */
    uint32_t *keep_bits;      /* slots written */
    cl_mem all;               /* [SPEC max k][rows] the drafted ids */
    int32_t *h_ids, *h_pos, *h_prev, *h_seq, *h_all;
    int *h_item;              /* the items of a forward's rows */
} drafter;

/* loads path as target's drafter (model_load_drafter) with buffers for n_seq sequences of up to n_ctx */
int  drafter_create(drafter *d, const char *path, const model *target, cl_runtime *rt, uint32_t n_seq, uint32_t n_ctx,
                    char *err, size_t errlen);
void drafter_destroy(drafter *d);
/* seq's rows are gone (a new, freed or forked sequence) */
void drafter_forget(drafter *d, int seq);
/* a step feeds seq n tokens from position pos0: what was kept of its step before is replaced */
void drafter_step_begin(drafter *d, int seq, uint32_t pos0, int n);
/* rows [row, row + n) of xo (target-width, normed) are seq's tokens [tok, tok + n) of this step */
int  drafter_keep(drafter *d, cl_command_queue q, cl_mem xo, uint32_t row, int seq, int tok, int n);
/* engine_draft's work: items validated here, the target's cache in kv, its length seq_len */
int  drafter_run(drafter *d, const model *target, ops *o, kv_cache *kv, engine_draft_item *items, int n, char *err,
                 size_t errlen);

#endif
