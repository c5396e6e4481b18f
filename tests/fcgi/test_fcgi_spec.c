/* test_fcgi_spec.c — speculative decoding in the worker's scheduler (fcgi/spec_step.c, fcgi/sched.c).
 *   test_k_rule: the draft length doubles on a draft taken whole, falls to the accepted count + 1 on a
 *     rejection, stays 1..k_max, and a step without a draft changes nothing; drafts rejected whole pause
 *     drafting 1, 2, 4 ... SPEC_PAUSE_MAX steps, a token taken clears it.
 *   test_room: drafts leave max_tokens' last token and the context's last position to plain decoding.
 *   test_seq: a choice that may not draft (mode off, or not eligible) has no history and never drafts; one
 *     that may drafts the continuation of its latest repeated suffix, at most k and the room; a greedy one's
 *     item verifies with ids_all and its sampler, a sampled one's with no sampler and every row.
 *   test_sched_equals_plain: on the tiny Gemma 4 fixture (random weights: its greedy text repeats, so drafts
 *     are taken), the same jobs through a scheduler with --spec ngram and one without give the same tokens
 *     and ends per choice: greedy n=1 and n=2, max_tokens ending inside a draft, a prompt running into the
 *     context's end, beside a sampled job (which drafts too: only its length is compared) and a logprobs job
 *     (which decodes plainly), in a KV cache of 10 blocks that admission shares out (a draft past a
 *     reservation would find it full and end its choice early); the counters show drafts proposed and
 *     accepted, and none for the job that may not draft.
 *   test_sched_sampled: sampled jobs (temperature 0.8; top_k 8 with a repetition penalty; n=2) with --spec
 *     ngram end at max_tokens (inside a draft too) or the context's end with no stop token among their
 *     tokens; drafts are proposed, some accepted and some rejected; the same seeds give the same tokens twice.
 *   test_sched_sampled_distribution: a sampled verification gives the target's distribution. A repetitive
 *     prompt, temperature 1, top_k 4, max_tokens 3 (the first token comes from the prompt's step, the second
 *     with a draft of one: accepted, or redrawn from the rest, the third the bonus row's or a plain step's),
 *     2048 seeds with --spec ngram and without (their own seeds each); the two samples of (first, second,
 *     third) tokens must pass Pearson's two-sample homogeneity test (chi_square.h's chi_two: bins of
 *     expected count below 5 merged, dof = bins - 1, 20-30 here) at p > 1e-3; again (4096 seeds) with a
 *     frequency penalty over the last 3 tokens, which a token fed to the sampler twice or never would shift.
 *   test_sched_qwen35: test_sched_equals_plain's jobs on the tiny Qwen 3.5 fixture (a recurrent state: drafts cut
 *     back from checkpoints, 2 of them for 4 sequences) give plain decoding's tokens and ends. */
#include "check.h"
#include "chi_square.h"
#include "clock.h"
#include "metrics.h"
#include "sched.h"
#include "spec_step.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define FIXTURE "tests/fixtures/gemma4_dense.gguf"
#define QWEN35 "tests/fixtures/qwen35_dense_bf16.gguf"
#define CTX 256
#define MAXTOK 200

#define DRAFTER "tests/fixtures/gemma4_mtp_assistant.gguf"

static engine *E, *EM; /* the fixture alone; with its MTP drafter */
static char err[512];

