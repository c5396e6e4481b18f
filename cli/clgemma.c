/* clgemma — command-line front end of the engine.
 *   clgemma devices
 *   clgemma generate -m FILE -p TEXT [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P] [--seed S]
 *                    [--repeat-penalty R] [--chat] [--ids] [--ctx N]
 *   clgemma batch    -m FILE -p A -p B ... [-n N] [--ids]      (greedy, decoded together)
 *   clgemma tokenize -m FILE -p TEXT
 *   clgemma logits   -m FILE -p TEXT -o OUT.f32               (last-position logits, raw float32)
 *   clgemma bench    -m FILE [-p 512] [-n 128] [-r 3] [-b 1] [--profile]
 *   clgemma bench    --synthetic gemma4-26b-a4b|gemma4-31b|gemma4-e4b|gemma4-e2b --type q4_k|q8_0|bf16 ...
 *                    (random weights of the real shape made on the device; no file)
 *   clgemma synth    MODEL -o OUT.gguf [--mix q4_k_m|q8_0|q4_k|bf16|f32] [--vocab VOCAB.gguf] [--layers N]
 *                    [--seed S] [--sparse]  (those shapes as a GGUF file laid out as llama.cpp's converter
 *                    and llama-quantize lay it out, random weights, the real vocabulary)
 * Every command takes --device P:D (or env CLGEMMA_DEVICE). Errors: one line on stderr, exit 1. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "engine.h"
#include "gguf.h"
#include "runtime.h"
#include "synth_gguf.h"
#include "tokenizer_gguf.h"

/* fetched by deploy/fetch_llama_ref.sh: the real Gemma 4 vocabulary */
#define SYNTH_VOCAB ".cache/llama.cpp/models/ggml-vocab-gemma-4.gguf"

#define MAX_PROMPTS 64

typedef struct cli_args {
    const char *cmd, *model, *device, *out_path;
    const char *synthetic, *synth_type;
    int synth_layers;     /* hidden --layers N: fewer layers (tests on small devices) */
    const char *synth_model, *mix, *vocab; /* synth MODEL, --mix, --vocab */
    int sparse;           /* synth --sparse: the data left a hole (type checks) */
    const char *prompts[MAX_PROMPTS];
    int n_prompts;
    int n_predict, n_prompt_bench, reps, batch, ctx;
    int chat, ids, profile;
    const char *settings[RT_MAX_SETTINGS]; /* bench --set NAME=VALUE (measurement settings) */
    int n_settings;
    sampler_params sp;
} cli_args;

static void die(const char *fmt, const char *a)
{
    fprintf(stderr, "clgemma: ");
    fprintf(stderr, fmt, a);
    fprintf(stderr, "\n");
    exit(1);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static long parse_int(const char *flag, const char *v, long lo, long hi)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || end == v || x < lo || x > hi) {
        fprintf(stderr, "clgemma: %s expects an integer in [%ld, %ld], got '%s'\n", flag, lo, hi, v);
        exit(1);
    }
    return x;
}

static float parse_float(const char *flag, const char *v, float lo, float hi)
{
    char *end;
    errno = 0;
    float x = strtof(v, &end);
    if (errno || *end || end == v || !(x >= lo && x <= hi)) {
        fprintf(stderr, "clgemma: %s expects a number in [%g, %g], got '%s'\n", flag, lo, hi, v);
        exit(1);
    }
    return x;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: clgemma devices\n"
            "       clgemma generate -m FILE -p TEXT [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P] [--seed S]\n"
            "                        [--repeat-penalty R] [--chat] [--ids] [--ctx N] [--device P:D]\n"
            "       clgemma batch -m FILE -p TEXT [-p TEXT ...] [-n N] [--ids]\n"
            "       clgemma tokenize -m FILE -p TEXT\n"
            "       clgemma logits -m FILE -p TEXT -o OUT.f32\n"
            "       clgemma bench -m FILE [-p 512] [-n 128] [-r 3] [-b 1] [--profile] [--set NAME=VALUE ...]\n"
            "       clgemma bench --synthetic gemma4-26b-a4b|gemma4-31b|gemma4-e4b|gemma4-e2b --type q4_k|q8_0|bf16\n"
            "                     [-p 512] [-n 128] [-r 3] [-b 1] [--profile] [--set NAME=VALUE ...]\n"
            "                     --set: a measurement setting (an ops policy threshold, docs/PERF.md)\n"
            "       clgemma synth MODEL -o OUT.gguf [--mix q4_k_m|q8_0|q4_k|bf16|f32] [--vocab VOCAB.gguf]\n"
            "                     [--layers N] [--seed S] [--sparse]\n"
            "                     a Gemma 4 GGUF with random weights and llama.cpp's names, keys and type mix;\n"
            "                     MODEL: gemma4-e2b|gemma4-e4b|gemma4-26b-a4b|gemma4-31b (real shapes), or\n"
            "                     gemma4-tiny, gemma4-tiny-moe, gemma4-tiny-e (tests); --mix: as llama-quantize\n"
            "                     (q4_k_m, the default; q8_0; q4_k = --pure Q4_K_S) or convert_hf_to_gguf (bf16,\n"
            "                     f32); --vocab: the tokenizer.* keys (default " SYNTH_VOCAB ",\n"
            "                     from sh deploy/fetch_llama_ref.sh); --sparse leaves the data a hole (type checks)\n");
}

