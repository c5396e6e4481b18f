/* test_gemma4v_encode.c — the Gemma 4 vision encoder forward (vision_encode, docs/design-vision.md 4.4) against
 * transformers float32 (tests/golden/gemma4_vision.{json,bin}, tools/gen_gemma4_vision_fixtures.py), on the
 * fixtures tests/fixtures/gemma4_vision_mmproj{,_f16,_clipped}.gguf beside tests/fixtures/gemma4_dense.gguf:
 *   - image 0's patch embeddings and each layer's output (where a difference starts), pooled, standardized and
 *     projected rows (f32 weights);
 *   - every golden image's pooled, standardized and projected rows, alone (f32), projected rows with f16
 *     weights and with the clamps of the clipped file;
 *   - the three images in one encode: each image's rows equal to its rows alone (no attention across images,
 *     pooling per image), and to the goldens;
 *   - refusals: no image, a grid the pooling kernel does not divide or wider than the position table, a patch
 *     count that is not the grid's, patches over the budget, positions that are not the grid's; the new ops' bad
 *     shapes (their numerics at other shapes: tests/opencl/ops/test_kernels_vision.c).
 * Error measure: max |Δ| / max |golden value| over the array. The prepared inputs are the goldens' resized images
 * (pixel_values = float32(v · (1/255)) in (row, col, channel) patch order, positions checked against the
 * golden's), so image_prep's resize (its own test) is not in the comparison. */
#include "check.h"
#include "fixture_io.h"
#include <json-c/json.h>
#include "gguf.h"
#include "image_prep.h"
#include "model.h"
#include "ops.h"
#include "runtime.h"
#include "vision.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MMPROJ "tests/fixtures/gemma4_vision_mmproj.gguf"
#define MMPROJ_F16 "tests/fixtures/gemma4_vision_mmproj_f16.gguf"
#define MMPROJ_CLIPPED "tests/fixtures/gemma4_vision_mmproj_clipped.gguf"
#define TEXT "tests/fixtures/gemma4_dense.gguf"
#define GOLDEN "tests/golden/gemma4_vision.json"
#define GOLDEN_BIN "tests/golden/gemma4_vision.bin"
#define N_IMG 3
/* f32 weights: the float64 reference is 2e-6 from transformers (the golden's check); float sums in another
 * order stay far below this */
#define TOL_F32_EXACT 1e-4
/* products on f16 tensor cores (NVIDIA) round X and W to f16: H100 measured up to 4.2e-3 */
#define TOL_TC 8e-3
#define TOL_F32 (O.has_mma ? TOL_TC : TOL_F32_EXACT)
/* f16 weights against transformers on the f32 weights: the f16 file itself is 1.5e-3 away (the golden's check) */
#define TOL_F16 (O.has_mma ? TOL_TC : 3e-3)

static cl_runtime RT;
static ops O;
static char err[1024];
static gguf_file *TEXT_F;
static model TEXT_M;

static json_object *G;  /* the golden's JSON */
static char *BIN;       /* its arrays */
static long BIN_N;
static image_prep *IMG[N_IMG];
static const char *NAME[N_IMG];
static int NTOK[N_IMG], NPATCH[N_IMG];
static uint32_t H, HT, NL; /* vision width, projection width, layers */

/* the golden array name.what, of want bytes; NULL (and a failure) if absent or of another size */
static const void *garr(const char *name, const char *what, size_t want)
{
    char full[128];
    snprintf(full, sizeof full, "%s.%s", name, what);
    json_object *bin, *arrs;
    if (!json_object_object_get_ex(G, "bin", &bin) || !json_object_object_get_ex(bin, "arrays", &arrs)) return NULL;
    for (size_t i = 0; i < json_object_array_length(arrs); i++) {
        json_object *a = json_object_array_get_idx(arrs, i), *nm, *off, *shape;
        if (!json_object_object_get_ex(a, "name", &nm) || strcmp(json_object_get_string(nm), full)) continue;
        json_object_object_get_ex(a, "offset", &off);
        json_object_object_get_ex(a, "shape", &shape);
        size_t n = 1;
        for (size_t d = 0; d < json_object_array_length(shape); d++)
            n *= (size_t)json_object_get_int64(json_object_array_get_idx(shape, d));
        int64_t o = json_object_get_int64(off);
        size_t bytes = n * (strstr(full, "rgb") ? 1 : 4);
        CHECK(bytes == want && o >= 0 && o + (int64_t)bytes <= BIN_N, "%s: %zu bytes at %lld, want %zu", full, bytes,
              (long long)o, want);
        return bytes == want && o + (int64_t)bytes <= BIN_N ? BIN + o : NULL;
    }
    CHECK(0, "no golden array %s", full);
    return NULL;
}

