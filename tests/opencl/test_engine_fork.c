/* test_engine_fork.c — engine_seq_fork: continuations of one prompt prefilled once, their KV blocks
 * shared until a sequence writes into one (opencl/kv.c's copy on write).
 *
 * On the real Gemma 3 270M (models/gemma-3-270m-q4_k_m.gguf; a 2048 context and chunks of 64, so
 * its sliding layers keep rings of 18 blocks beside the paged full layers) and on the Gemma 4
 * fixture with sliding layers (tests/fixtures/gemma4_dense.gguf: window 8, chunks of 16, so the
 * ring is one block and wraps every 32 tokens):
 *   test_fork_first_row: a prompt less its last token prefilled once (45 tokens: the last block is
 *     shared half full), forked twice (a fork of a fork); the source, both forks and a sequence
 *     prefilled cold the same way step the last token in one step: every row equals the cold one's
 *     (TOL_ROW: one computation, so equal but for reduction order). Without int8 or tensor-core
 *     paths the rows are also held to a whole-prompt prefill (TOL_PATH: prefill against decode
 *     kernels).
 *   test_fork_diverges: then 40 (Gemma 4: 100) more steps, the source and one fork fed the greedy
 *     tokens, the other fork another token each step, each held to a cold twin fed the same tokens
 *     (so a write that reached a block the other sequence still reads shows); mid-way the source is
 *     freed while its forks live, and a fork of a fork that has its own blocks is taken and held to
 *     its twin; at the end every block is free again. */
#include "check.h"
#include "engine.h"
#include "logit_rows.h"
#include "sampler.h"
#include "tokenizer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL_ROW 1e-4   /* absolute: one row computed the same way twice */
#define TOL_PATH 5e-2  /* absolute: a prefill chunk's last row against a decode step's */
#define NPROMPT 45

static engine *E;
static uint32_t V;
static char err[512];
static int32_t prompt[NPROMPT];
static int n_steps;
static float *rows[6];

static double max_diff(const float *a, const float *b) { return rows_max_diff(a, b, V); }
static int32_t argmax(const float *x) { return rows_argmax(x, V); }

static void step(engine_item *it, int n, const char *what)
{
    CHECK(engine_step(E, it, n, err, sizeof err) == 0, "%s: %s", what, err);
}

/* a new sequence holding the prompt less its last token */
static int prefix(void)
{
    int s = engine_seq_new(E);
    engine_item it = { .seq = s, .tokens = prompt, .n_tokens = NPROMPT - 1 };
    CHECK(s >= 0, "no free sequence");
    step(&it, 1, "prefix");
    return s;
}

/* seqs[i] steps toks[i] with its row into rows[i] */
static void step_rows(const int *seqs, const int32_t *toks, int n, const char *what)
{
    engine_item it[6];
    memset(it, 0, sizeof it);
    for (int i = 0; i < n; i++) it[i] = (engine_item){ .seq = seqs[i], .tokens = &toks[i], .n_tokens = 1, .logits = rows[i] };
    step(it, n, what);
}

static int S_src, S_f1, S_f2, S_cold, S_twin; /* the sequences test_fork_diverges goes on with */

static void test_fork_first_row(void)
{
    S_src = prefix();
    S_f1 = engine_seq_fork(E, S_src);
    S_f2 = engine_seq_fork(E, S_f1);
    S_cold = prefix();
    S_twin = prefix();
    CHECK(S_f1 >= 0 && S_f2 >= 0 && engine_seq_len(E, S_f1) == NPROMPT - 1 && engine_seq_len(E, S_f2) == NPROMPT - 1,
          "forks %d %d of lengths %d %d", S_f1, S_f2, engine_seq_len(E, S_f1), engine_seq_len(E, S_f2));
    CHECK(engine_seq_fork(E, 99) == -1 && engine_seq_fork(E, -1) == -1, "a fork of no sequence");
    int seqs[5] = { S_src, S_f1, S_f2, S_cold, S_twin };
    int32_t last[5];
    for (int i = 0; i < 5; i++) last[i] = prompt[NPROMPT - 1];
    step_rows(seqs, last, 5, "last prompt token");
    for (int i = 0; i < 3; i++)
        CHECK(max_diff(rows[i], rows[3]) <= TOL_ROW, "sequence %d (source, fork, fork of the fork): max |delta| %.3g "
              "against the cold prefill", i, max_diff(rows[i], rows[3]));
    CHECK(max_diff(rows[4], rows[3]) <= TOL_ROW, "two cold prefills differ by %.3g", max_diff(rows[4], rows[3]));
    const engine_info *in = engine_get_info(E);
    if (!in->tensor_cores && !in->int8_decode) {
        int whole = engine_seq_new(E);
        engine_item it = { .seq = whole, .tokens = prompt, .n_tokens = NPROMPT, .logits = rows[5] };
        step(&it, 1, "whole prompt");
        CHECK(max_diff(rows[1], rows[5]) <= TOL_PATH && argmax(rows[1]) == argmax(rows[5]),
              "fork against a whole-prompt prefill: max |delta| %.3g, argmax %d / %d", max_diff(rows[1], rows[5]),
              argmax(rows[1]), argmax(rows[5]));
        engine_seq_free(E, whole);
    }
}

