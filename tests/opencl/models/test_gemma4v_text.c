/* test_gemma4v_text.c — images in the text forward (engine.h's image API, docs/design-vision.md 4.6) against
 * transformers float32 (tests/golden/gemma4_vision_text.{json,bin}, tools/gen_gemma4_vision_text_golden.py):
 * the golden's source pixels, written as PNG here (lossless), go through engine_image_prepare (decode, resize,
 * patches), engine_image_encode (the tower on tests/fixtures/gemma4_vision_mmproj.gguf) and engine_step with
 * their spans, on tests/fixtures/gemma4_dense.gguf with the golden's stand-in boi / eoi ids:
 *   - every case's logits at every text position, with the image's tokens bidirectional in sliding layers and
 *     causal (each mode against its own golden rows; the two modes differ by 1.9-23 there, so a wrong mask
 *     fails), stepping text, image, text in separate steps (logits_all on text only);
 *   - the whole prompt in one step, in chunks of 96 tokens (a chunk may not cut an image), and two prompts in
 *     one step: the last row;
 *   - the prefix cache: the same prompt again reuses blocks through the image and gives the same last row; a
 *     different image in the same place reuses nothing past the text before it;
 *   - the q8_0 text file with the real multimodal ids (its own golden of q8_0-dequantized weights);
 *   - refusals: an image not encoded, ids that are not the image's, a span not ending the image, negative ids
 *     outside spans, a corrupt image, no projector, a budget over the server's.
 * Tolerances: max |Δ| over a row ≤ 1e-3 × the golden's logit range (39; 2e-3 with f16 tensor-core prompts, H100
 * measured 0.052) + the row storage's rounding (f16 rows: ≤ 0.0078); transformers float32 is 2.7e-4 from
 * float64 (the golden's check). q8_0: 0.1 + storage
 * (prompt products keep float activations on every device; the q8_0 rows are transformers' on the same
 * dequantized weights). */
#include "check.h"
#include "engine.h"
#include "fixture_io.h"
#include <json-c/json.h>
#include <png.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEXT "tests/fixtures/gemma4_dense.gguf"
#define TEXT_Q8 "tests/fixtures/gemma4_vision_text_q8_0.gguf"
#define MMPROJ "tests/fixtures/gemma4_vision_mmproj.gguf"
#define GOLDEN "tests/golden/gemma4_vision_text.json"
#define GOLDEN_BIN "tests/golden/gemma4_vision_text.bin"
#define VGOLDEN "tests/golden/gemma4_vision.json"
#define VGOLDEN_BIN "tests/golden/gemma4_vision.bin"
#define REL_TOL_F32 1e-3
#define REL_TOL_TC 2e-3 /* f16 tensor-core prompts (NVIDIA), as test_gemma4's TOL_REL_TC */
#define Q8_TOL 0.1
#define MAXTOK 256

static json_object *G, *VG;
static char *BIN, *VBIN;
static long BIN_N, VBIN_N;
static double RANGE, REL_TOL = REL_TOL_F32; /* REL_TOL_TC once an engine says it has tensor cores */
static char err[512];

typedef struct { unsigned char *png; size_t len; const unsigned char *rgb; int w, h; } png_buf; /* rgb: its pixels */
static png_buf PNG[3]; /* the golden's images as PNG: grad_64x48, noise_40x130, mix_432x336 */
static const char *IMG_NAME[3] = { "grad_64x48", "noise_40x130", "mix_432x336" };

static json_object *get(json_object *o, const char *k)
{
    json_object *v = NULL;
    return o && json_object_object_get_ex(o, k, &v) ? v : NULL;
}

