/* sched.c — the engine thread and the job queue: admission, each step's plan, and what a step's
 * results do to the jobs (their channels: job.c). */
#include "sched.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "admit.h"
#include "clock.h"
#include "job_int.h"
#include "log.h"
#include "spec_step.h"
#include "step_plan.h"

#define PLP_PIECE 16 /* prompt tokens per step while their logprobs are scored (rows of logits each) */

/* a running sequence: choice c of job j */
typedef struct run { gen_job *j; int c; } run;

struct sched {
    engine *eng;
    metrics *m;
    constraint_vocab *vocab;
    int max_seqs, max_queue;
    double queue_timeout;     /* seconds a job may wait for its first prompt to start (0: no limit) */
    double pass_s;            /* how long a waiting job may be passed by later ones that fit */
    int step_tokens, block; /* the step's token budget; KV block tokens (prompt chunks end on them) */
    int spec, draft_max;    /* sched_opts' */
    int seq_chunk;          /* one sequence's tokens in one forward at most (engine_fit.seq_chunk) */
    int n_ctx;              /* the engine's context per sequence */
    uint32_t n_vocab;
    kv_budget kv;             /* the KV blocks running prompts are promised (promises: the engine thread's) */
    pthread_t thread;
    pthread_mutex_t mu;       /* guards everything below */
    pthread_cond_t cv;
    gen_job *head, *tail;
    int n_queued, n_active;   /* jobs waiting for a prompt to start; jobs with a running sequence */
    int queued_seqs;          /* choices of prompts not started */
    atomic_int used;          /* slots of running sequences and of forks to come (the engine thread's) */
    int stopping, closed;
    atomic_int cancel_all;    /* the drain deadline passed: end every job */
    /* engine thread only */
    run *active;
    int n_runs;
    engine_item *items;
    int *failed;
    step_want *want;          /* the step's plan: each run's claim, tokens taken, the run of each item */
    int *take, *irun;
    spec_seq **dq;            /* the step's choices the MTP drafter drafts for, their sequences and runs */
    int *dseq, *drun;
    float *row;               /* a fork's copy of the row it chooses its first token from */
    constraint_pool *pool;    /* a step's structured-output masks on several threads */
    constraint **mcon;        /* the step's constrained runs: their constraints, masks, counts, run index */
    uint32_t **mbits;
    int *mcount, *mrun;
};

/* ---- jobs on the engine thread ---- */

/* engine thread: choice c is over; frees its sequence, and drops the scheduler's reference with the
 * last choice */
static void choice_finish(sched *s, gen_job *j, int c, enum job_end end, const char *error)
{
    job_choice *ch = &j->ch[c];
    if (ch->phase == PH_ENDED) return;
    ch->phase = PH_ENDED;
    if (ch->held) { /* the prompt's reservation shrinks to what its other live choices can take */
        job_group *g = &j->g[c / j->n];
        kv_budget_give(&s->kv, kv_budget_need(&s->kv, g->n_prompt, g->max_tokens, g->holding));
        kv_budget_take(&s->kv, kv_budget_need(&s->kv, g->n_prompt, g->max_tokens, --g->holding));
        ch->held = 0;
    }
    if (ch->n_gen >= 2) metrics_tpot(s->m, (ch->t_last_out - ch->t_first_out) / (ch->n_gen - 1));
    if (ch->seq >= 0) engine_seq_free(s->eng, ch->seq);
    ch->seq = -1;
    if (end == JOB_CANCELLED) {
        int why = atomic_load(&j->cancel);
        if (why == CANCEL_NONE || why == CANCEL_STOP) end = JOB_STOP; /* the reader had what it wanted */
        else if (!j->cancel_counted) {
            metrics_cancel(s->m, why == CANCEL_ALL ? CANCEL_DRAIN : CANCEL_CLIENT_GONE);
            j->cancel_counted = 1;
        }
    }
    job_choice_end(j, c, end, error);
    job_live_drop(j);
}

/* under s->mu: the gauges the pool sees */
static void publish_counts(sched *s)
{
    metrics_load(s->m, s->n_active, s->n_queued);
}

