/* test_gemma4v.c — the Gemma 4 vision projector ("gemma4v" mmproj, docs/design-vision.md 4.3) as llama.cpp's
 * converter writes it (tests/fixtures/gemma4_vision_mmproj{,_f16}.gguf, tools/gen_gemma4_vision_fixtures.py),
 * beside its text model (tests/fixtures/gemma4_dense.gguf, the fixture's text part less its four image tokens,
 * which only the loader's pair check reads here):
 *   - the pair loads (f32, f16, and f32 with clamps): the hyperparameters tests/golden/gemma4_vision.json records (the
 *     converter's keys and transformers' defaults), and the device buffers hold the file's bytes; through
 *     engine_load (opts.mmproj_path) too, its info naming the projector;
 *   - refusals, each one line naming the file and the value: a text model given as the mmproj and the mmproj
 *     given as the model; a projector type clgemma has no row for (gemma4uv, by either key); a
 *     projection_dim that is not the text width; broken copies: a missing tensor, a wrong shape, std_bias
 *     without std_scale, an unknown tensor, a patch kernel of another type, head dims the 2-D RoPE cannot
 *     take, a zero image_std, another general.type, a clamp of two values or NaN; the file cut short at many lengths and each header byte
 *     flipped (one line or a load, never a crash). */
#include "check.h"
#include "fixture_io.h"
#include <json-c/json.h>
#include "engine.h"
#include "gguf.h"
#include "gguf_write.h"
#include "model.h"
#include "runtime.h"
#include "vision.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MMPROJ "tests/fixtures/gemma4_vision_mmproj.gguf"
#define MMPROJ_F16 "tests/fixtures/gemma4_vision_mmproj_f16.gguf"
#define MMPROJ_CLIPPED "tests/fixtures/gemma4_vision_mmproj_clipped.gguf"
#define TEXT "tests/fixtures/gemma4_dense.gguf"
#define GOLDEN "tests/golden/gemma4_vision.json"
#define BAD "/tmp/clgemma_test_gemma4v_bad.gguf"
#define HEADER_BYTES 3072 /* the f16 file's keys and tensor table (2,784 bytes) and a little data */

static cl_runtime RT;
static char err[1024];

/* the text model every projector here is loaded beside */
static gguf_file *TEXT_F;
static model TEXT_M;
static int TEXT_OK;

static int spit(const char *path, const void *buf, size_t n)
{
    FILE *o = fopen(path, "wb");
    int ok = o && fwrite(buf, 1, n, o) == n;
    if (o) fclose(o);
    return ok ? 0 : -1;
}

static int64_t golden_int(json_object *hp, const char *key)
{
    json_object *v;
    return json_object_object_get_ex(hp, key, &v) ? json_object_get_int64(v) : -1;
}

/* the bytes of buffer m equal the file's tensor name */
static int same_bytes(cl_mem m, const char *path, const char *name)
{
    gguf_file *f;
    if (gguf_open(&f, path, err, sizeof err)) return 0;
    const gguf_tensor *t = gguf_find_tensor(f, name);
    void *h = t ? malloc(t->nbytes) : NULL;
    int same = h && clEnqueueReadBuffer(RT.q, m, CL_TRUE, 0, t->nbytes, h, 0, NULL, NULL) == CL_SUCCESS &&
               !memcmp(h, t->data, t->nbytes);
    free(h);
    gguf_close(f);
    return same;
}

/* a weight padded by weight_pad_cols: each row the file's bytes, then zeros to its padded length */
static int same_padded(const weight *w, const char *path, const char *name)
{
    gguf_file *f;
    if (gguf_open(&f, path, err, sizeof err)) return 0;
    const gguf_tensor *t = gguf_find_tensor(f, name);
    size_t fr = t ? t->nbytes / w->rows : 0, n = (size_t)w->row_bytes * w->rows;
    unsigned char *h = t && fr < w->row_bytes ? malloc(n) : NULL;
    int same = h && clEnqueueReadBuffer(RT.q, w->buf, CL_TRUE, 0, n, h, 0, NULL, NULL) == CL_SUCCESS;
    for (size_t r = 0; same && r < w->rows; r++) {
        const unsigned char *row = h + r * w->row_bytes;
        same = !memcmp(row, (const unsigned char *)t->data + r * fr, fr);
        for (size_t i = fr; same && i < w->row_bytes; i++) same = row[i] == 0;
    }
    free(h);
    gguf_close(f);
    return same;
}

