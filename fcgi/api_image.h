/* api_image.h — images in chat messages: OpenAI's image_url content parts read from the request (data: URLs,
 * or http(s) URLs that api_chat.c fetches where the server's allowlist lets it, fetch.h). api_chat.c prepares
 * them for the engine and places them where the chat template put their placeholders. */
#ifndef CLGEMMA_API_IMAGE_H
#define CLGEMMA_API_IMAGE_H

#include <stddef.h>

#include "api_error.h"

struct json_object;

#define API_VIDEO_TOKENS 70   /* soft tokens of a video frame: Gemma4VideoProcessor's max_soft_tokens */
#define API_VIDEO_MAX_FRAMES 32 /* frames of one video part at most: the processor's num_frames */
#define API_VIDEO_FPS 24      /* frames' seconds where the client gives no timestamps (transformers' default) */

/* an image part, or one frame of a video part, as the request gave it */
typedef struct api_image {
    unsigned char *bytes;     /* the data URL's payload, base64-decoded (owned) */
    size_t len;
    char *url;                /* instead: an http(s) URL to fetch (owned) */
    char url_param[128];      /* the request field that holds it, for errors */
    int max_tokens;           /* detail "low" and video frames: 70; else 0 (the server's budget) */
    int frame;                /* -1: an image; else its index in its video (frame 0 starts a video) */
    double seconds;           /* a frame's timestamp */
    char param[96];           /* "messages[i].content[j]" (".frames[k]"), for errors */
    int video;                /* a video_url part: bytes are a video file, frame 0, until api_video_expand */
    struct engine_image *ready; /* a video_url's frame: prepared as it was decoded (owned until taken) */
    void (*ready_free)(struct engine_image *); /* its destructor, so the parser links without the engine */
} api_image;

/* part: {"type": "image_url", "image_url": {"url": "data:image/<jpeg|png|webp|gif>;base64,..." or an http(s) URL, "detail":
 * "auto"|"low"|"high"}} (image_url may also be the URL string) into *out. -1 with a 400 in e. */
int  api_image_part(struct json_object *part, const char *param, api_image *out, api_error *e);
/* part: {"type": "video", "frames": [data URL or {"url": ...}, ...], "timestamps": [seconds, ...]} (video as
 * frames: 1..max_frames of them, each an image at 70 tokens; timestamps optional, else frame / 24 s, as
 * transformers assumes) appended to (*out)[*n...]. -1 with a 400 in e (what was appended stays for the
 * caller to free). */
int  api_video_part(struct json_object *part, const char *param, int max_frames, api_image **out, int *n,
                    api_error *e);
/* part: {"type": "video_url", "video_url": {"url": "data:video/<mp4|webm|quicktime|x-matroska>;base64,..."}}
 * (video_url may also be the URL string) appended to (*out)[*n] as one entry with video set: its frames come
 * from api_video_expand. -1 with a 400 in e. */
int  api_video_url_part(struct json_object *part, const char *param, api_image **out, int *n, api_error *e);
void api_image_free(api_image *im);

#endif
