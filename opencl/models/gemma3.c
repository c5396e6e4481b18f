/* model_gemma3.c — Gemma 3 text model (GGUF arch "gemma3"): weights and forward pass.
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

static int key_u32(const gguf_file *f, const char *arch, const char *name, uint32_t *out, int required,
                   char *err, size_t errlen)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, name);
    int64_t v;
    int r = gguf_get_int(f, key, &v);
    if (r == -1 && !required) return 0;
    if (r != 0) return ERR("model: %s key '%s'", r == -1 ? "missing" : "wrong type for", key);
    if (v < 0 || v > 0x7fffffff) return ERR("model: key '%s' out of range (%lld)", key, (long long)v);
    *out = (uint32_t)v;
    return 0;
}

static int key_f32(const gguf_file *f, const char *arch, const char *name, float *out, char *err, size_t errlen)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, name);
    double v;
    int r = gguf_get_float(f, key, &v);
    if (r == -1) return 0; /* optional: keep the default */
    if (r != 0) return ERR("model: wrong type for key '%s'", key);
    *out = (float)v;
    return 0;
}

/* uploads a tensor, checking its shape: ne0 (row length) and ne1 (rows); ne1 = 0 for vectors */
static int load_tensor(const gguf_file *f, cl_runtime *rt, const char *name, uint64_t ne0, uint64_t ne1,
                       int want_f32, weight *w, cl_mem *vec, uint64_t *bytes, char *err, size_t errlen)
{
    const gguf_tensor *t = gguf_find_tensor(f, name);
    if (!t) return ERR("model: missing tensor '%s' (expected shape [%llu, %llu])", name, (unsigned long long)ne0,
                       (unsigned long long)(ne1 ? ne1 : 1));
    uint64_t t1 = t->n_dims >= 2 ? t->ne[1] : 1;
    if (t->ne[0] != ne0 || t1 != (ne1 ? ne1 : 1) || t->ne[2] != 1 || t->ne[3] != 1)
        return ERR("model: tensor '%s' has shape [%llu, %llu, %llu], expected [%llu, %llu]", name,
                   (unsigned long long)t->ne[0], (unsigned long long)t1, (unsigned long long)t->ne[2],
                   (unsigned long long)ne0, (unsigned long long)(ne1 ? ne1 : 1));
    if (want_f32 && t->type != GGML_TYPE_F32)
        return ERR("model: tensor '%s' has type %s, expected F32", name, ggml_type_name(t->type));
    if (!want_f32 && !ops_type_supported(t->type))
        return ERR("model: tensor '%s' has unsupported type %s", name, ggml_type_name(t->type));
    if (!want_f32 && ne0 % 32)
        return ERR("model: tensor '%s' row length %llu is not a multiple of 32", name, (unsigned long long)ne0);
    cl_mem m = rt_alloc(rt, t->nbytes, t->data, err, errlen);
    if (!m) {
        char why[256];
        snprintf(why, sizeof why, "%s", err);
        return ERR("model: uploading '%s' (%.1f MiB): %s", name, t->nbytes / 1048576.0, why);
    }
    *bytes += t->nbytes;
    if (vec) *vec = m;
    if (w) {
        w->buf = m;
        w->type = t->type;
        w->cols = (uint32_t)ne0;
        w->rows = (uint32_t)(ne1 ? ne1 : 1);
        w->row_bytes = (uint32_t)ggml_row_bytes(t->type, ne0);
    }
    return 0;
}

static cl_mem rope_freqs(cl_runtime *rt, uint32_t rot, double base, double scale, char *err, size_t errlen)
{
    float fr[1024];
    for (uint32_t i = 0; i < rot / 2 && i < 1024; i++) fr[i] = (float)(scale * pow(base, -2.0 * i / rot));
    return rt_alloc(rt, sizeof(float) * (rot / 2 ? rot / 2 : 1), fr, err, errlen);
}

