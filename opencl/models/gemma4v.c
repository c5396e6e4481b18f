/* gemma4v.c — the Gemma 4 vision tower as llama.cpp's converter writes it (projector type "gemma4v",
 * docs/design-vision.md 2.1-2.2): its keys, its tensors checked against them (4.3), the weights on the device,
 * the encoder's scratch, the encoder forward as transformers computes it (1.3, 4.4), and their release. Defaults
 * the file does not carry are transformers' (pooling kernel 3, RoPE theta 100). */
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

/* the encoder's device scratch for max_patches patches (P) and P / k² soft tokens (S), and its host staging */
typedef struct g4v_scratch {
    cl_mem in;                /* [P][3 p²]: patch values, channel-major as v.patch_embd's rows, 2v - 1 */
    cl_mem pos, rng;          /* [P][2] int: (x, y) of each patch; [first, end) of its image's rows */
    cl_mem tiles;             /* [T][2] int: the tensor-core attention's row tiles (ops_vision_tiles) */
    uint32_t n_tiles;         /* of this encode */
    cl_mem cells;             /* [S][2] int: a soft token's top-left patch row and its grid's width */
    cl_mem x, a, c, t;        /* [P][Hv]: residual stream, normed input, clamped copy, product out */
    cl_mem q, k, v, o;        /* [P][heads · hd] */
    cl_mem q16, k16, v16;     /* [heads][P][hdp] f16: the tensor-core attention's operands (where it runs) */
    cl_mem g, u;              /* [P][F] */
    cl_mem pooled, stdz, normed; /* [S][Hv] */
    cl_mem out;               /* [S][proj_dim] */
    cl_mem ones;              /* [Hv] of 1: the projector's norm has no weight */
    float *h_in;              /* host staging of in, pos, rng, cells */
    int32_t *h_pos, *h_rng, *h_cells, *h_tiles;
} g4v_scratch;

/* row tiles of P patches at most: each image's rows in tiles of OPS_VFA_TILE, one part-filled per image, and an
 * image has k² = 9 patches or more */
static size_t max_tiles(size_t P) { return P / OPS_VFA_TILE + P / 9 + 1; }

typedef struct gemma4v_priv {
    float (*clamp)[N_LIN][4]; /* [n_layer]: per product its input min, max, output min, max (±inf: none) */
    g4v_scratch s;
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

static void scratch_destroy(g4v_scratch *s)
{
    cl_mem *ms[] = { &s->in, &s->pos, &s->rng, &s->tiles, &s->cells, &s->x, &s->a, &s->c, &s->t, &s->q, &s->k, &s->v, &s->o,
                     &s->q16, &s->k16, &s->v16, &s->g, &s->u, &s->pooled, &s->stdz, &s->normed, &s->out, &s->ones };
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) mem_release(ms[i]);
    free(s->h_in);
    free(s->h_pos);
    free(s->h_rng);
    free(s->h_cells);
    free(s->h_tiles);
    memset(s, 0, sizeof *s);
}

