/* image.h — JPEG, PNG, WebP and GIF held in memory decoded into packed RGB8 under caller-given limits.
 * Host only (no OpenCL). The format is sniffed from the magic bytes, never from a declared type; of an
 * animated WebP or GIF only the first frame, as Pillow's Image.open shows it. Alpha, palette, gray and
 * 16-bit images come out as RGB with alpha composited onto white, the way transformers' convert_to_rgb
 * (Pillow's alpha_composite) does; 16-bit samples keep their high byte (where Pillow clips 16-bit gray to
 * 255: docs/design-vision.md 7). Every refusal is one line in err. */
#ifndef CLGEMMA_IMAGE_H
#define CLGEMMA_IMAGE_H
#include <stddef.h>
#include <stdint.h>

#define IMAGE_MAX_BYTES_DEFAULT  ((size_t)64 << 20) /* encoded */
#define IMAGE_MAX_PIXELS_DEFAULT 50000000ull        /* decoded w * h */
#define IMAGE_MAX_SIDE_DEFAULT   16384              /* each side */

typedef struct {
    size_t max_bytes;    /* encoded input size */
    uint64_t max_pixels; /* width * height, checked from the header before any pixel allocation */
    int max_side;        /* width and height each */
} image_limits;

typedef struct {
    int w, h;
    uint8_t *rgb; /* h rows of w pixels, 3 bytes each (R, G, B) */
} image_rgb;

/* the defaults above */
image_limits image_limits_default(void);

/* NULL lim means the defaults. Returns NULL with one "image: ..." line in err on any refusal. */
image_rgb *image_decode(const uint8_t *data, size_t n, const image_limits *lim, char *err, size_t errlen);
void image_destroy(image_rgb *im);

#endif
