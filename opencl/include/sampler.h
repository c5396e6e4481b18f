/* sampler.h — logits processing and token choice for one sequence.
 * The engine picks greedy tokens on the device; a sampler whose settings are not plain greedy
 * gets the row of logits on the host (see engine_step). No OpenCL here. */
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
