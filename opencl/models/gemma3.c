/* gemma3.c — Gemma 3 text model (GGUF arch "gemma3"): weights and forward pass.
 *
 * Per layer: x += postnorm_a(attn(norm_a(x)));  x += postnorm_f(down(gelu(gate(h)) * up(h))), h = norm_f(x).
 * Attention: per-head RMS-normalised Q and K, NEOX RoPE (base 10k on sliding layers, the file's
 * base and linear scale on global ones), causal, window on sliding layers, GQA.
 * Embeddings are scaled by sqrt(n_embd); the output head is tied to the embeddings unless the
 * file has output.weight. */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errf.h"
#include "load.h"

/* what registry.c's row points at, declared here too so that the compiler checks the definitions */
model_load_fn gemma3_load;
model_unload_fn gemma3_unload;
model_layer_window_fn gemma3_layer_window;
model_forward_fn gemma3_forward;
model_kv_layout_fn gemma3_kv_layout;

/* the hyperparameters (the file's keys only) and the sliding-window pattern: every pattern-th layer is global */
static int read_hparams(const gguf_file *f, model_hparams *hp, uint32_t *pattern, char *err, size_t errlen)
{
    const char *A = hp->arch;
    if (key_u32(f, A, "block_count", &hp->n_layer, 1, err, errlen) ||
        key_u32(f, A, "embedding_length", &hp->n_embd, 1, err, errlen) ||
        key_u32(f, A, "attention.head_count", &hp->n_head, 1, err, errlen) ||
        key_u32(f, A, "feed_forward_length", &hp->n_ff, 1, err, errlen) ||
        key_u32(f, A, "context_length", &hp->n_ctx_train, 1, err, errlen))
        return -1;
    hp->n_kv = hp->n_head;
    hp->head_dim = hp->n_head ? hp->n_embd / hp->n_head : 0;
    hp->window = 0;
    if (key_u32(f, A, "attention.head_count_kv", &hp->n_kv, 0, err, errlen) ||
        key_u32(f, A, "attention.key_length", &hp->head_dim, 0, err, errlen) ||
        key_u32(f, A, "attention.sliding_window", &hp->window, 0, err, errlen))
        return -1;
    uint32_t vlen = hp->head_dim;
    if (key_u32(f, A, "attention.value_length", &vlen, 0, err, errlen)) return -1;
    if (hp->n_layer == 0 || hp->n_layer > 1024 || hp->n_embd == 0 || hp->n_embd % 32 || hp->n_head == 0 ||
        hp->n_kv == 0 || hp->n_head % hp->n_kv || hp->head_dim == 0 || hp->head_dim % 32 ||
        hp->head_dim > 1024 || vlen != hp->head_dim || hp->n_ff == 0 || hp->n_ff % 32)
        return ERR("model: inconsistent gemma3 hyperparameters (layers %u, embd %u, heads %u/%u, head_dim %u/%u, ff %u)",
                   hp->n_layer, hp->n_embd, hp->n_head, hp->n_kv, hp->head_dim, vlen, hp->n_ff);
    hp->eps = 1e-6f;
    hp->rope_base_global = 1e6f;
    hp->rope_base_local = 1e4f; /* Gemma 3 fixes the local base; the file only gives the global one */
    hp->rope_scale_global = 1.0f;
    float factor = 1.0f;
    if (key_f32(f, A, "attention.layer_norm_rms_epsilon", &hp->eps, err, errlen) ||
        key_f32(f, A, "rope.freq_base", &hp->rope_base_global, err, errlen) ||
        key_f32(f, A, "rope.scaling.factor", &factor, err, errlen) ||
        key_f32(f, A, "final_logit_softcapping", &hp->final_softcap, err, errlen) ||
        key_f32(f, A, "attn_logit_softcapping", &hp->attn_softcap, err, errlen))
        return -1;
    gguf_str st;
    if (gguf_get_str(f, "gemma3.rope.scaling.type", &st) == 0 && gguf_str_eq(st, "linear") && factor > 0)
        hp->rope_scale_global = 1.0f / factor;
    else if (factor > 0 && factor != 1.0f)
        hp->rope_scale_global = 1.0f / factor;
    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
    hp->embd_scale = sqrtf((float)hp->n_embd);
    *pattern = 6;
    if (key_u32(f, A, "attention.sliding_window_pattern", pattern, 0, err, errlen)) return -1;
    if (*pattern == 0) *pattern = 1;
    return 0;
}