static void check_loaded(const char *path, json_object *ghp, uint32_t patch_type, int clipped)
{
    vision_model v;
    int rc = vision_open(&v, path, &TEXT_M, &RT, 0, err, sizeof err);
    CHECK(rc == 0, "%s: %s", path, err);
    if (rc) return;
    const vision_hparams *hp = &v.hp;
    CHECK(!strcmp(hp->proj, "gemma4v"), "projector %s", hp->proj);
    CHECK(hp->n_embd == golden_int(ghp, "n_embd") && hp->n_layer == golden_int(ghp, "n_layer") &&
          hp->n_head == golden_int(ghp, "n_head") && hp->head_dim == golden_int(ghp, "head_dim") &&
          hp->n_ff == golden_int(ghp, "n_ff") && hp->n_kv == hp->n_head, "embd %u, layers %u, heads %u x %u (kv %u), ff %u",
          hp->n_embd, hp->n_layer, hp->n_head, hp->head_dim, hp->n_kv, hp->n_ff);
    CHECK(hp->patch == golden_int(ghp, "patch_size") && hp->pool_k == golden_int(ghp, "pool_k") &&
          hp->n_pos == golden_int(ghp, "n_pos") && hp->proj_dim == golden_int(ghp, "projection_dim") &&
          hp->proj_dim == TEXT_M.hp.n_embd, "patch %u, pool %u, positions %u, projection %u (text %u)", hp->patch,
          hp->pool_k, hp->n_pos, hp->proj_dim, TEXT_M.hp.n_embd);
    CHECK(hp->rope_theta == 100.0f && hp->eps > 0.99e-6f && hp->eps < 1.01e-6f && hp->standardize == 1 &&
          hp->clipped == clipped, "theta %g, eps %g, standardize %d, clipped %d", hp->rope_theta, hp->eps,
          hp->standardize, hp->clipped);
    CHECK(hp->image_mean[0] == 0 && hp->image_mean[2] == 0 && hp->image_std[0] == 1 && hp->image_std[2] == 1,
          "mean %g %g %g, std %g %g %g", hp->image_mean[0], hp->image_mean[1], hp->image_mean[2], hp->image_std[0],
          hp->image_std[1], hp->image_std[2]);
    CHECK(v.patch_embd.type == patch_type && v.patch_embd.cols == 3 * hp->patch * hp->patch &&
          v.patch_embd.rows == hp->n_embd, "patch kernel type %u, %u x %u", v.patch_embd.type, v.patch_embd.rows,
          v.patch_embd.cols);
    CHECK(v.proj.rows == hp->proj_dim && v.proj.cols == hp->n_embd, "projection %u x %u", v.proj.rows, v.proj.cols);
    /* ffn_down's rows padded with zeros to whole 32-value units (weight_pad_cols): 136 -> 160 here */
    CHECK(v.layers && v.layers[1].down.rows == hp->n_embd && v.layers[1].down.cols == (hp->n_ff + 31) / 32 * 32 &&
          v.layers[0].k.rows == hp->n_kv * hp->head_dim, "layer shapes: ffn_down %u x %u for a width of %u",
          v.layers ? v.layers[1].down.rows : 0, v.layers ? v.layers[1].down.cols : 0, hp->n_ff);
    CHECK(v.layers && same_padded(&v.layers[1].down, path, "v.blk.1.ffn_down.weight"),
          "ffn_down: not the file's rows followed by zeros");
    CHECK(v.weight_bytes > 0 && v.std_bias && v.std_scale, "weights %llu bytes, std %p %p",
          (unsigned long long)v.weight_bytes, (void *)v.std_bias, (void *)v.std_scale);
    CHECK(same_bytes(v.pos_embd, path, "v.position_embd.weight") && same_bytes(v.proj.buf, path,
          "mm.input_projection.weight") && same_bytes(v.layers[1].post_ffw_norm, path, "v.blk.1.ffn_post_norm.weight") &&
          same_bytes(v.std_scale, path, "v.std_scale") && same_bytes(v.patch_embd.buf, path, "v.patch_embd.weight"),
          "a device buffer differs from the file's tensor");
    vision_free(&v);
    CHECK(v.arch == NULL && v.layers == NULL, "freed");
}

