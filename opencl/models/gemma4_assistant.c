/* gemma4_assistant.c — the Gemma 4 MTP drafter (GGUF arch "gemma4-assistant"): its keys and tensors, and
 * the check that it fits the target it reads. docs/design-mtp-drafter.md is the written spec,
 * tools/ref_gemma4_assistant.py the executable one.
 *
 * A drafter step takes a token and a row h of the target's width Hb (the target's normed hidden state, or
 * the previous step's output) at position p:
 *   x = pre_projection(concat(target_embd(token) * sqrt(Hb), h))                      [2 Hb] -> [H]
 *   per layer (sliding or full, Gemma 4's decoder layer without K/V projections):
 *     q = rope(rms(Wq rms(x, attn_norm), q_norm)); attention over the target's cache of its last KV layer
 *     of the same kind; x += rms(Wo a, post_attention_norm); x += rms(mlp(rms(x, ffn_norm)), post_ffw_norm);
 *     x *= layer_output_scale
 *   hn = rms(x, output_norm); logits = token_embd hn (no soft-capping); h_next = post_projection hn
 * It owns no KV cache and computes none: kv_layout has no layer with a cache of its own. */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errf.h"
#include "load.h"

/* what registry.c's row points at, declared here too so that the compiler checks the definitions */
model_load_fn gemma4_assistant_load;
model_unload_fn gemma4_assistant_unload;
model_layer_window_fn gemma4_assistant_layer_window;
model_kv_layout_fn gemma4_assistant_kv_layout;
model_pair_check_fn gemma4_assistant_pair_check;

#define ARCH "gemma4-assistant"

typedef struct ga_layer {
    layer_weights w;          /* q, o, gate, up, down and the norms; k, v, k_norm stay NULL */
    uint32_t nh, nkv, hd, n_ff, rot;   /* nkv: the file's word for the target's cache (the pair check holds it) */
    float out_scale;
} ga_layer;

typedef struct assistant_model {
    ga_layer *L;
    uint32_t n_embd_out;      /* Hb: the target's hidden size, the width of h */
    weight pre_proj;          /* [2 Hb] -> [H]: embedding first, then h */
    weight post_proj;         /* [H] -> [Hb] */
    float theta_full, theta_swa;
} assistant_model;

/* ---- keys --------------------------------------------------------------------------------- */

/* the keys a layer's shape needs, per kind of layer ([0] full, [1] sliding) */
typedef struct ga_kinds { int64_t hd[2], rot[2]; float theta[2]; } ga_kinds;

