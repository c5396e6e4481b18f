/* Image decoding and Gemma 4 preprocessing against Pillow + numpy references written by
 * tools/gen_image_prep_fixtures.py (run by make test) into build/data/image_prep/cases.txt:
 *   decode FILE W H RGB          Pillow's decode + transformers' convert_to_rgb: PNG, GIF and WebP exact (lossy
 *                                within WEBP_LOSSY_TOL), JPEG within JPEG_TOL; GIF / WebP: the first frame
 *   size W H MST TW TH | error   get_aspect_ratio_preserving_size: exact
 *   resize FILE W H REF.png      Pillow's resize(BICUBIC) alone, one axis or both: exact
 *   prep FILE MST TW TH GW GH N SOFT RESIZED.png ROWS.f32 STRIDE POS.i32
 *                                Pillow's resize(BICUBIC) bytes exact; every STRIDE-th pixel_values row of
 *                                numpy within ROW_TOL; positions and counts exact
 * and the refusals (truncated, bad magic, limits, forged sizes, corrupt data, max_soft_tokens) each with its
 * one line. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "image.h"
#include "image_prep.h"

#define DIR "build/data/image_prep/"
/* Pillow's wheel bundles a newer libjpeg-turbo than the system's 2.1.5; the same ISLOW IDCT and
 * fancy upsampling may still differ by rounding in a value */
#define JPEG_TOL 1
/* lossy WebP, exact although Pillow's wheel bundles libwebp 1.6.0 and the system has 1.2.4: VP8 decoding
 * is bit-exact by its spec, and libwebp's fixed-point YUV to RGB (fancy upsampling) is the same in both */
#define WEBP_LOSSY_TOL 0
/* v * (1/255) in double then float on both sides: equal, but the numpy path may round once more */
#define ROW_TOL 1e-7f

static uint8_t *slurp(const char *name, size_t *n)
{
    char path[512];
    snprintf(path, sizeof path, DIR "%s", name);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(len > 0 ? (size_t)len : 1);
    if (b && fread(b, 1, (size_t)len, f) != (size_t)len) { free(b); b = NULL; }
    fclose(f);
    *n = (size_t)len;
    return b;
}

static image_rgb *decode_file(const char *name, char *err, size_t errlen)
{
    size_t n;
    uint8_t *b = slurp(name, &n);
    if (!b) { snprintf(err, errlen, "cannot read %s", name); return NULL; }
    image_rgb *im = image_decode(b, n, NULL, err, errlen);
    free(b);
    return im;
}

static FILE *cases(void)
{
    FILE *f = fopen(DIR "cases.txt", "r");
    CHECK(f, "cannot open " DIR "cases.txt (python tools/gen_image_prep_fixtures.py)");
    return f;
}

static void test_decode_matches_pillow(void)
{
    FILE *f = cases();
    if (!f) return;
    char line[1024], name[256], ref[256], err[256];
    int w, h, n_png = 0, n_jpeg = 0, n_webp = 0, n_gif = 0, worst_jpeg = 0, worst_lossy = 0;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "decode %255s %d %d %255s", name, &w, &h, ref) != 4) continue;
        image_rgb *im = decode_file(name, err, sizeof err);
        size_t rn = 0;
        uint8_t *want = slurp(ref, &rn);
        CHECK(im, "%s: %s", name, err);
        CHECK(want && rn == (size_t)w * h * 3, "%s: reference %s missing or %zu bytes", name, ref, rn);
        if (im && want && rn == (size_t)w * h * 3) {
            CHECK(im->w == w && im->h == h, "%s: %dx%d, Pillow %dx%d", name, im->w, im->h, w, h);
            int jpeg = strstr(name, ".jpg") != NULL, webp = strstr(name, ".webp") != NULL, worst = 0;
            int lossy = webp && strstr(name, "lossy");
            size_t off = 0;
            for (size_t i = 0; im->w == w && im->h == h && i < rn; i++) {
                int d = abs((int)im->rgb[i] - (int)want[i]);
                if (d > worst) worst = d, off = i;
            }
            CHECK(worst <= (jpeg ? JPEG_TOL : lossy ? WEBP_LOSSY_TOL : 0), "%s: byte %zu differs by %d (pixel %zu,%zu)",
                  name, off, worst, off / 3 % (size_t)w, off / 3 / (size_t)w);
            if (jpeg) n_jpeg++, worst_jpeg = worst > worst_jpeg ? worst : worst_jpeg;
            else if (webp) n_webp++, worst_lossy = lossy && worst > worst_lossy ? worst : worst_lossy;
            else if (strstr(name, ".gif")) n_gif++;
            else n_png++;
        }
        image_destroy(im);
        free(want);
    }
    fclose(f);
    CHECK(n_png >= 8 && n_jpeg >= 3 && n_webp >= 10 && n_gif >= 14, "only %d PNG, %d JPEG, %d WebP and %d GIF cases",
          n_png, n_jpeg, n_webp, n_gif);
    printf("  decode: %d PNG exact, %d JPEG with max |diff| %d (tolerance %d), %d WebP with max |diff| %d on lossy "
           "(tolerance %d), %d GIF exact\n", n_png, n_jpeg, worst_jpeg, JPEG_TOL, n_webp, worst_lossy, WEBP_LOSSY_TOL,
           n_gif);
}

