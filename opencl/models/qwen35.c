/* qwen35.c — Qwen 3.5 / 3.6 hybrid models (GGUF archs "qwen35": dense FFN, "qwen35moe": experts beside a
 * gated shared expert): weights and forward pass.
 * docs/design-qwen35.md is the written spec (sections 1, 2, 5.4), tools/ref_qwen35.py the executable one.
 *
 * Layers are gated-delta (GDN, recurrent FP32 state per sequence in kv->state) or gated full attention,
 * as the file's attention.recurrent_layers says (else every full_attention_interval-th layer attends).
 * Per layer: h = norm(x); x += mixer(h); h = norm(x); x += ffn(h). Norm weights carry
 * the converter's 1 + w; no embedding scale, no softcap.
 *   GDN: mixed, z, b, a = W h; conv + SiLU + L2 norms + gates (op_delta_conv); delta rule (op_delta_scan);
 *        o = rms(o)·ssm_norm·silu(z) (op_rmsnorm_gated); y = ssm_out o.
 *   attention: q, gate (attn_q's interleaved per-head [q | gate] rows, split at load), k, v; per-head
 *        RMS norm of q and k, NEOX RoPE on the first rope.dimension_count dims; y = Wo (att·σ(gate)).
 *   ffn: dense down(silu(gate h)·up h); MoE (design 1.5): softmax router, top-k renormalised, experts' SwiGLU
 *        summed by weight, plus σ(w_s·h)·shared(h), the shared expert a dense SwiGLU. */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errf.h"
#include "load.h"
#include "state.h"

model_load_fn qwen35_load;
model_unload_fn qwen35_unload;
model_bufs_create_fn qwen35_bufs_create;
model_bufs_destroy_fn qwen35_bufs_destroy;
model_layer_window_fn qwen35_layer_window;
model_forward_fn qwen35_forward;
model_kv_layout_fn qwen35_kv_layout;
model_kv_layout_fn qwen35moe_kv_layout;
model_replay_fn qwen35_replay;

typedef struct q35_layer {
    int recurrent;
    weight qkv, z, beta, alpha, ssm_out;              /* GDN */
    cl_mem conv, ssm_a, dt_bias, ssm_norm;
    weight q, gate, k, v, o;                          /* attention */
    cl_mem q_norm, k_norm;
    cl_mem attn_norm, ffn_norm;                       /* both kinds */
    weight ffn_gate, ffn_up, ffn_down;                /* dense; MoE: the shared expert */
    weight router, gate_up_exps, down_exps, sh_inp;   /* MoE */
} q35_layer;

typedef struct q35_model {
    q35_layer *L;
    delta_shape sh;
    uint32_t dc, rot;
    uint32_t n_expert, n_used, n_ff_exp;              /* 0 experts: dense */
    cl_mem ones;                                      /* the router's per-expert scale: none, ones */
} q35_model;

/* fwd_bufs.ext: GDN scratch, the attention gate, the run table; MoE: router logits, choices and weights, expert
 * products and activations, their grouping, per-pair outputs, the shared expert's output and gate */
enum { X_MIX, X_Y, X_Z, X_A, X_B, X_BETA, X_G, X_O, X_GATE, X_RUNS, X_RZ, X_SEL, X_WSEL, X_GU, X_ACT, X_ORD, X_YD,
       X_SH, X_SG, X_COUNT };

