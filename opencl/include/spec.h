/* spec.h — speculative decoding of one sequence: drafting by prompt lookup or the engine's MTP drafter, verification of a draft in
 * one engine_step, the acceptance, and rollback of what the target rejects (engine_seq_truncate).
 * Greedy samplers verify on the device (engine_item.ids_all): output is token for token plain decoding's.
 * Other samplers verify by rejection sampling on the step's rows (engine_item.logits_all): every output
 * token has the distribution plain sampling gives it after the tokens before it, but the generator's draws
 * fall differently, so a seeded run's tokens differ from plain decoding's with the same seed. */
#ifndef CLGEMMA_SPEC_H
#define CLGEMMA_SPEC_H

#include <stdint.h>

#include "engine.h"

#define SPEC_MAX_DRAFT 16 /* draft tokens one verification takes at most */
#define SPEC_NGRAM_MIN 2  /* spec_next's lookup: a single shared token drafts too often wrongly */
#define SPEC_NGRAM_MAX 5
#define SPEC_PAUSE_MAX 64 /* steps without drafts after drafts rejected whole, at most */

/* Prompt-lookup drafting: the longest suffix of hist[0, n) of n_min..n_max tokens that occurred earlier
 * in hist, at its latest earlier occurrence; the up to k_max tokens that followed it into draft. Returns
 * their count (0: no match). */
int spec_ngram_draft(const int32_t *hist, int n, int n_min, int n_max, int k_max, int32_t *draft);

/* the adaptive rule: the next k after a draft of `proposed` tokens of which `accepted` were taken */
int  spec_k_next(int k, int k_max, int proposed, int accepted);
/* The back-off: after a draft the target rejected whole, no drafts for *wait steps (1, doubling with each
 * such draft in a row up to SPEC_PAUSE_MAX), so text that does not repeat pays at most one failed draft per
 * SPEC_PAUSE_MAX steps; an accepted token clears it. Returns the pause. */
int  spec_pause_next(int *wait, int proposed, int accepted);

/* Greedy acceptance: the target's choices ids[0, k + 1) after the verified tokens (the last accepted
 * token, then draft[0, k)); returns how many draft tokens match the target's choice in order. The
 * tokens the step yields are draft[0, a) then ids[a] (the correction, or the bonus when a == k). */
int spec_accept_greedy(const int32_t *draft, int k, const int32_t *ids);

/* Sampled acceptance: speculative rejection sampling for a drafter that proposes each token with
 * probability 1. rows[i * n_vocab, (i + 1) * n_vocab) for i in 0..k: the target's raw logits after the
 * verified tokens (the last accepted token, then draft[0, i)), modified in place; s has seen every token
 * through the last accepted one. p_i is row i's sampler_dist (penalties counting draft[0, i)): draft[i] is
 * accepted with probability p_i(draft[i]) and fed to s (sampler_accept); on the first rejection *next is
 * drawn from p_i without draft[i], renormalized, and the rest is dropped; after k acceptances *next is drawn
 * from p_k. Returns the accepted count; *next is not fed to s (the next step feeds it, as engine_step's
 * token_out). A batched caller calls it per sequence with that sequence's k + 1 rows. */
int spec_accept_sampled(sampler *s, float *rows, uint32_t n_vocab, const int32_t *draft, int k, int32_t *next);

/* a sequence decoded with drafts: its tokens so far (the drafting's history), the counters for reports */
typedef struct spec_run {
    int on, k_max;
    int adapt;               /* 1: k and the back-off follow spec_k_next / spec_pause_next (the worker's rules); 0:
                              * every step drafts up to k_max (spec_begin's default) */
    int k, pause, wait;
    sampler *smp;            /* the sequence's sampler */
    int32_t *hist;
    int n_hist, cap;
    float *rows;             /* a sampled verification's k + 1 rows of logits */
    size_t rows_cap;
    int32_t next;            /* after spec_next: the target's choice after the tokens it returned */
    int steps, drafted, accepted;
    char err[256];
} spec_run;

/* drafts of up to k_max (1..SPEC_MAX_DRAFT) tokens for a sequence prefilled with prompt[0, n) whose
 * choices smp makes (any sampler; it has seen the prompt); 0, or -1 with r->err */
int  spec_begin(spec_run *r, const int32_t *prompt, int n, int k_max, sampler *smp);
/* tok (the target's last choice, not yet fed) fed with a draft in one step: out gets tok and the draft
 * tokens the target accepted, in order; returns their count and sets r->next (the next choice, not yet
 * fed); -1 with r->err. The sampler sees tok and the accepted drafts, never a rejected one. Stops are the
 * caller's: it checks out[] one token at a time (stop tokens, max_tokens) and drops the rest. */
int  spec_next(spec_run *r, engine *e, int seq, int32_t tok, int32_t *out);
void spec_end(spec_run *r);

#endif
