/* test_kernels_rows.c — the kernels that are not weight products, through the ops.h
 * launchers, against an independent plain-C float64 reference (kernels_fixture.h): op_rmsnorm,
 * the residual chains res += norm(x)·w [; y = norm(res)·w2] (norm_fuse; rows of other than a multiple of 4 values are
 * refused), norm_chain (norm_fuse), norm_rope (Q in place, K into the paged cache, partial
 * rotation), qkv_rope (and its warp-per-row form), geglu, gather_rows, softcap, add_rows,
 * scale_rows, argmax_part + argmax_final. Attention: test_kernels_attn.c. */
#include "kernels_fixture.h"
#include <float.h>

/* ------------------------------------------------------------------ RMSNorm */

/* the residual forms the forwards run as norm chains: res += norm(x) * w1 [; y = norm(res) * w2] */
static int op_rmsnorm_add(ops *o, cl_mem x, cl_mem w, cl_mem res, uint32_t rows, uint32_t n, float eps)
{
    norm_chain c = { .x = x, .wx = w, .res = res, .scale = 1.0f };
    return op_norm_chain(o, &c, rows, n, eps);
}

static int op_rmsnorm_add_norm(ops *o, cl_mem x, cl_mem w1, cl_mem res, cl_mem w2, cl_mem y, uint32_t rows,
                               uint32_t n, float eps)
{
    norm_chain c = { .x = x, .wx = w1, .res = res, .scale = 1.0f, .out = { { w2, y } }, .nout = 1 };
    return op_norm_chain(o, &c, rows, n, eps);
}

static void rmsnorm_ref(const float *x, const float *w, double *y, uint32_t rows, uint32_t n, double eps)
{
    for (uint32_t r = 0; r < rows; r++) {
        double ss = 0;
        for (uint32_t i = 0; i < n; i++) ss += (double)x[(size_t)r * n + i] * x[(size_t)r * n + i];
        double inv = 1.0 / sqrt(ss / n + eps);
        for (uint32_t i = 0; i < n; i++) y[(size_t)r * n + i] = x[(size_t)r * n + i] * inv * w[i];
    }
}


static void rmsnorm_case(uint32_t rows, uint32_t n)
{
    float eps = 1e-6f;
    size_t m = (size_t)rows * n, tot = m + PAD;
    float *x = malloc(m * 4), *w = malloc(n * 4), *y = malloc(tot * 4);
    double *ref = malloc(m * 8);
    fill_rows(x, rows, n);
    for (uint32_t i = 0; i < n; i++) w[i] = 1.0f + 0.5f * nrand();
    rmsnorm_ref(x, w, ref, rows, n, eps);
    cl_mem X = dbuf(tot * 4, NULL), W = dbuf(n * 4, w), Y = dbuf(tot * 4, NULL);
    char what[64];
    snprintf(what, sizeof what, "rmsnorm %u x %u", rows, n);
    /* out of place */
    poison(X, tot * 4);
    dwrite(X, x, m * 4);
    poison(Y, tot * 4);
    OPOK(op_rmsnorm(&O, X, W, Y, rows, n, eps));
    dread(Y, y, tot * 4);
    check_close(what, y, ref, m, TOL_RED);
    check_untouched(what, y, m, tot);
    /* in place (y == x), as the engine does for the final norm */
    OPOK(op_rmsnorm(&O, X, W, X, rows, n, eps));
    dread(X, y, tot * 4);
    snprintf(what, sizeof what, "rmsnorm in place %u x %u", rows, n);
    check_close(what, y, ref, m, TOL_RED);
    check_untouched(what, y, m, tot);
    free(x); free(w); free(y); free(ref);
    clReleaseMemObject(X); clReleaseMemObject(W); clReleaseMemObject(Y);
}

/* rows of n values that the norm kernels (float4 rows) do not take: refused with an error */
static void rmsnorm_refused(uint32_t n)
{
    cl_mem X = dbuf((size_t)2 * n * 4, NULL), W = dbuf((size_t)n * 4, NULL);
    char what[64];
    snprintf(what, sizeof what, "rmsnorm ops on rows of %u values", n);
    err[0] = 0;
    CHECK(OPRC(op_rmsnorm(&O, X, W, X, 2, n, 1e-6f)) == -1 && strstr(err, "multiples of 4"),
          "%s: op_rmsnorm not refused (%s)", what, err);
    CHECK(OPRC(op_rmsnorm_add(&O, X, W, X, 2, n, 1e-6f)) == -1, "%s: op_rmsnorm_add not refused", what);
    CHECK(OPRC(op_rmsnorm_add_norm(&O, X, W, X, W, X, 2, n, 1e-6f)) == -1,
          "%s: op_rmsnorm_add_norm not refused", what);
    /* the first failure sticks: a later op that would run does nothing until ops_clear */
    ops_clear(&O);
    op_rmsnorm(&O, X, W, X, 2, n, 1e-6f);
    int later = op_scale(&O, X, 1.0f, 2 * n);
    CHECK(later == -1 && ops_status(&O, err, sizeof err) == -1 && strstr(err, "multiples of 4"),
          "%s: the op after a failure ran (%d) or the first error was lost (%s)", what, later, err);
    ops_clear(&O);
    CHECK(op_scale(&O, X, 1.0f, 2 * n) == 0 && ops_status(&O, err, sizeof err) == 0, "%s: ops_clear left an error",
          what);
    clReleaseMemObject(X); clReleaseMemObject(W);
}

