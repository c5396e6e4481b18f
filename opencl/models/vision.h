/* vision.h — a vision projector ("mmproj" GGUF, general.architecture "clip", docs/design-vision.md) loaded beside
 * a text model: its hyperparameters and weights on the device. Projectors are rows of one table (vision.c) keyed
 * by the file's projector type; a new one is its own file plus a row. The encoder forward is not here yet. */
#ifndef CLGEMMA_VISION_H
#define CLGEMMA_VISION_H

#include "model.h"

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
} vision_model;

/* a row's load fills v (v->arch and hp.proj set, the rest zero) from src, after the table has checked the
 * file's kind and the pairing with the text model; on failure it leaves what it made for unload */
typedef int  vision_load_fn(vision_model *v, const model_src *src, char *err, size_t errlen);
typedef void vision_unload_fn(vision_model *v);

typedef struct vision_arch {
    const char *name;         /* the projector type */
    const char *text_arch;    /* general.architecture of the text models it feeds */
    vision_load_fn *load;
    vision_unload_fn *unload;
} vision_arch;

/* the row of a file's projector type (clip.vision.projector_type, else clip.projector_type); -1 with a line
 * naming the type (or the missing key, or a file that is not a vision projector) in err */
int  vision_arch_of(const gguf_file *f, const vision_arch **out, char *err, size_t errlen);
/* f as the projector of text (loaded): kind, row, the row's load, then the pair check (the rows' width equals
 * the text model's); the weights on the device when it returns. -1 with one line in err, v left empty. */
int  vision_load(vision_model *v, const gguf_file *f, const model *text, cl_runtime *rt, char *err, size_t errlen);
/* path opened, loaded as above and closed again; err starts with path */
int  vision_open(vision_model *v, const char *path, const model *text, cl_runtime *rt, char *err, size_t errlen);
/* releases everything vision_load made; an empty v is fine */
void vision_free(vision_model *v);

#endif
