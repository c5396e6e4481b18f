/* image_prep.h — transformers' Gemma 4 image preprocessing on the host, as its PIL backend
 * (Gemma4ImageProcessorPil) computes it: the aspect-preserving size rule, Pillow's bicubic resize
 * with antialias, rescale by 1/255, patches in rows of p*p*3 values and their grid positions.
 * docs/design-vision.md 1.2 and 4.5. No OpenCL. */
#ifndef CLGEMMA_IMAGE_PREP_H
#define CLGEMMA_IMAGE_PREP_H
#include <stddef.h>
#include <stdint.h>

#define IMAGE_PREP_PATCH 16 /* patch_size */
#define IMAGE_PREP_POOL  3  /* pooling_kernel_size: soft tokens are k*k patches */

typedef struct {
    int w, h;         /* the resized image */
    int gw, gh;       /* patch grid: w / 16, h / 16 */
    int n_patches;    /* gw * gh */
    int soft_tokens;  /* n_patches / 9: the placeholder count */
    float *pixels;    /* [n_patches][16 * 16 * 3]: patches row-major, values in (row, col, channel) order */
    int32_t *pos;     /* [n_patches][2]: (x, y) = (i mod gw, i div gw) */
} image_prep;

/* The size rule (get_aspect_ratio_preserving_size): the target (w, h) for an image of w x h under
 * max_soft_tokens. -1 with one "image_prep: ..." line in err where transformers raises. */
int image_prep_size(int w, int h, int max_soft_tokens, int *tw, int *th, char *err, size_t errlen);

/* Pillow's Image.resize((ow, oh), BICUBIC) of packed RGB8; out holds ow * oh * 3 bytes. -1 on no memory. */
int image_prep_resize(const uint8_t *rgb, int w, int h, uint8_t *out, int ow, int oh, char *err, size_t errlen);

/* max_soft_tokens: 70, 140, 280, 560 or 1120. NULL with one line in err on refusal. */
image_prep *image_prep_create(const uint8_t *rgb, int w, int h, int max_soft_tokens, char *err, size_t errlen);
void image_prep_destroy(image_prep *p);

#endif
