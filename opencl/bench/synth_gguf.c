/* synth_gguf.c — see synth_gguf.h. Sources: llama.cpp (October 2026) conversion/gemma.py and
 * conversion/base.py (keys, their order, converter types), src/llama-quant.cpp (tensor order and
 * the types of each ftype), src/models/gemma4.cpp (what the loader reads); docs/GEMMA4.md §1–3. */
#include "synth_gguf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "errf.h"
#include "gguf.h"
#include "gguf_write.h"
#include "synth.h"
#include "synth_blocks.h"
#include "synth_qwen35.h"
#include "synth_quant.h"

/* ---- shapes ---------------------------------------------------------------------------- */

typedef struct shape {
    synth_spec s;
    uint32_t hd_swa, hd_full;
} shape;

enum { HD_SWA = 256, HD_FULL = 512 }; /* every public model (docs/GEMMA4.md §1) */

/* test shapes: every row length a whole number of 256-blocks except where a public model has
 * one that is not (26B-A4B's 2112 and 704: the fallback types), 16 experts (llama-quant treats
 * exactly 8 specially), PLE with L·P = 256 as E2B/E4B have multiples of 256 */
static const shape TINY[] = {
    { { "gemma4-tiny", 256, 6, 2, 2, 1, 3, 1, 512, 0, 0, 0, 0, 0, 0, 16, 4096 }, 128, 256 },
    { { "gemma4-tiny-moe", 256, 4, 2, 2, 1, 2, 1, 352, 0, 16, 4, 96, 0, 0, 16, 4096 }, 128, 256 },
    { { "gemma4-tiny-e", 256, 4, 2, 1, 1, 2, 0, 256, 1, 0, 0, 0, 64, 2, 16, 4096 }, 128, 256 },
};
#define N_TINY (sizeof TINY / sizeof *TINY)

const char *const synth_gguf_models[] = { "gemma4-e2b", "gemma4-e4b", "gemma4-26b-a4b", "gemma4-31b",
                                          "gemma4-tiny", "gemma4-tiny-moe", "gemma4-tiny-e",
                                          "qwen35-27b", "qwen35-35b-a3b", "qwen35-tiny", "qwen35-tiny-moe", NULL };

/* MTP drafters ("<model>-assistant", arch gemma4-assistant) of the public models, of an assumed shape: no
 * published config was at hand offline (docs/design-mtp-drafter.md 2), so 4 layers (3 sliding, 1 full) of
 * width 1024 and MLP 4096 with the target's heads, KV heads and head dims, reading the target's cache */
#define ASST_SUFFIX "-assistant"
enum { ASST_LAYERS = 4, ASST_H = 1024, ASST_FF = 4096 };

static int find_shape(const char *name, shape *out, int *asst)
{
    char base[64];
    size_t n = strlen(name), k = strlen(ASST_SUFFIX);
    *asst = n > k && n - k < sizeof base && !strcmp(name + n - k, ASST_SUFFIX);
    if (*asst) {
        memcpy(base, name, n - k);
        base[n - k] = 0;
        name = base;
    }
    const synth_spec *s = synth_spec_find(name);
    if (s) { *out = (shape){ *s, HD_SWA, HD_FULL }; return 0; }
    for (size_t i = 0; i < N_TINY; i++)
        if (!strcmp(name, TINY[i].s.name)) { *out = TINY[i]; return 0; }
    return -1;
}

/* ---- mixes and llama-quantize's type rules --------------------------------------------- */

typedef synth_mix mix;

static const mix MIXES[] = {
    { "q4_k_m", 15, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_Q6_K, 1 },
    { "q8_0", 7, GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, 1 },
    { "q4_k", 14, GGML_TYPE_Q4_K, GGML_TYPE_Q4_K, GGML_TYPE_Q4_K, 1 }, /* --pure: no per-tensor rules */
    { "bf16", 32, GGML_TYPE_BF16, GGML_TYPE_BF16, GGML_TYPE_BF16, 0 },
    { "f32", 0, GGML_TYPE_F32, GGML_TYPE_F32, GGML_TYPE_F32, 0 },
};
#define N_MIXES (sizeof MIXES / sizeof *MIXES)
const char *const synth_gguf_mixes[] = { "q4_k_m", "q8_0", "q4_k", "bf16", "f32", NULL };

