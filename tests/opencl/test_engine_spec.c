/* test_engine_spec.c — speculative decoding (opencl/spec.c, engine_item.ids_all, engine_seq_truncate) on
 * the real Gemma 3 270M (models/gemma-3-270m-q4_k_m.gguf; forward chunks of 64 tokens, a context of 2,048
 * so its sliding-window layers (window 512) keep rings of 512 + 64 tokens that wrap).
 *   test_greedy_equals_plain: prompt-lookup drafts of up to 4 and 8 tokens, verified and rolled back,
 *     give plain greedy decoding's tokens exactly (reference: the same engine decoding one token a step);
 *     on a code prompt and a repeated list; drafts are taken and some rejected.
 *   test_truncate_rows: a sequence stepped past a whole KV block and past its ring's wrap, cut back and
 *     stepped on, gives the rows a sequence that never saw the cut tokens gives (TOL: the same rows
 *     through other batch shapes, test_engine_chunked's); a new sequence then reuses the cut sequence's
 *     prefix blocks (the chain rebuilt from its tokens) with the cold rows.
 *     Past the wrap, a cut of more than the ring's spare is refused.
 *   test_errors: truncating to its length or more, an unknown sequence and ids_all with a sampling sampler
 *     fail with a message and change nothing; spec_begin without a sampler fails. */
#include "check.h"
#include "engine.h"
#include "logit_rows.h"
#include "sampler.h"
#include "spec.h"
#include "spec_decode.h"
#include "tokenizer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODEL "models/gemma-3-270m-q4_k_m.gguf"
#define TOL 5e-2
#define NGEN 24

static engine *E;
static uint32_t V;
static char err[512];

static int encode(const char *text, int32_t *ids, int cap)
{
    return tokenizer_encode(engine_tokenizer(E), text, strlen(text), 1, 0, ids, cap);
}

static void test_greedy_equals_plain(void)
{
    const char *prompts[] = {
        "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n\ndef mul(a, b):\n    return a * b\n\n"
        "# the same functions again:\ndef add(a, b):",
        "Monday, Tuesday, Wednesday, Thursday, Friday. Monday, Tuesday, Wednesday,",
    };
    int drafted = 0, rejected = 0, accepted = 0;
    for (size_t p = 0; p < sizeof prompts / sizeof *prompts; p++) {
        int32_t ids[256], plain[NGEN], spec[NGEN];
        int n = encode(prompts[p], ids, 256);
        spec_decode(E, ids, n, 0, NGEN, plain, NULL);
        for (int k = 4; k <= (p ? 4 : 8); k += 4) {
            spec_run st;
            spec_decode(E, ids, n, k, NGEN, spec, &st);
            int first = -1;
            for (int i = 0; i < NGEN && first < 0; i++)
                if (spec[i] != plain[i]) first = i;
            CHECK(first < 0, "prompt %zu, drafts of %d: token %d differs (%d, plain %d)", p, k, first,
                  first >= 0 ? spec[first] : 0, first >= 0 ? plain[first] : 0);
            printf("prompt %zu, k %d: %d steps, %d drafted, %d accepted\n", p, k, st.steps, st.drafted, st.accepted);
            drafted += st.drafted;
            accepted += st.accepted;
            rejected += st.drafted - st.accepted;
            spec_end(&st);
        }
    }
    CHECK(accepted > 0 && rejected > 0, "drafts: %d accepted, %d rejected (both needed)", accepted, rejected);
}

/* the last row after stepping toks whole on a fresh sequence */
static int fresh_row(const int32_t *toks, int n, float *row)
{
    int s = engine_seq_new(E);
    engine_item it = { .seq = s, .tokens = toks, .n_tokens = n, .logits = row };
    int rc = engine_step(E, &it, 1, err, sizeof err);
    CHECK(rc == 0, "fresh: %s", err);
    return s;
}

static void held(const float *got, const float *want, const char *what)
{
    double d = rows_max_diff(got, want, V);
    CHECK(d <= TOL && rows_argmax(got, V) == rows_argmax(want, V), "%s: max |delta| %.3g, argmax %d / %d", what, d,
          rows_argmax(got, V), rows_argmax(want, V));
}