/* the keys: hp (trunk layers only), the GDN shape, rotated dims and per trunk layer whether it is recurrent */
static int read_hparams(const gguf_file *f, model_hparams *hp, delta_shape *sh, uint32_t *rot, uint32_t **rec,
                        uint32_t moe[3], char *err, size_t errlen)
{
    const char *A = hp->arch;
    uint32_t blocks = 0, mtp = 0, vlen = 0, inner = 0, interval = 4, E = 0, K = 0, Fe = 0;
    int is_moe = !strcmp(A, "qwen35moe");
    *rec = NULL;
    /* MoE: the shared expert's width stands for n_ff (the dense FFN buffers hold its products) */
    if (is_moe && (key_u32(f, A, "expert_count", &E, 1, err, errlen) ||
                   key_u32(f, A, "expert_used_count", &K, 1, err, errlen) ||
                   key_u32(f, A, "expert_feed_forward_length", &Fe, 1, err, errlen) ||
                   key_u32(f, A, "expert_shared_feed_forward_length", &hp->n_ff, 1, err, errlen)))
        return -1;
    if (is_moe && (E == 0 || E > 256 || K == 0 || K > E || Fe == 0 || Fe % 32))
        return ERR("model: unsupported qwen35moe experts (%u, %u used, width %u; at most 256, width a multiple of "
                   "32)", E, K, Fe);
    moe[0] = E;
    moe[1] = K;
    moe[2] = Fe;
    if (key_u32(f, A, "block_count", &blocks, 1, err, errlen) ||
        key_u32(f, A, "embedding_length", &hp->n_embd, 1, err, errlen) ||
        key_u32(f, A, "attention.head_count", &hp->n_head, 1, err, errlen) ||
        key_u32(f, A, "attention.head_count_kv", &hp->n_kv, 1, err, errlen) ||
        key_u32(f, A, "attention.key_length", &hp->head_dim, 1, err, errlen) ||
        key_u32(f, A, "attention.value_length", &vlen, 1, err, errlen) ||
        (!is_moe && key_u32(f, A, "feed_forward_length", &hp->n_ff, 1, err, errlen)) ||
        key_u32(f, A, "context_length", &hp->n_ctx_train, 1, err, errlen) ||
        key_u32(f, A, "rope.dimension_count", rot, 1, err, errlen) ||
        key_u32(f, A, "ssm.conv_kernel", &sh->kc, 1, err, errlen) ||
        key_u32(f, A, "ssm.state_size", &sh->dk, 1, err, errlen) ||
        key_u32(f, A, "ssm.group_count", &sh->hk, 1, err, errlen) ||
        key_u32(f, A, "ssm.time_step_rank", &sh->hv, 1, err, errlen) ||
        key_u32(f, A, "ssm.inner_size", &inner, 1, err, errlen) ||
        key_u32(f, A, "nextn_predict_layers", &mtp, 0, err, errlen) ||
        key_u32(f, A, "full_attention_interval", &interval, 0, err, errlen))
        return -1;
    hp->n_layer = blocks > mtp ? blocks - mtp : 0; /* MTP blocks follow the trunk (design 2.1) */
    sh->dv = sh->hv ? inner / sh->hv : 0;
    sh->tiled = 1; /* the converter reorders value heads so that head h reads q/k head h % Hk (design 2.2) */
    if (hp->n_layer == 0 || hp->n_layer > 1024 || hp->n_embd == 0 || hp->n_embd % 32 || hp->n_head == 0 ||
        hp->n_kv == 0 || hp->n_head % hp->n_kv || hp->head_dim == 0 || hp->head_dim % 32 || hp->head_dim > 1024 ||
        vlen != hp->head_dim || hp->n_ff == 0 || hp->n_ff % 32 || *rot == 0 || *rot % 2 || *rot > hp->head_dim ||
        interval == 0)
        return ERR("model: inconsistent qwen35 hyperparameters (layers %u of %u, embd %u, heads %u/%u, key/value "
                   "length %u/%u, ff %u, rope dims %u, full_attention_interval %u)", hp->n_layer, blocks, hp->n_embd,
                   hp->n_head, hp->n_kv, hp->head_dim, vlen, hp->n_ff, *rot, interval);
    if (!sh->hk || !sh->hv || sh->hv % sh->hk || inner % sh->hv || !sh->dk || sh->dk > OPS_DELTA_DK_MAX || !sh->dv ||
        sh->kc < 1 || sh->kc > OPS_DELTA_KC_MAX)
        return ERR("model: unsupported qwen35 gated-delta shape (ssm.group_count %u, time_step_rank %u, state_size "
                   "%u, inner_size %u, conv_kernel %u; value heads a multiple of key heads, state_size <= %d, "
                   "conv_kernel <= %d)", sh->hk, sh->hv, sh->dk, inner, sh->kc, OPS_DELTA_DK_MAX, OPS_DELTA_KC_MAX);
    hp->eps = 1e-6f;
    hp->rope_base_global = 1e7f;
    if (key_f32(f, A, "attention.layer_norm_rms_epsilon", &hp->eps, err, errlen) ||
        key_f32(f, A, "rope.freq_base", &hp->rope_base_global, err, errlen))
        return -1;
    hp->rope_base_local = hp->rope_base_global;
    hp->rope_scale_global = 1.0f;
    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
    hp->embd_scale = 1.0f;
    /* the file's per-block flags (MTP blocks included), else the interval rule (llama.cpp does the same) */
    uint32_t *r = calloc(blocks, sizeof *r);
    if (!r) return ERR("out of memory");
    if (key_per_layer(f, A, "attention.recurrent_layers", blocks, r, 0, 2, err, errlen)) { free(r); return -1; }
    for (uint32_t l = 0; l < blocks; l++)
        if (r[l] == 2) r[l] = (l + 1) % interval != 0;
    *rec = r;
    return 0;
}

static uint32_t dc_of(const delta_shape *sh) { return 2 * sh->hk * sh->dk + sh->hv * sh->dv; }

/* floats of one sequence's state in a GDN layer: conv [kc-1][Dc] then S [Hv][dk][dv] */
static uint32_t state_floats(const delta_shape *sh) { return (sh->kc - 1) * dc_of(sh) + sh->hv * sh->dk * sh->dv; }