const synth_mix *synth_mix_find(const char *name)
{
    for (size_t i = 0; i < N_MIXES; i++)
        if (!strcmp(name, MIXES[i].name)) return &MIXES[i];
    return NULL;
}

/* names llama-quant.cpp's tensor_allows_quantization keeps as they are (those of Gemma 4) */
static const char *const NO_QUANT[] = { "_norm.weight", "ffn_gate_inp.weight", "per_layer_model_proj" };

/* llama-quant.cpp's tensor_type_fallback: a row that is no whole number of blocks */
static const struct { uint32_t from, to; } FALLBACK[] = {
    { GGML_TYPE_Q4_K, GGML_TYPE_Q5_0 }, { GGML_TYPE_Q6_K, GGML_TYPE_Q8_0 },
};

uint32_t synth_fallback(uint32_t type, uint64_t ne0)
{
    if (ne0 % ggml_blck_size(type) == 0) return type;
    uint32_t t = type;
    for (size_t i = 0; i < sizeof FALLBACK / sizeof *FALLBACK; i++)
        if (FALLBACK[i].from == type) t = FALLBACK[i].to;
    return ne0 % ggml_blck_size(t) ? GGML_TYPE_F16 : t;
}

/* llama-quant.cpp: layers that get more bits in *_M mixes */
int synth_use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

static int ends_with(const char *s, const char *t)
{
    size_t a = strlen(s), b = strlen(t);
    return a >= b && !memcmp(s + a - b, t, b);
}

/* ---- the tensor list --------------------------------------------------------------------- */

enum { FILL_MAT, FILL_ONE, FILL_QK, FILL_ROUTER, FILL_ROPE, FILL_LSCALE };

/* values by name: norms and the router/expert scales near 1, the rest by the row length. Q and K
 * norms near hd^-1/4, so that with Gemma 4's attention scale of 1 the scores of unit-RMS heads
 * are O(1) as in trained models, not a one-hot softmax of N(0, hd) scores. Router weights of unit
 * variance: the router's input has norm ~1, so its logits do too and the top-k choices are
 * distinct, as a trained router's are, rather than near-ties that float rounding flips. */
static const struct { const char *part; uint8_t fill; } FILLS[] = {
    { "rope_freqs.weight", FILL_ROPE }, { "layer_output_scale.weight", FILL_LSCALE },
    { "attn_q_norm.weight", FILL_QK }, { "attn_k_norm.weight", FILL_QK }, { "ffn_gate_inp.weight", FILL_ROUTER },
    { "norm", FILL_ONE }, { ".scale", FILL_ONE },
};

typedef synth_tens tens;

typedef struct model {
    shape sh;
    int asst;           /* the target's MTP drafter (ASST_*), not the model itself */
    const mix *mx;
    uint32_t L, V, shared, first_shared, n_rot_full;
    uint8_t swa[1024];
    uint32_t nkv[1024], ff[1024];
    tens *t;
    size_t n, cap;
    int oom;
    char name[96];
} model;

static void add(model *m, uint32_t n_dims, uint64_t a, uint64_t b, uint64_t c, const char *part, int il)
{
    if (m->oom) return;
    if (m->n == m->cap) {
        size_t nc = m->cap ? 2 * m->cap : 512;
        tens *q = realloc(m->t, nc * sizeof *q);
        if (!q) { m->oom = 1; return; }
        m->t = q;
        m->cap = nc;
    }
    synth_tens_set(&m->t[m->n++], n_dims, a, b, c, part, il);
}
#define VEC(m, n, name, il) add(m, 1, n, 1, 1, name, il)
#define MAT(m, a, b, name, il) add(m, 2, a, b, 1, name, il)

/* the layer pattern: sliding/full, KV sharing (llama.cpp reuses the cache of layer first_shared−2
 * on sliding and first_shared−1 on full layers, which agrees with transformers only when those
 * are sliding and full: shrink the shared count until they are), per-layer widths */