static void test_size_rule_matches_transformers(void)
{
    FILE *f = cases();
    if (!f) return;
    char line[256], res[32], err[256];
    int w, h, mst, n = 0, n_err = 0;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "size %d %d %d %31[^\n]", &w, &h, &mst, res) != 4) continue;
        int tw = -1, th = -1, rw, rh;
        int rc = image_prep_size(w, h, mst, &tw, &th, err, sizeof err);
        if (!strcmp(res, "error")) {
            CHECK(rc == -1, "%dx%d @%d: %dx%d, transformers raises", w, h, mst, tw, th);
            n_err++;
        } else if (sscanf(res, "%d %d", &rw, &rh) == 2) {
            CHECK(rc == 0 && tw == rw && th == rh, "%dx%d @%d: %dx%d (%s), transformers %dx%d", w, h, mst, tw, th,
                  rc ? err : "ok", rw, rh);
        }
        n++;
    }
    fclose(f);
    CHECK(n >= 1000, "only %d size cases", n);
    /* transformers' raise paths cannot be reached with positive sides (one side always reaches 48
     * and the clamp keeps the area at max_patches * p^2); sizes without pixels are ours */
    CHECK(image_prep_size(0, 10, 280, &w, &h, err, sizeof err) == -1 &&
              !strcmp(err, "image_prep: image of 0x10 has no pixels"), "0x10: %s", err);
    printf("  size rule: %d cases (%d raising)\n", n, n_err);
}

