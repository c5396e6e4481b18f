/* api_video.h — video_url parts made into frames: the file decoded (opencl video.h), the frames transformers'
 * Gemma 4 processor samples prepared for the engine at 70 tokens each, with their times. api_chat.c calls it
 * on the request thread before the images are prepared; the frames then go the way a video part's frames go. */
#ifndef CLGEMMA_API_VIDEO_H
#define CLGEMMA_API_VIDEO_H

#include "api_error.h"
#include "api_image.h"
#include "engine.h"
#include "fetch.h"

/* each video_url entry of (*images)[0, *n) (an http(s) URL fetched under rules first) replaced by its sampled
 * frames in place (frame k, its seconds, the part's param, ready: prepared). -1 with a 400 naming the part (the
 * array as it was: the caller frees it). */
int api_video_expand(const engine *e, const fetch_rules *rules, api_image **images, int *n, api_error *err);

#endif