/* the vision golden's source_rgb of image i (its width and height from the JSON) as PNG */
static int make_png(int i)
{
    json_object *imgs = get(VG, "images"), *arrs = get(get(VG, "bin"), "arrays");
    int w = json_object_get_int(get(json_object_array_get_idx(imgs, i), "width"));
    int h = json_object_get_int(get(json_object_array_get_idx(imgs, i), "height"));
    char want[96];
    snprintf(want, sizeof want, "%s.source_rgb", IMG_NAME[i]);
    for (size_t k = 0; k < json_object_array_length(arrs); k++) {
        json_object *a = json_object_array_get_idx(arrs, k);
        if (strcmp(json_object_get_string(get(a, "name")), want)) continue;
        long off = (long)json_object_get_int64(get(a, "offset"));
        if (off + (long)w * h * 3 > VBIN_N) return -1;
        png_image im;
        memset(&im, 0, sizeof im);
        im.version = PNG_IMAGE_VERSION;
        im.width = (png_uint_32)w;
        im.height = (png_uint_32)h;
        im.format = PNG_FORMAT_RGB;
        png_alloc_size_t n = 0;
        if (!png_image_write_to_memory(&im, NULL, &n, 0, VBIN + off, 0, NULL)) return -1;
        PNG[i].png = malloc(n);
        if (!PNG[i].png || !png_image_write_to_memory(&im, PNG[i].png, &n, 0, VBIN + off, 0, NULL)) return -1;
        PNG[i].len = n;
        PNG[i].rgb = (const unsigned char *)VBIN + off;
        PNG[i].w = w;
        PNG[i].h = h;
        return 0;
    }
    return -1;
}

static int image_index(const char *name)
{
    for (int i = 0; i < 3; i++)
        if (!strcmp(name, IMG_NAME[i])) return i;
    return -1;
}

static float half(uint16_t h)
{
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 1024), e - 25);
    return s ? -v : v;
}

/* golden row `pos` of case c's set (NULL where the set does not hold it), into out[n_cols] */
static int golden_row(json_object *c, const char *set, int pos, float *out, int n_cols, double *storage)
{
    json_object *s = get(get(c, "sets"), set);
    int first = json_object_get_int(get(c, "first_row")), n = json_object_get_int(get(s, "n_rows"));
    if (!s || pos < first || pos >= first + n) return -1;
    long off = (long)json_object_get_int64(get(s, "offset"));
    int f16 = !strcmp(json_object_get_string(get(s, "dtype")), "f16");
    long at = off + (long)(pos - first) * n_cols * (f16 ? 2 : 4);
    if (at + (long)n_cols * (f16 ? 2 : 4) > BIN_N) return -1;
    for (int k = 0; k < n_cols; k++) {
        if (f16) {
            uint16_t h;
            memcpy(&h, BIN + at + 2 * k, 2);
            out[k] = half(h);
        } else {
            memcpy(&out[k], BIN + at + 4 * k, 4);
        }
    }
    *storage = json_object_get_double(get(s, "max_abs_storage"));
    return 0;
}

static double max_abs(const float *a, const float *b, int n)
{
    double d = 0;
    for (int k = 0; k < n; k++) {
        double e = fabs((double)a[k] - b[k]);
        if (e != e) return INFINITY;
        if (e > d) d = e;
    }
    return d;
}

static json_object *case_named(const char *name)
{
    json_object *cs = get(G, "cases");
    for (size_t i = 0; i < json_object_array_length(cs); i++)
        if (!strcmp(json_object_get_string(get(json_object_array_get_idx(cs, i), "name")), name))
            return json_object_array_get_idx(cs, i);
    return NULL;
}

static engine *load(const char *text, int mode, int max_batch)
{
    engine_opts o = { 0 };
    o.n_ctx = 512;
    o.max_seqs = 4;
    o.mmproj_path = MMPROJ;
    o.image_tokens = 70;
    o.image_attention = mode;
    o.max_batch_tokens = max_batch;
    engine *e = NULL;
    if (engine_load(&e, text, &o, err, sizeof err)) {
        CHECK(0, "load %s: %s", text, err);
        return NULL;
    }
    REL_TOL = engine_get_info(e)->tensor_cores ? REL_TOL_TC : REL_TOL_F32;
    return e;
}

