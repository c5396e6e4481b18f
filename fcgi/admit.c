/* admit.c — see admit.h */
#include "admit.h"

void kv_budget_init(kv_budget *b, const engine *e)
{
    const engine_fit *f = &engine_get_info(e)->fit;
    b->e = e;
    b->total = (engine_kv_blocks){ f->full_blocks, f->ring_blocks };
    b->promised = (engine_kv_blocks){ 0, 0 };
}

engine_kv_blocks kv_budget_need(const kv_budget *b, int n_prompt, int max_tokens, int live)
{
    engine_kv_blocks need = { 0, 0 };
    if (live > 0) engine_kv_need(b->e, n_prompt, max_tokens, live, &need);
    return need;
}

int kv_budget_fits(const kv_budget *b, engine_kv_blocks need)
{
    return (uint64_t)b->promised.full + need.full <= b->total.full &&
           (uint64_t)b->promised.ring + need.ring <= b->total.ring;
}

int kv_budget_whole(const kv_budget *b, engine_kv_blocks need)
{
    return need.full <= b->total.full && need.ring <= b->total.ring;
}

void kv_budget_take(kv_budget *b, engine_kv_blocks need)
{
    b->promised.full += need.full;
    b->promised.ring += need.ring;
}

void kv_budget_give(kv_budget *b, engine_kv_blocks need)
{
    b->promised.full -= need.full < b->promised.full ? need.full : b->promised.full;
    b->promised.ring -= need.ring < b->promised.ring ? need.ring : b->promised.ring;
}

int kv_budget_max_tokens(const kv_budget *b, int n_prompt, int n, int limit)
{
    int lo = 0, hi = limit; /* the need grows with max_tokens: the largest that fits, by halving */
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (kv_budget_whole(b, kv_budget_need(b, n_prompt, mid, n))) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}
