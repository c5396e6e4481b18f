/* step_plan.h — what one scheduler step feeds the engine (Sarathi-style chunked prefill): every
 * decoding sequence its one token first, then prompts in admission order chunks of what is left of
 * the step's token budget, so a long prompt entering holds running streams up for one chunk per
 * step instead of its whole prefill. Pure arithmetic: no engine, no jobs here.
 *
 * The rule, in order:
 *   1. each decoding sequence takes 1 token (all of them, whatever the budget);
 *   2. the oldest prompt takes min(its rest, its cap, what is left), but at least min(its rest, its
 *      cap, min_chunk): with decoders filling the budget (300 of them, budget 256) a step is 300 +
 *      min_chunk tokens, so the prompt still moves;
 *   3. later prompts take min(their rest, their cap, what is left), nothing once the budget is spent;
 *   4. a chunk that leaves part of its prompt for a later step and spans at least STEP_ALIGN_BLOCKS
 *      blocks ends on a block boundary of its sequence (what the rounding drops goes to the next
 *      prompt), so the prefix cache registers whole blocks as chunks complete;
 *   5. decoding sequences' drafts (speculative decoding: spec_step.h) take what the prompts left, in
 *      order, each cut to what is left (its first tokens), so drafts never slow a prompt's prefill;
 *      and no more than the output rows of one forward leave (every draft token is a row; a decoder
 *      and a prompt chunk count one each), so drafts never cost a second forward; in a step with no
 *      prompt chunk, no more than decode_tokens leave (the engine's draft_rows: past it the whole step
 *      leaves the int8 decode products and costs up to twice as much). */
#ifndef CLGEMMA_FCGI_STEP_PLAN_H
#define CLGEMMA_FCGI_STEP_PLAN_H

#define STEP_ALIGN_BLOCKS 4 /* shorter chunks keep every token: rounding would cost up to a quarter */

/* one running sequence's claim on the step */
typedef struct step_want {
    int prompt;   /* 1: in its prompt (chunked); 0: decoding (one token) */
    int rest;     /* prompt tokens not yet fed (>= 1) */
    int pos;      /* tokens already in its KV cache: where its chunk starts */
    int cap;      /* most tokens one step may take (0: no cap) */
    int draft;    /* decoding: draft tokens it would feed after its one (0: none) */
} step_want;

typedef struct step_rule {
    int budget;     /* tokens per step (>= 1) */
    int min_chunk;  /* the oldest prompt's least chunk (>= 1) */
    int block;      /* KV block tokens (>= 1) */
    int rows;       /* output rows one forward holds (engine_info.max_rows; 0: no limit) */
    int decode_tokens; /* a step of decoders and drafts only: its tokens at most (engine_info.draft_rows;
                        * 0: no limit) */
} step_rule;

/* Fills take[i] for the n sequences (in admission order): tokens it feeds this step (a decoder: 1 +
 * the draft tokens it got), 0 when it sits the step out. Returns the step's tokens. */
int step_plan(const step_want *w, int n, const step_rule *r, int *take);

#endif
