/* synth_qwen35.c — see synth_qwen35.h. Sources: llama.cpp (October 2026) conversion/qwen.py (keys, their
 * order, the MTP block, converter types), src/llama-quant.cpp (the Q4_K_M rules), src/models/qwen35.cpp and
 * qwen35moe.cpp (the tensors the loader creates); tests/fixtures/qwen35_*.gguf (what the converter and
 * llama-quantize wrote for a tiny shape). */
#include "synth_qwen35.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "errf.h"
#include "gguf.h"
#include "gguf_write.h"
#include "synth_blocks.h"
#include "synth_quant.h"

/* ---- shapes and mixes ------------------------------------------------------------------- */

typedef struct qshape {
    const char *name;
    uint32_t H, L, nh, nkv, ff;    /* ff: the dense FFN, or each expert's width */
    uint32_t hk, hv;               /* gated-delta key / value heads */
    uint32_t n_exp, n_used, ff_sh; /* MoE: experts, experts per token, shared expert width */
} qshape;

/* the reported shapes (docs/design-qwen35.md 0), then test shapes with the same structure and rows of whole
 * 256-blocks, so the same types (16 experts: llama-quant treats exactly 8 specially) */
static const qshape SHAPES[] = {
    { "qwen35-27b", 5120, 64, 24, 4, 17408, 16, 48, 0, 0, 0 },
    { "qwen35-35b-a3b", 2048, 40, 16, 2, 512, 16, 32, 256, 8, 512 },
    { "qwen35-tiny", 256, 4, 2, 1, 512, 2, 4, 0, 0, 0 },
    { "qwen35-tiny-moe", 256, 4, 2, 1, 256, 2, 4, 16, 4, 256 },
};
#define N_SHAPES (sizeof SHAPES / sizeof *SHAPES)

/* head dims, conv kernel, rotated dims, attention interval, MTP blocks, context: both models (design 0, 2.1) */
enum { HD = 256, DK = 128, KC = 4, ROT = 64, INTERVAL = 4, MTP = 1, CTX = 262144, MAX_BLOCKS = 256 };
enum { VOCAB = 248320 };             /* Qwen 3.5/3.6's embedding rows (design 8) */
enum { TOK_UNUSED = 5 };             /* llama.cpp's LLAMA_TOKEN_TYPE_UNUSED, as the converter pads */
enum { PER_BLOCK = 24 };             /* tensors per block, at most (an MTP block of experts: 20) */

/* names llama-quant.cpp's tensor_allows_quantization keeps (those of qwen35), and the converter writes F32 */
static const char *const NO_QUANT[] = { "_norm.weight", "ffn_gate_inp", "ssm_conv1d" };

/* values by name suffix; the rest uniform in ±sqrt(3 / row) so products keep their input's size (the router's
 * logits then O(1) for its unit-RMS input, as a trained router's). ssm_a is −exp(A_log): decays e^g in (0, 1) */
static const struct { const char *suffix; float lo, hi; } FILLS[] = {
    { ".ssm_a", -1.0f, -0.05f }, { "ssm_dt.bias", 0.5f, 1.5f }, { "norm.weight", 0.9f, 1.1f },
};

int synth_qwen35_model(const char *model)
{
    for (size_t i = 0; i < N_SHAPES; i++)
        if (!strcmp(model, SHAPES[i].name)) return 1;
    return 0;
}

/* ---- the tensor list ---------------------------------------------------------------------- */

typedef struct qmodel {
    const qshape *s;
    const synth_mix *x;
    uint32_t L, NB, V;      /* trunk layers, blocks (trunk + MTP), vocabulary */
    uint8_t rec[MAX_BLOCKS];
    synth_tens *t;
    size_t n;
    char name[96];
} qmodel;

static int ends_with(const char *s, const char *t)
{
    size_t a = strlen(s), b = strlen(t);
    return a >= b && !memcmp(s + a - b, t, b);
}

