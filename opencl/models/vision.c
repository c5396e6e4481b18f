/* vision.c — the vision projectors clgemma loads, one row each (the only list of them), which row a file is,
 * and the load of one beside its text model (docs/design-vision.md 4.2-4.3). */
#include "vision.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errf.h"
#include "gguf.h"
#include "load.h"

vision_load_fn gemma4v_load;
vision_unload_fn gemma4v_unload;
vision_encode_fn gemma4v_encode;

static const vision_arch PROJECTORS[] = {
    {
        /* the Gemma 4 vision tower (31B, 26B-A4B, E2B, E4B); "gemma4uv" (the unified tower) is another row */
        .name = "gemma4v",
        .text_arch = "gemma4",
        .load = gemma4v_load,
        .unload = gemma4v_unload,
        .encode = gemma4v_encode,
    },
};

enum { N_PROJECTORS = sizeof PROJECTORS / sizeof *PROJECTORS };

/* a string key, at most 40 bytes of it, for messages */
#define SHOW(s) (int)((s).len > 40 ? 40 : (s).len), (s).ptr

int vision_arch_of(const gguf_file *f, const vision_arch **out, char *err, size_t errlen)
{
    gguf_str s;
    *out = NULL;
    int r = gguf_get_str(f, "general.architecture", &s);
    if (r) return ERR("mmproj: %s general.architecture key", r == -1 ? "no" : "a non-string");
    if (!gguf_str_eq(s, "clip"))
        return ERR("mmproj: general.architecture is '%.*s', not 'clip': a model file, not a vision projector "
                   "(mmproj)", SHOW(s));
    r = gguf_get_str(f, "general.type", &s);
    if (r) return ERR("mmproj: %s general.type key (expected 'mmproj')", r == -1 ? "no" : "a non-string");
    if (!gguf_str_eq(s, "mmproj")) return ERR("mmproj: general.type is '%.*s', expected 'mmproj'", SHOW(s));
    int64_t has = 0;
    r = gguf_get_int(f, "clip.has_vision_encoder", &has);
    if (r == -2 || !has) return ERR("mmproj: clip.has_vision_encoder is %s: no vision tower in the file",
                                    r == -1 ? "missing" : r == -2 ? "not a bool" : "false");
    const char *key = "clip.vision.projector_type"; /* as clip.cpp: the vision key, else the older common one */
    r = gguf_get_str(f, key, &s);
    if (r == -1) r = gguf_get_str(f, key = "clip.projector_type", &s);
    if (r) return ERR("mmproj: %s key '%s'", r == -1 ? "no projector type: missing" : "wrong type for", key);
    for (size_t i = 0; i < N_PROJECTORS; i++)
        if (gguf_str_eq(s, PROJECTORS[i].name)) return (*out = &PROJECTORS[i]), 0;
    char names[128];
    size_t o = 0;
    for (size_t i = 0; i < N_PROJECTORS && o < sizeof names; i++)
        o += (size_t)snprintf(names + o, sizeof names - o, "%s%s", i ? ", " : "", PROJECTORS[i].name);
    return ERR("mmproj: unsupported projector type '%.*s' in %s (supported: %s)", SHOW(s), key, names);
}

/* device bytes of the tensors a projector uploads: all but another tower's (a.*, mm.a.*: audio) */
static uint64_t vision_device_bytes(const gguf_file *f)
{
    uint64_t n = 0;
    for (size_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        gguf_str s = t->name;
        int audio = (s.len >= 2 && !memcmp(s.ptr, "a.", 2)) || (s.len >= 5 && !memcmp(s.ptr, "mm.a.", 5));
        if (!audio) n += t->nbytes;
    }
    return n;
}

int vision_load(vision_model *v, const gguf_file *f, const model *text, cl_runtime *rt, uint32_t max_patches,
                char *err, size_t errlen)
{
    memset(v, 0, sizeof *v);
    v->max_patches = max_patches ? max_patches : VISION_DEFAULT_PATCHES;
    const vision_arch *a;
    if (vision_arch_of(f, &a, err, errlen)) return -1;
    if (strcmp(a->text_arch, text->arch->name))
        return ERR("mmproj: a '%s' projector feeds %s models, the text model is '%s'", a->name, a->text_arch,
                   text->arch->name);
    /* the pair check first: a projection of another width is the wrong pair, not a broken file */
    int64_t dim;
    int r = gguf_get_int(f, "clip.vision.projection_dim", &dim);
    if (r) return ERR("mmproj: %s key 'clip.vision.projection_dim'", r == -1 ? "missing" : "wrong type for");
    if (dim != text->hp.n_embd)
        return ERR("mmproj: clip.vision.projection_dim %lld is not the text model's embedding width %u: a projector "
                   "of another model", (long long)dim, text->hp.n_embd);
    v->arch = a;
    snprintf(v->hp.proj, sizeof v->hp.proj, "%s", a->name);
    v->hp.proj_dim = (uint32_t)dim;
    char why[256];
    model_src src = { f, rt, NULL, NULL };
    /* staged as the text model's weights are (model.c load_row); a CPU device reads the mapping itself */
    uint64_t total = rt->is_cpu ? 0 : vision_device_bytes(f);
    r = total && upload_create(&src.up, rt, total, why, sizeof why) ? ERR("mmproj: %s", why) : 0;
    if (!r) r = a->load(v, &src, err, errlen);
    if (!r && src.up && upload_finish(src.up, why, sizeof why)) r = ERR("mmproj: uploading the weights: %s", why);
    upload_destroy(src.up);
    if (r) vision_free(v);
    return r;
}

int vision_open(vision_model *v, const char *path, const model *text, cl_runtime *rt, uint32_t max_patches,
                char *err, size_t errlen)
{
    gguf_file *f;
    char why[512];
    memset(v, 0, sizeof *v);
    if (gguf_open(&f, path, why, sizeof why)) return ERR("%s: %s", path, why);
    int r = vision_load(v, f, text, rt, max_patches, why, sizeof why) ? ERR("%s: %s", path, why) : 0;
    gguf_close(f); /* the buffers hold copies: nothing points into the mapping */
    return r;
}

int vision_encode(vision_model *v, ops *o, const image_prep *const *imgs, int n, const vision_taps *taps, char *err,
                  size_t errlen)
{
    if (!v->arch) return ERR("vision_encode: no projector loaded");
    return v->arch->encode(v, o, imgs, n, taps, err, errlen);
}

void vision_free(vision_model *v)
{
    if (v->arch) v->arch->unload(v);
    memset(v, 0, sizeof *v);
}