/* a case's prompt on e: ids (images' soft tokens from ims), its spans, its images prepared and encoded */
typedef struct prompt {
    int32_t ids[MAXTOK];
    int n;
    engine_span spans[4];
    int n_spans;
    engine_image *ims[4];
} prompt;

static int make_prompt(engine *e, json_object *c, prompt *p, int swap_image)
{
    memset(p, 0, sizeof *p);
    json_object *toks = get(c, "tokens"), *imgs = get(c, "images");
    p->n = (int)json_object_array_length(toks);
    if (p->n > MAXTOK) return -1;
    for (int k = 0; k < p->n; k++) p->ids[k] = json_object_get_int(json_object_array_get_idx(toks, k));
    p->n_spans = (int)json_object_array_length(imgs);
    for (int s = 0; s < p->n_spans; s++) {
        json_object *im = json_object_array_get_idx(imgs, s);
        int i = image_index(json_object_get_string(get(im, "image")));
        if (swap_image) i = 2 - i; /* grad <-> mix: 63 tokens each */
        if (i < 0 || !(p->ims[s] = engine_image_prepare(e, PNG[i].png, PNG[i].len, 70, err, sizeof err))) {
            CHECK(0, "prepare: %s", err);
            return -1;
        }
        int off = json_object_get_int(get(im, "offset")), n = json_object_get_int(get(im, "n"));
        CHECK(engine_image_tokens(p->ims[s]) == n, "image %d: %d tokens, the golden's %d", i,
              engine_image_tokens(p->ims[s]), n);
        if (engine_image_tokens(p->ims[s]) != n) return -1;
        p->spans[s] = (engine_span){ off, n, 0, p->ims[s] };
        for (int j = 0; j < n; j++) p->ids[off + j] = engine_image_token(p->ims[s], j);
    }
    if (engine_image_encode(e, p->ims, p->n_spans, err, sizeof err)) {
        CHECK(0, "encode: %s", err);
        return -1;
    }
    return 0;
}

static void drop_prompt(engine *e, prompt *p)
{
    for (int s = 0; s < p->n_spans; s++) {
        engine_image_release(e, p->ims[s]);
        engine_image_destroy(p->ims[s]);
    }
}

/* tokens [a, b) of p on seq: the spans inside shifted to the item; logits of every token when rows */
static int step_range(engine *e, int seq, const prompt *p, int a, int b, float *rows)
{
    engine_span sp[4];
    int ns = 0;
    for (int s = 0; s < p->n_spans; s++)
        if (p->spans[s].offset >= a && p->spans[s].offset < b) {
            sp[ns] = p->spans[s];
            sp[ns++].offset -= a;
        }
    engine_item it = { .seq = seq, .tokens = p->ids + a, .n_tokens = b - a, .logits = rows, .logits_all = rows != NULL,
                       .spans = ns ? sp : NULL, .n_spans = ns };
    int rc = engine_step(e, &it, 1, err, sizeof err);
    CHECK(rc == 0, "step [%d, %d): %s", a, b, err);
    return rc;
}

