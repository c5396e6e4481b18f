/* test_fcgi_step_plan.c — a step's token budget shared out (fcgi/step_plan.c): decoders first, one token
 * each; prompts in admission order in what is left; the oldest prompt at least min_chunk; long chunks end on
 * block boundaries, what that drops going to the next prompt; caps (prompt-logprob pieces) respected; and a
 * random walk in which every prompt finishes, no step exceeds the budget but for the oldest prompt's least
 * chunk. Drafts (speculative decoding) take only what the prompts left, each cut to fit, within its cap, and a
 * step of decoders and drafts only stays within decode_tokens. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "step_plan.h"

static const step_rule RULE = { 64, 32, 32, 0, 0 };

static step_want dec(void) { return (step_want){ 0, 1, 0, 0, 0 }; }
static step_want drf(int draft) { return (step_want){ 0, 1, 0, 0, draft }; }
static step_want prm(int rest, int pos, int cap) { return (step_want){ 1, rest, pos, cap, 0 }; }

static void test_decoders_first_then_prompts_in_order(void)
{
    step_want w[5] = { prm(1000, 0, 0), dec(), prm(1000, 0, 0), dec(), dec() };
    int take[5];
    int n = step_plan(w, 5, &RULE, take);
    CHECK(take[1] == 1 && take[3] == 1 && take[4] == 1, "decoders %d %d %d", take[1], take[3], take[4]);
    CHECK(take[0] == 61 && take[2] == 0 && n == 64, "oldest prompt %d, next %d, step %d", take[0], take[2], n);
}

static void test_several_prompts_share_a_step(void)
{
    step_want w[3] = { prm(20, 0, 0), prm(30, 0, 0), prm(500, 0, 0) };
    int take[3];
    int n = step_plan(w, 3, &RULE, take);
    CHECK(take[0] == 20 && take[1] == 30 && take[2] == 14 && n == 64, "%d %d %d (%d)", take[0], take[1], take[2], n);
}

static void test_decoders_over_the_budget_leave_the_oldest_prompt_a_block(void)
{
    enum { N = 302 }; /* 300 decoders and two prompts */
    step_want w[N];
    int take[N];
    step_rule r = { 256, 32, 32, 0, 0 };
    for (int i = 0; i < N; i++) w[i] = dec();
    w[100] = prm(4000, 0, 0);
    w[200] = prm(4000, 0, 0);
    int n = step_plan(w, N, &r, take);
    CHECK(take[100] == 32 && take[200] == 0 && n == 300 + 32, "300 decoders, budget 256: oldest %d, next %d, step %d",
          take[100], take[200], n);
    w[100] = prm(5, 0, 0);
    n = step_plan(w, N, &r, take);
    CHECK(take[100] == 5 && n == 305, "a 5-token rest: %d (step %d)", take[100], n);
}

static void test_long_chunks_end_on_block_boundaries(void)
{
    step_rule r = { 512, 32, 32, 0, 0 };
    step_want w[3] = { dec(), prm(2000, 64, 0), prm(2000, 0, 0) };
    int take[3];
    step_plan(w, 3, &r, take);
    CHECK(take[1] == 480 && take[2] == 31, "511 left: %d to the first prompt (ends at %d), %d to the next", take[1],
          64 + take[1], take[2]);
    w[1] = prm(2000, 10, 0); /* an unaligned start: its chunk ends on the next boundary below */
    step_plan(w, 2, &r, take);
    CHECK((10 + take[1]) % 32 == 0 && take[1] > 511 - 32, "from 10: %d", take[1]);
    w[1] = prm(300, 64, 0); /* the whole rest: no rounding */
    step_plan(w, 2, &r, take);
    CHECK(take[1] == 300, "the rest: %d", take[1]);
    step_want small[2] = { dec(), prm(2000, 0, 0) }; /* under four blocks: every token kept */
    step_plan(small, 2, &RULE, take);
    CHECK(take[1] == 63, "63 left of 64: %d", take[1]);
}

static void test_caps_hold(void)
{
    step_want w[2] = { prm(100, 0, 16), prm(100, 0, 16) };
    int take[2];
    int n = step_plan(w, 2, &RULE, take);
    CHECK(take[0] == 16 && take[1] == 16 && n == 32, "pieces %d %d", take[0], take[1]);
}

