/* fuzz_image.c — libFuzzer target for the image decoder (JPEG, PNG, WebP, GIF) and the Gemma 4
 * preprocessing after it.
 *
 * Input bytes go to image_decode under tight limits (the fuzzer's -malloc_limit_mb then proves every
 * pixel allocation is bounded by them) and, when accepted, through image_prep_create at the smallest
 * token budget (test_image_prep covers the others against references). Checks the promises rather than just touching memory: an accepted
 * image is within the limits and every byte of it readable; a refusal leaves one "image: ..." line;
 * the prepared rows are in [0, 1], the counts agree with the grid and the positions walk it.
 * Only our code is instrumented: the system libjpeg / libpng / libwebp / giflib run as shipped.
 *
 * Build: tests/suites/fuzz_image.sh (clang -fsanitize=fuzzer,address,undefined). */
#include "image.h"
#include "image_prep.h"

#include <stdint.h>
#include <string.h>

#define REQUIRE(c) do { if (!(c)) __builtin_trap(); } while (0)

static void check_refusal(const char *err, const char *prefix)
{
    size_t n = strlen(err);
    REQUIRE(n > strlen(prefix) && !strncmp(err, prefix, strlen(prefix)));
    REQUIRE(!memchr(err, '\n', n));
}

static void check_prep(const image_rgb *im, int max_soft_tokens)
{
    char err[256] = "";
    image_prep *p = image_prep_create(im->rgb, im->w, im->h, max_soft_tokens, err, sizeof err);
    REQUIRE(p); /* every decoded image has a size under every budget */
    REQUIRE(p->w % 48 == 0 && p->h % 48 == 0 && p->gw * 16 == p->w && p->gh * 16 == p->h);
    REQUIRE(p->n_patches == p->gw * p->gh && p->soft_tokens * 9 == p->n_patches);
    REQUIRE(p->soft_tokens <= max_soft_tokens);
    for (size_t i = 0; i < (size_t)p->n_patches * 16 * 16 * 3; i++) REQUIRE(p->pixels[i] >= 0 && p->pixels[i] <= 1);
    for (int i = 0; i < p->n_patches; i++) REQUIRE(p->pos[2 * i] == i % p->gw && p->pos[2 * i + 1] == i / p->gw);
    image_prep_destroy(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* 4 Mpx of RGB is 12 MB: well under the run's -malloc_limit_mb */
    image_limits lim = {.max_bytes = 1 << 20, .max_pixels = 1 << 22, .max_side = 8192};
    char err[256] = "";
    image_rgb *im = image_decode(data, size, &lim, err, sizeof err);
    if (!im) {
        check_refusal(err, "image: ");
        return 0;
    }
    REQUIRE(im->w > 0 && im->h > 0 && im->w <= lim.max_side && im->h <= lim.max_side);
    REQUIRE((uint64_t)im->w * im->h <= lim.max_pixels);
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < (size_t)im->w * im->h * 3; i++) sink ^= im->rgb[i]; /* ASan checks each byte */
    (void)sink;
    check_prep(im, 70); /* the smallest budget: larger ones cost seconds a run under ASan */
    image_destroy(im);
    return 0;
}
