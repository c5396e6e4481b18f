/* synth.c — see synth.h. Shapes: docs/GEMMA4.md §1 (public configs). */
#include "synth.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errf.h"

typedef synth_spec spec;

static const spec SPECS[] = {
    { "gemma4-e2b", 1536, 35, 8, 1, 1, 5, 0, 6144, 1, 0, 0, 0, 256, 20, 512, 131072 },
    { "gemma4-e4b", 2560, 42, 8, 2, 2, 6, 0, 10240, 0, 0, 0, 0, 256, 18, 512, 131072 },
    { "gemma4-26b-a4b", 2816, 30, 16, 8, 2, 6, 1, 2112, 0, 128, 8, 704, 0, 0, 1024, 262144 },
    { "gemma4-31b", 5376, 60, 32, 16, 4, 6, 1, 21504, 0, 0, 0, 0, 0, 0, 1024, 262144 },
};
#define N_SPECS (sizeof SPECS / sizeof *SPECS)
const char *const synth_models[] = { "gemma4-e2b", "gemma4-e4b", "gemma4-26b-a4b", "gemma4-31b", NULL };

const synth_spec *synth_spec_find(const char *model)
{
    for (size_t i = 0; i < N_SPECS; i++)
        if (!strcmp(model, SPECS[i].name)) return &SPECS[i];
    return NULL;
}

enum { V = 262144, HD_SWA = 256, HD_FULL = 512 };

/* ---- a growable byte buffer -------------------------------------------------------------- */

typedef struct wbuf { uint8_t *p; size_t n, cap; int oom; } wbuf;

