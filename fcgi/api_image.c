/* api_image.c — see api_image.h. Base64 through OpenSSL's decoder. */
#include "api_image.h"

#include <json-c/json.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int bad(api_error *e, const char *param, const char *fmt, const char *detail)
{
    return api_fail(e, 400, "invalid_request_error", NULL, param, fmt, param, detail);
}

/* strict base64 (padding only at the end) into a malloc'd buffer; -1 when it is not base64 */
static int base64(const char *s, size_t n, unsigned char **out, size_t *len)
{
    if (n == 0 || n % 4 || n > (size_t)1 << 30) return -1;
    unsigned char *b = malloc(n / 4 * 3 + 1);
    if (!b) return -1;
    int k = EVP_DecodeBlock(b, (const unsigned char *)s, (int)n);
    size_t pad = s[n - 1] == '=' ? (s[n - 2] == '=' ? 2 : 1) : 0;
    if (k < 0 || (size_t)k < pad || memchr(s, '=', n - pad)) { free(b); return -1; }
    *out = b;
    *len = (size_t)k - pad; /* EVP_DecodeBlock counts the padding's zero bytes */
    return 0;
}

/* url (a JSON string) as a data URL's bytes into out; p names it in errors */
static int data_url(json_object *url, const char *p, api_image *out, api_error *e)
{
    if (!url || json_object_get_type(url) != json_type_string) return bad(e, p, "'%s' must be a string%s", "");
    const char *u = json_object_get_string(url);
    size_t n = (size_t)json_object_get_string_len(url);
    if (!strncasecmp(u, "http://", 7) || !strncasecmp(u, "https://", 8)) { /* fetched, or not, by the server's rules */
        if (n != strlen(u)) return bad(e, p, "'%s': the URL holds a NUL character%s", "");
        if (!(out->url = strdup(u))) return api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
        snprintf(out->url_param, sizeof out->url_param, "%s", p);
        return 0;
    }
    static const char *const images[] = { "image/jpeg", "image/jpg", "image/png", "image/webp", "image/gif", NULL },
                          *const videos[] = { "video/mp4", "video/webm", "video/quicktime", "video/x-matroska", NULL };
    const char *const *types = out->video ? videos : images;
    const char *comma = memchr(u, ',', n);
    int known = 0;
    for (size_t i = 0; comma && types[i] && !known; i++) {
        size_t tl = strlen(types[i]);
        known = (size_t)(comma - u) == 5 + tl + 7 && !strncmp(u, "data:", 5) && !strncmp(u + 5, types[i], tl) &&
                !strncmp(u + 5 + tl, ";base64", 7);
    }
    if (!known)
        return bad(e, p, out->video ? "'%s' must be a data URL data:video/<mp4|webm|quicktime|x-matroska>;base64,<data>%s"
                                    : "'%s' must be a data URL data:image/<jpeg|png|webp|gif>;base64,<data>%s", "");
    if (base64(comma + 1, n - (size_t)(comma + 1 - u), &out->bytes, &out->len))
        return bad(e, p, "'%s': the data is not valid base64%s", "");
    return 0;
}

/* part[key] as OpenAI sends it: {"url": ...} (*obj that object) or the URL string itself; *url the URL's JSON
 * (NULL: absent) and p (128 bytes) the param naming it. -1 with a 400 when part[key] is neither. */
static int url_of(json_object *part, const char *key, const char *param, json_object **obj, json_object **url, char *p,
                  api_error *e)
{
    json_object_object_get_ex(part, key, obj);
    snprintf(p, 128, "%s.%s", param, key);
    if (*obj && json_object_get_type(*obj) == json_type_string) {
        *url = *obj;
    } else if (*obj && json_object_get_type(*obj) == json_type_object) {
        json_object_object_get_ex(*obj, "url", url);
        snprintf(p, 128, "%s.%s.url", param, key);
    } else {
        return bad(e, p, "'%s' must be an object {\"url\": ...} or a URL string%s", "");
    }
    return 0;
}