/* floats of one token's replay row in a GDN layer: what op_delta_conv reads, mixed [Dc], a and b [Hv] each.
 * A checkpoint's rows in state.rows[l]: mixed [STATE_CK_ROWS][Dc], then a, then b [STATE_CK_ROWS][Hv] */
static uint32_t replay_floats(const delta_shape *sh) { return dc_of(sh) + 2 * sh->hv; }

static int kv_layout_of(const char *arch, const gguf_file *f, model_kv_layout *out, char *err, size_t errlen)
{
    model_hparams hp = { 0 };
    snprintf(hp.arch, sizeof hp.arch, "%s", arch);
    delta_shape sh = { 0 };
    uint32_t rot, *rec, moe[3];
    if (read_hparams(f, &hp, &sh, &rot, &rec, moe, err, errlen)) return -1;
    if (model_kv_layout_alloc(out, hp.n_layer, err, errlen)) { free(rec); return -1; }
    out->n_ctx_train = hp.n_ctx_train;
    for (uint32_t l = 0; l < hp.n_layer; l++) {
        out->dims[l] = rec[l] ? 0 : hp.n_kv * hp.head_dim;
        out->state[l] = rec[l] ? state_floats(&sh) : 0;
        out->replay[l] = rec[l] ? replay_floats(&sh) : 0;
    }
    free(rec);
    return 0;
}

int qwen35_kv_layout(const gguf_file *f, model_kv_layout *out, char *err, size_t errlen)
{
    return kv_layout_of("qwen35", f, out, err, errlen);
}

int qwen35moe_kv_layout(const gguf_file *f, model_kv_layout *out, char *err, size_t errlen)
{
    return kv_layout_of("qwen35moe", f, out, err, errlen);
}

/* ffn_gate_exps and ffn_up_exps [H, Fe, E] as one weight of E experts' [Fe gate | Fe up] rows (op_moe_up) */
static int load_gate_up(const model_src *src, uint32_t l, uint32_t H, uint32_t Fe, uint32_t E, weight *w,
                        uint64_t *bytes, char *err, size_t errlen)
{
    const gguf_tensor *t[2];
    char n[2][96];
    snprintf(n[0], sizeof n[0], "blk.%u.ffn_gate_exps.weight", l);
    snprintf(n[1], sizeof n[1], "blk.%u.ffn_up_exps.weight", l);
    for (int i = 0; i < 2; i++)
        if (tensor_find(src->f, n[i], H, Fe, E, 0, &t[i], err, errlen) || tensor_host(t[i], n[i], err, errlen))
            return -1;
    if (t[0]->type != t[1]->type)
        return ERR("model: '%s' (%s) and '%s' (%s) differ in type: the experts' products need one", n[0],
                   ggml_type_name(t[0]->type), n[1], ggml_type_name(t[1]->type));
    size_t rb = ggml_row_bytes(t[0]->type, H), part = rb * Fe;
    char *h = malloc(2 * part * E);
    if (!h) return ERR("out of memory");
    for (uint32_t e = 0; e < E; e++)
        for (int i = 0; i < 2; i++) memcpy(h + (2 * e + i) * part, (const char *)t[i]->data + e * part, part);
    w->buf = rt_alloc(src->rt, 2 * part * E, h, err, errlen);
    free(h);
    if (!w->buf) return -1;
    *w = (weight){ w->buf, t[0]->type, 2 * Fe * E, H, (uint32_t)rb };
    *bytes += 2 * part * E;
    return 0;
}

/* attn_q [H, nh·2hd] holds per head hd query rows then hd gate rows: two weights of nh·hd rows each */
static int load_q_gate(const model_src *src, const char *name, uint32_t H, uint32_t nh, uint32_t hd, weight *q,
                       weight *gate, uint64_t *bytes, char *err, size_t errlen)
{
    const gguf_tensor *t;
    if (tensor_find(src->f, name, H, 2ull * nh * hd, 1, 0, &t, err, errlen) || tensor_host(t, name, err, errlen))
        return -1;
    size_t rb = ggml_row_bytes(t->type, H), half = rb * hd * nh;
    char *hq = malloc(half), *hg = malloc(half);
    if (!hq || !hg) { free(hq); free(hg); return ERR("out of memory"); }
    for (uint32_t h = 0; h < nh; h++) {
        const char *p = (const char *)t->data + (size_t)h * 2 * hd * rb;
        memcpy(hq + (size_t)h * hd * rb, p, hd * rb);
        memcpy(hg + (size_t)h * hd * rb, p + hd * rb, hd * rb);
    }
    q->buf = rt_alloc(src->rt, half, hq, err, errlen);
    gate->buf = q->buf ? rt_alloc(src->rt, half, hg, err, errlen) : NULL;
    free(hq);
    free(hg);
    if (!gate->buf) return -1;
    *q = (weight){ q->buf, t->type, nh * hd, H, (uint32_t)rb };
    *gate = (weight){ gate->buf, t->type, nh * hd, H, (uint32_t)rb };
    *bytes += t->nbytes;
    return 0;
}

