/* image_codec.h — what image.c shares with the format decoders behind it (image_jpeg_png.c,
 * image_webp_gif.c): the one limit check, the one pixel allocation and Pillow's compositing onto white. */
#ifndef CLGEMMA_IMAGE_CODEC_H
#define CLGEMMA_IMAGE_CODEC_H
#include "image.h"

/* w x h against the limits, from the header before any pixel buffer exists; -1 with one line in err */
int image_check_size(const image_limits *lim, uint64_t w, uint64_t h, char *err, size_t errlen);
/* an image of checked size, pixels uninitialised */
image_rgb *image_alloc(int w, int h, char *err, size_t errlen);

/* Pillow's alpha_composite of an RGBA pixel over opaque white (AlphaComposite.c, 7 bits of precision) */
static inline uint8_t image_over_white(unsigned v, unsigned a)
{
    if (a == 255) return (uint8_t)v;
    if (a == 0) return 255;
    unsigned t = (v * a + 255u * (255u - a)) * 128u + (0x80u << 7);
    return (uint8_t)((((t >> 8) + t) >> 8) >> 7);
}

/* each takes a buffer whose magic bytes named its format; NULL with one "image: ..." line on refusal */
image_rgb *image_decode_jpeg(const uint8_t *data, size_t n, const image_limits *lim, char *err, size_t errlen);
image_rgb *image_decode_png(const uint8_t *data, size_t n, const image_limits *lim, char *err, size_t errlen);
image_rgb *image_decode_webp(const uint8_t *data, size_t n, const image_limits *lim, char *err, size_t errlen);
image_rgb *image_decode_gif(const uint8_t *data, size_t n, const image_limits *lim, char *err, size_t errlen);

#endif