int sched_submit(sched *s, const job_spec *spec, gen_job **out)
{
    *out = NULL;
    int bad = spec->n_prompts < 1 || spec->n < 1 || spec->n > s->max_seqs || spec->n > SCHED_MAX_N, big = 0;
    for (int p = 0; !bad && p < spec->n_prompts; p++) bad = spec->prompts[p].n < 1 || spec->prompts[p].max_tokens < 1;
    for (int p = 0; !bad && !big && p < spec->n_prompts; p++) /* else it would wait forever */
        big = !kv_budget_whole(&s->kv, kv_budget_need(&s->kv, spec->prompts[p].n, spec->prompts[p].max_tokens, spec->n));
    if (bad || big) {
        for (int c = 0; spec->con && c < spec->n_prompts * spec->n; c++) constraint_destroy(spec->con[c]);
        return big ? SCHED_TOO_BIG : SCHED_ENOMEM;
    }
    gen_job *j;
    if (job_create(&j, spec, s->n_vocab, s->spec, s->draft_max)) return SCHED_ENOMEM;

    pthread_mutex_lock(&s->mu);
    int rc = SCHED_OK;
    if (s->closed || s->stopping) rc = SCHED_CLOSED;
    else if (atomic_load(&s->used) + s->queued_seqs + j->n_choices > s->max_seqs + s->max_queue) rc = SCHED_FULL;
    else {
        /* the queue is in priority order (lower first, as vLLM's), first come first served within one */
        gen_job **at = &s->head, *before = NULL;
        while (*at && (*at)->priority <= j->priority) { before = *at; at = &(*at)->next; }
        j->next = *at;
        *at = j;
        if (s->tail == before) s->tail = j;
        s->n_queued++;
        s->queued_seqs += j->n_choices;
        publish_counts(s);
        pthread_cond_signal(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    if (rc != SCHED_OK) { job_destroy(j); return rc; }
    *out = j;
    return SCHED_OK;
}

/* ---- the engine thread ---- */

static void add_run(sched *s, gen_job *j, int c) { s->active[s->n_runs++] = (run){ j, c }; }

/* a group's images: encoded (those the engine does not hold) and pinned for its prompt's steps,
 * unpinned once the prompt is in the cache or its choices ended */
static int group_pin(sched *s, job_group *g, char *err, size_t errlen)
{
    if (!g->n_images || g->pinned) return 0;
    double t = monotonic_seconds();
    /* waited for, so the metric times the encode (not its enqueue) and a device error is this prompt's */
    if (engine_image_encode(s->eng, g->images, g->n_images, err, errlen)) return -1; /* nothing pinned */
    if (engine_image_wait(s->eng, err, errlen)) {
        for (int i = 0; i < g->n_images; i++) engine_image_release(s->eng, g->images[i]);
        return -1;
    }
    metrics_images(s->m, g->n_images, monotonic_seconds() - t);
    g->pinned = 1;
    return 0;
}

static void group_unpin(sched *s, job_group *g)
{
    for (int i = 0; g->pinned && i < g->n_images; i++) engine_image_release(s->eng, g->images[i]);
    g->pinned = 0;
}

/* a prompt chunk of k tokens from fed that does not end inside an image: one that would stops before
 * it, one that starts in it takes the rest of it whole (its tokens see each other) */
static int image_cut(const job_group *g, int fed, int k)
{
    for (int i = 0; i < g->n_spans; i++) {
        int o = g->spans[i].offset, e = o + g->spans[i].n;
        if (fed + k <= o || fed + k >= e || fed >= e) continue;
        return o > fed ? o - fed : e - fed;
    }
    return k;
}

/* Starts prompt p of j (s->used has room for its n choices): its first choice's sequence takes the
 * prompt, on the longest prefix of it the engine has cached (not when every prompt token's logprobs
 * are asked for: they need every row), the others' slots wait for forks of it. -1 when the engine
 * has no slot. */
static int group_start(sched *s, gen_job *j, int p)
{
    job_group *g = &j->g[p];
    job_choice *lead = &j->ch[p * j->n];
    int c0 = p * j->n, cached = 0;
    size_t rows = j->prompt_lp ? PLP_PIECE : j->n > 1 ? 1 : 0;
    lead->seq = j->prompt_lp ? engine_seq_new(s->eng) : engine_seq_new_prefix(s->eng, g->prompt, g->n_prompt, &cached);
    if (lead->seq < 0) return -1;
    for (int q = 0; q < cached; q++) sampler_accept(lead->smp, g->prompt[q]); /* the rest come with the step */
    lead->fed = cached;
    atomic_fetch_add(&j->cached, cached);
    metrics_prefix(s->m, g->n_prompt, cached);
    kv_budget_take(&s->kv, kv_budget_need(&s->kv, g->n_prompt, g->max_tokens, j->n));
    g->holding = j->n;
    for (int c = c0; c < c0 + j->n; c++) j->ch[c].held = 1;
    if (rows && !(g->rows = malloc(rows * s->n_vocab * sizeof *g->rows))) {
        for (int c = c0; c < c0 + j->n; c++) choice_finish(s, j, c, JOB_ERROR, "out of memory");
        return 0;
    }
    j->ch[c0].phase = PH_PROMPT;
    add_run(s, j, c0);
    atomic_fetch_add(&s->used, j->n);
    return 0;
}

/* under s->mu: whether prompt p of j may start now: slots for its choices, and the KV blocks they
 * can take beside what running prompts are promised */
static int fits_now(sched *s, const gen_job *j, int p)
{
    return atomic_load(&s->used) + j->n <= s->max_seqs &&
           kv_budget_fits(&s->kv, kv_budget_need(&s->kv, j->g[p].n_prompt, j->g[p].max_tokens, j->n));
}

/* under s->mu: j leaves the queue (prev: the job before it, or NULL); the choices of its prompts not
 * started end as `end` (JOB_RUNNING: none are left) */
static void unqueue(sched *s, gen_job *prev, gen_job *j, enum job_end end)
{
    if (prev) prev->next = j->next;
    else s->head = j->next;
    if (s->tail == j) s->tail = prev;
    j->next = NULL;
    s->n_queued--;
    s->queued_seqs -= (j->n_groups - j->next_group) * j->n;
    int c0 = j->next_group * j->n;
    j->next_group = j->n_groups;
    for (int c = c0, n = j->n_choices; c < n; c++) choice_finish(s, j, c, end, NULL);
    job_live_drop(j);
}

/* Under s->mu: queued jobs start their prompts in order while slots and KV blocks are free. A job
 * that does not fit lets later ones that do start first only while it has waited less than pass_s;
 * from then on nothing behind it starts before it does (running prompts end, their blocks come
 * back, and it fits: sched_submit takes none that never could), so a stream of small jobs cannot
 * starve a big one. Cancelled jobs leave, and so do jobs none of whose prompts started within the
 * queue timeout (JOB_EXPIRED: the client is told to retry). */
static void start_queued(sched *s)
{
    double now = monotonic_seconds();
    int hold = 0; /* an earlier job has waited past pass_s */
    gen_job *prev = NULL;
    for (gen_job *j = s->head, *next; j; j = next) {
        next = j->next;
        if (atomic_load(&s->cancel_all)) {
            int none = CANCEL_NONE;
            atomic_compare_exchange_strong(&j->cancel, &none, CANCEL_ALL);
        }
        double waited = now - j->t_submit;
        enum job_end end = atomic_load(&j->cancel) != CANCEL_NONE ? JOB_CANCELLED
                           : !j->next_group && s->queue_timeout > 0 && waited > s->queue_timeout ? JOB_EXPIRED
                           : JOB_RUNNING;
        while (end == JOB_RUNNING && !hold && j->next_group < j->n_groups && fits_now(s, j, j->next_group) &&
               group_start(s, j, j->next_group) == 0) {
            if (j->next_group == 0) {
                metrics_queue_wait(s->m, waited);
                atomic_store(&j->started, 1);
            }
            s->queued_seqs -= j->n;
            j->next_group++;
        }
        if (end == JOB_RUNNING && j->next_group < j->n_groups) { /* waits on */
            hold |= waited >= s->pass_s;
            prev = j;
        } else {
            unqueue(s, prev, j, end);
        }
    }
}

/* run i is over: its choice, or, still in its prompt, the whole group of choices (their slots come free) */
static void run_end(sched *s, int i, enum job_end end, const char *error)
{
    gen_job *j = s->active[i].j;
    int c = s->active[i].c;
    if (j->ch[c].phase == PH_PROMPT) {
        group_unpin(s, &j->g[c / j->n]);
        atomic_fetch_sub(&s->used, j->n);
        for (int k = c; k < c + j->n; k++) choice_finish(s, j, k, end, error);
    } else {
        atomic_fetch_sub(&s->used, 1);
        choice_finish(s, j, c, end, error);
    }
    s->active[i].j = NULL;
}

/* After a step: deliver run i's token, end its choice when it is done. */
static void after_step(sched *s, int i, int32_t tok, double t)
{
    gen_job *j = s->active[i].j;
    int c = s->active[i].c;
    job_choice *ch = &j->ch[c];
    ch->phase = PH_DECODE;
    if (!j->ttft_done) { metrics_ttft(s->m, t - j->t_arrival); j->ttft_done = 1; }
    else if (ch->n_gen > 0) metrics_itl(s->m, t - ch->t_last);
    ch->t_last = t;
    /* ignore_eos asks about no token (-1), so only the length can end it */
    engine_stop v = engine_should_stop(s->eng, ch->seq, j->ignore_eos ? -1 : tok, ch->n_gen, j->g[c / j->n].max_tokens);
    if (v == ENGINE_STOP_TOKEN) { run_end(s, i, JOB_STOP, NULL); return; }
    if (ch->con && constraint_accept(ch->con, tok)) {
        run_end(s, i, JOB_ERROR, "structured output: the engine chose a token outside the mask");
        return;
    }
    if (ch->n_gen == 0) ch->t_first_out = t;
    ch->t_last_out = t;
    ch->n_gen++;
    ch->last = tok; /* fed back next step; the engine shows it to the sampler then */
    spec_seq_push(&ch->sp, tok);
    job_push(j, c, tok);
    if (v == ENGINE_STOP_LENGTH) run_end(s, i, JOB_LENGTH, NULL);
}

/* A step of run i's prompt went through: its tokens' logprobs scored, and when it was the prompt's
 * last piece, forks of it for the group's other choices, each choosing its first token from the
 * row the first one chose from (so n greedy choices are the one greedy answer) with its own sampler,
 * then every choice's first token delivered. */
static void prompt_done(sched *s, int i, const engine_item *it, double t)
{
    gen_job *j = s->active[i].j;
    int c0 = s->active[i].c;
    job_group *g = &j->g[c0 / j->n];
    job_choice *lead = &j->ch[c0];
    int k = it->n_tokens, last = lead->fed + k == g->n_prompt;
    for (int r = 0; j->prompt_lp && r < k - last; r++) /* row r scores the token after it */
        sampler_score(lead->smp, g->rows + (size_t)r * s->n_vocab, g->prompt[lead->fed + r + 1], j->n_logprobs,
                      &g->plp[lead->fed + r]);
    for (int r = 0; !last && r < k; r++) sampler_accept(lead->smp, g->prompt[lead->fed + r]); /* as a whole prompt's */
    lead->fed += k;
    if (!last) return;
    group_unpin(s, g); /* the image's KV is in the cache: its rows may go */
    const float *row = g->rows ? g->rows + (size_t)(j->prompt_lp ? k - 1 : 0) * s->n_vocab : NULL;
    int forks[SCHED_MAX_N], nf = 0;
    int32_t first[SCHED_MAX_N];
    for (int c = c0 + 1; c < c0 + j->n; c++) {
        job_choice *ch = &j->ch[c];
        if ((ch->seq = engine_seq_fork(s->eng, lead->seq)) < 0) { /* its slot was kept for it */
            atomic_fetch_sub(&s->used, 1);
            choice_finish(s, j, c, JOB_ERROR, "internal: no sequence slot for a choice");
            continue;
        }
        for (int q = 0; q < g->n_prompt; q++) sampler_accept(ch->smp, g->prompt[q]);
        memcpy(s->row, row, s->n_vocab * sizeof *s->row);
        first[nf] = j->n_logprobs ? sampler_sample_logprobs(ch->smp, s->row, j->n_logprobs, &ch->lp_now)
                                  : sampler_sample(ch->smp, s->row);
        add_run(s, j, c);
        forks[nf++] = s->n_runs - 1;
    }
    free(g->rows);
    g->rows = NULL;
    job_prompt_logprobs_ready(j, c0 / j->n); /* before any of the group's tokens */
    after_step(s, i, it->token_out, t);
    for (int f = 0; f < nf; f++) after_step(s, forks[f], first[f], t);
}

/* run r's item: k tokens of its prompt (the plan's chunk), or its token fed back */
static void fill_item(engine_item *it, const run *r, int k)
{
    gen_job *j = r->j;
    job_choice *ch = &j->ch[r->c];
    job_group *g = &j->g[r->c / j->n];
    memset(it, 0, sizeof *it);
    it->seq = ch->seq;
    if (ch->phase == PH_PROMPT) {
        it->tokens = g->prompt + ch->fed;
        it->n_tokens = k;
        for (int i = 0; i < g->n_spans; i++) { /* the chunk's part of each image (image_cut: its tail) */
            const engine_span *sp = &g->spans[i];
            int a = sp->offset > ch->fed ? sp->offset : ch->fed, b = sp->offset + sp->n;
            if (b > ch->fed + k) b = ch->fed + k;
            if (a < b) g->cut[it->n_spans++] = (engine_span){ a - ch->fed, b - a, sp->first + a - sp->offset, sp->image };
        }
        it->spans = it->n_spans ? g->cut : NULL;
        it->logits_all = j->prompt_lp;
        it->logits = j->prompt_lp || ch->fed + k == g->n_prompt ? g->rows : NULL; /* rows only where read */
        if (ch->fed + k < g->n_prompt) return; /* a chunk of the prompt: no choice yet */
    } else if (k > 1) { /* its token and a draft, its sampler as spec_step.h verifies */
        spec_seq_item(&ch->sp, it, ch->seq, k);
        return;
    } else {
        it->tokens = &ch->last;
        it->n_tokens = 1;
    }
    it->smp = ch->smp;
    it->allow = ch->con ? ch->allow : NULL; /* made by make_masks before the step */
    it->bias = j->bias;
    it->n_bias = j->n_bias;
    it->n_logprobs = j->n_logprobs;
    it->lp = j->n_logprobs ? &ch->lp_now : NULL;
}

/* drops the runs that ended (their entries NULL) */
static void compact(sched *s)
{
    int k = 0;
    for (int i = 0; i < s->n_runs; i++)
        if (s->active[i].j) s->active[k++] = s->active[i];
    s->n_runs = k;
}

/* the structured-output masks of the step; a choice whose grammar allows nothing ends (a bug) */
static void make_masks(sched *s)
{
    int n = 0;
    for (int i = 0; i < s->n_runs; i++) {
        job_choice *ch = &s->active[i].j->ch[s->active[i].c];
        if (!ch->con) continue;
        s->mcon[n] = ch->con;
        s->mbits[n] = ch->allow;
        s->mrun[n++] = i;
    }
    constraint_pool_masks(s->pool, s->mcon, s->mbits, s->mcount, n);
    for (int k = 0; k < n; k++)
        if (s->mcount[k] < 0) run_end(s, s->mrun[k], JOB_ERROR, "structured output: the grammar allows no token");
    compact(s);
}

/* helper threads for the masks: half the processors, the engine thread being one */
static int mask_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN) / 2 - 1;
    return n < 0 ? 0 : n > 7 ? 7 : (int)n;
}