/* hyperparameters and every layer's shape from the keys alone: m->hp, g->L's geometry, g->n_embd_out */
static int read_layers(const gguf_file *f, model *m, assistant_model *g, ga_kinds *k, char *err, size_t errlen)
{
    model_hparams *hp = &m->hp;
    uint32_t *nh = NULL, *nkv = NULL, *nff = NULL, *swa = NULL;
    int rc = -1;
    int64_t v, out = 0, nextn = -1, shared = -1, win = 0, vl_full = -1, vl_swa = -1, ple = 0, nexp = 0;
    if (key_int(f, ARCH, "block_count", &v, 1, err, errlen)) goto done;
    hp->n_layer = (uint32_t)v;
    if (hp->n_layer == 0 || hp->n_layer > 64) { ERR("model: block_count %u out of range", hp->n_layer); goto done; }
    uint32_t NL = hp->n_layer;
    nh = calloc(NL, 4); nkv = calloc(NL, 4); nff = calloc(NL, 4); swa = calloc(NL, 4);
    g->L = calloc(NL, sizeof *g->L);
    if (!nh || !nkv || !nff || !swa || !g->L) { ERR("out of memory"); goto done; }
    if (key_int(f, ARCH, "embedding_length", &v, 1, err, errlen)) goto done;
    hp->n_embd = (uint32_t)v;
    if (key_int(f, ARCH, "context_length", &v, 1, err, errlen)) goto done;
    hp->n_ctx_train = (uint32_t)v;
    k->rot[0] = k->rot[1] = -1;
    if (key_int(f, ARCH, "embedding_length_out", &out, 1, err, errlen) ||
        key_int(f, ARCH, "nextn_predict_layers", &nextn, 0, err, errlen) ||
        key_int(f, ARCH, "attention.shared_kv_layers", &shared, 0, err, errlen) ||
        key_per_layer(f, ARCH, "attention.head_count", NL, nh, 1, 0, err, errlen) ||
        key_per_layer(f, ARCH, "attention.head_count_kv", NL, nkv, 0, -1, err, errlen) ||
        key_per_layer(f, ARCH, "feed_forward_length", NL, nff, 1, 0, err, errlen) ||
        key_per_layer(f, ARCH, "attention.sliding_window_pattern", NL, swa, 1, 0, err, errlen) ||
        key_int(f, ARCH, "attention.key_length", &k->hd[0], 1, err, errlen) ||
        key_int(f, ARCH, "attention.key_length_swa", &k->hd[1], 1, err, errlen) ||
        key_int(f, ARCH, "attention.value_length", &vl_full, 0, err, errlen) ||
        key_int(f, ARCH, "attention.value_length_swa", &vl_swa, 0, err, errlen) ||
        key_int(f, ARCH, "rope.dimension_count", &k->rot[0], 0, err, errlen) ||
        key_int(f, ARCH, "rope.dimension_count_swa", &k->rot[1], 0, err, errlen) ||
        key_int(f, ARCH, "attention.sliding_window", &win, 1, err, errlen) ||
        key_int(f, ARCH, "embedding_length_per_layer_input", &ple, 0, err, errlen) ||
        key_int(f, ARCH, "expert_count", &nexp, 0, err, errlen))
        goto done;
    for (int i = 0; i < 2; i++)
        if (k->rot[i] < 0) k->rot[i] = k->hd[i];
    if (vl_full < 0) vl_full = k->hd[0];
    if (vl_swa < 0) vl_swa = k->hd[1];
    hp->eps = 1e-6f;
    k->theta[0] = 1e6f;
    k->theta[1] = 1e4f;
    if (key_f32(f, ARCH, "attention.layer_norm_rms_epsilon", &hp->eps, err, errlen) ||
        key_f32(f, ARCH, "rope.freq_base", &k->theta[0], err, errlen) ||
        key_f32(f, ARCH, "rope.freq_base_swa", &k->theta[1], err, errlen))
        goto done;
    uint32_t H = hp->n_embd;
    if (H == 0 || H % 32 || out == 0 || out % 32 || out == H) {
        ERR("model: inconsistent " ARCH " widths (embedding_length %u, embedding_length_out %lld: the target's "
            "hidden size, a multiple of 32 and not the drafter's own)", H, (long long)out);
        goto done;
    }
    /* every layer is an MTP layer reading the target's cache: no trunk, no K/V of its own */
    if ((nextn >= 0 && nextn != NL) || (shared >= 0 && shared != NL)) {
        ERR("model: " ARCH " with nextn_predict_layers %lld and shared_kv_layers %lld of %u layers (all must be)",
            (long long)nextn, (long long)shared, NL);
        goto done;
    }
    if (ple || nexp) { ERR("model: " ARCH " with per-layer inputs (%lld) or experts (%lld)", (long long)ple,
                           (long long)nexp); goto done; }
    for (int i = 0; i < 2; i++)
        if (k->hd[i] == 0 || k->hd[i] % 32 || k->hd[i] > 1024 || k->rot[i] > k->hd[i] || k->rot[i] % 2) {
            ERR("model: inconsistent " ARCH " %s head dim %lld / rope dims %lld", i ? "sliding" : "full",
                (long long)k->hd[i], (long long)k->rot[i]);
            goto done;
        }
    if (vl_full != k->hd[0] || vl_swa != k->hd[1] || win == 0) {
        ERR("model: inconsistent " ARCH " value lengths %lld / %lld or window %lld", (long long)vl_full,
            (long long)vl_swa, (long long)win);
        goto done;
    }
    g->n_embd_out = (uint32_t)out;
    hp->window = (uint32_t)win;
    hp->attn_scale = 1.0f;
    hp->embd_scale = sqrtf((float)out);      /* the target's embedding scale: the input is its table */
    for (uint32_t l = 0; l < NL; l++) {
        ga_layer *L = &g->L[l];
        if (swa[l] > 1) { ERR("model: layer %u has unknown type %u in " ARCH ".attention.sliding_window_pattern "
                              "(expected 1 sliding or 0 full)", l, swa[l]); goto done; }
        int s = (int)swa[l];
        L->w.is_swa = s;
        L->nh = nh[l];
        L->nkv = nkv[l] == (uint32_t)-1 ? nh[l] : nkv[l];
        L->hd = (uint32_t)k->hd[s];
        L->rot = (uint32_t)k->rot[s];
        L->n_ff = nff[l];
        if (L->nh == 0 || L->nkv == 0 || L->nh % L->nkv || L->n_ff == 0) {
            ERR("model: layer %u: inconsistent heads %u / kv heads %u / ff %u", l, L->nh, L->nkv, L->n_ff);
            goto done;
        }
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

int gemma4_assistant_kv_layout(const gguf_file *f, model_kv_layout *out, char *err, size_t errlen)
{
    (void)f; (void)out;
    return ERR("model: '" ARCH "' is an MTP drafter of gemma4 models: it has no cache of its own (load it "
               "beside one)");
}

/* ---- load --------------------------------------------------------------------------------- */

int gemma4_assistant_load(model *m, const model_src *src, char *err, size_t errlen)
{
    const gguf_file *f = src->f;
    model_hparams *hp = &m->hp;
    assistant_model *g = calloc(1, sizeof *g);
    if (!g) return ERR("out of memory");
    m->priv = g;
    float *ff = NULL;
    ga_kinds k;
    if (read_layers(f, m, g, &k, err, errlen)) goto fail;
    uint32_t NL = hp->n_layer, H = hp->n_embd, Hb = g->n_embd_out;
    g->theta_full = k.theta[0];
    g->theta_swa = k.theta[1];

    const gguf_tensor *te = gguf_find_tensor(f, "token_embd.weight");
    if (!te) { ERR("model: missing tensor 'token_embd.weight' (expected shape [%u, n_vocab])", H); goto fail; }
    hp->n_vocab = (uint32_t)te->ne[1];
    uint64_t *B = &m->weight_bytes;
    /* token_embd is the output head only: the input embedding is the target's */
    if (load_mat(src, "token_embd.weight", H, hp->n_vocab, 1, &m->tok_embd, B, err, errlen) ||
        load_vec(src, "output_norm.weight", H, &m->output_norm, B, err, errlen) ||
        load_mat(src, "nextn.pre_projection.weight", 2 * (uint64_t)Hb, H, 1, &g->pre_proj, B, err, errlen) ||
        load_mat(src, "nextn.post_projection.weight", H, Hb, 1, &g->post_proj, B, err, errlen))
        goto fail;
    m->output = m->tok_embd;
    int any_full = 0;
    for (uint32_t l = 0; l < NL; l++) any_full |= !g->L[l].w.is_swa;
    if (any_full) {               /* full layers' proportional RoPE, as the target's */
        const gguf_tensor *t;
        if (tensor_find(f, "rope_freqs.weight", (uint64_t)k.rot[0] / 2, 1, 1, 1, &t, err, errlen) ||
            tensor_host(t, "rope_freqs.weight", err, errlen))
            goto fail;
        ff = malloc(t->nbytes);
        if (!ff) { ERR("out of memory"); goto fail; }
        memcpy(ff, t->data, t->nbytes);
    }
    size_t big[] = { (size_t)2 * Hb * H, (size_t)hp->n_vocab * H };
    for (int i = 0; i < 2; i++)
        if (big[i] > m->max_weight_elems) m->max_weight_elems = big[i];
    for (uint32_t l = 0; l < NL; l++) {
        ga_layer *L = &g->L[l];
        layer_weights *W = &L->w;
        char n[96];
        uint32_t qd = L->nh * L->hd;
        /* a layer of its own K/V would compute a cache nobody reads: a file that has one is not this model */
        static const char *const own_kv[] = { "attn_k.weight", "attn_v.weight", "attn_k_norm.weight" };
        for (size_t i = 0; i < sizeof own_kv / sizeof *own_kv; i++) {
            snprintf(n, sizeof n, "blk.%u.%s", l, own_kv[i]);
            if (gguf_find_tensor(f, n)) {
                ERR("model: tensor '%s': a " ARCH " layer has no K/V of its own (it reads the target's cache)", n);
                goto fail;
            }
        }
        if (load_g4_block(src, l, H, qd, L->hd, L->n_ff, W, B, err, errlen) ||
            load_layer_scalar(src, l, &L->out_scale, err, errlen))
            goto fail;
        size_t e[] = { (size_t)qd * H, (size_t)L->n_ff * H };
        for (int i = 0; i < 2; i++)
            if (e[i] > m->max_weight_elems) m->max_weight_elems = e[i];
    }
    m->freq_local = rope_freqs(src->rt, (uint32_t)k.rot[1], k.theta[1], 1.0, NULL, err, errlen);
    m->freq_global = m->freq_local ? rope_freqs(src->rt, (uint32_t)k.rot[0], k.theta[0], 1.0, ff, err, errlen) : NULL;
    if (!m->freq_global) goto fail;
    free(ff);
    return 0;
fail:
    free(ff);
    return -1;
}

uint32_t gemma4_assistant_layer_window(const model *m, uint32_t l)
{
    const assistant_model *g = m->priv;
    return g->L[l].w.is_swa ? m->hp.window : 0;
}

void gemma4_assistant_unload(model *m)
{
    assistant_model *g = m->priv;
    if (!g) return;
    if (g->L)
        for (uint32_t l = 0; l < m->hp.n_layer; l++) layer_weights_release(&g->L[l].w);
    free(g->L);
    mem_release(&g->pre_proj.buf);
    mem_release(&g->post_proj.buf);
    free(g);
    m->priv = NULL;
}

/* ---- the pair ------------------------------------------------------------------------------ */

int gemma4_assistant_pair_check(const model *d, const model *t, char *err, size_t errlen)
{
    const assistant_model *g = d->priv;
    if (g->n_embd_out != t->hp.n_embd)
        return ERR("drafter: " ARCH ".embedding_length_out %u is not the target's embedding_length %u", g->n_embd_out,
                   t->hp.n_embd);
    if (d->hp.n_vocab != t->hp.n_vocab)
        return ERR("drafter: vocabulary of %u tokens, the target's has %u", d->hp.n_vocab, t->hp.n_vocab);
    model_kv_ref ref[MODEL_KV_KINDS];
    t->arch->kv_export(t, ref);
    for (uint32_t l = 0; l < d->hp.n_layer; l++) {
        const ga_layer *L = &g->L[l];
        int s = L->w.is_swa;
        const model_kv_ref *r = &ref[s ? MODEL_KV_SLIDING : MODEL_KV_FULL];
        const char *kind = s ? "sliding" : "full";
        float theta = s ? g->theta_swa : g->theta_full;
        if (r->layer < 0) return ERR("drafter: layer %u is %s, the target has no %s layer to read", l, kind, kind);
        if (L->hd != r->head_dim || L->nkv != r->n_kv || L->rot != r->rot)
            return ERR("drafter: layer %u (%s) has %u kv heads x %u, rope dims %u; the target's layer %d it reads "
                       "has %u x %u, rope dims %u", l, kind, L->nkv, L->hd, L->rot, r->layer, r->n_kv, r->head_dim,
                       r->rot);
        if (fabsf(theta - r->theta) > 1e-6f * r->theta)
            return ERR("drafter: layer %u (%s) has RoPE base %g, the target's %g", l, kind, theta, r->theta);
        if (s && d->hp.window != r->window)
            return ERR("drafter: sliding window %u, the target's %u", d->hp.window, r->window);
    }
    return 0;
}

/* ---- the draft step ------------------------------------------------------------------------- */

enum { XA_PREV = FWD_DRAFT_PREV, XA_H = FWD_DRAFT_H, XA_E, XA_CAT, XA_COUNT };

int gemma4_assistant_bufs_create(fwd_bufs *b, const model *m, cl_runtime *rt, char *err, size_t errlen)
{
    const assistant_model *g = m->priv;
    size_t T = b->max_tok, Hb = g->n_embd_out;
    size_t sz[XA_COUNT] = { [XA_PREV] = T, [XA_H] = T * Hb, [XA_E] = T * Hb, [XA_CAT] = 2 * T * Hb };
    for (int i = 0; i < XA_COUNT; i++)
        if (!(b->ext[i] = rt_alloc(rt, 4 * sz[i], NULL, err, errlen))) return -1;
    return 0;
}

void gemma4_assistant_bufs_destroy(fwd_bufs *b)
{
    for (int i = 0; i < XA_COUNT; i++) mem_release(&b->ext[i]);
}

/* [T][w] rows of src into columns [col, col + w) of dst's [T][2w] rows */
static void put_half(ops *o, cl_mem src, cl_mem dst, uint32_t T, uint32_t w, uint32_t col)
{
    if (o->failed) return;
    size_t so[3] = { 0, 0, 0 }, dor[3] = { 4 * (size_t)col, 0, 0 }, reg[3] = { 4 * (size_t)w, T, 1 };
    cl_int ce = clEnqueueCopyBufferRect(o->rt->q, src, dst, so, dor, reg, 4 * (size_t)w, 0, 8 * (size_t)w, 0, 0, NULL,
                                        NULL);
    if (ce) ops_fail(o, "drafter input rows: %s", rt_errstr(ce));
}

int gemma4_assistant_draft(const model *d, const model *t, ops *o, fwd_bufs *b, kv_cache *kv, const fwd_args *a,
                           char *err, size_t errlen)
{
    const model_hparams *hp = &d->hp;
    const assistant_model *g = d->priv;
    uint32_t T = a->ntok, H = hp->n_embd, Hb = g->n_embd_out;
    float eps = hp->eps;
    model_kv_ref ref[MODEL_KV_KINDS];
    t->arch->kv_export(t, ref);
    /* x = pre_projection(concat(target_embd(ids) * sqrt(Hb), h)) */
    op_embed(o, &t->tok_embd, b->ids, T, hp->embd_scale, b->ext[XA_E]);
    put_half(o, b->ext[XA_E], b->ext[XA_CAT], T, Hb, 0);
    put_half(o, b->ext[XA_H], b->ext[XA_CAT], T, Hb, Hb);
    op_matmul(o, &g->pre_proj, b->ext[XA_CAT], 2 * Hb, b->x.cur, H, T);
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        const ga_layer *L = &g->L[l];
        const layer_weights *W = &L->w;
        const model_kv_ref *r = &ref[W->is_swa ? MODEL_KV_SLIDING : MODEL_KV_FULL];
        uint32_t qd = L->nh * L->hd;
        cl_mem freq = W->is_swa ? d->freq_local : d->freq_global;
        op_rmsnorm(o, b->x.cur, W->attn_norm, b->x.spare, T, H, eps);      /* q = rope(norm(Wq norm(x)), p) */
        op_matmul(o, &W->q, b->x.spare, H, b->q, qd, T);
        op_norm_rope(o, b->q, T, L->nh, L->hd, W->q_norm, 1, eps, freq, L->rot, b->pos, b->seq, NULL);
        /* the target's keys 0 .. p - 1 as a query at p - 1 sees them; sliding: the newest window + 1, as
         * transformers' drafter (docs/design-mtp-drafter.md 1.4) */
        kv_view kk = kv_layer_k(kv, (uint32_t)r->layer), vv = kv_layer_v(kv, (uint32_t)r->layer);
        attn_batch ab = { b->q, b->att, b->ext[XA_PREV], b->seq, a->seq, T, a->max_pos, b->part_acc, b->part_ml,
                          b->part_cnt, b->part_elems, hp->head_dim, NULL, 0 };
        attn_layer al = { L->nh, L->nkv, L->hd, W->is_swa ? (int)hp->window + 1 : 0, hp->attn_scale, 0, &kk, &vv };
        op_attention_batch(o, &ab, &al);
        op_matmul(o, &W->o, b->att, qd, b->o, H, T);                        /* o = Wo att */
        mm_out gu[2] = { { &W->gate, b->g, L->n_ff }, { &W->up, b->u, L->n_ff } };
        norm_chain pa = { .x = b->o, .wx = W->post_attn_norm, .scale = 1.0f, .out = { { W->ffn_norm, NULL } },
                          .nout = 1 };
        op_norm_matmul(o, &b->x, &pa, gu, 2, H, T, eps);                    /* x += norm(o); g, u = W norm(x) */
        op_matmul_geglu(o, &W->down, b->g, L->n_ff, b->u, 0, L->n_ff, b->o, H, T); /* o = down(gelu(g) * u) */
        norm_chain ff = { .x = b->o, .wx = W->post_ffw_norm, .scale = L->out_scale };
        op_norm_matmul(o, &b->x, &ff, NULL, 0, H, T, eps);                  /* x = (x + norm(o)) * scale */
    }
    /* hn = norm(x); logits = head(hn), no soft-capping; next token; next h = post_projection(hn) */
    op_rmsnorm(o, b->x.cur, d->output_norm, b->xo, T, H, eps);
    op_matmul(o, &d->output, b->xo, H, b->logits, hp->n_vocab, T);
    op_argmax(o, b->logits, T, hp->n_vocab, b->ids);
    op_matmul(o, &g->post_proj, b->xo, H, b->ext[XA_H], Hb, T);
    return ops_status(o, err, errlen);
}
