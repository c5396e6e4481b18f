/* test_fcgi_spec.c — speculative decoding in the worker's scheduler (fcgi/spec_step.c, fcgi/sched.c).
 *   test_k_rule: the draft length doubles on a draft taken whole, falls to the accepted count + 1 on a
 *     rejection, stays 1..k_max, and a step without a draft changes nothing.
 *   test_room: drafts leave max_tokens' last token and the context's last position to plain decoding.
 *   test_seq: a choice that may not draft (mode off, or not eligible) has no history and never drafts; one
 *     that may drafts the continuation of its latest repeated suffix, at most k and the room.
 *   test_sched_equals_plain: on the tiny Gemma 4 fixture (random weights: its greedy text repeats, so drafts
 *     are taken), the same jobs through a scheduler with --spec ngram and one without give the same tokens
 *     and ends per choice: greedy n=1 and n=2, max_tokens ending inside a draft, a prompt running into the
 *     context's end, beside a sampled job and a logprobs job (which decode plainly), in a KV cache of 10
 *     blocks that admission shares out (a draft past a reservation would find it full and end its choice
 *     early); the counters show drafts proposed and accepted, and none for the jobs that may not draft. */
#include "check.h"
#include "clock.h"
#include "metrics.h"
#include "sched.h"
#include "spec_step.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define FIXTURE "tests/fixtures/gemma4_dense.gguf"
#define CTX 256
#define MAXTOK 200

static engine *E;
static char err[512];

static void test_k_rule(void)
{
    CHECK(spec_k_next(4, 8, 4, 4) == 8 && spec_k_next(8, 8, 8, 8) == 8, "growth %d %d", spec_k_next(4, 8, 4, 4),
          spec_k_next(8, 8, 8, 8));
    CHECK(spec_k_next(2, 8, 1, 1) == 4, "a shorter draft taken whole still doubles: %d", spec_k_next(2, 8, 1, 1));
    CHECK(spec_k_next(8, 8, 8, 2) == 3 && spec_k_next(8, 8, 5, 0) == 1, "shrink %d %d", spec_k_next(8, 8, 8, 2),
          spec_k_next(8, 8, 5, 0));
    CHECK(spec_k_next(5, 8, 0, 0) == 5 && spec_k_next(1, 1, 1, 1) == 1, "no draft / k_max 1");
}

static void test_room(void)
{
    /* max_tokens 10 with 4 out: 5 more may come with the fed token's step (its own + 5 = 10 - 4 - 1 drafts) */
    CHECK(spec_room(1000, 50, 10, 4) == 5, "by max_tokens: %d", spec_room(1000, 50, 10, 4));
    CHECK(spec_room(100, 90, 1000, 4) == 8, "by the context: %d", spec_room(100, 90, 1000, 4));
    CHECK(spec_room(100, 99, 1000, 4) == 0 && spec_room(100, 10, 5, 4) == 0, "none left");
}

static void test_seq(void)
{
    const int32_t p[] = { 5, 6, 7, 8, 9, 5, 6 };
    spec_seq q;
    CHECK(spec_seq_init(&q, SPEC_OFF, 8, 1, p, 7, 20) == 0 && !q.hist && spec_seq_draft(&q, 10) == 0, "off drafts");
    CHECK(spec_seq_init(&q, SPEC_NGRAM, 8, 0, p, 7, 20) == 0 && !q.hist, "an ineligible choice has a history");
    CHECK(spec_seq_init(&q, SPEC_NGRAM, 8, 1, p, 7, 20) == 0 && q.hist && q.k == 4, "init: k %d", q.k);
    spec_seq_push(&q, 7); /* ... 5 6 7: the suffix "5 6 7" was followed by 8 9 5 6 7 */
    int n = spec_seq_draft(&q, 10);
    CHECK(n == 4 && q.feed[0] == 7 && q.feed[1] == 8 && q.feed[2] == 9 && q.feed[3] == 5 && q.feed[4] == 6,
          "draft %d: %d %d %d %d", n, q.feed[1], q.feed[2], q.feed[3], q.feed[4]);
    CHECK(spec_seq_draft(&q, 2) == 2, "room 2: %d", q.n_draft);
    engine_item it;
    memset(&it, 0, sizeof it);
    spec_seq_item(&q, &it, 3, 3);
    CHECK(it.seq == 3 && it.n_tokens == 3 && it.tokens == q.feed && it.ids_all == q.ids, "item");
    spec_seq_free(&q);
}

/* ---- the scheduler ---- */

typedef struct run_out {
    int32_t toks[4][MAXTOK];
    int n[4];
    enum job_end end[4];
} run_out;

typedef struct job_case {
    int32_t prompt[CTX];
    int n_prompt, max_tokens, n;
    float temperature;
    int logprobs;
} job_case;

/* a prompt that repeats a phrase of len tokens (from base) until n tokens */
static void repeat(job_case *c, int base, int len, int n, int max_tokens, int choices)
{
    memset(c, 0, sizeof *c);
    c->prompt[0] = 2;
    for (int i = 1; i < n; i++) c->prompt[i] = base + (i - 1) % len;
    c->n_prompt = n;
    c->max_tokens = max_tokens;
    c->n = choices;
}