/* max |a - b| / max |b| over n values (NaN anywhere: infinity) */
static double rel_err(const float *a, const float *b, size_t n)
{
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        if (e != e) return INFINITY;
        if (e > d) d = e;
        if (fabs(b[i]) > m) m = fabs(b[i]);
    }
    return m > 0 ? d / m : d;
}

/* the prepared image transformers' processor made of the golden's resized RGB */
static image_prep *prep_of(const uint8_t *rgb, int w, int h)
{
    image_prep *p = calloc(1, sizeof *p);
    int P = IMAGE_PREP_PATCH;
    if (!p) return NULL;
    p->w = w, p->h = h, p->gw = w / P, p->gh = h / P, p->n_patches = p->gw * p->gh;
    p->soft_tokens = p->n_patches / (IMAGE_PREP_POOL * IMAGE_PREP_POOL);
    p->pixels = malloc(sizeof(float) * (size_t)p->n_patches * P * P * 3);
    p->pos = malloc(sizeof(int32_t) * 2 * (size_t)p->n_patches);
    if (!p->pixels || !p->pos) { image_prep_destroy(p); return NULL; }
    for (int i = 0; i < p->n_patches; i++) {
        int gx = i % p->gw, gy = i / p->gw;
        for (int y = 0; y < P; y++)
            for (int x = 0; x < P; x++)
                for (int c = 0; c < 3; c++)
                    p->pixels[(size_t)i * P * P * 3 + (y * P + x) * 3 + c] =
                        (float)rgb[((size_t)(gy * P + y) * w + gx * P + x) * 3 + c] * (float)(1.0 / 255.0);
        p->pos[2 * i] = gx, p->pos[2 * i + 1] = gy;
    }
    return p;
}

static int load_goldens(void)
{
    long n;
    char *js = slurp(GOLDEN, &n);
    G = js ? json_tokener_parse(js) : NULL;
    free(js);
    BIN = slurp(GOLDEN_BIN, &BIN_N);
    json_object *imgs, *hp, *x;
    if (!G || !BIN || !json_object_object_get_ex(G, "images", &imgs) || !json_object_object_get_ex(G, "hparams", &hp))
        return -1;
    H = json_object_object_get_ex(hp, "n_embd", &x) ? (uint32_t)json_object_get_int(x) : 0;
    HT = json_object_object_get_ex(hp, "projection_dim", &x) ? (uint32_t)json_object_get_int(x) : 0;
    NL = json_object_object_get_ex(hp, "n_layer", &x) ? (uint32_t)json_object_get_int(x) : 0;
    if (json_object_array_length(imgs) != N_IMG) return -1;
    for (int i = 0; i < N_IMG; i++) {
        json_object *im = json_object_array_get_idx(imgs, i), *v;
        int w = 0, h = 0;
        if (json_object_object_get_ex(im, "name", &v)) NAME[i] = json_object_get_string(v);
        if (json_object_object_get_ex(im, "resized_width", &v)) w = json_object_get_int(v);
        if (json_object_object_get_ex(im, "resized_height", &v)) h = json_object_get_int(v);
        if (json_object_object_get_ex(im, "n_tokens", &v)) NTOK[i] = json_object_get_int(v);
        if (json_object_object_get_ex(im, "n_patches", &v)) NPATCH[i] = json_object_get_int(v);
        const uint8_t *rgb = NAME[i] ? garr(NAME[i], "resized_rgb", (size_t)w * h * 3) : NULL;
        const int32_t *pos = NAME[i] ? garr(NAME[i], "pos", (size_t)NPATCH[i] * 8) : NULL;
        if (!rgb || !pos || !(IMG[i] = prep_of(rgb, w, h))) return -1;
        CHECK(IMG[i]->n_patches == NPATCH[i] && IMG[i]->soft_tokens == NTOK[i] &&
              !memcmp(IMG[i]->pos, pos, (size_t)NPATCH[i] * 8), "%s: %d patches, %d tokens, positions", NAME[i],
              IMG[i]->n_patches, IMG[i]->soft_tokens);
    }
    return H && HT && NL ? 0 : -1;
}

