/* test_qwen35.c — Qwen 3.5 hybrid files written by llama.cpp's own converter (convert_hf_to_gguf.py:
 * f32, bf16, q8_0) and quantizer (llama_model_quantize: Q4_K_M) from tiny random transformers models
 * (tools/gen_qwen35_fixtures.py; H 128, layers [GDN, GDN, attention, GDN], GDN 2 key / 4 value heads of 64,
 * attention 4 q / 2 kv x 32 with output gate, RoPE on 8 of 32 dims; dense: SwiGLU 128; moe: 4 experts top-2
 * of 64 beside a gated shared expert of 64), through the public engine API against tests/golden/qwen35_{dense,
 * moe}.json and the float64 reference's logits build/golden/qwen35_{dense,moe}.logits (made by make from
 * tools/ref_qwen35.py before the tests: `make build/golden/qwen35_dense.logits`; docs/design-qwen35.md 6.1).
 * The committed files: dense bf16 and Q4_K_M, moe q8_0 and Q4_K_M (the golden's "gguf").
 *
 * For each variant and file type:
 *   1. prefill each golden sequence (8, 72, 73 tokens; forward chunks of 64 tokens, so the long ones cross a
 *      chunk edge with the recurrent state carried between forwards of one step, and their 64-token runs take
 *      the chunked scan while decode steps take delta_step) with logits_all: every position's logits within
 *      tol of the float64 reference on the same file (tools/ref_qwen35.py, weights dequantized by gguf-py).
 *      tol = TOL_REL x (max - min of the reference logits, about 30): the engine computes in float32 and keeps
 *      K/V in half precision, as for Gemma (test_gemma4: the same 1e-3 of the range); quantized files with
 *      int8 decode inputs (engine_info.int8_decode) get TOL_REL_INT8 as there. MoE: where the reference's k-th
 *      and (k+1)-th router logits lie closer than ROUTER_GAP_ROUNDED at some position, engines that round
 *      activations (f16 tensor cores, int8) compare only the positions before the first such near tie
 *      (test_gemma4's rule; float-activation engines compare all). Decode steps on int8 inputs (2. and 4.) stop
 *      at the first gap below ROUTER_GAP_INT8 instead.
 *   2. split invariance of the state: the first half in one step then token by token, and the whole sequence
 *      in steps of 7 tokens, give every position the prefill's logits (TOL_DECODE absolute: the same math in
 *      another order of FP32 summation; the scan's step and chunk forms agree to ~1e-6 relative,
 *      test_kernels_delta);
 *   3. the three sequences (different lengths) in one engine_step equal the single-sequence prefills;
 *   4. greedy tokens after each sequence equal the float64 reference's greedy continuation on the same file
 *      at every step where the reference's top-1/top-2 margin has stayed >= 2 x (the engine's worst logit
 *      delta on this file, its decode rows' included) + 0.02 (the Gemma margin rule); how many of those steps equal llama.cpp's own
 *      greedy tokens (greedy_llama, which differ from the reference's where llama.cpp's rounding flips a
 *      token) is printed;
 *   5. a fork continues with its source's state (both then give the same logits for the same tokens), and
 *      truncation (speculative rollback) is refused without checkpoints (engine_opts.state_checkpoints;
 *      test_qwen35_spec has them).
 * Also: the layer kinds come from attention.recurrent_layers, else from full_attention_interval; stop token
 * <|im_end|>; broken copies of a converter-made file fail to load naming the problem. */