static void test_pair(void)
{
    long n;
    char *js = slurp(GOLDEN, &n);
    json_object *g = js ? json_tokener_parse(js) : NULL, *ghp = NULL;
    CHECK(g && json_object_object_get_ex(g, "hparams", &ghp), "no %s", GOLDEN);
    if (ghp) {
        check_loaded(MMPROJ, ghp, GGML_TYPE_F32, 0);
        check_loaded(MMPROJ_F16, ghp, GGML_TYPE_F16, 0);
        check_loaded(MMPROJ_CLIPPED, ghp, GGML_TYPE_F32, 1);
    }
    json_object_put(g);
    free(js);
    /* through the engine: opts.mmproj_path */
    engine *e = NULL;
    engine_opts o = { 0 };
    o.mmproj_path = MMPROJ_F16;
    int rc = engine_load(&e, TEXT, &o, err, sizeof err);
    CHECK(rc == 0, "engine_load with the mmproj: %s", err);
    if (!rc) {
        const engine_info *in = engine_get_info(e);
        CHECK(!strcmp(in->vision_proj, "gemma4v") && in->vision_bytes > 0 &&
              in->device_bytes >= in->weight_bytes + in->vision_bytes, "info: '%s' %llu bytes", in->vision_proj,
              (unsigned long long)in->vision_bytes);
        engine_destroy(e);
    }
    /* and a broken projector fails the engine's load, naming the file */
    o.mmproj_path = TEXT;
    rc = engine_load(&e, TEXT, &o, err, sizeof err);
    CHECK(rc != 0 && !strcmp(err, TEXT ": mmproj: general.architecture is 'gemma4', not 'clip': a model file, not a "
                                "vision projector (mmproj)"),
          "engine_load with a model as the mmproj: %d '%s'", rc, err);
    if (!rc) engine_destroy(e);
}

/* vision_open(path) must fail with exactly "path: want" */
static void refused(const char *what, const char *path, const char *want)
{
    vision_model v;
    int rc = vision_open(&v, path, &TEXT_M, &RT, 0, err, sizeof err);
    char full[1024];
    snprintf(full, sizeof full, "%s: %s", path, want);
    CHECK(rc != 0, "%s: loaded", what);
    CHECK(rc == 0 || !strcmp(err, full), "%s:\n  got  '%s'\n  want '%s'", what, err, full);
    CHECK(!strchr(err, '\n'), "%s: more than one line", what);
    if (!rc) vision_free(&v);
}

static void test_kinds(void)
{
    refused("a text model as the mmproj", TEXT,
            "mmproj: general.architecture is 'gemma4', not 'clip': a model file, not a vision projector (mmproj)");
    /* the reverse: the mmproj as the model, through the model layer and the engine */
    gguf_file *f;
    CHECK(gguf_open(&f, MMPROJ, err, sizeof err) == 0, "%s", err);
    if (f) {
        model m;
        int rc = model_load(&m, f, &RT, NULL, err, sizeof err);
        CHECK(rc != 0 && !strcmp(err, "model: 'clip' is a vision projector (mmproj), not a model: load it beside one "
                                      "(--mmproj)"), "model_load: %d '%s'", rc, err);
        if (!rc) model_free(&m);
        gguf_close(f);
    }
    engine *e = NULL;
    int rc = engine_load(&e, MMPROJ, NULL, err, sizeof err);
    CHECK(rc != 0 && !strcmp(err, MMPROJ ": 'clip' is a vision projector (mmproj), not a model: load it beside one "
                                  "(--mmproj)"), "engine_load: %d '%s'", rc, err);
    if (!rc) engine_destroy(e);
}

/* a file of only the keys that say what it is, projector type key = type */
static void write_kind(const char *key, const char *type)
{
    gguf_writer *w = gguf_writer_create(0);
    gguf_w_str(w, "general.architecture", "clip");
    gguf_w_str(w, "general.type", "mmproj");
    gguf_w_bool(w, "clip.has_vision_encoder", 1);
    gguf_w_str(w, key, type);
    gguf_w_u32(w, "clip.vision.projection_dim", 256);
    CHECK(w && gguf_w_open(w, BAD) == 0 && gguf_w_close(w, err, sizeof err) == 0, "writing %s: %s", BAD, err);
    gguf_writer_destroy(w);
}

