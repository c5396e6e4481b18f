/* gemma4.c — Gemma 4 text models (GGUF arch "gemma4"): weights and forward pass.
 * docs/GEMMA4.md is the written spec, tools/ref_gemma4.py the executable one; this file follows
 * the reference step by step.
 *
 * Layers are sliding (window W, head dim hd_swa, base theta_swa, rot n_rot_swa) or full (hd_full,
 * theta, n_rot, rope_freqs divisors = proportional partial RoPE); head count, KV heads and MLP
 * width may vary per layer. Per layer:
 *   h = rms(x, attn_norm); q = rope(rms(Wq h, q_norm)); k = rope(rms(Wk h, k_norm));
 *   v = rms(Wv h) without weight (Wv absent: v = rms(Wk h), "K = V"); attention with scale 1.0;
 *   x += rms(Wo a, post_attention_norm)
 *   h = rms(x, ffn_norm); mlp = down(gelu(gate h) * up h)
 *   MoE: mlp = rms(mlp, post_ffw_norm_1) + rms(sum_k w_k expert_k(rms(x, pre_ffw_norm_2)), post_ffw_norm_2),
 *        router on rms(x) * gate_inp.scale / sqrt(H), softmax over all experts, top-k renormalised,
 *        times the per-expert scale
 *   x += rms(mlp, post_ffw_norm)
 *   PLE: x += rms(proj(gelu(inp_gate x) * ple[il]), post_norm)
 *   x *= layer_output_scale
 * KV sharing: layers >= n_layer - shared_kv_layers compute no K/V and read the cache of the last
 * earlier layer of the same type. Logits: rms(x, output_norm), tied head, final softcap. */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errf.h"
#include "host_table.h"
#include "load.h"

/* what registry.c's row points at, declared here too so that the compiler checks the definitions */
model_load_fn gemma4_load;
model_unload_fn gemma4_unload;
model_bufs_create_fn gemma4_bufs_create;
model_bufs_destroy_fn gemma4_bufs_destroy;
model_layer_window_fn gemma4_layer_window;
model_forward_fn gemma4_forward;
model_kv_layout_fn gemma4_kv_layout;
model_kv_export_fn gemma4_kv_export;

typedef struct g4_layer {
    layer_weights w;          /* q, k, v (v.buf NULL: K = V), o, gate, up, down and the norms */
    uint32_t nh, nkv, hd, n_ff, rot;
    uint32_t kv_src;          /* layer whose KV cache this one reads (itself unless shared) */
    int has_kv;
    float out_scale;
    /* MoE */
    weight router, gate_up_exps, down_exps;
    cl_mem router_w;          /* gate_inp.scale / sqrt(H), as an RMS-norm weight */
    cl_mem exp_scale, post_ffw_norm_1, post_ffw_norm_2, pre_ffw_norm_2;
    /* per-layer embeddings */
    weight inp_gate, proj;
    cl_mem post_norm;
} g4_layer;

typedef struct gemma4_model {
    g4_layer *L;
    uint32_t n_ple, n_expert, n_used, n_ff_exp, first_shared;
    float theta_full, theta_swa;  /* RoPE bases (the tables hold the frequencies; a drafter checks its own) */
    host_table *ple_tok;      /* per-layer token embeddings: host memory, the step's rows gathered */
    weight ple_proj;
    cl_mem ple_norm;
} gemma4_model;

enum { X_PLE, X_PLE_TOK, X_PLE_GATE, X_Z, X_SEL, X_WSEL, X_GU, X_ACT, X_MOE, X_H2, X_ORD, X_YD, X_COUNT };
_Static_assert(X_COUNT <= sizeof ((fwd_bufs *)0)->ext / sizeof(cl_mem), "fwd_bufs.ext holds the scratch");

/* ---- load -------------------------------------------------------------------------------- */

/* what read_layers reads beside the model's fields: the RoPE tables' sizes and bases */
typedef struct g4_rope { int64_t rot_full, rot_swa; float theta_full, theta_swa; } g4_rope;

/* The hyperparameters and every layer's shape, from the file's keys alone (no tensor): m->hp,
 * m->kv_dims, g's counts and g->L's geometry (both arrays allocated here, freed by their owner). */