/* the scratch of an encode of v->max_patches patches, made once at load */
static int scratch_create(vision_model *v, cl_runtime *rt, char *err, size_t errlen)
{
    const vision_hparams *hp = &v->hp;
    g4v_scratch *s = &((gemma4v_priv *)v->priv)->s;
    size_t P = v->max_patches, S = P / (hp->pool_k * hp->pool_k), H = hp->n_embd, F = v->layers[0].down.cols;
    size_t qd = (size_t)hp->n_head * hp->head_dim, kd = (size_t)hp->n_kv * hp->head_dim;
    size_t pin = 3u * hp->patch * hp->patch, hdp = ops_vision_fa_width(rt, hp->head_dim);
    if (!S) return ERR("mmproj: an encode budget of %u patches holds no soft token", v->max_patches);
    struct { cl_mem *m; size_t bytes; } bs[] = {
        { &s->q16, P * hp->n_head * hdp * 2 }, { &s->k16, P * hp->n_kv * hdp * 2 }, { &s->v16, P * hp->n_kv * hdp * 2 },
        { &s->in, P * pin * 4 }, { &s->pos, P * 8 }, { &s->rng, P * 8 }, { &s->tiles, max_tiles(P) * 8 },
        { &s->cells, S * 8 }, { &s->x, P * H * 4 },
        { &s->a, P * H * 4 }, { &s->c, P * H * 4 }, { &s->t, P * H * 4 }, { &s->q, P * qd * 4 }, { &s->k, P * kd * 4 },
        { &s->v, P * kd * 4 }, { &s->o, P * qd * 4 }, { &s->g, P * F * 4 }, { &s->u, P * F * 4 },
        { &s->pooled, S * H * 4 }, { &s->stdz, S * H * 4 }, { &s->normed, S * H * 4 },
        { &s->out, S * hp->proj_dim * 4 },
    };
    char why[256];
    for (size_t i = 0; i < sizeof bs / sizeof *bs; i++) {
        if (!bs[i].bytes) continue; /* no tensor-core attention on this device */
        if (!(*bs[i].m = rt_alloc(rt, bs[i].bytes, NULL, why, sizeof why)))
            return ERR("mmproj: encoder scratch for %u patches: %s", v->max_patches, why);
        v->scratch_bytes += bs[i].bytes;
    }
    cl_uchar zero = 0; /* the MLP's padding columns (weight_pad_cols) stay 0: nothing writes them */
    cl_int e = clEnqueueFillBuffer(rt->q, s->g, &zero, 1, 0, P * F * 4, 0, NULL, NULL);
    if (!e) e = clEnqueueFillBuffer(rt->q, s->u, &zero, 1, 0, P * F * 4, 0, NULL, NULL);
    if (e) return ERR("mmproj: encoder scratch: %s", rt_errstr(e));
    float *ones = malloc(H * sizeof *ones);
    for (size_t i = 0; ones && i < H; i++) ones[i] = 1.0f;
    s->ones = ones ? rt_alloc(rt, H * sizeof *ones, ones, why, sizeof why) : NULL;
    free(ones);
    if (!s->ones) return ERR("mmproj: encoder scratch: %s", ones ? why : "out of memory");
    v->scratch_bytes += H * sizeof *ones;
    s->h_in = malloc(P * pin * sizeof *s->h_in);
    s->h_pos = malloc(P * 2 * sizeof *s->h_pos);
    s->h_rng = malloc(P * 2 * sizeof *s->h_rng);
    s->h_cells = malloc(S * 2 * sizeof *s->h_cells);
    s->h_tiles = malloc(max_tiles(P) * 2 * sizeof *s->h_tiles);
    if (!s->h_in || !s->h_pos || !s->h_rng || !s->h_cells || !s->h_tiles)
        return ERR("mmproj: out of memory for the encoder's staging");
    return 0;
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
    /* an MLP width that is not whole 32-value units (the 31B tower's 4304) would leave ffn_down off the tensor
     * cores: its rows padded with zeros, and the gate / up outputs laid that wide */
    char why[256];
    if (hp->n_ff % 32 && src->up && upload_finish(src->up, why, sizeof why))
        return ERR("mmproj: uploading the weights: %s", why);
    for (uint32_t l = 0; hp->n_ff % 32 && l < hp->n_layer; l++)
        if (weight_pad_cols(src->rt, &v->layers[l].down, 32, B, err, errlen)) return -1;
    if (hp->standardize && (load_vec(src, "v.std_bias", hp->n_embd, &v->std_bias, B, err, errlen) ||
                            load_vec(src, "v.std_scale", hp->n_embd, &v->std_scale, B, err, errlen)))
        return -1;
    if (load_mat(src, "mm.input_projection.weight", hp->n_embd, hp->proj_dim, 1, &v->proj, B, err, errlen)) return -1;
    return scratch_create(v, src->rt, err, errlen);
}

void gemma4v_unload(vision_model *v)
{
    gemma4v_priv *pv = v->priv;
    for (uint32_t l = 0; v->layers && l < v->hp.n_layer; l++) layer_weights_release(&v->layers[l]);
    free(v->layers);
    v->layers = NULL;
    cl_mem *ms[] = { &v->patch_embd.buf, &v->proj.buf, &v->pos_embd, &v->std_bias, &v->std_scale };
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) mem_release(ms[i]);
    if (pv) scratch_destroy(&pv->s);
    if (pv) free(pv->clamp);
    free(pv);
    v->priv = NULL;
}