static void plan(model *m, uint32_t L)
{
    const synth_spec *s = &m->sh.s;
    m->L = L;
    for (uint32_t il = 0; il < L; il++) m->swa[il] = (il + 1) % s->full_every != 0 && il != L - 1;
    uint32_t shared = L == s->L ? s->shared : (uint32_t)((uint64_t)L * s->shared / s->L);
    for (; shared > 0; shared--) {
        uint32_t fs = L - shared;
        if (fs >= 2 && !m->swa[fs - 1] && m->swa[fs - 2]) break;
    }
    m->shared = shared;
    m->first_shared = L - shared;
    for (uint32_t il = 0; il < L; il++) {
        m->nkv[il] = m->swa[il] ? s->nkv_swa : s->nkv_full;
        m->ff[il] = s->wide_shared && il >= m->first_shared ? 2 * s->ff : s->ff;
    }
    m->n_rot_full = m->sh.hd_full / 8; /* proportional RoPE, partial factor 0.25: pairs that rotate */
}

/* the drafter: ASST_LAYERS layers, the last full, the target's heads; its input is the target's width */
static void plan_assistant(model *m)
{
    const synth_spec *s = &m->sh.s;
    m->L = ASST_LAYERS;
    m->shared = m->first_shared = 0;
    for (uint32_t il = 0; il < m->L; il++) {
        m->swa[il] = il != m->L - 1;
        m->nkv[il] = m->swa[il] ? s->nkv_swa : s->nkv_full;
        m->ff[il] = ASST_FF;
    }
    m->n_rot_full = m->sh.hd_full / 8;
}

/* conversion/gemma.py's Gemma4AssistantModel: no K/V of its own, the two projections, the tied head */
static void build_assistant(model *m)
{
    uint64_t H = ASST_H, Hb = m->sh.s.H, V = m->V;
    MAT(m, H, V, "token_embd.weight", -1);
    VEC(m, H, "output_norm.weight", -1);
    VEC(m, m->sh.hd_full / 2, "rope_freqs.weight", -1);
    MAT(m, 2 * Hb, H, "nextn.pre_projection.weight", -1);
    MAT(m, H, Hb, "nextn.post_projection.weight", -1);
    for (uint32_t l = 0; l < m->L; l++) {
        int il = (int)l;
        uint64_t hd = m->swa[l] ? m->sh.hd_swa : m->sh.hd_full, qd = m->sh.s.nh * hd;
        VEC(m, H, "attn_norm.weight", il);
        MAT(m, H, qd, "attn_q.weight", il);
        VEC(m, hd, "attn_q_norm.weight", il);
        MAT(m, qd, H, "attn_output.weight", il);
        VEC(m, H, "post_attention_norm.weight", il);
        VEC(m, H, "ffn_norm.weight", il);
        MAT(m, H, m->ff[l], "ffn_gate.weight", il);
        MAT(m, H, m->ff[l], "ffn_up.weight", il);
        MAT(m, m->ff[l], H, "ffn_down.weight", il);
        VEC(m, H, "post_ffw_norm.weight", il);
        VEC(m, 1, "layer_output_scale.weight", il);
    }
}