int model_load(model *m, const gguf_file *f, cl_runtime *rt, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    model_hparams *hp = &m->hp;
    gguf_str a;
    if (gguf_get_str(f, "general.architecture", &a) != 0) return ERR("model: no general.architecture key");
    if (gguf_str_eq(a, "gemma4")) return gemma4_model_load(m, f, rt, err, errlen);
    if (!gguf_str_eq(a, "gemma3"))
        return ERR("model: unsupported architecture '%.*s' (supported: gemma3, gemma4)", (int)(a.len > 40 ? 40 : a.len), a.ptr);
    snprintf(hp->arch, sizeof hp->arch, "gemma3");
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
    uint32_t pattern = 6; /* every 6th layer is global */
    if (key_u32(f, A, "attention.sliding_window_pattern", &pattern, 0, err, errlen)) return -1;
    if (pattern == 0) pattern = 1;

    const gguf_tensor *te = gguf_find_tensor(f, "token_embd.weight");
    if (!te) return ERR("model: missing tensor 'token_embd.weight'");
    hp->n_vocab = (uint32_t)te->ne[1];
    if (load_tensor(f, rt, "token_embd.weight", hp->n_embd, hp->n_vocab, 0, &m->tok_embd, NULL, &m->weight_bytes, err, errlen) ||
        load_tensor(f, rt, "output_norm.weight", hp->n_embd, 0, 1, NULL, &m->output_norm, &m->weight_bytes, err, errlen))
        goto fail;
    if (gguf_find_tensor(f, "output.weight")) {
        if (load_tensor(f, rt, "output.weight", hp->n_embd, hp->n_vocab, 0, &m->output, NULL, &m->weight_bytes, err, errlen))
            goto fail;
    } else {
        m->output = m->tok_embd;
    }
    m->layers = calloc(hp->n_layer, sizeof *m->layers);
    if (!m->layers) { ERR("out of memory"); goto fail; }
    uint32_t qd = hp->n_head * hp->head_dim, kd = hp->n_kv * hp->head_dim;
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        layer_weights *L = &m->layers[l];
        L->is_swa = hp->window > 0 && (l % pattern) < pattern - 1;
        char n[96];
#define T2(field, nm, c, r) (snprintf(n, sizeof n, "blk.%u." nm ".weight", l), \
        load_tensor(f, rt, n, c, r, 0, &L->field, NULL, &m->weight_bytes, err, errlen))
#define T1(field, nm, c) (snprintf(n, sizeof n, "blk.%u." nm ".weight", l), \
        load_tensor(f, rt, n, c, 0, 1, NULL, &L->field, &m->weight_bytes, err, errlen))
        if (T2(q, "attn_q", hp->n_embd, qd) || T2(k, "attn_k", hp->n_embd, kd) || T2(v, "attn_v", hp->n_embd, kd) ||
            T2(o, "attn_output", qd, hp->n_embd) || T2(gate, "ffn_gate", hp->n_embd, hp->n_ff) ||
            T2(up, "ffn_up", hp->n_embd, hp->n_ff) || T2(down, "ffn_down", hp->n_ff, hp->n_embd) ||
            T1(attn_norm, "attn_norm", hp->n_embd) || T1(q_norm, "attn_q_norm", hp->head_dim) ||
            T1(k_norm, "attn_k_norm", hp->head_dim) || T1(post_attn_norm, "post_attention_norm", hp->n_embd) ||
            T1(ffn_norm, "ffn_norm", hp->n_embd) || T1(post_ffw_norm, "post_ffw_norm", hp->n_embd))
            goto fail;
#undef T1
#undef T2
        size_t e[] = { (size_t)qd * hp->n_embd, (size_t)hp->n_ff * hp->n_embd };
        for (int i = 0; i < 2; i++)
            if (e[i] > m->max_weight_elems) m->max_weight_elems = e[i];
    }
    m->freq_local = rope_freqs(rt, hp->head_dim, hp->rope_base_local, 1.0, err, errlen);
    m->freq_global = m->freq_local ? rope_freqs(rt, hp->head_dim, hp->rope_base_global, hp->rope_scale_global, err, errlen) : NULL;
    if (!m->freq_global) goto fail;
    return 0;
fail:
    model_free(m);
    return -1;
}

uint64_t model_device_bytes(const gguf_file *f, const gguf_tensor **largest)
{
    uint64_t n = 0;
    *largest = NULL;
    for (size_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        if (gemma4_on_host(t)) continue;
        n += t->nbytes;
        if (!*largest || t->nbytes > (*largest)->nbytes) *largest = t;
    }
    return n;
}

uint32_t model_layer_window(const model *m, uint32_t l)
{
    if (m->g4) return gemma4_layer_window(m, l);
    return m->layers[l].is_swa ? m->hp.window : 0;
}

static void rel(cl_mem *m)
{
    if (*m) clReleaseMemObject(*m);
    *m = NULL;
}

void model_free(model *m)
{
    if (m->g4) {
        gemma4_model_free(m);
        return;
    }
    if (m->output.buf && m->output.buf != m->tok_embd.buf) rel(&m->output.buf);
    rel(&m->tok_embd.buf);
    rel(&m->output_norm);
    if (m->layers) {
        for (uint32_t l = 0; l < m->hp.n_layer; l++) {
            layer_weights *L = &m->layers[l];
            cl_mem *ms[] = { &L->q.buf, &L->k.buf, &L->v.buf, &L->o.buf, &L->gate.buf, &L->up.buf, &L->down.buf,
                             &L->attn_norm, &L->q_norm, &L->k_norm, &L->post_attn_norm, &L->ffn_norm, &L->post_ffw_norm };
            for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) rel(ms[i]);
        }
        free(m->layers);
    }
    rel(&m->freq_local);
    rel(&m->freq_global);
    memset(m, 0, sizeof *m);
}