/* ---- the encoder forward (docs/design-vision.md 1.3, 4.4) ---------------------------------------------------- */

/* y = W x with the product's clamps where finite (use_clipped_linears): the input clamped into c (NULL: in
 * place, where x is not read again) and the output (rows ldy apart) in place */
static void linear(ops *o, const weight *w, const float cl[4], cl_mem x, cl_mem c, cl_mem y, uint32_t ldy,
                   uint32_t ntok)
{
    if (isfinite(cl[0]) || isfinite(cl[1])) {
        op_clamp(o, x, c ? c : x, cl[0], cl[1], ntok * w->cols);
        if (c) x = c;
    }
    op_matmul(o, w, x, w->cols, y, ldy, ntok);
    if (isfinite(cl[2]) || isfinite(cl[3])) op_clamp(o, y, y, cl[2], cl[3], ntok * ldy);
}

/* layer l over n patch rows: s->x is its input (and output), s->a holds ln1(x) on entry; leaves the next layer's
 * ln1(x) in s->a where there is one */
static void layer(vision_model *v, ops *o, uint32_t l, uint32_t n)
{
    const vision_hparams *hp = &v->hp;
    gemma4v_priv *pv = v->priv;
    g4v_scratch *s = &pv->s;
    const layer_weights *W = &v->layers[l];
    const float(*cl)[4] = pv->clamp[l];
    /* F: the MLP's width as laid out (ffn_down's rows, padded to whole 32-value units) */
    uint32_t H = hp->n_embd, F = W->down.cols, qd = hp->n_head * hp->head_dim, kd = hp->n_kv * hp->head_dim;
    if (hp->clipped) {
        linear(o, &W->q, cl[0], s->a, s->c, s->q, qd, n);
        linear(o, &W->k, cl[1], s->a, s->c, s->k, kd, n);
        linear(o, &W->v, cl[2], s->a, s->c, s->v, kd, n);
    } else {
        mm_out qkv[3] = { { &W->q, s->q, qd }, { &W->k, s->k, kd }, { &W->v, s->v, kd } };
        op_matmul_multi(o, qkv, 3, s->a, H, n);
    }
    /* per-head norms (q and k weighted, v not: modeling_gemma4.py:922), the 2-D RoPE on q and k */
    uint32_t hd = hp->head_dim, hdp = s->q16 ? ops_vision_fa(o, hd) : 0; /* f16 copies for the tensor cores */
    op_norm_rope2d(o, s->q, n, hp->n_head, hd, W->q_norm, 1, hp->eps, s->pos, hp->rope_theta, s->q16, hdp);
    op_norm_rope2d(o, s->k, n, hp->n_kv, hd, W->k_norm, 1, hp->eps, s->pos, hp->rope_theta, s->k16, hdp);
    op_norm_rope2d(o, s->v, n, hp->n_kv, hd, NULL, 2, hp->eps, NULL, 0, s->v16, hdp);
    if (hdp)
        op_attention_dense_f16(o, s->q16, s->k16, s->v16, hdp, s->o, s->rng, s->tiles, s->n_tiles, n, hp->n_head,
                               hp->n_kv, hd, 1.0f);
    else
        op_attention_dense(o, s->q, s->k, s->v, s->o, s->rng, n, hp->n_head, hp->n_kv, hd, 1.0f);
    linear(o, &W->o, cl[3], s->o, NULL, s->t, H, n);
    /* x += post_attn_norm(t); a = ln2(x) */
    norm_chain c = { .x = s->t, .wx = W->post_attn_norm, .res = s->x, .scale = 1.0f, .out = { { W->ffn_norm, s->a } },
                     .nout = 1 };
    op_norm_chain(o, &c, n, H, hp->eps);
    if (hp->clipped) {
        linear(o, &W->gate, cl[4], s->a, s->c, s->g, F, n);
        linear(o, &W->up, cl[5], s->a, s->c, s->u, F, n);
        op_geglu(o, s->g, s->u, s->g, n * F);
        linear(o, &W->down, cl[6], s->g, NULL, s->t, H, n);
    } else {
        mm_out gu[2] = { { &W->gate, s->g, F }, { &W->up, s->u, F } };
        op_matmul_multi(o, gu, 2, s->a, H, n);
        op_matmul_geglu(o, &W->down, s->g, F, s->u, 0, F, s->t, H, n);
    }
    /* x += post_ffw_norm(t); a = ln1 of the next layer */
    norm_chain c2 = { .x = s->t, .wx = W->post_ffw_norm, .res = s->x, .scale = 1.0f, .nout = 0 };
    if (l + 1 < hp->n_layer) c2.out[c2.nout++] = (norm_out){ v->layers[l + 1].attn_norm, s->a };
    op_norm_chain(o, &c2, n, H, hp->eps);
}