static void test_rmsnorm(void)
{
    reseed(__func__);
    rmsnorm_case(3 + irand(5), 4 * (160 + irand(50)) + 4); /* not a multiple of any work-group */
    rmsnorm_case(2, 8);                                    /* fewer values than work-items */
    rmsnorm_case(1 + irand(4), 4 * (160 + irand(500)));
    rmsnorm_refused(640 + 1 + 2 * irand(200));
    rmsnorm_refused(7);
    rmsnorm_refused(642);
}

static void test_rmsnorm_add(void)
{
    reseed(__func__);
    uint32_t rows = 3 + irand(5), n = 1152 - 4 - 4 * irand(100);
    float eps = 1e-6f;
    size_t m = (size_t)rows * n, tot = m + PAD;
    float *x = malloc(m * 4), *w = malloc(n * 4), *res = malloc(m * 4), *y = malloc(tot * 4);
    double *ref = malloc(m * 8);
    fill_rows(x, rows, n);
    for (size_t i = 0; i < m; i++) res[i] = nrand();
    for (uint32_t i = 0; i < n; i++) w[i] = 1.0f + 0.5f * nrand();
    rmsnorm_ref(x, w, ref, rows, n, eps);
    for (size_t i = 0; i < m; i++) ref[i] += res[i];
    cl_mem X = dbuf(m * 4, x), W = dbuf(n * 4, w), R = dbuf(tot * 4, NULL);
    poison(R, tot * 4);
    dwrite(R, res, m * 4);
    OPOK(op_rmsnorm_add(&O, X, W, R, rows, n, eps));
    dread(R, y, tot * 4);
    char what[64];
    snprintf(what, sizeof what, "rmsnorm_add %u x %u", rows, n);
    check_close(what, y, ref, m, TOL_RED);
    check_untouched(what, y, m, tot);
    free(x); free(w); free(res); free(y); free(ref);
    clReleaseMemObject(X); clReleaseMemObject(W); clReleaseMemObject(R);
}

static void test_rmsnorm_add_norm(void)
{
    reseed(__func__);
    uint32_t rows = 3 + irand(5), n = 1152 - 4 - 4 * irand(100);
    float eps = 1e-6f;
    size_t m = (size_t)rows * n, tot = m + PAD;
    float *x = malloc(m * 4), *w1 = malloc(n * 4), *w2 = malloc(n * 4), *res = malloc(m * 4), *got = malloc(tot * 4);
    double *ref_res = malloc(m * 8), *ref_y = malloc(m * 8);
    float *res_f = malloc(m * 4);
    fill_rows(x, rows, n);
    for (size_t i = 0; i < m; i++) res[i] = nrand() * 3;
    for (uint32_t i = 0; i < n; i++) { w1[i] = 1.0f + 0.5f * nrand(); w2[i] = 1.0f + 0.5f * nrand(); }
    rmsnorm_ref(x, w1, ref_res, rows, n, eps);
    for (size_t i = 0; i < m; i++) { ref_res[i] += res[i]; res_f[i] = (float)ref_res[i]; }
    /* the second norm of the float64 residual (rounded to float, as it is stored) */
    rmsnorm_ref(res_f, w2, ref_y, rows, n, eps);
    cl_mem X = dbuf(m * 4, x), W1 = dbuf(n * 4, w1), W2 = dbuf(n * 4, w2), R = dbuf(tot * 4, NULL),
           Y = dbuf(tot * 4, NULL);
    poison(R, tot * 4);
    dwrite(R, res, m * 4);
    poison(Y, tot * 4);
    OPOK(op_rmsnorm_add_norm(&O, X, W1, R, W2, Y, rows, n, eps));
    char what[80];
    dread(R, got, tot * 4);
    snprintf(what, sizeof what, "rmsnorm_add_norm %u x %u: residual", rows, n);
    check_close(what, got, ref_res, m, TOL_RED);
    check_untouched(what, got, m, tot);
    dread(Y, got, tot * 4);
    snprintf(what, sizeof what, "rmsnorm_add_norm %u x %u: normed output", rows, n);
    check_close(what, got, ref_y, m, TOL_RED);
    check_untouched(what, got, m, tot);
    free(x); free(w1); free(w2); free(res); free(got); free(ref_res); free(ref_y); free(res_f);
    clReleaseMemObject(X); clReleaseMemObject(W1); clReleaseMemObject(W2); clReleaseMemObject(R);
    clReleaseMemObject(Y);
}

/* One op_norm_chain shape against float64: t = norm(x)·wx [+ norm(x2)·wx2] (or x when raw);
 * t = norm(t)·wt (norm_t); r = (res + t)·scale stored in res (with_res) else r = t; y_j = norm(r)·w_j.
 * in_place: y_0 is x itself (raw chains only). */