int qwen35_load(model *m, const model_src *src, char *err, size_t errlen)
{
    const gguf_file *f = src->f;
    model_hparams *hp = &m->hp;
    q35_model *g = calloc(1, sizeof *g);
    if (!g) return ERR("out of memory");
    m->priv = g;
    uint32_t *rec, moe[3];
    if (read_hparams(f, hp, &g->sh, &g->rot, &rec, moe, err, errlen)) return -1;
    g->n_expert = moe[0];
    g->n_used = moe[1];
    g->n_ff_exp = moe[2];
    const delta_shape *sh = &g->sh;
    uint32_t H = hp->n_embd, NL = hp->n_layer, Hv = sh->hv, ZD = sh->hv * sh->dv, F = hp->n_ff;
    uint32_t qd = hp->n_head * hp->head_dim, kd = hp->n_kv * hp->head_dim, hd = hp->head_dim;
    g->dc = dc_of(sh);
    g->L = calloc(NL, sizeof *g->L);
    m->kv_dims = calloc(NL, sizeof *m->kv_dims);
    m->state_floats = calloc(NL, sizeof *m->state_floats);
    m->replay_floats = calloc(NL, sizeof *m->replay_floats);
    if (!g->L || !m->kv_dims || !m->state_floats || !m->replay_floats) { free(rec); return ERR("out of memory"); }
    for (uint32_t l = 0; l < NL; l++) {
        g->L[l].recurrent = (int)rec[l];
        m->kv_dims[l] = rec[l] ? 0 : kd;
        m->state_floats[l] = rec[l] ? state_floats(sh) : 0;
        m->replay_floats[l] = rec[l] ? replay_floats(sh) : 0;
    }
    free(rec);
    const gguf_tensor *te = gguf_find_tensor(f, "token_embd.weight");
    if (!te) return ERR("model: missing tensor 'token_embd.weight'");
    hp->n_vocab = (uint32_t)te->ne[1];
    uint64_t *B = &m->weight_bytes;
    if (load_mat(src, "token_embd.weight", H, hp->n_vocab, 1, &m->tok_embd, B, err, errlen) ||
        load_vec(src, "output_norm.weight", H, &m->output_norm, B, err, errlen))
        return -1;
    if (gguf_find_tensor(f, "output.weight")) {
        if (load_mat(src, "output.weight", H, hp->n_vocab, 1, &m->output, B, err, errlen)) return -1;
    } else {
        m->output = m->tok_embd;
    }
    for (uint32_t l = 0; l < NL; l++) {
        q35_layer *L = &g->L[l];
        char n[96];
#define M(field, nm, a, b) (snprintf(n, sizeof n, "blk.%u." nm, l), load_mat(src, n, a, b, 1, field, B, err, errlen))
#define V(field, nm, a) (snprintf(n, sizeof n, "blk.%u." nm, l), load_vec(src, n, a, field, B, err, errlen))
        if (V(&L->attn_norm, "attn_norm.weight", H) || V(&L->ffn_norm, "post_attention_norm.weight", H))
            return -1;
        if (!g->n_expert && (M(&L->ffn_gate, "ffn_gate.weight", H, F) || M(&L->ffn_up, "ffn_up.weight", H, F) ||
                             M(&L->ffn_down, "ffn_down.weight", F, H)))
            return -1;
        /* the shared expert's gate is [H, 1] as converted, [H] after llama-quantize: the same shape here */
        if (g->n_expert &&
            (M(&L->router, "ffn_gate_inp.weight", H, g->n_expert) ||
             load_gate_up(src, l, H, g->n_ff_exp, g->n_expert, &L->gate_up_exps, B, err, errlen) ||
             (snprintf(n, sizeof n, "blk.%u.ffn_down_exps.weight", l),
              load_mat(src, n, g->n_ff_exp, H, g->n_expert, &L->down_exps, B, err, errlen)) ||
             M(&L->sh_inp, "ffn_gate_inp_shexp.weight", H, 1) || M(&L->ffn_gate, "ffn_gate_shexp.weight", H, F) ||
             M(&L->ffn_up, "ffn_up_shexp.weight", H, F) || M(&L->ffn_down, "ffn_down_shexp.weight", F, H)))
            return -1;
        if (L->recurrent) {
            const gguf_tensor *t;
            snprintf(n, sizeof n, "blk.%u.ssm_conv1d.weight", l);
            if (tensor_find(f, n, sh->kc, g->dc, 1, 1, &t, err, errlen) ||
                tensor_upload(src, t, n, &L->conv, B, err, errlen) ||
                M(&L->qkv, "attn_qkv.weight", H, g->dc) || M(&L->z, "attn_gate.weight", H, ZD) ||
                M(&L->beta, "ssm_beta.weight", H, Hv) || M(&L->alpha, "ssm_alpha.weight", H, Hv) ||
                M(&L->ssm_out, "ssm_out.weight", ZD, H) || V(&L->ssm_a, "ssm_a", Hv) ||
                V(&L->dt_bias, "ssm_dt.bias", Hv) || V(&L->ssm_norm, "ssm_norm.weight", sh->dv))
                return -1;
        } else {
            snprintf(n, sizeof n, "blk.%u.attn_q.weight", l);
            if (load_q_gate(src, n, H, hp->n_head, hd, &L->q, &L->gate, B, err, errlen) ||
                M(&L->k, "attn_k.weight", H, kd) || M(&L->v, "attn_v.weight", H, kd) ||
                M(&L->o, "attn_output.weight", qd, H) || V(&L->q_norm, "attn_q_norm.weight", hd) ||
                V(&L->k_norm, "attn_k_norm.weight", hd))
                return -1;
        }
#undef M
#undef V
        size_t e[] = { (size_t)g->dc * H, (size_t)ZD * H, (size_t)2 * qd * H, (size_t)F * H,
                       (size_t)g->n_expert * H };
        for (int i = 0; i < 5; i++)
            if (e[i] > m->max_weight_elems) m->max_weight_elems = e[i];
    }
    if (g->n_expert) {
        float *one = malloc(sizeof(float) * g->n_expert);
        if (!one) return ERR("out of memory");
        for (uint32_t e = 0; e < g->n_expert; e++) one[e] = 1.0f;
        g->ones = rt_alloc(src->rt, sizeof(float) * g->n_expert, one, err, errlen);
        free(one);
        if (!g->ones) return -1;
    }
    m->freq_global = rope_freqs(src->rt, g->rot, hp->rope_base_global, 1.0, NULL, err, errlen);
    return m->freq_global ? 0 : -1;
}