/* t has room for PER_BLOCK tensors a block, allocated up front */
static void put(qmodel *m, uint32_t n_dims, uint64_t a, uint64_t b, uint64_t c, const char *part, int il)
{
    synth_tens_set(&m->t[m->n++], n_dims, a, b, c, part, il);
}
#define VEC(m, n, name, il) put(m, 1, n, 1, 1, name, il)
#define MAT(m, a, b, name, il) put(m, 2, a, b, 1, name, il)

/* gated full attention: attn_q holds per head hd query rows then hd gate rows (design 2.2) */
static void attention(qmodel *m, int il)
{
    uint64_t H = m->s->H, qd = (uint64_t)m->s->nh * HD, kd = (uint64_t)m->s->nkv * HD;
    MAT(m, H, 2 * qd, "attn_q.weight", il);
    MAT(m, H, kd, "attn_k.weight", il);
    MAT(m, H, kd, "attn_v.weight", il);
    MAT(m, qd, H, "attn_output.weight", il);
    VEC(m, HD, "attn_q_norm.weight", il);
    VEC(m, HD, "attn_k_norm.weight", il);
}

static void gated_delta(qmodel *m, int il)
{
    uint64_t H = m->s->H, hv = m->s->hv, vd = hv * DK, dc = 2ull * m->s->hk * DK + vd;
    MAT(m, H, dc, "attn_qkv.weight", il);
    MAT(m, H, vd, "attn_gate.weight", il);
    MAT(m, KC, dc, "ssm_conv1d.weight", il);
    VEC(m, hv, "ssm_dt.bias", il);
    VEC(m, hv, "ssm_a", il);
    MAT(m, H, hv, "ssm_beta.weight", il);
    MAT(m, H, hv, "ssm_alpha.weight", il);
    VEC(m, DK, "ssm_norm.weight", il);
    MAT(m, vd, H, "ssm_out.weight", il);
}

/* dense SwiGLU, or routed experts beside a gated shared expert (whose gate llama-quantize writes 1-D) */
static void ffn(qmodel *m, int il)
{
    const qshape *s = m->s;
    uint64_t H = s->H, F = s->ff;
    if (!s->n_exp) {
        MAT(m, H, F, "ffn_gate.weight", il);
        MAT(m, H, F, "ffn_up.weight", il);
        MAT(m, F, H, "ffn_down.weight", il);
        return;
    }
    MAT(m, H, s->n_exp, "ffn_gate_inp.weight", il);
    put(m, 3, H, F, s->n_exp, "ffn_gate_exps.weight", il);
    put(m, 3, H, F, s->n_exp, "ffn_up_exps.weight", il);
    put(m, 3, F, H, s->n_exp, "ffn_down_exps.weight", il);
    put(m, m->x->quantized ? 1 : 2, H, 1, 1, "ffn_gate_inp_shexp.weight", il);
    MAT(m, H, s->ff_sh, "ffn_gate_shexp.weight", il);
    MAT(m, H, s->ff_sh, "ffn_up_shexp.weight", il);
    MAT(m, s->ff_sh, H, "ffn_down_shexp.weight", il);
}

static void build(qmodel *m)
{
    uint64_t H = m->s->H;
    MAT(m, H, m->V, "token_embd.weight", -1);
    VEC(m, H, "output_norm.weight", -1);
    MAT(m, H, m->V, "output.weight", -1);
    for (uint32_t l = 0; l < m->NB; l++) {
        int il = (int)l;
        VEC(m, H, "attn_norm.weight", il);
        VEC(m, H, "post_attention_norm.weight", il);
        if (m->rec[l]) gated_delta(m, il);
        else attention(m, il);
        ffn(m, il);
        if (l < m->L) continue;
        /* the MTP block (qwen.py's mtp.* remap): a full-attention block plus these */
        MAT(m, 2 * H, H, "nextn.eh_proj.weight", il);
        VEC(m, H, "nextn.enorm.weight", il);
        VEC(m, H, "nextn.hnorm.weight", il);
        VEC(m, H, "nextn.shared_head_norm.weight", il);
    }
}