/* the images checked and staged on the host: patch values channel-major as 2v - 1, positions, each patch's key
 * range (its image), each soft token's cell; *np, *ns the patch and soft-token counts */
static int stage(vision_model *v, const image_prep *const *imgs, int n, uint32_t *np, uint32_t *ns, char *err,
                 size_t errlen)
{
    const vision_hparams *hp = &v->hp;
    g4v_scratch *s = &((gemma4v_priv *)v->priv)->s;
    int k = (int)hp->pool_k, p = (int)hp->patch, pp = p * p;
    if (n < 1) return ERR("vision_encode: %d images", n);
    if (hp->patch != IMAGE_PREP_PATCH)
        return ERR("vision_encode: the projector's patches are %u pixels, the images' %d", hp->patch, IMAGE_PREP_PATCH);
    uint32_t N = 0, S = 0;
    s->n_tiles = 0;
    for (int i = 0; i < n; i++) {
        const image_prep *im = imgs[i];
        if (!im || !im->pixels || !im->pos || im->gw <= 0 || im->gh <= 0)
            return ERR("vision_encode: image %d is not a prepared image", i);
        if ((uint32_t)im->gw > hp->n_pos || (uint32_t)im->gh > hp->n_pos) /* first: bounds the product below */
            return ERR("vision_encode: image %d: patch grid %dx%d exceeds the position table (%u)", i, im->gw, im->gh,
                       hp->n_pos);
        if ((int64_t)im->n_patches != (int64_t)im->gw * im->gh)
            return ERR("vision_encode: image %d: %d patches for a %dx%d grid", i, im->n_patches, im->gw, im->gh);
        if (im->gw % k || im->gh % k)
            return ERR("vision_encode: image %d: patch grid %dx%d is not a multiple of the pooling kernel %d", i,
                       im->gw, im->gh, k);
        if ((uint64_t)N + (uint64_t)im->n_patches > v->max_patches)
            return ERR("vision_encode: %llu patches exceed the encoder's budget of %u",
                       (unsigned long long)N + (unsigned long long)im->n_patches, v->max_patches);
        for (int t = 0; t < im->n_patches; t++) {
            if (im->pos[2 * t] != t % im->gw || im->pos[2 * t + 1] != t / im->gw)
                return ERR("vision_encode: image %d: patch %d at (%d, %d), not its grid place", i, t, im->pos[2 * t],
                           im->pos[2 * t + 1]);
            const float *src = im->pixels + (size_t)t * pp * 3; /* (row, col, channel) */
            float *dst = s->h_in + (size_t)(N + t) * pp * 3;   /* channel, row, col */
            for (int y = 0; y < p; y++)
                for (int x = 0; x < p; x++)
                    for (int ch = 0; ch < 3; ch++) dst[ch * pp + y * p + x] = 2.0f * (src[(y * p + x) * 3 + ch] - 0.5f);
            s->h_pos[2 * (N + t)] = im->pos[2 * t];
            s->h_pos[2 * (N + t) + 1] = im->pos[2 * t + 1];
            s->h_rng[2 * (N + t)] = (int32_t)N;
            s->h_rng[2 * (N + t) + 1] = (int32_t)(N + (uint32_t)im->n_patches);
        }
        for (int cy = 0; cy < im->gh / k; cy++)
            for (int cx = 0; cx < im->gw / k; cx++, S++) {
                s->h_cells[2 * S] = (int32_t)N + cy * k * im->gw + cx * k;
                s->h_cells[2 * S + 1] = im->gw;
            }
        ops_vision_tiles(s->h_tiles, &s->n_tiles, N, (uint32_t)im->n_patches);
        N += (uint32_t)im->n_patches;
    }
    *np = N;
    *ns = S;
    return 0;
}