/* the step's items by the budget (step_plan.h): s->items[k] is run s->irun[k]'s, s->take[k] tokens
 * of it; returns how many */
static int plan_step(sched *s)
{
    int nd = 0;
    for (int i = 0; i < s->n_runs; i++) {
        gen_job *j = s->active[i].j;
        job_choice *ch = &j->ch[s->active[i].c];
        int prompt = ch->phase == PH_PROMPT, max = j->g[s->active[i].c / j->n].max_tokens;
        int draft = prompt ? 0 : spec_seq_draft(&ch->sp, spec_room(s->n_ctx, engine_seq_len(s->eng, ch->seq), max, ch->n_gen));
        if (!prompt && ch->sp.want > 0) { s->dq[nd] = &ch->sp; s->dseq[nd] = ch->seq; s->drun[nd++] = i; }
        s->want[i] = (step_want){ prompt, prompt ? j->g[s->active[i].c / j->n].n_prompt - ch->fed : 1, ch->fed,
                                  j->prompt_lp ? PLP_PIECE : s->seq_chunk, draft }; /* the rows buffer holds
                                  * PLP_PIECE; a longer chunk would take the engine several forwards */
    }
    if (nd) { /* the MTP drafter's drafts for every choice that wants one, in one call */
        char err[256];
        if (spec_mtp_drafts(s->eng, s->dq, s->dseq, nd, err, sizeof err))
            log_line("engine", "drafting failed: %s; the step decodes plainly", err);
        for (int k = 0; k < nd; k++) s->want[s->drun[k]].draft = s->dq[k]->n_draft;
    }
    const engine_info *in = engine_get_info(s->eng);
    /* a recurrent state goes back only after a verification that got a checkpoint: no more drafts than those */
    for (int i = 0, left = in->state_checkpoints; in->fit.state_seq_bytes && i < s->n_runs; i++)
        if (s->want[i].draft && left-- <= 0) s->want[i].draft = 0;
    step_rule rule = { s->step_tokens, s->block, s->block, (int)in->max_rows, (int)in->draft_rows };
    step_plan(s->want, s->n_runs, &rule, s->take);
    int m = 0, chunks = 0;
    for (int i = 0; i < s->n_runs; i++) {
        if (!s->take[i]) continue;
        s->irun[m] = i;
        s->take[m] = s->take[i]; /* m <= i: entries before i are already read */
        if (s->want[i].prompt) {
            const run *r = &s->active[i];
            s->take[m] = image_cut(&r->j->g[r->c / r->j->n], s->want[i].pos, s->take[m]);
        }
        fill_item(&s->items[m], &s->active[i], s->take[m]);
        chunks += s->want[i].prompt;
        m++;
    }
    metrics_prefill_chunks(s->m, chunks);
    return m;
}