static void norm_chain_case(uint32_t rows, uint32_t n, int raw, int with_x2, int norm_t, int with_res, int nout,
                            int in_place)
{
    float eps = 1e-6f, scale = with_res ? 0.5f + (float)urand() : 1.0f;
    size_t m = (size_t)rows * n, tot = m + PAD;
    float *x = malloc(m * 4), *x2 = malloc(m * 4), *res = malloc(m * 4), *w = malloc(6 * (size_t)n * 4);
    float *got = malloc(tot * 4), *r_f = malloc(m * 4);
    double *t = malloc(m * 8), *tmp = malloc(m * 8), *ref = malloc(m * 8);
    fill_rows(x, rows, n);
    fill_rows(x2, rows, n);
    for (size_t i = 0; i < m; i++) res[i] = nrand() * 3;
    for (size_t i = 0; i < 6 * (size_t)n; i++) w[i] = 1.0f + 0.5f * nrand();
    const float *wx = w, *wx2 = w + n, *wt = w + 2 * (size_t)n, *wy = w + 3 * (size_t)n;
    /* float64 reference of t, then r (rounded to float where the kernel stores it) */
    if (raw) {
        for (size_t i = 0; i < m; i++) t[i] = x[i];
    } else {
        rmsnorm_ref(x, wx, t, rows, n, eps);
        if (with_x2) {
            rmsnorm_ref(x2, wx2, tmp, rows, n, eps);
            for (size_t i = 0; i < m; i++) t[i] += tmp[i];
        }
    }
    if (norm_t) {
        for (size_t i = 0; i < m; i++) r_f[i] = (float)t[i];
        rmsnorm_ref(r_f, wt, t, rows, n, eps);
    }
    if (with_res)
        for (size_t i = 0; i < m; i++) t[i] = (res[i] + t[i]) * scale;
    for (size_t i = 0; i < m; i++) r_f[i] = (float)t[i];
    cl_mem X = dbuf(tot * 4, NULL), X2 = dbuf(m * 4, x2), R = dbuf(tot * 4, NULL), Wb[6], Y[3];
    for (int j = 0; j < 6; j++) Wb[j] = dbuf(n * 4, w + (size_t)j * n);
    poison(X, tot * 4);
    dwrite(X, x, m * 4);
    poison(R, tot * 4);
    dwrite(R, res, m * 4);
    norm_chain c = { .x = X, .wx = raw ? NULL : Wb[0], .x2 = with_x2 ? X2 : NULL, .wx2 = with_x2 ? Wb[1] : NULL,
                     .wt = norm_t ? Wb[2] : NULL, .res = with_res ? R : NULL, .scale = scale, .nout = nout };
    for (int j = 0; j < 3; j++) {
        Y[j] = in_place && j == 0 ? X : dbuf(tot * 4, NULL);
        if (!(in_place && j == 0)) poison(Y[j], tot * 4);
        c.out[j] = (norm_out){ Wb[3 + j], Y[j] };
    }
    OPOK(op_norm_chain(&O, &c, rows, n, eps));
    char what[128];
    snprintf(what, sizeof what, "norm chain %u x %u (raw %d, x2 %d, norm_t %d, res %d, %d outputs%s)", rows, n, raw,
             with_x2, norm_t, with_res, nout, in_place ? ", in place" : "");
    if (with_res) {
        dread(R, got, tot * 4);
        check_close(what, got, t, m, TOL_RED);
        check_untouched(what, got, m, tot);
    }
    for (int j = 0; j < nout; j++) {
        rmsnorm_ref(r_f, wy + (size_t)j * n, ref, rows, n, eps);
        dread(Y[j], got, tot * 4);
        check_close(what, got, ref, m, TOL_RED);
        check_untouched(what, got, m, tot);
    }
    for (int j = nout; j < 3; j++) { /* outputs not asked for stay untouched */
        dread(Y[j], got, tot * 4);
        check_untouched(what, got, 0, tot);
    }
    free(x); free(x2); free(res); free(w); free(got); free(r_f); free(t); free(tmp); free(ref);
    clReleaseMemObject(X); clReleaseMemObject(X2); clReleaseMemObject(R);
    for (int j = 0; j < 6; j++) clReleaseMemObject(Wb[j]);
    for (int j = in_place ? 1 : 0; j < 3; j++) clReleaseMemObject(Y[j]);
}

static void test_norm_chain(void)
{
    reseed(__func__);
    uint32_t rows = 3 + irand(5), n = 4 * (100 + irand(300));
    /* the Gemma 4 shapes: MoE layer tail + next pre-norm, post-attention add + three pre-norms,
     * PLE add without outputs, two plain norms of one row (one in place) */
    norm_chain_case(rows, n, 0, 1, 1, 1, 1, 0);
    norm_chain_case(rows, n, 0, 0, 0, 1, 3, 0);
    norm_chain_case(rows, n, 0, 0, 0, 1, 0, 0);
    norm_chain_case(rows, n, 1, 0, 0, 0, 2, 1);
    norm_chain_case(rows, n, 0, 1, 0, 0, 1, 0);
    /* decode: one row of 31B's width (a work-group as wide as the device allows) */
    norm_chain_case(1, 5376, 0, 1, 1, 1, 1, 0);
    norm_chain_case(1, 5376, 1, 0, 0, 0, 1, 1);
    /* rows held in registers on PoCL's 16-item groups too (24 float4s), and one too long to be
     * held on a GPU's 1024-item group (4,096 float4s): both forms of norm_fuse on either device */
    norm_chain_case(2, 96, 0, 1, 1, 1, 1, 0);
    norm_chain_case(1, 16384, 0, 0, 0, 1, 1, 0);
    /* bad arguments are refused, not launched */
    norm_chain bad = { .x = NULL, .nout = 0 };
    CHECK(OPRC(op_norm_chain(&O, &bad, 1, 64, 1e-6f)) != 0, "a chain without outputs or residual ran");
    CHECK(OPRC(op_norm_chain(&O, &bad, 1, 66, 1e-6f)) != 0, "a chain of 66 values (not float4s) ran");
}

/* ------------------------------------------------------------------ norm + NEOX RoPE */

