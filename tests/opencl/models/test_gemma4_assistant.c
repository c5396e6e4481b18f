/* test_gemma4_assistant.c — the Gemma 4 MTP drafter ("gemma4-assistant", docs/design-mtp-drafter.md) as
 * llama.cpp's converter writes it (tests/fixtures/gemma4_mtp_assistant.gguf, tools/gen_gemma4_assistant_
 * fixtures.py), beside its target, the dense fixture (tests/fixtures/gemma4_dense.gguf):
 *   - it loads as the target's drafter: its shape, and the target layers whose cache it reads (the last
 *     sliding and the last full one) as tests/golden/gemma4_mtp.json records them;
 *   - alone it is refused (engine_load, model_load) with a line saying it is a drafter; beside a target whose
 *     cache it cannot read (the E-like fixture: one KV head where it expects two) or of another architecture
 *     (Gemma 3), and a model file given as a drafter, are refused naming the mismatch;
 *   - broken copies fail naming the problem: a missing projection, a layer with a K projection of its own,
 *     an output width equal to its own, KV heads or a RoPE base that differ from the target's;
 *   - drafting (engine_draft, opts.draft_path) against tests/golden/gemma4_mtp.*: for each context, the target
 *     prefilled, its greedy token, then 4 chained drafter steps. References: transformers float32 and the
 *     float64 numpy reference (tools/ref_gemma4_assistant.py); tolerance TOL_REL x the golden logits' range
 *     (f32 weights, the target's f16 KV cache); drafted tokens equal the references' where their top-2 gap
 *     exceeds twice the measured delta. The same drafts come from all contexts in one call, from rows kept by
 *     a verification step then cut back (engine_seq_truncate), and a fork (no rows of its own) drafts none. */
#include "check.h"
#include "fixture_io.h"
#include <json-c/json.h>
#include <math.h>
#include "engine.h"
#include "gguf.h"
#include "model.h"
#include "runtime.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DRAFTER "tests/fixtures/gemma4_mtp_assistant.gguf"
#define TARGET "tests/fixtures/gemma4_dense.gguf"

static cl_runtime RT;
static char err[1024];

/* a loaded model and the file it came from (the mapping lives as long as the model) */
typedef struct held { gguf_file *f; model m; int ok; } held;

static int hold_target(held *h, const char *path)
{
    memset(h, 0, sizeof *h);
    if (gguf_open(&h->f, path, err, sizeof err)) return -1;
    if (model_load(&h->m, h->f, &RT, NULL, err, sizeof err)) return -1;
    h->ok = 1;
    return 0;
}

static int hold_drafter(held *h, const char *path, const held *target)
{
    memset(h, 0, sizeof *h);
    if (gguf_open(&h->f, path, err, sizeof err)) return -1;
    if (model_load_drafter(&h->m, h->f, &target->m, &RT, err, sizeof err)) return -1;
    h->ok = 1;
    return 0;
}

static void release(held *h)
{
    if (h->ok) model_free(&h->m);
    if (h->f) gguf_close(h->f);
    memset(h, 0, sizeof *h);
}

