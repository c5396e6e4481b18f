/* load.c — see load.h */
#include "load.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errf.h"

/* ---- metadata ------------------------------------------------------------------------------- */

int key_int(const gguf_file *f, const char *arch, const char *name, int64_t *out, int required, char *err,
            size_t errlen)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, name);
    int64_t v;
    int r = gguf_get_int(f, key, &v);
    if (r == -1 && !required) return 0;
    if (r != 0) return ERR("model: %s key '%s'", r == -1 ? "missing" : "wrong type for", key);
    if (v < 0 || v > 0x7fffffff) return ERR("model: key '%s' out of range (%lld)", key, (long long)v);
    *out = v;
    return 0;
}

int key_u32(const gguf_file *f, const char *arch, const char *name, uint32_t *out, int required, char *err,
            size_t errlen)
{
    int64_t v = *out;
    if (key_int(f, arch, name, &v, required, err, errlen)) return -1;
    *out = (uint32_t)v;
    return 0;
}

int key_f32(const gguf_file *f, const char *arch, const char *name, float *out, char *err, size_t errlen)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, name);
    double v;
    int r = gguf_get_float(f, key, &v);
    if (r == -1) return 0;
    if (r != 0) return ERR("model: wrong type for key '%s'", key);
    *out = (float)v;
    return 0;
}

int key_per_layer(const gguf_file *f, const char *arch, const char *name, uint32_t n_layer, uint32_t *out,
                  int required, int64_t def, char *err, size_t errlen)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, name);
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) {
        if (required) return ERR("model: missing key '%s'", key);
        for (uint32_t l = 0; l < n_layer; l++) out[l] = (uint32_t)def;
        return 0;
    }
    if (kv->type != GGUF_VT_ARRAY) {
        int64_t v;
        if (key_int(f, arch, name, &v, 1, err, errlen)) return -1;
        for (uint32_t l = 0; l < n_layer; l++) out[l] = (uint32_t)v;
        return 0;
    }
    uint32_t et;
    uint64_t n;
    const void *data;
    if (gguf_get_arr(f, key, &et, &n, &data) != 0) return ERR("model: key '%s' is not a numeric array", key);
    if (n != n_layer) return ERR("model: key '%s' has %llu entries, expected %u (one per layer)", key,
                                 (unsigned long long)n, n_layer);
    for (uint32_t l = 0; l < n_layer; l++) {
        const uint8_t *p = data;
        int64_t v;
        switch (et) {
        case GGUF_VT_U8: case GGUF_VT_BOOL: v = p[l]; break;
        case GGUF_VT_I8: v = (int8_t)p[l]; break;
        case GGUF_VT_U16: { uint16_t x; memcpy(&x, p + 2 * l, 2); v = x; break; }
        case GGUF_VT_I16: { int16_t x; memcpy(&x, p + 2 * l, 2); v = x; break; }
        case GGUF_VT_U32: { uint32_t x; memcpy(&x, p + 4 * l, 4); v = x; break; }
        case GGUF_VT_I32: { int32_t x; memcpy(&x, p + 4 * l, 4); v = x; break; }
        case GGUF_VT_U64: { uint64_t x; memcpy(&x, p + 8 * l, 8); v = x > 0x7fffffff ? -1 : (int64_t)x; break; }
        case GGUF_VT_I64: { int64_t x; memcpy(&x, p + 8 * l, 8); v = x; break; }
        default: return ERR("model: key '%s' has a non-integer element type", key);
        }
        if (v < 0 || v > 0x7fffffff) return ERR("model: key '%s' entry %u out of range (%lld)", key, l, (long long)v);
        out[l] = (uint32_t)v;
    }
    return 0;
}

/* ---- tensors -------------------------------------------------------------------------------- */

static const char *shape_str(char *buf, size_t n, uint64_t a, uint64_t b, uint64_t c)
{
    if (c > 1)
        snprintf(buf, n, "[%llu, %llu, %llu]", (unsigned long long)a, (unsigned long long)b, (unsigned long long)c);
    else if (b > 1) snprintf(buf, n, "[%llu, %llu]", (unsigned long long)a, (unsigned long long)b);
    else snprintf(buf, n, "[%llu]", (unsigned long long)a);
    return buf;
}