static void test_prep_matches_transformers(void)
{
    FILE *f = cases();
    if (!f) return;
    char line[1024], name[256], rname[256], rows_name[256], pos_name[256], err[256];
    int mst, tw, th, gw, gh, n, soft, stride, cases_n = 0;
    float worst_row = 0;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "prep %255s %d %d %d %d %d %d %d %255s %255s %d %255s", name, &mst, &tw, &th, &gw, &gh, &n,
                   &soft, rname, rows_name, &stride, pos_name) != 12)
            continue;
        cases_n++;
        image_rgb *im = decode_file(name, err, sizeof err);
        image_rgb *want = decode_file(rname, err, sizeof err); /* lossless PNG: the decode cases pin PNG */
        CHECK(im && want, "%s @%d: %s", name, mst, err);
        image_prep *p = im ? image_prep_create(im->rgb, im->w, im->h, mst, err, sizeof err) : NULL;
        CHECK(p, "%s @%d: %s", name, mst, err);
        size_t rn = 0, pn = 0;
        float *rows = (float *)slurp(rows_name, &rn);
        int32_t *pos = (int32_t *)slurp(pos_name, &pn);
        if (p && want && rows && pos) {
            CHECK(p->w == tw && p->h == th && p->gw == gw && p->gh == gh && p->n_patches == n && p->soft_tokens == soft,
                  "%s @%d: %dx%d grid %dx%d n %d soft %d, transformers %dx%d grid %dx%d n %d soft %d", name, mst, p->w,
                  p->h, p->gw, p->gh, p->n_patches, p->soft_tokens, tw, th, gw, gh, n, soft);
            /* the resized bytes, recovered from the rows: exact */
            const int P = IMAGE_PREP_PATCH, D = P * P * 3;
            int bad = 0;
            for (int i = 0; i < p->n_patches && !bad && want->w == tw && want->h == th; i++)
                for (int r = 0; r < P && !bad; r++)
                    for (int c = 0; c < P * 3 && !bad; c++) {
                        int x = (i % gw) * P + c / 3, y = (i / gw) * P + r;
                        uint8_t v = want->rgb[((size_t)y * tw + x) * 3 + c % 3];
                        float got = p->pixels[(size_t)i * D + r * P * 3 + c];
                        bad = fabsf(got - v / 255.0f) > ROW_TOL;
                        CHECK(!bad, "%s @%d: patch %d (%d,%d,%d) = %.9g = %.3f/255, Pillow %u/255", name, mst, i, r,
                              c / 3, c % 3, got, got * 255, v);
                    }
            size_t nrows = rn / (sizeof(float) * D);
            CHECK(nrows == (size_t)(n + stride - 1) / stride, "%s @%d: %zu sampled rows", name, mst, nrows);
            for (size_t j = 0; j < nrows && j * stride < (size_t)n; j++)
                for (int k = 0; k < D; k++) {
                    float d = fabsf(p->pixels[j * stride * D + k] - rows[j * D + k]);
                    if (d > worst_row) worst_row = d;
                }
            CHECK(pn == sizeof(int32_t) * 2 * (size_t)n && !memcmp(pos, p->pos, pn), "%s @%d: positions differ", name, mst);
        }
        CHECK(worst_row <= ROW_TOL, "%s @%d: pixel_values rows differ by %g", name, mst, worst_row);
        free(rows);
        free(pos);
        image_prep_destroy(p);
        image_destroy(im);
        image_destroy(want);
    }
    fclose(f);
    CHECK(cases_n >= 10, "only %d prep cases", cases_n);
    printf("  prep: %d cases, resized bytes exact, pixel_values max |diff| %g (tolerance %g)\n", cases_n, worst_row,
           ROW_TOL);
}

static void test_resize_matches_pillow(void)
{
    FILE *f = cases();
    if (!f) return;
    char line[1024], name[256], rname[256], err[256];
    int ow, oh, n = 0;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "resize %255s %d %d %255s", name, &ow, &oh, rname) != 4) continue;
        n++;
        image_rgb *im = decode_file(name, err, sizeof err), *want = im ? decode_file(rname, err, sizeof err) : NULL;
        uint8_t *got = malloc((size_t)ow * oh * 3);
        CHECK(im && want && got, "%s to %dx%d: %s", name, ow, oh, err);
        if (im && want && got) {
            CHECK(image_prep_resize(im->rgb, im->w, im->h, got, ow, oh, err, sizeof err) == 0, "%s", err);
            size_t i = 0;
            while (i < (size_t)ow * oh * 3 && got[i] == want->rgb[i]) i++;
            CHECK(i == (size_t)ow * oh * 3, "%s to %dx%d: byte %zu is %u, Pillow %u", name, ow, oh, i, got[i],
                  want->rgb[i]);
        }
        free(got);
        image_destroy(im);
        image_destroy(want);
    }
    fclose(f);
    CHECK(n >= 6, "only %d resize cases", n);
}

/* an image already at its target size is not resampled (Pillow copies) */
static void test_resize_skipped_when_size_matches(void)
{
    char err[256];
    image_rgb *im = decode_file("rgb_fit_384x384.png", err, sizeof err);
    CHECK(im, "%s", err);
    if (!im) return;
    image_prep *p = image_prep_create(im->rgb, im->w, im->h, 70, err, sizeof err);
    CHECK(p && p->w == 384 && p->h == 384, "384x384 @70: %s", p ? "resized" : err);
    for (int i = 0; p && i < 3 * 16; i++) /* first patch, first row: the input bytes themselves */
        CHECK(p->pixels[i] == (float)(im->rgb[i] * (1.0 / 255.0)), "value %d", i);
    image_prep_destroy(p);
    image_destroy(im);
}