/* convert_hf_to_gguf.py's type, then llama-quant.cpp's llama_tensor_get_type for qwen35 / qwen35moe
 * (untied output, no imatrix, not 8 experts): attn_qkv is attn_v-like there, so it gets attn_v's rule and
 * counter, not the ATTENTION_QKV branch (design 2.3); the counters run over the sorted names and
 * n_layer_all (the MTP block included) */
static void assign_types(qmodel *m)
{
    const synth_mix *x = m->x;
    int n_v = 0, i_v = 0, i_down = 0;
    for (size_t i = 0; i < m->n; i++)
        n_v += strstr(m->t[i].name, "attn_v.weight") || strstr(m->t[i].name, "attn_qkv.weight");
    for (size_t i = 0; i < m->n; i++) {
        synth_tens *t = &m->t[i];
        int keep = t->n_dims < 2 || !ends_with(t->name, "weight");
        for (size_t k = 0; k < sizeof NO_QUANT / sizeof *NO_QUANT; k++) keep |= strstr(t->name, NO_QUANT[k]) != NULL;
        t->type = keep ? GGML_TYPE_F32 : x->quantized ? GGML_TYPE_BF16 : x->base;
        if (!x->quantized || keep) continue;
        uint32_t ty = x->base;
        if (!strcmp(t->name, "output.weight")) {
            ty = x->embd;
        } else if (strstr(t->name, "attn_v.weight") || strstr(t->name, "attn_qkv.weight")) {
            if (synth_use_more_bits(i_v++, n_v)) ty = x->more_bits;
        } else if (strstr(t->name, "ffn_down")) {
            int il = m->s->n_exp > 1 ? synth_layer_of(t->name) : i_down++;
            if (synth_use_more_bits(il, (int)m->NB)) ty = x->more_bits;
        }
        t->type = synth_fallback(ty, t->ne[0]);
    }
}

/* ---- metadata ------------------------------------------------------------------------------ */

static int key_is(const gguf_kv *kv, const char *key)
{
    return kv->key.len == strlen(key) && !memcmp(kv->key.ptr, key, kv->key.len);
}

/* tokenizer.* of the vocabulary GGUF, tokens and token types padded to V with "[PADi]" UNUSED entries */
static int tokenizer_keys(gguf_writer *w, const gguf_file *voc, uint32_t V, char *err, size_t errlen)
{
    const gguf_str *toks;
    uint64_t n, nt;
    uint32_t et;
    const void *types;
    if (gguf_get_str_arr(voc, "tokenizer.ggml.tokens", &toks, &n) ||
        gguf_get_arr(voc, "tokenizer.ggml.token_type", &et, &nt, &types) || et != GGUF_VT_I32 || nt != n || n > V)
        return ERR("vocabulary: no tokenizer.ggml.tokens and i32 tokenizer.ggml.token_type");
    gguf_str *s = malloc(V * sizeof *s);
    int32_t *ty = malloc(V * sizeof *ty);
    char *pads = malloc((size_t)(V - n) * 16 + 1);
    if (!s || !ty || !pads) { free(s); free(ty); free(pads); return ERR("out of memory"); }
    memcpy(s, toks, n * sizeof *s);
    memcpy(ty, types, n * sizeof *ty);
    char *p = pads;
    for (uint64_t i = n; i < V; i++) {
        int k = snprintf(p, 16, "[PAD%llu]", (unsigned long long)i);
        s[i] = (gguf_str){ p, (uint64_t)k };
        ty[i] = TOK_UNUSED;
        p += k;
    }
    for (size_t i = 0; i < gguf_kv_count(voc); i++) {
        gguf_kv kv = *gguf_kv_at(voc, i);
        if (kv.key.len < 10 || memcmp(kv.key.ptr, "tokenizer.", 10)) continue;
        if (key_is(&kv, "tokenizer.ggml.tokens")) { kv.arr_strs = s; kv.arr_n = V; }
        if (key_is(&kv, "tokenizer.ggml.token_type")) { kv.data = (const uint8_t *)ty; kv.arr_n = V; }
        gguf_w_kv(w, &kv);
    }
    free(s);
    free(ty);
    free(pads);
    return 0;
}