static void test_truncate_rows(void)
{
    enum { N = 700, CUT = 9 };
    int32_t *t = malloc(sizeof(int32_t) * (N + 64));
    int32_t base[64];
    int nb = encode("In a quiet town by the sea there lived an old clockmaker who", base, 64);
    for (int i = 0; i < N + 64; i++) t[i] = i < nb ? base[i] : base[1 + (i * 7) % (nb - 1)];
    float *got = malloc(V * 4), *got2 = malloc(V * 4), *want = malloc(V * 4);
    int32_t junk[CUT];
    for (int i = 0; i < CUT; i++) junk[i] = 1000 + 37 * i;
    /* short: 60 tokens, 9 more cross the block at 64, cut back to 60, then 4 of t */
    for (int pass = 0; pass < 2; pass++) {
        int n0 = pass ? N : 60;
        int s = fresh_row(t, n0, NULL);
        engine_item j = { .seq = s, .tokens = junk, .n_tokens = CUT };
        CHECK(engine_step(E, &j, 1, err, sizeof err) == 0, "junk: %s", err);
        if (pass) /* past the wrap a ring keeps 64 tokens more than its window: 100 is too many */
            CHECK(engine_seq_truncate(E, s, n0 + CUT - 100, t, err, sizeof err) != 0 && strstr(err, "ring"),
                  "a cut of 100 tokens past a 576-token ring's wrap accepted: %s", err);
        CHECK(engine_seq_truncate(E, s, n0, t, err, sizeof err) == 0, "truncate: %s", err);
        CHECK(engine_seq_len(E, s) == n0, "length %d after the cut, want %d", engine_seq_len(E, s), n0);
        engine_item c = { .seq = s, .tokens = t + n0, .n_tokens = 4, .logits = got };
        CHECK(engine_step(E, &c, 1, err, sizeof err) == 0, "after the cut: %s", err);
        engine_seq_free(E, s);
        /* the cut sequence's blocks stay registered under its tokens (block 1, 32-63, was completed by the
         * junk, cut, and completed again by t: under t's chain only if the cut rebuilt it); the references
         * come after, so only the cut sequence registered them */
        int cached = 0, p = engine_seq_new_prefix(E, t, n0 + 5, &cached);
        engine_item q = { .seq = p, .tokens = t + cached, .n_tokens = n0 + 5 - cached, .logits = got2 };
        CHECK(engine_step(E, &q, 1, err, sizeof err) == 0, "prefix reuse: %s", err);
        if (!pass) CHECK(cached == 64, "prefix reuse of %d tokens, want both blocks (64)", cached);
        engine_seq_free(E, p);
        int r = fresh_row(t, n0 + 4, want);
        held(got, want, pass ? "past the ring's wrap" : "across a block");
        engine_seq_free(E, r);
        r = fresh_row(t, n0 + 5, want);
        held(got2, want, "prefix reuse after a cut");
        engine_seq_free(E, r);
    }
    free(t); free(got); free(got2); free(want);
}

static void test_errors(void)
{
    int32_t t[8] = { 2, 651, 1234, 235, 9999, 77, 88, 99 };
    int s = fresh_row(t, 8, NULL);
    CHECK(engine_seq_truncate(E, s, 8, t, err, sizeof err) != 0 && err[0], "truncate to its length accepted");
    CHECK(engine_seq_truncate(E, s, 9, t, err, sizeof err) != 0, "truncate past its length accepted");
    CHECK(engine_seq_truncate(E, 77, 1, t, err, sizeof err) != 0, "unknown sequence accepted");
    CHECK(engine_seq_len(E, s) == 8, "a refused cut changed the length to %d", engine_seq_len(E, s));
    sampler_params p;
    sampler_params_default(&p);
    p.temperature = 0.8f;
    sampler *hot = NULL;
    if (sampler_create(&hot, &p, V)) return;
    int32_t ids[2];
    engine_item it = { .seq = s, .tokens = t, .n_tokens = 2, .smp = hot, .ids_all = ids };
    CHECK(engine_step(E, &it, 1, err, sizeof err) != 0 && strstr(err, "ids_all"), "ids_all with sampling: %s", err);
    CHECK(engine_seq_len(E, s) == 8, "a refused step changed the length to %d", engine_seq_len(E, s));
    sampler_destroy(hot);
    spec_run r;
    CHECK(spec_begin(&r, t, 8, 4, NULL) != 0 && r.err[0], "spec_begin without a sampler accepted");
    engine_seq_free(E, s);
}

int main(void)
{
    engine_opts o = { .n_ctx = 2048, .max_seqs = 4, .max_batch_tokens = 64 };
    if (engine_load(&E, MODEL, &o, err, sizeof err)) {
        printf("FAIL engine_spec_load: %s\n", err);
        return 1;
    }
    V = engine_get_info(E)->n_vocab;
    RUN_TEST(test_greedy_equals_plain);
    RUN_TEST(test_truncate_rows);
    RUN_TEST(test_errors);
    engine_destroy(E);
    CHECK_EXIT();
}
