/* test_engine_chunked.c — a prompt fed in chunks of arbitrary sizes, each step mixed with other sequences'
 * decode tokens (what the server's step budget makes: fcgi/step_plan.c), computes what the prompt fed whole
 * computes, and the decoding sequences beside it get the rows they get in decode-only steps.
 *
 * On the real Gemma 3 270M (models/gemma-3-270m-q4_k_m.gguf; forward chunks of 128 tokens, so one mixed step
 * of 152 tokens is two forwards; a ring of 640 tokens per sequence, not wrapped: the chunks' attention spans
 * are what differs). The prefix cache is off, so every sequence computes every token.
 *   test_chunks_equal_whole: P (300 tokens) prefilled whole, then 8 greedy decode steps: the references.
 *     Two short prompts B and C decode 16 steps in decode-only steps: their references. Then B and C again,
 *     and P fed in chunks of 1, 7, 33, 64, 5, 150, 31 and 9 tokens, each step with B's and C's decode token
 *     (the prompt's item first, between or last); then P's continuation decodes beside them. Every row is held
 *     to its reference within TOL with the same greedy choice: P's last prompt row and its decode rows, B's
 *     and C's rows in the mixed steps.
 * TOL: the same rows through other batch shapes (GEMM over other row counts, attention over other key
 * spans: the split-KV partition follows the batch's largest position). Measured on PoCL (CPU): largest
 * |delta| printed at the end; with int8 decode or tensor cores (GPU) decode-only steps take other kernels,
 * so rows are held to TOL_GPU, the int8 paths' distance from the float ones (opencl/engine_step.c). */
#include "check.h"
#include "engine.h"
#include "logit_rows.h"
#include "tokenizer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL 5e-2     /* absolute: a row through another batch shape (test_engine_fork's TOL_PATH) */
#define TOL_GPU 0.5  /* int8 activations in decode-only steps move Gemma 3's rows by up to 0.48 */
#define NP 300
#define NB 20        /* B's and C's prompts */
#define NDEC 8       /* P's decode steps */
#define NCHUNK 8

static const int CHUNKS[NCHUNK] = { 1, 7, 33, 64, 5, 150, 31, 9 };

static engine *E;
static uint32_t V;
static char err[512];
static int32_t P[NP], B[NB], C[NB];
static double tol, worst;

static void step(engine_item *it, int n, const char *what)
{
    CHECK(engine_step(E, it, n, err, sizeof err) == 0, "%s: %s", what, err);
}

static void held(const float *got, const float *want, const char *what, int k)
{
    double d = rows_max_diff(got, want, V);
    if (d > worst) worst = d;
    CHECK(d <= tol && rows_argmax(got, V) == rows_argmax(want, V), "%s %d: max |delta| %.3g, argmax %d / %d", what, k,
          d, rows_argmax(got, V), rows_argmax(want, V));
}

/* a new sequence with toks[0, n) fed whole, its last row into row */
static int prefilled(const int32_t *toks, int n, float *row, const char *what)
{
    int s = engine_seq_new(E);
    CHECK(s >= 0, "%s: no slot", what);
    engine_item it = { .seq = s, .tokens = toks, .n_tokens = n, .logits = row };
    if (s >= 0) step(&it, 1, what);
    return s;
}