/* in convert_hf_to_gguf.py's order (Qwen3_5TextModel: TextModel, Qwen2MoeModel, the MTP mixin, Qwen3Next,
 * the MRoPE mixin; as tests/fixtures/qwen35_*.gguf hold them); llama-quantize moves the file type and
 * quantization version after the tokenizer keys */
static int metadata(gguf_writer *w, const qmodel *m, const gguf_file *voc, char *err, size_t errlen)
{
    const qshape *s = m->s;
    const synth_mix *x = m->x;
    const char *a = s->n_exp ? "qwen35moe" : "qwen35";
    static const int32_t sections[4] = { 11, 11, 10, 0 }; /* mrope_section's default (qwen.py) */
    char k[96];
#define KEY(name) (snprintf(k, sizeof k, "%s." name, a), k)
    synth_general_keys(w, a, m->name);
    gguf_w_u32(w, KEY("block_count"), m->NB);
    gguf_w_u32(w, KEY("context_length"), CTX);
    gguf_w_u32(w, KEY("embedding_length"), s->H);
    if (!s->n_exp) gguf_w_u32(w, KEY("feed_forward_length"), s->ff);
    gguf_w_u32(w, KEY("attention.head_count"), s->nh);
    gguf_w_u32(w, KEY("attention.head_count_kv"), s->nkv);
    gguf_w_f32(w, KEY("rope.freq_base"), 1e7f);
    gguf_w_f32(w, KEY("attention.layer_norm_rms_epsilon"), 1e-6f);
    if (s->n_exp) {
        gguf_w_u32(w, KEY("expert_count"), s->n_exp);
        gguf_w_u32(w, KEY("expert_used_count"), s->n_used);
    }
    gguf_w_u32(w, KEY("attention.key_length"), HD);
    gguf_w_u32(w, KEY("attention.value_length"), HD);
    if (!x->quantized) gguf_w_u32(w, "general.file_type", x->ftype);
    if (s->n_exp) {
        gguf_w_u32(w, KEY("expert_feed_forward_length"), s->ff);
        gguf_w_u32(w, KEY("expert_shared_feed_forward_length"), s->ff_sh);
    }
    gguf_w_u32(w, KEY("nextn_predict_layers"), MTP);
    gguf_w_u32(w, KEY("ssm.conv_kernel"), KC);
    gguf_w_u32(w, KEY("ssm.state_size"), DK);
    gguf_w_u32(w, KEY("ssm.group_count"), s->hk);
    gguf_w_u32(w, KEY("ssm.time_step_rank"), s->hv);
    gguf_w_u32(w, KEY("ssm.inner_size"), s->hv * DK);
    gguf_w_arr(w, KEY("attention.recurrent_layers"), GGUF_VT_BOOL, m->rec, m->NB);
    gguf_w_u32(w, KEY("full_attention_interval"), INTERVAL);
    gguf_w_u32(w, KEY("rope.dimension_count"), ROT);
    gguf_w_arr(w, KEY("rope.dimension_sections"), GGUF_VT_I32, sections, 4);
#undef KEY
    if (!x->quantized) gguf_w_u32(w, "general.quantization_version", 2);
    if (tokenizer_keys(w, voc, m->V, err, errlen)) return -1;
    if (x->quantized) {
        gguf_w_u32(w, "general.quantization_version", 2);
        gguf_w_u32(w, "general.file_type", x->ftype);
    }
    return 0;
}

/* ---- data ---------------------------------------------------------------------------------- */

