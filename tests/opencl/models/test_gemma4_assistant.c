/* test_gemma4_assistant.c — the Gemma 4 MTP drafter ("gemma4-assistant", docs/design-mtp-drafter.md) as
 * llama.cpp's converter writes it (tests/fixtures/gemma4_mtp_assistant.gguf, tools/gen_gemma4_assistant_
 * fixtures.py), beside its target, the dense fixture (tests/fixtures/gemma4_dense.gguf):
 *   - it loads as the target's drafter: its shape, and the target layers whose cache it reads (the last
 *     sliding and the last full one) as tests/golden/gemma4_mtp.json records them;
 *   - alone it is refused (engine_load, model_load) with a line saying it is a drafter; beside a target whose
 *     cache it cannot read (the E-like fixture: one KV head where it expects two) or of another architecture
 *     (Gemma 3), and a model file given as a drafter, are refused naming the mismatch;
 *   - broken copies fail naming the problem: a missing projection, a layer with a K projection of its own,
 *     an output width equal to its own, KV heads or a RoPE base that differ from the target's. */
#include "check.h"
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

static char *slurp(const char *path, long *len)
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
    *len = n;
    return s;
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
    long n;
    char *buf = slurp(DRAFTER, &n);
    CHECK(buf != NULL, "no fixture %s", DRAFTER);
    if (!buf) return;
    char *hit = NULL;
    size_t fl = strlen(find);
    for (long i = 0; i + (long)fl <= n && !hit; i++)
        if (memcmp(buf + i, find, fl) == 0) hit = buf + i;
    CHECK(hit != NULL, "%s: '%s' not in the drafter", what, find);
    if (hit) {
        memcpy(hit + after, patch, plen);
        char path[] = "/tmp/clgemma_test_gemma4_assistant_bad.gguf";
        FILE *o = fopen(path, "wb");
        CHECK(o && fwrite(buf, 1, (size_t)n, o) == (size_t)n, "cannot write %s", path);
        if (o) fclose(o);
        held d;
        int rc = hold_drafter(&d, path, t);
        CHECK(rc != 0, "%s: loaded", what);
        CHECK(rc == 0 || strstr(err, want), "%s: error '%s' lacks '%s'", what, err, want);
        release(&d);
        remove(path);
    }
    free(buf);
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

int main(void)
{
    if (rt_create(&RT, NULL, 0, err, sizeof err)) { printf("FAIL setup: rt_create: %s\n", err); return 1; }
    RUN_TEST(test_pair);
    RUN_TEST(test_refused);
    RUN_TEST(test_bad_files);
    rt_destroy(&RT);
    CHECK_EXIT();
}
