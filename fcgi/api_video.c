/* api_video.c — see api_video.h. Each frame is prepared as soon as it is decoded, so a request holds one
 * full-size frame at a time (the prepared ones are 70 tokens' worth). */
#include "api_video.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "video.h"

typedef struct {
    const engine *e;
    const api_image *part; /* the video_url entry being decoded */
    api_image *out;        /* the new array */
    int n, cap;
} expand_ctx;

/* room for one more entry in the new array; -1 when there is no memory */
static int grow(expand_ctx *x)
{
    if (x->n < x->cap) return 0;
    int cap = x->cap ? 2 * x->cap : 16;
    api_image *g = realloc(x->out, (size_t)cap * sizeof *g);
    if (!g) return -1;
    x->out = g;
    x->cap = cap;
    return 0;
}

static int on_frame(void *ctx, const image_rgb *f, int k, int n, int64_t index, double seconds, char *err,
                    size_t errlen)
{
    (void)n;
    (void)index;
    expand_ctx *x = ctx;
    if (grow(x)) { snprintf(err, errlen, "out of memory"); return -1; }
    engine_image *im = engine_image_prepare_rgb(x->e, f->rgb, f->w, f->h, API_VIDEO_TOKENS, err, errlen);
    if (!im) return -1;
    api_image *fr = &x->out[x->n++];
    memset(fr, 0, sizeof *fr);
    fr->frame = k;
    fr->seconds = seconds;
    fr->max_tokens = API_VIDEO_TOKENS;
    fr->ready = im;
    fr->ready_free = engine_image_destroy;
    snprintf(fr->param, sizeof fr->param, "%s", x->part->param);
    return 0;
}

int api_video_expand(const engine *e, const fetch_rules *rules, api_image **images, int *n, api_error *err)
{
    int videos = 0;
    for (int i = 0; i < *n; i++) videos += (*images)[i].video;
    if (!videos) return 0;
    expand_ctx x = { e, NULL, NULL, 0, 0 };
    video_limits lim = video_limits_default();
    lim.max_frames = API_VIDEO_MAX_FRAMES;
    int rc = 0;
    char why[256] = "";
    const api_image *failed = NULL;
    const char *fparam = NULL; /* the field a refusal names: the part, or its URL's */
    for (int i = 0; i < *n && !rc; i++) {
        api_image *im = &(*images)[i];
        if (!im->video) { /* moved as it is: the new array owns it */
            if (!(rc = grow(&x))) x.out[x.n++] = *im;
            continue;
        }
        x.part = im;
        unsigned char *got = NULL;
        size_t len = 0;
        if (im->url && fetch_get(rules, im->url, &got, &len, why, sizeof why)) {
            rc = -1;
            failed = im;
            fparam = im->url_param;
        } else if (video_decode(got ? got : im->bytes, got ? len : im->len, &lim, on_frame, &x, why, sizeof why) < 0) {
            rc = -1;
            failed = im;
        }
        free(got);
    }
    if (rc) { /* the frames made so far dropped; the entries kept are still the caller's */
        for (int i = 0; i < x.n; i++)
            if (x.out[i].ready) api_image_free(&x.out[i]);
        free(x.out);
        if (!failed) return api_fail(err, 500, "server_error", NULL, NULL, "out of memory");
        if (fparam) return api_fail(err, 400, "invalid_request_error", NULL, fparam, "'%s': %s", fparam, why);
        return api_fail(err, 400, "invalid_request_error", NULL, failed->param, "%s: %s", failed->param, why);
    }
    for (int i = 0; i < *n; i++)
        if ((*images)[i].video) api_image_free(&(*images)[i]); /* the file's bytes: its frames are made */
    free(*images);
    *images = x.out;
    *n = x.n;
    return 0;
}
