/* test_fcgi_sched.c — the scheduler's KV-budget admission (fcgi/sched.c, fcgi/admit.c) on the tiny
 * Gemma 4 fixture (tests/fixtures/gemma4_dense.gguf: fast steps) with a context of 128 and a KV
 * cache of 192 tokens (6 blocks of 32; at this context every layer is full attention) and 4 slots.
 * Jobs: A and B of 4 blocks each (prompt 4 + 120 tokens), so they never run together, and C of 1.
 *
 * test_budget: kv_budget by hand: promises add up and come back choice by choice (a group's
 *   reservation is kv_budget_need of its live choices), kv_budget_max_tokens is the largest that
 *   fits, and the fixture's rings (at a longer context) are counted as a pool of their own.
 * test_small_passes_young_big: with A running, B waits and C (submitted after it) starts first,
 *   B being younger than pass_s.
 * test_aged_big_holds_later: the same with pass_s short and B older than it: C waits until B
 *   started, so a stream of small jobs cannot starve a big one.
 * test_expires_in_queue: B waits past the queue timeout while A runs: JOB_EXPIRED, never started;
 *   A ends normally.
 * test_priority_goes_first: with A running, B (priority 0) then D (priority -1, as big) wait; when A
 *   ends D starts first (lower first, as vLLM's priority), B after it.
 * test_too_big_and_promises_back: a job bigger than the whole cache is refused (SCHED_TOO_BIG);
 *   after all of the above a job needing every block starts, so every promise came back. */
#include "check.h"
#include "admit.h"
#include "clock.h"
#include "sched.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define FIXTURE "tests/fixtures/gemma4_dense.gguf"

static engine *E;
static metrics *M;
static char err[512];
static const int32_t PROMPT[100] = { 2, 10, 11, 12 }; /* the rest: token 0 */

static sched *make(double queue_timeout, double pass_s)
{
    sched *s;
    sched_opts o = { .max_seqs = 4, .max_queue = 8, .queue_timeout = queue_timeout, .pass_s = pass_s };
    if (sched_create(&s, E, &o, M, err, sizeof err)) { CHECK(0, "sched_create: %s", err); return NULL; }
    return s;
}

static gen_job *submit(sched *s, int n_prompt, int max_tokens, int n)
{
    job_prompt jp = { .ids = PROMPT, .n = n_prompt, .max_tokens = max_tokens };
    job_spec spec = { .prompts = &jp, .n_prompts = 1, .n = n, .t_arrival = monotonic_seconds() };
    sampler_params_default(&spec.sampling);
    gen_job *j = NULL;
    int rc = sched_submit(s, &spec, &j);
    CHECK(rc == SCHED_OK, "submit of %d + %d tokens x %d: %d", n_prompt, max_tokens, n, rc);
    return j;
}

/* how choice 0 of j ended (reading its tokens as they come), JOB_RUNNING while it runs */
static enum job_end state(gen_job *j)
{
    int32_t toks[256];
    job_status st;
    while (job_take(j, 0, toks, NULL, 256, &st) > 0) {}
    return st.end;
}

static enum job_end wait_end(gen_job *j)
{
    double t0 = monotonic_seconds();
    enum job_end e;
    while ((e = state(j)) == JOB_RUNNING && monotonic_seconds() - t0 < 60) usleep(1000);
    return e;
}

static void wait_started(gen_job *j)
{
    double t0 = monotonic_seconds();
    while (!job_started(j) && monotonic_seconds() - t0 < 60) usleep(500);
}

/* A running (4 blocks), then B (4 blocks: it waits) */
static void a_then_b(sched *s, gen_job **a, gen_job **b)
{
    *a = submit(s, 4, 120, 1);
    wait_started(*a);
    *b = submit(s, 4, 120, 1);
}

