/* admit.h — the KV budget of a worker: the engine's KV pools shared out as reservations, one per
 * running prompt, so a prompt's sequences start only when the blocks they can ever take fit what
 * running prompts have not been promised (then no running sequence finds the cache full). A
 * prompt's reservation is engine_kv_need of its prompt, max_tokens and live choices: it shrinks as
 * its choices end and is gone with the last. The scheduler's engine thread owns the promises; the
 * whole-cache questions (kv_budget_whole, kv_budget_max_tokens) are for any thread. */
#ifndef CLGEMMA_FCGI_ADMIT_H
#define CLGEMMA_FCGI_ADMIT_H

#include "engine.h"

typedef struct kv_budget {
    const engine *e;
    engine_kv_blocks total;     /* the pools' blocks */
    engine_kv_blocks promised;  /* reserved by running prompts */
} kv_budget;

/* e's pools, nothing promised */
void kv_budget_init(kv_budget *b, const engine *e);
/* what a prompt of n_prompt tokens holds reserved while `live` of its choices of up to max_tokens
 * tokens each run (0 live: nothing) */
engine_kv_blocks kv_budget_need(const kv_budget *b, int n_prompt, int max_tokens, int live);
/* 1 when need fits the blocks not promised */
int  kv_budget_fits(const kv_budget *b, engine_kv_blocks need);
/* 1 when need fits the whole cache, promises aside: whether a prompt could ever start */
int  kv_budget_whole(const kv_budget *b, engine_kv_blocks need);
void kv_budget_take(kv_budget *b, engine_kv_blocks need);
void kv_budget_give(kv_budget *b, engine_kv_blocks need);
/* The most tokens, at most limit, that n choices of a prompt of n_prompt tokens may each generate
 * within the whole cache; 0 when not even one fits. */
int  kv_budget_max_tokens(const kv_budget *b, int n_prompt, int n, int limit);

#endif