/* every case of the golden in one mode: text stepped with logits_all, each image alone */
static void check_mode(int mode, const char *set)
{
    engine *e = load(TEXT, mode, 0);
    if (!e) return;
    uint32_t V = engine_get_info(e)->n_vocab;
    int n_cols = json_object_get_int(get(G, "n_cols"));
    CHECK((int)V == n_cols, "vocabulary %u, golden columns %d", V, n_cols);
    float *rows = malloc(sizeof(float) * MAXTOK * V), *g = malloc(sizeof(float) * V);
    const char *names[] = { "one_image", "two_images", "image_first" };
    for (int ci = 0; ci < 3 && rows && g; ci++) {
        json_object *c = case_named(names[ci]);
        prompt p;
        if (!c || make_prompt(e, c, &p, 0)) { CHECK(0, "case %s", names[ci]); continue; }
        int seq = engine_seq_new(e), at = 0;
        double worst = 0, tol_worst = 0;
        int worst_pos = -1, compared = 0;
        for (int s = 0; s <= p.n_spans; s++) {
            int end = s < p.n_spans ? p.spans[s].offset : p.n;
            if (end > at && step_range(e, seq, &p, at, end, rows)) break;
            for (int q = at; q < end; q++) {
                double stor;
                if (golden_row(c, set, q, g, n_cols, &stor)) continue;
                double d = max_abs(rows + (size_t)(q - at) * V, g, n_cols), tol = REL_TOL * RANGE + stor;
                compared++;
                if (d - tol > worst - tol_worst || worst_pos < 0) { worst = d; tol_worst = tol; worst_pos = q; }
            }
            at = end;
            if (s < p.n_spans) {
                if (step_range(e, seq, &p, at, at + p.spans[s].n, NULL)) break;
                at += p.spans[s].n;
            }
        }
        CHECK(compared > 0 && worst <= tol_worst, "%s %s: max |Δ| %.5f at position %d (tolerance %.5f, %d rows)",
              names[ci], set, worst, worst_pos, tol_worst, compared);
        printf("  %s %s: %d text rows, max |Δ| %.2e (tolerance %.2e)\n", names[ci], set, compared, worst, tol_worst);
        engine_seq_free(e, seq);
        drop_prompt(e, &p);
    }
    free(rows);
    free(g);
    engine_destroy(e);
}

static void test_bidirectional(void) { check_mode(ENGINE_IMAGE_ATTN_BIDIR, "bidirectional"); }
static void test_causal(void) { check_mode(ENGINE_IMAGE_ATTN_CAUSAL, "causal"); }

/* the last row of case c's whole prompt stepped at once (with another prompt beside it when other) */
static void whole_prompts(int max_batch)
{
    engine *e = load(TEXT, ENGINE_IMAGE_ATTN_BIDIR, max_batch);
    if (!e) return;
    uint32_t V = engine_get_info(e)->n_vocab;
    int n_cols = json_object_get_int(get(G, "n_cols"));
    json_object *c2 = case_named("two_images"), *c3 = case_named("image_first");
    prompt p2, p3;
    float *l2 = malloc(sizeof(float) * V), *l3 = malloc(sizeof(float) * V), *g = malloc(sizeof(float) * V);
    if (!c2 || !c3 || !l2 || !l3 || !g || make_prompt(e, c2, &p2, 0) || make_prompt(e, c3, &p3, 0)) {
        CHECK(0, "setup");
        return;
    }
    engine_item it[2] = {
        { .seq = engine_seq_new(e), .tokens = p2.ids, .n_tokens = p2.n, .logits = l2, .spans = p2.spans,
          .n_spans = p2.n_spans },
        { .seq = engine_seq_new(e), .tokens = p3.ids, .n_tokens = p3.n, .logits = l3, .spans = p3.spans,
          .n_spans = p3.n_spans },
    };
    CHECK(engine_step(e, it, 2, err, sizeof err) == 0, "step: %s", err);
    double s2, s3, d2 = INFINITY, d3 = INFINITY;
    if (!golden_row(c2, "bidirectional", p2.n - 1, g, n_cols, &s2)) d2 = max_abs(l2, g, n_cols);
    if (!golden_row(c3, "bidirectional", p3.n - 1, g, n_cols, &s3)) d3 = max_abs(l3, g, n_cols);
    CHECK(d2 <= REL_TOL * RANGE && d3 <= REL_TOL * RANGE, "batch of two (forward chunks of %d): last rows %.5f, %.5f",
          max_batch, d2, d3);
    printf("  two prompts in one step, chunks of %d: last rows max |Δ| %.2e, %.2e\n", max_batch, d2, d3);
    engine_seq_free(e, it[0].seq);
    engine_seq_free(e, it[1].seq);
    drop_prompt(e, &p2);
    drop_prompt(e, &p3);
    free(l2);
    free(l3);
    free(g);
    engine_destroy(e);
}

