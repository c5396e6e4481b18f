/* synth_mmproj.c — see synth_mmproj.h. Sources: llama.cpp (October 2026) conversion/gemma.py
 * (Gemma4VisionAudioModel: keys, renames, the patch kernel's permutation, F32 position table), conversion/base.py
 * (MmprojModel keys and their order, the outtype rules), gguf-py tensor_mapping.py (names); the converted fixtures
 * tests/fixtures/gemma4_vision_mmproj*.gguf (the order as the converter wrote it); the tower shapes reported in
 * docs/design-vision.md 0 and 7. */
#include "synth_mmproj.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "errf.h"
#include "gguf.h"
#include "gguf_write.h"
#include "synth_blocks.h"

/* one tower: width, layers, heads, MLP width, position-table rows, standardize, clipped linears; text: the synth
 * text model whose width the projection writes */
typedef struct vshape {
    const char *name, *text;
    uint32_t H, L, nh, ff, n_pos;
    int standardize, clipped;
} vshape;

static const vshape SHAPES[] = {
    { "gemma4v-e2b", "gemma4-e2b", 768, 16, 12, 3072, 10240, 0, 1 },
    { "gemma4v-e4b", "gemma4-e4b", 768, 16, 12, 3072, 10240, 0, 1 },
    { "gemma4v-26b-a4b", "gemma4-26b-a4b", 1152, 27, 16, 4304, 10240, 1, 0 },
    { "gemma4v-31b", "gemma4-31b", 1152, 27, 16, 4304, 10240, 1, 0 },
    /* the converted fixtures' tower (head dim 24 and MLP 136, no multiples of 32, like 72 and 4304), standardized
     * as they are, so the tests compare the whole layout with the converter's */
    { "gemma4v-tiny", "gemma4-tiny", 96, 2, 4, 136, 128, 1, 0 },
    { "gemma4v-tiny-e", "gemma4-tiny-e", 96, 2, 4, 136, 128, 1, 1 },
};
#define N_SHAPES (sizeof SHAPES / sizeof *SHAPES)
const char *const synth_mmproj_models[] = { "gemma4v-e2b", "gemma4v-e4b", "gemma4v-26b-a4b", "gemma4v-31b",
                                            "gemma4v-tiny", "gemma4v-tiny-e", NULL };

enum { PATCH = 16, IMAGE_SIZE = 224 }; /* image_size: the converter's dummy (gemma.py) */

/* the converter's outtypes: general.file_type, the matrices' type, the patch kernel's (base.py
 * MmprojModel.tensor_force_quant: F16 only at f16) */
static const struct { const char *name; uint32_t ftype, mat, patch; } MIXES[] = {
    { "f16", 1, GGML_TYPE_F16, GGML_TYPE_F16 },
    { "bf16", 32, GGML_TYPE_BF16, GGML_TYPE_F32 },
    { "f32", 0, GGML_TYPE_F32, GGML_TYPE_F32 },
};
#define N_MIXES (sizeof MIXES / sizeof *MIXES)
const char *const synth_mmproj_mixes[] = { "f16", "bf16", "f32", NULL };

/* how a tensor's values are drawn: products by their input length (the output keeps its input's size through any
 * depth), norms near 1, q/k norms near hd^-1/4 (attention scale 1 on unit-RMS heads gives O(1) scores, as
 * synth_gguf.c does for the text model), the position tables and std bias small, clamps finite but wide */
enum { FILL_MAT, FILL_NORM, FILL_QK, FILL_POS, FILL_BIAS, FILL_CMIN, FILL_CMAX };

typedef struct vtens {
    char hf[96];       /* the checkpoint's name: the converter writes in its order */
    char name[48];
    uint32_t n_dims, type, fill;
    uint64_t ne[4];
    uint64_t k;        /* a product's input length (FILL_MAT) */
    uint64_t nbytes;
} vtens;

/* a tower of up to 32 layers: 6 vectors and 7 products of 5 tensors each (weight and clamps) a layer */
enum { MAX_TENSORS = 8 + 32 * (6 + 7 * 5) };
typedef struct vlist { vtens t[MAX_TENSORS]; size_t n; } vlist;