int api_image_part(struct json_object *part, const char *param, api_image *out, api_error *e)
{
    memset(out, 0, sizeof *out);
    out->frame = -1;
    snprintf(out->param, sizeof out->param, "%s", param);
    char p[128];
    json_object *iu = NULL, *url = NULL, *detail = NULL;
    if (url_of(part, "image_url", param, &iu, &url, p, e)) return -1;
    if (json_object_get_type(iu) == json_type_object) json_object_object_get_ex(iu, "detail", &detail);
    if (detail && json_object_get_type(detail) != json_type_null) {
        const char *d = json_object_get_type(detail) == json_type_string ? json_object_get_string(detail) : "";
        char pd[128];
        snprintf(pd, sizeof pd, "%s.image_url.detail", param);
        if (strcmp(d, "auto") && strcmp(d, "low") && strcmp(d, "high"))
            return bad(e, pd, "'%s' must be one of auto, low, high%s", "");
        if (!strcmp(d, "low")) out->max_tokens = 70;
    }
    return data_url(url, p, out, e);
}

int api_video_part(struct json_object *part, const char *param, int max_frames, api_image **out, int *n,
                   api_error *e)
{
    char p[128];
    json_object *frames = NULL, *ts = NULL;
    json_object_object_get_ex(part, "frames", &frames);
    json_object_object_get_ex(part, "timestamps", &ts);
    snprintf(p, sizeof p, "%s.frames", param);
    size_t nf = frames && json_object_get_type(frames) == json_type_array ? json_object_array_length(frames) : 0;
    if (nf < 1 || nf > (size_t)max_frames)
        return api_fail(e, 400, "invalid_request_error", NULL, p, "'%s' must be an array of 1 to %d frames "
                        "(data URLs)", p, max_frames);
    if (ts && json_object_get_type(ts) != json_type_null &&
        (json_object_get_type(ts) != json_type_array || json_object_array_length(ts) != nf)) {
        snprintf(p, sizeof p, "%s.timestamps", param);
        return bad(e, p, "'%s' must be an array of one time in seconds per frame%s", "");
    }
    api_image *im = realloc(*out, (size_t)(*n + (int)nf) * sizeof *im);
    if (!im) return api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    *out = im;
    for (size_t k = 0; k < nf; k++) {
        api_image *f = &(*out)[*n];
        memset(f, 0, sizeof *f);
        f->frame = (int)k;
        f->max_tokens = API_VIDEO_TOKENS;
        f->seconds = (double)k / API_VIDEO_FPS;
        snprintf(f->param, sizeof f->param, "%s.frames[%zu]", param, k);
        json_object *t = ts && json_object_get_type(ts) == json_type_array ? json_object_array_get_idx(ts, k) : NULL;
        if (t) {
            enum json_type ty = json_object_get_type(t);
            double v = ty == json_type_int || ty == json_type_double ? json_object_get_double(t) : -1;
            if (!(v >= 0 && v < 360000)) { /* mm:ss covers 100 hours */
                snprintf(p, sizeof p, "%s.timestamps[%zu]", param, k);
                return bad(e, p, "'%s' must be a number of seconds from 0 to 360000%s", "");
            }
            f->seconds = v;
        }
        json_object *fr = json_object_array_get_idx(frames, k), *url = fr;
        if (fr && json_object_get_type(fr) == json_type_object) json_object_object_get_ex(fr, "url", &url);
        (*n)++; /* counted before it is filled: the caller frees what a failure leaves */
        if (data_url(url, f->param, f, e)) return -1;
    }
    return 0;
}

int api_video_url_part(struct json_object *part, const char *param, api_image **out, int *n, api_error *e)
{
    api_image *im = realloc(*out, (size_t)(*n + 1) * sizeof *im);
    if (!im) return api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    *out = im;
    api_image *v = &im[*n];
    memset(v, 0, sizeof *v);
    v->video = 1;
    v->max_tokens = API_VIDEO_TOKENS;
    snprintf(v->param, sizeof v->param, "%s", param);
    char p[128];
    json_object *vu = NULL, *url = NULL;
    (*n)++; /* counted before it is filled: the caller frees what a failure leaves */
    return url_of(part, "video_url", param, &vu, &url, p, e) || data_url(url, p, v, e) ? -1 : 0;
}

void api_image_free(api_image *im)
{
    free(im->bytes);
    free(im->url);
    im->bytes = NULL;
    im->url = NULL;
    if (im->ready) im->ready_free(im->ready);
    im->ready = NULL;
}
