/* model.c — a model through its architecture's row: load, free, forward, and the forward buffers
 * every architecture shares (the row's bufs functions add its own scratch). */
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errf.h"
#include "load.h"

/* the row's load of f into m, the weights on the device when it returns */
static int load_row(model *m, const model_arch *a, const gguf_file *f, cl_runtime *rt, const tensor_maker *make,
                    char *err, size_t errlen)
{
    char why[256];
    m->arch = a;
    snprintf(m->hp.arch, sizeof m->hp.arch, "%s", a->name);
    model_src src = { f, rt, make, NULL };
    /* a file's tensors go through pinned staging and are on the device when loading returns; a CPU
     * device reads host memory itself, where staging is one copy more (PoCL: 0.32 -> 0.54 s load) */
    const gguf_tensor *big;
    uint64_t total = make || rt->is_cpu ? 0 : model_device_bytes(f, &big);
    int r = total && upload_create(&src.up, rt, total, why, sizeof why) ? ERR("model: %s", why) : 0;
    if (!r) r = a->load(m, &src, err, errlen);
    if (!r && src.up && upload_finish(src.up, why, sizeof why)) r = ERR("model: uploading the weights: %s", why);
    upload_destroy(src.up);
    if (r) model_free(m);
    return r;
}

int model_load(model *m, const gguf_file *f, cl_runtime *rt, const tensor_maker *make, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    const model_arch *a;
    char why[256];
    if (model_arch_of(f, &a, why, sizeof why)) return ERR("model: %s", why);
    if (a->drafts_for)
        return ERR("model: '%s' is an MTP drafter of %s models: load it beside one", a->name,
                   a->drafts_for);
    return load_row(m, a, f, rt, make, err, errlen);
}

int model_load_drafter(model *d, const gguf_file *f, const model *target, cl_runtime *rt, char *err,
                       size_t errlen)
{
    memset(d, 0, sizeof *d);
    const model_arch *a;
    char why[256];
    if (model_arch_of(f, &a, why, sizeof why)) return ERR("drafter: %s", why);
    if (!a->drafts_for) return ERR("drafter: a '%s' file is a model, not an MTP drafter", a->name);
    if (strcmp(a->drafts_for, target->arch->name) || !target->arch->kv_export)
        return ERR("drafter: '%s' drafts for %s models, the target is '%s'", a->name, a->drafts_for,
                   target->arch->name);
    if (load_row(d, a, f, rt, NULL, err, errlen)) return -1;
    if (a->pair_check(d, target, err, errlen)) {
        model_free(d);
        return -1;
    }
    return 0;
}

uint64_t model_device_bytes(const gguf_file *f, const gguf_tensor **largest)
{
    const model_arch *a;
    char why[256];
    const char *const *host = model_arch_of(f, &a, why, sizeof why) ? NULL : a->host_tensors;
    uint64_t n = 0;
    *largest = NULL;
    for (size_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        int on_host = 0;
        for (const char *const *h = host; h && *h && !on_host; h++) on_host = gguf_str_eq(t->name, *h);
        if (on_host) continue;
        n += t->nbytes;
        if (!*largest || t->nbytes > (*largest)->nbytes) *largest = t;
    }
    return n;
}

int model_kv_layout_alloc(model_kv_layout *out, uint32_t n_layer, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->n_layer = n_layer;
    out->dims = calloc(n_layer ? n_layer : 1, sizeof *out->dims);
    out->window = calloc(n_layer ? n_layer : 1, sizeof *out->window);
    out->state = calloc(n_layer ? n_layer : 1, sizeof *out->state);
    out->replay = calloc(n_layer ? n_layer : 1, sizeof *out->replay);
    if (out->dims && out->window && out->state && out->replay) return 0;
    model_kv_layout_free(out);
    return ERR("out of memory");
}