/* the unpinned groups with images among the prompts about to step (a group once, whatever its choices) into gs
 * (room for n_runs), their images into ims (NULL: counted only); the number of groups, *ni the images */
static int groups_to_pin(const sched *s, job_group **gs, engine_image **ims, int *ni)
{
    int ng = 0;
    *ni = 0;
    for (int i = 0; i < s->n_runs; i++) {
        const run *r = &s->active[i];
        if (!r->j || r->j->ch[r->c].phase != PH_PROMPT) continue;
        job_group *g = &r->j->g[r->c / r->j->n];
        if (!g->n_images || g->pinned) continue;
        int seen = 0;
        for (int k = 0; k < ng && !seen; k++) seen = gs[k] == g;
        if (seen) continue;
        gs[ng] = g;
        for (int k = 0; ims && k < g->n_images; k++) ims[*ni + k] = g->images[k];
        *ni += g->n_images;
        ng++;
    }
    return ng;
}

/* the images of several prompts in one engine_image_encode (one encoder pass takes many small images at once);
 * 0 when all are pinned, else -1 with nothing pinned (each prompt is then tried alone) */
static int pin_together(sched *s)
{
    job_group **gs = s->n_runs > 1 ? malloc((size_t)s->n_runs * sizeof *gs) : NULL;
    int ni = 0, ng = gs ? groups_to_pin(s, gs, NULL, &ni) : 0;
    engine_image **ims = ng > 1 ? malloc((size_t)ni * sizeof *ims) : NULL;
    char why[256];
    int rc = -1;
    if (ims) {
        groups_to_pin(s, gs, ims, &ni);
        double t = monotonic_seconds();
        if (!engine_image_encode(s->eng, ims, ni, why, sizeof why)) {
            if (engine_image_wait(s->eng, why, sizeof why)) {
                for (int i = 0; i < ni; i++) engine_image_release(s->eng, ims[i]);
            } else {
                metrics_images(s->m, ni, monotonic_seconds() - t);
                for (int k = 0; k < ng; k++) gs[k]->pinned = 1;
                rc = 0;
            }
        }
    }
    free(gs);
    free(ims);
    return rc;
}

