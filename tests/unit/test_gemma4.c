/* test_gemma4.c — Gemma 4 (GGUF arch "gemma4") through the public engine API against the
 * transformers goldens in tests/golden/gemma4_{dense,moe,e}.json (tools/gen_gemma4_fixtures.py).
 *
 * For each variant (dense: sliding/full layers, full layers with 2x head dim, 1 KV head, K = V,
 * proportional partial RoPE; moe: dense MLP + 8 experts top-2; e: per-layer embeddings, KV
 * sharing, double-wide MLP) and each fixture type (f32, q8_0, q4_k):
 *   1. prefill each golden sequence (8, 19, 37 tokens: longer than the window of 8, and past
 *      the 16-token GEMV limit, so both the GEMV and the dequant+GEMM paths run) with
 *      logits_all and compare every position's logits:
 *        f32:        against the transformers float32 logits;
 *        q8_0, q4_k: against ref_logits.<type> (tools/ref_gemma4.py, float64, on the same
 *                    dequantized weights; quantization itself moves the logits by up to 12 on
 *                    these tiny random models, so transformers-f32 is no yardstick for them —
 *                    that distance is printed for information).
 *      Tolerance: TOL_REL x (max - min of the golden logits). The engine computes in float32
 *      and keeps K/V in half precision; measured worst case ~ see the PASS lines. Where decode
 *      of q8_0 / q4_k / q5_0 weights (dense and expert products) rounds X to int8
 *      (engine_info.int8_decode, NVIDIA; llama.cpp's MMVQ rounds the same way), the quantized
 *      fixtures get TOL_REL_INT8: these random models amplify a 0.5% input rounding to 1.4% of
 *      the range (dense, 0.83 of 59.5 on the H200) and 2.4% (MoE, 1.40 of 58.9: routing moves
 *      it further), as they amplify weight quantization to 20%.
 *   2. prefill the first half in one step (GEMM for 19 and 37 tokens), then decode the rest token
 *      by token against the KV cache: every step's logits must equal the logits_all prefill's row
 *      (TOL_DECODE absolute; GEMV vs GEMM summation order).
 *   3. all three sequences in one engine_step (mixed sequences in one batch) equal the
 *      single-sequence prefills (TOL_DECODE).
 *   4. f32: 8 greedy tokens decoded one at a time equal the golden continuation.
 * Also: a file with a missing or mis-shaped tensor, or an unknown layer type, fails to load
 * with one error naming it. */
#include "check.h"
#include "engine.h"
#include "gguf.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL_REL 1e-3     /* of the golden logit range (about 60 with softcap 30): ~0.06 */
#define TOL_REL_INT8 4e-2 /* of the range, quantized fixtures with int8 decode inputs */
#define TOL_DECODE 5e-3  /* absolute, engine vs engine: GEMV vs GEMM summation order, through
                            4-5 layers (measured up to 1.9e-3 on dense q8_0) */
#define NSEQ 3
#define NGREEDY 8

static char err[1024];

/* ---- a minimal reader for the golden JSON: arrays of numbers, found by key ---- */

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) { free(s); s = NULL; }
    if (s) s[n] = 0;
    fclose(f);
    return s;
}

/* p at or before '[': reads every number of the (nested) array into out (grown); returns the
 * position after the closing bracket */
static const char *read_nums(const char *p, double **out, size_t *n)
{
    size_t cap = 0;
    *out = NULL;
    *n = 0;
    p = strchr(p, '[');
    if (!p) return NULL;
    int depth = 0;
    do {
        if (*p == '[') { depth++; p++; }
        else if (*p == ']') { depth--; p++; }
        else if (*p == '-' || (*p >= '0' && *p <= '9')) {
            char *e;
            double v = strtod(p, &e);
            if (*n == cap) { cap = cap ? cap * 2 : 1024; *out = realloc(*out, cap * sizeof **out); }
            (*out)[(*n)++] = v;
            p = e;
        } else if (!*p) return NULL;
        else p++;
    } while (depth > 0);
    return p;
}

typedef struct golden {
    int ntok[NSEQ];
    int32_t *tok[NSEQ];
    double *logits[NSEQ];       /* transformers f32 [ntok][V] */
    int32_t greedy[NSEQ][NGREEDY];
    double *ref_q8, *ref_q4;    /* ref_logits.<type>: all sequences back to back */
    double range;               /* max - min over all golden logits */
} golden;