static void test_drafts_take_what_prompts_leave(void)
{
    step_want w[4] = { drf(8), prm(40, 0, 0), drf(8), dec() };
    int take[4];
    int n = step_plan(w, 4, &RULE, take); /* 3 decoders, the prompt's 40, then 21 left: 8 and 8 */
    CHECK(take[1] == 40 && take[0] == 9 && take[2] == 9 && take[3] == 1 && n == 59, "%d %d %d %d (%d)", take[0],
          take[1], take[2], take[3], n);
    w[1] = prm(1000, 0, 0); /* a long prompt takes the rest: no drafts */
    n = step_plan(w, 4, &RULE, take);
    CHECK(take[0] == 1 && take[2] == 1 && take[1] == 61 && n == 64, "%d %d %d (%d)", take[0], take[1], take[2], n);
    step_want d[3] = { drf(16), drf(16), drf(16) }; /* no prompt: cut to the budget in order */
    step_rule r = { 24, 32, 32, 0, 0 };
    n = step_plan(d, 3, &r, take);
    CHECK(take[0] == 17 && take[1] == 6 && take[2] == 1 && n == 24, "%d %d %d (%d)", take[0], take[1], take[2], n);
    d[0].cap = 5; /* a sequence's cap holds its token and draft together */
    n = step_plan(d, 1, &RULE, take);
    CHECK(take[0] == 5 && n == 5, "capped: %d", take[0]);
    step_want m[4] = { drf(8), prm(40, 0, 0), drf(8), drf(8) }; /* a forward's 16 rows: 3 decoders, a chunk, 12 */
    step_rule rr = { 512, 32, 32, 16, 0 };
    n = step_plan(m, 4, &rr, take);
    CHECK(take[0] == 9 && take[2] == 5 && take[3] == 1 && take[1] == 40 && n == 55, "rows: %d %d %d %d (%d)", take[0],
          take[1], take[2], take[3], n);
    step_rule rd = { 512, 32, 32, 0, 16 }; /* decoders and drafts only: 16 tokens (int8 decode products) */
    n = step_plan(d, 3, &rd, take);
    CHECK(take[0] == 5 && take[1] == 10 && take[2] == 1 && n == 16, "decode tokens: %d %d %d (%d)", take[0], take[1],
          take[2], n); /* d[0] capped at 5 above */
    n = step_plan(m, 4, &rd, take); /* a prompt chunk makes it a prompt step: no such bound */
    CHECK(take[0] == 9 && take[1] == 40 && take[2] == 9 && take[3] == 9 && n == 67, "with a chunk: %d %d %d %d (%d)",
          take[0], take[1], take[2], take[3], n);
}

static void test_random_walk_every_prompt_finishes(void)
{
    enum { N = 12 };
    uint64_t rs = 0xc4u;
    step_want w[N];
    int take[N], steps = 0, worst = 0;
    for (int i = 0; i < N; i++) {
        rs = rs * 6364136223846793005ull + 1442695040888963407ull;
        int len = 1 + (int)((rs >> 33) % 3000);
        w[i] = i % 3 == 0 ? drf(i % 2 ? 8 : 0) : prm(len, 0, i % 5 == 1 ? 16 : 0);
    }
    step_rule r = { 100, 32, 32, 0, 0 };
    for (int left = 1; left && steps < 100000; steps++) {
        int n = step_plan(w, N, &r, take), oldest = -1, decoders = 0;
        for (int i = 0; i < N; i++) {
            if (w[i].prompt && oldest < 0) oldest = i;
            decoders += !w[i].prompt;
        }
        int most = decoders + (oldest >= 0 && r.budget - decoders < r.min_chunk ? r.min_chunk : r.budget - decoders);
        for (int i = 0; i < N; i++) /* drafts only in the budget the prompts left */
            CHECK(w[i].prompt || take[i] == 1 || (take[i] <= 1 + w[i].draft && n <= r.budget), "step %d: draft %d",
                  steps, take[i]);
        if (n > worst) worst = n;
        CHECK(n <= (most > r.budget ? most : r.budget), "step %d: %d tokens", steps, n);
        CHECK(oldest < 0 || take[oldest] > 0, "step %d: the oldest prompt got nothing", steps);
        left = 0;
        for (int i = 0; i < N; i++) {
            if (!w[i].prompt) continue;
            CHECK(take[i] <= w[i].rest && (!w[i].cap || take[i] <= w[i].cap), "step %d: %d of %d", steps, take[i],
                  w[i].rest);
            w[i].rest -= take[i];
            w[i].pos += take[i];
            if (w[i].rest == 0) w[i] = drf(4); /* its prompt is in: it decodes */
            else left = 1;
        }
        if (check_failures_here) break;
    }
    CHECK(steps < 100000, "prompts never finished");
    printf("  %d steps, at most %d tokens\n", steps, worst);
}

int main(void)
{
    RUN_TEST(test_decoders_first_then_prompts_in_order);
    RUN_TEST(test_several_prompts_share_a_step);
    RUN_TEST(test_decoders_over_the_budget_leave_the_oldest_prompt_a_block);
    RUN_TEST(test_long_chunks_end_on_block_boundaries);
    RUN_TEST(test_caps_hold);
    RUN_TEST(test_drafts_take_what_prompts_leave);
    RUN_TEST(test_random_walk_every_prompt_finishes);
    CHECK_EXIT();
}