/* every job ends without an error; the jobs and the scheduler go */
static void end_all(sched *s, gen_job **js, int n)
{
    for (int i = 0; i < n; i++) {
        enum job_end e = wait_end(js[i]);
        CHECK(e == JOB_LENGTH || e == JOB_STOP, "job %d ended %d", i, e);
        job_release(js[i]);
    }
    sched_destroy(s);
}

static void test_budget(void)
{
    kv_budget b;
    kv_budget_init(&b, E);
    CHECK(b.total.full == 6 && b.total.ring == 0, "pools %u / %u", b.total.full, b.total.ring);
    engine_kv_blocks a = kv_budget_need(&b, 4, 120, 1), c = kv_budget_need(&b, 4, 20, 1);
    CHECK(a.full == 4 && c.full == 1 && kv_budget_fits(&b, a), "needs %u, %u", a.full, c.full);
    kv_budget_take(&b, a);
    CHECK(!kv_budget_fits(&b, a) && kv_budget_fits(&b, c) && kv_budget_whole(&b, a), "4 of 6 promised");
    /* a prompt of 40 tokens (1 whole block shared) and 3 choices to 64 tokens: 1 + 3 x 1 blocks;
     * released choice by choice as sched.c does, the promises come back to exactly 0 */
    engine_kv_blocks g = kv_budget_need(&b, 40, 24, 3);
    CHECK(g.full == 4 && !kv_budget_fits(&b, g), "group of 3: %u", g.full);
    kv_budget_give(&b, a);
    kv_budget_take(&b, g);
    for (int live = 3; live > 0; live--) {
        kv_budget_give(&b, kv_budget_need(&b, 40, 24, live));
        kv_budget_take(&b, kv_budget_need(&b, 40, 24, live - 1));
    }
    CHECK(b.promised.full == 0 && b.promised.ring == 0, "left promised %u / %u", b.promised.full, b.promised.ring);
    for (int n = 1; n <= 4; n++)
        for (int p = 1; p < 128; p += 13) {
            int m = kv_budget_max_tokens(&b, p, n, 1000);
            CHECK((m == 0 || kv_budget_whole(&b, kv_budget_need(&b, p, m, n))) &&
                  !kv_budget_whole(&b, kv_budget_need(&b, p, m + 1, n)), "max tokens for %d x %d: %d", p, n, m);
        }
    /* rings: at the fixture's 2048 context its sliding layers keep rings of 17 blocks (window 8 + a
     * chunk of 512), two sequences' worth here and as many again for cached windows; five choices need
     * five rings whatever the full pool */
    engine *e2;
    engine_opts o = { .n_ctx = 2048, .max_seqs = 2 };
    if (engine_load(&e2, FIXTURE, &o, err, sizeof err)) { CHECK(0, "load: %s", err); return; }
    kv_budget r;
    kv_budget_init(&r, e2);
    engine_kv_blocks five = kv_budget_need(&r, 4, 600, 5), four = kv_budget_need(&r, 4, 600, 4);
    CHECK(r.total.ring == 68 && five.ring == 85 && five.full <= r.total.full && !kv_budget_whole(&r, five) &&
          kv_budget_whole(&r, four), "rings: %u of %u, full %u of %u", five.ring, r.total.ring, five.full, r.total.full);
    engine_destroy(e2);
}

static void test_small_passes_young_big(void)
{
    sched *s = make(60, 100);
    if (!s) return;
    gen_job *j[3];
    a_then_b(s, &j[0], &j[1]);
    j[2] = submit(s, 4, 20, 1);
    wait_started(j[2]);
    CHECK(job_started(j[2]) && !job_started(j[1]) && state(j[0]) == JOB_RUNNING, "C %d before B %d while A runs",
          job_started(j[2]), job_started(j[1]));
    end_all(s, j, 3);
}