/* the images of prompts about to step, encoded and pinned out of the queue's lock (an encode holds the device
 * a while; request threads submit meanwhile), together where there are several; a prompt whose image does not
 * encode ends with the reason */
static void pin_prompts(sched *s)
{
    if (!pin_together(s)) return;
    for (int i = 0; i < s->n_runs; i++) {
        const run *r = &s->active[i];
        if (!r->j || r->j->ch[r->c].phase != PH_PROMPT) continue;
        char why[256], msg[300];
        if (!group_pin(s, &r->j->g[r->c / r->j->n], why, sizeof why)) continue;
        snprintf(msg, sizeof msg, "image encoding failed: %s", why);
        run_end(s, i, JOB_ERROR, msg);
    }
    compact(s);
}

static void step_all(sched *s)
{
    char err[256];
    int *failed = s->failed;
    pin_prompts(s);
    make_masks(s);
    if (!s->n_runs) return;
    int n = plan_step(s);
    int rc = engine_step(s->eng, s->items, n, err, sizeof err);
    for (int k = 0; k < n; k++) failed[k] = rc;
    if (rc && n > 1) {
        /* find the culprit: a step refused before the forward (bad item, KV cache full) changed
         * nothing, so run the sequences one at a time (a hybrid model's step that failed after its forward
         * left their recurrent state part-written: engine_step refuses them, they end with its error) */
        for (int k = 0; k < n; k++) {
            fill_item(&s->items[k], &s->active[s->irun[k]], s->take[k]);
            failed[k] = engine_step(s->eng, &s->items[k], 1, err, sizeof err);
        }
    }
    double t = monotonic_seconds();
    for (int k = 0; k < n; k++) { /* forks join the end of the list: not this step's */
        int i = s->irun[k];
        gen_job *j = s->active[i].j;
        if (!failed[k] && s->items[k].draft &&
            spec_seq_accept(&j->ch[s->active[i].c].sp, s->eng, s->m, &s->items[k], err, sizeof err))
            failed[k] = -1;
        if (failed[k] == ENGINE_KV_FULL) { /* admission should make this impossible: end cleanly */
            log_line("engine", "%s: the sequence ends as if at max_tokens", err);
            run_end(s, i, JOB_LENGTH, NULL);
        } else if (failed[k]) {
            log_line("engine", "engine step failed: %s", err);
            metrics_engine_error(s->m);
            char msg[300];
            snprintf(msg, sizeof msg, "engine failure: %s", err);
            run_end(s, i, JOB_ERROR, msg);
        } else if (j->ch[s->active[i].c].phase == PH_PROMPT) {
            prompt_done(s, i, &s->items[k], t);
        } else if (s->items[k].draft) { /* the accepted draft, then the target's next: as plain decoding's */
            const spec_seq *q = &j->ch[s->active[i].c].sp;
            for (int r = 0; s->active[i].j && r < q->n_out; r++) after_step(s, i, q->out[r], t); /* to a stop */
        } else {
            after_step(s, i, s->items[k].token_out, t);
        }
    }
    compact(s);
}

