/* engine_int.h — the engine's state, shared by the files that implement engine.h (engine.c: loading
 * and sequences; engine_step.c: steps; engine_image.c: images). Nothing outside opencl/ includes it. */
#ifndef CLGEMMA_ENGINE_INT_H
#define CLGEMMA_ENGINE_INT_H

#include "engine.h"
#include "chat.h"
#include "choice.h"
#include "draw.h"
#include "draft.h"
#include "gguf.h"
#include "kv.h"
#include "media.h"
#include "model.h"
#include "ops.h"
#include "runtime.h"
#include "vision.h"

struct engine {
    engine_info info;
    gguf_file *gguf;
    cl_runtime rt;
    int rt_ok;
    model m;
    ops o;
    kv_cache kv;
    fwd_bufs b;
    tokenizer *tok;
    chat_kind chat;       /* the chat template's renderer */
    int32_t stop_ids[8];
    int n_stop;
    uint32_t max_batch, seq_chunk; /* tokens of a forward; of one sequence in it (fit_seq_chunk) */
    double enqueue_s;       /* host time spent enqueuing steps (engine_enqueue_seconds) */
    int hold;               /* engine_hold_steps */
    double device_s;        /* held forwards' time from the gate's opening to their last command's end */
    cl_event gate;          /* the held forward's gate (engine_step.c) */
    int step_drafts;        /* this step's items are single tokens or drafts (engine_item.draft) */
    /* host staging for one step */
    int32_t *h_ids, *h_pos, *h_seq, *h_out;
    size_t h_cap;
    cl_event staged;      /* the last upload from the staging: a step that wrote no output may still queue it */
    float *h_logits;
    choice_plan choice;   /* allow masks, biases and logprobs of the step's choice rows */
    draw_plan draw;       /* its sampled rows drawn from their best values on the device */
    void *synth_buf;      /* synthetic model: the GGUF header in memory (gguf points into it) */
    const tensor_maker *make; /* synthetic model: makes the weights its header has no data for */
    drafter *draft;       /* opts.draft_path's MTP drafter, or NULL */
    vision_model vision;  /* opts.mmproj_path's vision projector (vision.arch NULL: none) */
    media_cache media;    /* encoded images by digest (engine_image.c) */
    uint32_t image_salt;  /* what besides the pixels an image's rows depend on: projector, mask mode */
    /* host staging for one step's image rows: per token the last key it sees (h_hi), and where spans start */
    int32_t *h_hi, *h_span;
    fwd_rows *h_rows;
};

/* a sequence slot taken or given back: no hidden rows of its own to draft from (engine.c); returns seq */
int engine_seq_fresh(engine *e, int seq);

/* engine_image.c's side for engine_step: an image's rows (NULL unless encoded and pinned), its digest */
cl_mem engine_image_rows(engine *e, const engine_image *im);
const uint8_t *engine_image_digest(const engine_image *im);

#endif
