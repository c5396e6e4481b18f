/* engine_image.c — images into prompts (engine.h, docs/design-vision.md 4.6-4.8): decode and prepare
 * on any thread, encode on the engine's, the encoded rows kept by digest in the media cache. */
#include "engine_int.h"

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "errf.h"
#include "image_codec.h"
#include "image_prep.h"

struct engine_image {
    image_prep *prep;
    uint8_t digest[MEDIA_DIGEST];
    int budget;
};

/* SHA-256 of what the rows depend on: the engine's salt (projector, mask mode), the budget, the
 * decoded size and pixels; the same picture in two formats shares it */
static int digest(uint32_t salt, int budget, const image_rgb *im, uint8_t out[MEDIA_DIGEST])
{
    uint32_t head[4] = { salt, (uint32_t)budget, (uint32_t)im->w, (uint32_t)im->h };
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    unsigned len = 0;
    int ok = c && EVP_DigestInit_ex(c, EVP_sha256(), NULL) && EVP_DigestUpdate(c, head, sizeof head) &&
             EVP_DigestUpdate(c, im->rgb, (size_t)im->w * (size_t)im->h * 3) && EVP_DigestFinal_ex(c, out, &len) &&
             len == MEDIA_DIGEST;
    EVP_MD_CTX_free(c);
    return ok ? 0 : -1;
}

/* the one preparation behind both entries: rgb checked against the grid, prepared for the budget, digested */
static engine_image *prepare(const engine *e, const image_rgb *rgb, int max_tokens, char *err, size_t errlen)
{
    engine_image *im = calloc(1, sizeof *im);
    if (!im) ERR("out of memory");
    else if (!(im->prep = image_prep_create(rgb->rgb, rgb->w, rgb->h, max_tokens, err, errlen))) {
        free(im);
        im = NULL;
    } else if ((uint32_t)im->prep->gw > e->vision.hp.n_pos || (uint32_t)im->prep->gh > e->vision.hp.n_pos) {
        /* a client's error (the picture's shape), found here rather than at the encode */
        ERR("image: a %dx%d image makes a grid of %dx%d patches; this projector's position table has %u per side",
            rgb->w, rgb->h, im->prep->gw, im->prep->gh, e->vision.hp.n_pos);
        engine_image_destroy(im);
        im = NULL;
    } else if (digest(e->image_salt, max_tokens, rgb, im->digest)) {
        ERR("image: digest failed");
        engine_image_destroy(im);
        im = NULL;
    }
    if (im) im->budget = max_tokens;
    return im;
}

/* the budget (0: the server's) checked against the server's; -1 with err */
static int budget(const engine *e, int *max_tokens, char *err, size_t errlen)
{
    if (!e->vision.arch) return ERR("this model has no vision projector (--mmproj)");
    if (*max_tokens == 0) *max_tokens = (int)e->info.image_tokens;
    if (*max_tokens < 0 || (uint32_t)*max_tokens > e->info.image_tokens)
        return ERR("an image budget of %d tokens is over this server's %u", *max_tokens, e->info.image_tokens);
    return 0;
}

engine_image *engine_image_prepare(const engine *e, const void *bytes, size_t n, int max_tokens, char *err,
                                   size_t errlen)
{
    if (budget(e, &max_tokens, err, errlen)) return NULL;
    image_rgb *rgb = image_decode(bytes, n, NULL, err, errlen);
    if (!rgb) return NULL;
    engine_image *im = prepare(e, rgb, max_tokens, err, errlen);
    image_destroy(rgb);
    return im;
}

engine_image *engine_image_prepare_rgb(const engine *e, const uint8_t *rgb, int w, int h, int max_tokens, char *err,
                                       size_t errlen)
{
    if (budget(e, &max_tokens, err, errlen)) return NULL;
    image_limits lim = image_limits_default();
    if (!rgb || image_check_size(&lim, (uint64_t)(w < 0 ? 0 : w), (uint64_t)(h < 0 ? 0 : h), err, errlen)) {
        if (!rgb) ERR("image: no pixels");
        return NULL;
    }
    image_rgb view = { w, h, (uint8_t *)rgb }; /* read only: prepare copies what it keeps */
    return prepare(e, &view, max_tokens, err, errlen);
}

void engine_image_destroy(engine_image *im)
{
    if (!im) return;
    image_prep_destroy(im->prep);
    free(im);
}

int engine_image_tokens(const engine_image *im) { return im->prep->soft_tokens; }