typedef struct rope_cfg { uint32_t hd, rot; int norm, has_w; double base; } rope_cfg;



static const rope_cfg rope_cfgs[] = {
    { 64, 64, 1, 1, 10000.0 },   /* full rotation, norm with weight (Gemma q/k norm) */
    { 64, 32, 1, 0, 1e6 },       /* partial rotation, plain RMS */
    { 256, 256, 1, 1, 1e6 },     /* Gemma 3 head_dim */
    { 128, 96, 0, 0, 10000.0 },  /* partial, no norm */
    { 256, 128, 1, 1, 10000.0 },
};

static void test_norm_rope_q(void)
{
    reseed(__func__);
    for (size_t c = 0; c < sizeof rope_cfgs / sizeof *rope_cfgs; c++) {
        const rope_cfg *cf = &rope_cfgs[c];
        uint32_t ntok = 3 + irand(5), nh = 4, hd = cf->hd;
        float eps = 1e-6f;
        size_t m = (size_t)ntok * nh * hd, tot = m + PAD;
        float *x = malloc(m * 4), *w = malloc(hd * 4), *y = malloc(tot * 4), *freq = make_freq(cf->rot, cf->base);
        double *ref = malloc(m * 8);
        int32_t pos[16], seq[16];
        fill_rows(x, ntok * nh, hd);
        for (uint32_t i = 0; i < hd; i++) w[i] = 1.0f + 0.5f * nrand();
        for (uint32_t t = 0; t < ntok; t++) { pos[t] = (int32_t)irand(1000); seq[t] = 0; }
        pos[0] = 0;
        for (uint32_t t = 0; t < ntok; t++)
            for (uint32_t h = 0; h < nh; h++) {
                size_t o = ((size_t)t * nh + h) * hd;
                norm_rope_ref(x + o, w, cf->norm, cf->has_w, eps, freq, hd, cf->rot, pos[t], ref + o);
            }
        cl_mem X = dbuf(tot * 4, NULL), W = dbuf(hd * 4, w), F = dbuf(cf->rot / 2 * 4, freq),
               P = dbuf(sizeof pos, pos), S = dbuf(sizeof seq, seq);
        poison(X, tot * 4);
        dwrite(X, x, m * 4);
        char what[128];
        snprintf(what, sizeof what, "norm_rope Q ntok %u nh %u hd %u rot %u norm %d w %d", ntok, nh, hd, cf->rot,
                 cf->norm, cf->has_w);
        err[0] = 0;
        int rc = OPRC(op_norm_rope(&O, X, ntok, nh, hd, cf->has_w ? W : NULL, cf->norm, eps, F, cf->rot, P, S, NULL));
        CHECK(rc == 0, "%s: %s", what, err);
        if (rc == 0) {
            dread(X, y, tot * 4);
            check_close(what, y, ref, m, TOL_RED);
            check_untouched(what, y, m, tot);
        }
        free(x); free(w); free(y); free(freq); free(ref);
        clReleaseMemObject(X); clReleaseMemObject(W); clReleaseMemObject(F); clReleaseMemObject(P);
        clReleaseMemObject(S);
    }
}



/* a paged cache of three sequences of lens[] tokens and the batch that writes per_seq tokens of
 * each (make_tokens): pos / seq hold up to 16 tokens; returns their count */
static uint32_t cache_batch(paged *p, const uint32_t lens[3], uint32_t bs, uint32_t nkv, uint32_t hd,
                            uint32_t per_seq, int32_t *pos, int32_t *seq)
{
    paged_make(p, 3, lens, bs, nkv, hd);
    return make_tokens(3, lens, per_seq, pos, seq);
}

static void test_norm_rope_k_cache(void)
{
    reseed(__func__);
    for (size_t c = 0; c < sizeof rope_cfgs / sizeof *rope_cfgs; c++) {
        const rope_cfg *cf = &rope_cfgs[c];
        uint32_t nkv = 2, hd = cf->hd, bs = c % 2 ? 16 : KV_BLOCK;
        uint32_t lens[3] = { 40 + irand(100), 1 + irand(40), 100 + irand(60) };
        paged p;
        int32_t pos[16], seq[16];
        uint32_t ntok = cache_batch(&p, lens, bs, nkv, hd, 3, pos, seq);
        float eps = 1e-6f;
        size_t m = (size_t)ntok * nkv * hd, nc = paged_elems(&p);
        float *x = malloc(m * 4), *w = malloc(hd * 4), *freq = make_freq(cf->rot, cf->base);
        double *ref = malloc(m * 8);
        uint16_t *cache = malloc(nc * 2);
        fill_rows(x, ntok * nkv, hd);
        for (uint32_t i = 0; i < hd; i++) w[i] = 1.0f + 0.5f * nrand();
        for (uint32_t t = 0; t < ntok; t++)
            for (uint32_t h = 0; h < nkv; h++) {
                size_t o = ((size_t)t * nkv + h) * hd;
                norm_rope_ref(x + o, w, cf->norm, cf->has_w, eps, freq, hd, cf->rot, pos[t], ref + o);
            }
        cl_mem X = dbuf(m * 4, x), W = dbuf(hd * 4, w), F = dbuf(cf->rot / 2 * 4, freq), P = dbuf(sizeof pos, pos),
               S = dbuf(sizeof seq, seq), C = dbuf(nc * 2, NULL), BT = dbuf(sizeof p.table, p.table);
        poison16(C, nc * 2);
        kv_view kv = { C, BT, p.max_blocks, bs, ENGINE_KV_F16 };
        char what[128];
        snprintf(what, sizeof what, "norm_rope K->cache ntok %u nkv %u hd %u rot %u norm %d w %d block %u", ntok,
                 nkv, hd, cf->rot, cf->norm, cf->has_w, bs);
        err[0] = 0;
        int rc = OPRC(op_norm_rope(&O, X, ntok, nkv, hd, cf->has_w ? W : NULL, cf->norm, eps, F, cf->rot, P, S, &kv));
        CHECK(rc == 0, "%s: %s", what, err);
        if (rc == 0) {
            dread(C, cache, nc * 2);
            check_cache(what, &p, cache, ntok, pos, seq, ref);
        }
        free(x); free(w); free(freq); free(ref); free(cache);
        clReleaseMemObject(X); clReleaseMemObject(W); clReleaseMemObject(F); clReleaseMemObject(P);
        clReleaseMemObject(S); clReleaseMemObject(C); clReleaseMemObject(BT);
    }
}