static int read_layers(const gguf_file *f, model *m, gemma4_model *g, g4_rope *r, char *err, size_t errlen)
{
    model_hparams *hp = &m->hp;
    const char *A = hp->arch; /* the metadata keys' prefix */
    uint32_t *nh = NULL, *nkv = NULL, *nff = NULL, *swa = NULL;
    int rc = -1;
    int64_t v;
    if (key_int(f, A, "block_count", &v, 1, err, errlen)) goto done;
    hp->n_layer = (uint32_t)v;
    if (hp->n_layer == 0 || hp->n_layer > 1024) { ERR("model: block_count %u out of range", hp->n_layer); goto done; }
    uint32_t NL = hp->n_layer;
    nh = calloc(NL, 4); nkv = calloc(NL, 4); nff = calloc(NL, 4); swa = calloc(NL, 4);
    g->L = calloc(NL, sizeof *g->L);
    m->kv_dims = calloc(NL, sizeof *m->kv_dims);
    if (!nh || !nkv || !nff || !swa || !g->L || !m->kv_dims) { ERR("out of memory"); goto done; }
    if (key_int(f, A, "embedding_length", &v, 1, err, errlen)) goto done;
    hp->n_embd = (uint32_t)v;
    if (key_int(f, A, "context_length", &v, 1, err, errlen)) goto done;
    hp->n_ctx_train = (uint32_t)v;
    int64_t hd_full, hd_swa, vl_full = -1, vl_swa = -1, win = 0, shared = 0, ple = 0, nexp = 0, nused = 0, ffexp = 0;
    r->rot_full = r->rot_swa = -1;
    if (key_per_layer(f, A, "attention.head_count", NL, nh, 1, 0, err, errlen) ||
        key_per_layer(f, A, "attention.head_count_kv", NL, nkv, 0, -1, err, errlen) ||
        key_per_layer(f, A, "feed_forward_length", NL, nff, 1, 0, err, errlen) ||
        key_per_layer(f, A, "attention.sliding_window_pattern", NL, swa, 1, 0, err, errlen) ||
        key_int(f, A, "attention.key_length", &hd_full, 1, err, errlen) ||
        key_int(f, A, "attention.key_length_swa", &hd_swa, 1, err, errlen) ||
        key_int(f, A, "attention.value_length", &vl_full, 0, err, errlen) ||
        key_int(f, A, "attention.value_length_swa", &vl_swa, 0, err, errlen) ||
        key_int(f, A, "rope.dimension_count", &r->rot_full, 0, err, errlen) ||
        key_int(f, A, "rope.dimension_count_swa", &r->rot_swa, 0, err, errlen) ||
        key_int(f, A, "attention.sliding_window", &win, 1, err, errlen) ||
        key_int(f, A, "attention.shared_kv_layers", &shared, 0, err, errlen) ||
        key_int(f, A, "embedding_length_per_layer_input", &ple, 0, err, errlen) ||
        key_int(f, A, "expert_count", &nexp, 0, err, errlen) ||
        key_int(f, A, "expert_used_count", &nused, 0, err, errlen) ||
        key_int(f, A, "expert_feed_forward_length", &ffexp, 0, err, errlen))
        goto done;
    if (vl_full < 0) vl_full = hd_full;
    if (vl_swa < 0) vl_swa = hd_swa;
    if (r->rot_full < 0) r->rot_full = hd_full;
    if (r->rot_swa < 0) r->rot_swa = hd_swa;
    hp->eps = 1e-6f;
    r->theta_full = 1e6f;
    r->theta_swa = 1e4f;
    if (key_f32(f, A, "attention.layer_norm_rms_epsilon", &hp->eps, err, errlen) ||
        key_f32(f, A, "rope.freq_base", &r->theta_full, err, errlen) ||
        key_f32(f, A, "rope.freq_base_swa", &r->theta_swa, err, errlen) ||
        key_f32(f, A, "final_logit_softcapping", &hp->final_softcap, err, errlen))
        goto done;
    uint32_t H = hp->n_embd;
    int64_t rot_full = r->rot_full, rot_swa = r->rot_swa;
    if (H == 0 || H % 32 || hd_full == 0 || hd_full % 32 || hd_full > 1024 || hd_swa == 0 || hd_swa % 32 ||
        hd_swa > 1024 || vl_full != hd_full || vl_swa != hd_swa || rot_full > hd_full || rot_full % 2 ||
        rot_swa > hd_swa || rot_swa % 2 || win == 0 || (uint64_t)shared >= NL || (ple && ple % 32) ||
        (nexp && (nused == 0 || nused > nexp || nexp > 256 || ffexp == 0)))
    {
        ERR("model: inconsistent gemma4 hyperparameters (embd %u, head_dim %lld/%lld, value_length %lld/%lld, "
            "rope dims %lld/%lld, window %lld, shared_kv_layers %lld, per-layer input %lld, experts %lld/%lld ff %lld)",
            H, (long long)hd_full, (long long)hd_swa, (long long)vl_full, (long long)vl_swa, (long long)rot_full,
            (long long)rot_swa, (long long)win, (long long)shared, (long long)ple, (long long)nused, (long long)nexp,
            (long long)ffexp);
        goto done;
    }
    hp->window = (uint32_t)win;
    hp->attn_scale = 1.0f;
    hp->attn_softcap = 0.0f;
    hp->embd_scale = sqrtf((float)H);
    g->n_ple = hp->n_embd_per_layer = (uint32_t)ple;
    g->n_expert = (uint32_t)nexp;
    g->n_used = (uint32_t)nused;
    g->n_ff_exp = (uint32_t)ffexp;
    g->first_shared = NL - (uint32_t)shared;
    for (uint32_t l = 0; l < NL; l++) {
        g4_layer *L = &g->L[l];
        if (swa[l] > 1) { ERR("model: layer %u has unknown type %u in gemma4.attention.sliding_window_pattern "
                              "(expected 1 sliding or 0 full)", l, swa[l]); goto done; }
        L->w.is_swa = (int)swa[l];
        L->nh = nh[l];
        L->nkv = nkv[l] == (uint32_t)-1 ? nh[l] : nkv[l];
        L->hd = L->w.is_swa ? (uint32_t)hd_swa : (uint32_t)hd_full;
        L->rot = L->w.is_swa ? (uint32_t)rot_swa : (uint32_t)rot_full;
        L->n_ff = nff[l];
        if (L->nh == 0 || L->nkv == 0 || L->nh % L->nkv || L->n_ff == 0) {
            ERR("model: layer %u: inconsistent heads %u / kv heads %u / ff %u", l, L->nh, L->nkv, L->n_ff);
            goto done;
        }
        L->has_kv = l < g->first_shared;
        L->kv_src = l;
        if (!L->has_kv) {
            int found = 0;
            for (int j = (int)g->first_shared - 1; j >= 0 && !found; j--)
                if (g->L[j].w.is_swa == L->w.is_swa) { L->kv_src = (uint32_t)j; found = 1; }
            if (!found) { ERR("model: KV-shared layer %u has no earlier %s layer to share with", l,
                              L->w.is_swa ? "sliding" : "full"); goto done; }
            const g4_layer *S = &g->L[L->kv_src];
            if (S->nkv != L->nkv || S->hd != L->hd) {
                ERR("model: KV-shared layer %u (%u kv heads x %u) differs from its source layer %u (%u x %u)", l,
                    L->nkv, L->hd, L->kv_src, S->nkv, S->hd);
                goto done;
            }
        }
        m->kv_dims[l] = L->has_kv ? L->nkv * L->hd : 0;
        if (L->nh > hp->n_head) hp->n_head = L->nh;
        if (L->nkv > hp->n_kv) hp->n_kv = L->nkv;
        if (L->hd > hp->head_dim) hp->head_dim = L->hd;
        if (L->n_ff > hp->n_ff) hp->n_ff = L->n_ff;
    }
    rc = 0;
done:
    free(nh); free(nkv); free(nff); free(swa);
    return rc;
}