/* runs whose job was cancelled, or whose choice the reader stopped, end before the step */
static void drop_cancelled(sched *s)
{
    for (int i = 0; i < s->n_runs; i++) {
        gen_job *j = s->active[i].j;
        if (atomic_load(&s->cancel_all)) {
            int none = CANCEL_NONE;
            atomic_compare_exchange_strong(&j->cancel, &none, CANCEL_ALL);
        }
        if (atomic_load(&j->cancel) != CANCEL_NONE || atomic_load(&j->ch[s->active[i].c].stop))
            run_end(s, i, JOB_CANCELLED, NULL);
    }
    compact(s);
}

/* under s->mu: jobs with a running sequence (a job's runs need not be next to each other) */
static void count_active(sched *s)
{
    int k = 0;
    for (int i = 0; i < s->n_runs; i++) {
        int seen = 0;
        for (int m = 0; m < i && !seen; m++) seen = s->active[m].j == s->active[i].j;
        k += !seen;
    }
    s->n_active = k;
    publish_counts(s);
}

/* engine thread: the KV pools' blocks for the pool's view (the engine is ours to read here) */
static void publish_kv(sched *s)
{
    engine_kv_stats kv;
    engine_kv_usage(s->eng, &kv);
    metrics_kv(s->m, KVP_FULL, kv.full_blocks, kv.full_free, kv.full_cached);
    metrics_kv(s->m, KVP_RING, kv.ring_blocks, kv.ring_free, kv.ring_cached);
}