int model_kv_layout_read(const gguf_file *f, model_kv_layout *out, char *err, size_t errlen)
{
    const model_arch *a;
    char why[256];
    memset(out, 0, sizeof *out);
    if (model_arch_of(f, &a, why, sizeof why)) return ERR("model: %s", why);
    if (a->kv_layout(f, out, err, errlen)) {
        model_kv_layout_free(out);
        return -1;
    }
    return 0;
}

void model_kv_layout_free(model_kv_layout *l)
{
    free(l->dims);
    free(l->window);
    free(l->state);
    free(l->replay);
    memset(l, 0, sizeof *l);
}

uint32_t model_layer_window(const model *m, uint32_t l) { return m->arch->layer_window(m, l); }

void model_free(model *m)
{
    if (m->arch) m->arch->unload(m);
    if (m->output.buf && m->output.buf != m->tok_embd.buf) mem_release(&m->output.buf);
    mem_release(&m->tok_embd.buf);
    mem_release(&m->output_norm);
    mem_release(&m->freq_local);
    mem_release(&m->freq_global);
    free(m->kv_dims);
    free(m->state_floats);
    free(m->replay_floats);
    memset(m, 0, sizeof *m);
}

int model_forward(const model *m, ops *o, fwd_bufs *b, kv_cache *kv, const fwd_args *a, char *err, size_t errlen)
{
    return m->arch->forward(m, o, b, kv, a, err, errlen);
}

int model_replay(const model *m, ops *o, fwd_bufs *b, kv_cache *kv, int seq, uint32_t n, char *err, size_t errlen)
{
    if (!m->arch->replay) return ERR("model: %s keeps no recurrent state to replay", m->arch->name);
    return m->arch->replay(m, o, b, kv, seq, n, err, errlen);
}

int fwd_bufs_create(fwd_bufs *b, const model *m, cl_runtime *rt, uint32_t max_tok, uint32_t max_out,
                    uint32_t n_ctx, char *err, size_t errlen)
{
    memset(b, 0, sizeof *b);
    const model_hparams *hp = &m->hp;
    b->arch = m->arch;
    b->max_tok = max_tok;
    b->max_out = max_out;
    size_t T = max_tok, qd = (size_t)hp->n_head * hp->head_dim, kd = (size_t)hp->n_kv * hp->head_dim;
    /* the attention split needs room for at least one token over the whole context */
    size_t per_tok = (size_t)hp->n_head * ((n_ctx + OPS_ATTN_CHUNK - 1) / OPS_ATTN_CHUNK) * hp->head_dim;
    /* room for 8 tokens at the smallest chunk (8x the chunks), or up to 64 tokens at the largest */
    b->part_elems = per_tok * (T < 8 ? 8 : T < 64 ? T : 64);
    struct { cl_mem *m; size_t bytes; } all[] = {
        { &b->ids, 4 * T }, { &b->pos, 4 * T }, { &b->hi, 4 * T }, { &b->seq, 4 * T }, { &b->out_rows, 4 * (size_t)max_out },
        { &b->x.cur, 4 * T * hp->n_embd }, { &b->x.spare, 4 * T * hp->n_embd }, { &b->q, 4 * T * qd }, { &b->k, 4 * T * kd },
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
    if (m->arch->bufs_create && m->arch->bufs_create(b, m, rt, err, errlen)) { fwd_bufs_destroy(b); return -1; }
    return 0;
}

void fwd_bufs_destroy(fwd_bufs *b)
{
    if (b->arch && b->arch->bufs_destroy) b->arch->bufs_destroy(b);
    cl_mem *ms[] = { &b->ids, &b->pos, &b->hi, &b->seq, &b->out_rows, &b->x.cur, &b->x.spare, &b->q, &b->k, &b->v, &b->att,
                     &b->o, &b->g, &b->u, &b->xo, &b->logits, &b->argmax, &b->part_acc, &b->part_ml, &b->part_cnt };
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) mem_release(ms[i]);
}
