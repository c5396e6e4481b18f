/* gemma4v.c — the Gemma 4 vision tower as llama.cpp's converter writes it (projector type "gemma4v",
 * docs/design-vision.md 2.1-2.2): its keys, its tensors checked against them (4.3), the weights on the device,
 * and their release. Defaults the file does not carry are transformers' (pooling kernel 3, RoPE theta 100). */
#include "vision.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errf.h"
#include "load.h"

#define KEYS "clip.vision"
#define POOL_K 3           /* Gemma4VisionConfig.pooling_kernel_size; the file has no key for it */
#define ROPE_THETA 100.0f  /* Gemma4VisionConfig.default_theta; likewise */
#define MAX_PATCH 64
#define MAX_EMBD 65536
#define MAX_LAYER 256
#define MAX_FF (1u << 20)
#define MAX_POS (1u << 20)

/* the seven products of a layer, each clampable (use_clipped_linears: input and output ranges) */
static const char *const LINEARS[] = { "attn_q", "attn_k", "attn_v", "attn_out", "ffn_gate", "ffn_up", "ffn_down" };
enum { N_LIN = 7 };
static const char *const CLAMPS[] = { "input_min", "input_max", "output_min", "output_max" };
/* a layer's tensors that are not products */
static const char *const LAYER_VECS[] = { "ln1.weight", "ln2.weight", "attn_q_norm.weight", "attn_k_norm.weight",
                                          "attn_post_norm.weight", "ffn_post_norm.weight" };

typedef struct gemma4v_priv {
    float (*clamp)[N_LIN][4]; /* [n_layer]: per product its input min, max, output min, max (±inf: none) */
} gemma4v_priv;

static int read_triple(const gguf_file *f, const char *name, float out[3], char *err, size_t errlen)
{
    char key[64];
    snprintf(key, sizeof key, KEYS ".%s", name);
    uint32_t et;
    uint64_t n;
    const void *data;
    int r = gguf_get_arr(f, key, &et, &n, &data);
    if (r == -1) return ERR("mmproj: missing key '%s' (three per-channel values)", key);
    if (r || et != GGUF_VT_F32 || n != 3) return ERR("mmproj: key '%s' is not an array of three float32", key);
    memcpy(out, data, 12);
    for (int c = 0; c < 3; c++)
        if (!isfinite(out[c])) return ERR("mmproj: key '%s' channel %d is not finite", key, c);
    return 0;
}

static int read_keys(vision_hparams *hp, const gguf_file *f, char *err, size_t errlen)
{
    if (key_u32(f, KEYS, "embedding_length", &hp->n_embd, 1, err, errlen) ||
        key_u32(f, KEYS, "block_count", &hp->n_layer, 1, err, errlen) ||
        key_u32(f, KEYS, "attention.head_count", &hp->n_head, 1, err, errlen) ||
        key_u32(f, KEYS, "feed_forward_length", &hp->n_ff, 1, err, errlen) ||
        key_u32(f, KEYS, "patch_size", &hp->patch, 1, err, errlen))
        return -1;
    hp->n_kv = hp->n_head; /* the converter writes no head_count_kv: as many as query heads (clip.cpp) */
    hp->eps = 1e-6f;
    if (key_u32(f, KEYS, "attention.head_count_kv", &hp->n_kv, 0, err, errlen) ||
        key_f32(f, KEYS, "attention.layer_norm_epsilon", &hp->eps, err, errlen) ||
        read_triple(f, "image_mean", hp->image_mean, err, errlen) ||
        read_triple(f, "image_std", hp->image_std, err, errlen))
        return -1;
    if (!hp->n_embd || hp->n_embd > MAX_EMBD) return ERR("mmproj: embedding_length %u out of range", hp->n_embd);
    if (!hp->n_layer || hp->n_layer > MAX_LAYER) return ERR("mmproj: block_count %u out of range", hp->n_layer);
    if (!hp->n_ff || hp->n_ff > MAX_FF) return ERR("mmproj: feed_forward_length %u out of range", hp->n_ff);
    if (!hp->patch || hp->patch > MAX_PATCH)
        return ERR("mmproj: patch_size %u out of range (1 to %d)", hp->patch, MAX_PATCH);
    if (!hp->n_head || hp->n_embd % hp->n_head)
        return ERR("mmproj: embedding_length %u is not a multiple of head_count %u", hp->n_embd, hp->n_head);
    hp->head_dim = hp->n_embd / hp->n_head;
    if (hp->head_dim % 4)
        return ERR("mmproj: head dim %u (embedding_length / head_count) is not a multiple of 4: the 2-D RoPE rotates "
                   "two halves in pairs", hp->head_dim);
    if (!hp->n_kv || hp->n_head % hp->n_kv)
        return ERR("mmproj: head_count %u is not a multiple of head_count_kv %u", hp->n_head, hp->n_kv);
    if (!(hp->eps > 0) || !isfinite(hp->eps)) return ERR("mmproj: layer_norm_epsilon %g is not positive", hp->eps);
    for (int c = 0; c < 3; c++)
        if (hp->image_std[c] == 0) return ERR("mmproj: image_std channel %d is 0", c);
    hp->pool_k = POOL_K;
    hp->rope_theta = ROPE_THETA;
    return 0;
}

