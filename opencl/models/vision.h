/* vision.h — a vision projector ("mmproj" GGUF, general.architecture "clip", docs/design-vision.md) loaded beside
 * a text model: its hyperparameters and weights on the device. Projectors are rows of one table (vision.c) keyed
 * by the file's projector type; a new one is its own file plus a row. vision_encode runs the encoder forward:
 * prepared images (image_prep.h) to the rows that replace the text embeddings at their placeholders. */
#ifndef CLGEMMA_VISION_H
#define CLGEMMA_VISION_H

#include "image_prep.h"
#include "model.h"

/* the patches one encode takes when the caller gives no budget: one image of 280 soft tokens (transformers' default
 * max_soft_tokens) of 9 patches each */
#define VISION_DEFAULT_PATCHES (280u * 9u)

typedef struct vision_hparams {
    char proj[16];            /* projector type: clip.vision.projector_type */
    uint32_t n_embd, n_layer, n_head, n_kv, head_dim, n_ff;
    uint32_t patch;           /* patch side in pixels */
    uint32_t pool_k;          /* k x k patches pooled into one soft token */
    uint32_t n_pos;           /* rows of each axis' position table: the largest patch grid side */
    uint32_t proj_dim;        /* width of the rows it hands the text model (= its embedding width) */
    float eps, rope_theta;
    float image_mean[3], image_std[3];
    int standardize;          /* std_bias / std_scale after pooling */
    int clipped;              /* finite clamps around some products (use_clipped_linears: the E-series) */
} vision_hparams;

struct vision_arch;

typedef struct vision_model {
    const struct vision_arch *arch;
    void *priv;               /* the projector's own state: made by its load, freed by its unload */
    vision_hparams hp;
    layer_weights *layers;    /* [n_layer]: attn_norm = ln1, ffn_norm = ln2, post_* = the post norms */
    weight patch_embd;        /* [n_embd rows][3 p² cols], each row channel-major (c p² + y p + x) */
    weight proj;              /* [proj_dim rows][n_embd cols] */
    cl_mem pos_embd;          /* [2][n_pos][n_embd] f32: x table then y table */
    cl_mem std_bias, std_scale; /* [n_embd] f32, NULL without standardize */
    uint64_t weight_bytes;    /* device memory of the weights */
    uint32_t max_patches;     /* patches of all the images of one encode at most (the scratch's size) */
    uint64_t scratch_bytes;   /* device memory of the encoder's scratch, made at load for max_patches */
    cl_mem out;               /* the last encode's rows: [n_out][proj_dim] f32, valid until the next encode */
    uint32_t n_out;
} vision_model;

/* host copies of an encode's intermediate rows (tests: to find where a difference starts); NULL members are
 * skipped. Rows of all the encode's images in order, n_embd values each. */
typedef struct vision_taps {
    float *embd;              /* [patches]: the patch embeddings plus positions */
    float **layer;            /* [n_layer] of [patches]: each layer's output (NULL entries skipped) */
    float *pooled;            /* [soft tokens]: pooled and scaled, before standardize */
    float *standardized;      /* [soft tokens]: the tower's output (pooled where the file has no standardize) */
} vision_taps;

/* a row's load fills v (v->arch, hp.proj, hp.proj_dim and max_patches set, the rest zero) from src, after the table
 * has checked the file's kind and the pairing with the text model, and makes the encoder's scratch for max_patches;
 * on failure it leaves what it made for unload */
typedef int  vision_load_fn(vision_model *v, const model_src *src, char *err, size_t errlen);
typedef void vision_unload_fn(vision_model *v);
/* a row's encode: the images' rows into v->out (the contract of vision_encode) */
typedef int  vision_encode_fn(vision_model *v, ops *o, const image_prep *const *imgs, int n, const vision_taps *taps,
                              char *err, size_t errlen);

typedef struct vision_arch {
    const char *name;         /* the projector type */
    const char *text_arch;    /* general.architecture of the text models it feeds */
    vision_load_fn *load;
    vision_unload_fn *unload;
    vision_encode_fn *encode;
} vision_arch;

/* the row of a file's projector type (clip.vision.projector_type, else clip.projector_type); -1 with a line
 * naming the type (or the missing key, or a file that is not a vision projector) in err */
int  vision_arch_of(const gguf_file *f, const vision_arch **out, char *err, size_t errlen);
/* f as the projector of text (loaded): kind, row, the row's load, then the pair check (the rows' width equals
 * the text model's); the weights on the device when it returns, and the encoder's scratch for max_patches
 * patches an encode (0: VISION_DEFAULT_PATCHES). -1 with one line in err, v left empty. */
int  vision_load(vision_model *v, const gguf_file *f, const model *text, cl_runtime *rt, uint32_t max_patches,
                 char *err, size_t errlen);
/* path opened, loaded as above and closed again; err starts with path */
int  vision_open(vision_model *v, const char *path, const model *text, cl_runtime *rt, uint32_t max_patches,
                 char *err, size_t errlen);
/* The encoder over n >= 1 prepared images at once (each its own attention block, no attention across them):
 * v->out gets their rows, [Σ soft tokens][proj_dim], image after image, and v->n_out their count; enqueued on
 * o's queue (read v->out after it, in order). taps (may be NULL) gets host copies of intermediate rows (a
 * blocking read each). Refused with one line in err (nothing enqueued): images whose patches exceed
 * v->max_patches, a patch grid not a multiple of the pooling kernel or wider than the position table, positions
 * that are not the grid's, another patch size; an op's failure is reported the same way. */
int  vision_encode(vision_model *v, ops *o, const image_prep *const *imgs, int n, const vision_taps *taps, char *err,
                   size_t errlen);
/* releases everything vision_load made; an empty v is fine */
void vision_free(vision_model *v);

#endif