void qwen35_unload(model *m)
{
    q35_model *g = m->priv;
    if (!g) return;
    for (uint32_t l = 0; g->L && l < m->hp.n_layer; l++) {
        q35_layer *L = &g->L[l];
        cl_mem *ms[] = { &L->qkv.buf, &L->z.buf, &L->beta.buf, &L->alpha.buf, &L->ssm_out.buf, &L->conv, &L->ssm_a,
                         &L->dt_bias, &L->ssm_norm, &L->q.buf, &L->gate.buf, &L->k.buf, &L->v.buf, &L->o.buf,
                         &L->q_norm, &L->k_norm, &L->attn_norm, &L->ffn_norm, &L->ffn_gate.buf, &L->ffn_up.buf,
                         &L->ffn_down.buf, &L->router.buf, &L->gate_up_exps.buf, &L->down_exps.buf,
                         &L->sh_inp.buf };
        for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) mem_release(ms[i]);
    }
    free(g->L);
    mem_release(&g->ones);
    free(g);
    m->priv = NULL;
}

uint32_t qwen35_layer_window(const model *m, uint32_t l)
{
    (void)m;
    (void)l;
    return 0; /* no sliding window */
}

int qwen35_bufs_create(fwd_bufs *b, const model *m, cl_runtime *rt, char *err, size_t errlen)
{
    const q35_model *g = m->priv;
    size_t T = b->max_tok, Hv = g->sh.hv, ZD = Hv * g->sh.dv, qd = (size_t)m->hp.n_head * m->hp.head_dim;
    size_t sz[X_COUNT] = { [X_MIX] = T * g->dc, [X_Y] = T * g->dc, [X_Z] = T * ZD, [X_A] = T * Hv, [X_B] = T * Hv,
                           [X_BETA] = T * Hv, [X_G] = T * Hv, [X_O] = T * ZD, [X_GATE] = T * qd,
                           [X_RUNS] = T * OPS_DELTA_RUN_INTS };
    if (g->n_expert) {
        size_t E = g->n_expert, K = g->n_used, Fe = g->n_ff_exp, H = m->hp.n_embd;
        sz[X_RZ] = T * E;
        sz[X_SEL] = sz[X_WSEL] = T * K;
        sz[X_GU] = T * K * 2 * Fe;
        sz[X_ACT] = T * K * Fe;
        sz[X_ORD] = ops_moe_ord_ints(g->n_expert, (uint32_t)(T * K));
        sz[X_YD] = T * K * H;
        sz[X_SH] = T * H;
        sz[X_SG] = T;
    }
    for (int i = 0; i < X_COUNT; i++)
        if (sz[i] && !(b->ext[i] = rt_alloc(rt, 4 * sz[i], NULL, err, errlen))) return -1;
    return 0;
}

void qwen35_bufs_destroy(fwd_bufs *b)
{
    for (int i = 0; i < X_COUNT; i++) mem_release(&b->ext[i]);
}