static int open_proj(vision_model *v, const char *path, uint32_t budget)
{
    int rc = vision_open(v, path, &TEXT_M, &RT, budget, err, sizeof err);
    CHECK(rc == 0, "%s: %s", path, err);
    return rc;
}

/* encode imgs; the rows read back into a new buffer (NULL and a failure on error) */
static float *encode(vision_model *v, const image_prep *const *imgs, int n, const vision_taps *taps)
{
    ops_clear(&O);
    int rc = vision_encode(v, &O, imgs, n, taps, err, sizeof err);
    CHECK(rc == 0, "vision_encode: %s", err);
    if (rc) return NULL;
    size_t bytes = (size_t)v->n_out * v->hp.proj_dim * sizeof(float);
    float *out = malloc(bytes);
    cl_int e = out ? clEnqueueReadBuffer(RT.q, v->out, CL_TRUE, 0, bytes, out, 0, NULL, NULL) : -1;
    CHECK(e == CL_SUCCESS, "reading the rows: %d", e);
    if (e) { free(out); return NULL; }
    return out;
}

/* rows of n values against golden name.what: the measured error printed, checked against tol */
static double against(const char *name, const char *what, const float *got, size_t rows, size_t n, double tol)
{
    const float *g = garr(name, what, rows * n * 4);
    if (!g || !got) return INFINITY;
    double e = rel_err(got, g, rows * n);
    printf("  %-13s %-19s rel max err %.2e (tolerance %.0e)\n", name, what, e, tol);
    CHECK(e <= tol, "%s.%s: rel max err %.3e > %.0e", name, what, e, tol);
    return e;
}

/* image 0 with every tap: where a difference would start */
static void test_layers(void)
{
    vision_model v;
    if (open_proj(&v, MMPROJ, 0)) return;
    size_t np = (size_t)NPATCH[0], ns = (size_t)NTOK[0];
    float *lay[8] = { 0 }, *embd = malloc(np * H * 4), *pooled = malloc(ns * H * 4), *stdz = malloc(ns * H * 4);
    for (uint32_t l = 0; l < NL && l < 8; l++) lay[l] = malloc(np * H * 4);
    vision_taps t = { embd, lay, pooled, stdz };
    const image_prep *im[1] = { IMG[0] };
    float *out = NL <= 8 ? encode(&v, im, 1, &t) : NULL;
    if (out) {
        CHECK(v.n_out == (uint32_t)NTOK[0], "%u rows, want %d", v.n_out, NTOK[0]);
        against(NAME[0], "embd", embd, np, H, TOL_F32);
        for (uint32_t l = 0; l < NL; l++) {
            char w[16];
            snprintf(w, sizeof w, "layer%u", l);
            against(NAME[0], w, lay[l], np, H, TOL_F32);
        }
        against(NAME[0], "pooled", pooled, ns, H, TOL_F32);
        against(NAME[0], "standardized", stdz, ns, H, TOL_F32);
        against(NAME[0], "projected", out, ns, HT, TOL_F32);
    }
    free(out);
    free(embd);
    free(pooled);
    free(stdz);
    for (int l = 0; l < 8; l++) free(lay[l]);
    vision_free(&v);
}