static int load_golden(const char *path, golden *g, uint32_t V)
{
    memset(g, 0, sizeof *g);
    char *s = slurp(path);
    if (!s) return -1;
    const char *p = strstr(s, "\"sequences\"");
    double lo = 1e30, hi = -1e30;
    for (int i = 0; i < NSEQ && p; i++) {
        double *d;
        size_t n;
        p = strstr(p, "\"tokens\"");
        if (!p || !(p = read_nums(p, &d, &n))) break;
        g->ntok[i] = (int)n;
        g->tok[i] = malloc(n * sizeof(int32_t));
        for (size_t j = 0; j < n; j++) g->tok[i][j] = (int32_t)d[j];
        free(d);
        p = strstr(p, "\"logits\"");
        if (!p || !(p = read_nums(p, &g->logits[i], &n)) || n != (size_t)g->ntok[i] * V) { p = NULL; break; }
        for (size_t j = 0; j < n; j++) { if (g->logits[i][j] < lo) lo = g->logits[i][j]; if (g->logits[i][j] > hi) hi = g->logits[i][j]; }
        p = strstr(p, "\"greedy\"");
        if (!p || !(p = read_nums(p, &d, &n)) || n != NGREEDY) { p = NULL; break; }
        for (int j = 0; j < NGREEDY; j++) g->greedy[i][j] = (int32_t)d[j];
        free(d);
    }
    const char *r = p ? strstr(p, "\"ref_logits\"") : NULL;
    size_t total = 0, n8 = 0, n4 = 0;
    for (int i = 0; i < NSEQ; i++) total += (size_t)g->ntok[i] * V;
    if (r) {
        const char *a = strstr(r, "\"q8_0\""), *b = strstr(r, "\"q4_k\"");
        if (a) read_nums(a, &g->ref_q8, &n8);
        if (b) read_nums(b, &g->ref_q4, &n4);
    }
    free(s);
    g->range = hi - lo;
    return p && n8 == total && n4 == total ? 0 : -1;
}

static void free_golden(golden *g)
{
    for (int i = 0; i < NSEQ; i++) { free(g->tok[i]); free(g->logits[i]); }
    free(g->ref_q8);
    free(g->ref_q4);
}

/* ---- engine helpers ---- */

static int prefill(engine *e, const int32_t *tok, int n, float *logits)
{
    int s = engine_seq_new(e);
    engine_item it = { .seq = s, .tokens = tok, .n_tokens = n, .logits = logits, .logits_all = 1 };
    int rc = engine_step(e, &it, 1, err, sizeof err);
    engine_seq_free(e, s);
    return rc;
}

static int argmax(const float *x, uint32_t n)
{
    int b = 0;
    for (uint32_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = (int)i;
    return b;
}

static double max_abs_f(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= m)) m = d; /* NaN propagates */
    }
    return m;
}

static double max_abs_d(const float *a, const double *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= m)) m = d;
    }
    return m;
}