static void build(model *m)
{
    const synth_spec *s = &m->sh.s;
    uint64_t H = s->H, V = m->V, LP = (uint64_t)m->L * s->P;
    MAT(m, H, V, "token_embd.weight", -1);
    VEC(m, H, "output_norm.weight", -1);
    VEC(m, m->sh.hd_full / 2, "rope_freqs.weight", -1);
    if (s->P) {
        MAT(m, LP, V, "per_layer_token_embd.weight", -1);
        MAT(m, H, LP, "per_layer_model_proj.weight", -1);
        VEC(m, s->P, "per_layer_proj_norm.weight", -1);
    }
    for (uint32_t l = 0; l < m->L; l++) {
        int il = (int)l;
        uint64_t hd = m->swa[l] ? m->sh.hd_swa : m->sh.hd_full, qd = s->nh * hd, kd = m->nkv[l] * hd;
        VEC(m, H, "attn_norm.weight", il);
        MAT(m, H, qd, "attn_q.weight", il);
        VEC(m, hd, "attn_q_norm.weight", il);
        /* shared-KV layers keep the K/V weights of the checkpoint, unused, as converted files do */
        MAT(m, H, kd, "attn_k.weight", il);
        if (!(s->k_eq_v && !m->swa[l])) MAT(m, H, kd, "attn_v.weight", il);
        VEC(m, hd, "attn_k_norm.weight", il);
        MAT(m, qd, H, "attn_output.weight", il);
        VEC(m, H, "post_attention_norm.weight", il);
        VEC(m, H, "ffn_norm.weight", il);
        MAT(m, H, m->ff[l], "ffn_gate.weight", il);
        MAT(m, H, m->ff[l], "ffn_up.weight", il);
        MAT(m, m->ff[l], H, "ffn_down.weight", il);
        VEC(m, H, "post_ffw_norm.weight", il);
        if (s->n_exp) {
            MAT(m, H, s->n_exp, "ffn_gate_inp.weight", il);
            VEC(m, H, "ffn_gate_inp.scale", il);
            VEC(m, s->n_exp, "ffn_down_exps.scale", il);
            add(m, 3, H, 2 * (uint64_t)s->ff_exp, s->n_exp, "ffn_gate_up_exps.weight", il);
            add(m, 3, s->ff_exp, H, s->n_exp, "ffn_down_exps.weight", il);
            VEC(m, H, "pre_ffw_norm_2.weight", il);
            VEC(m, H, "post_ffw_norm_1.weight", il);
            VEC(m, H, "post_ffw_norm_2.weight", il);
        }
        if (s->P) {
            MAT(m, H, s->P, "inp_gate.weight", il);
            MAT(m, s->P, H, "proj.weight", il);
            VEC(m, H, "post_norm.weight", il);
        }
        VEC(m, 1, "layer_output_scale.weight", il);
    }
}

/* llama_model_loader's weight_name_comparer: layer number (none = -1) first, then the name */
int synth_layer_of(const char *name)
{
    int l = -1;
    if (sscanf(name, "blk.%d.", &l) != 1) l = -1;
    return l;
}
int synth_tens_cmp(const void *x, const void *y)
{
    const tens *a = x, *b = y;
    int la = synth_layer_of(a->name), lb = synth_layer_of(b->name);
    if (la != lb) return la < lb ? -1 : 1;
    return strcmp(a->name, b->name);
}

/* convert_hf_to_gguf.py's type: F32 for 1-D tensors, norms, the router and non-.weight names */
static uint32_t convert_type(const tens *t, uint32_t outtype)
{
    if (t->n_dims <= 1 || ends_with(t->name, "_norm.weight") || strstr(t->name, "ffn_gate_inp.weight") ||
        !ends_with(t->name, ".weight"))
        return GGML_TYPE_F32;
    return outtype;
}

/* llama-quant.cpp's llama_tensor_get_type for arch gemma4 (tied embeddings, no imatrix, not 8
 * experts, so none of its Falcon / 70B / 8-expert branches), in table order: the attn_v counter
 * runs over the sorted names as llama-quantize's does */
static void assign_types(model *m)
{
    const mix *x = m->mx;
    int n_v = 0, i_v = 0, i_down = 0;
    for (size_t i = 0; i < m->n; i++) n_v += strstr(m->t[i].name, "attn_v.weight") != NULL;
    for (size_t i = 0; i < m->n; i++) {
        tens *t = &m->t[i];
        uint32_t src = convert_type(t, x->quantized ? GGML_TYPE_BF16 : x->base);
        t->type = src;
        if (!x->quantized) continue;
        int keep = t->n_dims < 2 || !ends_with(t->name, "weight");
        for (size_t k = 0; k < sizeof NO_QUANT / sizeof *NO_QUANT; k++) keep |= strstr(t->name, NO_QUANT[k]) != NULL;
        if (keep) continue;
        uint32_t ty = x->base;
        if (!strcmp(t->name, "token_embd.weight") || !strcmp(t->name, "per_layer_token_embd.weight")) {
            ty = x->embd;
        } else if (strstr(t->name, "attn_v.weight")) {
            if (synth_use_more_bits(i_v++, n_v)) ty = x->more_bits;
        } else if (strstr(t->name, "ffn_down")) {
            /* with experts the layer comes from the name, else from a count of ffn_down tensors */
            int il = m->sh.s.n_exp > 1 ? synth_layer_of(t->name) : i_down;
            if (synth_use_more_bits(il, (int)m->L)) ty = x->more_bits;
            i_down++;
        }
        t->type = synth_fallback(ty, t->ne[0]);
    }
}