static void test_one_step(void) { whole_prompts(0); }
static void test_chunked(void) { whole_prompts(96); }

/* the same prompt twice: the second reuses KV blocks through its image and gives the same last row; the same
 * text with another image reuses only the blocks before the image */
static void test_prefix_cache(void)
{
    engine *e = load(TEXT, ENGINE_IMAGE_ATTN_BIDIR, 0);
    if (!e) return;
    uint32_t V = engine_get_info(e)->n_vocab;
    json_object *c = case_named("one_image");
    prompt p, q, r;
    float *a = malloc(sizeof(float) * V), *b = malloc(sizeof(float) * V);
    if (!c || !a || !b || make_prompt(e, c, &p, 0)) { CHECK(0, "setup"); return; }
    engine_item it = { .seq = engine_seq_new(e), .tokens = p.ids, .n_tokens = p.n, .logits = a, .spans = p.spans,
                       .n_spans = p.n_spans };
    CHECK(engine_step(e, &it, 1, err, sizeof err) == 0, "first: %s", err);
    engine_seq_free(e, it.seq);
    drop_prompt(e, &p);
    engine_image_stats st0;
    engine_image_usage(e, &st0);
    if (make_prompt(e, c, &q, 0)) { CHECK(0, "setup 2"); return; }
    engine_image_stats st1;
    engine_image_usage(e, &st1);
    CHECK(st1.encodes == st0.encodes && st1.hits == st0.hits + 1, "the same image again: %llu encodes, %llu hits "
          "(before %llu, %llu)", (unsigned long long)st1.encodes, (unsigned long long)st1.hits,
          (unsigned long long)st0.encodes, (unsigned long long)st0.hits);
    int cached = 0, off = q.spans[0].offset, end = off + q.spans[0].n;
    int seq = engine_seq_new_prefix(e, q.ids, q.n, &cached);
    CHECK(cached > end - 32 && cached < q.n, "cached %d tokens of %d (the image ends at %d)", cached, q.n, end);
    /* the item starts where the cache ends: inside or after the image, its span the image's tail */
    engine_span sp = q.spans[0];
    int ns = 0;
    if (cached < end) {
        sp = (engine_span){ cached > off ? 0 : off - cached, end - (cached > off ? cached : off),
                            cached > off ? cached - off : 0, q.ims[0] };
        ns = 1;
    }
    engine_item it2 = { .seq = seq, .tokens = q.ids + cached, .n_tokens = q.n - cached, .logits = b,
                        .spans = ns ? &sp : NULL, .n_spans = ns };
    CHECK(engine_step(e, &it2, 1, err, sizeof err) == 0, "second: %s", err);
    double d = max_abs(a, b, (int)V);
    /* float sums in another order: the rest of the image runs as its own forward, its attention split otherwise */
    CHECK(d <= 1e-3, "cached prompt's last row differs from the cold one's by %.6f", d);
    printf("  same prompt again: %d of %d tokens cached, last row max |Δ| %.1e\n", cached, q.n, d);
    engine_seq_free(e, seq);
    drop_prompt(e, &q);
    if (make_prompt(e, c, &r, 1)) { CHECK(0, "setup 3"); return; }
    seq = engine_seq_new_prefix(e, r.ids, r.n, &cached);
    CHECK(cached <= off, "another image in the same place: %d tokens cached, past the image's start %d", cached, off);
    engine_seq_free(e, seq);
    drop_prompt(e, &r);
    free(a);
    free(b);
    engine_destroy(e);
}

