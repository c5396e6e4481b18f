/* image_prep.c — see image_prep.h. The size rule follows transformers' get_aspect_ratio_preserving_size
 * (image_processing_gemma4.py:33-84, docs/design-vision.md 1.2) operation for operation in double; the
 * resize follows Pillow's ImagingResample (libImaging/Resample.c) to the bit. */
#include "image_prep.h"
#include "errf.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define P IMAGE_PREP_PATCH
#define K IMAGE_PREP_POOL
#define SIDE (K * P) /* both target sides are multiples of 48 */

/* Pillow's fixed point for 8-bit bands: 22 fraction bits leave room for the sum of 8-bit products */
#define PRECISION_BITS (32 - 8 - 2)

int image_prep_size(int w, int h, int max_soft_tokens, int *tw, int *th, char *err, size_t errlen)
{
    if (w <= 0 || h <= 0) return ERR("image_prep: image of %dx%d has no pixels", w, h);
    long long max_patches = (long long)max_soft_tokens * K * K;
    long long target_px = max_patches * P * P;
    double factor = sqrt((double)target_px / (double)((long long)h * w));
    long long oh = (long long)floor(factor * h / SIDE) * SIDE;
    long long ow = (long long)floor(factor * w / SIDE) * SIDE;
    if (oh == 0 && ow == 0)
        return ERR("image_prep: %dx%d would resize to 0x0 under %d soft tokens", w, h, max_soft_tokens);
    long long max_side = (max_patches / (K * K)) * SIDE;
    if (oh == 0) { /* a very wide image: one row of patch groups */
        oh = SIDE;
        ow = (long long)floor((double)w / (double)h) * SIDE;
        if (ow > max_side) ow = max_side;
    } else if (ow == 0) {
        ow = SIDE;
        oh = (long long)floor((double)h / (double)w) * SIDE;
        if (oh > max_side) oh = max_side;
    }
    if (oh * ow > target_px)
        return ERR("image_prep: %dx%d resizes to %lldx%lld, over %lld pixels for %d soft tokens", w, h, ow, oh,
                   target_px, max_soft_tokens);
    *tw = (int)ow;
    *th = (int)oh;
    return 0;
}