static void test_pair(void)
{
    held t, d;
    CHECK(hold_target(&t, TARGET) == 0, "target: %s", err);
    CHECK(!t.ok || hold_drafter(&d, DRAFTER, &t) == 0, "drafter: %s", err);
    if (t.ok && d.ok) {
        const model_hparams *hp = &d.m.hp;
        CHECK(!strcmp(hp->arch, "gemma4-assistant"), "arch %s", hp->arch);
        CHECK(hp->n_layer == 2 && hp->n_embd == 128 && hp->n_vocab == t.m.hp.n_vocab && hp->window == 8,
              "layers %u, embd %u, vocab %u (target %u), window %u", hp->n_layer, hp->n_embd, hp->n_vocab,
              t.m.hp.n_vocab, hp->window);
        CHECK(model_layer_window(&d.m, 0) == 8 && model_layer_window(&d.m, 1) == 0, "windows %u %u",
              model_layer_window(&d.m, 0), model_layer_window(&d.m, 1));
        CHECK(hp->embd_scale == 16.0f, "input embedding scale %g: sqrt of the target's width", hp->embd_scale);
        CHECK(d.m.output.buf == d.m.tok_embd.buf && d.m.kv_dims == NULL, "tied head, no cache of its own");
        model_kv_ref r[MODEL_KV_KINDS];
        t.m.arch->kv_export(&t.m, r);
        CHECK(r[MODEL_KV_SLIDING].layer == 1 && r[MODEL_KV_FULL].layer == 2,
              "reads target layers %d (sliding) and %d (full), expected 1 and 2", r[MODEL_KV_SLIDING].layer,
              r[MODEL_KV_FULL].layer);
        CHECK(r[MODEL_KV_SLIDING].n_kv == 2 && r[MODEL_KV_SLIDING].head_dim == 32 && r[MODEL_KV_FULL].n_kv == 1 &&
              r[MODEL_KV_FULL].head_dim == 64 && r[MODEL_KV_SLIDING].window == 8 && r[MODEL_KV_FULL].window == 0,
              "target caches %u x %u (window %u), %u x %u (window %u)", r[MODEL_KV_SLIDING].n_kv,
              r[MODEL_KV_SLIDING].head_dim, r[MODEL_KV_SLIDING].window, r[MODEL_KV_FULL].n_kv,
              r[MODEL_KV_FULL].head_dim, r[MODEL_KV_FULL].window);
        CHECK(d.m.weight_bytes > 0, "weights on the device");
    }
    if (t.ok) release(&d);
    release(&t);
}

static void test_refused(void)
{
    /* alone: through the engine and through the model layer */
    engine *e = NULL;
    int rc = engine_load(&e, DRAFTER, NULL, err, sizeof err);
    CHECK(rc != 0 && strstr(err, "'gemma4-assistant' is an MTP drafter of gemma4 models"), "engine_load: %d '%s'",
          rc, err);
    if (!rc) engine_destroy(e);
    held d = { 0 };
    CHECK(gguf_open(&d.f, DRAFTER, err, sizeof err) == 0, "%s", err);
    if (d.f) {
        model m;
        rc = model_load(&m, d.f, &RT, NULL, err, sizeof err);
        CHECK(rc != 0 && strstr(err, "load it beside one"), "model_load: %d '%s'", rc, err);
        if (!rc) model_free(&m);
    }
    release(&d);
    /* beside a target whose sliding cache has one KV head (E-like fixture: layer 2 reads layer 0's) */
    held t;
    CHECK(hold_target(&t, "tests/fixtures/gemma4_e.gguf") == 0, "E target: %s", err);
    if (t.ok) {
        rc = hold_drafter(&d, DRAFTER, &t);
        CHECK(rc != 0 && strstr(err, "drafter: layer 0 (sliding) has 2 kv heads x 32, rope dims 32; the target's "
                                     "layer 0 it reads has 1 x 32"), "E target: %d '%s'", rc, err);
        release(&d);
        /* a model file given as a drafter */
        rc = hold_drafter(&d, TARGET, &t);
        CHECK(rc != 0 && strstr(err, "a 'gemma4' file is a model, not an MTP drafter"), "model as drafter: '%s'", err);
        release(&d);
    }
    release(&t);
    /* beside another architecture */
    const char *g3 = "models/gemma-3-270m-q4_k_m.gguf";
    FILE *probe = fopen(g3, "rb");
    if (probe) {
        fclose(probe);
        CHECK(hold_target(&t, g3) == 0, "gemma3: %s", err);
        if (t.ok) {
            rc = hold_drafter(&d, DRAFTER, &t);
            CHECK(rc != 0 && strstr(err, "drafts for gemma4 models, the target is 'gemma3'"), "gemma3: '%s'", err);
            release(&d);
        }
        release(&t);
    }
}

/* the drafter with the bytes at (first occurrence of find) + after replaced by patch, beside t: must fail
 * with want in the error */
static void bad_drafter(const held *t, const char *what, const char *find, size_t after, const void *patch,
                        size_t plen, const char *want)
{
    const char *why, *path = "/tmp/clgemma_test_gemma4_assistant_bad.gguf";
    int rc = patch_copy(DRAFTER, find, after, patch, plen, path, &why);
    CHECK(rc == 0, "%s: %s ('%s' in the drafter)", what, why, find);
    if (!rc) {
        held d;
        rc = hold_drafter(&d, path, t);
        CHECK(rc != 0, "%s: loaded", what);
        CHECK(rc == 0 || strstr(err, want), "%s: error '%s' lacks '%s'", what, err, want);
        release(&d);
    }
    remove(path);
}