/* the q8_0 text file with the real ids, against transformers on its dequantized weights */
static void test_q8_real_ids(void)
{
    engine *e = load(TEXT_Q8, ENGINE_IMAGE_ATTN_BIDIR, 0);
    if (!e) return;
    const engine_info *in = engine_get_info(e);
    json_object *ids = get(G, "token_ids");
    CHECK(in->boi_token == json_object_get_int(get(ids, "boi")) && in->eoi_token == json_object_get_int(get(ids, "eoi")) &&
          in->image_token == json_object_get_int(get(ids, "image")), "image tokens %d %d %d", in->boi_token,
          in->eoi_token, in->image_token);
    json_object *c = case_named("real_ids_q8");
    prompt p;
    uint32_t V = in->n_vocab;
    float *rows = malloc(sizeof(float) * MAXTOK * V), *g = malloc(sizeof(float) * V);
    if (!c || !rows || !g || make_prompt(e, c, &p, 0)) { CHECK(0, "setup"); return; }
    int n_cols = json_object_get_int(get(G, "n_cols")), seq = engine_seq_new(e), end = p.spans[0].offset + p.spans[0].n;
    step_range(e, seq, &p, 0, end, NULL);
    step_range(e, seq, &p, end, p.n, rows);
    double worst = 0, stor = 0;
    for (int q = end; q < p.n; q++) {
        double s;
        if (golden_row(c, "bidirectional_q8_weights", q, g, n_cols, &s)) { CHECK(0, "no golden row %d", q); break; }
        double d = max_abs(rows + (size_t)(q - end) * V, g, n_cols);
        if (d > worst) worst = d;
        stor = s;
    }
    CHECK(worst <= Q8_TOL + stor, "q8_0: max |Δ| %.4f over %.4f", worst, Q8_TOL + stor);
    printf("  q8_0 real ids: %d rows, max |Δ| %.2e (tolerance %.2e)\n", p.n - end, worst, Q8_TOL + stor);
    engine_seq_free(e, seq);
    drop_prompt(e, &p);
    free(rows);
    free(g);
    engine_destroy(e);
}