static vtens *add(vlist *v, const char *hf, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t fill)
{
    vtens *t = &v->t[v->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->hf, sizeof t->hf, "%s", hf);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->n_dims = n_dims;
    for (uint32_t d = 0; d < 4; d++) t->ne[d] = d < n_dims ? ne[d] : 1;
    t->fill = fill;
    t->k = ne[0];
    return t;
}

/* a layer's product: the weight, and with clipped linears its four clamps (gemma.py turns the scalars into [1]) */
static const struct { const char *hf, *gg; int in_ff, out_ff; } LINS[] = {
    { "mlp.down_proj", "ffn_down", 1, 0 }, { "mlp.gate_proj", "ffn_gate", 0, 1 }, { "mlp.up_proj", "ffn_up", 0, 1 },
    { "self_attn.k_proj", "attn_k", 0, 0 }, { "self_attn.o_proj", "attn_out", 0, 0 },
    { "self_attn.q_proj", "attn_q", 0, 0 }, { "self_attn.v_proj", "attn_v", 0, 0 },
};
static const struct { const char *hf, *gg; uint32_t fill; } VECS[] = {
    { "input_layernorm", "ln1", FILL_NORM }, { "post_attention_layernorm", "attn_post_norm", FILL_NORM },
    { "post_feedforward_layernorm", "ffn_post_norm", FILL_NORM }, { "pre_feedforward_layernorm", "ln2", FILL_NORM },
    { "self_attn.k_norm", "attn_k_norm", FILL_QK }, { "self_attn.q_norm", "attn_q_norm", FILL_QK },
};

static void build(vlist *v, const vshape *s, uint32_t L, uint32_t Ht)
{
    uint64_t H = s->H, hd = s->H / s->nh;
    char hf[96], gg[48];
    add(v, "model.embed_vision.embedding_projection.weight", "mm.input_projection.weight", 2, (uint64_t[]){ H, Ht },
        FILL_MAT);
    for (uint32_t l = 0; l < L; l++) {
        const char *pre = "model.vision_tower.encoder.layers";
        for (size_t i = 0; i < sizeof VECS / sizeof *VECS; i++) {
            snprintf(hf, sizeof hf, "%s.%u.%s.weight", pre, l, VECS[i].hf);
            snprintf(gg, sizeof gg, "v.blk.%u.%s.weight", l, VECS[i].gg);
            add(v, hf, gg, 1, (uint64_t[]){ VECS[i].fill == FILL_QK ? hd : H }, VECS[i].fill);
        }
        for (size_t i = 0; i < sizeof LINS / sizeof *LINS; i++) {
            snprintf(hf, sizeof hf, "%s.%u.%s.linear.weight", pre, l, LINS[i].hf);
            snprintf(gg, sizeof gg, "v.blk.%u.%s.weight", l, LINS[i].gg);
            add(v, hf, gg, 2, (uint64_t[]){ LINS[i].in_ff ? s->ff : H, LINS[i].out_ff ? s->ff : H }, FILL_MAT);
            static const char *const CL[] = { "input_max", "input_min", "output_max", "output_min" };
            for (int c = 0; s->clipped && c < 4; c++) {
                snprintf(hf, sizeof hf, "%s.%u.%s.%s", pre, l, LINS[i].hf, CL[c]);
                snprintf(gg, sizeof gg, "v.blk.%u.%s.%s", l, LINS[i].gg, CL[c]);
                add(v, hf, gg, 1, (uint64_t[]){ 1 }, strstr(CL[c], "max") ? FILL_CMAX : FILL_CMIN);
            }
        }
    }
    /* [Hv, 3 p²] reshaped and permuted to a conv kernel [p, p, 3, Hv]: each row reads all 3 p² values */
    add(v, "model.vision_tower.patch_embedder.input_proj.weight", "v.patch_embd.weight", 4,
        (uint64_t[]){ PATCH, PATCH, 3, H }, FILL_MAT)->k = 3 * PATCH * PATCH;
    add(v, "model.vision_tower.patch_embedder.position_embedding_table", "v.position_embd.weight", 3,
        (uint64_t[]){ H, s->n_pos, 2 }, FILL_POS);
    if (s->standardize) {
        add(v, "model.vision_tower.std_bias", "v.std_bias", 1, (uint64_t[]){ H }, FILL_BIAS);
        add(v, "model.vision_tower.std_scale", "v.std_scale", 1, (uint64_t[]){ H }, FILL_NORM);
    }
}

