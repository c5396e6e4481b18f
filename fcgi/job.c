/* job.c — a generation job's lifetime and its token channels: created for a job_spec, read by its
 * request thread (job_wait / job_take), fed and ended by the engine thread (job_int.h). */
#include "job_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"

void job_destroy(gen_job *j)
{
    for (int c = 0; j->ch && c < j->n_choices; c++) {
        job_choice *ch = &j->ch[c];
        sampler_destroy(ch->smp);
        constraint_destroy(ch->con);
        free(ch->allow);
        free(ch->toks);
        free(ch->lps);
        spec_seq_free(&ch->sp);
    }
    for (int g = 0; j->g && g < j->n_groups; g++) {
        free(j->g[g].prompt);
        free(j->g[g].rows);
        free(j->g[g].plp);
        free(j->g[g].spans);
        free(j->g[g].cut);
        for (int i = 0; i < j->g[g].n_images; i++) engine_image_destroy(j->g[g].images[i]);
        free(j->g[g].images);
    }
    free(j->ch);
    free(j->g);
    free(j->bias);
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

static void job_unref(gen_job *j)
{
    if (atomic_fetch_sub(&j->refs, 1) == 1) job_destroy(j);
}

int job_started(gen_job *j)
{
    return atomic_load(&j->started);
}

int job_cached_tokens(gen_job *j) { return atomic_load(&j->cached); }

void job_release(gen_job *j)
{
    if (j) job_unref(j);
}

void job_cancel(gen_job *j, int client_gone)
{
    int none = CANCEL_NONE;
    atomic_compare_exchange_strong(&j->cancel, &none, client_gone ? CANCEL_CLIENT : CANCEL_STOP);
}

void job_stop_choice(gen_job *j, int c)
{
    if (c >= 0 && c < j->n_choices) atomic_store(&j->ch[c].stop, 1);
}

static void deadline(struct timespec *until, double timeout_s)
{
    clock_gettime(CLOCK_REALTIME, until);
    double t = (double)until->tv_nsec / 1e9 + timeout_s;
    until->tv_sec += (time_t)t;
    until->tv_nsec = (long)((t - (double)(time_t)t) * 1e9);
}

int job_wait(gen_job *j, unsigned *seen, double timeout_s)
{
    struct timespec until;
    if (timeout_s > 0) deadline(&until, timeout_s);
    int rc = 0;
    pthread_mutex_lock(&j->mu);
    while (j->events == *seen && rc == 0) {
        if (timeout_s <= 0) pthread_cond_wait(&j->cv, &j->mu);
        else if (pthread_cond_timedwait(&j->cv, &j->mu, &until) == ETIMEDOUT) rc = -1;
    }
    *seen = j->events;
    pthread_mutex_unlock(&j->mu);
    return rc;
}

int job_take(gen_job *j, int c, int32_t *toks, engine_logprobs *lps, int cap, job_status *st)
{
    job_choice *ch = &j->ch[c];
    pthread_mutex_lock(&j->mu);
    int k = ch->n_toks - ch->n_read;
    if (k > cap) k = cap;
    memcpy(toks, ch->toks + ch->n_read, (size_t)k * sizeof *toks);
    if (lps && ch->lps) memcpy(lps, ch->lps + ch->n_read, (size_t)k * sizeof *lps);
    ch->n_read += k;
    st->end = ch->n_read == ch->n_toks ? ch->end : JOB_RUNNING;
    snprintf(st->error, sizeof st->error, "%s", st->end == JOB_ERROR ? j->error : "");
    pthread_mutex_unlock(&j->mu);
    return k;
}

const engine_logprobs *job_prompt_logprobs(gen_job *j, int p)
{
    if (p < 0 || p >= j->n_groups) return NULL;
    pthread_mutex_lock(&j->mu);
    const engine_logprobs *r = j->g[p].plp_ready ? j->g[p].plp : NULL;
    pthread_mutex_unlock(&j->mu);
    return r;
}

void job_push(gen_job *j, int c, int32_t tok)
{
    job_choice *ch = &j->ch[c];
    pthread_mutex_lock(&j->mu);
    if (ch->n_toks < j->g[c / j->n].max_tokens) {
        if (ch->lps) ch->lps[ch->n_toks] = ch->lp_now;
        ch->toks[ch->n_toks++] = tok;
    }
    j->events++;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

void job_live_drop(gen_job *j)
{
    if (--j->live == 0) job_unref(j);
}

/* the job's groups and choices for spec; 0, or -1 out of memory (job_destroy undoes it) */
static int job_fill(gen_job *j, const job_spec *spec, uint32_t n_vocab, int spec_mode, int draft_max)
{
    j->n_groups = spec->n_prompts;
    j->n = spec->n;
    j->n_choices = spec->n_prompts * spec->n;
    j->ch = calloc((size_t)j->n_choices, sizeof *j->ch);
    if (!j->ch) return -1;
    for (int c = 0; c < j->n_choices; c++) { /* from here job_free finds everything it must free */
        j->ch[c].con = spec->con ? spec->con[c] : NULL;
        j->ch[c].seq = -1;
        atomic_init(&j->ch[c].stop, 0);
    }
    if (!(j->g = calloc((size_t)j->n_groups, sizeof *j->g))) return -1;
    for (int p = 0; p < j->n_groups; p++) {
        job_group *g = &j->g[p];
        const job_prompt *jp = &spec->prompts[p];
        g->prompt = malloc((size_t)jp->n * sizeof *g->prompt);
        if (!g->prompt) return -1;
        memcpy(g->prompt, jp->ids, (size_t)jp->n * sizeof *g->prompt);
        g->n_prompt = jp->n;
        g->max_tokens = jp->max_tokens;
        if (spec->prompt_logprobs && jp->n > 1 && !(g->plp = calloc((size_t)jp->n - 1, sizeof *g->plp))) return -1;
        if (jp->n_images) {
            if (!(g->images = calloc((size_t)jp->n_images, sizeof *g->images))) return -1;
            for (; g->n_images < jp->n_images; g->n_images++) { /* taken: job_destroy frees them */
                g->images[g->n_images] = jp->images[g->n_images];
                jp->images[g->n_images] = NULL;
            }
        }
        if (jp->n_spans) {
            size_t b = (size_t)jp->n_spans * sizeof *g->spans;
            if (!(g->spans = malloc(b)) || !(g->cut = malloc(b))) return -1;
            memcpy(g->spans, jp->spans, b);
            g->n_spans = jp->n_spans;
        }
    }
    for (int c = 0; c < j->n_choices; c++) {
        job_choice *ch = &j->ch[c];
        size_t max = (size_t)j->g[c / j->n].max_tokens;
        sampler_params sp = spec->sampling;
        sp.seed += (uint64_t)c; /* the choices differ, each reproducible */
        if (!(ch->toks = malloc(max * sizeof *ch->toks)) || sampler_create(&ch->smp, &sp, n_vocab)) return -1;
        if (ch->con && !(ch->allow = malloc(((size_t)n_vocab + 31) / 32 * sizeof *ch->allow))) return -1;
        if (spec->n_logprobs > 0 && !(ch->lps = malloc(max * sizeof *ch->lps))) return -1;
        int drafts = !spec->n_logprobs && !spec->n_bias && !ch->con; /* rows before the last come raw */
        const job_prompt *jp = &spec->prompts[c / j->n];
        if (spec_seq_init(&ch->sp, spec_mode, draft_max, drafts, ch->smp, n_vocab, jp->ids, jp->n, jp->max_tokens))
            return -1;
    }
    if (spec->n_bias > 0) {
        if (!(j->bias = malloc((size_t)spec->n_bias * sizeof *j->bias))) return -1;
        memcpy(j->bias, spec->bias, (size_t)spec->n_bias * sizeof *j->bias);
        j->n_bias = spec->n_bias;
    }
    j->n_logprobs = spec->n_logprobs;
    j->ignore_eos = spec->ignore_eos;
    j->priority = spec->priority;
    j->prompt_lp = spec->prompt_logprobs && spec->n_logprobs > 0;
    return 0;
}

int job_create(gen_job **out, const job_spec *spec, uint32_t n_vocab, int spec_mode, int draft_max)
{
    *out = NULL;
    gen_job *j = calloc(1, sizeof *j);
    if (!j || pthread_mutex_init(&j->mu, NULL)) {
        for (int c = 0; spec->con && c < spec->n_prompts * spec->n; c++) constraint_destroy(spec->con[c]);
        free(j);
        return -1;
    }
    pthread_cond_init(&j->cv, NULL); /* from here job_destroy undoes everything */
    if (job_fill(j, spec, n_vocab, spec_mode, draft_max)) {
        if (!j->ch)
            for (int c = 0; spec->con && c < j->n_choices; c++) constraint_destroy(spec->con[c]);
        job_destroy(j);
        return -1;
    }
    j->t_arrival = spec->t_arrival;
    j->t_submit = monotonic_seconds();
    j->live = j->n_choices + 1;
    atomic_init(&j->cancel, CANCEL_NONE);
    atomic_init(&j->started, 0);
    atomic_init(&j->cached, 0);
    atomic_init(&j->refs, 2); /* the reader and the scheduler */
    *out = j;
    return 0;
}

void job_choice_end(gen_job *j, int c, enum job_end end, const char *error)
{
    job_choice *ch = &j->ch[c];
    pthread_mutex_lock(&j->mu);
    ch->end = end;
    if (error && !j->error[0]) snprintf(j->error, sizeof j->error, "%s", error);
    j->events++;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

void job_prompt_logprobs_ready(gen_job *j, int p)
{
    pthread_mutex_lock(&j->mu);
    j->g[p].plp_ready = 1;
    pthread_mutex_unlock(&j->mu);
}