/* every image alone: f32 (pooled, standardized, projected), f16 and clipped (projected) */
static void test_images(void)
{
    const char *files[3] = { MMPROJ, MMPROJ_F16, MMPROJ_CLIPPED };
    const char *want[3] = { "projected", "projected", "clipped_projected" };
    const double tol[3] = { TOL_F32, TOL_F16, TOL_F32 };
    for (int f = 0; f < 3; f++) {
        vision_model v;
        if (open_proj(&v, files[f], 0)) continue;
        printf("  %s\n", files[f]);
        for (int i = 0; i < N_IMG; i++) {
            size_t ns = (size_t)NTOK[i];
            float *pooled = malloc(ns * H * 4), *stdz = malloc(ns * H * 4);
            vision_taps t = { .pooled = pooled, .standardized = stdz };
            const image_prep *im[1] = { IMG[i] };
            float *out = encode(&v, im, 1, f == 0 ? &t : NULL);
            CHECK(!out || v.n_out == ns, "%s: %u rows, want %zu", NAME[i], v.n_out, ns);
            if (out && f == 0) {
                against(NAME[i], "pooled", pooled, ns, H, tol[f]);
                against(NAME[i], "standardized", stdz, ns, H, tol[f]);
            }
            if (out) against(NAME[i], want[f], out, ns, HT, tol[f]);
            free(out);
            free(pooled);
            free(stdz);
        }
        vision_free(&v);
    }
}

/* the three images in one encode: each image's rows as alone, and as the goldens */
static void test_batch(void)
{
    uint32_t total = 0;
    for (int i = 0; i < N_IMG; i++) total += (uint32_t)NPATCH[i];
    vision_model v;
    if (open_proj(&v, MMPROJ, total)) return;
    const image_prep *all[N_IMG] = { IMG[0], IMG[1], IMG[2] };
    float *batch = encode(&v, all, N_IMG, NULL);
    uint32_t n_batch = v.n_out;
    size_t row0 = 0;
    for (int i = 0; batch && i < N_IMG; i++) {
        const image_prep *im[1] = { IMG[i] };
        float *alone = encode(&v, im, 1, NULL);
        if (!alone) break;
        double e = rel_err(batch + row0 * HT, alone, (size_t)NTOK[i] * HT);
        printf("  %-13s in a batch of %d vs alone: rel max err %.2e\n", NAME[i], N_IMG, e);
        CHECK(e <= 1e-5, "%s: the batch's rows differ from its rows alone by %.3e", NAME[i], e);
        against(NAME[i], "projected", batch + row0 * HT, (size_t)NTOK[i], HT, TOL_F32);
        row0 += (size_t)NTOK[i];
        free(alone);
    }
    CHECK(!batch || n_batch == row0, "%u rows, want %zu", n_batch, row0);
    free(batch);
    vision_free(&v);
}

/* an op's return rc must be a refusal whose sticky error is exactly want */
static void op_refused(int rc, const char *want)
{
    char e[256] = "";
    ops_status(&O, e, sizeof e);
    CHECK(rc != 0 && !strcmp(e, want), "%d\n  got  '%s'\n  want '%s'", rc, e, want);
    ops_clear(&O);
}

/* vision_encode on imgs must fail with exactly want */
static void refused(vision_model *v, const char *what, const image_prep *const *imgs, int n, const char *want)
{
    ops_clear(&O);
    int rc = vision_encode(v, &O, imgs, n, NULL, err, sizeof err);
    CHECK(rc != 0 && !strcmp(err, want), "%s: %d\n  got  '%s'\n  want '%s'", what, rc, rc ? err : "", want);
}