/* ---- forward ----------------------------------------------------------------------------- */

/* the batch's runs (one per sequence: its tokens are contiguous at consecutive positions), each in place
 * in its sequence's slot, on the host (the ops' checks and dispatch) and on the device (op_delta_runs, the
 * same rule); slots of runs starting at position 0 zeroed */
static int make_runs(const kv_cache *kv, ops *o, fwd_bufs *b, const fwd_args *a, delta_run *rs, uint32_t *n,
                     char *err, size_t errlen)
{
    uint32_t k = 0;
    for (uint32_t t = 0; t < a->ntok; t++) {
        int32_t s = a->seq[t];
        if (k && rs[k - 1].src == s && a->pos[t] == rs[k - 1].pos + rs[k - 1].len) { rs[k - 1].len++; continue; }
        for (uint32_t j = 0; j < k; j++)
            if (rs[j].src == s) return ERR("internal: sequence %d's tokens are not contiguous in the batch", s);
        if (s < 0 || (uint32_t)s >= kv->state->n_seq) return ERR("internal: sequence %d has no state slot", s);
        rs[k++] = (delta_run){ (int32_t)t, 1, a->pos[t], s, s };
        if (a->pos[t] == 0 && state_zero(kv->state, o->rt->q, s)) return ERR("zeroing a sequence's state failed");
    }
    *n = k;
    return op_delta_runs(o, b->seq, b->pos, a->ntok, b->ext[X_RUNS]) ? ops_status(o, err, errlen) : 0;
}

/* rows [t0, t0 + n) of [T][w] floats in src to rows [r0, r0 + n) of dst's [STATE_CK_ROWS][w] at float offset
 * at (to_rows), or back */
static cl_int copy_rows(cl_command_queue q, cl_mem src, cl_mem dst, size_t w, size_t t0, size_t at, size_t r0, size_t n,
                        int to_rows)
{
    size_t a = 4 * w * t0, b = 4 * (at + w * r0);
    return clEnqueueCopyBuffer(q, to_rows ? src : dst, to_rows ? dst : src, to_rows ? a : b, to_rows ? b : a,
                               4 * w * n, 0, NULL, NULL);
}

/* the replay rows of layer l between the forward's scratch rows [t0, t0 + n) (mixed, a, b) and the rows
 * [r0, r0 + n) of checkpoint ck in state.rows[l]: kept (to_rows) or brought back for a replay */
static int move_rows(const q35_model *g, ops *o, fwd_bufs *b, const state_store *st, uint32_t l, int ck, size_t t0,
                     size_t r0, size_t n, int to_rows)
{
    size_t R = STATE_CK_ROWS, Dc = g->dc, Hv = g->sh.hv, base = (size_t)ck * R * st->row_floats[l];
    cl_command_queue q = o->rt->q;
    cl_int ce = copy_rows(q, b->ext[X_MIX], st->rows[l], Dc, t0, base, r0, n, to_rows);
    if (!ce) ce = copy_rows(q, b->ext[X_A], st->rows[l], Hv, t0, base + R * Dc, r0, n, to_rows);
    if (!ce) ce = copy_rows(q, b->ext[X_B], st->rows[l], Hv, t0, base + R * (Dc + Hv), r0, n, to_rows);
    return ce ? ops_fail(o, "qwen35: moving the state's replay rows: %s", rt_errstr(ce)) : 0;
}

/* the rows of runs whose sequence took a checkpoint this step (state_checkpoint), kept for a rollback */
static void keep_rows(const q35_model *g, ops *o, fwd_bufs *b, const state_store *st, uint32_t l,
                      const delta_runs *dr)
{
    for (uint32_t i = 0; st->ck_used && i < dr->n; i++) {
        const delta_run *r = &dr->h[i];
        int32_t ck = st->ck_of[r->src], at = ck >= 0 ? st->ck_pos[ck] : 0;
        if (ck < 0 || r->pos < at || r->pos + r->len > at + st->ck_len[ck]) continue;
        if (move_rows(g, o, b, st, l, ck, (size_t)r->t0, (size_t)(r->pos - at), (size_t)r->len, 1)) return;
    }
}