int gemma4_kv_layout(const gguf_file *f, model_kv_layout *out, char *err, size_t errlen)
{
    model m = { .hp.arch = "gemma4" };
    gemma4_model g = { 0 };
    g4_rope r;
    int rc = read_layers(f, &m, &g, &r, err, errlen) || model_kv_layout_alloc(out, m.hp.n_layer, err, errlen) ? -1 : 0;
    for (uint32_t l = 0; !rc && l < m.hp.n_layer; l++) {
        out->dims[l] = m.kv_dims[l];
        out->window[l] = g.L[l].w.is_swa ? m.hp.window : 0;
    }
    if (!rc) out->n_ctx_train = m.hp.n_ctx_train;
    free(g.L);
    free(m.kv_dims);
    return rc;
}

int gemma4_load(model *m, const model_src *src, char *err, size_t errlen)
{
    const gguf_file *f = src->f;
    cl_runtime *rt = src->rt;
    model_hparams *hp = &m->hp;
    gemma4_model *g = calloc(1, sizeof *g);
    if (!g) return ERR("out of memory");
    m->priv = g;
    float *ff = NULL;
    g4_rope rp;
    if (read_layers(f, m, g, &rp, err, errlen)) goto fail;
    uint32_t NL = hp->n_layer, H = hp->n_embd;
    int64_t rot_full = rp.rot_full, rot_swa = rp.rot_swa;

    /* global tensors */
    const gguf_tensor *te = gguf_find_tensor(f, "token_embd.weight");
    if (!te) { ERR("model: missing tensor 'token_embd.weight' (expected shape [%u, n_vocab])", H); goto fail; }
    hp->n_vocab = (uint32_t)te->ne[1];
    uint64_t *B = &m->weight_bytes;
    if (load_mat(src, "token_embd.weight", H, hp->n_vocab, 1, &m->tok_embd, B, err, errlen) ||
        load_vec(src, "output_norm.weight", H, &m->output_norm, B, err, errlen))
        goto fail;
    if (gguf_find_tensor(f, "output.weight")) {
        if (load_mat(src, "output.weight", H, hp->n_vocab, 1, &m->output, B, err, errlen)) goto fail;
    } else {
        m->output = m->tok_embd;
    }
    int any_full = 0;
    for (uint32_t l = 0; l < NL; l++) any_full |= !g->L[l].w.is_swa;
    /* full layers' proportional RoPE lives only in these divisors (llama.cpp requires them too) */
    if (any_full || gguf_find_tensor(f, "rope_freqs.weight")) {
        const gguf_tensor *t;
        if (tensor_find(f, "rope_freqs.weight", (uint64_t)rot_full / 2, 1, 1, 1, &t, err, errlen) ||
            tensor_host(t, "rope_freqs.weight", err, errlen))
            goto fail;
        ff = malloc(t->nbytes);
        if (!ff) { ERR("out of memory"); goto fail; }
        memcpy(ff, t->data, t->nbytes);
    }
    if (g->n_ple) {
        uint64_t LP = (uint64_t)NL * g->n_ple;
        const gguf_tensor *pt;
        if (tensor_find(f, "per_layer_token_embd.weight", LP, hp->n_vocab, 1, 0, &pt, err, errlen)) goto fail;
        if (!(g->ple_tok = malloc(sizeof *g->ple_tok))) { ERR("out of memory"); goto fail; }
        if (host_table_open(g->ple_tok, pt, src->make ? src->make->bytes : NULL, err, errlen)) {
            free(g->ple_tok);
            g->ple_tok = NULL;
            goto fail;
        }
        m->host_bytes += pt->nbytes;
        if (load_mat(src, "per_layer_model_proj.weight", H, LP, 1, &g->ple_proj, B, err, errlen) ||
            load_vec(src, "per_layer_proj_norm.weight", g->n_ple, &g->ple_norm, B, err, errlen))
            goto fail;
        if (LP * H > m->max_weight_elems) m->max_weight_elems = LP * H;
    }

    for (uint32_t l = 0; l < NL; l++) {
        g4_layer *L = &g->L[l];
        layer_weights *W = &L->w;
        char n[96];
        uint32_t qd = L->nh * L->hd, kd = L->nkv * L->hd;
#define M(field, nm, a, b) (snprintf(n, sizeof n, "blk.%u." nm, l), load_mat(src, n, a, b, 1, field, B, err, errlen))
#define M3(field, nm, a, b, c) \
    (snprintf(n, sizeof n, "blk.%u." nm, l), load_mat(src, n, a, b, c, field, B, err, errlen))
#define V(field, nm, a) (snprintf(n, sizeof n, "blk.%u." nm, l), load_vec(src, n, a, field, B, err, errlen))
        if (load_g4_block(src, l, H, qd, L->hd, L->n_ff, W, B, err, errlen)) goto fail;
        if (L->has_kv) {
            if (M(&W->k, "attn_k.weight", H, kd) || V(&W->k_norm, "attn_k_norm.weight", L->hd)) goto fail;
            snprintf(n, sizeof n, "blk.%u.attn_v.weight", l);
            if (gguf_find_tensor(f, n) && M(&W->v, "attn_v.weight", H, kd)) goto fail;
        }
        if (load_layer_scalar(src, l, &L->out_scale, err, errlen)) goto fail;
        if (g->n_expert) {
            uint32_t E = g->n_expert, Fe = g->n_ff_exp;
            const gguf_tensor *ts;
            snprintf(n, sizeof n, "blk.%u.ffn_gate_inp.scale", l);
            if (tensor_find(f, n, H, 1, 1, 1, &ts, err, errlen) || tensor_host(ts, n, err, errlen)) goto fail;
            float *rw = malloc(sizeof(float) * H);
            if (!rw) { ERR("out of memory"); goto fail; }
            memcpy(rw, ts->data, sizeof(float) * H);
            for (uint32_t i = 0; i < H; i++) rw[i] /= sqrtf((float)H);
            L->router_w = rt_alloc(rt, sizeof(float) * H, rw, err, errlen);
            free(rw);
            if (!L->router_w) goto fail;
            if (M(&L->router, "ffn_gate_inp.weight", H, E) || V(&L->exp_scale, "ffn_down_exps.scale", E) ||
                M3(&L->gate_up_exps, "ffn_gate_up_exps.weight", H, 2 * Fe, E) ||
                M3(&L->down_exps, "ffn_down_exps.weight", Fe, H, E) ||
                V(&L->post_ffw_norm_1, "post_ffw_norm_1.weight", H) ||
                V(&L->post_ffw_norm_2, "post_ffw_norm_2.weight", H) ||
                V(&L->pre_ffw_norm_2, "pre_ffw_norm_2.weight", H))
                goto fail;
        }
        if (g->n_ple) {
            if (M(&L->inp_gate, "inp_gate.weight", H, g->n_ple) || M(&L->proj, "proj.weight", g->n_ple, H) ||
                V(&L->post_norm, "post_norm.weight", H))
                goto fail;
        }
#undef M
#undef M3
#undef V
        size_t e[] = { (size_t)qd * H, (size_t)L->n_ff * H, (size_t)g->n_expert * H };
        for (int i = 0; i < 3; i++)
            if (e[i] > m->max_weight_elems) m->max_weight_elems = e[i];
    }
    g->theta_full = rp.theta_full;
    g->theta_swa = rp.theta_swa;
    m->freq_local = rope_freqs(rt, (uint32_t)rot_swa, rp.theta_swa, 1.0, NULL, err, errlen);
    m->freq_global = m->freq_local ? rope_freqs(rt, (uint32_t)rot_full, rp.theta_full, 1.0, ff, err, errlen) : NULL;
    if (!m->freq_global) goto fail;
    free(ff);
    return 0;
fail:
    free(ff);
    return -1;
}

