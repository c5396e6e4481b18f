/* test_gemma4.c — Gemma 4 files written by llama.cpp's own converter (convert_hf_to_gguf.py: f32, bf16,
 * q8_0) and quantizer (llama_model_quantize: Q4_K_M), with a truncated real Gemma 4 vocabulary, through
 * the public engine API against tests/golden/gemma4_{dense,moe,e}.{json,logits}
 * (tools/gen_gemma4_fixtures.py; docs/GEMMA4.md section 7).
 *
 * For each variant (dense: sliding/full layers, 2x head dim and K = V on the full layer; moe: dense MLP
 * beside 6 experts top-2; e: per-layer embeddings, KV sharing, double-wide MLP, unused K/V tensors on the
 * shared layers) and each file type:
 *   0. the chat-prompt sequences are what llama.cpp's tokenizer made of their text;
 *   1. prefill each golden sequence (8, 24, 49 tokens: the last two past the window of 8 and the 16-token GEMV
 *      limit, so both the GEMV and the dequant+GEMM paths run) with logits_all; every position's logits
 *      must be within tol of
 *        - the float64 reference on the same file (tools/ref_gemma4.py, weights dequantized by gguf-py);
 *        - transformers float32 on the same weights (f32 and bf16 files);
 *      tol = TOL_REL x (max - min of the golden logits, about 40 with softcap 30). The engine computes
 *      in float32 and keeps K/V in half precision. With tensor cores (engine_info.tensor_cores, NVIDIA)
 *      prompts round X and W to f16: TOL_REL_TC. Where decode steps of quantized weights round X to
 *      int8 (engine_info.int8_decode; llama.cpp's MMVQ rounds the same way), the quantized files get
 *      TOL_REL_INT8: these random models amplify a 0.5% input rounding to over 1% of the range. The
 *      distance of quantized files to transformers on the original weights is printed for information.
 *      MoE: where the reference's k-th and (k+1)-th router logits lie closer than ROUTER_GAP_ROUNDED
 *      at some position, f16 / int8 rounding may legitimately pick the other expert there, which
 *      changes that position and, through attention, every later one; engines that round so compare
 *      only the positions before the first such near tie (float-activation engines compare all).
 *   2. prefill the first half in one step, then decode the rest token by token: every step's logits
 *      must equal the logits_all prefill's row (TOL_DECODE absolute; GEMV vs GEMM summation order);
 *   3. all three sequences in one engine_step equal the single-sequence prefills (TOL_DECODE);
 *   4. 8 greedy tokens decoded one at a time equal the float64 reference's greedy continuation on the
 *      same file at every step where the reference's top-1/top-2 margin has stayed >= 2 x (the engine's
 *      worst logit delta on this file) + 0.02, so that no rounding the logits check allows can flip it
 *      (f32: the golden guarantees margins >= 0.05 and transformers' continuation is the same).
 * Also: the chat prompt equals jinja2's rendering of the file's own template, the stop tokens, and
 * broken copies of converter-made files that must fail to load with one error naming the problem. */
#include "check.h"
#include "fixture_io.h"
#include "golden_json.h"
#include "logit_rows.h"
#include "engine.h"
#include "gguf.h"
#include "tokenizer.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL_REL 1e-3      /* of the golden logit range: ~0.04 */
#define TOL_REL_TC 2e-3   /* of the range, f16 tensor-core prompts (H200: up to 9.4e-4 measured) */
#define TOL_REL_INT8 4e-2 /* of the range, quantized files with int8 decode inputs */
#define ROUTER_GAP_ROUNDED 5e-3 /* router logit gap that f16 / int8 rounding cannot close (H200: an expert
                                   choice with gap 9.7e-4 flipped) */
#define TOL_DECODE 5e-3   /* absolute, engine vs engine: GEMV vs GEMM summation order */
#define NSEQ 3
#define NTYPE 4
#define NGREEDY 8
#define NSET 6
#define NCHAT 2