static void run_variant(const char *variant)
{
    static const char *types[] = { "f32", "q8_0", "q4_k" };
    char path[256];
    engine_opts opts = { .n_ctx = 128, .max_seqs = 4 };
    engine *e = NULL;
    snprintf(path, sizeof path, "tests/fixtures/gemma4_%s.gguf", variant);
    CHECK(engine_load(&e, path, &opts, err, sizeof err) == 0, "%s: %s", path, err);
    if (!e) return;
    uint32_t V = engine_get_info(e)->n_vocab;
    CHECK(strcmp(engine_get_info(e)->arch, "gemma4") == 0, "arch %s", engine_get_info(e)->arch);
    engine_destroy(e);
    golden g;
    snprintf(path, sizeof path, "tests/golden/gemma4_%s.json", variant);
    CHECK(load_golden(path, &g, V) == 0, "%s: unreadable golden", path);
    if (!g.range) return;
    for (int ti = 0; ti < 3; ti++) {
        if (ti == 0) snprintf(path, sizeof path, "tests/fixtures/gemma4_%s.gguf", variant);
        else snprintf(path, sizeof path, "tests/fixtures/gemma4_%s_%s.gguf", variant, types[ti]);
        CHECK(engine_load(&e, path, &opts, err, sizeof err) == 0, "%s: %s", path, err);
        if (!e) continue;
        double worst = 0, worst_tf = 0, worst_dec = 0, worst_batch = 0;
        float *pre[NSEQ] = { 0 };
        size_t off = 0;
        for (int s = 0; s < NSEQ; s++) {
            int n = g.ntok[s];
            pre[s] = malloc(sizeof(float) * n * V);
            CHECK(prefill(e, g.tok[s], n, pre[s]) == 0, "%s seq %d prefill: %s", path, s, err);
            double d_tf = max_abs_d(pre[s], g.logits[s], (size_t)n * V);
            const double *ref = ti == 0 ? g.logits[s] : (ti == 1 ? g.ref_q8 : g.ref_q4) + off;
            double d = max_abs_d(pre[s], ref, (size_t)n * V);
            off += (size_t)n * V;
            if (d > worst || d != d) worst = d;
            if (d_tf > worst_tf || d_tf != d_tf) worst_tf = d_tf;
            /* the first half in one step (only its last row: past 16 tokens that is the
             * dequant+GEMM path, while logits_all runs in chunks of at most 16 output rows), then
             * the rest token by token against the KV cache it wrote */
            int sq = engine_seq_new(e);
            float *row = malloc(sizeof(float) * V);
            int h = n / 2 + 1;
            engine_item it0 = { .seq = sq, .tokens = g.tok[s], .n_tokens = h, .logits = row };
            CHECK(engine_step(e, &it0, 1, err, sizeof err) == 0, "%s half prefill: %s", path, err);
            double d0 = max_abs_f(row, pre[s] + (size_t)(h - 1) * V, V);
            if (d0 > worst_dec || d0 != d0) worst_dec = d0;
            for (int t = h; t < n; t++) {
                engine_item it = { .seq = sq, .tokens = &g.tok[s][t], .n_tokens = 1, .logits = row };
                if (engine_step(e, &it, 1, err, sizeof err)) { CHECK(0, "%s decode: %s", path, err); break; }
                double dd = max_abs_f(row, pre[s] + (size_t)t * V, V);
                if (dd > worst_dec || dd != dd) worst_dec = dd;
            }
            /* greedy continuation (f32: must equal transformers') */
            if (ti == 0) {
                int32_t next = (int32_t)argmax(pre[s] + (size_t)(n - 1) * V, V);
                int ok = 1;
                for (int j = 0; j < NGREEDY && ok; j++) {
                    if (next != g.greedy[s][j]) {
                        CHECK(0, "%s seq %d greedy token %d: got %d, golden %d", path, s, j, next, g.greedy[s][j]);
                        ok = 0;
                        break;
                    }
                    engine_item it = { .seq = sq, .tokens = &next, .n_tokens = 1, .logits = row };
                    if (engine_step(e, &it, 1, err, sizeof err)) { CHECK(0, "%s greedy: %s", path, err); ok = 0; }
                    next = (int32_t)argmax(row, V);
                }
            }
            engine_seq_free(e, sq);
            free(row);
        }
        /* the three sequences in one step */
        engine_item items[NSEQ];
        float *bl[NSEQ];
        for (int s = 0; s < NSEQ; s++) {
            bl[s] = malloc(sizeof(float) * g.ntok[s] * V);
            items[s] = (engine_item){ .seq = engine_seq_new(e), .tokens = g.tok[s], .n_tokens = g.ntok[s],
                                      .logits = bl[s], .logits_all = 1 };
        }
        CHECK(engine_step(e, items, NSEQ, err, sizeof err) == 0, "%s batch: %s", path, err);
        for (int s = 0; s < NSEQ; s++) {
            double d = max_abs_f(bl[s], pre[s], (size_t)g.ntok[s] * V);
            if (d > worst_batch || d != d) worst_batch = d;
            engine_seq_free(e, items[s].seq);
            free(bl[s]);
            free(pre[s]);
        }
        double tol = (ti && engine_get_info(e)->int8_decode ? TOL_REL_INT8 : TOL_REL) * g.range;
        CHECK(worst <= tol, "%s: max |logit delta| %.3g vs %s > %.3g", path, worst,
              ti ? "reference on the same quantized weights" : "transformers", tol);
        /* with tensor cores, prefill and batches round X and W to f16 while decode stays f32: engine
         * vs engine then differs as much as either may differ from the reference */
        double tol_dec = engine_get_info(e)->tensor_cores ? tol : TOL_DECODE;
        CHECK(worst_dec <= tol_dec, "%s: decode vs prefill max |delta| %.3g > %.3g", path, worst_dec, tol_dec);
        CHECK(worst_batch <= tol_dec, "%s: batched vs single max |delta| %.3g > %.3g", path, worst_batch, tol_dec);
        printf("  gemma4 %-5s %-4s max|d| %.2e vs %s (tol %.2e, range %.1f); vs transformers-f32 %.2e; "
               "decode-vs-prefill %.2e; batch-vs-single %.2e\n",
               variant, types[ti], worst, ti ? "ref(quant)" : "transformers", tol, g.range, worst_tf, worst_dec,
               worst_batch);
        engine_destroy(e);
    }
    free_golden(&g);
}