uint32_t gemma4_layer_window(const model *m, uint32_t l)
{
    const gemma4_model *g = m->priv;
    return g->L[l].w.is_swa ? m->hp.window : 0;
}

void gemma4_kv_export(const model *m, model_kv_ref out[MODEL_KV_KINDS])
{
    const gemma4_model *g = m->priv;
    for (int k = 0; k < MODEL_KV_KINDS; k++) out[k] = (model_kv_ref){ .layer = -1 };
    for (int l = (int)m->hp.n_layer - 1; l >= 0; l--) {
        const g4_layer *L = &g->L[l];
        model_kv_ref *r = &out[L->w.is_swa ? MODEL_KV_SLIDING : MODEL_KV_FULL];
        if (r->layer >= 0) continue;
        const g4_layer *S = &g->L[L->kv_src];
        *r = (model_kv_ref){ (int32_t)L->kv_src, S->nkv, S->hd, S->rot, S->w.is_swa ? g->theta_swa : g->theta_full,
                             S->w.is_swa ? m->hp.window : 0 };
    }
}

void gemma4_unload(model *m)
{
    gemma4_model *g = m->priv;
    if (!g) return;
    if (g->L) {
        for (uint32_t l = 0; l < m->hp.n_layer; l++) {
            g4_layer *L = &g->L[l];
            layer_weights_release(&L->w);
            cl_mem *ms[] = { &L->router.buf, &L->gate_up_exps.buf, &L->down_exps.buf, &L->router_w, &L->exp_scale,
                             &L->post_ffw_norm_1, &L->post_ffw_norm_2, &L->pre_ffw_norm_2, &L->inp_gate.buf,
                             &L->proj.buf, &L->post_norm };
            for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) mem_release(ms[i]);
        }
        free(g->L);
    }
    if (g->ple_tok) host_table_close(g->ple_tok);
    free(g->ple_tok);
    mem_release(&g->ple_proj.buf);
    mem_release(&g->ple_norm);
    free(g);
    m->priv = NULL;
}