/* fused Q/K/V: Q normed + roped in place, K normed + roped into its cache, V (normed) into its
 * cache; norm modes 0 none, 1 RMS times weight (Q, K), 2 RMS without weight */
static void test_qkv_rope(void)
{
    reseed(__func__);
    static const struct { uint32_t hd, rot; int qk_norm, v_norm; double base; } cfgs[] = {
        { 64, 64, 1, 0, 10000.0 }, { 64, 32, 2, 2, 1e6 }, { 256, 256, 1, 2, 1e6 }, { 128, 96, 0, 1, 10000.0 },
        { 256, 128, 1, 0, 10000.0 }, { 512, 128, 1, 2, 1e6 },
    };
    /* on NVIDIA every case twice: qkv_rope_w (a warp per row, where the shape allows) and qkv_rope */
    cl_kernel wk = O.rope.qkv_w;
    size_t ncfg = sizeof cfgs / sizeof *cfgs, keep_rows = O.pol.qkv_rope_w_min_rows;
    O.pol.qkv_rope_w_min_rows = 0; /* these few tokens take it too */
    for (size_t cp = 0; cp < ncfg * (wk ? 2 : 1); cp++) {
        size_t c = cp % ncfg;
        O.rope.qkv_w = cp < ncfg ? wk : NULL;
        uint32_t nh = 4, nkv = 2, hd = cfgs[c].hd, rot = cfgs[c].rot, bs = c % 2 ? 16 : KV_BLOCK;
        int qn = cfgs[c].qk_norm, vn = cfgs[c].v_norm;
        uint32_t lens[3] = { 40 + irand(100), 1 + irand(40), 100 + irand(60) };
        paged p;
        int32_t pos[16], seq[16];
        uint32_t ntok = cache_batch(&p, lens, bs, nkv, hd, 3, pos, seq);
        float eps = 1e-6f;
        size_t mq = (size_t)ntok * nh * hd, mk = (size_t)ntok * nkv * hd, nc = paged_elems(&p), totq = mq + PAD;
        float *q = malloc(mq * 4), *k = malloc(mk * 4), *v = malloc(mk * 4), *qw = malloc(hd * 4),
              *kw = malloc(hd * 4), *one = malloc(hd * 4), *freq = make_freq(rot, cfgs[c].base),
              *got = malloc(totq * 4);
        double *rq = malloc(mq * 8), *rk = malloc(mk * 8), *rv = malloc(mk * 8);
        uint16_t *cache = malloc(nc * 2);
        fill_rows(q, ntok * nh, hd);
        fill_rows(k, ntok * nkv, hd);
        fill_rows(v, ntok * nkv, hd);
        for (uint32_t i = 0; i < hd; i++) { qw[i] = 1.0f + 0.5f * nrand(); kw[i] = 1.0f + 0.5f * nrand(); one[i] = 1; }
        for (uint32_t t = 0; t < ntok; t++) {
            for (uint32_t h = 0; h < nh; h++) {
                size_t o = ((size_t)t * nh + h) * hd;
                norm_rope_ref(q + o, qw, qn != 0, qn == 1, eps, freq, hd, rot, pos[t], rq + o);
            }
            for (uint32_t h = 0; h < nkv; h++) {
                size_t o = ((size_t)t * nkv + h) * hd;
                norm_rope_ref(k + o, kw, qn != 0, qn == 1, eps, freq, hd, rot, pos[t], rk + o);
                norm_rope_ref(v + o, one, vn != 0, 0, eps, NULL, hd, 0, 0, rv + o);
            }
        }
        cl_mem Q = dbuf(totq * 4, NULL), K = dbuf(mk * 4, k), V = dbuf(mk * 4, v), QW = dbuf(hd * 4, qw),
               KW = dbuf(hd * 4, kw), F = dbuf(rot / 2 * 4, freq), P = dbuf(sizeof pos, pos), S = dbuf(sizeof seq, seq),
               KC = dbuf(nc * 2, NULL), VC = dbuf(nc * 2, NULL), BT = dbuf(sizeof p.table, p.table);
        poison(Q, totq * 4);
        dwrite(Q, q, mq * 4);
        poison16(KC, nc * 2);
        poison16(VC, nc * 2);
        kv_view kk = { KC, BT, p.max_blocks, bs, ENGINE_KV_F16 }, vv = { VC, BT, p.max_blocks, bs, ENGINE_KV_F16 };
        char what[160];
        snprintf(what, sizeof what, "qkv_rope%s ntok %u nh %u nkv %u hd %u rot %u qk_norm %d v_norm %d block %u",
                 O.rope.qkv_w && rot % 64 == 0 ? "_w" : "", ntok, nh, nkv, hd, rot, qn, vn, bs);
        err[0] = 0;
        int rc = OPRC(op_qkv_rope(&O, Q, K, V, ntok, nh, nkv, hd, qn == 1 ? QW : NULL, qn == 1 ? KW : NULL, qn, vn,
                      eps, F,
                             rot, P, S, &kk, &vv));
        CHECK(rc == 0, "%s: %s", what, err);
        if (rc == 0) {
            char w2[200];
            dread(Q, got, totq * 4);
            snprintf(w2, sizeof w2, "%s: Q", what);
            check_close(w2, got, rq, mq, TOL_RED);
            check_untouched(w2, got, mq, totq);
            dread(KC, cache, nc * 2);
            snprintf(w2, sizeof w2, "%s: K cache", what);
            check_cache(w2, &p, cache, ntok, pos, seq, rk);
            dread(VC, cache, nc * 2);
            snprintf(w2, sizeof w2, "%s: V cache", what);
            check_cache(w2, &p, cache, ntok, pos, seq, rv);
        }
        free(q); free(k); free(v); free(qw); free(kw); free(one); free(freq); free(got); free(rq); free(rk);
        free(rv); free(cache);
        cl_mem all[] = { Q, K, V, QW, KW, F, P, S, KC, VC, BT };
        for (size_t i = 0; i < sizeof all / sizeof *all; i++) clReleaseMemObject(all[i]);
    }
    O.rope.qkv_w = wk;
    O.pol.qkv_rope_w_min_rows = keep_rows;
}