static void parse(cli_args *a, int argc, char **argv)
{
    memset(a, 0, sizeof *a);
    sampler_params_default(&a->sp);
    a->n_predict = -1;
    a->n_prompt_bench = 512;
    a->reps = 3;
    a->batch = 1;
    if (argc < 2) { usage(); exit(1); }
    a->cmd = argv[1];
    for (int i = 2; i < argc; i++) {
        const char *f = argv[i];
#define NEXT() (i + 1 < argc ? argv[++i] : (die("%s needs a value", f), ""))
        if (!strcmp(f, "-m") || !strcmp(f, "--model")) a->model = NEXT();
        else if (!strcmp(f, "-p") || !strcmp(f, "--prompt")) {
            const char *v = NEXT();
            if (!strcmp(a->cmd, "bench")) a->n_prompt_bench = (int)parse_int(f, v, 1, 1 << 20);
            else if (a->n_prompts < MAX_PROMPTS) a->prompts[a->n_prompts++] = v;
            else die("too many prompts (max %s)", "64");
        }
        else if (!strcmp(f, "-n")) a->n_predict = (int)parse_int(f, NEXT(), 0, 1 << 20);
        else if (!strcmp(f, "-r")) a->reps = (int)parse_int(f, NEXT(), 1, 1000);
        else if (!strcmp(f, "-b")) a->batch = (int)parse_int(f, NEXT(), 1, 256);
        else if (!strcmp(f, "-o")) a->out_path = NEXT();
        else if (!strcmp(f, "--ctx")) a->ctx = (int)parse_int(f, NEXT(), 16, 1 << 20);
        else if (!strcmp(f, "--temp")) a->sp.temperature = parse_float(f, NEXT(), 0, 100);
        else if (!strcmp(f, "--top-k")) a->sp.top_k = (int)parse_int(f, NEXT(), 0, 1 << 20);
        else if (!strcmp(f, "--top-p")) a->sp.top_p = parse_float(f, NEXT(), 0, 1);
        else if (!strcmp(f, "--min-p")) a->sp.min_p = parse_float(f, NEXT(), 0, 1);
        else if (!strcmp(f, "--repeat-penalty")) a->sp.repetition_penalty = parse_float(f, NEXT(), 0.01f, 100);
        else if (!strcmp(f, "--frequency-penalty")) a->sp.frequency_penalty = parse_float(f, NEXT(), -2, 2);
        else if (!strcmp(f, "--presence-penalty")) a->sp.presence_penalty = parse_float(f, NEXT(), -2, 2);
        else if (!strcmp(f, "--seed")) a->sp.seed = (uint64_t)parse_int(f, NEXT(), 0, 0x7fffffffffffffffL);
        else if (!strcmp(f, "--device")) a->device = NEXT();
        else if (!strcmp(f, "--synthetic")) a->synthetic = NEXT();
        else if (!strcmp(f, "--type")) a->synth_type = NEXT();
        else if (!strcmp(f, "--layers")) a->synth_layers = (int)parse_int(f, NEXT(), 1, 1024);
        else if (!strcmp(f, "--chat")) a->chat = 1;
        else if (!strcmp(f, "--ids")) a->ids = 1;
        else if (!strcmp(f, "--profile")) a->profile = 1;
        else if (!strcmp(f, "--set")) {
            const char *v = NEXT();
            if (!strchr(v, '=') || v[0] == '=') die("--set wants NAME=VALUE, got '%s'", v);
            if (a->n_settings == RT_MAX_SETTINGS) die("too many --set (at most %s)", "32");
            a->settings[a->n_settings++] = v;
        }
        else if (!strcmp(f, "-h") || !strcmp(f, "--help")) { usage(); exit(0); }
        else if (!strcmp(f, "--mix")) a->mix = NEXT();
        else if (!strcmp(f, "--vocab")) a->vocab = NEXT();
        else if (!strcmp(f, "--sparse")) a->sparse = 1;
        else if (!strcmp(a->cmd, "synth") && f[0] != '-') {
            if (a->synth_model) die("synth takes one MODEL, got '%s' too", f);
            a->synth_model = f;
        }
        else die("unknown option '%s' (see clgemma --help)", f);
#undef NEXT
    }
}