int gemma4_bufs_create(fwd_bufs *b, const model *m, cl_runtime *rt, char *err, size_t errlen)
{
    const gemma4_model *g = m->priv;
    size_t T = b->max_tok, H = m->hp.n_embd, LP = (size_t)m->hp.n_layer * g->n_ple, K = g->n_used;
    size_t sz[X_COUNT] = { 0 };
    if (g->n_ple) {
        sz[X_PLE] = T * LP;
        sz[X_PLE_TOK] = T * LP;
        sz[X_PLE_GATE] = T * g->n_ple;
    }
    if (g->n_expert) {
        sz[X_Z] = T * g->n_expert;
        sz[X_SEL] = T * K;
        sz[X_WSEL] = T * K;
        sz[X_GU] = T * K * 2 * g->n_ff_exp;
        sz[X_ACT] = T * K * g->n_ff_exp;
        sz[X_MOE] = T * H;
        sz[X_H2] = T * H;
        sz[X_ORD] = ops_moe_ord_ints(g->n_expert, T * K);
        sz[X_YD] = T * K * H;
    }
    for (int i = 0; i < X_COUNT; i++) {
        if (!sz[i]) continue;
        b->ext[i] = rt_alloc(rt, 4 * sz[i], NULL, err, errlen);
        if (!b->ext[i]) return -1;
    }
    return g->ple_tok ? host_table_stage(g->ple_tok, rt, b->max_tok, err, errlen) : 0;
}