static void test_refusals(void)
{
    engine *e = load(TEXT, ENGINE_IMAGE_ATTN_BIDIR, 0);
    if (!e) return;
    json_object *c = case_named("one_image");
    prompt p;
    if (!c || make_prompt(e, c, &p, 0)) { CHECK(0, "setup"); return; }
    int seq = engine_seq_new(e);
    engine_span sp = p.spans[0];
    engine_item it = { .seq = seq, .tokens = p.ids, .n_tokens = p.n, .spans = &sp, .n_spans = 1 };
    struct { const char *name, *want; } cases[] = {
        { "tail", "is not an image's tail" }, { "ids", "is not the image's" }, { "no span", "out of range" },
        { "unpinned", "not encoded" },
    };
    for (int k = 0; k < 4; k++) {
        sp = p.spans[0];
        it.n_spans = 1;
        int32_t save = p.ids[sp.offset + 3];
        if (k == 0) sp.n -= 1;
        if (k == 1) p.ids[sp.offset + 3] = engine_image_token(p.ims[0], 4);
        if (k == 2) it.n_spans = 0;
        if (k == 3) engine_image_release(e, p.ims[0]);
        err[0] = 0;
        int rc = engine_step(e, &it, 1, err, sizeof err);
        CHECK(rc == -1 && strstr(err, cases[k].want), "%s: rc %d, '%s'", cases[k].name, rc, err);
        CHECK(engine_seq_len(e, seq) == 0, "%s: the refused step changed the sequence", cases[k].name);
        p.ids[sp.offset + 3] = save;
    }
    /* hostile bytes and budgets: one line each */
    unsigned char junk[64] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R' };
    engine_image *bad = engine_image_prepare(e, junk, sizeof junk, 70, err, sizeof err);
    CHECK(!bad && !strncmp(err, "image", 5), "a truncated PNG: '%s'", err);
    engine_image_destroy(bad);
    bad = engine_image_prepare(e, PNG[0].png, PNG[0].len, 280, err, sizeof err);
    CHECK(!bad && strstr(err, "over this server's 70"), "budget 280 over 70: '%s'", err);
    engine_image_destroy(bad);
    bad = engine_image_prepare(e, PNG[0].png, PNG[0].len, 50, err, sizeof err);
    CHECK(!bad && strstr(err, "image_prep"), "budget 50: '%s'", err);
    engine_image_destroy(bad);
    /* a video's frame: the same pixels given as RGB are the same image (digest, so ids and cached rows) */
    int32_t first0 = 0; /* PNG[0]'s first id */
    for (int i = 0; i < 3; i++) {
        engine_image *a = engine_image_prepare(e, PNG[i].png, PNG[i].len, 70, err, sizeof err);
        engine_image *b = engine_image_prepare_rgb(e, PNG[i].rgb, PNG[i].w, PNG[i].h, 70, err, sizeof err);
        int n = a && b ? engine_image_tokens(a) : 0;
        CHECK(n > 0 && engine_image_tokens(b) == n && engine_image_token(a, 0) == engine_image_token(b, 0) &&
              engine_image_token(a, n - 1) == engine_image_token(b, n - 1), "%s as RGB: %s", IMG_NAME[i], err);
        if (i == 0 && a) first0 = engine_image_token(a, 0);
        engine_image_destroy(a);
        engine_image_destroy(b);
    }
    bad = engine_image_prepare_rgb(e, PNG[0].rgb, PNG[0].w - 1, PNG[0].h, 70, err, sizeof err); /* other pixels */
    CHECK(bad && engine_image_token(bad, 0) != first0, "a narrower picture: other ids");
    engine_image_destroy(bad);
    bad = engine_image_prepare_rgb(e, NULL, 4, 4, 70, err, sizeof err);
    CHECK(!bad && strstr(err, "no pixels"), "no pixels: '%s'", err);
    bad = engine_image_prepare_rgb(e, PNG[0].rgb, 0, 4, 70, err, sizeof err);
    CHECK(!bad && strstr(err, "zero size"), "zero size: '%s'", err);
    bad = engine_image_prepare_rgb(e, PNG[0].rgb, 20000, 1, 70, err, sizeof err);
    CHECK(!bad && strstr(err, "over the limit"), "20000x1: '%s'", err);
    engine_seq_free(e, seq);
    for (int s = 0; s < p.n_spans; s++) engine_image_destroy(p.ims[s]); /* released above */
    engine_destroy(e);
    /* a text model alone takes no image */
    engine_opts o = { 0 };
    o.n_ctx = 256;
    o.max_seqs = 1;
    if (engine_load(&e, TEXT, &o, err, sizeof err)) { CHECK(0, "load: %s", err); return; }
    bad = engine_image_prepare(e, PNG[0].png, PNG[0].len, 0, err, sizeof err);
    CHECK(!bad && strstr(err, "no vision projector"), "no projector: '%s'", err);
    engine_image_destroy(bad);
    engine_destroy(e);
}

int main(void)
{
    char *js = slurp(GOLDEN, &BIN_N);
    G = js ? json_tokener_parse(js) : NULL;
    free(js);
    js = slurp(VGOLDEN, &VBIN_N);
    VG = js ? json_tokener_parse(js) : NULL;
    free(js);
    BIN = slurp(GOLDEN_BIN, &BIN_N);
    VBIN = slurp(VGOLDEN_BIN, &VBIN_N);
    if (!G || !VG || !BIN || !VBIN) { printf("FAIL setup: cannot read the goldens\n"); return 1; }
    RANGE = json_object_get_double(get(get(G, "check"), "logit_range"));
    for (int i = 0; i < 3; i++)
        if (make_png(i)) { printf("FAIL setup: PNG of %s\n", IMG_NAME[i]); return 1; }
    RUN_TEST(test_bidirectional);
    RUN_TEST(test_causal);
    RUN_TEST(test_one_step);
    RUN_TEST(test_chunked);
    RUN_TEST(test_prefix_cache);
    RUN_TEST(test_q8_real_ids);
    RUN_TEST(test_refusals);
    for (int i = 0; i < 3; i++) free(PNG[i].png);
    json_object_put(G);
    json_object_put(VG);
    free(BIN);
    free(VBIN);
    CHECK_EXIT();
}