int tensor_find(const gguf_file *f, const char *name, uint64_t ne0, uint64_t ne1, uint64_t ne2, int vec,
                const gguf_tensor **out, char *err, size_t errlen)
{
    char want[96], got[96];
    const gguf_tensor *t = gguf_find_tensor(f, name);
    if (!t)
        return ERR("model: missing tensor '%s' (expected shape %s)", name, shape_str(want, sizeof want, ne0, ne1, ne2));
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != ne2 || t->ne[3] != 1)
        return ERR("model: tensor '%s' has shape %s, expected %s", name,
                   shape_str(got, sizeof got, t->ne[0], t->ne[1], t->ne[2] * t->ne[3]),
                   shape_str(want, sizeof want, ne0, ne1, ne2));
    if (vec && t->type != GGML_TYPE_F32)
        return ERR("model: tensor '%s' has type %s, expected F32", name, ggml_type_name(t->type));
    if (!vec) {
        if (!ops_type_supported(t->type))
            return ERR("model: tensor '%s' has unsupported type %s", name, ggml_type_name(t->type));
        if (ne0 % 32 && t->type != GGML_TYPE_F32 && t->type != GGML_TYPE_F16)
            return ERR("model: tensor '%s' (%s) row length %llu is not a multiple of 32", name,
                       ggml_type_name(t->type), (unsigned long long)ne0);
    }
    *out = t;
    return 0;
}

int tensor_upload(const model_src *src, const gguf_tensor *t, const char *name, cl_mem *m, uint64_t *bytes,
                  char *err, size_t errlen)
{
    if (!t->data && !(src->make && src->make->fill)) return ERR("model: tensor '%s' has no data in the file", name);
    int staged = t->data && src->up;
    char why[256] = "";
    *m = rt_alloc(src->rt, t->nbytes, staged ? NULL : t->data, why, sizeof why);
    if (*m && !t->data && src->make->fill(src->rt, *m, t, err, errlen)) return -1;
    /* a failed put keeps its error in the uploader, which finishing reports */
    if (*m && staged && upload_put(src->up, *m, 0, t->data, t->nbytes)) upload_finish(src->up, why, sizeof why);
    if (!*m || why[0]) return ERR("model: uploading '%s' (%.1f MiB): %s", name, t->nbytes / 1048576.0, why);
    *bytes += t->nbytes;
    return 0;
}

int tensor_host(const gguf_tensor *t, const char *name, char *err, size_t errlen)
{
    return t->data ? 0 : ERR("model: tensor '%s' has no data in the file", name);
}

int load_mat(const model_src *src, const char *name, uint64_t ne0, uint64_t ne1, uint64_t ne2, weight *w,
             uint64_t *bytes, char *err, size_t errlen)
{
    const gguf_tensor *t;
    if (tensor_find(src->f, name, ne0, ne1, ne2, 0, &t, err, errlen) ||
        tensor_upload(src, t, name, &w->buf, bytes, err, errlen))
        return -1;
    w->type = t->type;
    w->cols = (uint32_t)ne0;
    w->rows = (uint32_t)(ne1 * ne2);
    w->row_bytes = (uint32_t)ggml_row_bytes(t->type, ne0);
    return 0;
}

int weight_pad_cols(cl_runtime *rt, weight *w, uint32_t mult, uint64_t *bytes, char *err, size_t errlen)
{
    if (!mult || w->cols % mult == 0) return 0;
    if (w->type != GGML_TYPE_F16 && w->type != GGML_TYPE_F32)
        return ERR("model: padding rows of %u values of type %s", w->cols, ggml_type_name(w->type));
    uint32_t cols = (w->cols + mult - 1) / mult * mult;
    size_t rb = ggml_row_bytes(w->type, cols), total = rb * w->rows;
    char why[256];
    cl_mem m = rt_alloc(rt, total, NULL, why, sizeof why);
    if (!m) return ERR("model: padding a %u x %u weight: %s", w->rows, w->cols, why);
    cl_uchar zero = 0;
    size_t so[3] = { 0, 0, 0 }, region[3] = { w->row_bytes, w->rows, 1 };
    cl_int e = clEnqueueFillBuffer(rt->q, m, &zero, 1, 0, total, 0, NULL, NULL);
    if (!e) e = clEnqueueCopyBufferRect(rt->q, w->buf, m, so, so, region, w->row_bytes, 0, rb, 0, 0, NULL, NULL);
    if (!e) e = clFinish(rt->q);
    if (e) {
        clReleaseMemObject(m);
        return ERR("model: padding a %u x %u weight: %s", w->rows, w->cols, rt_errstr(e));
    }
    *bytes += total - (size_t)w->row_bytes * w->rows;
    clReleaseMemObject(w->buf);
    w->buf = m;
    w->cols = cols;
    w->row_bytes = (uint32_t)rb;
    return 0;
}