static engine *load(const cli_args *a, int max_seqs)
{
    if (a->synthetic && strcmp(a->cmd, "bench")) die("%s: --synthetic is only for bench", a->cmd);
    if (!a->synthetic && (a->synth_type || a->synth_layers)) die("%s", "--type and --layers need --synthetic");
    if (a->synthetic && a->model) die("%s", "bench: give -m FILE or --synthetic, not both");
    if (!a->model && !a->synthetic) die("%s: -m FILE is required", a->cmd);
    if (a->n_settings && strcmp(a->cmd, "bench")) die("%s: --set is only for bench (measurements)", a->cmd);
    engine_opts o = { 0 };
    o.settings = a->settings;
    o.n_settings = a->n_settings;
    o.device = a->device;
    o.n_ctx = a->ctx;
    o.max_seqs = max_seqs;
    o.profile = a->profile;
    o.verbose = getenv("CLGEMMA_VERBOSE") != NULL;
    engine *e;
    char err[512];
    if (a->synthetic) {
        if (engine_load_synthetic(&e, a->synthetic, a->synth_type ? a->synth_type : "q4_k", a->synth_layers, &o, err,
                                  sizeof err))
            die("%s", err);
        const engine_info *in = engine_get_info(e);
        fprintf(stderr, "clgemma: %s: %u layers, %.2f GiB of weights made on %s (+ %.2f GiB in host memory) in "
                "%.2f s; tensor types: %s; KV %.1f KiB per token + %.1f MiB per sequence (sliding-window rings)\n",
                in->name, in->n_layer, in->weight_bytes / 1073741824.0, in->device,
                in->host_weight_bytes / 1073741824.0, in->load_seconds, in->types, in->kv_bytes_per_token / 1024.0,
                in->kv_ring_bytes_per_seq / 1048576.0);
    } else if (engine_load(&e, a->model, &o, err, sizeof err)) {
        die("%s", err);
    }
    return e;
}

/* the prompt as ids: with --chat, one user message through the model's chat template (its text is never
 * parsed for control tokens); else BOS and special-token parsing as llama.cpp does */
static int32_t *encode_prompt(engine *e, const char *text, int chat, int *n)
{
    if (chat) {
        json_object *msgs = json_object_new_array(), *m = json_object_new_object();
        if (!msgs || !m || json_object_array_add(msgs, m)) die("%s", "out of memory");
        json_object_object_add(m, "role", json_object_new_string("user"));
        json_object_object_add(m, "content", json_object_new_string(text));
        engine_chat_opts co = { 1, 0 };
        char err[512];
        int32_t *ids;
        int cnt = engine_chat_encode(e, msgs, NULL, &co, &ids, err, sizeof err);
        json_object_put(msgs);
        if (cnt < 0) die("chat template: %s", err);
        *n = cnt;
        return ids;
    }
    const tokenizer *t = engine_tokenizer(e);
    size_t len = strlen(text);
    int cnt = tokenizer_encode(t, text, len, 1, 1, NULL, 0);
    if (cnt < 0) die("%s", "tokenizer failed");
    int32_t *ids = malloc(sizeof(int32_t) * (cnt + 1));
    if (!ids) die("%s", "out of memory");
    tokenizer_encode(t, text, len, 1, 1, ids, cnt);
    *n = cnt;
    return ids;
}

static void step_or_die(engine *e, engine_item *items, int n)
{
    char err[512];
    if (engine_step(e, items, n, err, sizeof err)) die("%s", err);
}