static void test_k_rule(void)
{
    CHECK(spec_k_next(4, 8, 4, 4) == 8 && spec_k_next(8, 8, 8, 8) == 8, "growth %d %d", spec_k_next(4, 8, 4, 4),
          spec_k_next(8, 8, 8, 8));
    CHECK(spec_k_next(2, 8, 1, 1) == 4, "a shorter draft taken whole still doubles: %d", spec_k_next(2, 8, 1, 1));
    CHECK(spec_k_next(8, 8, 8, 2) == 3 && spec_k_next(8, 8, 5, 0) == 1, "shrink %d %d", spec_k_next(8, 8, 8, 2),
          spec_k_next(8, 8, 5, 0));
    CHECK(spec_k_next(5, 8, 0, 0) == 5 && spec_k_next(1, 1, 1, 1) == 1, "no draft / k_max 1");
    /* the back-off: pauses of 1, 2, 4 ... 64 steps after drafts rejected whole in a row; a token taken clears it */
    int wait = 0, p[9];
    for (int i = 0; i < 9; i++) p[i] = spec_pause_next(&wait, 3, 0);
    CHECK(p[0] == 1 && p[1] == 2 && p[2] == 4 && p[6] == SPEC_PAUSE_MAX && p[8] == SPEC_PAUSE_MAX, "pauses %d %d %d %d",
          p[0], p[1], p[2], p[8]);
    CHECK(spec_pause_next(&wait, 0, 0) == 0 && wait == SPEC_PAUSE_MAX, "no draft: nothing learnt");
    CHECK(spec_pause_next(&wait, 4, 1) == 0 && wait == 0 && spec_pause_next(&wait, 2, 0) == 1, "cleared by a token");
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
    CHECK(spec_seq_init(&q, SPEC_OFF, 8, 1, NULL, 0, p, 7, 20) == 0 && !q.hist && spec_seq_draft(&q, 10) == 0,
          "off drafts");
    CHECK(spec_seq_init(&q, SPEC_NGRAM, 8, 0, NULL, 0, p, 7, 20) == 0 && !q.hist, "an ineligible choice has a history");
    CHECK(spec_seq_init(&q, SPEC_NGRAM, 8, 1, NULL, 0, p, 7, 20) == 0 && q.hist && q.k == 4, "init: k %d", q.k);
    spec_seq_push(&q, 7); /* ... 5 6 7: the suffix "5 6 7" was followed by 8 9 5 6 7 */
    int n = spec_seq_draft(&q, 10);
    CHECK(n == 4 && q.feed[0] == 7 && q.feed[1] == 8 && q.feed[2] == 9 && q.feed[3] == 5 && q.feed[4] == 6,
          "draft %d: %d %d %d %d", n, q.feed[1], q.feed[2], q.feed[3], q.feed[4]);
    CHECK(spec_seq_draft(&q, 2) == 2, "room 2: %d", q.n_draft);
    engine_item it;
    memset(&it, 0, sizeof it);
    spec_seq_item(&q, &it, 3, 3);
    CHECK(it.seq == 3 && it.n_tokens == 3 && it.tokens == q.feed && it.ids_all == q.ids && it.draft, "item");
    spec_seq_free(&q);
    sampler *smp;
    sampler_params sp;
    sampler_params_default(&sp);
    sp.temperature = 1;
    if (sampler_create(&smp, &sp, 64)) { CHECK(0, "sampler"); return; }
    CHECK(spec_seq_init(&q, SPEC_NGRAM, 8, 1, smp, 64, p, 7, 20) == 0 && q.sampled && !q.rows, "sampled init");
    spec_seq_push(&q, 7);
    CHECK(spec_seq_draft(&q, 10) == 4 && q.rows, "sampled draft: rows made");
    memset(&it, 0, sizeof it);
    spec_seq_item(&q, &it, 3, 5);
    CHECK(!it.smp && !it.ids_all && it.logits == q.rows && it.logits_all && it.draft && it.n_tokens == 5,
          "sampled item");
    spec_seq_free(&q);
    sampler_destroy(smp);
}

/* ---- the scheduler ---- */

#define MAXJOBS 16 /* the scheduler's queue */

typedef struct run_out {
    int32_t toks[4][MAXTOK];
    int n[4];
    enum job_end end[4];
} run_out;

typedef struct job_case {
    int32_t prompt[CTX];
    int n_prompt, max_tokens, n;
    float temperature, repetition_penalty, frequency_penalty;
    int logprobs, top_k, penalty_last_n;
    uint64_t seed;
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
    c->seed = 7;
}