/* ------------------------------------------------------------------ elementwise and row ops */

static void test_geglu(void)
{
    reseed(__func__);
    uint32_t n = 3000 + irand(1000) * 2 + 1;
    size_t tot = n + PAD;
    float *g = malloc(n * 4), *u = malloc(n * 4), *y = malloc(tot * 4);
    double *ref = malloc(n * 8);
    for (uint32_t i = 0; i < n; i++) { g[i] = frand(-8, 8); u[i] = nrand(); }
    g[0] = 0.0f; g[1] = -20.0f; g[2] = 20.0f;
    for (uint32_t i = 0; i < n; i++) {
        double x = g[i];
        ref[i] = 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))) * u[i];
    }
    cl_mem G_ = dbuf(tot * 4, NULL), U = dbuf(n * 4, u), Y = dbuf(tot * 4, NULL);
    poison(G_, tot * 4);
    dwrite(G_, g, n * 4);
    poison(Y, tot * 4);
    OPOK(op_geglu(&O, G_, U, Y, n));
    dread(Y, y, tot * 4);
    check_close("geglu", y, ref, n, TOL_ELEM);
    check_untouched("geglu", y, n, tot);
    OPOK(op_geglu(&O, G_, U, G_, n)); /* in place, as the engine runs it */
    dread(G_, y, tot * 4);
    check_close("geglu in place", y, ref, n, TOL_ELEM);
    check_untouched("geglu in place", y, n, tot);
    free(g); free(u); free(y); free(ref);
    clReleaseMemObject(G_); clReleaseMemObject(U); clReleaseMemObject(Y);
}

static void test_gather_rows(void)
{
    reseed(__func__);
    uint32_t rows_src = 13, rows = 7, n = 640 + 2 * irand(100) + 1;
    int32_t idx[7];
    for (uint32_t r = 0; r < rows; r++) idx[r] = (int32_t)irand(rows_src);
    idx[0] = 12; idx[1] = 0; idx[6] = idx[2];
    size_t m = (size_t)rows * n, tot = m + PAD;
    float *src = malloc((size_t)rows_src * n * 4), *y = malloc(tot * 4);
    for (size_t i = 0; i < (size_t)rows_src * n; i++) src[i] = nrand();
    cl_mem S = dbuf((size_t)rows_src * n * 4, src), I = dbuf(sizeof idx, idx), Y = dbuf(tot * 4, NULL);
    poison(Y, tot * 4);
    OPOK(op_gather_rows(&O, S, I, Y, rows, n));
    dread(Y, y, tot * 4);
    size_t bad = 0;
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t i = 0; i < n; i++) bad += memcmp(&y[(size_t)r * n + i], &src[(size_t)idx[r] * n + i], 4) != 0;
    CHECK(bad == 0, "gather_rows %u x %u: %zu values differ from the source rows", rows, n, bad);
    check_untouched("gather_rows", y, m, tot);
    free(src); free(y);
    clReleaseMemObject(S); clReleaseMemObject(I); clReleaseMemObject(Y);
}

static void test_softcap(void)
{
    reseed(__func__);
    uint32_t n = 5000 + 2 * irand(500) + 1;
    float cap = 30.0f;
    size_t tot = n + PAD;
    float *x = malloc(n * 4), *y = malloc(tot * 4);
    double *ref = malloc(n * 8);
    for (uint32_t i = 0; i < n; i++) x[i] = frand(-200, 200);
    x[0] = 0.0f; x[1] = 1e-3f; x[2] = -1e4f;
    for (uint32_t i = 0; i < n; i++) ref[i] = cap * tanh((double)x[i] / cap);
    cl_mem X = dbuf(tot * 4, NULL);
    poison(X, tot * 4);
    dwrite(X, x, n * 4);
    OPOK(op_softcap(&O, X, cap, n));
    dread(X, y, tot * 4);
    check_close("softcap", y, ref, n, TOL_ELEM);
    check_untouched("softcap", y, n, tot);
    free(x); free(y); free(ref);
    clReleaseMemObject(X);
}

