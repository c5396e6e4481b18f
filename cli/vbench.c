/* vbench.c — see vbench.h. Every figure is the median of -r repetitions, each on images never encoded before
 * (a fresh index each: the engine's image cache, keyed by the pixels' digest, would otherwise answer), except the
 * cached repeat, which is the same prompt again on purpose. Timers stop where the work is done on the device:
 * encodes at engine_image_wait, steps when their chosen token is back. Preparing an image (PNG decode, patches)
 * is the request thread's work in the server: reported apart, not in the time to first token. */
#include "vbench.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench_image.h"
#include "clock.h"
#include "engine.h"

enum { MAX_BUDGETS = 5, MAX_TEXT = 32 };
static const int BUDGETS[] = { 70, 140, 280, 560, 1120 }; /* image_prep's max_soft_tokens values */

/* the engine and what every measurement shares */
typedef struct vb {
    engine *e;
    const engine_info *in;
    int32_t pre[MAX_TEXT], post[MAX_TEXT]; /* text before the image (bos first, boi last) and after it (eoi first) */
    int n_pre, n_post;
    unsigned next;   /* the next image index of this budget */
    int reps, B, profile;
} vb;

/* one budget's figures (milliseconds unless said) */
typedef struct figures {
    int T, tokens, w, h, n_prompt, cached;
    double prep, enc1, enc_b, ttft, ttft_enc, ttft_prefill, ttft_cached, conc, conc_enc, conc_tok_s;
} figures;

/* a 1-image prompt: ids with the image's soft tokens in place, and its span */
typedef struct prompt {
    int32_t *ids;
    int n;
    engine_span span;
    engine_image *im;
} prompt;

static void die(const char *what, const char *err)
{
    char msg[700];
    snprintf(msg, sizeof msg, "vbench: %s: %s", what, err);
    cli_die("%s", msg);
}

static double median(double *v, int n)
{
    for (int i = 1; i < n; i++) /* insertion sort: a few repetitions */
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) { double t = v[j]; v[j] = v[j - 1]; v[j - 1] = t; }
    return n ? v[n / 2] : 0;
}

static double ms(double t0) { return (monotonic_seconds() - t0) * 1e3; }

/* the next image of budget T prepared from its PNG bytes; *prep_ms the preparation's time */
static engine_image *fresh(vb *v, int T, double *prep_ms)
{
    size_t len;
    unsigned char *png = bench_image_png(T, v->next++, &len);
    if (!png) die("making an image", "out of memory");
    char err[512];
    double t0 = monotonic_seconds();
    engine_image *im = engine_image_prepare(v->e, png, len, T, err, sizeof err);
    if (prep_ms) *prep_ms = ms(t0);
    free(png);
    if (!im) die("engine_image_prepare", err);
    return im;
}

static void encode(vb *v, engine_image **ims, int n)
{
    char err[512];
    if (engine_image_encode(v->e, ims, n, err, sizeof err) || engine_image_wait(v->e, err, sizeof err))
        die("engine_image_encode", err);
}

static void drop(vb *v, engine_image **ims, int n)
{
    for (int i = 0; i < n; i++) {
        engine_image_release(v->e, ims[i]);
        engine_image_destroy(ims[i]);
    }
}

static void make_prompt(vb *v, engine_image *im, prompt *p)
{
    int S = engine_image_tokens(im);
    p->n = v->n_pre + S + v->n_post;
    p->ids = malloc(sizeof(int32_t) * (size_t)p->n);
    if (!p->ids) die("prompt", "out of memory");
    memcpy(p->ids, v->pre, sizeof(int32_t) * (size_t)v->n_pre);
    for (int j = 0; j < S; j++) p->ids[v->n_pre + j] = engine_image_token(im, j);
    memcpy(p->ids + v->n_pre + S, v->post, sizeof(int32_t) * (size_t)v->n_post);
    p->span = (engine_span){ v->n_pre, S, 0, im };
    p->im = im;
}

/* an item of p from its cached tokens on (the span cut to the image's tail that is left, or gone) */
static engine_item item_of(const prompt *p, int seq, int cached, engine_span *sp, sampler *smp, float *logits)
{
    int off = p->span.offset, end = off + p->span.n, ns = cached < end;
    if (ns)
        *sp = (engine_span){ cached > off ? 0 : off - cached, end - (cached > off ? cached : off),
                             cached > off ? cached - off : 0, p->im };
    return (engine_item){ .seq = seq, .tokens = p->ids + cached, .n_tokens = p->n - cached, .smp = smp,
                          .logits = logits, .spans = ns ? sp : NULL, .n_spans = ns };
}

