/* api_image.c — see api_image.h. Base64 through OpenSSL's decoder. */
#include "api_image.h"

#include <json-c/json.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int api_image_part(struct json_object *part, const char *param, api_image *out, api_error *e)
{
    memset(out, 0, sizeof *out);
    snprintf(out->param, sizeof out->param, "%s", param);
    char p[96];
    json_object *iu = NULL, *url = NULL, *detail = NULL;
    json_object_object_get_ex(part, "image_url", &iu);
    snprintf(p, sizeof p, "%s.image_url", param);
    if (iu && json_object_get_type(iu) == json_type_string) {
        url = iu;
    } else if (iu && json_object_get_type(iu) == json_type_object) {
        json_object_object_get_ex(iu, "url", &url);
        json_object_object_get_ex(iu, "detail", &detail);
        snprintf(p, sizeof p, "%s.image_url.url", param);
    } else {
        return bad(e, p, "'%s' must be an object {\"url\": ...} or a URL string%s", "");
    }
    if (!url || json_object_get_type(url) != json_type_string) return bad(e, p, "'%s' must be a string%s", "");
    if (detail && json_object_get_type(detail) != json_type_null) {
        const char *d = json_object_get_type(detail) == json_type_string ? json_object_get_string(detail) : "";
        char pd[96];
        snprintf(pd, sizeof pd, "%s.image_url.detail", param);
        if (strcmp(d, "auto") && strcmp(d, "low") && strcmp(d, "high"))
            return bad(e, pd, "'%s' must be one of auto, low, high%s", "");
        if (!strcmp(d, "low")) out->max_tokens = 70;
    }
    const char *u = json_object_get_string(url);
    size_t n = (size_t)json_object_get_string_len(url);
    if (!strncmp(u, "http://", 7) || !strncmp(u, "https://", 8))
        return bad(e, p, "'%s': only data: URLs are accepted (this server does not fetch URLs)%s", "");
    static const char *const types[] = { "image/jpeg", "image/jpg", "image/png", "image/webp", "image/gif" };
    const char *comma = memchr(u, ',', n);
    int known = 0;
    for (size_t i = 0; comma && i < sizeof types / sizeof *types && !known; i++) {
        size_t tl = strlen(types[i]);
        known = (size_t)(comma - u) == 5 + tl + 7 && !strncmp(u, "data:", 5) && !strncmp(u + 5, types[i], tl) &&
                !strncmp(u + 5 + tl, ";base64", 7);
    }
    if (!known)
        return bad(e, p, "'%s' must be a data URL data:image/<jpeg|png|webp|gif>;base64,<data>%s", "");
    if (base64(comma + 1, n - (size_t)(comma + 1 - u), &out->bytes, &out->len))
        return bad(e, p, "'%s': the data is not valid base64%s", "");
    return 0;
}

void api_image_free(api_image *im)
{
    free(im->bytes);
    im->bytes = NULL;
}
