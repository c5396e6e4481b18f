/* image.c — see image.h. The format is sniffed here and decoded by image_jpeg_png.c or image_webp_gif.c;
 * the limits, the allocation every decoder shares and the sniffing live here. */
#include "image_codec.h"
#include "errf.h"

#include <stdlib.h>
#include <string.h>

image_limits image_limits_default(void)
{
    return (image_limits){IMAGE_MAX_BYTES_DEFAULT, IMAGE_MAX_PIXELS_DEFAULT, IMAGE_MAX_SIDE_DEFAULT};
}

void image_destroy(image_rgb *im)
{
    if (!im) return;
    free(im->rgb);
    free(im);
}

int image_check_size(const image_limits *lim, uint64_t w, uint64_t h, char *err, size_t errlen)
{
    if (w == 0 || h == 0) return ERR("image: zero size (%llux%llu)", (unsigned long long)w, (unsigned long long)h);
    if (w > (uint64_t)lim->max_side || h > (uint64_t)lim->max_side)
        return ERR("image: %llux%llu has a side over the limit of %d pixels", (unsigned long long)w,
                   (unsigned long long)h, lim->max_side);
    if (w * h > lim->max_pixels)
        return ERR("image: %llux%llu is %llu pixels, over the limit of %llu", (unsigned long long)w,
                   (unsigned long long)h, (unsigned long long)(w * h), (unsigned long long)lim->max_pixels);
    return 0;
}

image_rgb *image_alloc(int w, int h, char *err, size_t errlen)
{
    image_rgb *im = calloc(1, sizeof *im);
    if (im) im->rgb = malloc((size_t)w * (size_t)h * 3);
    if (!im || !im->rgb) {
        image_destroy(im);
        ERR("image: out of memory for %dx%d pixels", w, h);
        return NULL;
    }
    im->w = w;
    im->h = h;
    return im;
}

image_rgb *image_decode(const uint8_t *data, size_t n, const image_limits *lim, char *err, size_t errlen)
{
    image_limits d = image_limits_default();
    if (!lim) lim = &d;
    if (n > lim->max_bytes) {
        ERR("image: %zu bytes encoded, over the limit of %zu", n, lim->max_bytes);
        return NULL;
    }
    static const uint8_t png_magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (n >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff)
        return image_decode_jpeg(data, n, lim, err, errlen);
    if (n >= 8 && !memcmp(data, png_magic, 8)) return image_decode_png(data, n, lim, err, errlen);
    if (n >= 12 && !memcmp(data, "RIFF", 4) && !memcmp(data + 8, "WEBP", 4))
        return image_decode_webp(data, n, lim, err, errlen);
    if (n >= 6 && (!memcmp(data, "GIF87a", 6) || !memcmp(data, "GIF89a", 6)))
        return image_decode_gif(data, n, lim, err, errlen);
    ERR("image: unsupported format (not JPEG, PNG, WebP or GIF)");
    return NULL;
}