static void expect_refusal(const char *what, const uint8_t *b, size_t n, const image_limits *lim, const char *want)
{
    char err[256] = "";
    image_rgb *im = image_decode(b, n, lim, err, sizeof err);
    CHECK(!im, "%s: decoded %dx%d", what, im ? im->w : 0, im ? im->h : 0);
    CHECK(!strncmp(err, want, strlen(want)), "%s: \"%s\", want \"%s...\"", what, err, want);
    CHECK(!strchr(err, '\n'), "%s: more than one line", what);
    image_destroy(im);
}

/* bytes 16..23 of a PNG are IHDR's width and height, 29..32 the CRC of bytes 12..28 */
static void png_set_size(uint8_t *b, uint32_t w, uint32_t h)
{
    uint8_t s[8] = {w >> 24, w >> 16, w >> 8, w, h >> 24, h >> 16, h >> 8, h};
    memcpy(b + 16, s, 8);
    uint32_t crc = 0xffffffffu;
    for (int i = 12; i < 29; i++) {
        crc ^= b[i];
        for (int k = 0; k < 8; k++) crc = crc >> 1 ^ (0xedb88320u & -(crc & 1));
    }
    crc ^= 0xffffffffu;
    uint8_t c[4] = {crc >> 24, crc >> 16, crc >> 8, crc};
    memcpy(b + 29, c, 4);
}

/* the first SOF0/SOF2 marker's height and width */
static int jpeg_set_size(uint8_t *b, size_t n, uint16_t w, uint16_t h)
{
    for (size_t i = 2; i + 9 < n; i++)
        if (b[i] == 0xff && (b[i + 1] == 0xc0 || b[i + 1] == 0xc2)) {
            b[i + 5] = h >> 8, b[i + 6] = h & 255, b[i + 7] = w >> 8, b[i + 8] = w & 255;
            return 0;
        }
    return -1;
}

static void test_refusals(void)
{
    size_t pn = 0, jn = 0;
    uint8_t *png = slurp("rgb_large_520x400.png", &pn), *jpg = slurp("photo_320x240.jpg", &jn);
    CHECK(png && jpg, "fixtures missing");
    if (!png || !jpg) { free(png); free(jpg); return; }
    expect_refusal("bad magic", (const uint8_t *)"BM\1\0\1\0\0\0\0\0", 10, NULL,
                   "image: unsupported format (not JPEG, PNG, WebP or GIF)");
    expect_refusal("RIFF not WebP", (const uint8_t *)"RIFF\4\0\0\0WAVE", 12, NULL, "image: unsupported format");
    expect_refusal("empty", png, 0, NULL, "image: unsupported format (not JPEG, PNG, WebP or GIF)");
    expect_refusal("truncated PNG", png, pn / 2, NULL, "image: cannot decode PNG: truncated file");
    expect_refusal("PNG header only", png, 40, NULL, "image: cannot decode PNG: truncated file");
    expect_refusal("truncated JPEG", jpg, jn / 2, NULL, "image: cannot decode JPEG: Premature end of JPEG file");
    image_limits lim = image_limits_default();
    lim.max_pixels = 100000;
    expect_refusal("too many pixels PNG", png, pn, &lim, "image: 520x400 is 208000 pixels, over the limit of 100000");
    lim.max_pixels = 50000;
    expect_refusal("too many pixels JPEG", jpg, jn, &lim, "image: 320x240 is 76800 pixels, over the limit of 50000");
    lim = image_limits_default();
    lim.max_bytes = 1000;
    expect_refusal("too many bytes", png, pn, &lim, "image: 327898 bytes encoded, over the limit of 1000");
    /* declared sizes refused from the header, before any pixel buffer */
    png_set_size(png, 10000, 10000);
    expect_refusal("PNG 10000x10000", png, pn, NULL, "image: 10000x10000 is 100000000 pixels, over the limit of 50000000");
    png_set_size(png, 20000, 10);
    expect_refusal("PNG 20000 wide", png, pn, NULL, "image: 20000x10 has a side over the limit of 16384 pixels");
    CHECK(jpeg_set_size(jpg, jn, 20000, 20000) == 0, "no SOF marker");
    expect_refusal("JPEG 20000x20000", jpg, jn, NULL, "image: 20000x20000 has a side over the limit of 16384 pixels");
    jpeg_set_size(jpg, jn, 10000, 10000);
    expect_refusal("JPEG 10000x10000", jpg, jn, NULL, "image: 10000x10000 is 100000000 pixels, over the limit of 50000000");
    jpeg_set_size(jpg, jn, 0, 10);
    expect_refusal("JPEG zero width", jpg, jn, NULL, "image: cannot decode JPEG: ");
    free(png);
    free(jpg);

    char err[256] = "";
    uint8_t px[3 * 4] = {0};
    image_prep *p = image_prep_create(px, 2, 2, 100, err, sizeof err);
    CHECK(!p && !strcmp(err, "image_prep: max_soft_tokens 100 is not one of 70, 140, 280, 560, 1120"), "%s", err);
    image_prep_destroy(p);
    p = image_prep_create(px, 2, 0, 280, err, sizeof err);
    CHECK(!p && !strcmp(err, "image_prep: image of 2x0 has no pixels"), "%s", err);
    image_prep_destroy(p);
}