/* every case at once through a scheduler with speculation mode `mode`; each choice's tokens and end */
static void run_cases(int mode, const job_case *cs, int n, run_out *out, metrics *m)
{
    sched *s;
    sched_opts o = { .max_seqs = 4, .max_queue = 16, .spec = mode, .draft_max = 8, .step_tokens = 64 };
    if (sched_create(&s, mode == SPEC_MTP ? EM : E, &o, m, err, sizeof err)) { CHECK(0, "sched_create: %s", err); return; }
    gen_job *j[MAXJOBS];
    for (int i = 0; i < n; i++) {
        job_prompt jp = { .ids = cs[i].prompt, .n = cs[i].n_prompt, .max_tokens = cs[i].max_tokens };
        job_spec spec = { .prompts = &jp, .n_prompts = 1, .n = cs[i].n, .t_arrival = monotonic_seconds(),
                          .n_logprobs = cs[i].logprobs };
        sampler_params_default(&spec.sampling);
        spec.sampling.temperature = cs[i].temperature;
        spec.sampling.top_k = cs[i].top_k;
        if (cs[i].repetition_penalty > 0) spec.sampling.repetition_penalty = cs[i].repetition_penalty;
        spec.sampling.frequency_penalty = cs[i].frequency_penalty;
        if (cs[i].penalty_last_n) spec.sampling.penalty_last_n = cs[i].penalty_last_n;
        spec.sampling.seed = cs[i].seed;
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

#define N_EQ_CASES 6

/* the jobs a speculating scheduler must answer as a plain one does: greedy copy-heavy, n = 2, max_tokens inside a
 * draft, the context's end (256), a sampled job (drafts too, its own tokens), a logprobs job (no drafts) */
static int equal_cases(job_case cs[N_EQ_CASES])
{
    repeat(&cs[0], 10, 7, 40, 60, 1);
    repeat(&cs[1], 30, 5, 30, 45, 2);
    repeat(&cs[2], 10, 7, 41, 13, 1);
    repeat(&cs[3], 70, 9, 200, 100, 1);
    repeat(&cs[4], 10, 7, 40, 30, 1);
    cs[4].temperature = 0.8f;
    repeat(&cs[5], 30, 5, 30, 20, 1);
    cs[5].logprobs = 2;
    return N_EQ_CASES;
}

/* equal_cases' answers with speculation (mode) against plain ones: every choice's tokens and end, the sampled
 * job's length */
static void check_equal(const char *mode, const job_case *cs, int n, const run_out *plain, const run_out *spec)
{
    CHECK(spec[4].n[0] == 30 && spec[4].end[0] == JOB_LENGTH && plain[4].n[0] == 30, "%s sampled: %d tokens, end %d",
          mode, spec[4].n[0], spec[4].end[0]);
    for (int i = 0; i < n; i++)
        for (int c = 0; c < cs[i].n && i != 4; c++) {
            int first = -1;
            for (int t = 0; t < plain[i].n[c] && t < spec[i].n[c] && first < 0; t++)
                if (plain[i].toks[c][t] != spec[i].toks[c][t]) first = t;
            CHECK(first < 0 && plain[i].n[c] == spec[i].n[c] && plain[i].end[c] == spec[i].end[c],
                  "%s job %d choice %d: %d tokens (end %d) against plain %d (end %d), first difference at %d", mode, i,
                  c, spec[i].n[c], spec[i].end[c], plain[i].n[c], plain[i].end[c], first);
        }
}

/* equal_cases run plainly and with speculation (mode), on metrics of their own, and compared (check_equal);
 * -1 when the metrics could not be made */
static int run_equal(int mode, const char *name, job_case *cs, int *n, run_out *plain, run_out *spec, metrics **mp,
                     metrics **ms)
{
    *n = equal_cases(cs);
    if (metrics_create(mp) || metrics_create(ms)) { CHECK(0, "metrics"); return -1; }
    run_cases(SPEC_OFF, cs, *n, plain, *mp);
    run_cases(mode, cs, *n, spec, *ms);
    check_equal(name, cs, *n, plain, spec);
    return 0;
}

static void test_sched_equals_plain(void)
{
    job_case cs[N_EQ_CASES];
    int n;
    static run_out plain[6], spec[6];
    metrics *mp, *ms;
    if (run_equal(SPEC_NGRAM, "ngram", cs, &n, plain, spec, &mp, &ms)) return;
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
    run_cases(SPEC_NGRAM, cs + 5, 1, spec, mp); /* logprobs alone */
    CHECK(metrics_board(mp)->spec_steps == 0, "%llu drafts for jobs that may not draft",
          (unsigned long long)metrics_board(mp)->spec_steps);
    metrics_destroy(mp, 0);
    metrics_destroy(ms, 0);
}

/* a choice's tokens are valid: none past max_tokens, none a stop token, all in the vocabulary */
static int valid(const run_out *o, int c, int max_tokens)
{
    uint32_t nv = engine_get_info(E)->n_vocab;
    if (o->n[c] > max_tokens || o->end[c] == JOB_ERROR || o->end[c] == JOB_RUNNING) return 0;
    for (int t = 0; t < o->n[c]; t++)
        if (o->toks[c][t] < 0 || (uint32_t)o->toks[c][t] >= nv || engine_is_stop_token(E, o->toks[c][t])) return 0;
    return 1;
}

static void test_sched_sampled(void)
{
    job_case cs[4];
    repeat(&cs[0], 10, 7, 40, 60, 1);
    repeat(&cs[1], 30, 5, 41, 13, 2);   /* n = 2, max_tokens ends inside a draft */
    repeat(&cs[2], 70, 9, 200, 100, 1); /* runs into the context's end (256) */
    repeat(&cs[3], 10, 7, 40, 50, 1);   /* top_k and a penalty: the sampler sees each output token once */
    for (int i = 0; i < 4; i++) cs[i].temperature = 0.8f;
    cs[3].top_k = 8;
    cs[3].repetition_penalty = 1.3f;
    cs[3].seed = 99;
    static run_out a[4], b[4];
    metrics *m;
    if (metrics_create(&m)) { CHECK(0, "metrics"); return; }
    double t0 = monotonic_seconds();
    run_cases(SPEC_NGRAM, cs, 4, a, m);
    const board *bd = metrics_board(m);
    unsigned long long steps = bd->spec_steps, drafted = bd->spec_draft_tokens, taken = bd->spec_accepted_tokens;
    printf("  sampled: %llu verifications, %llu draft tokens, %llu accepted (%.1f s)\n", steps, drafted, taken,
           monotonic_seconds() - t0);
    CHECK(steps > 0 && taken > 0 && taken < drafted, "drafts %llu, accepted %llu: none taken or none rejected",
          drafted, taken);
    run_cases(SPEC_NGRAM, cs, 4, b, m);
    for (int i = 0; i < 4; i++)
        for (int c = 0; c < cs[i].n; c++) {
            CHECK(valid(&a[i], c, cs[i].max_tokens), "job %d choice %d: %d tokens, end %d", i, c, a[i].n[c],
                  a[i].end[c]);
            CHECK(a[i].n[c] == b[i].n[c] && !memcmp(a[i].toks[c], b[i].toks[c], sizeof(int32_t) * (size_t)a[i].n[c]),
                  "job %d choice %d: a seed gave two outputs", i, c);
        }
    CHECK(a[0].n[0] == 60 && a[0].end[0] == JOB_LENGTH, "max_tokens 60: %d, end %d", a[0].n[0], a[0].end[0]);
    CHECK(a[1].n[0] == 13 && a[1].n[1] == 13 && a[1].end[1] == JOB_LENGTH, "max_tokens 13: %d %d", a[1].n[0],
          a[1].n[1]);
    CHECK(a[2].n[0] == CTX - 200 + 1 && a[2].end[0] == JOB_LENGTH, "the context's end: %d tokens, end %d", a[2].n[0],
          a[2].end[0]);
    CHECK(memcmp(a[1].toks[0], a[1].toks[1], sizeof(int32_t) * 13), "n=2's choices are the same");
    metrics_destroy(m, 0);
}

#define DIST_MAX 3

/* the first DIST_MAX tokens of n_seeds seeded jobs of c, as bins: index into keys (n_keys of them); each mode
 * its own seeds, so the two samples are independent */
static void sample_seeds(int mode, int n_seeds, job_case *c, int32_t (*keys)[DIST_MAX], int *n_keys, long *count,
                         metrics *m)
{
    static job_case cs[MAXJOBS];
    static run_out o[MAXJOBS];
    for (int s0 = 0; s0 < n_seeds; s0 += MAXJOBS) {
        int n = n_seeds - s0 < MAXJOBS ? n_seeds - s0 : MAXJOBS;
        for (int i = 0; i < n; i++) { cs[i] = *c; cs[i].seed = (uint64_t)(1000 + mode * n_seeds + s0 + i); }
        run_cases(mode, cs, n, o, m);
        for (int i = 0; i < n; i++) {
            CHECK(o[i].n[0] == DIST_MAX && valid(&o[i], 0, DIST_MAX), "seed %d: %d tokens", s0 + i, o[i].n[0]);
            int k = 0;
            while (k < *n_keys && memcmp(keys[k], o[i].toks[0], sizeof *keys)) k++;
            if (k == *n_keys) {
                if (k == 512) continue;
                memcpy(keys[(*n_keys)++], o[i].toks[0], sizeof *keys);
            }
            count[k]++;
        }
    }
}

/* case c's two samples, with --spec ngram and without: homogeneous, and the drafts both taken and rejected */
static void dist_case_mode(const char *name, job_case *c, int n_seeds, int mode)
{
    static int32_t keys[512][DIST_MAX];
    static long plain[512], spec[512];
    int n_keys = 0;
    memset(plain, 0, sizeof plain);
    memset(spec, 0, sizeof spec);
    metrics *m;
    if (metrics_create(&m)) { CHECK(0, "metrics"); return; }
    double t0 = monotonic_seconds();
    sample_seeds(SPEC_OFF, n_seeds, c, keys, &n_keys, plain, m);
    double t1 = monotonic_seconds();
    sample_seeds(mode, n_seeds, c, keys, &n_keys, spec, m);
    const board *bd = metrics_board(m);
    unsigned long long drafted = bd->spec_draft_tokens, taken = bd->spec_accepted_tokens;
    double chi2;
    int dof;
    double pv = chi_two(plain, spec, n_keys, &chi2, &dof);
    printf("  %s: %d seeds a side, %d outcomes: chi2 %.2f, dof %d, p %.3g; %llu of %llu drafts accepted (%.1f s plain, "
           "%.1f s spec)\n", name, n_seeds, n_keys, chi2, dof, pv, taken, drafted, t1 - t0, monotonic_seconds() - t1);
    CHECK(taken > 0 && taken < drafted, "%s: the drafts were all taken or all rejected: %llu of %llu", name, taken,
          drafted);
    CHECK(dof >= 3 && pv > 1e-3, "%s: the spec worker's tokens are not the plain worker's distribution: chi2 %.2f, "
          "dof %d, p %.3g", name, chi2, dof, pv);
    metrics_destroy(m, 0);
}

static void dist_case(const char *name, job_case *c, int n_seeds) { dist_case_mode(name, c, n_seeds, SPEC_NGRAM); }

static void test_sched_sampled_distribution(void)
{
    job_case c;
    repeat(&c, 10, 3, 20, DIST_MAX, 1);
    /* the bigrams (11, t) for the likely first tokens t: a draft after each (the random weights copy little) */
    static const int32_t tail[] = { 11, 703, 11, 11, 710, 644, 11, 195, 534, 11, 499, 219, 11 };
    memcpy(c.prompt + c.n_prompt, tail, sizeof tail);
    c.n_prompt += (int)(sizeof tail / sizeof *tail);
    c.temperature = 1;
    c.top_k = 4;
    dist_case("top_k 4", &c, 2048); /* PoCL runs about 500 of these 3-token jobs a second */
    /* the last 3 tokens counted (the prompt's many 11s are not): the first token fed twice or never would shift
     * the second's and third's odds (703 11 703 is likely) */
    c.frequency_penalty = 1;
    c.penalty_last_n = 3;
    dist_case("top_k 4, frequency_penalty 1 over the last 3", &c, 4096); /* p 0.01 at 1024 for a double feed */
}

/* --spec mtp: the fixture's MTP drafter (random weights: its drafts are rarely the target's choice) drafts for
 * the same jobs as test_sched_equals_plain; greedy choices give plain decoding's tokens and ends, the sampled
 * one its length, drafts are proposed and verified; the sampled distribution as with prompt lookup */
/* the same on a model with a recurrent state (Qwen 3.5): drafts verified and cut back from checkpoints, fewer
 * checkpoints than sequences (the scheduler drafts for that many per step) */
static void test_sched_qwen35(void)
{
    engine *keep = E, *q = NULL;
    engine_opts o = { .n_ctx = CTX, .max_seqs = 4, .kv_tokens = 320, .state_checkpoints = 2 };
    if (engine_load(&q, QWEN35, &o, err, sizeof err)) { CHECK(0, "%s: %s", QWEN35, err); return; }
    CHECK(spec_mode_effective(SPEC_NGRAM, engine_get_info(q)) == SPEC_NGRAM, "ngram refused for %s", QWEN35);
    E = q; /* run_cases' engine */
    job_case cs[N_EQ_CASES];
    int n;
    static run_out plain[6], spec[6];
    metrics *mp, *ms;
    if (!run_equal(SPEC_NGRAM, "qwen35 ngram", cs, &n, plain, spec, &mp, &ms)) {
        const board *bs = metrics_board(ms);
        printf("  qwen35: %llu verifications, %llu draft tokens, %llu accepted\n",
               (unsigned long long)bs->spec_steps, (unsigned long long)bs->spec_draft_tokens,
               (unsigned long long)bs->spec_accepted_tokens);
        CHECK(bs->spec_steps > 0, "no verifications");
        metrics_destroy(mp, 0);
        metrics_destroy(ms, 0);
    }
    E = keep;
    engine_destroy(q);
}

static void test_sched_mtp(void)
{
    job_case cs[N_EQ_CASES];
    int n;
    static run_out plain[6], spec[6];
    metrics *mp, *ms;
    if (run_equal(SPEC_MTP, "mtp", cs, &n, plain, spec, &mp, &ms)) return;
    const board *bs = metrics_board(ms);
    printf("  mtp: %llu verifications, %llu draft tokens, %llu accepted\n", (unsigned long long)bs->spec_steps,
           (unsigned long long)bs->spec_draft_tokens, (unsigned long long)bs->spec_accepted_tokens);
    CHECK(bs->spec_steps > 0 && bs->spec_draft_tokens > 0, "mtp: no drafts");
    metrics_destroy(mp, 0);
    metrics_destroy(ms, 0);
    job_case c;
    repeat(&c, 10, 3, 20, DIST_MAX, 1);
    c.temperature = 1;
    c.top_k = 4;
    dist_case_mode("mtp, top_k 4", &c, 2048, SPEC_MTP);
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
    RUN_TEST(test_sched_sampled);
    RUN_TEST(test_sched_sampled_distribution);
    RUN_TEST(test_sched_qwen35);
    check_current = "setup";
    o.draft_path = DRAFTER;
    if (engine_load(&EM, FIXTURE, &o, err, sizeof err)) { printf("FAIL setup: %s\n", err); return 1; }
    RUN_TEST(test_sched_mtp);
    engine_destroy(EM);
    engine_destroy(E);
    CHECK_EXIT();
}