static void put(wbuf *b, const void *d, size_t n)
{
    if (b->oom) return;
    if (b->n + n > b->cap) {
        size_t c = b->cap ? b->cap : 4096;
        while (c < b->n + n) c *= 2;
        uint8_t *q = realloc(b->p, c);
        if (!q) { b->oom = 1; return; }
        b->p = q;
        b->cap = c;
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void put_u32(wbuf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(wbuf *b, uint64_t v) { put(b, &v, 8); }
static void put_str(wbuf *b, const char *s) { put_u64(b, strlen(s)); put(b, s, strlen(s)); }

typedef struct kvw { wbuf b; uint64_t n; } kvw;

static void kv_key(kvw *k, const char *key, uint32_t type) { put_str(&k->b, key); put_u32(&k->b, type); k->n++; }
static void kv_u32(kvw *k, const char *key, uint32_t v) { kv_key(k, key, GGUF_VT_U32); put_u32(&k->b, v); }
static void kv_f32(kvw *k, const char *key, float v) { kv_key(k, key, GGUF_VT_F32); put(&k->b, &v, 4); }
static void kv_s(kvw *k, const char *key, const char *v) { kv_key(k, key, GGUF_VT_STRING); put_str(&k->b, v); }
static void kv_arr(kvw *k, const char *key, uint32_t et, const uint32_t *v, uint32_t n)
{
    kv_key(k, key, GGUF_VT_ARRAY);
    put_u32(&k->b, et);
    put_u64(&k->b, n);
    for (uint32_t i = 0; i < n; i++) {
        if (et == GGUF_VT_BOOL) { uint8_t x = (uint8_t)v[i]; put(&k->b, &x, 1); }
        else put_u32(&k->b, v[i]);
    }
}

/* ---- tensors ----------------------------------------------------------------------------- */

typedef struct tdesc {
    char name[64];
    uint32_t type;
    uint64_t ne[3];
    float *host;     /* F32 vector contents, or NULL: made on the device */
    uint64_t nbytes, offset;
} tdesc;

typedef struct tlist { tdesc *t; size_t n, cap; int oom; uint32_t mtype; int q4k; } tlist;

static tdesc *add_t(tlist *l, const char *name, uint32_t type, uint64_t a, uint64_t b, uint64_t c)
{
    if (l->oom) return NULL;
    if (l->n == l->cap) {
        size_t nc = l->cap ? 2 * l->cap : 256;
        tdesc *q = realloc(l->t, nc * sizeof *q);
        if (!q) { l->oom = 1; return NULL; }
        l->t = q;
        l->cap = nc;
    }
    tdesc *t = &l->t[l->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->type = type;
    t->ne[0] = a; t->ne[1] = b; t->ne[2] = c;
    t->nbytes = ggml_row_bytes(type, a) * b * c;
    return t;
}

/* matrix [ne0, ne1, ne2] of the target type, with llama.cpp's fallbacks */
static void mat(tlist *l, const char *name, uint64_t a, uint64_t b, uint64_t c)
{
    uint32_t ty = l->mtype;
    if (l->q4k && a % 256) ty = GGML_TYPE_Q5_0;
    if ((ty == GGML_TYPE_Q5_0 || ty == GGML_TYPE_Q8_0) && a % 32) ty = GGML_TYPE_F16;
    add_t(l, name, ty, a, b, c);
}

/* F32 vector of n copies of v */
static void vec(tlist *l, const char *name, uint64_t n, float v)
{
    tdesc *t = add_t(l, name, GGML_TYPE_F32, n, 1, 1);
    if (!t) return;
    t->host = malloc(n * sizeof(float));
    if (!t->host) { l->oom = 1; return; }
    for (uint64_t i = 0; i < n; i++) t->host[i] = v;
}

int synth_build(const char *model, const char *type, int layers, void **buf, size_t *size, uint64_t *virt_size,
                char *name, char *err, size_t errlen)
{
    *buf = NULL;
    const spec *s = synth_spec_find(model);
    if (!s) return ERR("unknown synthetic model '%s' (gemma4-26b-a4b, gemma4-31b, gemma4-e4b, gemma4-e2b)", model);
    tlist tl = { 0 };
    uint32_t ftype;
    if (!strcmp(type, "q4_k")) { tl.mtype = GGML_TYPE_Q4_K; tl.q4k = 1; ftype = 14; }
    else if (!strcmp(type, "q8_0")) { tl.mtype = GGML_TYPE_Q8_0; ftype = 7; }
    else if (!strcmp(type, "bf16")) { tl.mtype = GGML_TYPE_BF16; ftype = 32; }
    else return ERR("unknown synthetic weight type '%s' (q4_k, q8_0, bf16)", type);
    uint32_t L = layers > 0 ? (uint32_t)layers : s->L;
    if (L > s->L) return ERR("--layers %u exceeds the %u layers of %s", L, s->L, s->name);
    uint32_t swa[1024], nkv[1024], ff[1024];
    for (uint32_t l = 0; l < L; l++) swa[l] = (l + 1) % s->full_every != 0 && l != L - 1;
    /* KV sharing: the real fraction of layers, shrunk until every shared layer has a donor */
    uint32_t shared = L == s->L ? s->shared : (uint32_t)((uint64_t)L * s->shared / s->L);
    for (; shared > 0; shared--) {
        uint32_t fs = L - shared;
        int ok = 1;
        for (uint32_t l = fs; l < L && ok; l++) {
            int found = 0;
            for (uint32_t j = 0; j < fs && !found; j++) found = swa[j] == swa[l];
            ok = found;
        }
        if (ok) break;
    }
    uint32_t first_shared = L - shared;
    for (uint32_t l = 0; l < L; l++) {
        nkv[l] = swa[l] ? s->nkv_swa : s->nkv_full;
        ff[l] = s->wide_shared && l >= first_shared ? 2 * s->ff : s->ff;
    }
    if (layers > 0 && (uint32_t)layers != s->L)
        snprintf(name, 96, "synthetic %s %s (%u layers)", s->name, type, L);
    else
        snprintf(name, 96, "synthetic %s %s", s->name, type);

    kvw kv = { 0 };
    kv_s(&kv, "general.architecture", "gemma4");
    kv_s(&kv, "general.name", name);
    kv_u32(&kv, "general.file_type", ftype);
    kv_u32(&kv, "general.quantization_version", 2);
    kv_u32(&kv, "gemma4.block_count", L);
    kv_u32(&kv, "gemma4.context_length", s->ctx);
    kv_u32(&kv, "gemma4.embedding_length", s->H);
    if (s->wide_shared && shared) kv_arr(&kv, "gemma4.feed_forward_length", GGUF_VT_I32, ff, L);
    else kv_u32(&kv, "gemma4.feed_forward_length", s->ff);
    kv_u32(&kv, "gemma4.attention.head_count", s->nh);
    if (s->nkv_swa != s->nkv_full) kv_arr(&kv, "gemma4.attention.head_count_kv", GGUF_VT_I32, nkv, L);
    else kv_u32(&kv, "gemma4.attention.head_count_kv", s->nkv_swa);
    kv_u32(&kv, "gemma4.attention.key_length", HD_FULL);
    kv_u32(&kv, "gemma4.attention.value_length", HD_FULL);
    kv_u32(&kv, "gemma4.attention.key_length_swa", HD_SWA);
    kv_u32(&kv, "gemma4.attention.value_length_swa", HD_SWA);
    kv_u32(&kv, "gemma4.attention.sliding_window", s->window);
    kv_arr(&kv, "gemma4.attention.sliding_window_pattern", GGUF_VT_BOOL, swa, L);
    kv_u32(&kv, "gemma4.attention.shared_kv_layers", shared);
    kv_f32(&kv, "gemma4.attention.layer_norm_rms_epsilon", 1e-6f);
    kv_f32(&kv, "gemma4.rope.freq_base", 1e6f);
    kv_f32(&kv, "gemma4.rope.freq_base_swa", 1e4f);
    kv_u32(&kv, "gemma4.rope.dimension_count", HD_FULL);
    kv_u32(&kv, "gemma4.rope.dimension_count_swa", HD_SWA);
    kv_f32(&kv, "gemma4.final_logit_softcapping", 30.0f);
    kv_u32(&kv, "gemma4.embedding_length_per_layer_input", s->P);
    if (s->n_exp) {
        kv_u32(&kv, "gemma4.expert_count", s->n_exp);
        kv_u32(&kv, "gemma4.expert_used_count", s->n_used);
        kv_u32(&kv, "gemma4.expert_feed_forward_length", s->ff_exp);
    }

    uint64_t H = s->H;
    mat(&tl, "token_embd.weight", H, V, 1);
    vec(&tl, "output_norm.weight", H, 1.0f);
    tdesc *rf = add_t(&tl, "rope_freqs.weight", GGML_TYPE_F32, HD_FULL / 2, 1, 1);
    if (rf && (rf->host = malloc(HD_FULL / 2 * sizeof(float))))
        for (int i = 0; i < HD_FULL / 2; i++) rf->host[i] = i < HD_FULL / 8 ? 1.0f : 1e30f; /* partial 0.25 */
    else tl.oom = 1;
    if (s->P) {
        mat(&tl, "per_layer_token_embd.weight", (uint64_t)L * s->P, V, 1);
        mat(&tl, "per_layer_model_proj.weight", H, (uint64_t)L * s->P, 1);
        vec(&tl, "per_layer_proj_norm.weight", s->P, 1.0f);
    }
    for (uint32_t l = 0; l < L; l++) {
        char n[64];
        uint64_t hd = swa[l] ? HD_SWA : HD_FULL, qd = s->nh * hd, kd = nkv[l] * hd;
#define NM(x) (snprintf(n, sizeof n, "blk.%u." x, l), n)
        vec(&tl, NM("attn_norm.weight"), H, 1.0f);
        mat(&tl, NM("attn_q.weight"), H, qd, 1);
        vec(&tl, NM("attn_q_norm.weight"), hd, 1.0f);
        if (l < first_shared) {
            mat(&tl, NM("attn_k.weight"), H, kd, 1);
            if (!(s->k_eq_v && !swa[l])) mat(&tl, NM("attn_v.weight"), H, kd, 1);
            vec(&tl, NM("attn_k_norm.weight"), hd, 1.0f);
        }
        mat(&tl, NM("attn_output.weight"), qd, H, 1);
        vec(&tl, NM("post_attention_norm.weight"), H, 1.0f);
        vec(&tl, NM("ffn_norm.weight"), H, 1.0f);
        mat(&tl, NM("ffn_gate.weight"), H, ff[l], 1);
        mat(&tl, NM("ffn_up.weight"), H, ff[l], 1);
        mat(&tl, NM("ffn_down.weight"), ff[l], H, 1);
        vec(&tl, NM("post_ffw_norm.weight"), H, 1.0f);
        if (s->n_exp) {
            add_t(&tl, NM("ffn_gate_inp.weight"), GGML_TYPE_F32, H, s->n_exp, 1); /* router: F32, random */
            vec(&tl, NM("ffn_gate_inp.scale"), H, 1.0f);
            vec(&tl, NM("ffn_down_exps.scale"), s->n_exp, 1.0f);
            mat(&tl, NM("ffn_gate_up_exps.weight"), H, 2 * s->ff_exp, s->n_exp);
            mat(&tl, NM("ffn_down_exps.weight"), s->ff_exp, H, s->n_exp);
            vec(&tl, NM("pre_ffw_norm_2.weight"), H, 1.0f);
            vec(&tl, NM("post_ffw_norm_1.weight"), H, 1.0f);
            vec(&tl, NM("post_ffw_norm_2.weight"), H, 1.0f);
        }
        if (s->P) {
            mat(&tl, NM("inp_gate.weight"), H, s->P, 1);
            mat(&tl, NM("proj.weight"), s->P, H, 1);
            vec(&tl, NM("post_norm.weight"), H, 1.0f);
        }
        /* real checkpoints carry a scalar below 1 here; 0.5 keeps the op in the forward */
        vec(&tl, NM("layer_output_scale.weight"), 1, 0.5f);
#undef NM
    }

    /* layout: host vectors first (inside the buffer), then the device-made matrices */
    uint64_t off = 0, in_buf = 0;
    for (int pass = 0; pass < 2 && !tl.oom; pass++)
        for (size_t i = 0; i < tl.n; i++) {
            tdesc *t = &tl.t[i];
            if ((t->host != NULL) != (pass == 0)) continue;
            t->offset = off;
            off += (t->nbytes + 31) / 32 * 32;
            if (pass == 0) in_buf = off;
        }
    wbuf w = { 0 };
    put(&w, "GGUF", 4);
    put_u32(&w, 3);
    put_u64(&w, tl.n);
    put_u64(&w, kv.n);
    put(&w, kv.b.p, kv.b.n);
    for (size_t i = 0; i < tl.n && !tl.oom; i++) {
        const tdesc *t = &tl.t[i];
        uint32_t nd = t->ne[2] > 1 ? 3 : t->ne[1] > 1 ? 2 : 1;
        put_str(&w, t->name);
        put_u32(&w, nd);
        for (uint32_t d = 0; d < nd; d++) put_u64(&w, t->ne[d]);
        put_u32(&w, t->type);
        put_u64(&w, t->offset);
    }
    static const uint8_t zero[32];
    put(&w, zero, (32 - w.n % 32) % 32);
    size_t data_off = w.n;
    for (size_t i = 0; i < tl.n && !tl.oom; i++) {
        const tdesc *t = &tl.t[i];
        if (!t->host) continue;
        put(&w, zero, data_off + t->offset - w.n);
        put(&w, t->host, t->nbytes);
    }
    put(&w, zero, data_off + in_buf - w.n);
    int oom = tl.oom || kv.b.oom || w.oom;
    for (size_t i = 0; i < tl.n; i++) free(tl.t[i].host);
    free(tl.t);
    free(kv.b.p);
    if (oom) { free(w.p); return ERR("out of memory building the synthetic model"); }
    *buf = w.p;
    *size = w.n;
    *virt_size = data_off + off;
    return 0;
}

/* ---- the same bytes on the host: synth.cl's byte functions compiled here too --------------- */

static uint32_t f_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
#define SYN_FN static
#define uint uint32_t
#define ulong uint64_t
#define as_uint f_bits
#include "synth.cl"
#undef SYN_FN
#undef uint
#undef ulong
#undef as_uint

static int fill_type_ok(uint32_t ty)
{
    return ty == GGML_TYPE_F32 || ty == GGML_TYPE_F16 || ty == GGML_TYPE_BF16 || ty == GGML_TYPE_Q8_0 ||
           ty == GGML_TYPE_Q5_0 || ty == GGML_TYPE_Q4_K;
}

static uint32_t fill_seed(const gguf_tensor *t)
{
    uint32_t seed = 2166136261u; /* FNV-1a of the name */
    for (uint64_t i = 0; i < t->name.len; i++) seed = (seed ^ (uint8_t)t->name.ptr[i]) * 16777619u;
    return seed;
}

int synth_bytes(const gguf_tensor *t, uint64_t off, size_t n, uint8_t *dst, char *err, size_t errlen)
{
    if (!fill_type_ok(t->type)) return ERR("synthetic fill: type %s not supported", ggml_type_name(t->type));
    if (off > t->nbytes || n > t->nbytes - off) return ERR("synthetic fill: bytes past the end of the tensor");
    uint32_t seed = fill_seed(t);
    float amp = sqrtf(3.0f / (float)t->ne[0]);
    for (size_t i = 0; i < n; i++) dst[i] = (uint8_t)syn_byte(off + i, t->type, amp, seed);
    return 0;
}

int synth_fill(cl_runtime *rt, cl_mem m, const gguf_tensor *t, char *err, size_t errlen)
{
    uint32_t ty = t->type;
    if (!fill_type_ok(ty)) return ERR("synthetic fill: type %s not supported", ggml_type_name(ty));
    uint32_t seed = fill_seed(t);
    float amp = sqrtf(3.0f / (float)t->ne[0]);
    cl_ulong nbytes = t->nbytes;
    cl_kernel k = rt_synth_kernel(rt, "synth_fill", err, errlen);
    if (!k) return -1;
    cl_int e = clSetKernelArg(k, 0, sizeof m, &m);
    if (!e) e = clSetKernelArg(k, 2, sizeof nbytes, &nbytes);
    if (!e) e = clSetKernelArg(k, 3, sizeof ty, &ty);
    if (!e) e = clSetKernelArg(k, 4, sizeof amp, &amp);
    if (!e) e = clSetKernelArg(k, 5, sizeof seed, &seed);
    /* launches of at most 2^26 words (256 MiB) */
    cl_ulong words = (nbytes + 3) / 4, chunk = 1ull << 26;
    for (cl_ulong w0 = 0; !e && w0 < words; w0 += chunk) {
        size_t n = (size_t)(words - w0 < chunk ? words - w0 : chunk);
        size_t gws = (n + 255) / 256 * 256;
        e = clSetKernelArg(k, 1, sizeof w0, &w0);
        if (!e) e = clEnqueueNDRangeKernel(rt->q, k, 1, NULL, &gws, NULL, 0, NULL, NULL);
    }
    clReleaseKernel(k);
    if (e) return ERR("synthetic fill of '%.*s': %s", (int)t->name.len, t->name.ptr, rt_errstr(e));
    return 0;
}