static double bicubic(double x)
{
    const double a = -0.5; /* Pillow's; torchvision uses -0.75 */
    if (x < 0) x = -x;
    if (x < 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
    if (x < 2) return (((x - 5) * x + 8) * x - 4) * a;
    return 0;
}

/* Pillow's precompute_coeffs + normalize_coeffs_8bpc: per output pixel the first input index,
 * the tap count and ksize fixed-point weights. Returns ksize, 0 on no memory. */
static int coeffs(int in_size, int out_size, int **bounds_out, int32_t **kk_out)
{
    double scale = (double)in_size / out_size, filterscale = scale < 1 ? 1 : scale;
    double support = 2.0 * filterscale; /* antialias: the kernel widens with the downscale factor */
    int ksize = (int)ceil(support) * 2 + 1;
    int *bounds = malloc(sizeof(int) * 2 * (size_t)out_size);
    int32_t *kk = malloc(sizeof(int32_t) * (size_t)ksize * (size_t)out_size);
    double *k = malloc(sizeof(double) * (size_t)ksize);
    if (!bounds || !kk || !k) {
        free(bounds), free(kk), free(k);
        return 0;
    }
    for (int xx = 0; xx < out_size; xx++) {
        double center = (xx + 0.5) * scale, ww = 0, ss = 1.0 / filterscale;
        int xmin = (int)(center - support + 0.5), xmax = (int)(center + support + 0.5);
        if (xmin < 0) xmin = 0;
        if (xmax > in_size) xmax = in_size;
        xmax -= xmin;
        for (int x = 0; x < xmax; x++) ww += k[x] = bicubic((x + xmin - center + 0.5) * ss);
        for (int x = 0; x < ksize; x++) {
            double v = x < xmax ? (ww != 0 ? k[x] / ww : k[x]) : 0;
            kk[(size_t)xx * ksize + x] = (int32_t)(v < 0 ? -0.5 + v * (1 << PRECISION_BITS) : 0.5 + v * (1 << PRECISION_BITS));
        }
        bounds[2 * xx] = xmin;
        bounds[2 * xx + 1] = xmax;
    }
    free(k);
    *bounds_out = bounds;
    *kk_out = kk;
    return ksize;
}

static uint8_t clip8(int32_t v)
{
    if (v >= (1 << PRECISION_BITS << 8)) return 255;
    if (v <= 0) return 0;
    return (uint8_t)(v >> PRECISION_BITS);
}

/* one output value: taps at in[0], in[stride], ... */
static uint8_t tap(const uint8_t *in, size_t stride, const int32_t *k, int n)
{
    int32_t ss = 1 << (PRECISION_BITS - 1);
    for (int i = 0; i < n; i++) ss += in[(size_t)i * stride] * k[i];
    return clip8(ss);
}

int image_prep_resize(const uint8_t *rgb, int w, int h, uint8_t *out, int ow, int oh, char *err, size_t errlen)
{
    if (ow == w && oh == h) { /* Pillow copies */
        memcpy(out, rgb, (size_t)w * h * 3);
        return 0;
    }
    int *bh = NULL, *bv = NULL;
    int32_t *kh = NULL, *kv = NULL;
    uint8_t *tmp = NULL;
    int ksh = coeffs(w, ow, &bh, &kh), ksv = ksh ? coeffs(h, oh, &bv, &kv) : 0;
    int rc = -1;
    if (!ksv) goto done;
    const uint8_t *src = rgb;
    int y_first = 0;
    if (ow != w) { /* horizontal pass over the rows the vertical pass reads */
        y_first = bv[0];
        int y_last = bv[2 * oh - 2] + bv[2 * oh - 1];
        tmp = malloc((size_t)ow * (size_t)(y_last - y_first) * 3);
        if (!tmp) goto done;
        for (int y = y_first; y < y_last; y++)
            for (int x = 0; x < ow; x++)
                for (int c = 0; c < 3; c++)
                    tmp[((size_t)(y - y_first) * ow + x) * 3 + c] =
                        tap(rgb + ((size_t)y * w + bh[2 * x]) * 3 + c, 3, kh + (size_t)x * ksh, bh[2 * x + 1]);
        src = tmp;
    }
    if (oh != h) {
        for (int y = 0; y < oh; y++)
            for (size_t i = 0; i < (size_t)ow * 3; i++)
                out[(size_t)y * ow * 3 + i] =
                    tap(src + (size_t)(bv[2 * y] - y_first) * ow * 3 + i, (size_t)ow * 3, kv + (size_t)y * ksv, bv[2 * y + 1]);
    } else {
        memcpy(out, src, (size_t)ow * oh * 3);
    }
    rc = 0;
done:
    free(bh), free(bv), free(kh), free(kv), free(tmp);
    return rc ? ERR("image_prep: out of memory resizing %dx%d to %dx%d", w, h, ow, oh) : 0;
}

void image_prep_destroy(image_prep *p)
{
    if (!p) return;
    free(p->pixels);
    free(p->pos);
    free(p);
}

image_prep *image_prep_create(const uint8_t *rgb, int w, int h, int max_soft_tokens, char *err, size_t errlen)
{
    static const int allowed[] = {70, 140, 280, 560, 1120};
    int ok = 0;
    for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++) ok |= max_soft_tokens == allowed[i];
    if (!ok) {
        ERR("image_prep: max_soft_tokens %d is not one of 70, 140, 280, 560, 1120", max_soft_tokens);
        return NULL;
    }
    int tw, th;
    if (image_prep_size(w, h, max_soft_tokens, &tw, &th, err, errlen)) return NULL;
    image_prep *p = calloc(1, sizeof *p);
    uint8_t *img = malloc((size_t)tw * th * 3);
    if (!p || !img) {
        free(img);
        image_prep_destroy(p);
        ERR("image_prep: out of memory for %dx%d", tw, th);
        return NULL;
    }
    p->w = tw, p->h = th, p->gw = tw / P, p->gh = th / P;
    p->n_patches = p->gw * p->gh;
    p->soft_tokens = p->n_patches / (K * K);
    p->pixels = malloc(sizeof(float) * (size_t)p->n_patches * P * P * 3);
    p->pos = malloc(sizeof(int32_t) * 2 * (size_t)p->n_patches);
    int rc = !p->pixels || !p->pos ? ERR("image_prep: out of memory for %d patches", p->n_patches)
                                   : image_prep_resize(rgb, w, h, img, tw, th, err, errlen);
    if (rc) {
        free(img);
        image_prep_destroy(p);
        return NULL;
    }
    for (int i = 0; i < p->n_patches; i++) {
        int gx = i % p->gw, gy = i / p->gw;
        float *row = p->pixels + (size_t)i * P * P * 3;
        for (int r = 0; r < P; r++)
            for (int c = 0; c < P * 3; c++) /* (col, channel) are contiguous in the image row */
                row[r * P * 3 + c] = (float)(img[((size_t)(gy * P + r) * tw + gx * P) * 3 + c] * (1.0 / 255.0));
        p->pos[2 * i] = gx;
        p->pos[2 * i + 1] = gy;
    }
    free(img);
    return p;
}