static int is_sliding(const model_hparams *hp, uint32_t pattern, uint32_t l)
{
    return hp->window > 0 && (l % pattern) < pattern - 1;
}

int gemma3_kv_layout(const gguf_file *f, model_kv_layout *out, char *err, size_t errlen)
{
    model_hparams hp = { .arch = "gemma3" };
    uint32_t pattern;
    if (read_hparams(f, &hp, &pattern, err, errlen) || model_kv_layout_alloc(out, hp.n_layer, err, errlen)) return -1;
    out->n_ctx_train = hp.n_ctx_train;
    for (uint32_t l = 0; l < hp.n_layer; l++) {
        out->dims[l] = hp.n_kv * hp.head_dim;
        out->window[l] = is_sliding(&hp, pattern, l) ? hp.window : 0;
    }
    return 0;
}

int gemma3_load(model *m, const model_src *src, char *err, size_t errlen)
{
    const gguf_file *f = src->f;
    model_hparams *hp = &m->hp;
    uint32_t pattern;
    if (read_hparams(f, hp, &pattern, err, errlen)) return -1;
    const gguf_tensor *te = gguf_find_tensor(f, "token_embd.weight");
    if (!te) return ERR("model: missing tensor 'token_embd.weight'");
    hp->n_vocab = (uint32_t)te->ne[1];
    uint64_t *B = &m->weight_bytes;
    if (load_mat(src, "token_embd.weight", hp->n_embd, hp->n_vocab, 1, &m->tok_embd, B, err, errlen) ||
        load_vec(src, "output_norm.weight", hp->n_embd, &m->output_norm, B, err, errlen))
        return -1;
    if (gguf_find_tensor(f, "output.weight")) {
        if (load_mat(src, "output.weight", hp->n_embd, hp->n_vocab, 1, &m->output, B, err, errlen)) return -1;
    } else {
        m->output = m->tok_embd;
    }
    m->layers = calloc(hp->n_layer, sizeof *m->layers);
    if (!m->layers) return ERR("out of memory");
    uint32_t qd = hp->n_head * hp->head_dim, kd = hp->n_kv * hp->head_dim;
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        layer_weights *L = &m->layers[l];
        L->is_swa = is_sliding(hp, pattern, l);
        char n[96];
#define T2(field, nm, c, r) (snprintf(n, sizeof n, "blk.%u." nm ".weight", l), \
        load_mat(src, n, c, r, 1, &L->field, B, err, errlen))
#define T1(field, nm, c) (snprintf(n, sizeof n, "blk.%u." nm ".weight", l), \
        load_vec(src, n, c, &L->field, B, err, errlen))
        if (T2(q, "attn_q", hp->n_embd, qd) || T2(k, "attn_k", hp->n_embd, kd) || T2(v, "attn_v", hp->n_embd, kd) ||
            T2(o, "attn_output", qd, hp->n_embd) || T2(gate, "ffn_gate", hp->n_embd, hp->n_ff) ||
            T2(up, "ffn_up", hp->n_embd, hp->n_ff) || T2(down, "ffn_down", hp->n_ff, hp->n_embd) ||
            T1(attn_norm, "attn_norm", hp->n_embd) || T1(q_norm, "attn_q_norm", hp->head_dim) ||
            T1(k_norm, "attn_k_norm", hp->head_dim) || T1(post_attn_norm, "post_attention_norm", hp->n_embd) ||
            T1(ffn_norm, "ffn_norm", hp->n_embd) || T1(post_ffw_norm, "post_ffw_norm", hp->n_embd))
            return -1;
#undef T1
#undef T2
        size_t e[] = { (size_t)qd * hp->n_embd, (size_t)hp->n_ff * hp->n_embd };
        for (int i = 0; i < 2; i++)
            if (e[i] > m->max_weight_elems) m->max_weight_elems = e[i];
    }
    m->freq_local = rope_freqs(src->rt, hp->head_dim, hp->rope_base_local, 1.0, NULL, err, errlen);
    m->freq_global = m->freq_local ? rope_freqs(src->rt, hp->head_dim, hp->rope_base_global, hp->rope_scale_global,
                                                NULL, err, errlen)
                                   : NULL;
    return m->freq_global ? 0 : -1;
}

