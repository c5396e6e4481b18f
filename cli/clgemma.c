/* clgemma — command-line front end of the engine: the commands (options.c holds their options and
 * usage: clgemma --help). Errors: one line on stderr, exit 1. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "clock.h"
#include "engine.h"
#include "options.h"
#include "spec.h"
#include "synth_gguf.h"
#include "synth_mmproj.h"
#include "vbench.h"

/* the options that size the engine: device, context, chunk, sequences, cache and its type */
static engine_opts sizing(const cli_args *a, int max_seqs)
{
    engine_opts o = { 0 };
    o.device = a->device;
    o.n_ctx = a->ctx;
    o.max_batch_tokens = a->max_batch;
    o.max_seqs = max_seqs;
    o.kv_tokens = a->kv_tokens;
    o.kv_type = a->kv_type ? engine_kv_type_parse(a->kv_type) : ENGINE_KV_F16;
    o.draft_path = a->draft_path;
    /* drafts may be cut back: hybrid models keep the state before each sequence's verification */
    if (a->draft_max > 0 || a->draft_path || a->bench_drafts) o.state_checkpoints = max_seqs > 0 ? max_seqs : 1;
    if (o.kv_type < 0) cli_die("--kv-type: unknown type '%s' (f16, q8_0 or q4)", a->kv_type);
    return o;
}

static engine *load(const cli_args *a, int max_seqs)
{
    if (!a->synthetic && (a->synth_type || a->synth_layers)) cli_die("%s", "--type and --layers need --synthetic");
    if (a->synthetic && a->model) cli_die("%s", "bench: give -m FILE or --synthetic, not both");
    if (!a->model && !a->synthetic) cli_die("%s: -m FILE is required", a->cmd);
    engine_opts o = sizing(a, max_seqs);
    o.settings = a->settings;
    o.n_settings = a->n_settings;
    o.profile = a->profile;
    o.verbose = getenv("CLGEMMA_VERBOSE") != NULL;
    engine *e;
    char err[512];
    if (a->synthetic) {
        if (engine_load_synthetic(&e, a->synthetic, a->synth_type ? a->synth_type : "q4_k", a->synth_layers, &o, err,
                                  sizeof err))
            cli_die("%s", err);
        const engine_info *in = engine_get_info(e);
        fprintf(stderr, "clgemma: %s: %u layers, %.2f GiB of weights made on %s (+ %.2f GiB in host memory) in "
                "%.2f s; tensor types: %s; KV %.1f KiB per token + %.1f MiB per sequence (sliding-window rings)\n",
                in->name, in->n_layer, in->weight_bytes / 1073741824.0, in->device,
                in->host_weight_bytes / 1073741824.0, in->load_seconds, in->types, in->kv_bytes_per_token / 1024.0,
                in->kv_ring_bytes_per_seq / 1048576.0);
    } else if (engine_load(&e, a->model, &o, err, sizeof err)) {
        cli_die("%s", err);
    }
    return e;
}

/* the prompt as ids: with --chat, one user message through the model's chat template (its text is never
 * parsed for control tokens); else BOS and special-token parsing as llama.cpp does */
static int32_t *encode_prompt(engine *e, const char *text, int chat, int *n)
{
    if (chat) {
        json_object *msgs = json_object_new_array(), *m = json_object_new_object();
        if (!msgs || !m || json_object_array_add(msgs, m)) cli_die("%s", "out of memory");
        json_object_object_add(m, "role", json_object_new_string("user"));
        json_object_object_add(m, "content", json_object_new_string(text));
        engine_chat_opts co = { 1, 0 };
        char err[512];
        int32_t *ids;
        int cnt = engine_chat_encode(e, msgs, NULL, &co, &ids, err, sizeof err);
        json_object_put(msgs);
        if (cnt < 0) cli_die("chat template: %s", err);
        *n = cnt;
        return ids;
    }
    const tokenizer *t = engine_tokenizer(e);
    size_t len = strlen(text);
    int cnt = tokenizer_encode(t, text, len, 1, 1, NULL, 0);
    if (cnt < 0) cli_die("%s", "tokenizer failed");
    int32_t *ids = malloc(sizeof(int32_t) * (cnt + 1));
    if (!ids) cli_die("%s", "out of memory");
    tokenizer_encode(t, text, len, 1, 1, ids, cnt);
    *n = cnt;
    return ids;
}