/* without --chat only the vocabulary is read: vocab-only GGUFs (no tensors) work too */
static int tokenize_vocab(const cli_args *a)
{
    if (!a->model) die("%s", "tokenize: -m FILE is required");
    char err[512], msg[1024];
    gguf_file *f;
    tokenizer *t;
    if (gguf_open(&f, a->model, err, sizeof err)) die("%s", err);
    if (tokenizer_from_gguf(&t, f, err, sizeof err)) {
        snprintf(msg, sizeof msg, "%s: %s", a->model, err);
        die("%s", msg);
    }
    gguf_close(f);
    size_t len = strlen(a->prompts[0]);
    int n = tokenizer_encode(t, a->prompts[0], len, 1, 1, NULL, 0);
    int32_t *ids = n >= 0 ? malloc(sizeof(int32_t) * (n + 1)) : NULL;
    if (!ids || tokenizer_encode(t, a->prompts[0], len, 1, 1, ids, n) != n) die("%s", "tokenizer failed");
    for (int i = 0; i < n; i++) printf("%s%d", i ? " " : "", ids[i]);
    printf("\n");
    free(ids);
    tokenizer_destroy(t);
    return 0;
}

static int cmd_tokenize(const cli_args *a)
{
    if (a->n_prompts != 1) die("%s", "tokenize needs exactly one -p TEXT");
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
    if (a->n_prompts != 1 || !a->out_path) die("%s", "logits needs -p TEXT and -o OUT.f32");
    engine *e = load(a, 1);
    int n;
    int32_t *ids = encode_prompt(e, a->prompts[0], a->chat, &n);
    uint32_t nv = engine_get_info(e)->n_vocab;
    float *lg = malloc(sizeof(float) * nv);
    if (!lg) die("%s", "out of memory");
    int seq = engine_seq_new(e);
    engine_item it = { .seq = seq, .tokens = ids, .n_tokens = n, .logits = lg };
    step_or_die(e, &it, 1);
    FILE *f = fopen(a->out_path, "wb");
    if (!f || fwrite(lg, sizeof(float), nv, f) != nv || fclose(f)) die("cannot write %s", a->out_path);
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

static int cmd_generate(const cli_args *a)
{
    if (a->n_prompts != 1) die("%s", "generate needs exactly one -p TEXT");
    engine *e = load(a, 1);
    const engine_info *in = engine_get_info(e);
    int n;
    int32_t *ids = encode_prompt(e, a->prompts[0], a->chat, &n);
    int n_predict = a->n_predict >= 0 ? a->n_predict : 128;
    if (n >= (int)in->n_ctx) {
        fprintf(stderr, "clgemma: prompt of %d tokens does not fit the context of %u (use --ctx)\n", n, in->n_ctx);
        exit(1);
    }
    if ((long)n + n_predict > (long)in->n_ctx)
        fprintf(stderr, "clgemma: note: prompt (%d) + %d tokens exceeds the context (%u); generation stops there\n", n,
                n_predict, in->n_ctx);
    sampler *smp;
    if (sampler_create(&smp, &a->sp, in->n_vocab)) die("%s", "out of memory");
    for (int i = 0; i < n; i++) sampler_accept(smp, ids[i]);
    int seq = engine_seq_new(e);
    tok_stream ts;
    tok_stream_init(&ts, engine_tokenizer(e), 0);
    double t0 = now_s(), t1 = t0;
    engine_item it = { .seq = seq, .tokens = ids, .n_tokens = n, .smp = smp };
    int produced = 0;
    if (n_predict > 0) {
        step_or_die(e, &it, 1);
        t1 = now_s();
        for (;;) {
            int32_t tok = it.token_out;
            if (engine_is_stop_token(e, tok)) break;
            emit(e, &ts, tok, a->ids, produced == 0);
            produced++;
            if (produced >= n_predict || engine_seq_len(e, seq) + 1 > (int)in->n_ctx) break;
            it.tokens = &tok;
            it.n_tokens = 1;
            step_or_die(e, &it, 1);
        }
    }
    char tail[16];
    int tn = a->ids ? 0 : tok_stream_flush(&ts, tail, sizeof tail);
    if (tn > 0) fwrite(tail, 1, (size_t)tn, stdout);
    printf("\n");
    double t2 = now_s();
    fprintf(stderr, "clgemma: %s | load %.2f s | prompt %d tok %.1f tok/s | generated %d tok %.1f tok/s\n", in->device,
            in->load_seconds, n, n / (t1 - t0 > 0 ? t1 - t0 : 1e-9), produced,
            produced > 1 ? (produced - 1) / (t2 - t1) : 0.0);
    sampler_destroy(smp);
    free(ids);
    engine_destroy(e);
    return 0;
}

static int cmd_batch(const cli_args *a)
{
    int np = a->n_prompts;
    if (np < 1) die("%s", "batch needs at least one -p TEXT");
    engine *e = load(a, np);
    const engine_info *in = engine_get_info(e);
    int n_predict = a->n_predict >= 0 ? a->n_predict : 32;
    int32_t *ids[MAX_PROMPTS], *out[MAX_PROMPTS];
    int len[MAX_PROMPTS], nout[MAX_PROMPTS], done[MAX_PROMPTS], seqs[MAX_PROMPTS];
    sampler *smp[MAX_PROMPTS];
    engine_item items[MAX_PROMPTS];
    for (int i = 0; i < np; i++) {
        ids[i] = encode_prompt(e, a->prompts[i], a->chat, &len[i]);
        out[i] = calloc((size_t)n_predict + 1, sizeof(int32_t));
        nout[i] = 0;
        done[i] = n_predict == 0;
        seqs[i] = engine_seq_new(e);
        if (!out[i] || seqs[i] < 0 || sampler_create(&smp[i], &a->sp, in->n_vocab)) die("%s", "out of memory");
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
            if (engine_is_stop_token(e, tok)) { done[i] = 1; continue; }
            out[i][nout[i]++] = tok;
            if (nout[i] >= n_predict || engine_seq_len(e, seqs[i]) + 1 > (int)in->n_ctx) { done[i] = 1; continue; }
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
    if (!lg) die("%s", "out of memory");
    for (int b = 0; b < B; b++) {
        next[b] = items[b].token_out;
        if (next[b] < 0 || (uint32_t)next[b] >= nv) die("%s", "synthetic model produced an out-of-range token id");
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
            die("synthetic model: NaN/inf in the output (%s)", msg);
        }
        if (b == 0) fprintf(stderr, "clgemma: output check: logits finite (max |logit| %.3g)\n", mx);
    }
    free(lg);
}

static int cmd_bench(const cli_args *a)
{
    int B = a->batch, np = a->n_prompt_bench, nd = a->n_predict >= 0 ? a->n_predict : 128;
    cli_args a2 = *a;
    if (a2.ctx == 0) a2.ctx = np + nd + 8;
    double tl = now_s();
    engine *e = load(&a2, B);
    double load_s = now_s() - tl;
    const engine_info *in = engine_get_info(e);
    int32_t *prompt = malloc(sizeof(int32_t) * np);
    if (!prompt) die("%s", "out of memory");
    uint64_t r = 12345;
    for (int i = 0; i < np; i++) { r = r * 6364136223846793005ull + 1442695040888963407ull; prompt[i] = 2 + (int32_t)((r >> 33) % (in->n_vocab - 2)); }
    sampler_params gp;
    sampler_params_default(&gp);
    sampler *smp[256];
    for (int b = 0; b < B; b++)
        if (sampler_create(&smp[b], &gp, in->n_vocab)) die("%s", "out of memory");
    double pp[1000], tg[1000];
    double enq_ms[1000];
    for (int rep = 0; rep < a->reps; rep++) {
        int seqs[256];
        engine_item items[256];
        for (int b = 0; b < B; b++) {
            seqs[b] = engine_seq_new(e);
            items[b] = (engine_item){ .seq = seqs[b], .tokens = prompt, .n_tokens = np, .smp = smp[b] };
        }
        /* prefill one sequence (the 'prompt processing' figure), then the rest untimed */
        int last = rep == a->reps - 1;
        if (a->profile && last) engine_set_profiling(e, 1);
        double t0 = now_s();
        step_or_die(e, items, 1);
        pp[rep] = np / (now_s() - t0);
        if (a->profile && last) {
            fprintf(stderr, "profile: prefill of %d tokens\n", np);
            engine_profile_print(e, (now_s() - t0) * 1e3, 1);
            engine_set_profiling(e, 0);
        }
        if (B > 1) step_or_die(e, items + 1, B - 1);
        int32_t next[256];
        if (a->profile && rep == a->reps - 1) engine_set_profiling(e, 1);
        double t1 = now_s(), q1 = engine_enqueue_seconds(e);
        for (int s = 0; s < nd; s++) {
            for (int b = 0; b < B; b++) {
                next[b] = items[b].token_out;
                items[b].tokens = &next[b];
                items[b].n_tokens = 1;
            }
            step_or_die(e, items, B);
        }
        double dt = now_s() - t1;
        tg[rep] = nd > 0 ? (double)nd * B / dt : 0;
        enq_ms[rep] = nd > 0 ? (engine_enqueue_seconds(e) - q1) * 1e3 / nd : 0;
        if (a->profile && last) { /* before check_finite: its single-sequence steps are not decode */
            fprintf(stderr, "profile: decode, batch %d, %d steps\n", B, nd);
            engine_profile_print(e, dt * 1e3, nd);
            engine_set_profiling(e, 0);
        }
        if (a->synthetic && last) check_finite(e, items, B, next);
        for (int b = 0; b < B; b++) engine_seq_free(e, seqs[b]);
    }
    qsort(pp, (size_t)a->reps, sizeof *pp, cmp_d);
    qsort(tg, (size_t)a->reps, sizeof *tg, cmp_d);
    qsort(enq_ms, (size_t)a->reps, sizeof *enq_ms, cmp_d);
    printf("{\"model\":\"%s\",\"device\":\"%s\",\"n_prompt\":%d,\"n_gen\":%d,\"batch\":%d,\"reps\":%d,"
           "\"prefill_tok_s\":%.2f,\"prefill_min\":%.2f,\"prefill_max\":%.2f,"
           "\"decode_tok_s\":%.2f,\"decode_min\":%.2f,\"decode_max\":%.2f,\"enqueue_ms_per_step\":%.3f,"
           "\"load_s\":%.3f}\n",
           in->name, in->device, np, nd, B, a->reps, pp[a->reps / 2], pp[0], pp[a->reps - 1], tg[a->reps / 2], tg[0],
           tg[a->reps - 1], enq_ms[a->reps / 2], load_s);
    for (int b = 0; b < B; b++) sampler_destroy(smp[b]);
    free(prompt);
    engine_destroy(e);
    return 0;
}

static int cmd_synth(const cli_args *a)
{
    if (!a->synth_model)
        die("%s", "synth needs a MODEL: gemma4-e2b, gemma4-e4b, gemma4-26b-a4b, gemma4-31b, gemma4-tiny, "
                  "gemma4-tiny-moe or gemma4-tiny-e");
    if (!a->out_path) die("%s", "synth needs -o OUT.gguf");
    if (a->model || a->n_prompts || a->synthetic || a->synth_type)
        die("%s", "synth takes MODEL, -o, --mix, --vocab, --layers, --seed, --sparse");
    FILE *v = a->vocab ? NULL : fopen(SYNTH_VOCAB, "rb");
    if (!a->vocab && !v)
        die("%s", "no vocabulary at " SYNTH_VOCAB " (sh deploy/fetch_llama_ref.sh fetches it, or give --vocab FILE)");
    if (v) fclose(v);
    synth_gguf_opts o = { .model = a->synth_model, .mix = a->mix ? a->mix : "q4_k_m",
                          .vocab = a->vocab ? a->vocab : SYNTH_VOCAB, .layers = a->synth_layers,
                          .seed = a->sp.seed, .sparse = a->sparse };
    synth_gguf_info in;
    char err[512];
    if (synth_gguf_write(&o, a->out_path, &in, err, sizeof err)) die("%s", err);
    fprintf(stderr, "clgemma: wrote %s: %s, %u layers, %u tensors, %.2f GiB in %.1f s (%.0f MB/s%s); types: %s\n",
            a->out_path, in.name, in.n_layer, in.n_tensors, in.file_bytes / 1073741824.0, in.seconds,
            in.file_bytes / 1e6 / (in.seconds > 0 ? in.seconds : 1e-9), a->sparse ? ", sparse" : "", in.types);
    return 0;
}

int main(int argc, char **argv)
{
    cli_args a;
    parse(&a, argc, argv);
    if (!strcmp(a.cmd, "devices")) return rt_list_devices() > 0 ? 0 : 1;
    if (!strcmp(a.cmd, "generate")) return cmd_generate(&a);
    if (!strcmp(a.cmd, "batch")) return cmd_batch(&a);
    if (!strcmp(a.cmd, "tokenize")) return cmd_tokenize(&a);
    if (!strcmp(a.cmd, "logits")) return cmd_logits(&a);
    if (!strcmp(a.cmd, "bench")) return cmd_bench(&a);
    if (!strcmp(a.cmd, "synth")) return cmd_synth(&a);
    if (!strcmp(a.cmd, "-h") || !strcmp(a.cmd, "--help") || !strcmp(a.cmd, "help")) { usage(); return 0; }
    die("unknown command '%s' (see clgemma --help)", a.cmd);
    return 1;
}