static void put24(uint8_t *b, uint32_t v) { b[0] = v & 255, b[1] = v >> 8 & 255, b[2] = v >> 16 & 255; }
static void put16(uint8_t *b, uint16_t v) { b[0] = v & 255, b[1] = v >> 8; }

/* one line each for cut, forged and broken WebP files; the forged sizes refused from the headers */
static void test_refusals_webp(void)
{
    size_t ln = 0, an = 0, yn = 0;
    uint8_t *ll = slurp("webp_lossless_57x43.webp", &ln), *anim = slurp("webp_anim_offset_60x50.webp", &an),
            *lossy = slurp("webp_lossy_83x61.webp", &yn);
    CHECK(ll && anim && lossy && !memcmp(ll + 12, "VP8L", 4) && !memcmp(anim + 12, "VP8X", 4) &&
              !memcmp(lossy + 12, "VP8 ", 4), "WebP fixtures missing or not as written");
    if (!ll || !anim || !lossy) { free(ll); free(anim); free(lossy); return; }
    expect_refusal("WebP magic only", ll, 12, NULL, "image: cannot decode WebP: truncated file");
    expect_refusal("WebP header only", ll, 25, NULL, "image: cannot decode WebP: truncated file");
    expect_refusal("truncated WebP", ll, ln / 2, NULL, "image: cannot decode WebP: truncated file");
    expect_refusal("truncated animated WebP", anim, an - 9, NULL, "image: cannot decode WebP: truncated file");
    expect_refusal("truncated lossy WebP", lossy, yn - 40, NULL, "image: cannot decode WebP: truncated file");
    image_limits lim = image_limits_default();
    lim.max_pixels = 2000;
    expect_refusal("too many pixels WebP", ll, ln, &lim, "image: 57x43 is 2451 pixels, over the limit of 2000");
    /* VP8X: canvas width and height less one, 24 bits each at bytes 24 and 27 */
    put24(anim + 24, 20000 - 1), put24(anim + 27, 20000 - 1);
    expect_refusal("WebP canvas 20000x20000", anim, an, NULL, "image: 20000x20000 has a side over the limit of 16384");
    put24(anim + 24, 10000 - 1), put24(anim + 27, 10000 - 1);
    expect_refusal("WebP canvas 10000x10000", anim, an, NULL,
                   "image: 10000x10000 is 100000000 pixels, over the limit of 50000000");
    put24(anim + 24, 16 - 1), put24(anim + 27, 16 - 1); /* the first frame (24x20 at 10,6) no longer fits */
    expect_refusal("WebP frame past the canvas", anim, an, NULL, "image: cannot decode WebP: malformed container");
    /* VP8L: 14 bits of width less one, then 14 of height, after the 0x2f signature at byte 20 */
    uint32_t bits = (uint32_t)ll[21] | (uint32_t)ll[22] << 8 | (uint32_t)ll[23] << 16 | (uint32_t)ll[24] << 24;
    uint32_t big = (bits & 0xf0000000u) | 0x3fffu | 0x3fffu << 14;
    uint8_t save[4];
    memcpy(save, ll + 21, 4);
    ll[21] = big & 255, ll[22] = big >> 8 & 255, ll[23] = big >> 16 & 255, ll[24] = big >> 24;
    expect_refusal("WebP lossless 16384x16384", ll, ln, NULL,
                   "image: 16384x16384 is 268435456 pixels, over the limit of 50000000");
    memcpy(ll + 21, save, 4);
    for (size_t i = 40; i < ln; i++) ll[i] = (uint8_t)(i * 151u); /* the entropy-coded image as noise */
    expect_refusal("corrupt WebP lossless", ll, ln, NULL, "image: cannot decode WebP: corrupt bitstream");
    /* VP8 key frame: 14-bit width and height at bytes 26 and 28 */
    put16(lossy + 26, 0);
    expect_refusal("WebP lossy zero width", lossy, yn, NULL, "image: cannot decode WebP: corrupt bitstream");
    put16(lossy + 26, 83), put16(lossy + 28, 16383);
    expect_refusal("WebP lossy 83x16383", lossy, yn, &lim, "image: 83x16383 is 1359789 pixels, over the limit of 2000");
    free(ll);
    free(anim);
    free(lossy);
}