static void step_or_die(engine *e, engine_item *items, int n)
{
    char err[512];
    if (engine_step(e, items, n, err, sizeof err)) cli_die("%s", err);
}

/* without --chat only the vocabulary is read: vocab-only GGUFs (no tensors) work too */
static int tokenize_vocab(const cli_args *a)
{
    if (!a->model) cli_die("%s", "tokenize: -m FILE is required");
    char err[1024];
    tokenizer *t;
    if (tokenizer_load(&t, a->model, err, sizeof err)) cli_die("%s", err);
    size_t len = strlen(a->prompts[0]);
    int n = tokenizer_encode(t, a->prompts[0], len, 1, 1, NULL, 0);
    int32_t *ids = n >= 0 ? malloc(sizeof(int32_t) * (n + 1)) : NULL;
    if (!ids || tokenizer_encode(t, a->prompts[0], len, 1, 1, ids, n) != n) cli_die("%s", "tokenizer failed");
    for (int i = 0; i < n; i++) printf("%s%d", i ? " " : "", ids[i]);
    printf("\n");
    free(ids);
    tokenizer_destroy(t);
    return 0;
}

static int cmd_tokenize(const cli_args *a)
{
    if (a->n_prompts != 1) cli_die("%s", "tokenize needs exactly one -p TEXT");
    if (!a->chat) return tokenize_vocab(a);
    engine *e = load(a, 1);
    int n;
    int32_t *ids = encode_prompt(e, a->prompts[0], a->chat, &n);
    for (int i = 0; i < n; i++) printf("%s%d", i ? " " : "", ids[i]);
    printf("\n");
    free(ids);
    engine_destroy(e);
    return 0;
}

static int cmd_logits(const cli_args *a)
{
    if (a->n_prompts != 1 || !a->out_path) cli_die("%s", "logits needs -p TEXT and -o OUT.f32");
    engine *e = load(a, 1);
    int n;
    int32_t *ids = encode_prompt(e, a->prompts[0], a->chat, &n);
    uint32_t nv = engine_get_info(e)->n_vocab;
    float *lg = malloc(sizeof(float) * nv);
    if (!lg) cli_die("%s", "out of memory");
    int seq = engine_seq_new(e);
    engine_item it = { .seq = seq, .tokens = ids, .n_tokens = n, .logits = lg };
    step_or_die(e, &it, 1);
    FILE *f = fopen(a->out_path, "wb");
    if (!f || fwrite(lg, sizeof(float), nv, f) != nv || fclose(f)) cli_die("cannot write %s", a->out_path);
    free(lg);
    free(ids);
    engine_destroy(e);
    return 0;
}

/* prints a decoded piece (or the id) as soon as it is known */
static void emit(engine *e, tok_stream *ts, int32_t id, int as_ids, int first)
{
    if (as_ids) { printf("%s%d", first ? "" : " ", id); fflush(stdout); return; }
    char buf[256];
    int n = tok_stream_push(ts, id, buf, sizeof buf);
    (void)e;
    if (n > 0) { fwrite(buf, 1, (size_t)n, stdout); fflush(stdout); }
}

/* the prompt must leave room in the context; -n past it is a note (generation stops there) */
static void check_budget(const engine *e, int n_prompt, int n_predict)
{
    char why[256];
    int rc = engine_budget(e, n_prompt, n_predict, why, sizeof why);
    if (rc == -1) cli_die("%s (use --ctx)", why);
    if (rc == -2) fprintf(stderr, "clgemma: note: %s; generation stops there\n", why);
}