void gemma4_bufs_destroy(fwd_bufs *b)
{
    for (int i = 0; i < X_COUNT; i++) mem_release(&b->ext[i]);
}

/* ---- forward ----------------------------------------------------------------------------- */

/* attention over the layer's cache; r: the layer's raw projections when it has its own K/V (norm,
 * RoPE and the cache write go with the attention: one launch for a decode batch on NVIDIA) */
static void attention(const model *m, ops *o, fwd_bufs *b, kv_cache *kv, const g4_layer *L, const fwd_args *a,
                      const qkv_raw *r)
{
    const model_hparams *hp = &m->hp;
    kv_view kk = kv_layer_k(kv, L->kv_src), vv = kv_layer_v(kv, L->kv_src);
    /* partial buffers are sized for the largest head dim (hp->head_dim) */
    attn_batch ab = { b->q, b->att, b->pos, b->seq, a->seq, a->ntok, a->max_pos, b->part_acc, b->part_ml, b->part_cnt,
                      b->part_elems, hp->head_dim, a->hi ? b->hi : NULL, a->hi_extra };
    attn_layer al = { L->nh, L->nkv, L->hd, L->w.is_swa ? (int)hp->window : 0, hp->attn_scale, hp->attn_softcap,
                      &kk, &vv };
    if (r)
        op_qkv_attention(o, r, &ab, &al);
    else
        op_attention_batch(o, &ab, &al);
}

/* The experts of an MoE layer: X_MOE (router input, pre-normed by the post-attention chain) -> router ->
 * top-k -> expert products on X_H2 (pre-normed too) -> X_MOE. The norms around it are fused into the
 * post-attention and layer-tail chains. */
