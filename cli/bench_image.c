/* bench_image.c — see bench_image.h. */
#include "bench_image.h"

#include <png.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { CELL = 48 }; /* one soft token: a 3 x 3 block of 16-pixel patches */

void bench_image_size(int tokens, int *w, int *h)
{
    int b = 1;
    for (int d = 1; d * d <= tokens; d++)
        if (tokens % d == 0) b = d; /* the largest divisor up to sqrt: the squarest grid */
    *w = CELL * (tokens / b);
    *h = CELL * b;
}

/* splitmix64 of (index, block): the noise is blocky (8 x 8 pixels), so PNG compresses it but no two indices
 * share pixels */
static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

unsigned char *bench_image_png(int tokens, unsigned index, size_t *len)
{
    int w, h;
    bench_image_size(tokens, &w, &h);
    unsigned char *rgb = malloc((size_t)w * (size_t)h * 3);
    if (!rgb) return NULL;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            unsigned char *p = rgb + ((size_t)y * (size_t)w + (size_t)x) * 3;
            uint64_t r = mix(((uint64_t)index << 40) ^ ((uint64_t)(y / 8) << 20) ^ (uint64_t)(x / 8));
            p[0] = (unsigned char)(x * 255 / w + index * 37u);
            p[1] = (unsigned char)(y * 255 / h + index * 91u);
            p[2] = (unsigned char)r;
        }
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    im.width = (png_uint_32)w;
    im.height = (png_uint_32)h;
    im.format = PNG_FORMAT_RGB;
    png_alloc_size_t n = PNG_IMAGE_PNG_SIZE_MAX(im); /* a bound: one compression pass, not a sizing pass too */
    unsigned char *png = malloc(n);
    if (png && !png_image_write_to_memory(&im, png, &n, 0, rgb, 0, NULL)) {
        free(png);
        png = NULL;
    }
    png_image_free(&im);
    free(rgb);
    *len = png ? (size_t)n : 0;
    return png;
}