static int cmd_generate(const cli_args *a)
{
    if (a->n_prompts != 1) cli_die("%s", "generate needs exactly one -p TEXT");
    engine *e = load(a, 1);
    const engine_info *in = engine_get_info(e);
    int n;
    int32_t *ids = encode_prompt(e, a->prompts[0], a->chat, &n);
    int n_predict = a->n_predict >= 0 ? a->n_predict : 128;
    check_budget(e, n, n_predict);
    sampler *smp;
    if (sampler_create(&smp, &a->sp, in->n_vocab)) cli_die("%s", "out of memory");
    int seq = engine_seq_new(e);
    tok_stream ts;
    tok_stream_init(&ts, engine_tokenizer(e), 0);
    double t0 = monotonic_seconds(), t1 = t0;
    engine_item it = { .seq = seq, .tokens = ids, .n_tokens = n, .smp = smp };
    int produced = 0;
    spec_run sr = { 0 };
    int k_max = a->draft_max > 0 ? a->draft_max : a->draft_path ? 4 : 0;
    if (k_max > 0 && spec_begin(&sr, ids, n, k_max, smp)) cli_die("%s", sr.err);
    sr.adapt = 1; /* the worker's rules: a drafter whose drafts are rejected whole stops costing steps */
    if (n_predict > 0) {
        step_or_die(e, &it, 1);
        t1 = monotonic_seconds();
        int32_t tok = it.token_out;
        for (int done = 0; !done;) {
            /* tok, then the drafts the target accepted after it, each as plain decoding would have it */
            int32_t out[SPEC_MAX_DRAFT + 1];
            int n_out = sr.on ? spec_next(&sr, e, seq, tok, out) : (out[0] = tok, 1);
            for (int i = 0; i < n_out && !done; i++) {
                engine_stop v = engine_should_stop(e, seq, out[i], produced, n_predict);
                if (v == ENGINE_STOP_TOKEN) { done = 1; break; }
                emit(e, &ts, out[i], a->ids, produced == 0);
                produced++;
                if (v == ENGINE_STOP_LENGTH) done = 1;
            }
            if (done) break;
            if (n_out < 0) cli_die("%s", sr.err);
            if (sr.on) { tok = sr.next; continue; }
            it.tokens = &tok;
            it.n_tokens = 1;
            step_or_die(e, &it, 1);
            tok = it.token_out;
        }
    }
    char tail[16];
    int tn = a->ids ? 0 : tok_stream_flush(&ts, tail, sizeof tail);
    if (tn > 0) fwrite(tail, 1, (size_t)tn, stdout);
    printf("\n");
    double t2 = monotonic_seconds();
    fprintf(stderr, "clgemma: %s | load %.2f s | prompt %d tok %.1f tok/s | generated %d tok %.1f tok/s\n", in->device,
            in->load_seconds, n, n / (t1 - t0 > 0 ? t1 - t0 : 1e-9), produced,
            produced > 1 ? (produced - 1) / (t2 - t1) : 0.0);
    if (sr.on)
        fprintf(stderr, "clgemma: speculation: %d steps, %d drafted, %d accepted (%.0f%%)\n", sr.steps, sr.drafted,
                sr.accepted, sr.drafted ? 100.0 * sr.accepted / sr.drafted : 0.0);
    spec_end(&sr);
    sampler_destroy(smp);
    free(ids);
    engine_destroy(e);
    return 0;
}