/* one line each for cut, forged and broken GIF files; the forged sizes refused from the headers */
static void test_refusals_gif(void)
{
    size_t gn = 0, on = 0;
    uint8_t *g = slurp("gif_global_64x40.gif", &gn), *off = slurp("gif_offset_40x30.gif", &on);
    /* gif_offset_40x30.gif: screen, a 16-entry global palette, then the image descriptor at byte 61 */
    const size_t desc = 13 + 16 * 3;
    CHECK(g && off && on > desc + 10 && off[desc] == ',', "GIF fixtures missing or not as written");
    if (!g || !off || on <= desc + 10 || off[desc] != ',') { free(g); free(off); return; }
    expect_refusal("GIF magic only", g, 6, NULL, "image: cannot decode GIF: ");
    expect_refusal("GIF screen only", g, 13, NULL, "image: cannot decode GIF: ");
    expect_refusal("truncated GIF", g, gn / 2, NULL, "image: cannot decode GIF: ");
    expect_refusal("GIF cut in its descriptor", off, desc + 5, NULL, "image: cannot decode GIF: ");
    uint8_t *end = malloc(desc + 1);
    if (end) {
        memcpy(end, off, desc);
        end[desc] = ';';
        expect_refusal("GIF without an image", end, desc + 1, NULL, "image: GIF has no image");
        free(end);
    }
    image_limits lim = image_limits_default();
    lim.max_pixels = 1000;
    expect_refusal("too many pixels GIF", off, on, &lim, "image: 40x30 is 1200 pixels, over the limit of 1000");
    /* the logical screen's width and height at bytes 6 and 8; the frame's box after the descriptor's ',' */
    put16(off + 6, 20000), put16(off + 8, 20000);
    expect_refusal("GIF screen 20000x20000", off, on, NULL, "image: 20000x20000 has a side over the limit of 16384");
    put16(off + 6, 0), put16(off + 8, 0);
    put16(off + desc + 1, 9000), put16(off + desc + 3, 9000); /* the frame's offset grows the image */
    expect_refusal("GIF frame 9017x9011", off, on, NULL, "image: 9017x9011 is 81252187 pixels, over the limit of 50000000");
    put16(off + desc + 1, 5), put16(off + desc + 3, 7);
    put16(off + desc + 5, 0);
    expect_refusal("GIF frame of zero width", off, on, NULL, "image: GIF frame of zero size (0x11)");
    put16(off + desc + 5, 17);
    memset(off + desc + 12, 0xff, on - desc - 14); /* LZW codes past the table */
    expect_refusal("corrupt GIF data", off, on, NULL, "image: cannot decode GIF: ");
    free(g);
    free(off);
}

int main(void)
{
    RUN_TEST(test_decode_matches_pillow);
    RUN_TEST(test_size_rule_matches_transformers);
    RUN_TEST(test_prep_matches_transformers);
    RUN_TEST(test_resize_matches_pillow);
    RUN_TEST(test_resize_skipped_when_size_matches);
    RUN_TEST(test_refusals);
    RUN_TEST(test_refusals_webp);
    RUN_TEST(test_refusals_gif);
    CHECK_EXIT();
}