static sampler *greedy(const vb *v)
{
    sampler_params gp;
    sampler_params_default(&gp);
    sampler *s;
    if (sampler_create(&s, &gp, v->in->n_vocab)) die("sampler", "out of memory");
    return s;
}

static void step(vb *v, engine_item *items, int n)
{
    char err[512];
    if (engine_step(v->e, items, n, err, sizeof err)) die("engine_step", err);
}

/* the logits after an image: NaN or inf means the tower or the forward broke (random weights are scaled to keep
 * every activation finite) */
static void check_finite(const vb *v, const float *lg)
{
    float mx = 0;
    for (uint32_t i = 0; i < v->in->n_vocab; i++) {
        if (!isfinite(lg[i])) die("output check", "NaN/inf in the logits after an image");
        if (fabsf(lg[i]) > mx) mx = fabsf(lg[i]);
    }
    fprintf(stderr, "clgemma: vbench: output check: logits after an image finite (max |logit| %.3g)\n", mx);
}

/* (a) encode time: one image at a time, then B at once (per image) */
static void encodes(vb *v, figures *f, double *prep, double *a, double *b)
{
    engine_image *ims[64];
    ims[0] = fresh(v, f->T, NULL); /* warm-up: the first encode of a size pays first-launch costs */
    f->tokens = engine_image_tokens(ims[0]);
    encode(v, ims, 1);
    drop(v, ims, 1);
    for (int r = 0; r < v->reps; r++) {
        ims[0] = fresh(v, f->T, &prep[r]);
        double t0 = monotonic_seconds();
        encode(v, ims, 1);
        a[r] = ms(t0);
        drop(v, ims, 1);
    }
    for (int r = 0; r < v->reps; r++) {
        for (int i = 0; i < v->B; i++) ims[i] = fresh(v, f->T, NULL);
        double t0 = monotonic_seconds();
        encode(v, ims, v->B);
        b[r] = ms(t0) / v->B;
        drop(v, ims, v->B);
    }
    if (v->profile) { /* one more encode, its kernels timed (engine_profile_print) */
        ims[0] = fresh(v, f->T, NULL);
        engine_profile_reset(v->e);
        double t0 = monotonic_seconds();
        encode(v, ims, 1);
        fprintf(stderr, "profile: encode of one %d-token image\n", f->tokens);
        engine_profile_print(v->e, ms(t0), 1);
        drop(v, ims, 1);
    }
    f->prep = median(prep, v->reps);
    f->enc1 = median(a, v->reps);
    f->enc_b = median(b, v->reps);
}

/* (b) time to first token of one 1-image prompt: encode + prefill + the chosen token, a new image each time;
 * then the same prompt again (its rows held, its KV blocks in the prefix cache) */
static void ttft(vb *v, figures *f, double *enc, double *pre, double *tot, double *hit)
{
    float *lg = malloc(sizeof(float) * v->in->n_vocab);
    if (!lg) die("logits", "out of memory");
    for (int r = 0; r < v->reps; r++) {
        prompt p;
        make_prompt(v, fresh(v, f->T, NULL), &p);
        f->n_prompt = p.n;
        sampler *smp = greedy(v);
        engine_span sp;
        int cached;
        double t0 = monotonic_seconds();
        encode(v, &p.im, 1);
        double t1 = monotonic_seconds();
        int seq = engine_seq_new_prefix(v->e, p.ids, p.n, &cached);
        if (seq < 0) die("engine_seq_new_prefix", "no free sequence");
        engine_item it = item_of(&p, seq, cached, &sp, smp, r == 0 ? lg : NULL);
        step(v, &it, 1);
        tot[r] = ms(t0);
        enc[r] = (t1 - t0) * 1e3;
        pre[r] = tot[r] - enc[r];
        if (r == 0) check_finite(v, lg);
        engine_seq_free(v->e, seq);
        engine_image_release(v->e, p.im);
        sampler_destroy(smp);
        smp = greedy(v);
        t0 = monotonic_seconds();
        encode(v, &p.im, 1); /* held: a pin, no work */
        seq = engine_seq_new_prefix(v->e, p.ids, p.n, &cached);
        if (seq < 0) die("engine_seq_new_prefix", "no free sequence");
        it = item_of(&p, seq, cached, &sp, smp, NULL);
        step(v, &it, 1);
        hit[r] = ms(t0);
        f->cached = cached;
        engine_seq_free(v->e, seq);
        sampler_destroy(smp);
        drop(v, &p.im, 1);
        free(p.ids);
    }
    free(lg);
    f->ttft_enc = median(enc, v->reps);
    f->ttft_prefill = median(pre, v->reps);
    f->ttft = median(tot, v->reps);
    f->ttft_cached = median(hit, v->reps);
}