int load_vec(const model_src *src, const char *name, uint64_t n, cl_mem *m, uint64_t *bytes, char *err,
             size_t errlen)
{
    const gguf_tensor *t;
    return tensor_find(src->f, name, n, 1, 1, 1, &t, err, errlen) ||
           tensor_upload(src, t, name, m, bytes, err, errlen) ? -1 : 0;
}

int load_g4_block(const model_src *src, uint32_t l, uint32_t H, uint32_t qd, uint32_t hd, uint32_t n_ff,
                  layer_weights *W, uint64_t *B, char *err, size_t errlen)
{
    char n[96];
#define M(field, nm, a, b) (snprintf(n, sizeof n, "blk.%u." nm, l), load_mat(src, n, a, b, 1, field, B, err, errlen))
#define V(field, nm, a) (snprintf(n, sizeof n, "blk.%u." nm, l), load_vec(src, n, a, field, B, err, errlen))
    int rc = M(&W->q, "attn_q.weight", H, qd) || M(&W->o, "attn_output.weight", qd, H) ||
             M(&W->gate, "ffn_gate.weight", H, n_ff) || M(&W->up, "ffn_up.weight", H, n_ff) ||
             M(&W->down, "ffn_down.weight", n_ff, H) || V(&W->attn_norm, "attn_norm.weight", H) ||
             V(&W->q_norm, "attn_q_norm.weight", hd) || V(&W->post_attn_norm, "post_attention_norm.weight", H) ||
             V(&W->ffn_norm, "ffn_norm.weight", H) || V(&W->post_ffw_norm, "post_ffw_norm.weight", H);
#undef M
#undef V
    return rc ? -1 : 0;
}

int load_layer_scalar(const model_src *src, uint32_t l, float *out, char *err, size_t errlen)
{
    char n[96];
    const gguf_tensor *t;
    *out = 1.0f;
    snprintf(n, sizeof n, "blk.%u.layer_output_scale.weight", l);
    if (!gguf_find_tensor(src->f, n)) return 0;
    if (tensor_find(src->f, n, 1, 1, 1, 1, &t, err, errlen) || tensor_host(t, n, err, errlen)) return -1;
    memcpy(out, t->data, 4);
    return 0;
}

cl_mem rope_freqs(cl_runtime *rt, uint32_t rot, double base, double scale, const float *div, char *err,
                  size_t errlen)
{
    float fr[1024];
    uint32_t n = rot / 2 ? rot / 2 : 1;
    for (uint32_t i = 0; i < n && i < 1024; i++) {
        double v = scale * pow(base, -2.0 * i / rot);
        if (div) v /= div[i];
        fr[i] = (float)v;
    }
    return rt_alloc(rt, sizeof(float) * n, fr, err, errlen);
}

void mem_release(cl_mem *m)
{
    if (*m) clReleaseMemObject(*m);
    *m = NULL;
}

void layer_weights_release(layer_weights *W)
{
    cl_mem *ms[] = { &W->q.buf, &W->k.buf, &W->v.buf, &W->o.buf, &W->gate.buf, &W->up.buf, &W->down.buf,
                     &W->attn_norm, &W->q_norm, &W->k_norm, &W->post_attn_norm, &W->ffn_norm, &W->post_ffw_norm };
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) mem_release(ms[i]);
}

/* ---- forward -------------------------------------------------------------------------------- */

int fwd_logits(const model *m, ops *o, fwd_bufs *b, const fwd_args *a)
{
    const model_hparams *hp = &m->hp;
    uint32_t d = hp->n_embd;
    if (a->n_out == 0) return 0;
    if (op_gather_rows(o, b->x.cur, b->out_rows, b->xo, a->n_out, d) ||
        op_rmsnorm(o, b->xo, m->output_norm, b->xo, a->n_out, d, hp->eps) ||
        op_matmul(o, &m->output, b->xo, d, b->logits, hp->n_vocab, a->n_out))
        return -1;
    if (hp->final_softcap > 0 && op_softcap(o, b->logits, hp->final_softcap, a->n_out * hp->n_vocab))
        return -1;
    return 0;
}