static void test_projector_types(void)
{
    write_kind("clip.vision.projector_type", "gemma4uv");
    refused("gemma4uv", BAD, "mmproj: unsupported projector type 'gemma4uv' in clip.vision.projector_type "
                             "(supported: gemma4v)");
    write_kind("clip.projector_type", "gemma4uv"); /* the older common key, read when the vision one is absent */
    refused("gemma4uv (common key)", BAD, "mmproj: unsupported projector type 'gemma4uv' in clip.projector_type "
                                          "(supported: gemma4v)");
    write_kind("clip.audio.projector_type", "gemma4a");
    refused("no projector type", BAD, "mmproj: no projector type: missing key 'clip.projector_type'");
    remove(BAD);
}

/* src with the bytes at (first occurrence of find) + after replaced by patch must be refused with want */
static void bad_copy(const char *what, const char *src, const char *find, size_t after, const void *patch, size_t plen,
                     const char *want)
{
    const char *why;
    int rc = patch_copy(src, find, after, patch, plen, BAD, &why);
    CHECK(rc == 0, "%s: %s ('%s' in %s)", what, why, find, src);
    if (!rc) refused(what, BAD, want);
    remove(BAD);
}

static void test_bad_files(void)
{
    /* a tensor name is followed by n_dims (u32), ne[] (u64 each), type (u32); a key by its type (u32) and value,
     * a string value by its length (u64), an array by element type (u32) and count (u64) */
    bad_copy("missing tensor", MMPROJ, "v.blk.1.ffn_up.weight", 0, "a", 1, /* a.*: another tower's, ignored */
             "model: missing tensor 'v.blk.1.ffn_up.weight' (expected shape [96, 136])");
    uint64_t ne1 = 128;
    bad_copy("wrong shape", MMPROJ, "v.blk.0.ffn_gate.weight", 23 + 4 + 8, &ne1, 8,
             "model: tensor 'v.blk.0.ffn_gate.weight' has shape [96, 128], expected [96, 136]");
    uint32_t dim = 128;
    bad_copy("projection_dim", MMPROJ, "clip.vision.projection_dim", 26 + 4, &dim, 4,
             "mmproj: clip.vision.projection_dim 128 is not the text model's embedding width 256: a projector of "
             "another model");
    bad_copy("std_bias alone", MMPROJ, "v.std_scale", 0, "a", 1,
             "mmproj: tensor 'v.std_bias' without 'v.std_scale': standardize needs both");
    bad_copy("unknown tensor", MMPROJ, "v.blk.0.ln1.weight", 10, "X", 1,
             "mmproj: unknown tensor 'v.blk.0.lnX.weight' for a gemma4v projector of 2 layers (a newer layout?)");
    uint32_t bf16 = GGML_TYPE_BF16;
    bad_copy("patch kernel type", MMPROJ_F16, "v.patch_embd.weight", 19 + 4 + 32, &bf16, 4,
             "mmproj: tensor 'v.patch_embd.weight' has type bf16, expected F16 or F32");
    uint32_t heads = 5;
    bad_copy("heads", MMPROJ, "clip.vision.attention.head_count", 32 + 4, &heads, 4,
             "mmproj: embedding_length 96 is not a multiple of head_count 5");
    heads = 16;
    bad_copy("head dim", MMPROJ, "clip.vision.attention.head_count", 32 + 4, &heads, 4,
             "mmproj: head dim 6 (embedding_length / head_count) is not a multiple of 4: the 2-D RoPE rotates two "
             "halves in pairs");
    float zero = 0;
    bad_copy("image_std", MMPROJ, "clip.vision.image_std", 21 + 4 + 4 + 8 + 4, &zero, 4,
             "mmproj: image_std channel 1 is 0");
    bad_copy("general.type", MMPROJ, "general.type", 12 + 4 + 8 + 5, "x", 1,
             "mmproj: general.type is 'mmprox', expected 'mmproj'");
    uint64_t two = 2;
    bad_copy("clamp shape", MMPROJ_CLIPPED, "v.blk.0.attn_q.input_min", 24 + 4, &two, 8,
             "model: tensor 'v.blk.0.attn_q.input_min' has shape [2], expected [1]");
    /* a NaN clamp: the tensor's bytes found through the reader over the file in memory */
    long n;
    char *buf = slurp(MMPROJ_CLIPPED, &n);
    gguf_file *f = NULL;
    CHECK(buf && gguf_open_memory(&f, buf, (size_t)n, err, sizeof err) == 0, "%s", err);
    const gguf_tensor *t = f ? gguf_find_tensor(f, "v.blk.1.ffn_down.output_max") : NULL;
    CHECK(t && t->nbytes == 4, "no clamp v.blk.1.ffn_down.output_max");
    if (t) {
        uint32_t nan = 0x7fc00000u;
        memcpy((char *)buf + ((const char *)t->data - buf), &nan, 4);
        CHECK(spit(BAD, buf, (size_t)n) == 0, "cannot write %s", BAD);
        refused("NaN clamp", BAD, "mmproj: tensor 'v.blk.1.ffn_down.output_max' is NaN");
        remove(BAD);
    }
    gguf_close(f);
    free(buf);
    uint32_t big = 65;
    bad_copy("patch size", MMPROJ, "clip.vision.patch_size", 22 + 4, &big, 4,
             "mmproj: patch_size 65 out of range (1 to 64)");
}