static void test_refusals(void)
{
    vision_model v;
    if (open_proj(&v, MMPROJ, (uint32_t)NPATCH[0] + 9)) return;
    CHECK(v.max_patches == (uint32_t)NPATCH[0] + 9 && v.scratch_bytes > 0, "budget %u, scratch %llu bytes",
          v.max_patches, (unsigned long long)v.scratch_bytes);
    refused(&v, "no images", (const image_prep *const *)IMG, 0, "vision_encode: 0 images");
    const image_prep *two[2] = { IMG[0], IMG[1] };
    refused(&v, "over the budget", two, 2, "vision_encode: 1107 patches exceed the encoder's budget of 576");
    image_prep odd = *IMG[0];
    odd.gw = 9, odd.gh = 7, odd.n_patches = 63; /* 7 rows: not a multiple of 3 */
    const image_prep *one[1] = { &odd };
    refused(&v, "grid", one, 1, "vision_encode: image 0: patch grid 9x7 is not a multiple of the pooling kernel 3");
    odd.gw = 66, odd.gh = 3, odd.n_patches = 198;
    refused(&v, "wide grid", one, 1, "vision_encode: image 0: patch grid 66x3 exceeds the position table (64)");
    odd.gw = 27, odd.gh = 21, odd.n_patches = 560;
    refused(&v, "patch count", one, 1, "vision_encode: image 0: 560 patches for a 27x21 grid");
    odd = *IMG[0];
    int32_t *pos = malloc((size_t)odd.n_patches * 8);
    if (pos) {
        memcpy(pos, IMG[0]->pos, (size_t)odd.n_patches * 8);
        pos[2 * 30] = 2; /* patch 30 is at (3, 1) */
        odd.pos = pos;
        refused(&v, "positions", one, 1, "vision_encode: image 0: patch 30 at (2, 1), not its grid place");
        free(pos);
    }
    const image_prep *none[1] = { NULL };
    refused(&v, "null image", none, 1, "vision_encode: image 0 is not a prepared image");
    /* after refusals an encode still works */
    one[0] = IMG[0];
    float *out = encode(&v, one, 1, NULL);
    free(out);
    vision_free(&v);
    /* the ops' own refusals: a sticky error naming the op, nothing launched (no buffers given) */
    op_refused(op_attention_dense(&O, NULL, NULL, NULL, NULL, NULL, 8, 4, 3, 24, 1.0f),
               "attention_dense: unsupported shape (4 heads, 3 kv heads, head dim 24 (at most 512), scale 1)");
    op_refused(op_attention_dense(&O, NULL, NULL, NULL, NULL, NULL, 8, 4, 4, 516, 1.0f),
               "attention_dense: unsupported shape (4 heads, 4 kv heads, head dim 516 (at most 512), scale 1)");
    cl_mem pos8 = rt_alloc(&RT, 64, NULL, err, sizeof err);
    op_refused(op_norm_rope2d(&O, pos8, 8, 4, 22, NULL, 0, 1e-6f, pos8, 100.0f, NULL, 0),
               "norm_rope2d: unsupported arguments (norm 0, 4 heads of 22, eps 1e-06, theta 100, f16 width 0)");
    if (pos8) clReleaseMemObject(pos8);
    op_refused(op_norm_rope2d(&O, NULL, 8, 4, 24, NULL, 1, 1e-6f, NULL, 100.0f, NULL, 0),
               "norm_rope2d: unsupported arguments (norm 1 without weight, 4 heads of 24, eps 1e-06, theta 100, f16 width 0)");
    op_refused(op_clamp(&O, NULL, NULL, 1.0f, -1.0f, 8), "clamp: bounds [1, -1]");
    op_refused(op_avgpool(&O, NULL, NULL, NULL, 4, 96, 0, 1.0f),
               "avgpool: unsupported arguments (96 values, kernel 0)");
    op_refused(op_standardize(&O, NULL, NULL, NULL, NULL, 4, 96), "standardize: no bias or scale for 96 values");
    op_refused(op_pos_add2d(&O, NULL, NULL, 0, NULL, 4, 96), "pos_add2d: 96 values, 0 positions");
}

int main(void)
{
    if (rt_create(&RT, NULL, 0, err, sizeof err)) { printf("FAIL setup: rt_create: %s\n", err); return 1; }
    if (rt_build(&RT, NULL, NULL, err, sizeof err)) { printf("FAIL setup: rt_build: %s\n", err); return 1; }
    if (ops_init(&O, &RT, 1u << 20, err, sizeof err)) { printf("FAIL setup: ops_init: %s\n", err); return 1; }
    if (gguf_open(&TEXT_F, TEXT, err, sizeof err) || model_load(&TEXT_M, TEXT_F, &RT, NULL, err, sizeof err)) {
        printf("FAIL setup: %s: %s\n", TEXT, err);
        return 1;
    }
    if (load_goldens()) { printf("FAIL setup: cannot read %s / %s\n", GOLDEN, GOLDEN_BIN); return 1; }
    RUN_TEST(test_layers);
    RUN_TEST(test_images);
    RUN_TEST(test_batch);
    RUN_TEST(test_refusals);
    for (int i = 0; i < N_IMG; i++) image_prep_destroy(IMG[i]);
    json_object_put(G);
    free(BIN);
    model_free(&TEXT_M);
    gguf_close(TEXT_F);
    ops_destroy(&O);
    rt_destroy(&RT);
    CHECK_EXIT();
}