static int cmd_batch(const cli_args *a)
{
    int np = a->n_prompts;
    if (np < 1) cli_die("%s", "batch needs at least one -p TEXT");
    engine *e = load(a, np);
    const engine_info *in = engine_get_info(e);
    int n_predict = a->n_predict >= 0 ? a->n_predict : 32;
    int32_t *ids[MAX_PROMPTS], *out[MAX_PROMPTS];
    int len[MAX_PROMPTS], nout[MAX_PROMPTS], done[MAX_PROMPTS], seqs[MAX_PROMPTS];
    sampler *smp[MAX_PROMPTS];
    engine_item items[MAX_PROMPTS];
    for (int i = 0; i < np; i++) {
        ids[i] = encode_prompt(e, a->prompts[i], a->chat, &len[i]);
        check_budget(e, len[i], n_predict);
        out[i] = calloc((size_t)n_predict + 1, sizeof(int32_t));
        nout[i] = 0;
        done[i] = n_predict == 0;
        seqs[i] = engine_seq_new(e);
        if (!out[i] || seqs[i] < 0 || sampler_create(&smp[i], &a->sp, in->n_vocab)) cli_die("%s", "out of memory");
        items[i] = (engine_item){ .seq = seqs[i], .tokens = ids[i], .n_tokens = len[i], .smp = smp[i] };
    }
    /* prefill all prompts in one step, then decode every live sequence together */
    int live = 0;
    for (int i = 0; i < np; i++) live += !done[i];
    int32_t next[MAX_PROMPTS];
    engine_item step[MAX_PROMPTS];
    int map[MAX_PROMPTS], ns = 0;
    for (int i = 0; i < np; i++)
        if (!done[i]) { step[ns] = items[i]; map[ns++] = i; }
    while (ns > 0) {
        step_or_die(e, step, ns);
        int k = 0;
        for (int j = 0; j < ns; j++) {
            int i = map[j];
            int32_t tok = step[j].token_out;
            engine_stop v = engine_should_stop(e, seqs[i], tok, nout[i], n_predict);
            if (v == ENGINE_STOP_TOKEN) { done[i] = 1; continue; }
            out[i][nout[i]++] = tok;
            if (v == ENGINE_STOP_LENGTH) { done[i] = 1; continue; }
            next[i] = tok;
            step[k] = (engine_item){ .seq = seqs[i], .tokens = &next[i], .n_tokens = 1, .smp = smp[i] };
            map[k++] = i;
        }
        ns = k;
    }
    for (int i = 0; i < np; i++) {
        if (a->ids) {
            for (int j = 0; j < nout[i]; j++) printf("%s%d", j ? " " : "", out[i][j]);
        } else {
            tok_stream ts;
            tok_stream_init(&ts, engine_tokenizer(e), 0);
            for (int j = 0; j < nout[i]; j++) emit(e, &ts, out[i][j], 0, 0);
            char tail[16];
            int tn = tok_stream_flush(&ts, tail, sizeof tail);
            if (tn > 0) fwrite(tail, 1, (size_t)tn, stdout);
        }
        printf("\n");
        sampler_destroy(smp[i]);
        free(ids[i]);
        free(out[i]);
    }
    engine_destroy(e);
    return 0;
}

