/* api_image.h — images in chat messages: OpenAI's image_url content parts read from the request
 * (data: URLs only; a server that fetches URLs is an SSRF hazard). api_chat.c prepares them for the
 * engine and places them where the chat template put their placeholders. */
#ifndef CLGEMMA_API_IMAGE_H
#define CLGEMMA_API_IMAGE_H

#include <stddef.h>

#include "api_error.h"

struct json_object;

/* an image part as the request gave it */
typedef struct api_image {
    unsigned char *bytes;     /* the data URL's payload, base64-decoded (owned) */
    size_t len;
    int max_tokens;           /* detail "low": 70; else 0 (the server's budget) */
    char param[96];           /* "messages[i].content[j]", for errors */
} api_image;

/* part: {"type": "image_url", "image_url": {"url": "data:image/<jpeg|png|webp|gif>;base64,...", "detail":
 * "auto"|"low"|"high"}} (image_url may also be the URL string) into *out. -1 with a 400 in e. */
int  api_image_part(struct json_object *part, const char *param, api_image *out, api_error *e);
void api_image_free(api_image *im);

#endif