int32_t engine_image_token(const engine_image *im, int j)
{
    uint64_t h;
    memcpy(&h, im->digest, sizeof h);
    h += 0x9e3779b97f4a7c15ull * (uint64_t)(j + 1); /* splitmix64 over (digest, j) */
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
    h ^= h >> 31;
    return (int32_t)(0x80000000u | (uint32_t)(h & 0x7fffffffu));
}

/* the images of ims[0, n) not held yet, encoded in groups that fit the encoder's scratch, each pinned
 * once as its rows land; 0, or -1 with err and the pins of this call taken back */
static int encode_missing(engine *e, engine_image *const *ims, int n, int *pinned, char *err, size_t errlen)
{
    vision_model *v = &e->vision;
    const image_prep *grp[64];
    int idx[64];
    for (int i = 0; i < n;) {
        int k = 0;
        uint32_t patches = 0;
        for (; i < n && k < 64; i++) {
            media_entry *me = media_find(&e->media, ims[i]->digest);
            int dup = 0; /* the same image twice in this call: encoded once */
            for (int j = 0; j < k && !dup; j++) dup = !memcmp(ims[idx[j]]->digest, ims[i]->digest, MEDIA_DIGEST);
            if (me || dup) continue;
            uint32_t np = (uint32_t)ims[i]->prep->n_patches;
            if (k && patches + np > v->max_patches) break;
            grp[k] = ims[i]->prep;
            idx[k++] = i;
            patches += np;
        }
        if (!k) continue;
        ops_clear(&e->o);
        if (vision_encode(v, &e->o, grp, k, NULL, err, errlen) || ops_status(&e->o, err, errlen)) return -1;
        uint32_t row = 0;
        for (int j = 0; j < k; j++) {
            const engine_image *im = ims[idx[j]];
            uint32_t nr = (uint32_t)im->prep->soft_tokens;
            media_entry *me = media_add(&e->media, &e->rt, im->digest, nr, err, errlen);
            if (!me) return -1;
            media_pin(&e->media, me); /* before the next add, which may evict what is unpinned */
            pinned[idx[j]] = 1;
            ops_clear(&e->o);
            op_copy_rows(&e->o, v->out, row, me->rows, 0, nr, e->media.width);
            if (ops_status(&e->o, err, errlen)) return -1;
            e->media.encodes++;
            row += nr;
        }
    }
    return 0;
}

int engine_image_encode(engine *e, engine_image *const *ims, int n, char *err, size_t errlen)
{
    if (!e->vision.arch) return ERR("this model has no vision projector (--mmproj)");
    if (n <= 0) return 0;
    int *pinned = calloc((size_t)n, sizeof *pinned);
    if (!pinned) return ERR("out of memory");
    int rc = encode_missing(e, ims, n, pinned, err, errlen);
    if (rc) { /* rows half copied are not rows: dropped */
        for (int i = 0; i < n; i++) {
            media_entry *me = pinned[i] ? media_find(&e->media, ims[i]->digest) : NULL;
            if (me) media_drop(&e->media, me);
        }
    }
    for (int i = 0; !rc && i < n; i++) {
        if (pinned[i]) continue;
        media_entry *me = media_find(&e->media, ims[i]->digest);
        if (!me) { rc = ERR("internal: image %d was not encoded", i); break; }
        media_pin(&e->media, me);
        pinned[i] = 1;
        e->media.hits++;
    }
    if (rc)
        for (int i = 0; i < n; i++)
            if (pinned[i]) media_unpin(&e->media, ims[i]->digest);
    free(pinned);
    return rc;
}

void engine_image_release(engine *e, const engine_image *im) { media_unpin(&e->media, im->digest); }

int engine_image_wait(engine *e, char *err, size_t errlen)
{
    cl_int ce = clFinish(e->rt.q);
    return ce ? ERR("image encode: %s", rt_errstr(ce)) : 0;
}

void engine_image_usage(const engine *e, engine_image_stats *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < e->media.n; i++) out->pinned += e->media.e[i].pins > 0;
    out->held = (uint32_t)e->media.n;
    out->bytes = e->media.bytes;
    out->encodes = e->media.encodes;
    out->hits = e->media.hits;
}

/* the rows of a span's image, for engine_step: NULL where it is not encoded and pinned */
cl_mem engine_image_rows(engine *e, const engine_image *im)
{
    media_entry *me = media_find(&e->media, im->digest);
    return me && me->pins > 0 ? me->rows : NULL;
}

const uint8_t *engine_image_digest(const engine_image *im) { return im->digest; }