/* ---- metadata ---------------------------------------------------------------------------- */

/* in convert_hf_to_gguf.py's order (Gemma4Model over TextModel: the order of
 * ggml-vocab-gemma-4.gguf's header); llama-quantize rewrites the file type and quantization
 * version, which moves them after the tokenizer keys */
static void metadata(gguf_writer *w, const model *m, const gguf_file *voc)
{
    const synth_spec *s = &m->sh.s;
    const mix *x = m->mx;
    const char *a = m->asst ? "gemma4-assistant" : "gemma4";
    int32_t arr[1024];
    char k[96];
#define KEY(name) (snprintf(k, sizeof k, "%s." name, a), k)
    synth_general_keys(w, a, m->name);
    gguf_w_u32(w, KEY("block_count"), m->L);
    gguf_w_u32(w, KEY("context_length"), s->ctx);
    gguf_w_u32(w, KEY("embedding_length"), m->asst ? ASST_H : s->H);
    if (s->wide_shared && !m->asst) { /* use_double_wide_mlp: one width per layer */
        for (uint32_t l = 0; l < m->L; l++) arr[l] = (int32_t)m->ff[l];
        gguf_w_arr(w, KEY("feed_forward_length"), GGUF_VT_I32, arr, m->L);
    } else {
        gguf_w_u32(w, KEY("feed_forward_length"), m->ff[0]);
    }
    gguf_w_u32(w, KEY("attention.head_count"), s->nh);
    if (s->nkv_swa != s->nkv_full) { /* num_global_key_value_heads: one count per layer */
        for (uint32_t l = 0; l < m->L; l++) arr[l] = (int32_t)m->nkv[l];
        gguf_w_arr(w, KEY("attention.head_count_kv"), GGUF_VT_I32, arr, m->L);
    } else {
        gguf_w_u32(w, KEY("attention.head_count_kv"), s->nkv_swa);
    }
    gguf_w_f32(w, KEY("rope.freq_base"), 1e6f);
    gguf_w_f32(w, KEY("rope.freq_base_swa"), 1e4f);
    gguf_w_f32(w, KEY("attention.layer_norm_rms_epsilon"), 1e-6f);
    if (s->n_exp && !m->asst) {
        gguf_w_u32(w, KEY("expert_count"), s->n_exp);
        gguf_w_u32(w, KEY("expert_used_count"), s->n_used);
    }
    gguf_w_u32(w, KEY("attention.key_length"), m->sh.hd_full);
    gguf_w_u32(w, KEY("attention.value_length"), m->sh.hd_full);
    if (!x->quantized) gguf_w_u32(w, "general.file_type", x->ftype);
    gguf_w_f32(w, KEY("final_logit_softcapping"), 30.0f);
    gguf_w_u32(w, KEY("attention.sliding_window"), s->window);
    gguf_w_u32(w, KEY("attention.shared_kv_layers"), m->asst ? m->L : m->shared);
    gguf_w_u32(w, KEY("embedding_length_per_layer_input"), m->asst ? 0 : s->P);
    gguf_w_arr(w, KEY("attention.sliding_window_pattern"), GGUF_VT_BOOL, m->swa, m->L);
    gguf_w_u32(w, KEY("attention.key_length_swa"), m->sh.hd_swa);
    gguf_w_u32(w, KEY("attention.value_length_swa"), m->sh.hd_swa);
    if (s->n_exp && !m->asst) gguf_w_u32(w, KEY("expert_feed_forward_length"), s->ff_exp);
    gguf_w_u32(w, KEY("rope.dimension_count"), m->sh.hd_full);
    gguf_w_u32(w, KEY("rope.dimension_count_swa"), m->sh.hd_swa);
    if (m->asst) { /* Gemma4AssistantModel's two keys */
        gguf_w_u32(w, KEY("embedding_length_out"), s->H);
        gguf_w_u32(w, KEY("nextn_predict_layers"), m->L);
    }
#undef KEY
    if (!x->quantized) gguf_w_u32(w, "general.quantization_version", 2);
    for (size_t i = 0; i < gguf_kv_count(voc); i++) {
        const gguf_kv *kv = gguf_kv_at(voc, i);
        if (kv->key.len >= 10 && !memcmp(kv->key.ptr, "tokenizer.", 10)) gguf_w_kv(w, kv);
    }
    if (x->quantized) {
        gguf_w_u32(w, "general.quantization_version", 2);
        gguf_w_u32(w, "general.file_type", x->ftype);
    }
}