static void test_fork_diverges(void)
{
    /* the source, fork 2 and the cold one take the greedy path g; fork 1 and its twin another, o */
    int32_t g = argmax(rows[3]), o = (g + 7) % (int32_t)V;
    int f3 = -1, src = S_src, checked = 0;
    for (int st = 0; st < n_steps && !check_failures_here; st++) {
        if (st == n_steps / 3) { engine_seq_free(E, src); src = -1; }      /* the source goes, its forks stay */
        if (st == n_steps / 2) f3 = engine_seq_fork(E, S_f1);               /* a fork of a sequence with own blocks */
        int seqs[6] = { S_cold, S_f2, S_twin, S_f1 }, n = 4;
        int32_t toks[6] = { g, g, o, o };
        if (f3 >= 0) { seqs[n] = f3; toks[n++] = o; }
        if (src >= 0) { seqs[n] = src; toks[n++] = g; }
        char what[64];
        snprintf(what, sizeof what, "step %d", st);
        step_rows(seqs, toks, n, what);
        for (int i = 1; i < n; i++) {
            const float *want = rows[seqs[i] == S_f2 || seqs[i] == src ? 0 : 2];
            double d = max_diff(rows[i], want);
            CHECK(d <= TOL_ROW, "step %d: sequence %d (%s) differs from its cold twin by %.3g", st, seqs[i],
                  seqs[i] == S_f2 ? "fork of a fork" : seqs[i] == src ? "source" : seqs[i] == S_f1 ? "fork" : "late fork",
                  d);
            checked++;
        }
        g = argmax(rows[0]);
        o = argmax(rows[2]) == g ? (g + 3) % (int32_t)V : argmax(rows[2]);
    }
    printf("  %d rows held to their twins; positions up to %d\n", checked, engine_seq_len(E, S_cold));
    int all[5] = { S_cold, S_f1, S_f2, S_twin, f3 };
    for (int i = 0; i < 5; i++) engine_seq_free(E, all[i]);
    engine_kv_stats kv;
    engine_kv_usage(E, &kv);
    CHECK(kv.full_free == kv.full_blocks && kv.ring_free == kv.ring_blocks, "blocks held after freeing everything: "
          "%u of %u full, %u of %u ring", kv.full_blocks - kv.full_free, kv.full_blocks, kv.ring_blocks - kv.ring_free,
          kv.ring_blocks);
}

static int run_model(const char *path, const engine_opts *o, int steps)
{
    if (engine_load(&E, path, o, err, sizeof err)) {
        printf("FAIL engine_fork_load: %s: %s\n", path, err);
        return 1;
    }
    const engine_info *in = engine_get_info(E);
    V = in->n_vocab;
    n_steps = steps;
    printf("%s: ring of %u tokens\n", path, in->kv_ring_tokens);
    uint64_t rs = 0x5eed;
    for (int i = 0; i < NPROMPT; i++) {
        rs = rs * 6364136223846793005ull + 1442695040888963407ull;
        prompt[i] = i == 0 ? tokenizer_bos(engine_tokenizer(E)) : 3 + (int32_t)((rs >> 33) % (V < 760 ? V - 3 : 757));
    }
    for (int i = 0; i < 6; i++) rows[i] = malloc(V * sizeof(float));
    RUN_TEST(test_fork_first_row);
    RUN_TEST(test_fork_diverges);
    for (int i = 0; i < 6; i++) free(rows[i]);
    engine_destroy(E);
    return 0;
}

int main(void)
{
    engine_opts g3 = { .n_ctx = 2048, .max_seqs = 8, .max_batch_tokens = 64 };
    engine_opts g4 = { .n_ctx = 512, .max_seqs = 8, .max_batch_tokens = 16 };
    int rc = run_model("models/gemma-3-270m-q4_k_m.gguf", &g3, 40);
    rc |= run_model("tests/fixtures/gemma4_dense.gguf", &g4, 100);
    if (rc) return 1;
    CHECK_EXIT();
}