static void *engine_main(void *arg)
{
    sched *s = arg;
    publish_kv(s);
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->stopping && s->n_runs == 0 && !s->head) pthread_cond_wait(&s->cv, &s->mu);
        if (s->stopping) { pthread_mutex_unlock(&s->mu); break; }
        start_queued(s);
        count_active(s);
        pthread_mutex_unlock(&s->mu);
        drop_cancelled(s);
        if (s->n_runs) step_all(s);
        pthread_mutex_lock(&s->mu);
        count_active(s);
        pthread_mutex_unlock(&s->mu);
        publish_kv(s);
    }
    for (int i = 0; i < s->n_runs; i++) run_end(s, i, JOB_ERROR, "server shutting down");
    s->n_runs = 0;
    pthread_mutex_lock(&s->mu);
    gen_job *q = s->head;
    s->head = s->tail = NULL;
    s->n_queued = s->n_active = s->queued_seqs = 0;
    publish_counts(s);
    pthread_mutex_unlock(&s->mu);
    while (q) {
        gen_job *next = q->next;
        for (int c = q->next_group * q->n, n = q->n_choices; c < n; c++)
            choice_finish(s, q, c, JOB_ERROR, "server shutting down");
        job_live_drop(q);
        q = next;
    }
    return NULL;
}

/* what sched_create allocates, freed (also when it failed half-way) */
static void free_parts(sched *s)
{
    constraint_pool_destroy(s->pool);
    constraint_vocab_destroy(s->vocab);
    free(s->active); free(s->items); free(s->failed); free(s->row);
    free(s->want); free(s->take); free(s->irun);
    free(s->dq); free(s->dseq); free(s->drun);
    free(s->mcon); free(s->mbits); free(s->mcount); free(s->mrun);
    free(s);
}

