/* image_jpeg_png.c — JPEG and PNG for image.c: libjpeg-turbo and libpng through their memory interfaces;
 * both report errors by longjmp back into the one function that set the jump, which frees what it allocated. */
#include "image_codec.h"
#include "errf.h"

#include <stdio.h> /* before jpeglib.h, which uses FILE */

#include <jerror.h>
#include <jpeglib.h>
#include <png.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

/* a progressive JPEG may repeat scans without end; libjpeg-turbo's own fuzzers stop at 500 */
#define JPEG_MAX_SCANS 500

/* ---- JPEG ---- */

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    char msg[JMSG_LENGTH_MAX];
} jpeg_fail;

static void jpeg_on_error(j_common_ptr c)
{
    jpeg_fail *f = (jpeg_fail *)c->err;
    c->err->format_message(c, f->msg);
    longjmp(f->jump, 1);
}

/* warnings are ignored as Pillow ignores them, except a premature end: Pillow refuses a truncated file */
static void jpeg_on_message(j_common_ptr c, int level)
{
    if (level < 0 && c->err->msg_code == JWRN_JPEG_EOF) jpeg_on_error(c);
}

static void jpeg_on_progress(j_common_ptr c)
{
    if (c->is_decompressor && ((j_decompress_ptr)c)->input_scan_number > JPEG_MAX_SCANS) {
        jpeg_fail *f = (jpeg_fail *)c->err;
        snprintf(f->msg, sizeof f->msg, "more than %d progressive scans", JPEG_MAX_SCANS);
        longjmp(f->jump, 1);
    }
}

image_rgb *image_decode_jpeg(const uint8_t *data, size_t n, const image_limits *lim, char *err, size_t errlen)
{
    struct jpeg_decompress_struct cinfo;
    struct jpeg_progress_mgr progress = {.progress_monitor = jpeg_on_progress};
    jpeg_fail fail;
    image_rgb *volatile im = NULL; /* volatile: read after longjmp */

    cinfo.err = jpeg_std_error(&fail.pub);
    fail.pub.error_exit = jpeg_on_error;
    fail.pub.emit_message = jpeg_on_message;
    fail.msg[0] = 0;
    if (setjmp(fail.jump)) {
        jpeg_destroy_decompress(&cinfo);
        image_destroy(im);
        if (err && errlen && !err[0]) ERR("image: cannot decode JPEG: %s", fail.msg);
        return NULL;
    }
    if (err && errlen) err[0] = 0;
    jpeg_create_decompress(&cinfo);
    cinfo.progress = &progress;
    jpeg_mem_src(&cinfo, data, (unsigned long)n);
    jpeg_read_header(&cinfo, TRUE);
    if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
        ERR("image: CMYK JPEG is not supported");
        longjmp(fail.jump, 1);
    }
    if (image_check_size(lim, cinfo.image_width, cinfo.image_height, err, errlen)) longjmp(fail.jump, 1);
    cinfo.out_color_space = JCS_RGB;
    jpeg_start_decompress(&cinfo);
    if (cinfo.output_components != 3) {
        ERR("image: JPEG decodes to %d components, not 3", cinfo.output_components);
        longjmp(fail.jump, 1);
    }
    im = image_alloc((int)cinfo.output_width, (int)cinfo.output_height, err, errlen);
    if (!im) longjmp(fail.jump, 1);
    while (cinfo.output_scanline < cinfo.output_height) {
        JSAMPROW row = im->rgb + (size_t)cinfo.output_scanline * (size_t)im->w * 3;
        jpeg_read_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_decompress(&cinfo);
    jpeg_destroy_decompress(&cinfo);
    return im;
}

/* ---- PNG ---- */

typedef struct {
    const uint8_t *data;
    size_t n, at;
    char msg[200];
} png_src;

static void png_on_error(png_structp png, png_const_charp msg)
{
    png_src *s = png_get_error_ptr(png);
    snprintf(s->msg, sizeof s->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;
}

static void png_on_read(png_structp png, png_bytep out, png_size_t len)
{
    png_src *s = png_get_io_ptr(png);
    if (len > s->n - s->at) png_error(png, "truncated file");
    memcpy(out, s->data + s->at, len);
    s->at += len;
}

image_rgb *image_decode_png(const uint8_t *data, size_t n, const image_limits *lim, char *err, size_t errlen)
{
    png_src src = {data, n, 0, {0}};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_on_error, png_on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    image_rgb *volatile im = NULL;  /* volatile: read after longjmp */
    uint8_t *volatile line = NULL;  /* one decoded row, RGB or RGBA */
    png_bytep *volatile rows = NULL; /* interlaced images are read whole */
    if (!info) {
        png_destroy_read_struct(png ? &png : NULL, NULL, NULL);
        ERR("image: out of memory for the PNG reader");
        return NULL;
    }
    if (err && errlen) err[0] = 0;
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, NULL);
        if (rows) for (int y = 0; im && y < im->h; y++) free(rows[y]);
        free(rows);
        free(line);
        image_destroy(im);
        if (err && errlen && !err[0]) ERR("image: cannot decode PNG: %s", src.msg);
        return NULL;
    }
    png_set_read_fn(png, &src, png_on_read);
    /* libpng's own size limits (a million a side) stay: ours below name the limit in the message */
    png_set_chunk_malloc_max(png, 8u << 20); /* compressed text / ICC bombs */
    png_read_info(png, info);
    png_uint_32 w, h;
    int depth, color, interlace;
    png_get_IHDR(png, info, &w, &h, &depth, &color, &interlace, NULL, NULL);
    if (image_check_size(lim, w, h, err, errlen)) png_longjmp(png, 1);
    png_set_expand(png);     /* palette to RGB, gray below 8 bits to 8, tRNS to an alpha channel */
    png_set_strip_16(png);   /* the high byte, as Pillow's 16-bit unpackers take it */
    png_set_gray_to_rgb(png);
    int passes = png_set_interlace_handling(png);
    png_read_update_info(png, info);
    int ch = png_get_channels(png, info);
    if ((ch != 3 && ch != 4) || png_get_bit_depth(png, info) != 8) {
        ERR("image: PNG decodes to %d channels of %d bits", ch, png_get_bit_depth(png, info));
        png_longjmp(png, 1);
    }
    im = image_alloc((int)w, (int)h, err, errlen);
    if (!im) png_longjmp(png, 1);
    if (passes > 1) { /* Adam7: every pass revisits every row */
        rows = calloc(h, sizeof *rows);
        if (!rows) png_error(png, "out of memory");
        for (png_uint_32 y = 0; y < h; y++)
            if (!(rows[y] = malloc((size_t)w * ch))) png_error(png, "out of memory");
        png_read_image(png, rows);
    } else {
        line = malloc((size_t)w * ch);
        if (!line) png_error(png, "out of memory");
    }
    for (png_uint_32 y = 0; y < h; y++) {
        uint8_t *in = rows ? rows[y] : line, *out = im->rgb + (size_t)y * w * 3;
        if (!rows) png_read_row(png, in, NULL);
        if (ch == 3) { memcpy(out, in, (size_t)w * 3); continue; }
        for (png_uint_32 x = 0; x < w; x++, in += 4, out += 3) {
            unsigned a = in[3];
            for (int c = 0; c < 3; c++) out[c] = image_over_white(in[c], a);
        }
    }
    /* the trailing chunks are not read: Pillow stops at the image data too */
    if (rows) for (png_uint_32 y = 0; y < h; y++) free(rows[y]);
    free(rows);
    free(line);
    png_destroy_read_struct(&png, &info, NULL);
    return im;
}