/* 1 if name (not NUL-terminated) is one of the tensors a gemma4v file of n_layer layers may hold */
static int known_tensor(gguf_str s, uint32_t n_layer)
{
    static const char *const TOP[] = { "v.patch_embd.weight", "v.position_embd.weight", "v.std_bias", "v.std_scale",
                                       "mm.input_projection.weight" };
    for (size_t i = 0; i < sizeof TOP / sizeof *TOP; i++)
        if (gguf_str_eq(s, TOP[i])) return 1;
    char name[128];
    unsigned l;
    int at = 0;
    if (s.len >= sizeof name) return 0;
    memcpy(name, s.ptr, s.len);
    name[s.len] = 0;
    if (sscanf(name, "v.blk.%u.%n", &l, &at) != 1 || !at || l >= n_layer) return 0;
    char canon[128];
    snprintf(canon, sizeof canon, "v.blk.%u.%s", l, name + at); /* no leading zeros or signs in the index */
    if (strcmp(canon, name)) return 0;
    const char *rest = name + at;
    for (size_t i = 0; i < sizeof LAYER_VECS / sizeof *LAYER_VECS; i++)
        if (!strcmp(rest, LAYER_VECS[i])) return 1;
    for (int i = 0; i < N_LIN; i++) {
        size_t n = strlen(LINEARS[i]);
        if (strncmp(rest, LINEARS[i], n) || rest[n] != '.') continue;
        if (!strcmp(rest + n + 1, "weight")) return 1;
        for (int c = 0; c < 4; c++)
            if (!strcmp(rest + n + 1, CLAMPS[c])) return 1;
    }
    return 0;
}

/* every tensor is one this loader reads, or another tower's (audio: a.*, mm.a.*, ignored): a newer layout is
 * refused, not half-loaded */
static int check_names(const gguf_file *f, uint32_t n_layer, char *err, size_t errlen)
{
    for (size_t i = 0; i < gguf_tensor_count(f); i++) {
        gguf_str s = gguf_tensor_at(f, i)->name;
        if ((s.len >= 2 && !memcmp(s.ptr, "a.", 2)) || (s.len >= 5 && !memcmp(s.ptr, "mm.a.", 5))) continue;
        if (!known_tensor(s, n_layer))
            return ERR("mmproj: unknown tensor '%.*s' for a gemma4v projector of %u layers (a newer layout?)",
                       (int)(s.len > 80 ? 80 : s.len), s.ptr, n_layer);
    }
    return 0;
}