/* (c) B 1-image prompts of new images: their encodes, then one step over all B prompts */
static void concurrent(vb *v, figures *f, double *tot, double *enc)
{
    for (int r = 0; r < v->reps; r++) {
        prompt p[64];
        engine_item items[64];
        engine_image *ims[64];
        sampler *smp[64];
        for (int b = 0; b < v->B; b++) make_prompt(v, ims[b] = fresh(v, f->T, NULL), &p[b]);
        double t0 = monotonic_seconds();
        encode(v, ims, v->B);
        enc[r] = ms(t0);
        for (int b = 0; b < v->B; b++) {
            int seq = engine_seq_new(v->e);
            if (seq < 0) die("engine_seq_new", "no free sequence");
            smp[b] = greedy(v);
            items[b] = (engine_item){ .seq = seq, .tokens = p[b].ids, .n_tokens = p[b].n, .smp = smp[b],
                                      .spans = &p[b].span, .n_spans = 1 };
        }
        step(v, items, v->B);
        tot[r] = ms(t0);
        for (int b = 0; b < v->B; b++) {
            engine_seq_free(v->e, items[b].seq);
            sampler_destroy(smp[b]);
            free(p[b].ids);
        }
        drop(v, ims, v->B);
    }
    f->conc = median(tot, v->reps);
    f->conc_enc = median(enc, v->reps);
    f->conc_tok_s = f->conc > 0 ? 1e3 * v->B * f->n_prompt / f->conc : 0;
}

/* "70,280,1120" into budgets; the count */
static int parse_budgets(const char *s, int *out)
{
    int n = 0;
    for (const char *c = s; *c;) {
        char *end;
        long t = strtol(c, &end, 10);
        int known = 0;
        for (size_t i = 0; i < sizeof BUDGETS / sizeof *BUDGETS; i++) known |= t == BUDGETS[i];
        if (end == c || (*end && *end != ',') || !known || n == MAX_BUDGETS)
            cli_die("vbench --image-tokens %s: give up to 5 of 70, 140, 280, 560, 1120, comma-separated", s);
        out[n++] = (int)t;
        c = *end ? end + 1 : end;
    }
    if (!n) cli_die("vbench --image-tokens '%s': no budget", s);
    return n;
}

static void save_images(const char *dir, const int *T, int nT, int B)
{
    if (mkdir(dir, 0755) && errno != EEXIST) cli_die("vbench --save-images: cannot create %s", dir);
    for (int t = 0; t < nT; t++)
        for (int k = 0; k < B; k++) {
            char path[4096];
            size_t len;
            unsigned char *png = bench_image_png(T[t], (unsigned)k, &len);
            snprintf(path, sizeof path, "%s/vbench-%d-%d.png", dir, T[t], k);
            FILE *f = png ? fopen(path, "wb") : NULL;
            if (!f || fwrite(png, 1, len, f) != len || fclose(f)) cli_die("vbench --save-images: cannot write %s", path);
            free(png);
        }
    fprintf(stderr, "clgemma: vbench: wrote %d images to %s\n", nT * B, dir);
}

/* the text around the image: a short request, as a chat turn would hold; without a tokenizer, fixed ids */
static void text_ids(vb *v)
{
    const tokenizer *t = engine_tokenizer(v->e);
    const char *before = "Here is a picture:", *after = "What does it show? Answer briefly.";
    int32_t bos = t ? tokenizer_bos(t) : 2;
    v->pre[v->n_pre++] = bos >= 0 ? bos : 2;
    int n = t ? tokenizer_encode(t, before, strlen(before), 0, 0, v->pre + 1, MAX_TEXT - 2) : 0;
    v->n_pre += n > 0 && n <= MAX_TEXT - 2 ? n : 0;
    v->pre[v->n_pre++] = v->in->boi_token >= 0 ? v->in->boi_token : 3;
    v->post[v->n_post++] = v->in->eoi_token >= 0 ? v->in->eoi_token : 4;
    n = t ? tokenizer_encode(t, after, strlen(after), 0, 0, v->post + 1, MAX_TEXT - 1) : 0;
    v->n_post += n > 0 && n <= MAX_TEXT - 1 ? n : 0;
    for (int i = 0; !t && i < 4; i++) v->post[v->n_post++] = 100 + i;
}