static void test_add_scale(void)
{
    reseed(__func__);
    uint32_t n = 2000 + 2 * irand(500) + 1;
    size_t tot = n + PAD;
    float *x = malloc(n * 4), *u = malloc(n * 4), *y = malloc(tot * 4), s = frand(-3, 3);
    double *ref = malloc(n * 8);
    for (uint32_t i = 0; i < n; i++) { x[i] = nrand(); u[i] = nrand(); ref[i] = ((double)x[i] + u[i]) * s; }
    cl_mem X = dbuf(tot * 4, NULL), U = dbuf(n * 4, u);
    poison(X, tot * 4);
    dwrite(X, x, n * 4);
    OPOK(op_add(&O, X, U, n));
    OPOK(op_scale(&O, X, s, n));
    dread(X, y, tot * 4);
    check_close("add_rows + scale_rows", y, ref, n, TOL_ELEM);
    check_untouched("add_rows + scale_rows", y, n, tot);
    free(x); free(u); free(y); free(ref);
    clReleaseMemObject(X); clReleaseMemObject(U);
}

static int32_t argmax_ref(const float *x, uint32_t n)
{
    int32_t b = 0;
    for (uint32_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = (int32_t)i;
    return b; /* first (lowest) index of the maximum */
}

static void argmax_case(uint32_t rows, uint32_t n)
{
    float *x = malloc((size_t)rows * n * 4);
    for (uint32_t r = 0; r < rows; r++) {
        float *xr = x + (size_t)r * n;
        switch (r % 8) {
        case 0: for (uint32_t i = 0; i < n; i++) xr[i] = (float)irand(40); break;    /* many ties */
        case 1: for (uint32_t i = 0; i < n; i++) xr[i] = 1.5f; break;                /* all equal */
        case 2: for (uint32_t i = 0; i < n; i++) xr[i] = -INFINITY; break;
        case 3: for (uint32_t i = 0; i < n; i++) xr[i] = nrand(); xr[n - 1] = 100.0f; break;
        case 4: for (uint32_t i = 0; i < n; i++) xr[i] = nrand(); xr[0] = xr[n - 1] = 100.0f; break;
        case 5: for (uint32_t i = 0; i < n; i++) xr[i] = -1000.0f - (float)irand(1000); break;
        case 6: /* ties in the same work-item stride, in different items, and late */
            for (uint32_t i = 0; i < n; i++) xr[i] = nrand();
            { uint32_t a = n > 40 ? 33 : n - 1, b = n > 40 ? 17 : n / 2, cc = n > 200 ? 100 : n - 1;
              xr[a] = xr[b] = xr[cc] = 50.0f; xr[n - 1] = 50.0f; }
            break;
        default: /* ties only in the later parts of a split row */
            for (uint32_t i = 0; i < n; i++) xr[i] = nrand();
            xr[n - 1] = xr[n * 3 / 4 + 1] = xr[n / 2 + 3] = 60.0f;
            break;
        }
    }
    int32_t *got = malloc((rows + PAD) * 4);
    cl_mem X = dbuf((size_t)rows * n * 4, x), Y = dbuf((rows + PAD) * 4, NULL);
    poison(Y, (rows + PAD) * 4);
    OPOK(op_argmax(&O, X, rows, n, Y));
    dread(Y, got, (rows + PAD) * 4);
    uint32_t bad = 0;
    for (uint32_t r = 0; r < rows; r++) {
        int32_t want = argmax_ref(x + (size_t)r * n, n);
        if (got[r] != want && ++bad <= 4) /* the first few in detail */
            CHECK(0, "argmax_rows n %u row %u (kind %u): got %d, want %d", n, r, r % 8, got[r], want);
    }
    CHECK(bad == 0, "argmax_rows %u rows x %u: %u rows wrong", rows, n, bad);
    check_untouched("argmax_rows", (const float *)got, rows, rows + PAD);
    free(x); free(got);
    clReleaseMemObject(X); clReleaseMemObject(Y);
}

static void test_argmax_rows(void)
{
    reseed(__func__);
    argmax_case(9, 5003 + 2 * irand(100));
    argmax_case(8, 5);         /* fewer values than work-items */
    argmax_case(3, 262147);    /* a Gemma 3 sized vocabulary: many parts */
    argmax_case(256, 37);      /* the most rows op_argmax takes */
    /* more rows than its partial buffers hold: refused, not written out of bounds */
    cl_mem X = dbuf(257 * 4, NULL), Y = dbuf(257 * 4, NULL);
    CHECK(OPRC(op_argmax(&O, X, 257, 1, Y)) != 0, "op_argmax accepted 257 rows (limit 256)");
    clReleaseMemObject(X); clReleaseMemObject(Y);
}

/* op_sample_topk: rows of n values, each with its k best wanted (and the values at a few tokens), against
 * a host sort by value, ties to the lower index: exact ids and values. Kinds: random; 7 levels only (ties
 * at the cut, finite); a masked row (all but 20 at -inf, k past them); k = n; k = 1; NaN-free extremes. */
typedef struct { float v; int32_t i; } vi_pair;
static int cmp_vi(const void *a, const void *b)
{
    const vi_pair *x = a, *y = b;
    if (x->v != y->v) return x->v < y->v ? 1 : -1;
    return (x->i > y->i) - (x->i < y->i);
}

static void sample_topk_case(uint32_t rows, uint32_t n)
{
    enum { MAXK = OPS_SAMPLE_MAXK, NPEN = 5 };
    float *x = malloc((size_t)rows * n * 4);
    int32_t *req = calloc((size_t)4 * rows + (size_t)rows * NPEN, 4);
    uint32_t *kk = malloc(rows * 4);
    for (uint32_t r = 0; r < rows; r++) {
        float *xr = x + (size_t)r * n;
        uint32_t kind = r % 6, k = 1 + irand(n < 1024 ? n : 1024);
        for (uint32_t i = 0; i < n; i++) xr[i] = nrand();
        if (kind == 1) for (uint32_t i = 0; i < n; i++) xr[i] = (float)irand(7);
        if (kind == 2) {
            for (uint32_t i = 0; i < n; i++) xr[i] = -INFINITY;
            for (uint32_t j = 0; j < 20 && j < n; j++) xr[irand(n)] = nrand();
            k = n < 100 ? n : 100;
        }
        if (kind == 3) k = n < MAXK ? n : MAXK;
        if (kind == 4) k = 1;
        if (kind == 5) { xr[0] = -FLT_MAX; xr[n - 1] = FLT_MAX; xr[n / 2] = INFINITY; }
        kk[r] = k;
        int32_t *d = req + 4 * r;
        d[0] = (int32_t)r; d[1] = (int32_t)k; d[2] = (int32_t)(4 * rows + r * NPEN); d[3] = NPEN;
        for (int j = 0; j < NPEN; j++) req[d[2] + j] = (int32_t)irand(n);
    }
    size_t words = (size_t)rows * 2 * MAXK, nreq = (size_t)4 * rows + (size_t)rows * NPEN;
    uint32_t *out = malloc(words * 4);
    float *pv = malloc(nreq * 4);
    cl_mem X = dbuf((size_t)rows * n * 4, x), R = dbuf(nreq * 4, req), P = dbuf(nreq * 4, NULL), Y = dbuf(words * 4, NULL);
    /* rows split over two launches, as two chunks of a step */
    uint32_t h = rows / 2;
    OPOK(op_sample_topk(&O, X, n, R, 0, h, 0, R, P, Y));
    OPOK(op_sample_topk(&O, X, n, R, h, rows - h, 0, R, P, Y));
    dread(Y, out, words * 4);
    dread(P, pv, nreq * 4);
    vi_pair *ref = malloc((size_t)n * sizeof *ref);
    uint32_t bad = 0;
    for (uint32_t r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * n;
        for (uint32_t i = 0; i < n; i++) ref[i] = (vi_pair){ xr[i], (int32_t)i };
        qsort(ref, n, sizeof *ref, cmp_vi);
        const uint32_t *o = out + (size_t)r * 2 * MAXK;
        /* -inf entries weigh nothing in a draw: any of them may fill the tail, so only their values count */
        for (uint32_t i = 0; i < kk[r]; i++) {
            float v;
            memcpy(&v, &o[i], 4);
            int ok = v == ref[i].v && (v == -INFINITY || (int32_t)o[MAXK + i] == ref[i].i);
            if (!ok && ++bad <= 4)
                CHECK(0, "sample_topk n %u row %u (kind %u, k %u) rank %u: got (%g, %d), want (%g, %d)", n, r, r % 6,
                      kk[r], i, v, (int32_t)o[MAXK + i], ref[i].v, ref[i].i);
        }
        for (int j = 0; j < NPEN; j++) {
            int32_t t = req[4 * rows + r * NPEN + j];
            if (pv[4 * rows + r * NPEN + j] != xr[t] && ++bad <= 4)
                CHECK(0, "sample_topk row %u: penalized token %d read %g, row has %g", r, t, pv[4 * rows + r * NPEN + j],
                      xr[t]);
        }
    }
    CHECK(bad == 0, "sample_topk %u rows x %u: %u wrong", rows, n, bad);
    free(x); free(req); free(kk); free(out); free(pv); free(ref);
    cl_mem ms[] = { X, R, P, Y };
    for (size_t i = 0; i < 4; i++) clReleaseMemObject(ms[i]);
}

static void test_sample_topk(void)
{
    reseed(__func__);
    sample_topk_case(12, 3000 + irand(100));
    sample_topk_case(6, 40);        /* fewer values than a group has items */
    sample_topk_case(6, 262144);    /* a Gemma vocabulary */
}

/* ------------------------------------------------------------------ main */

int main(void)
{
    if (fixture_setup()) return 1;
    fflush(stdout);

    RUN_TEST(test_rmsnorm);
    RUN_TEST(test_rmsnorm_add);
    RUN_TEST(test_rmsnorm_add_norm);
    RUN_TEST(test_norm_chain);
    RUN_TEST(test_norm_rope_q);
    RUN_TEST(test_norm_rope_k_cache);
    RUN_TEST(test_qkv_rope);
    RUN_TEST(test_geglu);
    RUN_TEST(test_gather_rows);
    RUN_TEST(test_softcap);
    RUN_TEST(test_add_scale);
    RUN_TEST(test_argmax_rows);
    RUN_TEST(test_sample_topk);
    fixture_teardown();
    CHECK_EXIT();
}