/* v.patch_embd: a conv kernel [p, p, 3, Hv], F16 or F32 as the converter keeps it, uploaded as Hv rows of 3 p² */
static int load_patch_embd(vision_model *v, const model_src *src, char *err, size_t errlen)
{
    const char *n = "v.patch_embd.weight";
    const vision_hparams *hp = &v->hp;
    const gguf_tensor *t = gguf_find_tensor(src->f, n);
    uint64_t p = hp->patch;
    if (!t) return ERR("mmproj: missing tensor '%s' (expected shape [%llu, %llu, 3, %u])", n,
                       (unsigned long long)p, (unsigned long long)p, hp->n_embd);
    if (t->ne[0] != p || t->ne[1] != p || t->ne[2] != 3 || t->ne[3] != hp->n_embd)
        return ERR("mmproj: tensor '%s' has shape [%llu, %llu, %llu, %llu], expected [%llu, %llu, 3, %u]", n,
                   (unsigned long long)t->ne[0], (unsigned long long)t->ne[1], (unsigned long long)t->ne[2],
                   (unsigned long long)t->ne[3], (unsigned long long)p, (unsigned long long)p, hp->n_embd);
    if (t->type != GGML_TYPE_F16 && t->type != GGML_TYPE_F32)
        return ERR("mmproj: tensor '%s' has type %s, expected F16 or F32", n, ggml_type_name(t->type));
    if (tensor_upload(src, t, n, &v->patch_embd.buf, &v->weight_bytes, err, errlen)) return -1;
    v->patch_embd.type = t->type;
    v->patch_embd.cols = (uint32_t)(3 * p * p);
    v->patch_embd.rows = hp->n_embd;
    v->patch_embd.row_bytes = (uint32_t)ggml_row_bytes(t->type, 3 * p * p);
    return 0;
}

/* the clamps of layer l's products: [1] F32 scalars read on the host, ±inf where the file has none */
static int load_clamps(vision_model *v, const model_src *src, uint32_t l, char *err, size_t errlen)
{
    gemma4v_priv *pv = v->priv;
    char n[96];
    for (int i = 0; i < N_LIN; i++)
        for (int c = 0; c < 4; c++) {
            float *dst = &pv->clamp[l][i][c];
            *dst = c % 2 ? INFINITY : -INFINITY;
            snprintf(n, sizeof n, "v.blk.%u.%s.%s", l, LINEARS[i], CLAMPS[c]);
            if (!gguf_find_tensor(src->f, n)) continue;
            const gguf_tensor *t;
            if (tensor_find(src->f, n, 1, 1, 1, 1, &t, err, errlen) || tensor_host(t, n, err, errlen)) return -1;
            memcpy(dst, t->data, 4);
            if (isnan(*dst)) return ERR("mmproj: tensor '%s' is NaN", n);
            v->hp.clipped |= isfinite(*dst) != 0;
        }
    return 0;
}

static int load_layer(vision_model *v, const model_src *src, uint32_t l, char *err, size_t errlen)
{
    const vision_hparams *hp = &v->hp;
    layer_weights *W = &v->layers[l];
    uint32_t H = hp->n_embd, qd = hp->n_head * hp->head_dim, kd = hp->n_kv * hp->head_dim, F = hp->n_ff;
    uint64_t *B = &v->weight_bytes;
    char n[96];
#define M(field, nm, a, b) (snprintf(n, sizeof n, "v.blk.%u." nm, l), load_mat(src, n, a, b, 1, field, B, err, errlen))
#define V(field, nm, a) (snprintf(n, sizeof n, "v.blk.%u." nm, l), load_vec(src, n, a, field, B, err, errlen))
    int rc = V(&W->attn_norm, "ln1.weight", H) || M(&W->q, "attn_q.weight", H, qd) ||
             M(&W->k, "attn_k.weight", H, kd) || M(&W->v, "attn_v.weight", H, kd) ||
             V(&W->q_norm, "attn_q_norm.weight", hp->head_dim) || V(&W->k_norm, "attn_k_norm.weight", hp->head_dim) ||
             M(&W->o, "attn_out.weight", qd, H) || V(&W->post_attn_norm, "attn_post_norm.weight", H) ||
             V(&W->ffn_norm, "ln2.weight", H) || M(&W->gate, "ffn_gate.weight", H, F) ||
             M(&W->up, "ffn_up.weight", H, F) || M(&W->down, "ffn_down.weight", F, H) ||
             V(&W->post_ffw_norm, "ffn_post_norm.weight", H);
#undef M
#undef V
    return rc ? -1 : load_clamps(v, src, l, err, errlen);
}