static int write_data(gguf_writer *w, const void *mv, uint64_t seed, int sparse, uint8_t *buf)
{
    const qmodel *m = mv;
    for (size_t i = 0; i < m->n; i++) {
        const synth_tens *t = &m->t[i];
        if (sparse) { if (gguf_w_write(w, NULL, t->nbytes)) return -1; continue; }
        float amp = sqrtf(3.0f / (float)t->ne[0]), lo = -amp, hi = amp;
        for (size_t k = 0; k < sizeof FILLS / sizeof *FILLS; k++)
            if (ends_with(t->name, FILLS[k].suffix)) { lo = FILLS[k].lo; hi = FILLS[k].hi; break; }
        uint64_t st = synth_name_seed(t->name, seed);
        size_t bs = ggml_type_size(t->type), per = SYNTH_CHUNK / bs;
        for (uint64_t b = 0, blocks = t->nbytes / bs; b < blocks; b += per) {
            size_t k = (size_t)(blocks - b < per ? blocks - b : per);
            synth_blocks(t->type, buf, k, amp, lo, hi, &st);
            if (gguf_w_write(w, buf, k * bs)) return -1;
        }
    }
    return 0;
}

int synth_qwen35_write(const synth_gguf_opts *o, const char *path, synth_gguf_info *info, char *err, size_t errlen)
{
    double t0 = monotonic_seconds();
    memset(info, 0, sizeof *info);
    qmodel m = { 0 };
    for (size_t i = 0; i < N_SHAPES; i++)
        if (!strcmp(o->model, SHAPES[i].name)) m.s = &SHAPES[i];
    m.x = synth_mix_find(o->mix);
    if (!m.s) return ERR("unknown model '%s' (qwen35-27b, qwen35-35b-a3b, qwen35-tiny, qwen35-tiny-moe)", o->model);
    if (!m.x) return ERR("unknown --mix '%s' (q4_k_m, q8_0, q4_k, bf16, f32)", o->mix);
    if (o->layers < 0 || (uint32_t)o->layers > m.s->L)
        return ERR("--layers %d: %s has 1..%u layers", o->layers, o->model, m.s->L);
    m.L = o->layers ? (uint32_t)o->layers : m.s->L;
    m.NB = m.L + MTP;
    for (uint32_t l = 0; l < m.NB; l++) m.rec[l] = l < m.L && (l + 1) % INTERVAL != 0;
    if (m.L != m.s->L) snprintf(m.name, sizeof m.name, "synthetic %s %s (%u layers)", o->model, o->mix, m.L);
    else snprintf(m.name, sizeof m.name, "synthetic %s %s", o->model, o->mix);
    gguf_file *voc;
    char verr[400];
    if (gguf_open(&voc, o->vocab, verr, sizeof verr)) return ERR("vocabulary %s: %s", o->vocab, verr);
    const gguf_str *toks;
    uint64_t n_tok;
    if (gguf_get_str_arr(voc, "tokenizer.ggml.tokens", &toks, &n_tok) || n_tok == 0 || n_tok > VOCAB) {
        gguf_close(voc);
        return ERR("vocabulary %s: no tokenizer.ggml.tokens, or more than %d", o->vocab, VOCAB);
    }
    m.V = VOCAB;
    int rc = -1;
    gguf_writer *w = gguf_writer_create(0);
    m.t = malloc((size_t)(m.NB + 1) * PER_BLOCK * sizeof *m.t);
    if (!w || !m.t) {
        ERR("out of memory");
    } else {
        build(&m);
        qsort(m.t, m.n, sizeof *m.t, synth_tens_cmp);
        assign_types(&m);
        snprintf(info->name, sizeof info->name, "%s", m.name);
        info->n_layer = m.L;
        if (metadata(w, &m, voc, err, errlen) == 0)
            rc = synth_finish(w, m.t, m.n, path, write_data, &m, o, info, err, errlen);
    }
    gguf_close(voc);
    gguf_writer_destroy(w);
    free(m.t);
    info->seconds = monotonic_seconds() - t0;
    return rc;
}