/* a copy of the dense fixture with one patch; engine_load must fail naming the problem */
static void bad_file(const char *what, const char *find, size_t after, const void *patch, size_t plen,
                     const char *want)
{
    FILE *f = fopen("tests/fixtures/gemma4_dense.gguf", "rb");
    CHECK(f != NULL, "no fixture");
    if (!f) return;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n);
    CHECK(fread(buf, 1, (size_t)n, f) == (size_t)n, "short read");
    fclose(f);
    char *hit = NULL;
    size_t fl = strlen(find);
    for (long i = 0; i + (long)fl <= n && !hit; i++)
        if (memcmp(buf + i, find, fl) == 0) hit = buf + i;
    CHECK(hit != NULL, "%s: '%s' not in the fixture", what, find);
    if (hit) {
        memcpy(hit + after, patch, plen);
        char path[] = "/tmp/clgemma_test_gemma4_bad.gguf";
        FILE *o = fopen(path, "wb");
        CHECK(o && fwrite(buf, 1, (size_t)n, o) == (size_t)n, "cannot write %s", path);
        if (o) fclose(o);
        engine *e = NULL;
        int rc = engine_load(&e, path, NULL, err, sizeof err);
        CHECK(rc != 0, "%s: loaded", what);
        CHECK(rc == 0 || strstr(err, want), "%s: error '%s' lacks '%s'", what, err, want);
        if (!rc) engine_destroy(e);
        remove(path);
    }
    free(buf);
}

static void test_gemma4_bad_files(void)
{
    /* the tensor directory stores each name followed by n_dims (u32) and ne[] (u64) */
    bad_file("missing tensor", "blk.1.attn_k_norm.weight", 15, "x", 1,
             "missing tensor 'blk.1.attn_k_norm.weight' (expected shape [64])");
    uint64_t ne16 = 16;
    bad_file("wrong shape", "blk.0.attn_q_norm.weight", 24 + 4, &ne16, 8,
             "tensor 'blk.0.attn_q_norm.weight' has shape [16], expected [32]");
    /* key, then value type ARRAY (u32), element type BOOL (u32), count (u64), the bools */
    uint8_t two = 2;
    bad_file("unknown layer type", "gemma4.attention.sliding_window_pattern", 39 + 16 + 1, &two, 1,
             "layer 1 has unknown type 2");
}

/* chat template: expected strings rendered from the fixture's tokenizer.chat_template with jinja2
 * (bos_token ''); stop tokens <eos>, <turn|>, <|tool_response> */
static void test_gemma4_chat(void)
{
    engine *e = NULL;
    CHECK(engine_load(&e, "tests/fixtures/gemma4_dense.gguf", NULL, err, sizeof err) == 0, "%s", err);
    if (!e) return;
    chat_msg msgs[] = { { "system", " Be brief. " }, { "user", "Hi\n" },
                        { "assistant", "<|channel>thought\nhmm<channel|> Hello!" }, { "user", "Bye" } };
    char out[512];
    int n = engine_chat_prompt(e, msgs, 4, 1, out, sizeof out);
    const char *want = "<|turn>system\nBe brief.<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\nHello!<turn|>\n"
                       "<|turn>user\nBye<turn|>\n<|turn>model\n<|channel>thought\n<channel|>";
    CHECK(n == (int)strlen(want) && strcmp(out, want) == 0, "prompt '%s'", out);
    n = engine_chat_prompt(e, msgs + 1, 1, 0, out, sizeof out);
    CHECK(n > 0 && strcmp(out, "<|turn>user\nHi<turn|>\n") == 0, "prompt '%s'", out);
    const tokenizer *tk = engine_tokenizer(e);
    int32_t eot = tokenizer_find(tk, "<turn|>"), tr = tokenizer_find(tk, "<|tool_response>");
    CHECK(eot == 6 && tr == 14, "<turn|> %d, <|tool_response> %d", eot, tr);
    CHECK(engine_is_stop_token(e, 1) && engine_is_stop_token(e, 6) && engine_is_stop_token(e, 14), "stop tokens");
    CHECK(!engine_is_stop_token(e, 2) && !engine_is_stop_token(e, 5) && !engine_is_stop_token(e, 300),
          "non-stop tokens");
    engine_destroy(e);
}

static void test_gemma4_dense(void) { run_variant("dense"); }
static void test_gemma4_moe(void) { run_variant("moe"); }
static void test_gemma4_e(void) { run_variant("e"); }

int main(void)
{
    /* the fixtures' matrices are small: batched decode on the GPU takes the int8 tensor-core
     * products (mmq8) anyway, so the whole model is checked through them */
    setenv("CLGEMMA_MMQ8_MIN_ELEMS", "0", 1);
    RUN_TEST(test_gemma4_dense);
    RUN_TEST(test_gemma4_moe);
    RUN_TEST(test_gemma4_e);
    RUN_TEST(test_gemma4_bad_files);
    RUN_TEST(test_gemma4_chat);
    CHECK_EXIT();
}