int fwd_bufs_create(fwd_bufs *b, const model *m, cl_runtime *rt, uint32_t max_tok, uint32_t max_out,
                    uint32_t n_ctx, char *err, size_t errlen)
{
    memset(b, 0, sizeof *b);
    const model_hparams *hp = &m->hp;
    b->max_tok = max_tok;
    b->max_out = max_out;
    size_t T = max_tok, qd = (size_t)hp->n_head * hp->head_dim, kd = (size_t)hp->n_kv * hp->head_dim;
    /* the attention split needs room for at least one token over the whole context */
    size_t per_tok = (size_t)hp->n_head * ((n_ctx + OPS_ATTN_CHUNK - 1) / OPS_ATTN_CHUNK) * hp->head_dim;
    /* room for 8 tokens at the smallest chunk (8x the chunks), or up to 64 tokens at the largest */
    b->part_elems = per_tok * (T < 8 ? 8 : T < 64 ? T : 64);
    struct { cl_mem *m; size_t bytes; } all[] = {
        { &b->ids, 4 * T }, { &b->pos, 4 * T }, { &b->seq, 4 * T }, { &b->out_rows, 4 * (size_t)max_out },
        { &b->x, 4 * T * hp->n_embd }, { &b->xn, 4 * T * hp->n_embd }, { &b->q, 4 * T * qd }, { &b->k, 4 * T * kd },
        { &b->v, 4 * T * kd }, { &b->att, 4 * T * qd }, { &b->o, 4 * T * hp->n_embd }, { &b->g, 4 * T * hp->n_ff },
        { &b->u, 4 * T * hp->n_ff }, { &b->xo, 4 * (size_t)max_out * hp->n_embd },
        { &b->logits, 4 * (size_t)max_out * hp->n_vocab }, { &b->argmax, 4 * (size_t)max_out },
        { &b->part_acc, 4 * b->part_elems }, { &b->part_ml, 4 * b->part_elems / hp->head_dim * 2 },
    };
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        *all[i].m = rt_alloc(rt, all[i].bytes, NULL, err, errlen);
        if (!*all[i].m) { fwd_bufs_destroy(b); return -1; }
    }
    /* attention counters start at zero; every launch leaves them at zero */
    size_t ncnt = b->part_elems / hp->head_dim;
    uint32_t *zero = calloc(ncnt, 4);
    b->part_cnt = zero ? rt_alloc(rt, 4 * ncnt, zero, err, errlen) : NULL;
    free(zero);
    if (!b->part_cnt) {
        if (!zero) snprintf(err, errlen, "out of host memory for the attention counters");
        fwd_bufs_destroy(b);
        return -1;
    }
    if (m->g4 && gemma4_bufs_create(b, m, rt, err, errlen)) { fwd_bufs_destroy(b); return -1; }
    return 0;
}

void fwd_bufs_destroy(fwd_bufs *b)
{
    cl_mem *ms[] = { &b->ids, &b->pos, &b->seq, &b->out_rows, &b->x, &b->xn, &b->q, &b->k, &b->v, &b->att,
                     &b->o, &b->g, &b->u, &b->xo, &b->logits, &b->argmax, &b->part_acc, &b->part_ml, &b->part_cnt };
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) rel(ms[i]);
    for (size_t i = 0; i < sizeof b->ext / sizeof *b->ext; i++) rel(&b->ext[i]);
}

/* norm, RoPE and the cache write of the raw Q/K/V, then attention (one launch for a decode batch
 * on NVIDIA) */
static int attention(const model *m, ops *o, fwd_bufs *b, kv_cache *kv, uint32_t l, const fwd_args *a,
                     cl_mem freq, char *err, size_t errlen)
{
    const model_hparams *hp = &m->hp;
    kv_view kk = kv_layer_k(kv, l), vv = kv_layer_v(kv, l);
    attn_batch ab = { b->q, b->att, b->pos, b->seq, a->seq, a->ntok, a->max_pos, b->part_acc, b->part_ml, b->part_cnt,
                      b->part_elems, hp->head_dim };
    attn_layer al = { hp->n_head, hp->n_kv, hp->head_dim, m->layers[l].is_swa ? (int)hp->window : 0,
                      hp->attn_scale, hp->attn_softcap, &kk, &vv };
    const layer_weights *L = &m->layers[l];
    qkv_raw raw = { b->k, b->v, L->q_norm, L->k_norm, freq, 1, 0, hp->eps, hp->head_dim };
    return op_qkv_attention(o, &raw, &ab, &al, err, errlen);
}