static void test_chunks_equal_whole(void)
{
    enum { NSTEP = NCHUNK + NDEC };
    float *ref_p[NDEC + 1], *ref_b[NSTEP + 1], *ref_c[NSTEP + 1], *row[3];
    int32_t tok_p[NDEC + 1], tok_b[NSTEP + 1], tok_c[NSTEP + 1];
    for (int k = 0; k <= NSTEP; k++) {
        ref_b[k] = malloc(V * sizeof(float));
        ref_c[k] = malloc(V * sizeof(float));
        if (k <= NDEC) ref_p[k] = malloc(V * sizeof(float));
    }
    for (int i = 0; i < 3; i++) row[i] = malloc(V * sizeof(float));
    /* references: P whole and its decode alone; B and C in decode-only steps */
    int a = prefilled(P, NP, ref_p[0], "P whole");
    for (int k = 0; k < NDEC; k++) {
        tok_p[k] = rows_argmax(ref_p[k], V);
        engine_item it = { .seq = a, .tokens = &tok_p[k], .n_tokens = 1, .logits = ref_p[k + 1] };
        step(&it, 1, "P decode alone");
    }
    engine_seq_free(E, a);
    int b = prefilled(B, NB, ref_b[0], "B"), c = prefilled(C, NB, ref_c[0], "C");
    for (int k = 0; k < NSTEP; k++) {
        tok_b[k] = rows_argmax(ref_b[k], V);
        tok_c[k] = rows_argmax(ref_c[k], V);
        engine_item it[2] = { { .seq = b, .tokens = &tok_b[k], .n_tokens = 1, .logits = ref_b[k + 1] },
                              { .seq = c, .tokens = &tok_c[k], .n_tokens = 1, .logits = ref_c[k + 1] } };
        step(it, 2, "B and C decode");
    }
    engine_seq_free(E, b);
    engine_seq_free(E, c);
    /* again: P in chunks, B and C decoding beside it */
    b = prefilled(B, NB, row[1], "B again");
    c = prefilled(C, NB, row[2], "C again");
    held(row[1], ref_b[0], "B's prompt", 0);
    int x = engine_seq_new(E), fed = 0;
    CHECK(x >= 0 && b >= 0 && c >= 0, "no slot");
    for (int k = 0; k < NSTEP && !check_failures_here; k++) {
        int ch = k < NCHUNK, last = k == NCHUNK - 1, at = k % 3; /* where P's item goes among the three */
        engine_item ip = { .seq = x, .tokens = ch ? P + fed : &tok_p[k - NCHUNK], .n_tokens = ch ? CHUNKS[k] : 1,
                           .logits = !ch || last ? row[0] : NULL };
        engine_item ib = { .seq = b, .tokens = &tok_b[k], .n_tokens = 1, .logits = row[1] };
        engine_item ic = { .seq = c, .tokens = &tok_c[k], .n_tokens = 1, .logits = row[2] };
        engine_item it[3] = { at == 0 ? ip : ib, at == 1 ? ip : at == 0 ? ib : ic, at == 2 ? ip : ic };
        step(it, 3, ch ? "a chunk of P with two decode tokens" : "three decode tokens");
        if (ch) fed += CHUNKS[k];
        held(row[1], ref_b[k + 1], "B's decode row, step", k);
        held(row[2], ref_c[k + 1], "C's decode row, step", k);
        if (last) held(row[0], ref_p[0], "P's last prompt row after chunks up to", fed);
        if (!ch) held(row[0], ref_p[k - NCHUNK + 1], "P's decode row", k - NCHUNK);
    }
    CHECK(fed == NP && engine_seq_len(E, x) == NP + NDEC, "fed %d, length %d", fed, engine_seq_len(E, x));
    engine_seq_free(E, x);
    engine_seq_free(E, b);
    engine_seq_free(E, c);
    for (int k = 0; k <= NSTEP; k++) {
        free(ref_b[k]);
        free(ref_c[k]);
        if (k <= NDEC) free(ref_p[k]);
    }
    for (int i = 0; i < 3; i++) free(row[i]);
}

int main(void)
{
    engine_opts o = { .n_ctx = 1024, .max_seqs = 4, .max_batch_tokens = 128, .no_prefix_cache = 1 };
    if (engine_load(&E, "models/gemma-3-270m-q4_k_m.gguf", &o, err, sizeof err)) {
        printf("FAIL engine_chunked_load: %s\n", err);
        return 1;
    }
    const engine_info *in = engine_get_info(E);
    V = in->n_vocab;
    tol = in->int8_decode || in->tensor_cores ? TOL_GPU : TOL;
    uint64_t rs = 0xc4a2;
    for (int i = 0; i < NP; i++) {
        rs = rs * 6364136223846793005ull + 1442695040888963407ull;
        P[i] = i == 0 ? tokenizer_bos(engine_tokenizer(E)) : 3 + (int32_t)((rs >> 33) % 757);
        if (i < NB) B[i] = i == 0 ? P[0] : 3 + (int32_t)((rs >> 13) % 757);
        if (i < NB) C[i] = i == 0 ? P[0] : 3 + (int32_t)((rs >> 23) % 757);
    }
    RUN_TEST(test_chunks_equal_whole);
    printf("  largest |delta| of a row against its reference: %.3g (tolerance %.3g)\n", worst, tol);
    engine_destroy(E);
    CHECK_EXIT();
}