static int cmp_d(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* synthetic weights: after the timed work, one more (untimed) token per sequence with its logits
 * read back; any NaN/inf, or an out-of-range id, fails the bench */
static void check_finite(engine *e, engine_item *items, int B, int32_t *next)
{
    uint32_t nv = engine_get_info(e)->n_vocab;
    float *lg = malloc(sizeof(float) * nv);
    if (!lg) cli_die("%s", "out of memory");
    for (int b = 0; b < B; b++) {
        next[b] = items[b].token_out;
        if (next[b] < 0 || (uint32_t)next[b] >= nv) cli_die("%s", "synthetic model produced an out-of-range token id");
        engine_item it = items[b];
        it.tokens = &next[b];
        it.n_tokens = 1;
        it.logits = lg;
        step_or_die(e, &it, 1);
        size_t bad = 0;
        float mx = 0;
        for (uint32_t i = 0; i < nv; i++) {
            if (!(lg[i] == lg[i]) || lg[i] > 1e30f || lg[i] < -1e30f) bad++;
            else if (fabsf(lg[i]) > mx) mx = fabsf(lg[i]);
        }
        if (bad) {
            char msg[96];
            snprintf(msg, sizeof msg, "%zu of %u logits of sequence %d", bad, nv, b);
            cli_die("synthetic model: NaN/inf in the output (%s)", msg);
        }
        if (b == 0) fprintf(stderr, "clgemma: output check: logits finite (max |logit| %.3g)\n", mx);
    }
    free(lg);
}

/* bench --draft K: one decode step whose items each carry K draft tokens after their token (random, or with
 * --drafter the MTP drafter's, its time added to *draft_s), verified (ids_all) and all cut: the worst case of
 * speculation's cost, the step and the cut. hist: B rows of stride tokens, each the sequence's pos tokens so far;
 * the step's token is appended. */
static void draft_step(engine *e, engine_item *items, int B, int K, int32_t *hist, size_t stride, int pos,
                       uint64_t *r, double *draft_s)
{
    int32_t vt[256][1 + 16], ids[256][1 + 16];
    uint32_t nv = engine_get_info(e)->n_vocab;
    engine_draft_item di[256];
    char err[512];
    for (int b = 0; b < B; b++) {
        vt[b][0] = hist[(size_t)b * stride + (size_t)pos] = items[b].tokens[0];
        for (int k = 1; k <= K; k++) {
            *r = *r * 6364136223846793005ull + 1442695040888963407ull;
            vt[b][k] = 2 + (int32_t)((*r >> 33) % (nv - 2));
        }
        di[b] = (engine_draft_item){ .seq = items[b].seq, .token = vt[b][0], .k = K, .out = vt[b] + 1 };
    }
    if (engine_get_info(e)->draft_arch[0]) { /* where the drafter has no row yet, the random draft stays */
        double t0 = monotonic_seconds();
        if (engine_draft(e, di, B, err, sizeof err)) cli_die("%s", err);
        *draft_s += monotonic_seconds() - t0;
    }
    for (int b = 0; b < B; b++) {
        items[b].tokens = vt[b];
        items[b].n_tokens = 1 + K;
        items[b].ids_all = ids[b];
    }
    step_or_die(e, items, B);
    for (int b = 0; b < B; b++) {
        items[b].ids_all = NULL;
        items[b].token_out = ids[b][0];
        if (engine_seq_truncate(e, items[b].seq, pos + 1, hist + (size_t)b * stride, err, sizeof err))
            cli_die("%s", err);
    }
}

/* one bench figure set (a JSON line): -r repetitions of the prefill and nd decode steps of B sequences,
 * each step verifying K draft tokens per sequence (bench --draft) */
static void bench_run(engine *e, const cli_args *a, int K, const int32_t *prompt, sampler **smp, double load_s)
{
    int B = a->batch, np = a->n_prompt_bench, nd = a->n_predict >= 0 ? a->n_predict : 128;
    const engine_info *in = engine_get_info(e);
    uint64_t r = 54321;
    double pp[1000], tg[1000];
    double enq_ms[1000], dr_ms[1000], dev_ms[1000];
    /* --draft: each sequence's tokens so far (the prompt, then one accepted token a step), for the cut */
    int32_t *hist = K ? malloc(sizeof(int32_t) * (size_t)B * (size_t)(np + nd + 1)) : NULL;
    if (K && !hist) cli_die("%s", "out of memory");
    for (int b = 0; K && b < B; b++) memcpy(hist + (size_t)b * (size_t)(np + nd + 1), prompt, sizeof(int32_t) * np);
    if (K && (int)in->n_ctx < np + nd + K + 1) cli_die("%s", "bench --draft: --ctx leaves no room for the drafts");
    for (int rep = 0; rep < a->reps; rep++) {
        int seqs[256];
        engine_item items[256];
        for (int b = 0; b < B; b++) {
            seqs[b] = engine_seq_new(e);
            items[b] = (engine_item){ .seq = seqs[b], .tokens = prompt, .n_tokens = np, .smp = smp[b] };
        }
        /* prefill one sequence (the 'prompt processing' figure), then the rest untimed */
        int last = rep == a->reps - 1;
        if (a->profile && last) engine_profile_reset(e);
        double t0 = monotonic_seconds();
        step_or_die(e, items, 1);
        pp[rep] = np / (monotonic_seconds() - t0);
        if (a->profile && last) {
            fprintf(stderr, "profile: prefill of %d tokens\n", np);
            engine_profile_print(e, (monotonic_seconds() - t0) * 1e3, 1);
        }
        if (B > 1) step_or_die(e, items + 1, B - 1);
        int32_t next[256];
        if (a->profile && rep == a->reps - 1) engine_profile_reset(e);
        engine_hold_steps(e, a->hold);
        double t1 = monotonic_seconds(), q1 = engine_enqueue_seconds(e), d1 = engine_device_seconds(e), dr = 0;
        for (int s = 0; s < nd; s++) {
            for (int b = 0; b < B; b++) {
                next[b] = items[b].token_out;
                items[b].tokens = &next[b];
                items[b].n_tokens = 1;
            }
            if (K) draft_step(e, items, B, K, hist, (size_t)(np + nd + 1), np + s, &r, &dr);
            else step_or_die(e, items, B);
        }
        double dt = monotonic_seconds() - t1;
        engine_hold_steps(e, 0);
        dev_ms[rep] = nd > 0 ? (engine_device_seconds(e) - d1) * 1e3 / nd : 0;
        tg[rep] = nd > 0 ? (double)nd * B / dt : 0;
        enq_ms[rep] = nd > 0 ? (engine_enqueue_seconds(e) - q1) * 1e3 / nd : 0;
        dr_ms[rep] = nd > 0 ? dr * 1e3 / nd : 0;
        if (a->profile && last) { /* before check_finite: its single-sequence steps are not decode */
            fprintf(stderr, "profile: decode, batch %d, %d steps\n", B, nd);
            engine_profile_print(e, dt * 1e3, nd);
        }
        if (a->synthetic && last) check_finite(e, items, B, next);
        for (int b = 0; b < B; b++) engine_seq_free(e, seqs[b]);
    }
    free(hist);
    qsort(pp, (size_t)a->reps, sizeof *pp, cmp_d);
    qsort(tg, (size_t)a->reps, sizeof *tg, cmp_d);
    qsort(enq_ms, (size_t)a->reps, sizeof *enq_ms, cmp_d);
    qsort(dr_ms, (size_t)a->reps, sizeof *dr_ms, cmp_d);
    qsort(dev_ms, (size_t)a->reps, sizeof *dev_ms, cmp_d);
    printf("{\"model\":\"%s\",\"device\":\"%s\",\"n_prompt\":%d,\"n_gen\":%d,\"batch\":%d,\"reps\":%d,"
           "\"prefill_tok_s\":%.2f,\"prefill_min\":%.2f,\"prefill_max\":%.2f,"
           "\"decode_tok_s\":%.2f,\"decode_min\":%.2f,\"decode_max\":%.2f,\"enqueue_ms_per_step\":%.3f,"
           "\"device_ms_per_step\":%.3f,\"draft\":%d,\"step_ms\":%.4f,\"drafter_ms\":%.4f,\"load_s\":%.3f}\n",
           in->name, in->device, np, nd, B, a->reps, pp[a->reps / 2], pp[0], pp[a->reps - 1], tg[a->reps / 2], tg[0],
           tg[a->reps - 1], enq_ms[a->reps / 2], dev_ms[a->reps / 2], K, tg[a->reps / 2] > 0 ? 1e3 * B / tg[a->reps / 2] : 0.0, dr_ms[a->reps / 2], load_s);
}

static int cmd_bench(const cli_args *a)
{
    int B = a->batch, np = a->n_prompt_bench, nd = a->n_predict >= 0 ? a->n_predict : 128;
    cli_args a2 = *a;
    int drafts[17], n_drafts = 0;
    for (const char *d = a->bench_drafts ? a->bench_drafts : "0"; *d;) {
        char *end;
        long k = strtol(d, &end, 10);
        if (end == d || k < 0 || k > 16 || n_drafts == 17 || (*end && *end != ','))
            cli_die("bench --draft %s: give draft lengths 0..16, comma-separated", a->bench_drafts);
        drafts[n_drafts++] = (int)k;
        d = *end ? end + 1 : end;
    }
    int k_most = 0;
    for (int i = 0; i < n_drafts; i++) k_most = drafts[i] > k_most ? drafts[i] : k_most;
    if (a2.ctx == 0) a2.ctx = np + nd + k_most + 8;
    double tl = monotonic_seconds();
    engine *e = load(&a2, B);
    double load_s = monotonic_seconds() - tl;
    const engine_info *in = engine_get_info(e);
    int32_t *prompt = malloc(sizeof(int32_t) * np);
    if (!prompt) cli_die("%s", "out of memory");
    uint64_t r = 12345;
    for (int i = 0; i < np; i++) { r = r * 6364136223846793005ull + 1442695040888963407ull; prompt[i] = 2 + (int32_t)((r >> 33) % (in->n_vocab - 2)); }
    sampler_params gp;
    sampler_params_default(&gp);
    sampler *smp[256];
    for (int b = 0; b < B; b++)
        if (sampler_create(&smp[b], &gp, in->n_vocab)) cli_die("%s", "out of memory");
    for (int i = 0; i < n_drafts; i++) bench_run(e, a, drafts[i], prompt, smp, load_s);
    for (int b = 0; b < B; b++) sampler_destroy(smp[b]);
    free(prompt);
    engine_destroy(e);
    return 0;
}

static int cmd_synth(const cli_args *a)
{
    if (!a->synth_model)
        cli_die("%s", "synth needs a MODEL: gemma4-e2b, gemma4-e4b, gemma4-26b-a4b, gemma4-31b, gemma4-tiny, "
                  "gemma4-tiny-moe, gemma4-tiny-e, qwen35-27b, qwen35-35b-a3b, qwen35-tiny or qwen35-tiny-moe; or a "
                  "vision projector: gemma4v-e2b, gemma4v-e4b, gemma4v-26b-a4b, gemma4v-31b, gemma4v-tiny or "
                  "gemma4v-tiny-e");
    if (!a->out_path) cli_die("%s", "synth needs -o OUT.gguf");
    int vision = synth_mmproj_known(a->synth_model); /* an mmproj has no vocabulary */
    const char *dv = strncmp(a->synth_model, "qwen35", 6) ? SYNTH_VOCAB : SYNTH_VOCAB_QWEN35;
    FILE *v = a->vocab || vision ? NULL : fopen(dv, "rb");
    if (!a->vocab && !vision && !v)
        cli_die("no vocabulary at %s (sh deploy/fetch_llama_ref.sh fetches it, or give --vocab FILE)", dv);
    if (v) fclose(v);
    synth_gguf_opts o = { .model = a->synth_model, .mix = a->mix ? a->mix : vision ? "f16" : "q4_k_m",
                          .vocab = a->vocab ? a->vocab : dv, .layers = a->synth_layers,
                          .seed = a->sp.seed, .sparse = a->sparse };
    synth_gguf_info in;
    char err[512];
    if ((vision ? synth_mmproj_write : synth_gguf_write)(&o, a->out_path, &in, err, sizeof err)) cli_die("%s", err);
    fprintf(stderr, "clgemma: wrote %s: %s, %u layers, %u tensors, %.2f GiB in %.1f s (%.0f MB/s%s); types: %s\n",
            a->out_path, in.name, in.n_layer, in.n_tensors, in.file_bytes / 1073741824.0, in.seconds,
            in.file_bytes / 1e6 / (in.seconds > 0 ? in.seconds : 1e-9), a->sparse ? ", sparse" : "", in.types);
    return 0;
}

/* "235.2 MiB" beside exact byte counts */
static const char *mib(uint64_t n, char *buf, size_t cap)
{
    if (n >= (1ull << 30)) snprintf(buf, cap, "%.2f GiB", n / 1073741824.0);
    else snprintf(buf, cap, "%.1f MiB", n / 1048576.0);
    return buf;
}

/* the fit report: one fact a line, exact integers first, so scripts and tests can read it */
static int cmd_info(const cli_args *a)
{
    if (!a->model) cli_die("%s", "info: -m FILE is required");
    engine_opts o = sizing(a, a->seqs);
    engine_fit f;
    char err[512], b[3][24];
    if (engine_fit_file(a->model, &o, &f, err, sizeof err)) cli_die("%s", err);
    printf("model        %s: %u layers, trained context %u\n", a->model, f.n_layer, f.n_ctx_train);
    printf("device       %s: %s, %llu bytes (%s)\n", f.device, f.is_gpu ? "GPU" : "not a GPU",
           (unsigned long long)f.device_bytes, mib(f.device_bytes, b[0], sizeof b[0]));
    printf("weights      %llu bytes on the device (%s), %llu in host memory\n", (unsigned long long)f.weight_bytes,
           mib(f.weight_bytes, b[0], sizeof b[0]), (unsigned long long)f.host_weight_bytes);
    printf("context      %u tokens per sequence, forward chunks of %u (%u of one sequence)\n", f.n_ctx, f.max_batch,
           f.seq_chunk);
    printf("kv type      %s\n", engine_kv_type_name(f.kv_type));
    printf("kv full      %u layers: %llu bytes per token of every sequence\n", f.full_layers,
           (unsigned long long)f.full_token_bytes);
    printf("kv sliding   %u layers, window %u: %llu bytes per token of a ring of %u tokens, %llu bytes per sequence\n",
           f.sliding_layers, f.window, (unsigned long long)f.sliding_token_bytes, f.ring_tokens,
           (unsigned long long)f.ring_seq_bytes);
    printf("kv shared    %u layers: read an earlier layer's cache, none of their own\n", f.shared_layers);
    if (f.state_seq_bytes)
        printf("state        %llu bytes (%s) of recurrent state per sequence, whatever its length\n",
               (unsigned long long)f.state_seq_bytes, mib(f.state_seq_bytes, b[0], sizeof b[0]));
    printf("kv room      %llu bytes (%s): a third of what the weights leave\n", (unsigned long long)f.kv_room,
           mib(f.kv_room, b[0], sizeof b[0]));
    printf("room holds   %llu tokens of one sequence, %u sequences of the whole context, %u of %u tokens\n",
           (unsigned long long)f.room_tokens, f.seqs_at_ctx, f.seqs_typical,
           f.n_ctx < ENGINE_FIT_TYPICAL ? f.n_ctx : ENGINE_FIT_TYPICAL);
    if (f.fits)
        printf("plan         %u sequences sharing %llu tokens: %u full-attention and %u ring blocks of %u tokens, "
               "%llu bytes (%s)\n", f.n_seq, (unsigned long long)f.kv_tokens, f.full_blocks, f.ring_blocks,
               f.block_tokens, (unsigned long long)f.kv_bytes, mib(f.kv_bytes, b[0], sizeof b[0]));
    else
        printf("plan         does not fit: %s\n", f.why);
    if (f.rec_ctx) printf("recommended  --ctx %u --max-seqs %u\n", f.rec_ctx, f.rec_seqs);
    else printf("recommended  none: no context fits this device\n");
    if (!f.fits) {
        fflush(stdout);
        char msg[600];
        snprintf(msg, sizeof msg, "%s does not fit %s: %s", a->model, f.device, f.why);
        cli_die("%s", msg);
    }
    return 0;
}

static int cmd_devices(const cli_args *a)
{
    return engine_list_devices(a->plain) > 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    static int (*const run[CMD_COUNT])(const cli_args *) = {
        [CMD_DEVICES] = cmd_devices, [CMD_GENERATE] = cmd_generate, [CMD_BATCH] = cmd_batch,
        [CMD_TOKENIZE] = cmd_tokenize, [CMD_LOGITS] = cmd_logits, [CMD_BENCH] = cmd_bench, [CMD_SYNTH] = cmd_synth,
        [CMD_INFO] = cmd_info, [CMD_VBENCH] = cmd_vbench,
    };
    cli_args a;
    cli_parse(&a, argc, argv);
    return run[a.command](&a);
}