/* a GDN layer on h (x.spare) into b->o */
static void gdn(const model *m, ops *o, fwd_bufs *b, kv_cache *kv, uint32_t l, const delta_runs *dr, uint32_t T)
{
    const q35_model *g = m->priv;
    const q35_layer *L = &g->L[l];
    const delta_shape *sh = &g->sh;
    uint32_t H = m->hp.n_embd, Hv = sh->hv, ZD = Hv * sh->dv;
    delta_state st = { kv->state->buf[l], kv->state->n_slots, m->state_floats[l], 0,
                       (sh->kc - 1) * g->dc };
    mm_out p[3] = { { &L->qkv, b->ext[X_MIX], g->dc }, { &L->z, b->ext[X_Z], ZD }, { &L->beta, b->ext[X_B], Hv } };
    op_matmul_multi(o, p, 3, b->x.spare, H, T);                             /* mixed, z, b = W h */
    op_matmul(o, &L->alpha, b->x.spare, H, b->ext[X_A], Hv, T);             /* a = W h */
    keep_rows(g, o, b, kv->state, l, dr);                                   /* a rollback's replay rows */
    op_delta_conv(o, sh, dr, b->ext[X_MIX], L->conv, b->ext[X_A], b->ext[X_B], L->ssm_a, L->dt_bias, 1e-6f, &st,
                  b->ext[X_Y], b->ext[X_BETA], b->ext[X_G]);                /* q̂, k̂, v, β, g */
    op_delta_scan(o, sh, dr, b->ext[X_Y], b->ext[X_BETA], b->ext[X_G], &st, b->ext[X_O]); /* o = Sᵀq */
    op_rmsnorm_gated(o, b->ext[X_O], b->ext[X_Z], L->ssm_norm, b->ext[X_O], T * Hv, sh->dv, m->hp.eps);
    op_matmul(o, &L->ssm_out, b->ext[X_O], ZD, b->o, H, T);                 /* y = ssm_out o */
}

/* a gated attention layer on h (x.spare) into b->o */
static void attention(const model *m, ops *o, fwd_bufs *b, kv_cache *kv, uint32_t l, const fwd_args *a)
{
    const model_hparams *hp = &m->hp;
    const q35_model *g = m->priv;
    const q35_layer *L = &g->L[l];
    uint32_t T = a->ntok, H = hp->n_embd, qd = hp->n_head * hp->head_dim, kd = hp->n_kv * hp->head_dim;
    mm_out p[3] = { { &L->q, b->q, qd }, { &L->k, b->k, kd }, { &L->v, b->v, kd } };
    op_matmul_multi(o, p, 3, b->x.spare, H, T);                             /* q, k, v = W h */
    op_matmul(o, &L->gate, b->x.spare, H, b->ext[X_GATE], qd, T);           /* gate = W h */
    kv_view kk = kv_layer_k(kv, l), vv = kv_layer_v(kv, l);
    attn_batch ab = { b->q, b->att, b->pos, b->seq, a->seq, T, a->max_pos, b->part_acc, b->part_ml, b->part_cnt,
                      b->part_elems, hp->head_dim, NULL, 0 };
    attn_layer al = { hp->n_head, hp->n_kv, hp->head_dim, 0, hp->attn_scale, 0.0f, &kk, &vv };
    qkv_raw raw = { b->k, b->v, L->q_norm, L->k_norm, m->freq_global, 1, 0, hp->eps, g->rot };
    op_qkv_attention(o, &raw, &ab, &al);                                    /* att = attn(rope(norm(q, k)), v) */
    op_mul_sigmoid(o, b->att, b->ext[X_GATE], T * qd);                      /* att ·= σ(gate) */
    op_matmul(o, &L->o, b->att, qd, b->o, H, T);                            /* y = Wo att */
}

/* the experts and the gated shared expert on h (x.spare) into b->o */
static void moe(const model *m, ops *o, fwd_bufs *b, const q35_layer *L, uint32_t T)
{
    const q35_model *g = m->priv;
    uint32_t H = m->hp.n_embd, E = g->n_expert, K = g->n_used, Fe = g->n_ff_exp, F = m->hp.n_ff;
    cl_mem *x = b->ext;
    op_matmul(o, &L->router, b->x.spare, H, x[X_RZ], E, T);                 /* z = W_r h */
    op_router_topk(o, x[X_RZ], E, K, g->ones, x[X_SEL], x[X_WSEL], T);      /* top-k of softmax(z), renormalised */
    op_moe_up(o, &L->gate_up_exps, 2 * Fe, b->x.spare, H, x[X_SEL], K, x[X_GU], x[X_ORD], T);
    op_moe_down_glu(o, OPS_ACT_SILU, &L->down_exps, H, x[X_GU], x[X_ACT], x[X_SEL], x[X_WSEL], K, b->o, x[X_ORD],
                    x[X_YD], T);                                            /* y = Σ w_k down_k(silu(g_k)·u_k) */
    mm_out gu[2] = { { &L->ffn_gate, b->g, F }, { &L->ffn_up, b->u, F } };
    op_matmul_multi(o, gu, 2, b->x.spare, H, T);                            /* shared g, u = W h */
    op_matmul(o, &L->sh_inp, b->x.spare, H, x[X_SG], 1, T);                 /* s = w_s h */
    op_matmul_glu(o, OPS_ACT_SILU, &L->ffn_down, b->g, F, b->u, 0, F, x[X_SH], H, T);
    op_add_gated(o, b->o, x[X_SH], x[X_SG], T, H);                          /* y += σ(s)·shared */
}

