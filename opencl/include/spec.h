/* spec.h — speculative decoding of one sequence: drafting by prompt lookup, verification of a draft in
 * one engine_step (engine_item.ids_all), the greedy acceptance, and rollback of what the target rejects
 * (engine_seq_truncate). Greedy output is token for token plain decoding's. */
#ifndef CLGEMMA_SPEC_H
#define CLGEMMA_SPEC_H

#include <stdint.h>

#include "engine.h"

#define SPEC_MAX_DRAFT 16 /* draft tokens one verification takes at most */

/* Prompt-lookup drafting: the longest suffix of hist[0, n) of n_min..n_max tokens that occurred earlier
 * in hist, at its latest earlier occurrence; the up to k_max tokens that followed it into draft. Returns
 * their count (0: no match). */
int spec_ngram_draft(const int32_t *hist, int n, int n_min, int n_max, int k_max, int32_t *draft);

/* Greedy acceptance: the target's choices ids[0, k + 1) after the verified tokens (the last accepted
 * token, then draft[0, k)); returns how many draft tokens match the target's choice in order. The
 * tokens the step yields are draft[0, a) then ids[a] (the correction, or the bonus when a == k). */
int spec_accept_greedy(const int32_t *draft, int k, const int32_t *ids);

/* a sequence decoded with drafts: its tokens so far (the drafting's history), the counters for reports */
typedef struct spec_run {
    int on, k_max;
    sampler *smp;            /* the sequence's (greedy) sampler */
    int32_t *hist;
    int n_hist, cap;
    int32_t next;            /* after spec_next: the target's choice after the tokens it returned */
    int steps, drafted, accepted;
    char err[256];
} spec_run;

/* drafts of up to k_max (1..SPEC_MAX_DRAFT) tokens for a sequence prefilled with prompt[0, n) whose
 * choices smp makes (greedy only: sampled speculation is not here yet); 0, or -1 with r->err */
int  spec_begin(spec_run *r, const int32_t *prompt, int n, int k_max, sampler *smp);
/* tok (the target's last choice, not yet fed) fed with a draft in one step: out gets tok and the draft
 * tokens the target agreed with, in order; returns their count and sets r->next; -1 with r->err */
int  spec_next(spec_run *r, engine *e, int seq, int32_t tok, int32_t *out);
void spec_end(spec_run *r);

#endif