static void test_bad_files(void)
{
    held t;
    CHECK(hold_target(&t, TARGET) == 0, "target: %s", err);
    if (!t.ok) return;
    bad_drafter(&t, "missing pre-projection", "nextn.pre_projection.weight", 0, "x", 1,
                "missing tensor 'nextn.pre_projection.weight' (expected shape [512, 128])");
    bad_drafter(&t, "own K projection", "blk.0.attn_q.weight", 11, "k", 1,
                "tensor 'blk.0.attn_k.weight': a gemma4-assistant layer has no K/V of its own");
    /* a key is its name then its value type (u32) and value; an ARRAY holds element type (u32), count (u64) */
    uint32_t own = 128, other = 224;
    bad_drafter(&t, "output width = own width", "gemma4-assistant.embedding_length_out", 37 + 4, &own, 4,
                "embedding_length_out 128: the target's hidden size, a multiple of 32 and not the drafter's own");
    bad_drafter(&t, "output width not the target's", "gemma4-assistant.embedding_length_out", 37 + 4, &other, 4,
                "tensor 'nextn.pre_projection.weight' has shape [512, 128], expected [448, 128]");
    int32_t four = 4;
    bad_drafter(&t, "KV heads", "gemma4-assistant.attention.head_count_kv", 40 + 16, &four, 4,
                "drafter: layer 0 (sliding) has 4 kv heads x 32, rope dims 32; the target's layer 1 it reads has "
                "2 x 32");
    float base = 20000.0f;
    bad_drafter(&t, "RoPE base", "gemma4-assistant.rope.freq_base_swa", 35 + 4, &base, 4,
                "drafter: layer 0 (sliding) has RoPE base 20000, the target's 10000");
    release(&t);
}

#define TOL_REL 1e-3 /* of the golden logit range */
#define NSTEP 4
#define MAXCASE 8

typedef struct mtp_case { int32_t ctx[64]; int n, target, drafted[NSTEP]; double gap[NSTEP]; } mtp_case;

static int read_cases(mtp_case *c, int *nc, float **logits, uint32_t V)
{
    json_object *j = json_object_from_file("tests/golden/gemma4_mtp.json"), *cases, *v;
    if (!j || !json_object_object_get_ex(j, "cases", &cases)) return -1;
    *nc = (int)json_object_array_length(cases);
    if (*nc > MAXCASE) { json_object_put(j); return -1; }
    for (int i = 0; i < *nc; i++) {
        json_object *o = json_object_array_get_idx(cases, (size_t)i), *ctx, *dr, *gap;
        if (!json_object_object_get_ex(o, "context", &ctx) || !json_object_object_get_ex(o, "drafted", &dr) ||
            !json_object_object_get_ex(o, "gap", &gap) || !json_object_object_get_ex(o, "target_token", &v)) {
            json_object_put(j);
            return -1;
        }
        c[i].n = (int)json_object_array_length(ctx);
        c[i].target = json_object_get_int(v);
        for (int k = 0; k < c[i].n && k < 64; k++) c[i].ctx[k] = json_object_get_int(json_object_array_get_idx(ctx, (size_t)k));
        for (int k = 0; k < NSTEP; k++) {
            c[i].drafted[k] = json_object_get_int(json_object_array_get_idx(dr, (size_t)k));
            c[i].gap[k] = json_object_get_double(json_object_array_get_idx(gap, (size_t)k));
        }
    }
    json_object_put(j);
    size_t nf = 2 * (size_t)*nc * NSTEP * V;
    long len;
    char *raw = slurp("tests/golden/gemma4_mtp.logits", &len);
    if (!raw || (size_t)len != nf * 4) { free(raw); return -1; }
    *logits = (float *)(void *)raw;
    return 0;
}

static double max_abs(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > m || d != d) m = d;
    }
    return m;
}