#include "check.h"
#include "fixture_io.h"
#include "golden_json.h"
#include "logit_rows.h"
#include "engine.h"
#include "tokenizer.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL_REL 1e-3      /* of the reference logit range */
#define TOL_REL_TC 2e-3   /* of the range, f16 tensor-core prompts (test_gemma4) */
#define TOL_REL_INT8 4e-2 /* of the range, quantized files with int8 decode inputs (test_gemma4) */
#define TOL_DECODE 5e-3   /* absolute, engine vs engine: another order of summation */
#define ROUTER_GAP_ROUNDED 5e-3 /* router logit gap that f16 rounding of a prompt cannot close (test_gemma4) */
#define ROUTER_GAP_INT8 0.5     /* ... and int8 decode inputs: on an H200 / H100 they flipped experts at reference
                                 * gaps of 0.057, 0.088 and 0.25 (decode rows then 4.2, 6.7 and 2.6 off); rows are
                                 * ~1 off at most before a flip (the dense q4_k_m's 0.97) */
#define NSEQ 3
#define NTYPE 4
#define NGREEDY 16
#define NFILE 2           /* committed files per variant, the reference's sets in this order */
#define STEP 7

static const char *types[NTYPE] = { "f32", "bf16", "q8_0", "q4_k_m" };
/* the committed files of each variant: type indices */
static const int dense_files[NFILE] = { 1, 3 }, moe_files[NFILE] = { 2, 3 };

static char err[1024];



typedef struct golden {
    uint32_t V;
    int ntok[NSEQ];
    int32_t *tok[NSEQ];
    int32_t greedy[NTYPE][NSEQ][NGREEDY], llama[NTYPE][NSEQ][NGREEDY];
    double gap[NTYPE][NSEQ][NGREEDY];
    double *rgap[NTYPE][NSEQ];/* MoE: per position of tokens + greedy, min router gap (else NULL) */
    float *logits;            /* [NSET][all sequences' positions][V] */
    size_t off[NSEQ], set_len;
    double range[NFILE];      /* of each file's reference logits */
    const int *files;         /* type indices of the committed files (the reference's sets) */
} golden;


static int load_golden(const char *variant, const int *files, uint32_t V, golden *g)
{
    char path[256], sets[96];
    memset(g, 0, sizeof *g);
    g->V = V;
    g->files = files;
    snprintf(sets, sizeof sets, "\"sets\":[\"ref:%s\",\"ref:%s\"]", types[files[0]], types[files[1]]);
    snprintf(path, sizeof path, "tests/golden/qwen35_%s.json", variant);
    char *s = slurp(path, NULL);
    if (!s) return -1;
    int rc = -1;
    const char *p = strstr(s, "\"sequences\":");
    for (int i = 0; i < NSEQ && p; i++) {
        const char *t = find_in(p, NULL, "tokens");
        const char *next = t ? strstr(t, "\"tokens\":") : NULL;
        double *d;
        size_t n;
        if (!t || !read_nums(t, &d, &n) || !n) { p = NULL; break; }
        g->ntok[i] = (int)n;
        g->tok[i] = malloc(n * sizeof(int32_t));
        for (size_t j = 0; j < n; j++) g->tok[i][j] = (int32_t)d[j];
        free(d);
        const char *gr = find_in(t, next, "greedy"), *gg = find_in(t, next, "greedy_gap");
        const char *gl = find_in(t, next, "greedy_llama"), *rg = find_in(t, next, "router_gap");
        for (int ti = 0; ti < NTYPE && p; ti++) {
            double *x;
            size_t nx;
            if (read_ints(find_in(gr, next, types[ti]), g->greedy[ti][i], NGREEDY) ||
                read_ints(find_in(gl, next, types[ti]), g->llama[ti][i], NGREEDY) ||
                !read_nums(find_in(gg, next, types[ti]), &x, &nx) || nx != NGREEDY) { p = NULL; break; }
            memcpy(g->gap[ti][i], x, sizeof g->gap[ti][i]);
            free(x);
            if (rg && (!read_nums(find_in(rg, next, types[ti]), &g->rgap[ti][i], &nx) ||
                       nx != (size_t)g->ntok[i] + NGREEDY)) { p = NULL; break; }
        }
        p = next ? next - 1 : (i == NSEQ - 1 ? t : NULL);
    }
    if (p && strstr(s, sets)) {
        size_t total = 0;
        for (int i = 0; i < NSEQ; i++) { g->off[i] = total; total += (size_t)g->ntok[i] * V; }
        g->set_len = total;
        long nb;
        snprintf(path, sizeof path, "build/golden/qwen35_%s.logits", variant);
        g->logits = (float *)slurp(path, &nb);
        if (!g->logits) fprintf(stderr, "%s missing: make %s\n", path, path);
        if (g->logits && (size_t)nb == sizeof(float) * NFILE * total) {
            for (int fi = 0; fi < NFILE; fi++) {
                double lo = 1e30, hi = -1e30;
                for (size_t j = 0; j < total; j++) {
                    float v = g->logits[fi * total + j];
                    if (v < lo) lo = v;
                    if (v > hi) hi = v;
                }
                g->range[fi] = hi - lo;
            }
            rc = 0;
        }
    }
    free(s);
    return rc;
}

static void free_golden(golden *g)
{
    for (int i = 0; i < NSEQ; i++) {
        free(g->tok[i]);
        for (int t = 0; t < NTYPE; t++) free(g->rgap[t][i]);
    }
    free(g->logits);
}

static const float *set_row(const golden *g, int set, int s) { return g->logits + set * g->set_len + g->off[s]; }



static void worse(double *w, double d) { if (d > *w || d != d) *w = d; }

static int prefill(engine *e, const int32_t *tok, int n, float *logits)
{
    int s = engine_seq_new(e);
    engine_item it = { .seq = s, .tokens = tok, .n_tokens = n, .logits = logits, .logits_all = 1 };
    int rc = engine_step(e, &it, 1, err, sizeof err);
    engine_seq_free(e, s);
    return rc;
}

/* the worst of a step's rows against pre (and ref): *w and its position *at, the row's delta to ref there *wr */
typedef struct split_worst { double w, wr, wr_max; int at; } split_worst;

static void split_rows(split_worst *sw, const float *rows, const float *pre, const float *ref, int p0, int k,
                       uint32_t V)
{
    for (int i = 0; i < k; i++) {
        double d = rows_max_diff(rows + (size_t)i * V, pre + (size_t)(p0 + i) * V, V);
        double dr = rows_max_diff(rows + (size_t)i * V, ref + (size_t)(p0 + i) * V, V);
        if (dr > sw->wr_max || dr != dr) sw->wr_max = dr;
        if (d > sw->w || d != d) {
            sw->w = d;
            sw->at = p0 + i;
            sw->wr = rows_max_diff(rows + (size_t)i * V, ref + (size_t)(p0 + i) * V, V);
        }
    }
}

/* the sequence fed in steps of `step` tokens from position `from` on, after one step of its first `from`;
 * the worst |delta| of each position's logits against the prefill's pre (and where, and that row against the
 * float64 reference's ref) into sw */
static void split_run(engine *e, const int32_t *tok, int n, int from, int step, const float *pre, const float *ref,
                      uint32_t V, float *buf, split_worst *sw)
{
    int sq = engine_seq_new(e);
    engine_item it0 = { .seq = sq, .tokens = tok, .n_tokens = from, .logits = buf, .logits_all = 1 };
    if (engine_step(e, &it0, 1, err, sizeof err)) {
        CHECK(0, "split first step: %s", err);
        engine_seq_free(e, sq);
        sw->w = INFINITY;
        return;
    }
    split_rows(sw, buf, pre, ref, 0, from, V);
    for (int t = from; t < n; t += step) {
        int k = n - t < step ? n - t : step;
        engine_item it = { .seq = sq, .tokens = tok + t, .n_tokens = k, .logits = buf, .logits_all = 1 };
        if (engine_step(e, &it, 1, err, sizeof err)) { CHECK(0, "split step: %s", err); sw->w = INFINITY; break; }
        split_rows(sw, buf, pre, ref, t, k, V);
    }
    engine_seq_free(e, sq);
}

static void run_file(const golden *g, const char *variant, int fi)
{
    int ti = g->files[fi];
    char path[256];
    /* 72 sequences: the engine's output rows per forward (max(16, sequences)) then exceed its 64 tokens, so
     * logits_all prefills run in forwards of 64 tokens, whose runs take the chunked scan */
    engine_opts opts = { .n_ctx = 256, .max_seqs = 72, .max_batch_tokens = 64 };
    engine *e = NULL;
    uint32_t V = g->V;
    snprintf(path, sizeof path, "tests/fixtures/qwen35_%s_%s.gguf", variant, types[ti]);
    CHECK(engine_load(&e, path, &opts, err, sizeof err) == 0, "%s: %s", path, err);
    if (!e) return;
    const engine_info *info = engine_get_info(e);
    int int8 = ti >= 2 && info->int8_decode, ref_set = fi, rounded = int8 || info->tensor_cores;
    double worst = 0, worst_split = 0, worst_batch = 0;
    float *pre[NSEQ] = { 0 }, *row = malloc(sizeof(float) * V), *buf = malloc(sizeof(float) * 160 * V);
    /* positions compared: before the first router near tie (lim: prompts; dlim: decode steps, int8 inputs) */
    int lim[NSEQ], dlim[NSEQ], rows = 0, rows_all = 0;
    for (int s = 0; s < NSEQ; s++) {
        int n = g->ntok[s];
        lim[s] = dlim[s] = n + NGREEDY;
        for (int p = 0; rounded && g->rgap[ti][s] && p < n + NGREEDY; p++)
            if (g->rgap[ti][s][p] < ROUTER_GAP_ROUNDED) { lim[s] = p; break; }
        dlim[s] = lim[s];
        for (int p = 0; int8 && g->rgap[ti][s] && p < dlim[s]; p++)
            if (g->rgap[ti][s][p] < ROUTER_GAP_INT8) { dlim[s] = p; break; }
        rows += lim[s] < n ? lim[s] : n;
        rows_all += n;
    }
    for (int s = 0; s < NSEQ; s++) {
        int n = g->ntok[s];
        pre[s] = malloc(sizeof(float) * (size_t)n * V);
        CHECK(prefill(e, g->tok[s], n, pre[s]) == 0, "%s seq %d prefill: %s", path, s, err);
        worse(&worst, rows_max_diff(pre[s], set_row(g, ref_set, s), (size_t)(lim[s] < n ? lim[s] : n) * V));
    }
    /* split invariance: half then token by token; steps of 7 from the first 7 */
    split_worst sw_at = { 0, 0, 0, -1 };
    int sw_seq = -1;
    double dec_ref = 0; /* decode rows vs the reference: the greedy steps' error */
    for (int s = 0; s < NSEQ; s++) {
        int n = dlim[s] < g->ntok[s] ? dlim[s] : g->ntok[s];
        if (n < 2) continue;
        split_worst sw = { 0, 0, 0, -1 };
        split_run(e, g->tok[s], n, n / 2 + 1, 1, pre[s], set_row(g, ref_set, s), V, buf, &sw);
        if (n > STEP) split_run(e, g->tok[s], n, STEP, STEP, pre[s], set_row(g, ref_set, s), V, buf, &sw);
        if (sw.w > sw_at.w || sw.w != sw.w) sw_at = sw, sw_seq = s;
        worse(&dec_ref, sw.wr_max);
    }
    worst_split = sw_at.w;
    /* greedy continuation under the margin rule */
    double thr = 2 * fmax(worst, dec_ref) + 0.02; /* the greedy steps are decode steps */
    int checked = 0, same_llama = 0;
    for (int s = 0; s < NSEQ; s++) {
        int n = g->ntok[s], sq = engine_seq_new(e);
        engine_item it0 = { .seq = sq, .tokens = g->tok[s], .n_tokens = n, .logits = row };
        CHECK(engine_step(e, &it0, 1, err, sizeof err) == 0, "%s prefill: %s", path, err);
        int32_t next = (int32_t)rows_argmax(row, V);
        double margin = INFINITY;
        for (int j = 0; j < NGREEDY && n - 1 + j < dlim[s]; j++) {
            margin = fmin(margin, g->gap[ti][s][j]);
            if (margin < thr) break;
            if (next != g->greedy[ti][s][j]) {
                CHECK(0, "%s seq %d greedy token %d: got %d, reference %d (margin %.3g)", path, s, j, next,
                      g->greedy[ti][s][j], margin);
                break;
            }
            same_llama += next == g->llama[ti][s][j];
            checked++;
            engine_item it = { .seq = sq, .tokens = &next, .n_tokens = 1, .logits = row };
            if (engine_step(e, &it, 1, err, sizeof err)) { CHECK(0, "%s greedy: %s", path, err); break; }
            next = (int32_t)rows_argmax(row, V);
        }
        engine_seq_free(e, sq);
    }
    /* the three sequences in one step */
    engine_item items[NSEQ];
    float *bl[NSEQ];
    for (int s = 0; s < NSEQ; s++) {
        bl[s] = malloc(sizeof(float) * g->ntok[s] * V);
        items[s] = (engine_item){ .seq = engine_seq_new(e), .tokens = g->tok[s], .n_tokens = g->ntok[s],
                                  .logits = bl[s], .logits_all = 1 };
    }
    CHECK(engine_step(e, items, NSEQ, err, sizeof err) == 0, "%s batch: %s", path, err);
    for (int s = 0; s < NSEQ; s++) {
        worse(&worst_batch, rows_max_diff(bl[s], pre[s], (size_t)(lim[s] < g->ntok[s] ? lim[s] : g->ntok[s]) * V));
        engine_seq_free(e, items[s].seq);
        free(bl[s]);
        free(pre[s]);
    }
    free(row);
    free(buf);
    double tol = (int8 ? TOL_REL_INT8 : info->tensor_cores ? TOL_REL_TC : TOL_REL) * g->range[fi];
    /* with tensor cores prompts round X and W to f16 while decode stays f32: engine vs engine then differs as
     * much as either may differ from the reference */
    double tol_dec = info->tensor_cores ? tol : TOL_DECODE;
    CHECK(worst <= tol, "%s: max |logit delta| %.3g vs the float64 reference on its weights > %.3g", path, worst, tol);
    double gap_to = INFINITY; /* the reference's nearest router tie up to the worst split position */
    for (int p = 0; sw_seq >= 0 && g->rgap[ti][sw_seq] && p <= sw_at.at; p++) gap_to = fmin(gap_to, g->rgap[ti][sw_seq][p]);
    CHECK(worst_split <= tol_dec, "%s: split steps vs one prefill max |delta| %.3g > %.3g (seq %d position %d: that "
          "row vs the float64 reference %.3g, nearest reference router tie up to there %.3g)", path, worst_split,
          tol_dec, sw_seq, sw_at.at, sw_at.wr, gap_to);
    CHECK(worst_batch <= tol_dec, "%s: batched vs single max |delta| %.3g > %.3g", path, worst_batch, tol_dec);
    printf("  qwen35 %-5s %-6s max|d| %.2e vs ref-f64 (tol %.2e, range %.1f); split-vs-prefill %.2e; batch-vs-single "
           "%.2e; greedy %d/%d steps checked (margin >= %.3g), %d of them equal to llama.cpp's; %d/%d positions\n"
           "    split worst at seq %d position %d: vs ref-f64 %.2e, nearest router tie up to there %.3g\n",
           variant, types[ti], worst, tol, g->range[fi], worst_split, worst_batch, checked, NSEQ * NGREEDY, thr,
           same_llama, rows, rows_all, sw_seq, sw_at.at, sw_at.wr, gap_to);
    engine_destroy(e);
}

static void run_variant(const char *variant, const char *arch, const int *files)
{
    char path[256];
    engine *e = NULL;
    snprintf(path, sizeof path, "tests/fixtures/qwen35_%s_%s.gguf", variant, types[files[0]]);
    CHECK(engine_load(&e, path, NULL, err, sizeof err) == 0, "%s: %s", path, err);
    if (!e) return;
    uint32_t V = engine_get_info(e)->n_vocab;
    CHECK(strcmp(engine_get_info(e)->arch, arch) == 0, "arch %s", engine_get_info(e)->arch);
    engine_destroy(e);
    golden g;
    int ok = load_golden(variant, files, V, &g) == 0;
    CHECK(ok, "tests/golden/qwen35_%s.json, build/golden/qwen35_%s.logits: unreadable or for another vocabulary",
          variant, variant);
    for (int fi = 0; ok && fi < NFILE; fi++) run_file(&g, variant, fi);
    free_golden(&g);
}

static void test_qwen35_dense(void) { run_variant("dense", "qwen35", dense_files); }
static void test_qwen35_moe(void) { run_variant("moe", "qwen35moe", moe_files); }

/* a fork carries its source's state; truncation is refused; the prefix cache reuses nothing */
static void test_qwen35_lifecycle(void)
{
    engine_opts opts = { .n_ctx = 128, .max_seqs = 4 };
    engine *e = NULL;
    CHECK(engine_load(&e, "tests/fixtures/qwen35_dense_q4_k_m.gguf", &opts, err, sizeof err) == 0, "%s", err);
    if (!e) return;
    uint32_t V = engine_get_info(e)->n_vocab;
    int32_t tok[40];
    for (int i = 0; i < 40; i++) tok[i] = (int32_t)((i * 37 + 11) % 1500);
    float *a = malloc(sizeof(float) * 8 * V), *b = malloc(sizeof(float) * 8 * V);
    int s0 = engine_seq_new(e);
    engine_item it = { .seq = s0, .tokens = tok, .n_tokens = 32, .logits = a };
    CHECK(engine_step(e, &it, 1, err, sizeof err) == 0, "prefill: %s", err);
    int s1 = engine_seq_fork(e, s0);
    CHECK(s1 >= 0 && engine_seq_len(e, s1) == 32, "fork");
    engine_item two[2] = { { .seq = s0, .tokens = tok + 32, .n_tokens = 8, .logits = a, .logits_all = 1 },
                           { .seq = s1, .tokens = tok + 32, .n_tokens = 8, .logits = b, .logits_all = 1 } };
    CHECK(engine_step(e, two, 2, err, sizeof err) == 0, "fork step: %s", err);
    double d = rows_max_diff(a, b, (size_t)8 * V);
    CHECK(d <= TOL_DECODE, "fork vs source max |delta| %.3g", d);
    /* the same 8 tokens from a fresh sequence would differ: the fork must have its source's state */
    float *c = malloc(sizeof(float) * 8 * V);
    int s2 = engine_seq_new(e);
    engine_item it2 = { .seq = s2, .tokens = tok + 32, .n_tokens = 8, .logits = c, .logits_all = 1 };
    CHECK(engine_step(e, &it2, 1, err, sizeof err) == 0, "fresh: %s", err);
    CHECK(rows_max_diff(a, c, (size_t)8 * V) > 0.1, "a fresh sequence gives the fork's logits");
    CHECK(engine_seq_truncate(e, s0, 35, tok, err, sizeof err) != 0 && strstr(err, "recurrent state"),
          "truncate not refused: '%s'", err);
    int cached = -1;
    int s3 = engine_seq_new_prefix(e, tok, 40, &cached);
    CHECK(s3 >= 0 && cached == 0, "prefix reuse of %d tokens", cached);
    engine_fit f = engine_get_info(e)->fit;
    /* 3 GDN layers: conv 3 x 512 + S 4 x 64 x 64 floats each */
    CHECK(f.state_seq_bytes == 3ull * 4 * (3 * 512 + 4 * 64 * 64), "state bytes %llu",
          (unsigned long long)f.state_seq_bytes);
    CHECK(f.full_layers == 1 && f.shared_layers == 0, "layers: %u full, %u shared", f.full_layers, f.shared_layers);
    const tokenizer *tk = engine_tokenizer(e);
    int32_t end = tokenizer_find(tk, "<|im_end|>");
    CHECK(end >= 0 && engine_is_stop_token(e, end), "<|im_end|> %d not a stop token", end);
    free(a); free(b); free(c);
    engine_destroy(e);
}

/* broken copies of a converter-made file: engine_load must fail naming the problem */
static void bad_file(const char *src, const char *what, const char *find, size_t after, const void *patch,
                     size_t plen, const char *want)
{
    const char *why, *path = "/tmp/clgemma_test_qwen35_bad.gguf";
    int rc = patch_copy(src, find, after, patch, plen, path, &why);
    CHECK(rc == 0, "%s: %s ('%s' in %s)", what, why, find, src);
    if (!rc) {
        engine *e = NULL;
        rc = engine_load(&e, path, NULL, err, sizeof err);
        CHECK(rc != 0, "%s: loaded", what);
        CHECK(rc == 0 || strstr(err, want), "%s: error '%s' lacks '%s'", what, err, want);
        if (!rc) engine_destroy(e);
    }
    remove(path);
}

static void test_qwen35_bad_files(void)
{
    const char *q4 = "tests/fixtures/qwen35_dense_q4_k_m.gguf";
    bad_file(q4, "missing tensor", "blk.1.ssm_dt.bias", 10, "x", 1, "missing tensor 'blk.1.ssm_dt.bias'");
    uint64_t ne3 = 3;
    /* a tensor-directory entry is the name, n_dims (u32), ne[] (u64 each) */
    bad_file(q4, "wrong shape", "blk.0.ssm_a", 11 + 4, &ne3, 8, "tensor 'blk.0.ssm_a' has shape [3], expected [4]");
    /* layer 2 marked recurrent: it has no gated-delta weights */
    uint8_t one = 1;
    bad_file(q4, "layer kinds", "qwen35.attention.recurrent_layers", 33 + 4 + 4 + 8 + 2, &one, 1,
             "missing tensor 'blk.2.ssm_conv1d.weight'");
    /* without recurrent_layers the interval rule decides: interval 2 makes layer 1 attend, which the file's
     * gated-delta tensors there contradict (interval 4 would make layer 2 recurrent: the other message) */
    const char *why, *mid = "/tmp/clgemma_test_qwen35_nokinds.gguf";
    uint32_t two = 2;
    int rc = patch_copy(q4, "qwen35.attention.recurrent_layers", 32, "X", 1, mid, &why);
    CHECK(rc == 0, "no layer kinds: %s", why);
    if (!rc) bad_file(mid, "interval rule", "qwen35.full_attention_interval", 30 + 4, &two, 4,
                      "missing tensor 'blk.1.attn_q.weight'");
    remove(mid);
}

int main(void)
{
    RUN_TEST(test_qwen35_dense);
    RUN_TEST(test_qwen35_moe);
    RUN_TEST(test_qwen35_lifecycle);
    RUN_TEST(test_qwen35_bad_files);
    CHECK_EXIT();
}