static int cmp_hf(const void *x, const void *y) { return strcmp(((const vtens *)x)->hf, ((const vtens *)y)->hf); }

/* convert_hf_to_gguf's types: 1-D tensors, names without .weight (clamps, std) and the position table (gemma.py)
 * F32; the patch kernel by MmprojModel's rule; other matrices the outtype */
static uint32_t convert_type(const vtens *t, uint32_t mat, uint32_t patch)
{
    size_t n = strlen(t->name);
    if (t->n_dims <= 1 || n < 7 || strcmp(t->name + n - 7, ".weight") || !strcmp(t->name, "v.position_embd.weight"))
        return GGML_TYPE_F32;
    return strcmp(t->name, "v.patch_embd.weight") ? mat : patch;
}

/* keys in the converter's order (MmprojModel.set_gguf_parameters, then Gemma4VisionAudioModel's, then the
 * writer's quantization version) */
static void metadata(gguf_writer *w, const vshape *s, uint32_t L, uint32_t Ht, uint32_t ftype, const char *name)
{
    static const float mean[3] = { 0, 0, 0 }, std[3] = { 1, 1, 1 }; /* the processor does not normalise */
    gguf_w_str(w, "general.architecture", "clip");
    gguf_w_str(w, "general.type", "mmproj");
    gguf_w_str(w, "general.name", name);
    gguf_w_u32(w, "general.file_type", ftype);
    gguf_w_bool(w, "clip.has_vision_encoder", 1);
    gguf_w_u32(w, "clip.vision.projection_dim", Ht);
    gguf_w_u32(w, "clip.vision.image_size", IMAGE_SIZE);
    gguf_w_u32(w, "clip.vision.patch_size", PATCH);
    gguf_w_u32(w, "clip.vision.embedding_length", s->H);
    gguf_w_u32(w, "clip.vision.feed_forward_length", s->ff);
    gguf_w_u32(w, "clip.vision.block_count", L);
    gguf_w_u32(w, "clip.vision.attention.head_count", s->nh);
    gguf_w_arr(w, "clip.vision.image_mean", GGUF_VT_F32, mean, 3);
    gguf_w_arr(w, "clip.vision.image_std", GGUF_VT_F32, std, 3);
    gguf_w_str(w, "clip.vision.projector_type", "gemma4v");
    gguf_w_f32(w, "clip.vision.attention.layer_norm_epsilon", 1e-6f);
    gguf_w_u32(w, "general.quantization_version", 2);
}

enum { CHUNK = 8u << 20 }; /* bytes generated per write */

static int write_data(gguf_writer *w, const vlist *v, uint64_t seed, uint32_t hd, int sparse, uint8_t *buf)
{
    for (size_t i = 0; i < v->n; i++) {
        const vtens *t = &v->t[i];
        if (sparse) { if (gguf_w_write(w, NULL, t->nbytes)) return -1; continue; }
        uint64_t st = synth_name_seed(t->name, seed);
        float amp = sqrtf(3.0f / (float)t->k), qk = 1.0f / sqrtf(sqrtf((float)hd));
        float lo = -amp, hi = amp;
        if (t->fill == FILL_NORM) { lo = 0.9f; hi = 1.1f; }
        if (t->fill == FILL_QK) { lo = 0.9f * qk; hi = 1.1f * qk; }
        if (t->fill == FILL_POS) { lo = -0.5f; hi = 0.5f; }
        if (t->fill == FILL_BIAS) { lo = -0.1f; hi = 0.1f; }
        if (t->fill == FILL_CMIN) { lo = -8.0f; hi = -4.0f; }
        if (t->fill == FILL_CMAX) { lo = 4.0f; hi = 8.0f; }
        if (synth_blocks_write(w, t->type, t->nbytes, amp, lo, hi, &st, buf, CHUNK)) return -1;
    }
    return 0;
}