/* ---- data -------------------------------------------------------------------------------- */

enum { CHUNK = SYNTH_CHUNK };

static int write_data(gguf_writer *w, const void *mv, uint64_t seed, int sparse, uint8_t *buf)
{
    const model *m = mv;
    for (size_t i = 0; i < m->n; i++) {
        const tens *t = &m->t[i];
        if (sparse) { if (gguf_w_write(w, NULL, t->nbytes)) return -1; continue; }
        uint8_t fill = FILL_MAT;
        for (size_t k = 0; k < sizeof FILLS / sizeof *FILLS && fill == FILL_MAT; k++)
            if (strstr(t->name, FILLS[k].part)) fill = FILLS[k].fill;
        uint64_t st = synth_name_seed(t->name, seed);
        float amp = sqrtf(3.0f / (float)t->ne[0]);
        float lo = -amp, hi = amp;
        if (fill == FILL_ONE) { lo = 0.9f; hi = 1.1f; }
        if (fill == FILL_QK) { lo = 0.9f / sqrtf(sqrtf((float)t->ne[0])); hi = lo * 1.1f / 0.9f; }
        if (fill == FILL_ROUTER) { lo = -sqrtf(3.0f); hi = sqrtf(3.0f); }
        if (fill == FILL_LSCALE) { lo = 0.5f; hi = 0.9f; } /* checkpoints carry a scalar below 1 */
        if (fill == FILL_ROPE) { /* F32: the first n_rot pairs rotate, the rest are frozen */
            float *f = (float *)buf;
            for (uint64_t j = 0; j < t->ne[0]; j++) f[j] = j < m->n_rot_full ? 1.0f : 1e30f;
            if (gguf_w_write(w, buf, t->nbytes)) return -1;
            continue;
        }
        if (synth_blocks_write(w, t->type, t->nbytes, amp, lo, hi, &st, buf, CHUNK)) return -1;
    }
    return 0;
}

void synth_type_summary(const tens *t, size_t nt, char *out, size_t n)
{
    uint64_t bytes[GGML_TYPE_COUNT] = { 0 };
    uint32_t count[GGML_TYPE_COUNT] = { 0 };
    for (size_t i = 0; i < nt; i++) { bytes[t[i].type] += t[i].nbytes; count[t[i].type]++; }
    size_t o = 0;
    out[0] = 0;
    for (;;) {
        int best = -1;
        for (int t = 0; t < GGML_TYPE_COUNT; t++)
            if (count[t] && (best < 0 || bytes[t] > bytes[best])) best = t;
        if (best < 0 || o >= n) break;
        int k = snprintf(out + o, n - o, "%s%s %u (%.2f GiB)", o ? ", " : "", ggml_type_name((uint32_t)best),
                         count[best], bytes[best] / 1073741824.0);
        o += k > 0 ? (size_t)k : 0;
        count[best] = 0;
    }
}

void synth_general_keys(gguf_writer *w, const char *arch, const char *name)
{
    gguf_w_str(w, "general.architecture", arch);
    gguf_w_str(w, "general.type", "model");
    gguf_w_str(w, "general.name", name);
}

void synth_tens_set(tens *t, uint32_t n_dims, uint64_t a, uint64_t b, uint64_t c, const char *part, int il)
{
    memset(t, 0, sizeof *t);
    if (il >= 0) snprintf(t->name, sizeof t->name, "blk.%d.%s", il, part);
    else snprintf(t->name, sizeof t->name, "%s", part);
    t->n_dims = n_dims;
    t->ne[0] = a; t->ne[1] = b; t->ne[2] = c;
}

