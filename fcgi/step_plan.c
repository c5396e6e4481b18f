/* step_plan.c — a step's token budget shared out: decoders, prompt chunks, then drafts (step_plan.h). */
#include "step_plan.h"

static int min2(int a, int b) { return a < b ? a : b; }

int step_plan(const step_want *w, int n, const step_rule *r, int *take)
{
    int used = 0, first = 1;
    for (int i = 0; i < n; i++) {
        take[i] = w[i].prompt ? 0 : 1;
        used += take[i];
    }
    for (int i = 0; i < n; i++) {
        if (!w[i].prompt) continue;
        int most = w[i].cap > 0 ? min2(w[i].rest, w[i].cap) : w[i].rest;
        int k = min2(most, r->budget - used > 0 ? r->budget - used : 0);
        if (first && k < min2(most, r->min_chunk)) k = min2(most, r->min_chunk);
        first = 0;
        if (k < w[i].rest && k >= STEP_ALIGN_BLOCKS * r->block) k = (w[i].pos + k) / r->block * r->block - w[i].pos;
        take[i] = k;
        used += k;
    }
    int rows = 0, chunks = 0;
    for (int i = 0; i < n; i++) {
        rows += take[i] > 0;
        chunks += w[i].prompt && take[i] > 0;
    }
    int most = r->budget; /* drafts: the budget the prompts left, within a forward's rows */
    if (!chunks && r->decode_tokens > 0 && r->decode_tokens < most) most = r->decode_tokens;
    for (int i = 0; i < n; i++) {
        if (w[i].prompt || w[i].draft <= 0) continue;
        int k = min2(w[i].draft, most - used > 0 ? most - used : 0);
        if (r->rows > 0) k = min2(k, r->rows - rows > 0 ? r->rows - rows : 0);
        if (w[i].cap > 0) k = min2(k, w[i].cap - 1);
        take[i] += k;
        used += k;
        rows += k;
    }
    return used;
}
