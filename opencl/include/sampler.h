/* sampler.h — logits processing and token choice for one sequence.
 * The engine picks greedy tokens on the device; a sampler whose settings are not plain greedy draws
 * from the row's best values found on the device (sampler_sample_cands), or from the whole row on the
 * host when it asks for logprobs (see engine_step). No OpenCL here. */
#ifndef CLGEMMA_SAMPLER_H
#define CLGEMMA_SAMPLER_H

#include <stdint.h>

typedef struct sampler_params {
    float temperature;        /* 0 = greedy */
    int   top_k;              /* 0 = off */
    float top_p;              /* 1 = off */
    float min_p;              /* 0 = off */
    float repetition_penalty; /* 1 = off (llama.cpp style: divide positive, multiply negative) */
    float frequency_penalty;  /* 0 = off (OpenAI style: minus count * f) */
    float presence_penalty;   /* 0 = off (OpenAI style: minus p if seen) */
    int   penalty_last_n;     /* tokens of history the penalties look at; 0 = all */
    uint64_t seed;
} sampler_params;

void sampler_params_default(sampler_params *p); /* greedy, everything off */

typedef struct sampler sampler;

int  sampler_create(sampler **out, const sampler_params *p, uint32_t n_vocab);
void sampler_destroy(sampler *s);
const sampler_params *sampler_get_params(const sampler *s);
/* 1 when the choice is a plain argmax of the raw logits (the engine then does it on the device) */
int  sampler_is_greedy(const sampler *s);
/* remember a token of the sequence (prompt or generated) for the penalties */
void sampler_accept(sampler *s, int32_t token);
/* choose a token from a row of n_vocab logits (modified in place: penalties applied) */
int32_t sampler_sample(sampler *s, float *logits);
/* Speculative sampling (spec.h) draws from the distribution itself. sampler_dist: the one sampler_sample
 * draws from for a row (penalties applied to logits in place, then the cuts and the temperature): the n
 * tokens of weight > 0, best first, into *ids with their probabilities (sum 1) into *p; temperature 0: the
 * best alone at 1. Both point into the sampler's scratch, valid until its next call; nothing is drawn.
 * sampler_uniform: a draw in [0, 1) from the sampler's seeded generator, the one its choices use. */
int sampler_dist(sampler *s, float *logits, const int32_t **ids, const float **p);
double sampler_uniform(sampler *s);

/* Drawing from the device's best candidates instead of the whole row (engine_step: sampled rows without
 * logprobs). sampler_cand_k: how many of the processed row's best values a draw takes (top_k, else 1024;
 * 1 when greedy with penalties). sampler_pen_tokens: the tokens whose values the penalties change once
 * next[0..n_next) is accepted, each once, into ids; their count (0 without penalties), or -1 when more
 * than cap (draw from the whole row then). sampler_sample_cands (after sampler_accept of the step's
 * tokens): the choice from the m >= k + n_pen best values val of tokens id (best first, ties to the lower
 * id; or the whole row) and the values pval of the tokens pid[0..np) sampler_pen_tokens listed; the same
 * token sampler_sample draws from the whole row; -1 (nothing drawn) when out of memory. */
uint32_t sampler_cand_k(const sampler *s);
int sampler_pen_tokens(sampler *s, const int32_t *next, int n_next, int32_t *ids, int cap);
int32_t sampler_sample_cands(sampler *s, const float *val, const int32_t *id, uint32_t m, const int32_t *pid,
                             const float *pval, int np);

#define SAMPLER_MAX_LOGPROBS 20 /* OpenAI's top_logprobs at most */
/* The log-probabilities of the distribution a token was drawn from: log-softmax of the logits after
 * the penalties, divided by the temperature (1 when greedy), before top-k / top-p / min-p cut it
 * (vLLM's processed logprobs). top: the n_top best, ties to the lower id; tokens at -inf (masked)
 * are never listed, so n_top may be below what was asked. */
typedef struct sampler_logprobs {
    float chosen;                         /* the chosen token's */
    int32_t top_id[SAMPLER_MAX_LOGPROBS];
    float top_lp[SAMPLER_MAX_LOGPROBS];
    int n_top;
} sampler_logprobs;
/* sampler_sample, and the chosen token's log-probability and the n (1..SAMPLER_MAX_LOGPROBS) best
 * into lp, from the same processed row */
int32_t sampler_sample_logprobs(sampler *s, float *logits, int n, sampler_logprobs *lp);
/* How the model scores a given token (a prompt's, for echo): the log-softmax of the raw row (no
 * penalties, temperature 1) at token into lp->chosen, and the n best; the row and the sampler's
 * state are left as they are (only its scratch is used). */
void sampler_score(sampler *s, const float *logits, int32_t token, int n, sampler_logprobs *lp);

#endif