int model_forward(const model *m, ops *o, fwd_bufs *b, kv_cache *kv, const fwd_args *a, char *err, size_t errlen)
{
    if (m->g4) return gemma4_forward(m, o, b, kv, a, err, errlen);
    const model_hparams *hp = &m->hp;
    uint32_t T = a->ntok, d = hp->n_embd, qd = hp->n_head * hp->head_dim, kd = hp->n_kv * hp->head_dim;
    if (op_embed(o, &m->tok_embd, b->ids, T, hp->embd_scale, b->x, err, errlen) ||
        op_rmsnorm(o, b->x, m->layers[0].attn_norm, b->xn, T, d, hp->eps, err, errlen))
        return -1;
    int qkv_done = 0; /* this layer's Q/K/V came with the previous layer's last norm chain */
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        const layer_weights *L = &m->layers[l];
        cl_mem freq = L->is_swa ? m->freq_local : m->freq_global;
        mm_out qkv[3] = { { &L->q, b->q, qd }, { &L->k, b->k, kd }, { &L->v, b->v, kd } };
        mm_out gu[2] = { { &L->gate, b->g, hp->n_ff }, { &L->up, b->u, hp->n_ff } };
        /* xn holds attn_norm(x) here: from the embedding or from the previous layer's fused add+norm */
        if ((!qkv_done && op_matmul_multi(o, qkv, 3, b->xn, d, T, err, errlen)) ||
            attention(m, o, b, kv, l, a, freq, err, errlen) ||
            op_matmul(o, &L->o, b->att, qd, b->o, d, T, err, errlen))
            return -1;
        qkv_done = 0;
        /* x += norm(o)·post_attn, then gate/up of norm(x)·ffn_norm: one launch where the decode
         * product can run the chain itself (the new x lands in xn's buffer; the two swap) */
        int fused = fwd_norm_matmul(o, b, b->o, L->post_attn_norm, 1.0f, L->ffn_norm, gu, 2, d, T, hp->eps, err,
                                    errlen);
        if (fused < 0 ||
            (fused == 1 && (op_rmsnorm_add_norm(o, b->o, L->post_attn_norm, b->x, L->ffn_norm, b->xn, T, d, hp->eps,
                                                err, errlen) ||
                            op_matmul_multi(o, gu, 2, b->xn, d, T, err, errlen))))
            return -1;
        /* down(gelu(gate) * up): one launch where the int8 product folds the activation in */
        int rc = op_matmul_geglu(o, &L->down, b->g, hp->n_ff, b->u, 0, hp->n_ff, b->o, d, T, err, errlen);
        if (rc < 0 || (rc == 1 && (op_geglu(o, b->g, b->u, b->g, T * hp->n_ff, err, errlen) ||
                                   op_matmul(o, &L->down, b->g, hp->n_ff, b->o, d, T, err, errlen))))
            return -1;
        if (l + 1 < hp->n_layer) {
            const layer_weights *N = &m->layers[l + 1];
            mm_out nq[3] = { { &N->q, b->q, qd }, { &N->k, b->k, kd }, { &N->v, b->v, kd } };
            fused = fwd_norm_matmul(o, b, b->o, L->post_ffw_norm, 1.0f, N->attn_norm, nq, 3, d, T, hp->eps, err,
                                    errlen);
            qkv_done = fused == 0;
            if (fused < 0 || (fused == 1 && op_rmsnorm_add_norm(o, b->o, L->post_ffw_norm, b->x, N->attn_norm, b->xn,
                                                                 T, d, hp->eps, err, errlen)))
                return -1;
        } else if (op_rmsnorm_add(o, b->o, L->post_ffw_norm, b->x, T, d, hp->eps, err, errlen)) {
            return -1;
        }
    }
    if (a->n_out == 0) return 0;
    if (op_gather_rows(o, b->x, b->out_rows, b->xo, a->n_out, d, err, errlen) ||
        op_rmsnorm(o, b->xo, m->output_norm, b->xo, a->n_out, d, hp->eps, err, errlen) ||
        op_matmul(o, &m->output, b->xo, d, b->logits, hp->n_vocab, a->n_out, err, errlen))
        return -1;
    if (hp->final_softcap > 0 && op_softcap(o, b->logits, hp->final_softcap, a->n_out * hp->n_vocab, err, errlen))
        return -1;
    return 0;
}