static const char *types[NTYPE] = { "f32", "bf16", "q8_0", "q4_k_m" };
static const char *suffix[NTYPE] = { "", "_bf16", "_q8_0", "_q4_k_m" };
/* logit sets of the .logits file, in this order; the JSON must list the same */
enum { HF_F32, HF_BF16, REF_F32, REF_BF16, REF_Q8_0, REF_Q4_K_M };
static const char SETS[] = "\"sets\":[\"hf:f32\",\"hf:bf16\",\"ref:f32\",\"ref:bf16\",\"ref:q8_0\",\"ref:q4_k_m\"]";

static char err[1024];

/* ---- a minimal reader for the golden JSON (compact, as json.dumps writes it) ---- */


/* p at or before the opening quote of a JSON string (ASCII escapes only): a malloc'd copy; *end after it */
static char *read_str(const char *p, const char **end)
{
    p = p ? strchr(p, '"') : NULL;
    if (!p) return NULL;
    char *s = malloc(strlen(p)), *o = s;
    for (p++; *p && *p != '"'; p++) {
        if (*p != '\\') { *o++ = *p; continue; }
        switch (*++p) {
        case 'n': *o++ = '\n'; break;
        case 't': *o++ = '\t'; break;
        case 'u': *o++ = (char)strtol((char[]){ p[1], p[2], p[3], p[4], 0 }, NULL, 16); p += 4; break;
        default: *o++ = *p; break;
        }
    }
    *o = 0;
    if (end) *end = *p ? p + 1 : p;
    return s;
}


typedef struct chat_case {
    int n, add_gen;
    char *role[8], *content[8], *prompt;
} chat_case;

typedef struct golden {
    uint32_t V;
    int ntok[NSEQ];
    int32_t *tok[NSEQ];
    char *text[NSEQ];               /* chat text of the sequence (NULL: random ids) */
    int32_t greedy[NTYPE][NSEQ][NGREEDY];
    double gap[NTYPE][NSEQ][NGREEDY];
    double *rgap[NTYPE][NSEQ];      /* MoE: per position of tokens + greedy, min router gap (else NULL) */
    float *logits;                  /* [NSET][all sequences' positions][V] */
    size_t off[NSEQ], set_len;      /* floats */
    double range;
    chat_case chat[NCHAT];
} golden;


static int load_golden(const char *variant, uint32_t V, golden *g)
{
    char path[256];
    memset(g, 0, sizeof *g);
    g->V = V;
    snprintf(path, sizeof path, "tests/golden/gemma4_%s.json", variant);
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
        const char *rg = find_in(t, next, "router_gap");
        for (int ti = 0; ti < NTYPE && p; ti++) {
            double *x;
            size_t nx;
            if (read_ints(find_in(gr, next, types[ti]), g->greedy[ti][i], NGREEDY) ||
                !read_nums(find_in(gg, next, types[ti]), &x, &nx) || nx != NGREEDY) { p = NULL; break; }
            memcpy(g->gap[ti][i], x, sizeof g->gap[ti][i]);
            free(x);
            if (rg && (!read_nums(find_in(rg, next, types[ti]), &g->rgap[ti][i], &nx) ||
                       nx != (size_t)g->ntok[i] + NGREEDY)) { p = NULL; break; }
        }
        const char *tx = find_in(t, next, "text");
        if (tx) g->text[i] = read_str(tx, NULL);
        p = next ? next - 1 : (i == NSEQ - 1 ? t : NULL);
    }
    const char *c = p ? strstr(s, "\"chat\":") : NULL;
    for (int i = 0; i < NCHAT && c; i++) {
        chat_case *cc = &g->chat[i];
        const char *r = find_in(c, NULL, "roles"), *q;
        for (cc->n = 0; r && *r != ']' && cc->n < 8; cc->n++) {   /* r at '[' or ',' before each string */
            cc->role[cc->n] = read_str(r, &q);
            r = q;
        }
        r = find_in(c, NULL, "contents");
        for (int j = 0; r && j < cc->n; j++) {
            cc->content[j] = read_str(r, &q);
            r = q;
        }
        const char *a = find_in(c, NULL, "add_generation_prompt");
        cc->add_gen = a && strncmp(a, "true", 4) == 0;
        cc->prompt = read_str(find_in(c, NULL, "prompt"), &c);
        if (!cc->prompt || !cc->n) c = NULL;
    }
    if (p && c && strstr(s, SETS)) {
        size_t total = 0;
        for (int i = 0; i < NSEQ; i++) { g->off[i] = total; total += (size_t)g->ntok[i] * V; }
        g->set_len = total;
        long nb;
        snprintf(path, sizeof path, "tests/golden/gemma4_%s.logits", variant);
        g->logits = (float *)slurp(path, &nb);
        if (g->logits && (size_t)nb == sizeof(float) * NSET * total) {
            double lo = 1e30, hi = -1e30;
            for (size_t j = 0; j < total; j++) {
                float v = g->logits[HF_F32 * total + j];
                if (v < lo) lo = v;
                if (v > hi) hi = v;
            }
            g->range = hi - lo;
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
        free(g->text[i]);
        for (int t = 0; t < NTYPE; t++) free(g->rgap[t][i]);
    }
    for (int i = 0; i < NCHAT; i++) {
        for (int j = 0; j < g->chat[i].n; j++) { free(g->chat[i].role[j]); free(g->chat[i].content[j]); }
        free(g->chat[i].prompt);
    }
    free(g->logits);
}

