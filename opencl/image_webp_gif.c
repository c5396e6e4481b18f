/* image_webp_gif.c — WebP and GIF for image.c: libwebp (+ libwebpdemux for the frame) and giflib, both
 * from memory. Only the first frame of an animation is decoded, and it comes out as Pillow's Image.open
 * shows it (WebPAnimDecoder's canvas; GifImagePlugin's first frame), then through convert_to_rgb. */
#include "image_codec.h"
#include "errf.h"

#include <gif_lib.h>
#include <stdlib.h>
#include <string.h>
#include <webp/decode.h>
#include <webp/demux.h>

/* ---- WebP ---- */

static const char *webp_status(VP8StatusCode st)
{
    switch (st) {
    case VP8_STATUS_OUT_OF_MEMORY: return "out of memory";
    case VP8_STATUS_INVALID_PARAM: return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR: return "corrupt bitstream";
    case VP8_STATUS_UNSUPPORTED_FEATURE: return "unsupported feature";
    case VP8_STATUS_NOT_ENOUGH_DATA: return "truncated file";
    default: return "decoding failed";
    }
}

/* one frame's bitstream decoded as RGBA into the canvas at its offset: the canvas's own rows are the stride */
static int webp_frame_into(const WebPIterator *it, uint8_t *canvas, int cw, char *err, size_t errlen)
{
    WebPDecoderConfig cfg;
    if (!WebPInitDecoderConfig(&cfg)) return ERR("image: libwebp version mismatch");
    VP8StatusCode st = WebPGetFeatures(it->fragment.bytes, it->fragment.size, &cfg.input);
    if (st != VP8_STATUS_OK) return ERR("image: cannot decode WebP frame: %s", webp_status(st));
    /* the demuxer checks the frame's box against the canvas; its bitstream must fill that box exactly */
    if (cfg.input.width != it->width || cfg.input.height != it->height)
        return ERR("image: WebP frame is %dx%d, its header says %dx%d", cfg.input.width, cfg.input.height,
                   it->width, it->height);
    size_t stride = (size_t)cw * 4;
    cfg.output.colorspace = MODE_RGBA; /* WebPAnimDecoder's default: straight alpha */
    cfg.output.is_external_memory = 1;
    cfg.output.u.RGBA.rgba = canvas + (size_t)it->y_offset * stride + (size_t)it->x_offset * 4;
    cfg.output.u.RGBA.stride = (int)stride;
    cfg.output.u.RGBA.size = stride * (size_t)(it->height - 1) + (size_t)it->width * 4;
    st = WebPDecode(it->fragment.bytes, it->fragment.size, &cfg);
    WebPFreeDecBuffer(&cfg.output); /* external memory: frees nothing of ours */
    if (st != VP8_STATUS_OK) return ERR("image: cannot decode WebP: %s", webp_status(st));
    return 0;
}

image_rgb *image_decode_webp(const uint8_t *data, size_t n, const image_limits *lim, char *err, size_t errlen)
{
    WebPBitstreamFeatures f;
    VP8StatusCode st = WebPGetFeatures(data, n, &f); /* the canvas size, from the headers alone */
    if (st != VP8_STATUS_OK) {
        ERR("image: cannot decode WebP: %s", webp_status(st));
        return NULL;
    }
    if (image_check_size(lim, (uint64_t)f.width, (uint64_t)f.height, err, errlen)) return NULL;
    WebPData wd = {data, n};
    WebPDemuxState ds;
    WebPDemuxer *dmx = WebPDemuxPartial(&wd, &ds); /* partial: to tell a truncated file from a bad one */
    WebPIterator it;
    int have_frame = 0;
    uint8_t *canvas = NULL;
    image_rgb *im = NULL;
    if (!dmx || ds != WEBP_DEMUX_DONE) {
        ERR("image: cannot decode WebP: %s", ds == WEBP_DEMUX_PARSE_ERROR ? "malformed container" : "truncated file");
        goto out;
    }
    if ((int)WebPDemuxGetI(dmx, WEBP_FF_CANVAS_WIDTH) != f.width ||
        (int)WebPDemuxGetI(dmx, WEBP_FF_CANVAS_HEIGHT) != f.height) {
        ERR("image: WebP canvas size disagrees with its header");
        goto out;
    }
    if (!(have_frame = WebPDemuxGetFrame(dmx, 1, &it))) {
        ERR("image: WebP has no frame");
        goto out;
    }
    /* transparent black, as WebPAnimDecoder clears its canvas before a key frame (the first always is) */
    canvas = calloc((size_t)f.width * (size_t)f.height, 4);
    if (!canvas) {
        ERR("image: out of memory for %dx%d pixels", f.width, f.height);
        goto out;
    }
    if (webp_frame_into(&it, canvas, f.width, err, errlen)) goto out;
    if (!(im = image_alloc(f.width, f.height, err, errlen))) goto out;
    /* Pillow opens a file without the alpha flag as RGBX: the alpha byte is dropped, not composited */
    const uint8_t *in = canvas;
    uint8_t *o = im->rgb;
    for (size_t i = 0; i < (size_t)f.width * (size_t)f.height; i++, in += 4, o += 3)
        for (int c = 0; c < 3; c++) o[c] = f.has_alpha ? image_over_white(in[c], in[3]) : in[c];
out:
    if (have_frame) WebPDemuxReleaseIterator(&it);
    WebPDemuxDelete(dmx);
    free(canvas);
    return im;
}

/* ---- GIF ---- */

typedef struct {
    const uint8_t *data;
    size_t n, at;
} gif_src;

