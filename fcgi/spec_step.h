/* spec_step.h — prompt-lookup speculative decoding of the scheduler's decoding sequences (issue 22):
 * a choice that may take drafts (no logprobs, logit_bias or allow mask: a verification's rows before the
 * last come back raw) feeds its token with a draft of up to k tokens (the longest 2-5 token suffix of its
 * prompt and output that occurred before, and what followed it: spec.h), verified in the same step; the
 * draft's accepted prefix and the target's next token come out, the rejected positions are cut from the KV
 * cache. The scheduler hands the tokens out one at a time through its one path (stops, max_tokens, the
 * channel), each once, as plain decoding's.
 *
 * Greedy choices verify on the device (engine_item.ids_all): output and usage are plain greedy decoding's
 * token for token. Other samplers (temperature, top-k/p, min-p, penalties) verify by rejection sampling on
 * the step's rows (logits_all, spec_accept_sampled): every token has the distribution plain sampling gives
 * it, but the seeded generator's draws fall differently, so a seed's output differs from --spec off's.
 *
 * The draft length k adapts per sequence (spec_k_next): a draft accepted whole doubles it, one the
 * target rejected part of sets it to the accepted count + 1; 1 <= k <= --draft-max.
 *
 * Bookkeeping only: the scheduler owns the engine, the budget (step_plan.h) and the output. */
#ifndef CLGEMMA_FCGI_SPEC_STEP_H
#define CLGEMMA_FCGI_SPEC_STEP_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "metrics.h"
#include "spec.h"

enum spec_mode { SPEC_OFF = 0, SPEC_NGRAM, SPEC_AUTO, SPEC_MTP, SPEC_MODES };

/* auto: mtp where the engine has a drafter (--draft); else ngram where a step of drafts runs decode's
 * products (engine_info.draft_rows > 0: GPUs with int8 decode), where one draft token costs 10-40% of a
 * step at one sequence (H200); off elsewhere (the CPU verifies a draft at about a prompt token's cost each) */
#define SPEC_MODE_DEFAULT SPEC_AUTO
#define SPEC_DRAFT_DEFAULT 8 /* --draft-max, 1..SPEC_MAX_DRAFT */
/* engine_opts.state_checkpoints of a worker that may draft: the verifications per step a model with a recurrent
 * state can cut back (design-qwen35 3.6: draft_rows / 2, a step of draft_rows tokens holding that many drafts) */
#define SPEC_STATE_CHECKPOINTS (ENGINE_DECODE_ROWS / 2)

/* "off" / "ngram" / "mtp" / "auto" to its mode; -1 for any other name */
int spec_mode_parse(const char *name);
const char *spec_mode_name(int mode);
/* the mode a worker runs: auto resolved for its engine (off, ngram or mtp); off for a recurrent state without
 * checkpoints (engine_info.state_checkpoints) */
int spec_mode_effective(int mode, const engine_info *info);

/* one choice's drafting state (engine thread) */
typedef struct spec_seq {
    int32_t *hist;            /* prompt, then every token output: drafts copy from it, a cut keeps its head */
    int n_hist, cap;          /* NULL hist: the choice never drafts */
    int k, k_max;             /* draft length now, and its most */
    int pause, wait;          /* steps left without drafting; the pause the next draft rejected whole sets */
    int n_draft;              /* this step's draft (feed[1..]) */
    int mtp;                  /* drafts come from the engine's drafter (spec_mtp_drafts), not prompt lookup */
    int want;                 /* mtp: the draft length spec_seq_draft asks the drafter for (0: none) */
    int32_t feed[SPEC_MAX_DRAFT + 1]; /* the choice's token, then the draft: the step's item */
    int32_t ids[SPEC_MAX_DRAFT + 1];  /* greedy: the target's choice after each of them (ids_all) */
    sampler *smp;             /* the choice's; sampled ones are fed here in a draft's step, not by the engine */
    int sampled;              /* not greedy: verified by rejection sampling on rows */
    uint32_t n_vocab;
    float *rows;              /* sampled: (k_max + 1) * n_vocab logits, made at the first draft */
    int32_t out[SPEC_MAX_DRAFT + 1];  /* after spec_seq_accept: the tokens the step yields, in order */
    int n_out;
} spec_seq;

/* Readies q for a choice of a prompt of n tokens that generates up to max_tokens with sampler smp (NULL:
 * greedy) over n_vocab tokens: with mode on and the choice eligible, hist holds the prompt and has room for
 * all of it; otherwise q stays off. 0, or -1 out of memory. */
int  spec_seq_init(spec_seq *q, int mode, int k_max, int eligible, sampler *smp, uint32_t n_vocab,
                   const int32_t *prompt, int n, int max_tokens);
void spec_seq_free(spec_seq *q);
/* a token the choice output (what the next step feeds), appended to its history */
void spec_seq_push(spec_seq *q, int32_t tok);
/* The draft behind tok (the token the step feeds, last in hist) of at most room tokens: the room the
 * context and max_tokens leave (spec_room). Returns its length (0: none; the item is a plain one). An mtp
 * choice returns 0 and sets want: spec_mtp_drafts then drafts for all such choices at once. */
int  spec_seq_draft(spec_seq *q, int room);
/* The drafter's drafts for the n choices qs (each with want > 0) of sequences seqs, in one engine_draft:
 * each q's n_draft (0 where the drafter has no row for its sequence yet). 0, or -1 with err (every
 * n_draft 0: the step decodes plainly). */
int  spec_mtp_drafts(engine *e, spec_seq *const *qs, const int *seqs, int n, char *err, size_t errlen);
/* Draft tokens a sequence may take: its outputs stay within max_tokens (n_gen of them so far) and its
 * cache one short of n_ctx (len now), where plain decoding's length stop decides alone. */
int  spec_room(int n_ctx, int len, int max_tokens, int n_gen);
/* The step's item for the choice: feed[0] and its first take - 1 draft tokens (engine_item.draft), greedy
 * with ids_all and the sampler, sampled with no sampler and every row (logits_all); no allow, bias or
 * logprobs (a choice with any does not draft). */
void spec_seq_item(spec_seq *q, engine_item *it, int seq, int take);
/* The accept step, after the item went through: out[0, n_out) gets the accepted draft tokens then the
 * target's next one; the rejected positions are cut from the item's sequence (its tokens from hist), k
 * adapts, m counts the draft. 0, or -1 with err when the cut fails. Greedy rows compare ids_all; sampled
 * ones feed feed[0] to the sampler, then spec_accept_sampled feeds the accepted drafts; out's last token is
 * left for the next step to feed, as a plain item's token_out. */
int  spec_seq_accept(spec_seq *q, engine *e, metrics *m, const engine_item *it, char *err, size_t errlen);

#endif