static const float *set_row(const golden *g, int set, int s) { return g->logits + set * g->set_len + g->off[s]; }

/* ---- engine helpers ---- */

static int prefill(engine *e, const int32_t *tok, int n, float *logits)
{
    int s = engine_seq_new(e);
    engine_item it = { .seq = s, .tokens = tok, .n_tokens = n, .logits = logits, .logits_all = 1 };
    int rc = engine_step(e, &it, 1, err, sizeof err);
    engine_seq_free(e, s);
    return rc;
}



/* the chat sequences are llama.cpp's tokenization of their text (parse_special, no BOS added: the
 * template writes <bos>) */
static void check_tokens(engine *e, const golden *g, const char *path)
{
    const tokenizer *tk = engine_tokenizer(e);
    for (int s = 0; s < NSEQ; s++) {
        if (!g->text[s]) continue;
        int32_t ids[256];
        int n = tokenizer_encode(tk, g->text[s], strlen(g->text[s]), 0, 1, ids, 256);
        CHECK(n == g->ntok[s] && memcmp(ids, g->tok[s], sizeof(int32_t) * (size_t)n) == 0,
              "%s: sequence %d: %d ids from its text, llama.cpp made %d", path, s, n, g->ntok[s]);
    }
}

static void run_file(const golden *g, const char *variant, int ti)
{
    char path[256];
    /* forward chunks of 24 tokens: the sliding layers keep a KV ring of one 32-token block (window 8 +
     * a chunk's 23 more keys), which the 49-token sequences and their greedy steps wrap (kv.h) */
    /* the fixtures' matrices are small: batched decode on the GPU takes the int8 tensor-core
     * products (mmq8) anyway, so the whole model is checked through them */
    static const char *const settings[] = { "MMQ8_MIN_ELEMS=0" };
    engine_opts opts = { .n_ctx = 128, .max_seqs = 4, .max_batch_tokens = 24, .settings = settings, .n_settings = 1 };
    engine *e = NULL;
    uint32_t V = g->V;
    snprintf(path, sizeof path, "tests/fixtures/gemma4_%s%s.gguf", variant, suffix[ti]);
    CHECK(engine_load(&e, path, &opts, err, sizeof err) == 0, "%s: %s", path, err);
    if (!e) return;
    CHECK(engine_get_info(e)->n_vocab == V, "%s: n_vocab %u", path, engine_get_info(e)->n_vocab);
    check_tokens(e, g, path);
    int ref_set = REF_F32 + ti, hf_set = ti == 0 ? HF_F32 : ti == 1 ? HF_BF16 : -1;
    const engine_info *info = engine_get_info(e);
    int int8 = ti >= 2 && info->int8_decode, rounded = int8 || info->tensor_cores;
    double worst = 0, worst_hf = 0, worst_orig = 0, worst_dec = 0, worst_batch = 0;
    float *pre[NSEQ] = { 0 }, *row = malloc(sizeof(float) * V);
    int lim[NSEQ], rows = 0, rows_all = 0; /* positions compared: before the first router near tie */
    for (int s = 0; s < NSEQ; s++) {
        int n = g->ntok[s];
        lim[s] = n + NGREEDY;
        for (int p = 0; rounded && g->rgap[ti][s] && p < n + NGREEDY; p++)
            if (g->rgap[ti][s][p] < ROUTER_GAP_ROUNDED) { lim[s] = p; break; }
        rows += lim[s] < n ? lim[s] : n;
        rows_all += n;
    }
    for (int s = 0; s < NSEQ; s++) {
        int n = g->ntok[s];
        pre[s] = malloc(sizeof(float) * (size_t)n * V);
        CHECK(prefill(e, g->tok[s], n, pre[s]) == 0, "%s seq %d prefill: %s", path, s, err);
        if (lim[s] < n) n = lim[s];
        size_t nv = (size_t)n * V;
        double d = rows_max_diff(pre[s], set_row(g, ref_set, s), nv);
        double dh = hf_set >= 0 ? rows_max_diff(pre[s], set_row(g, hf_set, s), nv) : 0;
        double d0 = rows_max_diff(pre[s], set_row(g, HF_F32, s), nv);
        if (d > worst || d != d) worst = d;
        if (dh > worst_hf || dh != dh) worst_hf = dh;
        if (d0 > worst_orig || d0 != d0) worst_orig = d0;
    }
    /* the first half in one step (only its last row), then the rest token by token against the KV cache
     * it wrote, then greedy tokens */
    double thr = 2 * worst + 0.02;
    int checked = 0;
    for (int s = 0; s < NSEQ; s++) {
        int n = g->ntok[s], h = n / 2 + 1;
        int sq = engine_seq_new(e);
        engine_item it0 = { .seq = sq, .tokens = g->tok[s], .n_tokens = h, .logits = row };
        CHECK(engine_step(e, &it0, 1, err, sizeof err) == 0, "%s half prefill: %s", path, err);
        double d0 = h <= lim[s] ? rows_max_diff(row, pre[s] + (size_t)(h - 1) * V, V) : 0;
        if (d0 > worst_dec || d0 != d0) worst_dec = d0;
        for (int t = h; t < n && t < lim[s]; t++) {
            engine_item it = { .seq = sq, .tokens = &g->tok[s][t], .n_tokens = 1, .logits = row };
            if (engine_step(e, &it, 1, err, sizeof err)) { CHECK(0, "%s decode: %s", path, err); break; }
            double dd = rows_max_diff(row, pre[s] + (size_t)t * V, V);
            if (dd > worst_dec || dd != dd) worst_dec = dd;
        }
        int32_t next = (int32_t)rows_argmax(row, V);
        double margin = INFINITY;
        for (int j = 0; j < NGREEDY && n - 1 + j < lim[s]; j++) {
            margin = fmin(margin, g->gap[ti][s][j]);
            if (margin < thr) break;
            if (next != g->greedy[ti][s][j]) {
                CHECK(0, "%s seq %d greedy token %d: got %d, reference %d (margin %.3g)", path, s, j, next,
                      g->greedy[ti][s][j], margin);
                break;
            }
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
        double d = rows_max_diff(bl[s], pre[s], (size_t)(lim[s] < g->ntok[s] ? lim[s] : g->ntok[s]) * V);
        if (d > worst_batch || d != d) worst_batch = d;
        engine_seq_free(e, items[s].seq);
        free(bl[s]);
        free(pre[s]);
    }
    free(row);
    double tol = (int8 ? TOL_REL_INT8 : info->tensor_cores ? TOL_REL_TC : TOL_REL) * g->range;
    CHECK(worst <= tol, "%s: max |logit delta| %.3g vs the float64 reference on its weights > %.3g", path, worst, tol);
    CHECK(worst_hf <= tol, "%s: max |logit delta| %.3g vs transformers on its weights > %.3g", path, worst_hf, tol);
    /* with tensor cores, prefill and batches round X and W to f16 while decode stays f32: engine vs engine
     * then differs as much as either may differ from the reference */
    double tol_dec = info->tensor_cores ? tol : TOL_DECODE;
    CHECK(worst_dec <= tol_dec, "%s: decode vs prefill max |delta| %.3g > %.3g", path, worst_dec, tol_dec);
    CHECK(worst_batch <= tol_dec, "%s: batched vs single max |delta| %.3g > %.3g", path, worst_batch, tol_dec);
    printf("  gemma4 %-5s %-6s max|d| %.2e vs ref-f64 (tol %.2e, range %.1f)", variant, types[ti], worst, tol,
           g->range);
    if (hf_set >= 0) printf(", %.2e vs transformers-f32", worst_hf);
    printf("; %.2e vs transformers on the original weights; decode-vs-prefill %.2e; batch-vs-single %.2e; "
           "greedy %d/%d steps checked (margin >= %.3g); %d/%d positions\n", worst_orig, worst_dec, worst_batch,
           checked, NSEQ * NGREEDY, thr, rows, rows_all);
    engine_destroy(e);
}

static void run_variant(const char *variant)
{
    char path[256];
    engine *e = NULL;
    snprintf(path, sizeof path, "tests/fixtures/gemma4_%s.gguf", variant);
    CHECK(engine_load(&e, path, NULL, err, sizeof err) == 0, "%s: %s", path, err);
    if (!e) return;
    uint32_t V = engine_get_info(e)->n_vocab;
    CHECK(strcmp(engine_get_info(e)->arch, "gemma4") == 0, "arch %s", engine_get_info(e)->arch);
    engine_destroy(e);
    golden g;
    int ok = load_golden(variant, V, &g) == 0;
    CHECK(ok, "tests/golden/gemma4_%s.{json,logits}: unreadable or for another vocabulary", variant);
    for (int ti = 0; ok && ti < NTYPE; ti++) run_file(&g, variant, ti);
    free_golden(&g);
}

/* ---- broken copies of converter-made files: engine_load must fail naming the problem ---- */

/* the file with the bytes at (first occurrence of find) + after replaced by patch */
static void bad_file(const char *src, const char *what, const char *find, size_t after, const void *patch,
                     size_t plen, const char *want)
{
    const char *why, *path = "/tmp/clgemma_test_gemma4_bad.gguf";
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

static void test_gemma4_bad_files(void)
{
    const char *dense = "tests/fixtures/gemma4_dense.gguf", *q4 = "tests/fixtures/gemma4_dense_q4_k_m.gguf",
               *moe = "tests/fixtures/gemma4_moe_q8_0.gguf", *ef = "tests/fixtures/gemma4_e_bf16.gguf";
    /* a tensor-directory entry is the name, n_dims (u32), ne[] (u64 each), type (u32), offset (u64) */
    bad_file(dense, "missing tensor", "blk.1.attn_k_norm.weight", 15, "x", 1,
             "missing tensor 'blk.1.attn_k_norm.weight' (expected shape [32])");
    bad_file(q4, "no rope_freqs", "rope_freqs.weight", 9, "x", 1, "missing tensor 'rope_freqs.weight' (expected shape [32])");
    uint64_t ne16 = 16, ne128 = 128, ne32 = 32;
    bad_file(dense, "wrong shape", "blk.0.attn_q_norm.weight", 24 + 4, &ne16, 8,
             "tensor 'blk.0.attn_q_norm.weight' has shape [16], expected [32]");
    uint32_t f16 = 1, i32 = 26;
    bad_file(dense, "norm not F32", "blk.2.ffn_norm.weight", 21 + 4 + 8, &f16, 4,
             "tensor 'blk.2.ffn_norm.weight' has type f16, expected F32");
    bad_file(dense, "unsupported matrix type", "blk.0.attn_q.weight", 19 + 4 + 16, &i32, 4,
             "tensor 'blk.0.attn_q.weight' has unsupported type");
    bad_file(moe, "expert tensor shape", "blk.1.ffn_gate_up_exps.weight", 29 + 4 + 8, &ne32, 8,
             "tensor 'blk.1.ffn_gate_up_exps.weight' has shape [256, 32, 6], expected [256, 64, 6]");
    bad_file(ef, "per-layer table shape", "per_layer_token_embd.weight", 27 + 4, &ne128, 8,
             "tensor 'per_layer_token_embd.weight' has shape");
    /* a key is its name then its value type (u32); an ARRAY then holds element type (u32), count (u64) */
    bad_file(q4, "missing key", "gemma4.attention.key_length_swa", 30, "x", 1,
             "missing key 'gemma4.attention.key_length_swa'");
    uint8_t two = 2;
    bad_file(dense, "unknown layer type", "gemma4.attention.sliding_window_pattern", 39 + 16 + 1, &two, 1,
             "layer 1 has unknown type 2");
}

/* chat prompt: jinja2's rendering of the file's own tokenizer.chat_template (the real Gemma 4 template,
 * bos_token ''); stop tokens <eos>, <turn|>, <|tool_response> at their real ids */
static void test_gemma4_chat(void)
{
    engine *e = NULL;
    CHECK(engine_load(&e, "tests/fixtures/gemma4_dense_q4_k_m.gguf", NULL, err, sizeof err) == 0, "%s", err);
    if (!e) return;
    golden g;
    CHECK(load_golden("dense", engine_get_info(e)->n_vocab, &g) == 0, "unreadable golden");
    for (int i = 0; i < NCHAT; i++) {
        const chat_case *c = &g.chat[i];
        chat_msg msgs[8];
        for (int j = 0; j < c->n; j++) msgs[j] = (chat_msg){ c->role[j], c->content[j] };
        char out[2048];
        int n = c->prompt ? engine_chat_prompt(e, msgs, c->n, c->add_gen, out, sizeof out) : -1;
        CHECK(n >= 0 && strcmp(out, c->prompt) == 0, "chat case %d: '%s', jinja2: '%s'", i, n >= 0 ? out : "",
              c->prompt ? c->prompt : "");
    }
    free_golden(&g);
    const tokenizer *tk = engine_tokenizer(e);
    int32_t eot = tokenizer_find(tk, "<turn|>"), tr = tokenizer_find(tk, "<|tool_response>");
    CHECK(eot == 106 && tr == 50, "<turn|> %d, <|tool_response> %d", eot, tr);
    CHECK(engine_is_stop_token(e, 1) && engine_is_stop_token(e, 106) && engine_is_stop_token(e, 50), "stop tokens");
    CHECK(!engine_is_stop_token(e, 2) && !engine_is_stop_token(e, 105) && !engine_is_stop_token(e, 600),
          "non-stop tokens");
    engine_destroy(e);
}

static void test_gemma4_dense(void) { run_variant("dense"); }
static void test_gemma4_moe(void) { run_variant("moe"); }
static void test_gemma4_e(void) { run_variant("e"); }

int main(void)
{
    RUN_TEST(test_gemma4_dense);
    RUN_TEST(test_gemma4_moe);
    RUN_TEST(test_gemma4_e);
    RUN_TEST(test_gemma4_bad_files);
    RUN_TEST(test_gemma4_chat);
    CHECK_EXIT();
}