static int argmax_row(const float *x, uint32_t n)
{
    int b = 0;
    for (uint32_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = (int)i;
    return b;
}

/* the context prefilled on a new sequence; its last row's greedy token */
static int prefill(engine *e, const mtp_case *c, int *seq, float *row, uint32_t V)
{
    *seq = engine_seq_new(e);
    engine_item it = { .seq = *seq, .tokens = c->ctx, .n_tokens = c->n, .logits = row };
    if (engine_step(e, &it, 1, err, sizeof err)) return -1;
    return argmax_row(row, V);
}

static void test_draft_golden(void)
{
    static const char *const settings[] = { "MMQ8_MIN_ELEMS=0" };
    /* chunks of 64: the sliding rings keep room to cut a verification back (kv_truncate) */
    engine_opts opts = { .n_ctx = 128, .max_seqs = 8, .max_batch_tokens = 64, .settings = settings, .n_settings = 1,
                         .draft_path = DRAFTER };
    engine *e = NULL;
    CHECK(engine_load(&e, TARGET, &opts, err, sizeof err) == 0, "%s + %s: %s", TARGET, DRAFTER, err);
    if (!e) return;
    const engine_info *in = engine_get_info(e);
    CHECK(!strcmp(in->draft_arch, "gemma4-assistant") && in->draft_layers == 2 && in->draft_embd == 128 &&
          in->draft_bytes > 0, "info: drafter %s, %u layers, width %u, %llu bytes", in->draft_arch, in->draft_layers,
          in->draft_embd, (unsigned long long)in->draft_bytes);
    uint32_t V = in->n_vocab;
    mtp_case c[MAXCASE];
    int nc = 0;
    float *gold = NULL;
    CHECK(read_cases(c, &nc, &gold, V) == 0, "tests/golden/gemma4_mtp.{json,logits} unreadable or for another vocabulary");
    if (!gold) { engine_destroy(e); return; }
    float *row = malloc(sizeof(float) * V * 3), *lg = malloc(sizeof(float) * NSTEP * V * MAXCASE);
    double worst_hf = 0, worst_ref = 0, worst_batch = 0, range = 0;
    int checked = 0, seqs[MAXCASE];
    int32_t out[MAXCASE][NSTEP];
    for (int i = 0; i < nc; i++) {
        const float *hf = gold + (size_t)i * NSTEP * V, *ref = gold + ((size_t)nc + i) * NSTEP * V;
        float mn = hf[0], mx = hf[0];
        for (size_t k = 0; k < (size_t)NSTEP * V; k++) { if (hf[k] < mn) mn = hf[k]; if (hf[k] > mx) mx = hf[k]; }
        if (mx - mn > range) range = mx - mn;
        int tok = prefill(e, &c[i], &seqs[i], row, V);
        CHECK(tok == c[i].target, "case %d: the target's greedy token %d, golden %d (%s)", i, tok, c[i].target, err);
        engine_draft_item d = { .seq = seqs[i], .token = c[i].target, .k = NSTEP, .out = out[i],
                                .logits = lg + (size_t)i * NSTEP * V };
        CHECK(engine_draft(e, &d, 1, err, sizeof err) == 0 && d.n == NSTEP, "case %d: draft %d tokens: %s", i, d.n, err);
        double dh = max_abs(d.logits, hf, (size_t)NSTEP * V), dr = max_abs(d.logits, ref, (size_t)NSTEP * V);
        if (dh > worst_hf || dh != dh) worst_hf = dh;
        if (dr > worst_ref || dr != dr) worst_ref = dr;
        for (int k = 0; k < NSTEP; k++) {
            if (c[i].gap[k] <= 2 * (dh > dr ? dh : dr)) break; /* a near tie: later steps follow another token */
            CHECK(out[i][k] == c[i].drafted[k], "case %d step %d: drafted %d, references %d (gap %.3g)", i, k,
                  out[i][k], c[i].drafted[k], c[i].gap[k]);
            checked++;
        }
    }
    double tol = TOL_REL * range;
    CHECK(worst_hf <= tol, "drafter logits: max |delta| %.3g vs transformers > %.3g", worst_hf, tol);
    CHECK(worst_ref <= tol, "drafter logits: max |delta| %.3g vs the float64 reference > %.3g", worst_ref, tol);
    /* all contexts in one call: the same drafts */
    engine_draft_item all[MAXCASE];
    int32_t out2[MAXCASE][NSTEP];
    float *lg2 = malloc(sizeof(float) * NSTEP * V * MAXCASE);
    for (int i = 0; i < nc; i++)
        all[i] = (engine_draft_item){ .seq = seqs[i], .token = c[i].target, .k = NSTEP - i % 2, .out = out2[i],
                                      .logits = lg2 + (size_t)i * NSTEP * V };
    CHECK(engine_draft(e, all, nc, err, sizeof err) == 0, "batched draft: %s", err);
    for (int i = 0; i < nc; i++) {
        CHECK(all[i].n == NSTEP - i % 2, "batched case %d: %d tokens", i, all[i].n);
        for (int k = 0; k < all[i].n; k++)
            CHECK(out2[i][k] == out[i][k], "batched case %d step %d: %d, alone %d", i, k, out2[i][k], out[i][k]);
        double db = max_abs(lg2 + (size_t)i * NSTEP * V, lg + (size_t)i * NSTEP * V, (size_t)all[i].n * V);
        if (db > worst_batch || db != db) worst_batch = db;
    }
    CHECK(worst_batch <= tol, "batched vs alone: max |delta| %.3g > %.3g", worst_batch, tol);
    /* rows kept by a verification: the last case's context fed as its head, then 2 tokens and a wrong third
     * in one step (as a draft), cut back to the context: the draft starts from the row of its last token */
    const mtp_case *L = &c[nc - 1];
    int sq = engine_seq_new(e);
    engine_item head = { .seq = sq, .tokens = L->ctx, .n_tokens = L->n - 2 };
    int32_t feed[3] = { L->ctx[L->n - 2], L->ctx[L->n - 1], (L->target + 1) % (int32_t)V };
    engine_item ver = { .seq = sq, .tokens = feed, .n_tokens = 3, .logits = row, .logits_all = 1, .draft = 1 };
    int32_t out3[NSTEP], out4[NSTEP];
    CHECK(engine_step(e, &head, 1, err, sizeof err) == 0 && engine_step(e, &ver, 1, err, sizeof err) == 0 &&
          engine_seq_truncate(e, sq, L->n, L->ctx, err, sizeof err) == 0, "verification step: %s", err);
    engine_draft_item dv = { .seq = sq, .token = L->target, .k = NSTEP, .out = out3 };
    CHECK(engine_draft(e, &dv, 1, err, sizeof err) == 0 && dv.n == NSTEP, "draft after the cut: %d, %s", dv.n, err);
    for (int k = 0; k < dv.n; k++)
        CHECK(out3[k] == out[nc - 1][k], "after a cut, step %d: %d, from a prefill %d", k, out3[k], out[nc - 1][k]);
    /* a fork holds the cache but no rows of its own: nothing drafted until it steps */
    int fk = engine_seq_fork(e, sq);
    engine_draft_item df = { .seq = fk, .token = L->target, .k = NSTEP, .out = out4 };
    CHECK(fk >= 0 && engine_draft(e, &df, 1, err, sizeof err) == 0 && df.n == 0, "fork: %d tokens drafted (%s)", df.n,
          err);
    /* bad items are refused */
    engine_draft_item bad = { .seq = sq, .token = (int32_t)V, .k = 1, .out = out4 };
    CHECK(engine_draft(e, &bad, 1, err, sizeof err) != 0 && strstr(err, "out of range"), "bad token: '%s'", err);
    bad = (engine_draft_item){ .seq = sq, .token = 1, .k = 17, .out = out4 };
    CHECK(engine_draft(e, &bad, 1, err, sizeof err) != 0 && strstr(err, "k 17"), "k 17: '%s'", err);
    printf("  drafter max|d| %.2e vs transformers-f32, %.2e vs ref-f64 (tol %.2e, range %.1f); batch-vs-alone %.2e; "
           "%d/%d drafted tokens checked\n", worst_hf, worst_ref, tol, range, worst_batch, checked, nc * NSTEP);
    free(row); free(lg); free(lg2); free(gold);
    engine_destroy(e);
}

int main(void)
{
    if (rt_create(&RT, NULL, 0, err, sizeof err)) { printf("FAIL setup: rt_create: %s\n", err); return 1; }
    RUN_TEST(test_pair);
    RUN_TEST(test_refused);
    RUN_TEST(test_bad_files);
    RUN_TEST(test_draft_golden);
    rt_destroy(&RT);
    CHECK_EXIT();
}