static void moe(const model *m, ops *o, fwd_bufs *b, const g4_layer *L, uint32_t T)
{
    const gemma4_model *g = m->priv;
    uint32_t H = m->hp.n_embd, Fe = g->n_ff_exp, K = g->n_used;
    op_matmul(o, &L->router, b->ext[X_MOE], H, b->ext[X_Z], g->n_expert, T);
    op_router_topk(o, b->ext[X_Z], g->n_expert, K, L->exp_scale, b->ext[X_SEL], b->ext[X_WSEL], T);
    op_moe_up(o, &L->gate_up_exps, 2 * Fe, b->ext[X_H2], H, b->ext[X_SEL], K, b->ext[X_GU], b->ext[X_ORD], T);
    op_moe_down(o, &L->down_exps, H, b->ext[X_GU], b->ext[X_ACT], b->ext[X_SEL], b->ext[X_WSEL], K, b->ext[X_MOE],
                b->ext[X_ORD], b->ext[X_YD], T);
}

/* the Q/K/V products of a layer (Q only where the layer reads another's KV; Q and K where V is K) */
static int qkv_outs(const g4_layer *L, const fwd_bufs *b, mm_out out[3])
{
    const layer_weights *W = &L->w;
    uint32_t qd = L->nh * L->hd, kd = L->nkv * L->hd;
    out[0] = (mm_out){ &W->q, b->q, qd };
    if (!L->has_kv) return 1;
    out[1] = (mm_out){ &W->k, b->k, kd };
    out[2] = (mm_out){ &W->v, b->v, kd };
    return W->v.buf ? 3 : 2;
}

/* ple[t][il] = (rms(proj(x0)/sqrt(H), ple_norm) + tok_ple[t][il] * sqrt(P)) / sqrt(2), from the
 * token rows the host table gathered */
static void ple_inputs(const model *m, ops *o, fwd_bufs *b, const weight *rows, cl_mem idx, uint32_t T)
{
    const gemma4_model *g = m->priv;
    uint32_t H = m->hp.n_embd, NL = m->hp.n_layer, P = g->n_ple, LP = NL * P;
    op_embed(o, rows, idx, T, sqrtf((float)P), b->ext[X_PLE_TOK]);
    op_matmul(o, &g->ple_proj, b->x.cur, H, b->ext[X_PLE], LP, T);
    op_scale(o, b->ext[X_PLE], 1.0f / sqrtf((float)H), T * LP);
    op_rmsnorm(o, b->ext[X_PLE], g->ple_norm, b->ext[X_PLE], T * NL, P, m->hp.eps);
    op_add(o, b->ext[X_PLE], b->ext[X_PLE_TOK], T * LP);
    op_scale(o, b->ext[X_PLE], 1.0f / sqrtf(2.0f), T * LP);
}

/* Norms run as chains (op_norm_chain) inside op_norm_matmul: the post-attention norm, residual add
 * and the FFN pre-norms in one; the layer's last post-norm, residual add, output scale and the next
 * layer's pre-norm with its Q/K/V products in another. */