int qwen35_forward(const model *m, ops *o, fwd_bufs *b, kv_cache *kv, const fwd_args *a, char *err, size_t errlen)
{
    const model_hparams *hp = &m->hp;
    const q35_model *g = m->priv;
    uint32_t T = a->ntok, H = hp->n_embd, NL = hp->n_layer, F = hp->n_ff;
    if (!a->seq || !a->pos) return ERR("internal: qwen35 needs the batch's sequences and positions on the host");
    if (!kv->state) return ERR("internal: qwen35 needs a recurrent state store beside its KV cache");
    delta_run *rs = malloc((T ? T : 1) * sizeof *rs);
    if (!rs) return ERR("out of memory");
    delta_runs dr = { rs, b->ext[X_RUNS], 0, T };
    if (make_runs(kv, o, b, a, rs, &dr.n, err, errlen)) { free(rs); return -1; }
    op_embed(o, &m->tok_embd, b->ids, T, 1.0f, b->x.cur);                   /* x = embed(ids) */
    op_rmsnorm(o, b->x.cur, g->L[0].attn_norm, b->x.spare, T, H, hp->eps);  /* h = norm(x) */
    for (uint32_t l = 0; l < NL; l++) {
        const q35_layer *L = &g->L[l];
        if (L->recurrent) gdn(m, o, b, kv, l, &dr, T);
        else attention(m, o, b, kv, l, a);
        mm_out gu[2] = { { &L->ffn_gate, b->g, F }, { &L->ffn_up, b->u, F } };
        norm_chain pa = { .x = b->o, .scale = 1.0f, .out = { { L->ffn_norm, NULL } }, .nout = 1 };
        if (g->n_expert) {
            op_norm_matmul(o, &b->x, &pa, NULL, 0, H, T, hp->eps);          /* x += y; h = norm(x) */
            moe(m, o, b, L, T);                                             /* y = experts(h) + shared(h) */
        } else {
            op_norm_matmul(o, &b->x, &pa, gu, 2, H, T, hp->eps);            /* x += y; g, u = W norm(x) */
            op_matmul_glu(o, OPS_ACT_SILU, &L->ffn_down, b->g, F, b->u, 0, F, b->o, H, T); /* y = down(silu(g)·u) */
        }
        norm_chain ff = { .x = b->o, .scale = 1.0f };
        if (l + 1 < NL) {
            ff.out[0] = (norm_out){ g->L[l + 1].attn_norm, NULL };
            ff.nout = 1;
        }
        op_norm_matmul(o, &b->x, &ff, NULL, 0, H, T, hp->eps);              /* x += y; h = norm(x) */
    }
    free(rs);
    fwd_logits(m, o, b, a);
    return ops_status(o, err, errlen);
}

int qwen35_replay(const model *m, ops *o, fwd_bufs *b, kv_cache *kv, int seq, uint32_t n, char *err, size_t errlen)
{
    const q35_model *g = m->priv;
    const state_store *st = kv->state;
    int32_t ck = st && seq >= 0 && (uint32_t)seq < st->n_seq ? st->ck_of[seq] : -1;
    if (ck < 0 || n > (uint32_t)st->ck_len[ck] || n > b->max_tok)
        return ERR("internal: no replay rows for %u tokens of sequence %d", n, seq);
    if (!n) return 0;
    /* one run in place from the checkpoint's position: the forward's own ops over the kept rows */
    delta_run run = { 0, (int32_t)n, st->ck_pos[ck], seq, seq };
    cl_int ce = clEnqueueWriteBuffer(o->rt->q, b->ext[X_RUNS], CL_TRUE, 0, sizeof run, &run, 0, NULL, NULL);
    if (ce) return ERR("qwen35: uploading the replay's run: %s", rt_errstr(ce));
    delta_runs dr = { &run, b->ext[X_RUNS], 1, n };
    ops_clear(o);
    for (uint32_t l = 0; l < m->hp.n_layer; l++) {
        const q35_layer *L = &g->L[l];
        if (!L->recurrent) continue;
        delta_state ds = { st->buf[l], st->n_slots, m->state_floats[l], 0, (g->sh.kc - 1) * g->dc };
        if (move_rows(g, o, b, st, l, ck, 0, 0, n, 0)) break;
        op_delta_conv(o, &g->sh, &dr, b->ext[X_MIX], L->conv, b->ext[X_A], b->ext[X_B], L->ssm_a, L->dt_bias, 1e-6f,
                      &ds, b->ext[X_Y], b->ext[X_BETA], b->ext[X_G]);
        op_delta_scan(o, &g->sh, &dr, b->ext[X_Y], b->ext[X_BETA], b->ext[X_G], &ds, b->ext[X_O]);
    }
    return ops_status(o, err, errlen);
}