int synth_finish(gguf_writer *w, tens *t, size_t n, const char *path, synth_data_fn *data, const void *m,
                 const synth_gguf_opts *o, synth_gguf_info *info, char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++)
        if (!synth_blocks_supported(t[i].type))
            return ERR("%s: no random blocks for type %s", t[i].name, ggml_type_name(t[i].type));
    uint8_t *buf = malloc(CHUNK);
    if (!buf) return ERR("out of memory");
    for (size_t i = 0; i < n; i++) t[i].nbytes = gguf_w_tensor(w, t[i].name, t[i].type, t[i].n_dims, t[i].ne);
    if (gguf_w_open(w, path) == 0) data(w, m, o->seed, o->sparse, buf);
    free(buf);
    if (gguf_w_close(w, err, errlen)) return -1;
    info->n_tensors = (uint32_t)n;
    info->file_bytes = gguf_w_file_size(w);
    synth_type_summary(t, n, info->types, sizeof info->types);
    return 0;
}

uint32_t synth_gguf_width(const char *model)
{
    shape sh;
    int asst;
    return find_shape(model, &sh, &asst) || asst ? 0 : sh.s.H;
}

int synth_gguf_write(const synth_gguf_opts *o, const char *path, synth_gguf_info *info, char *err, size_t errlen)
{
    if (synth_qwen35_model(o->model)) return synth_qwen35_write(o, path, info, err, errlen);
    double t0 = monotonic_seconds();
    memset(info, 0, sizeof *info);
    model m = { 0 };
    if (find_shape(o->model, &m.sh, &m.asst))
        return ERR("unknown model '%s' (gemma4-e2b, gemma4-e4b, gemma4-26b-a4b, gemma4-31b, gemma4-tiny, "
                   "gemma4-tiny-moe, gemma4-tiny-e; each with -assistant: its MTP drafter; qwen35-27b, qwen35-35b-a3b, "
                   "qwen35-tiny, qwen35-tiny-moe)", o->model);
    m.mx = synth_mix_find(o->mix);
    if (!m.mx) return ERR("unknown --mix '%s' (q4_k_m, q8_0, q4_k, bf16, f32)", o->mix);
    if (o->layers < 0 || (uint32_t)o->layers > m.sh.s.L)
        return ERR("--layers %d: %s has 1..%u layers", o->layers, o->model, m.sh.s.L);
    gguf_file *voc;
    char verr[400];
    if (gguf_open(&voc, o->vocab, verr, sizeof verr)) return ERR("vocabulary %s: %s", o->vocab, verr);
    const gguf_str *toks;
    uint64_t n_tok;
    if (gguf_get_str_arr(voc, "tokenizer.ggml.tokens", &toks, &n_tok) || n_tok == 0) {
        gguf_close(voc);
        return ERR("vocabulary %s: no tokenizer.ggml.tokens", o->vocab);
    }
    m.V = (uint32_t)n_tok;
    if (m.asst) plan_assistant(&m);
    else plan(&m, o->layers ? (uint32_t)o->layers : m.sh.s.L);
    if (o->layers && (uint32_t)o->layers != m.sh.s.L && !m.asst)
        snprintf(m.name, sizeof m.name, "synthetic %s %s (%u layers)", o->model, o->mix, m.L);
    else
        snprintf(m.name, sizeof m.name, "synthetic %s %s", o->model, o->mix);
    if (m.asst) build_assistant(&m);
    else build(&m);
    int rc = -1;
    gguf_writer *w = NULL;
    if (m.oom || !(w = gguf_writer_create(0))) { ERR("out of memory"); goto done; }
    qsort(m.t, m.n, sizeof *m.t, synth_tens_cmp);
    assign_types(&m);
    metadata(w, &m, voc);
    snprintf(info->name, sizeof info->name, "%s", m.name);
    info->n_layer = m.L;
    rc = synth_finish(w, m.t, m.n, path, write_data, &m, o, info, err, errlen);
done:
    gguf_writer_destroy(w);
    free(m.t);
    gguf_close(voc);
    info->seconds = monotonic_seconds() - t0;
    return rc;
}