static void print_row(const vb *v, const figures *f, FILE *json)
{
    printf("| %d | %dx%d (%d) | %.1f | %.1f | %.1f | %.1f (%.1f + %.1f) | %.1f (%d cached) | %.1f (%.1f encode) | "
           "%.0f |\n", f->T, f->w, f->h, f->tokens, f->prep, f->enc1, f->enc_b, f->ttft, f->ttft_enc, f->ttft_prefill,
           f->ttft_cached, f->cached, f->conc, f->conc_enc, f->conc_tok_s);
    fflush(stdout);
    if (!json) return;
    fprintf(json, "{\"model\":\"%s\",\"device\":\"%s\",\"projector\":\"%s\",\"budget\":%d,\"tokens\":%d,"
            "\"width\":%d,\"height\":%d,\"n_prompt\":%d,\"reps\":%d,\"batch\":%d,\"prep_ms\":%.3f,\"encode_ms\":%.3f,"
            "\"encode_batch_ms_per_image\":%.3f,\"ttft_ms\":%.3f,\"ttft_encode_ms\":%.3f,\"ttft_prefill_ms\":%.3f,"
            "\"ttft_cached_ms\":%.3f,\"cached_tokens\":%d,\"batch_prompts_ms\":%.3f,\"batch_encode_ms\":%.3f,"
            "\"batch_prompt_tok_s\":%.1f}\n", v->in->name, v->in->device, v->in->vision_proj, f->T, f->tokens, f->w,
            f->h, f->n_prompt, v->reps, v->B, f->prep, f->enc1, f->enc_b, f->ttft, f->ttft_enc, f->ttft_prefill,
            f->ttft_cached, f->cached, f->conc, f->conc_enc, f->conc_tok_s);
    fflush(json);
}

int cmd_vbench(const cli_args *a)
{
    int T[MAX_BUDGETS], nT = parse_budgets(a->image_budgets ? a->image_budgets : "70,280,1120", T), tmax = 0;
    for (int i = 0; i < nT; i++) tmax = T[i] > tmax ? T[i] : tmax;
    if (a->save_images) save_images(a->save_images, T, nT, a->batch);
    if (!a->model && a->save_images) return 0;
    if (!a->model || !a->mmproj) cli_die("%s", "vbench needs -m FILE and --mmproj FILE (or --save-images DIR alone)");
    engine_opts o = { 0 };
    o.device = a->device;
    o.n_ctx = a->ctx ? a->ctx : tmax + 2 * MAX_TEXT;
    o.max_seqs = a->batch + 1;
    o.max_batch_tokens = a->max_batch ? a->max_batch : tmax > 512 ? 2048 : 0; /* an image is one forward */
    o.kv_type = a->kv_type ? engine_kv_type_parse(a->kv_type) : ENGINE_KV_F16;
    if (o.kv_type < 0) cli_die("--kv-type: unknown type '%s' (f16, q8_0 or q4)", a->kv_type);
    o.mmproj_path = a->mmproj;
    o.profile = a->profile;
    o.settings = a->settings;
    o.n_settings = a->n_settings;
    o.image_tokens = tmax;
    o.verbose = getenv("CLGEMMA_VERBOSE") != NULL;
    vb v = { .reps = a->reps, .B = a->batch, .profile = a->profile };
    char err[512];
    double tl = monotonic_seconds();
    if (engine_load(&v.e, a->model, &o, err, sizeof err)) cli_die("%s", err);
    v.in = engine_get_info(v.e);
    text_ids(&v);
    fprintf(stderr, "clgemma: vbench: %s + %s projector (%.2f GiB with its scratch) on %s, loaded in %.1f s; %d "
            "repetitions, %d images at once; image attention %s\n", v.in->name, v.in->vision_proj,
            v.in->vision_bytes / 1073741824.0, v.in->device, monotonic_seconds() - tl, v.reps, v.B,
            v.in->image_bidir ? "bidirectional" : "causal");
    FILE *json = a->out_path ? fopen(a->out_path, "w") : NULL;
    if (a->out_path && !json) cli_die("vbench: cannot write %s", a->out_path);
    printf("| budget | image (tokens) | prep ms | encode ms | encode ms/image, %d at once | TTFT ms (encode + "
           "prefill) | TTFT cached ms | %d prompts ms | %d prompts tok/s |\n", v.B, v.B, v.B);
    printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    double *buf = malloc(sizeof(double) * 4 * (size_t)v.reps);
    if (!buf) die("figures", "out of memory");
    double *r0 = buf, *r1 = buf + v.reps, *r2 = buf + 2 * v.reps, *r3 = buf + 3 * v.reps;
    for (int i = 0; i < nT; i++) {
        figures f = { .T = T[i] };
        bench_image_size(T[i], &f.w, &f.h);
        v.next = 0; /* image k of a budget is --save-images' vbench-T-k.png */
        encodes(&v, &f, r0, r1, r2);
        ttft(&v, &f, r0, r1, r2, r3);
        concurrent(&v, &f, r0, r1);
        print_row(&v, &f, json);
    }
    free(buf);
    if (json && fclose(json)) cli_die("vbench: cannot write %s", a->out_path);
    engine_destroy(v.e);
    return 0;
}