int gemma4v_load(vision_model *v, const model_src *src, char *err, size_t errlen)
{
    vision_hparams *hp = &v->hp;
    const gguf_file *f = src->f;
    if (read_keys(hp, f, err, errlen) || check_names(f, hp->n_layer, err, errlen)) return -1;
    /* standardize is told by the tensors' presence (design 2.1): both or neither */
    int has_bias = gguf_find_tensor(f, "v.std_bias") != NULL, has_scale = gguf_find_tensor(f, "v.std_scale") != NULL;
    if (has_bias != has_scale)
        return ERR("mmproj: tensor '%s' without '%s': standardize needs both", has_bias ? "v.std_bias" : "v.std_scale",
                   has_bias ? "v.std_scale" : "v.std_bias");
    hp->standardize = has_bias;
    gemma4v_priv *pv = calloc(1, sizeof *pv);
    if (!pv || !(pv->clamp = calloc(hp->n_layer, sizeof *pv->clamp)) ||
        !(v->layers = calloc(hp->n_layer, sizeof *v->layers))) {
        if (pv) free(pv->clamp);
        free(pv);
        return ERR("out of memory");
    }
    v->priv = pv;
    /* the position table is F32 (the converter forces it) and [Hv, Ppos, 2]: Ppos bounds the patch grid */
    const char *pe = "v.position_embd.weight";
    const gguf_tensor *t = gguf_find_tensor(f, pe);
    if (!t) return ERR("mmproj: missing tensor '%s' (expected shape [%u, positions, 2])", pe, hp->n_embd);
    uint64_t n_pos = t->ne[1];
    if (t->ne[0] != hp->n_embd || t->ne[2] != 2 || t->ne[3] != 1 || !n_pos || n_pos > MAX_POS)
        return ERR("mmproj: tensor '%s' has shape [%llu, %llu, %llu, %llu], expected [%u, 1 to %u positions, 2]", pe,
                   (unsigned long long)t->ne[0], (unsigned long long)t->ne[1], (unsigned long long)t->ne[2],
                   (unsigned long long)t->ne[3], hp->n_embd, MAX_POS);
    hp->n_pos = (uint32_t)n_pos;
    uint64_t *B = &v->weight_bytes;
    if (load_patch_embd(v, src, err, errlen) ||
        tensor_find(f, pe, hp->n_embd, n_pos, 2, 1, &t, err, errlen) ||
        tensor_upload(src, t, pe, &v->pos_embd, B, err, errlen))
        return -1;
    for (uint32_t l = 0; l < hp->n_layer; l++)
        if (load_layer(v, src, l, err, errlen)) return -1;
    if (hp->standardize && (load_vec(src, "v.std_bias", hp->n_embd, &v->std_bias, B, err, errlen) ||
                            load_vec(src, "v.std_scale", hp->n_embd, &v->std_scale, B, err, errlen)))
        return -1;
    return load_mat(src, "mm.input_projection.weight", hp->n_embd, hp->proj_dim, 1, &v->proj, B, err, errlen);
}

void gemma4v_unload(vision_model *v)
{
    gemma4v_priv *pv = v->priv;
    for (uint32_t l = 0; v->layers && l < v->hp.n_layer; l++) layer_weights_release(&v->layers[l]);
    free(v->layers);
    v->layers = NULL;
    cl_mem *ms[] = { &v->patch_embd.buf, &v->proj.buf, &v->pos_embd, &v->std_bias, &v->std_scale };
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) mem_release(ms[i]);
    if (pv) free(pv->clamp);
    free(pv);
    v->priv = NULL;
}