static int gif_on_read(GifFileType *g, GifByteType *out, int len)
{
    gif_src *s = g->UserData;
    size_t k = len > 0 ? (size_t)len : 0;
    if (k > s->n - s->at) k = s->n - s->at;
    memcpy(out, s->data + s->at, k);
    s->at += k;
    return (int)k;
}

static const char *gif_error(int e)
{
    const char *s = GifErrorString(e); /* NULL for a code it does not know */
    return s ? s : "unknown error";
}

/* Pillow drops a palette whose entry i is (i, i, i) throughout and reads the indices as gray */
static int gif_gray_ramp(const ColorMapObject *m)
{
    for (int i = 0; i < m->ColorCount; i++)
        if (m->Colors[i].Red != i || m->Colors[i].Green != i || m->Colors[i].Blue != i) return 0;
    return 1;
}

/* an index as Pillow's frame 0 turned RGB shows it: the transparent index white, past the palette black */
static void gif_color(const ColorMapObject *pal, int trns, unsigned v, uint8_t *o)
{
    if ((int)v == trns) o[0] = o[1] = o[2] = 255;
    else if (!pal) o[0] = o[1] = o[2] = (uint8_t)v;
    else if ((int)v >= pal->ColorCount) o[0] = o[1] = o[2] = 0;
    else o[0] = pal->Colors[v].Red, o[1] = pal->Colors[v].Green, o[2] = pal->Colors[v].Blue;
}

/* up to the first image descriptor, read: the transparent index of its graphic control extension, or -1 */
static int gif_first_image(GifFileType *g, int *trns, char *err, size_t errlen)
{
    *trns = -1;
    for (;;) {
        GifRecordType rt;
        if (DGifGetRecordType(g, &rt) == GIF_ERROR) break;
        if (rt == TERMINATE_RECORD_TYPE) return ERR("image: GIF has no image");
        if (rt == IMAGE_DESC_RECORD_TYPE) {
            if (DGifGetImageDesc(g) == GIF_ERROR) break;
            return 0;
        }
        if (rt != EXTENSION_RECORD_TYPE) continue;
        int code;
        GifByteType *ext;
        if (DGifGetExtension(g, &code, &ext) == GIF_ERROR) break;
        /* Pillow takes the flag and index of every such block before the image; ext[0] is the length */
        if (code == GRAPHICS_EXT_FUNC_CODE && ext && ext[0] >= 4 && (ext[1] & 1)) *trns = ext[4];
        int rc = GIF_OK;
        while (ext && (rc = DGifGetExtensionNext(g, &ext)) == GIF_OK) {}
        if (rc == GIF_ERROR) break;
    }
    return ERR("image: cannot decode GIF: %s", gif_error(g->Error));
}

image_rgb *image_decode_gif(const uint8_t *data, size_t n, const image_limits *lim, char *err, size_t errlen)
{
    gif_src src = {data, n, 0};
    int e = 0, trns;
    GifFileType *g = DGifOpen(&src, gif_on_read, &e);
    if (!g) {
        ERR("image: cannot decode GIF: %s", gif_error(e));
        return NULL;
    }
    image_rgb *im = NULL;
    GifByteType *line = NULL;
    if (gif_first_image(g, &trns, err, errlen)) goto fail;
    const GifImageDesc *d = &g->Image;
    if (d->Width <= 0 || d->Height <= 0) {
        ERR("image: GIF frame of zero size (%dx%d)", d->Width, d->Height);
        goto fail;
    }
    /* Pillow grows the logical screen to hold a first frame that reaches past it */
    int x1 = d->Left + d->Width, y1 = d->Top + d->Height;
    int w = x1 > g->SWidth ? x1 : g->SWidth, h = y1 > g->SHeight ? y1 : g->SHeight;
    if (image_check_size(lim, (uint64_t)w, (uint64_t)h, err, errlen)) goto fail;
    const ColorMapObject *pal = g->SColorMap && !gif_gray_ramp(g->SColorMap) ? g->SColorMap : NULL;
    /* a gray-ramp local palette leaves Pillow on the global one (GifImagePlugin's palette = False) */
    if (d->ColorMap && !gif_gray_ramp(d->ColorMap)) pal = d->ColorMap;
    if (!(im = image_alloc(w, h, err, errlen)) || !(line = malloc((size_t)d->Width))) {
        if (im) ERR("image: out of memory for a GIF row");
        goto fail;
    }
    /* around the frame: the transparent index if there is one, else index 0 (not the background) */
    uint8_t fill[3];
    gif_color(pal, trns, trns >= 0 ? (unsigned)trns : 0, fill);
    for (size_t i = 0; i < (size_t)w * (size_t)h; i++) memcpy(im->rgb + i * 3, fill, 3);
    static const int start[4] = {0, 4, 2, 1}, step[4] = {8, 8, 4, 2}; /* the interlaced passes */
    for (int pass = 0; pass < (d->Interlace ? 4 : 1); pass++)
        for (int r = d->Interlace ? start[pass] : 0; r < d->Height; r += d->Interlace ? step[pass] : 1) {
            if (DGifGetLine(g, line, d->Width) == GIF_ERROR) {
                ERR("image: cannot decode GIF: %s", gif_error(g->Error));
                goto fail;
            }
            uint8_t *o = im->rgb + ((size_t)(d->Top + r) * (size_t)w + (size_t)d->Left) * 3;
            for (int x = 0; x < d->Width; x++, o += 3) gif_color(pal, trns, line[x], o);
        }
    free(line);
    DGifCloseFile(g, &e);
    return im;
fail:
    free(line);
    image_destroy(im);
    DGifCloseFile(g, &e);
    return NULL;
}