/* every case at once through a scheduler with speculation mode `mode`; each choice's tokens and end */
static void run_cases(int mode, const job_case *cs, int n, run_out *out, metrics *m)
{
    sched *s;
    sched_opts o = { .max_seqs = 4, .max_queue = 16, .spec = mode, .draft_max = 8, .step_tokens = 64 };
    if (sched_create(&s, E, &o, m, err, sizeof err)) { CHECK(0, "sched_create: %s", err); return; }
    gen_job *j[8];
    for (int i = 0; i < n; i++) {
        job_prompt jp = { cs[i].prompt, cs[i].n_prompt, cs[i].max_tokens };
        job_spec spec = { .prompts = &jp, .n_prompts = 1, .n = cs[i].n, .t_arrival = monotonic_seconds(),
                          .n_logprobs = cs[i].logprobs };
        sampler_params_default(&spec.sampling);
        spec.sampling.temperature = cs[i].temperature;
        spec.sampling.seed = 7;
        CHECK(sched_submit(s, &spec, &j[i]) == SCHED_OK, "submit %d", i);
    }
    for (int i = 0; i < n; i++) {
        double t0 = monotonic_seconds();
        for (int c = 0; c < cs[i].n; c++) {
            job_status st = { .end = JOB_RUNNING };
            out[i].n[c] = 0;
            while (monotonic_seconds() - t0 < 120) {
                int got = job_take(j[i], c, out[i].toks[c] + out[i].n[c], NULL, MAXTOK - out[i].n[c], &st);
                out[i].n[c] += got;
                if (st.end != JOB_RUNNING) break;
                if (!got) usleep(1000);
            }
            out[i].end[c] = st.end;
        }
        job_release(j[i]);
    }
    sched_destroy(s);
}

static void test_sched_equals_plain(void)
{
    job_case cs[6];
    repeat(&cs[0], 10, 7, 40, 60, 1);   /* greedy, copy-heavy */
    repeat(&cs[1], 30, 5, 30, 45, 2);   /* n = 2 */
    repeat(&cs[2], 10, 7, 41, 13, 1);   /* max_tokens ends inside a draft */
    repeat(&cs[3], 70, 9, 200, 100, 1); /* runs into the context's end (256) */
    repeat(&cs[4], 10, 7, 40, 30, 1);   /* sampled: no drafts */
    cs[4].temperature = 0.8f;
    repeat(&cs[5], 30, 5, 30, 20, 1);   /* logprobs: no drafts */
    cs[5].logprobs = 2;
    int n = (int)(sizeof cs / sizeof *cs);
    static run_out plain[6], spec[6];
    metrics *mp, *ms;
    if (metrics_create(&mp) || metrics_create(&ms)) { CHECK(0, "metrics"); return; }
    run_cases(SPEC_OFF, cs, n, plain, mp);
    run_cases(SPEC_NGRAM, cs, n, spec, ms);
    for (int i = 0; i < n; i++)
        for (int c = 0; c < cs[i].n; c++) {
            int first = -1;
            for (int t = 0; t < plain[i].n[c] && t < spec[i].n[c] && first < 0; t++)
                if (plain[i].toks[c][t] != spec[i].toks[c][t]) first = t;
            CHECK(first < 0 && plain[i].n[c] == spec[i].n[c] && plain[i].end[c] == spec[i].end[c],
                  "job %d choice %d: %d tokens (end %d) against plain %d (end %d), first difference at %d", i, c,
                  spec[i].n[c], spec[i].end[c], plain[i].n[c], plain[i].end[c], first);
        }
    CHECK(spec[2].n[0] == 13 && spec[2].end[0] == JOB_LENGTH, "max_tokens 13: %d tokens, end %d", spec[2].n[0],
          spec[2].end[0]);
    CHECK(spec[3].n[0] == CTX - 200 + 1 && spec[3].end[0] == JOB_LENGTH, "the context's end: %d tokens, end %d",
          spec[3].n[0], spec[3].end[0]);
    const board *bp = metrics_board(mp), *bs = metrics_board(ms);
    unsigned long long steps = bs->spec_steps, drafted = bs->spec_draft_tokens, taken = bs->spec_accepted_tokens;
    printf("  %llu verifications, %llu draft tokens, %llu accepted\n", steps, drafted, taken);
    CHECK(steps > 0 && taken > 0 && taken <= drafted, "drafts %llu, accepted %llu", drafted, taken);
    CHECK(bp->spec_steps == 0 && bp->spec_draft_tokens == 0, "the plain scheduler drafted");
    metrics_destroy(mp, 0);
    if (metrics_create(&mp)) { CHECK(0, "metrics"); return; }
    run_cases(SPEC_NGRAM, cs + 4, 2, spec, mp); /* sampled and logprobs alone */
    CHECK(metrics_board(mp)->spec_steps == 0, "%llu drafts for jobs that may not draft",
          (unsigned long long)metrics_board(mp)->spec_steps);
    metrics_destroy(mp, 0);
    metrics_destroy(ms, 0);
}

int main(void)
{
    RUN_TEST(test_k_rule);
    RUN_TEST(test_room);
    RUN_TEST(test_seq);
    check_current = "setup";
    engine_opts o = { .n_ctx = CTX, .max_seqs = 4, .kv_tokens = 320 }; /* 10 blocks: jobs wait for reservations */
    if (engine_load(&E, FIXTURE, &o, err, sizeof err)) { printf("FAIL setup: %s\n", err); return 1; }
    RUN_TEST(test_sched_equals_plain);
    engine_destroy(E);
    CHECK_EXIT();
}