static void test_aged_big_holds_later(void)
{
    sched *s = make(60, 0.005);
    if (!s) return;
    gen_job *j[3];
    a_then_b(s, &j[0], &j[1]);
    usleep(20000); /* B is older than pass_s now */
    j[2] = submit(s, 4, 20, 1);
    CHECK(state(j[0]) == JOB_RUNNING && !job_started(j[1]), "A ended before C came: nothing was held");
    double t0 = monotonic_seconds();
    while (!job_started(j[2]) && monotonic_seconds() - t0 < 60) usleep(200);
    /* C started, and B (whose start came first in the scheduler's order) must have before it */
    CHECK(job_started(j[2]) && job_started(j[1]), "C started before the older B (started %d / %d)",
          job_started(j[1]), job_started(j[2]));
    end_all(s, j, 3);
}

static void test_expires_in_queue(void)
{
    sched *s = make(0.05, 0);
    if (!s) return;
    gen_job *a, *b;
    a_then_b(s, &a, &b);
    enum job_end eb = wait_end(b);
    CHECK(eb == JOB_EXPIRED && !job_started(b), "B ended %d, started %d", eb, job_started(b));
    job_release(b);
    end_all(s, &a, 1);
}

static void test_priority_goes_first(void)
{
    sched *s = make(60, 100);
    if (!s) return;
    gen_job *j[3];
    a_then_b(s, &j[0], &j[1]);
    job_prompt jp = { .ids = PROMPT, .n = 4, .max_tokens = 120 };
    job_spec spec = { .prompts = &jp, .n_prompts = 1, .n = 1, .t_arrival = monotonic_seconds(), .priority = -1 };
    sampler_params_default(&spec.sampling);
    CHECK(sched_submit(s, &spec, &j[2]) == SCHED_OK, "submit D");
    wait_started(j[2]);
    CHECK(job_started(j[2]) && !job_started(j[1]), "D (priority -1) %d before B (priority 0) %d",
          job_started(j[2]), job_started(j[1]));
    end_all(s, j, 3);
}

static void test_too_big_and_promises_back(void)
{
    sched *s = make(5, 0);
    if (!s) return;
    job_prompt jp = { .ids = PROMPT, .n = 4, .max_tokens = 124 };
    job_spec spec = { .prompts = &jp, .n_prompts = 1, .n = 2, .t_arrival = monotonic_seconds() };
    sampler_params_default(&spec.sampling);
    gen_job *j = NULL;
    CHECK(sched_submit(s, &spec, &j) == SCHED_TOO_BIG && !j, "8 blocks of 6 accepted");
    gen_job *x[3];
    for (int i = 0; i < 3; i++) x[i] = submit(s, 4, 20 + 40 * i, 1 + i % 2);
    for (int i = 0; i < 3; i++) { CHECK(wait_end(x[i]) != JOB_EXPIRED, "job %d expired", i); job_release(x[i]); }
    /* 3 choices of a 100-token prompt to 128 tokens: 3 shared blocks + 3 x 1, the whole cache */
    gen_job *w = submit(s, 100, 28, 3);
    enum job_end e = wait_end(w);
    CHECK(e == JOB_LENGTH || e == JOB_STOP, "the whole-cache job ended %d (expired: a promise was not given back)", e);
    job_release(w);
    sched_destroy(s);
}

int main(void)
{
    check_current = "setup";
    engine_opts o = { .n_ctx = 128, .max_seqs = 4, .kv_tokens = 192 };
    if (engine_load(&E, FIXTURE, &o, err, sizeof err)) { printf("FAIL setup: %s\n", err); return 1; }
    if (metrics_create(&M)) { printf("FAIL setup: metrics\n"); return 1; }
    RUN_TEST(test_budget);
    RUN_TEST(test_small_passes_young_big);
    RUN_TEST(test_aged_big_holds_later);
    RUN_TEST(test_expires_in_queue);
    RUN_TEST(test_priority_goes_first);
    RUN_TEST(test_too_big_and_promises_back);
    metrics_destroy(M, 0);
    engine_destroy(E);
    CHECK_EXIT();
}