int gemma4_forward(const model *m, ops *o, fwd_bufs *b, kv_cache *kv, const fwd_args *a, char *err,
                   size_t errlen)
{
    const model_hparams *hp = &m->hp;
    const gemma4_model *g = m->priv;
    uint32_t T = a->ntok, H = hp->n_embd, NL = hp->n_layer, P = g->n_ple;
    float eps = hp->eps;
    op_embed(o, &m->tok_embd, b->ids, T, hp->embd_scale, b->x.cur);        /* x = embed(ids) * sqrt(H) */
    for (uint32_t i = 0; i < a->n_rows; i++)                                /* an image's rows, unscaled */
        op_copy_rows(o, a->rows[i].src, a->rows[i].src_row, b->x.cur, a->rows[i].dst, a->rows[i].n, H);
    if (P) {                                                                /* per-layer inputs */
        weight rows;
        cl_mem idx;
        if (!a->ids) return ERR("internal: the per-layer embeddings need the batch's token ids on the host");
        if (host_table_gather(g->ple_tok, o->rt, a->ids, T, &rows, &idx, err, errlen)) return -1;
        ple_inputs(m, o, b, &rows, idx, T);
    }
    mm_out qkv[3];
    int nqkv = qkv_outs(&g->L[0], b, qkv);
    op_rmsnorm(o, b->x.cur, g->L[0].w.attn_norm, b->x.spare, T, H, eps);   /* h = norm(x) */
    if (nqkv == 1)                                                          /* q (k, v) = W h */
        op_matmul(o, qkv[0].w, b->x.spare, H, qkv[0].y, qkv[0].ldy, T);
    else
        op_matmul_multi(o, qkv, nqkv, b->x.spare, H, T);
    /* on entry b->q (and b->k, b->v where the layer has its own KV) hold layer l's raw projections
     * and b->x.cur the residual stream */
    for (uint32_t l = 0; l < NL; l++) {
        const g4_layer *L = &g->L[l];
        const layer_weights *W = &L->w;
        uint32_t qd = L->nh * L->hd;
        cl_mem freq = W->is_swa ? m->freq_local : m->freq_global;
        /* K = V layers: V is the raw K projection (normalised without weight, no RoPE) */
        qkv_raw raw = { b->k, W->v.buf ? b->v : b->k, W->q_norm, W->k_norm, freq, 1, 2, eps, L->rot };
        mm_out gu[2] = { { &W->gate, b->g, L->n_ff }, { &W->up, b->u, L->n_ff } };
        mm_out ig = { &L->inp_gate, b->ext[X_PLE_GATE], P };
        /* x += norm(o)·post_attn; h = norm(x)·ffn_norm (MoE: also the router's and the experts' inputs) */
        norm_chain pa = { .x = b->o, .wx = W->post_attn_norm, .scale = 1.0f, .out = { { W->ffn_norm, NULL } },
                          .nout = 1 };
        if (g->n_expert) {
            pa.out[1] = (norm_out){ L->router_w, b->ext[X_MOE] };
            pa.out[2] = (norm_out){ L->pre_ffw_norm_2, b->ext[X_H2] };
            pa.nout = 3;
        }
        /* x += post_ffw(o) (MoE: post_ffw(post_ffw_1(o) + post_ffw_2(experts))) */
        norm_chain ff = { .x = b->o, .wx = W->post_ffw_norm, .scale = 1.0f };
        if (g->n_expert) {
            ff.wx = L->post_ffw_norm_1;
            ff.x2 = b->ext[X_MOE];
            ff.wx2 = L->post_ffw_norm_2;
            ff.wt = W->post_ffw_norm;
        }
        /* the layer's last add (x += post_norm(o) after the per-layer input, else the one above)
         * carries the output scale, the next layer's attention pre-norm and its Q/K/V */
        norm_chain pl = { .x = b->o, .wx = L->post_norm };
        norm_chain *tail = P ? &pl : &ff;
        tail->scale = L->out_scale;
        int nq = 0;
        if (l + 1 < NL) {
            nq = qkv_outs(&g->L[l + 1], b, qkv);
            tail->out[0] = (norm_out){ g->L[l + 1].w.attn_norm, NULL };
            tail->nout = 1;
        }
        if (!L->has_kv)                                                     /* q = rope(norm(q)) */
            op_norm_rope(o, b->q, T, L->nh, L->hd, W->q_norm, 1, eps, freq, L->rot, b->pos, b->seq, NULL);
        attention(m, o, b, kv, L, a, L->has_kv ? &raw : NULL);              /* att = attn(q, k, v) */
        op_matmul(o, &W->o, b->att, qd, b->o, H, T);                        /* o = Wo att */
        op_norm_matmul(o, &b->x, &pa, gu, 2, H, T, eps);                    /* x += norm(o); g, u = W h */
        op_matmul_geglu(o, &W->down, b->g, L->n_ff, b->u, 0, L->n_ff, b->o, H, T); /* o = down(gelu(g) * u) */
        if (g->n_expert) moe(m, o, b, L, T);                                /* moe = experts(h2) */
        if (P) {
            op_norm_matmul(o, &b->x, &ff, &ig, 1, H, T, eps);               /* x += norm(o); gate = W x */
            op_matmul_geglu(o, &L->proj, b->ext[X_PLE_GATE], P, b->ext[X_PLE], l * P, NL * P, b->o, H, T);
                                                                            /* o = proj(gelu(gate) * ple[l]) */
        }
        op_norm_matmul(o, &b->x, tail, qkv, nq, H, T, eps);                 /* x = (x + norm(o))·scale; next q, k, v */
    }
    fwd_logits(m, o, b, a);
    return ops_status(o, err, errlen);
}
