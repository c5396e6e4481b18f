/* bench_image.h — the images `clgemma vbench` encodes: made in memory, deterministic, PNG-encoded (libpng), each
 * of a size that both processors keep as it is at a budget of T soft tokens: sides multiples of 48 (3 x 3 patches
 * of 16) with exactly T cells of 48 x 48, the cell grid as near square as T's divisors allow (transformers'
 * size rule scales by exactly 1 there; llama.cpp's --image-min-tokens T --image-max-tokens T neither grows nor
 * shrinks it). Distinct indices give distinct pixels, so the engine's image cache never mistakes one for
 * another. */
#ifndef CLGEMMA_CLI_BENCH_IMAGE_H
#define CLGEMMA_CLI_BENCH_IMAGE_H

#include <stddef.h>

/* the image size of budget tokens (> 0): *w x *h pixels */
void bench_image_size(int tokens, int *w, int *h);
/* image `index` of budget tokens as PNG bytes (malloc'd, *len bytes); NULL when out of memory or libpng fails */
unsigned char *bench_image_png(int tokens, unsigned index, size_t *len);

#endif