/* "f16 190 (1.06 GiB), f32 246 (0.09 GiB)", largest first */
static void types(const vlist *v, char *out, size_t cap)
{
    static const uint32_t T[] = { GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_F32 };
    uint64_t bytes[3] = { 0 };
    uint32_t count[3] = { 0 };
    for (size_t i = 0; i < v->n; i++)
        for (int k = 0; k < 3; k++)
            if (v->t[i].type == T[k]) { bytes[k] += v->t[i].nbytes; count[k]++; }
    size_t o = 0;
    out[0] = 0;
    for (int r = 0; r < 3; r++) {
        int best = -1;
        for (int k = 0; k < 3; k++)
            if (count[k] && (best < 0 || bytes[k] > bytes[best])) best = k;
        if (best < 0 || o >= cap) break;
        int m = snprintf(out + o, cap - o, "%s%s %u (%.2f GiB)", o ? ", " : "", ggml_type_name(T[best]), count[best],
                         bytes[best] / 1073741824.0);
        o += m > 0 ? (size_t)m : 0;
        count[best] = 0;
    }
}

int synth_mmproj_known(const char *model)
{
    for (size_t i = 0; i < N_SHAPES; i++)
        if (!strcmp(model, SHAPES[i].name)) return 1;
    return 0;
}

int synth_mmproj_write(const synth_gguf_opts *o, const char *path, synth_gguf_info *info, char *err, size_t errlen)
{
    double t0 = monotonic_seconds();
    memset(info, 0, sizeof *info);
    const vshape *s = NULL;
    for (size_t i = 0; i < N_SHAPES; i++)
        if (!strcmp(o->model, SHAPES[i].name)) s = &SHAPES[i];
    if (!s)
        return ERR("unknown vision tower '%s' (gemma4v-e2b, gemma4v-e4b, gemma4v-26b-a4b, gemma4v-31b, gemma4v-tiny, "
                   "gemma4v-tiny-e)", o->model);
    const char *mix = o->mix ? o->mix : "f16";
    size_t mi = 0;
    while (mi < N_MIXES && strcmp(mix, MIXES[mi].name)) mi++;
    if (mi == N_MIXES) return ERR("unknown --mix '%s' for a vision projector (f16, bf16, f32)", mix);
    if (o->layers < 0 || (uint32_t)o->layers > s->L) return ERR("--layers %d: %s has 1..%u layers", o->layers, s->name, s->L);
    uint32_t L = o->layers ? (uint32_t)o->layers : s->L, Ht = synth_gguf_width(s->text);
    if (!Ht) return ERR("internal: %s pairs with unknown text model %s", s->name, s->text);
    char name[96];
    if (L != s->L) snprintf(name, sizeof name, "synthetic %s %s (%u layers)", s->name, mix, L);
    else snprintf(name, sizeof name, "synthetic %s %s", s->name, mix);
    vlist *v = calloc(1, sizeof *v);
    uint8_t *buf = malloc(CHUNK);
    gguf_writer *w = gguf_writer_create(0);
    int rc = -1;
    if (!v || !buf || !w) { ERR("out of memory"); goto done; }
    build(v, s, L, Ht);
    qsort(v->t, v->n, sizeof *v->t, cmp_hf);
    metadata(w, s, L, Ht, MIXES[mi].ftype, name);
    for (size_t i = 0; i < v->n; i++) {
        vtens *t = &v->t[i];
        t->type = convert_type(t, MIXES[mi].mat, MIXES[mi].patch);
        t->nbytes = gguf_w_tensor(w, t->name, t->type, t->n_dims, t->ne);
    }
    if (gguf_w_open(w, path) == 0) write_data(w, v, o->seed, s->H / s->nh, o->sparse, buf);
    rc = gguf_w_close(w, err, errlen);
    if (rc == 0) {
        snprintf(info->name, sizeof info->name, "%s", name);
        info->n_layer = L;
        info->n_tensors = (uint32_t)v->n;
        info->file_bytes = gguf_w_file_size(w);
        types(v, info->types, sizeof info->types);
    }
done:
    gguf_writer_destroy(w);
    free(buf);
    free(v);
    info->seconds = monotonic_seconds() - t0;
    return rc;
}