void gemma3_unload(model *m)
{
    if (m->layers)
        for (uint32_t l = 0; l < m->hp.n_layer; l++) layer_weights_release(&m->layers[l]);
    free(m->layers);
    m->layers = NULL;
}

uint32_t gemma3_layer_window(const model *m, uint32_t l) { return m->layers[l].is_swa ? m->hp.window : 0; }


/* the Q/K/V products of layer l */
static void qkv_outs(const model *m, uint32_t l, const fwd_bufs *b, mm_out out[3])
{
    const model_hparams *hp = &m->hp;
    const layer_weights *L = &m->layers[l];
    uint32_t qd = hp->n_head * hp->head_dim, kd = hp->n_kv * hp->head_dim;
    out[0] = (mm_out){ &L->q, b->q, qd };
    out[1] = (mm_out){ &L->k, b->k, kd };
    out[2] = (mm_out){ &L->v, b->v, kd };
}

/* norm, RoPE and the cache write of the raw Q/K/V, then attention (one launch for a decode batch
 * on NVIDIA) */
static void attention(const model *m, ops *o, fwd_bufs *b, kv_cache *kv, uint32_t l, const fwd_args *a)
{
    const model_hparams *hp = &m->hp;
    const layer_weights *L = &m->layers[l];
    kv_view kk = kv_layer_k(kv, l), vv = kv_layer_v(kv, l);
    attn_batch ab = { b->q, b->att, b->pos, b->seq, a->seq, a->ntok, a->max_pos, b->part_acc, b->part_ml, b->part_cnt,
                      b->part_elems, hp->head_dim, NULL, 0 };
    attn_layer al = { hp->n_head, hp->n_kv, hp->head_dim, L->is_swa ? (int)hp->window : 0,
                      hp->attn_scale, hp->attn_softcap, &kk, &vv };
    qkv_raw raw = { b->k, b->v, L->q_norm, L->k_norm, L->is_swa ? m->freq_local : m->freq_global, 1, 0, hp->eps,
                    hp->head_dim };
    op_qkv_attention(o, &raw, &ab, &al);
}

int gemma3_forward(const model *m, ops *o, fwd_bufs *b, kv_cache *kv, const fwd_args *a, char *err, size_t errlen)
{
    const model_hparams *hp = &m->hp;
    uint32_t T = a->ntok, d = hp->n_embd, F = hp->n_ff, qd = hp->n_head * hp->head_dim;
    float eps = hp->eps;
    mm_out qkv[3];
    qkv_outs(m, 0, b, qkv);
    op_embed(o, &m->tok_embd, b->ids, T, hp->embd_scale, b->x.cur);       /* x = embed(ids) * sqrt(d) */
    op_rmsnorm(o, b->x.cur, m->layers[0].attn_norm, b->x.spare, T, d, eps); /* h = norm(x) */
    op_matmul_multi(o, qkv, 3, b->x.spare, d, T);                          /* q, k, v = W h */
    /* on entry b->q, b->k, b->v hold layer l's raw projections and b->x.cur the residual stream */
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        const layer_weights *L = &m->layers[l];
        mm_out gu[2] = { { &L->gate, b->g, F }, { &L->up, b->u, F } };
        norm_chain pa = { .x = b->o, .wx = L->post_attn_norm, .scale = 1.0f, .out = { { L->ffn_norm, NULL } },
                          .nout = 1 };
        norm_chain ff = { .x = b->o, .wx = L->post_ffw_norm, .scale = 1.0f };
        int nq = 0;
        if (l + 1 < hp->n_layer) {
            qkv_outs(m, l + 1, b, qkv);
            ff.out[0] = (norm_out){ m->layers[l + 1].attn_norm, NULL };
            ff.nout = 1;
            nq = 3;
        }
        attention(m, o, b, kv, l, a);                                    /* att = attn(rope(norm(q, k)), v) */
        op_matmul(o, &L->o, b->att, qd, b->o, d, T);                     /* o = Wo att */
        op_norm_matmul(o, &b->x, &pa, gu, 2, d, T, eps);                 /* x += norm(o); g, u = W norm(x) */
        op_matmul_geglu(o, &L->down, b->g, F, b->u, 0, F, b->o, d, T);   /* o = down(gelu(g) * u) */
        op_norm_matmul(o, &b->x, &ff, qkv, nq, d, T, eps);               /* x += norm(o); next q, k, v */
    }
    fwd_logits(m, o, b, a);
    return ops_status(o, err, errlen);
}