/* every cut of the file fails with one line naming it (the reader's checks), never a crash */
static void test_truncated(void)
{
    long n;
    char *buf = slurp(MMPROJ_F16, &n);
    CHECK(buf != NULL, "no fixture");
    if (!buf) return;
    int cuts = 0;
    for (long cut = 0; cut < n; cut += cut < 4096 ? 97 : 40009, cuts++) {
        CHECK(spit(BAD, buf, (size_t)cut) == 0, "cannot write %s", BAD);
        vision_model v;
        int rc = vision_open(&v, BAD, &TEXT_M, &RT, 0, err, sizeof err);
        CHECK(rc != 0 && !strncmp(err, BAD ": ", strlen(BAD) + 2) && !strchr(err, '\n'), "cut at %ld: %d '%s'", cut,
              rc, err);
        if (!rc) vision_free(&v);
    }
    CHECK(cuts > 50, "%d cuts", cuts);
    free(buf);
    remove(BAD);
}

/* every byte of the header (keys, tensor table) flipped in turn: each copy loads or fails with one line naming
 * the file, never a crash (the sanitizer suite runs this too) */
static void test_mutated(void)
{
    long n;
    char *buf = slurp(MMPROJ_F16, &n);
    CHECK(buf != NULL, "no fixture");
    if (!buf) return;
    int loaded = 0, refusals = 0;
    for (long at = 0; at < n && at < HEADER_BYTES; at++) {
        buf[at] ^= (char)0xff;
        int wrote = spit(BAD, buf, (size_t)n) == 0;
        buf[at] ^= (char)0xff;
        CHECK(wrote, "cannot write %s", BAD);
        if (!wrote) break;
        vision_model v;
        int rc = vision_open(&v, BAD, &TEXT_M, &RT, 0, err, sizeof err);
        if (!rc) { loaded++; vision_free(&v); continue; }
        refusals++;
        if (strncmp(err, BAD ": ", strlen(BAD) + 2) || strchr(err, '\n')) {
            CHECK(0, "byte %ld flipped: '%s'", at, err);
            break;
        }
    }
    CHECK(refusals > HEADER_BYTES / 2, "%d of %d flips refused", refusals, HEADER_BYTES);
    printf("  %d header bytes flipped: %d refused, %d still loaded (names and values nothing checks)\n",
           loaded + refusals, refusals, loaded);
    free(buf);
    remove(BAD);
}

int main(void)
{
    if (rt_create(&RT, NULL, 0, err, sizeof err)) { printf("FAIL setup: rt_create: %s\n", err); return 1; }
    if (gguf_open(&TEXT_F, TEXT, err, sizeof err) || model_load(&TEXT_M, TEXT_F, &RT, NULL, err, sizeof err)) {
        printf("FAIL setup: %s: %s\n", TEXT, err);
        return 1;
    }
    TEXT_OK = 1;
    RUN_TEST(test_pair);
    RUN_TEST(test_kinds);
    RUN_TEST(test_projector_types);
    RUN_TEST(test_bad_files);
    RUN_TEST(test_truncated);
    RUN_TEST(test_mutated);
    if (TEXT_OK) model_free(&TEXT_M);
    gguf_close(TEXT_F);
    rt_destroy(&RT);
    CHECK_EXIT();
}