int sched_create(sched **out, engine *e, const sched_opts *o, metrics *m, char *err, size_t errlen)
{
    sched *s = calloc(1, sizeof *s);
    if (!s) { snprintf(err, errlen, "out of memory"); return -1; }
    s->eng = e;
    s->m = m;
    s->n_vocab = engine_get_info(e)->n_vocab;
    if (engine_tokenizer(e) && constraint_vocab_create(&s->vocab, engine_tokenizer(e), err, errlen)) {
        free(s);
        return -1;
    }
    s->max_seqs = o->max_seqs > 0 ? o->max_seqs : 1;
    s->max_queue = o->max_queue >= 0 ? o->max_queue : 0;
    s->queue_timeout = o->queue_timeout > 0 ? o->queue_timeout : 0;
    s->pass_s = o->pass_s > 0 ? o->pass_s : s->queue_timeout > 0 ? s->queue_timeout / 4 : SCHED_PASS_S;
    kv_budget_init(&s->kv, e);
    s->step_tokens = o->step_tokens > 0 ? o->step_tokens : (int)engine_get_info(e)->fit.max_batch;
    s->seq_chunk = (int)engine_get_info(e)->fit.seq_chunk;
    s->n_ctx = (int)engine_get_info(e)->n_ctx;
    s->spec = o->spec;
    s->draft_max = o->draft_max > 0 ? o->draft_max : SPEC_DRAFT_DEFAULT;
    engine_kv_stats kv;
    engine_kv_usage(e, &kv);
    s->block = kv.block_tokens > 0 ? (int)kv.block_tokens : 1;
    s->active = calloc((size_t)s->max_seqs, sizeof *s->active);
    s->items = calloc((size_t)s->max_seqs, sizeof *s->items);
    s->failed = calloc((size_t)s->max_seqs, sizeof *s->failed);
    s->row = malloc(s->n_vocab * sizeof *s->row);
    s->want = calloc((size_t)s->max_seqs, sizeof *s->want);
    s->take = calloc((size_t)s->max_seqs, sizeof *s->take);
    s->irun = calloc((size_t)s->max_seqs, sizeof *s->irun);
    s->dq = calloc((size_t)s->max_seqs, sizeof *s->dq);
    s->dseq = calloc((size_t)s->max_seqs, sizeof *s->dseq);
    s->drun = calloc((size_t)s->max_seqs, sizeof *s->drun);
    s->mcon = calloc((size_t)s->max_seqs, sizeof *s->mcon);
    s->mbits = calloc((size_t)s->max_seqs, sizeof *s->mbits);
    s->mcount = calloc((size_t)s->max_seqs, sizeof *s->mcount);
    s->mrun = calloc((size_t)s->max_seqs, sizeof *s->mrun);
    if (!s->active || !s->items || !s->failed || !s->row || !s->want || !s->take || !s->irun || !s->dq || !s->dseq ||
        !s->drun || !s->mcon || !s->mbits || !s->mcount || !s->mrun ||
        (s->vocab && constraint_pool_create(&s->pool, mask_threads(), err, errlen))) {
        free_parts(s);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    atomic_init(&s->cancel_all, 0);
    atomic_init(&s->used, 0);
    int rc = pthread_create(&s->thread, NULL, engine_main, s);
    if (rc) {
        snprintf(err, errlen, "cannot start the engine thread: %s", strerror(rc));
        pthread_cond_destroy(&s->cv);
        pthread_mutex_destroy(&s->mu);
        free_parts(s);
        return -1;
    }
    *out = s;
    return 0;
}

void sched_destroy(sched *s)
{
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free_parts(s);
}

const constraint_vocab *sched_vocab(const sched *s)
{
    return s->vocab;
}

void sched_close(sched *s)
{
    pthread_mutex_lock(&s->mu);
    s->closed = 1;
    pthread_mutex_unlock(&s->mu);
}

void sched_cancel_all(sched *s)
{
    pthread_mutex_lock(&s->mu);
    atomic_store(&s->cancel_all, 1);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

void sched_limits(const sched *s, int *max_seqs, int *max_queue)
{
    *max_seqs = s->max_seqs;
    *max_queue = s->max_queue;
}

int sched_step_tokens(const sched *s) { return s->step_tokens; }

void sched_counts(sched *s, int *active, int *queued)
{
    pthread_mutex_lock(&s->mu);
    *active = s->n_active;
    *queued = s->n_queued;
    pthread_mutex_unlock(&s->mu);
}