/* rows x n floats of m to host (a blocking read), where dst is set */
static int tap(ops *o, cl_mem m, float *dst, uint32_t rows, uint32_t n, char *err, size_t errlen)
{
    if (!dst || o->failed) return 0;
    cl_int e = clEnqueueReadBuffer(o->rt->q, m, CL_TRUE, 0, (size_t)rows * n * sizeof(float), dst, 0, NULL, NULL);
    return e ? ERR("vision_encode: reading a tap: %s", rt_errstr(e)) : 0;
}

int gemma4v_encode(vision_model *v, ops *o, const image_prep *const *imgs, int n, const vision_taps *taps, char *err,
                   size_t errlen)
{
    const vision_hparams *hp = &v->hp;
    g4v_scratch *s = &((gemma4v_priv *)v->priv)->s;
    uint32_t N = 0, S = 0, H = hp->n_embd, pin = 3 * hp->patch * hp->patch, k = hp->pool_k;
    v->n_out = 0;
    if (stage(v, imgs, n, &N, &S, err, errlen)) return -1;
    cl_command_queue q = o->rt->q;
    cl_int e = clEnqueueWriteBuffer(q, s->in, CL_TRUE, 0, (size_t)N * pin * 4, s->h_in, 0, NULL, NULL);
    if (!e) e = clEnqueueWriteBuffer(q, s->pos, CL_TRUE, 0, (size_t)N * 8, s->h_pos, 0, NULL, NULL);
    if (!e) e = clEnqueueWriteBuffer(q, s->rng, CL_TRUE, 0, (size_t)N * 8, s->h_rng, 0, NULL, NULL);
    if (!e) e = clEnqueueWriteBuffer(q, s->cells, CL_TRUE, 0, (size_t)S * 8, s->h_cells, 0, NULL, NULL);
    if (!e) e = clEnqueueWriteBuffer(q, s->tiles, CL_TRUE, 0, (size_t)s->n_tiles * 8, s->h_tiles, 0, NULL, NULL);
    if (e) return ERR("vision_encode: uploading the patches: %s", rt_errstr(e));
    int int8 = o->act_int8; /* the tower's products keep f16/f32 accuracy, as prompt chunks do */
    o->act_int8 = 0;
    int rc = 0;
    op_matmul(o, &v->patch_embd, s->in, pin, s->x, H, N);
    op_pos_add2d(o, s->x, v->pos_embd, hp->n_pos, s->pos, N, H);
    rc = taps ? tap(o, s->x, taps->embd, N, H, err, errlen) : 0;
    op_rmsnorm(o, s->x, v->layers[0].attn_norm, s->a, N, H, hp->eps);
    for (uint32_t l = 0; l < hp->n_layer && !rc; l++) {
        layer(v, o, l, N);
        rc = taps && taps->layer ? tap(o, s->x, taps->layer[l], N, H, err, errlen) : 0;
    }
    /* the k x k average times sqrt(Hv) (Gemma4VisionPooler), standardize, the projector's weightless norm */
    op_avgpool(o, s->x, s->cells, s->pooled, S, H, k, sqrtf((float)H) / (float)(k * k));
    cl_mem P = s->pooled;
    if (hp->standardize) op_standardize(o, s->pooled, P = s->stdz, v->std_bias, v->std_scale, S, H);
    if (!rc && taps) rc = tap(o, s->pooled, taps->pooled, S, H, err, errlen) || tap(o, P, taps->standardized, S, H,
                                                                                   err, errlen);
    op_rmsnorm(o, P, s->ones, s->normed, S, H, hp->eps);
    op_matmul(o, &v->proj, s->normed, H, s->out, hp->proj_dim, S);
    o->act_int8 = int8;
    char why[256];
    if (!rc && ops_status(o, why, sizeof why)) rc = ERR("vision_encode: %s", why);
    if (rc) return -1;
    v->out = s->out;
    v->n_out = S;
    return 0;
}
