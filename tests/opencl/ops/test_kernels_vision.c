/* test_kernels_vision.c — the vision encoder's ops (kernels/vision.cl, ops/vision.c) through the ops.h launchers,
 * against an independent plain-C float64 reference of transformers' math (docs/design-vision.md 1.3), on shapes
 * the tiny fixtures do not reach (test_gemma4v_encode.c runs them on the fixtures against transformers): dense
 * attention with grouped K/V heads, head dims 24, 72 (the 31B tower's) and 512 (the most it takes), several images
 * whose rows straddle key tiles; the same on f16 tensor cores where the device has them (NVIDIA), widths 32 to 128;
 * per-head norms (and their f16 copies) with and without weight and the 2-D RoPE at head dims 24 and 72;
 * the position add (a position outside the table gives NaN); k x k pooling over two grids; clamp; standardize.
 * Outputs are poisoned before each launch and PAD floats after them must stay poisoned. */
#include "kernels_fixture.h"

/* ------------------------------------------------------------------ attention */

static void attn_ref(const float *q, const float *k, const float *v, const int32_t *rng, double *out, uint32_t ntok,
                     uint32_t nh, uint32_t nkv, uint32_t hd, double scale)
{
    double *s = malloc(ntok * sizeof *s);
    for (uint32_t t = 0; t < ntok; t++)
        for (uint32_t h = 0; h < nh; h++) {
            uint32_t kh = h / (nh / nkv);
            double m = -INFINITY, sum = 0;
            for (int32_t j = rng[2 * t]; j < rng[2 * t + 1]; j++) {
                double d = 0;
                for (uint32_t i = 0; i < hd; i++)
                    d += (double)q[((size_t)t * nh + h) * hd + i] * k[((size_t)j * nkv + kh) * hd + i];
                s[j] = d * scale;
                if (s[j] > m) m = s[j];
            }
            for (int32_t j = rng[2 * t]; j < rng[2 * t + 1]; j++) sum += s[j] = exp(s[j] - m);
            for (uint32_t i = 0; i < hd; i++) {
                double a = 0;
                for (int32_t j = rng[2 * t]; j < rng[2 * t + 1]; j++) a += s[j] * v[((size_t)j * nkv + kh) * hd + i];
                out[((size_t)t * nh + h) * hd + i] = a / sum;
            }
        }
    free(s);
}

/* a launch's random q [ntok][nh][hd], k and v [ntok][nkv][hd], each row's image range, and room for out / ref */
typedef struct attn_io {
    float *q, *k, *v, *out;
    double *ref;
    int32_t *rng;
    size_t nq, nk;
} attn_io;

static attn_io attn_io_make(const uint32_t *rows, uint32_t nimg, uint32_t ntok, uint32_t nh, uint32_t nkv,
                            uint32_t hd)
{
    attn_io a = { .nq = (size_t)ntok * nh * hd, .nk = (size_t)ntok * nkv * hd };
    a.q = malloc(a.nq * 4), a.k = malloc(a.nk * 4), a.v = malloc(a.nk * 4), a.out = malloc((a.nq + PAD) * 4);
    a.ref = malloc(a.nq * 8);
    a.rng = malloc((size_t)ntok * 8);
    for (size_t i = 0; i < a.nq; i++) a.q[i] = nrand();
    for (size_t i = 0; i < a.nk; i++) a.k[i] = nrand(), a.v[i] = nrand();
    for (uint32_t i = 0, t = 0, r0 = 0; i < nimg; r0 += rows[i++])
        for (uint32_t j = 0; j < rows[i]; j++, t++) a.rng[2 * t] = (int32_t)r0, a.rng[2 * t + 1] = (int32_t)(r0 + rows[i]);
    return a;
}

static void attn_io_free(attn_io *a) { free(a->q), free(a->k), free(a->v), free(a->out), free(a->ref), free(a->rng); }

/* images of the given row counts in one launch */
static void attn_case(const uint32_t *rows, uint32_t nimg, uint32_t nh, uint32_t nkv, uint32_t hd, float scale)
{
    uint32_t ntok = 0;
    for (uint32_t i = 0; i < nimg; i++) ntok += rows[i];
    attn_io a = attn_io_make(rows, nimg, ntok, nh, nkv, hd);
    size_t nq = a.nq, nk = a.nk;
    float *q = a.q, *k = a.k, *v = a.v, *out = a.out;
    double *ref = a.ref;
    int32_t *rng = a.rng;
    attn_ref(q, k, v, rng, ref, ntok, nh, nkv, hd, scale);
    cl_mem Q = dbuf(nq * 4, q), K = dbuf(nk * 4, k), V = dbuf(nk * 4, v), R = dbuf((size_t)ntok * 8, rng),
           OUT = dbuf((nq + PAD) * 4, NULL);
    poison(OUT, (nq + PAD) * 4);
    char what[96];
    snprintf(what, sizeof what, "attention_dense %u images, %u rows, %u/%u heads of %u, scale %g", nimg, ntok, nh, nkv,
             hd, scale);
    OPOK(op_attention_dense(&O, Q, K, V, OUT, R, ntok, nh, nkv, hd, scale));
    dread(OUT, out, (nq + PAD) * 4);
    check_close(what, out, ref, nq, TOL_RED);
    check_untouched(what, out, nq, nq + PAD);
    cl_mem ms[] = { Q, K, V, R, OUT };
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) clReleaseMemObject(ms[i]);
    attn_io_free(&a);
}

static void test_attention_dense(void)
{
    reseed("attention_dense");
    attn_case((const uint32_t[]){ 70, 130, 1 }, 3, 4, 2, 72, 0.125f); /* 31B's head dim, grouped K/V, a 1-row image */
    attn_case((const uint32_t[]){ 64, 63 }, 2, 3, 3, 24, 1.0f);       /* the fixture's head dim, scale 1 */
    attn_case((const uint32_t[]){ 9 }, 1, 2, 1, 512, 0.05f);          /* the largest head dim */
}

/* rows [ntok][nh][hd] of x as f16 [nh][ntok][hdp], zero past hd; xr: the rounded values back in x's layout */
static uint16_t *heads_f16(const float *x, float *xr, uint32_t ntok, uint32_t nh, uint32_t hd, uint32_t hdp)
{
    uint16_t *h = calloc((size_t)nh * ntok * hdp, 2);
    for (uint32_t t = 0; t < ntok; t++)
        for (uint32_t j = 0; j < nh; j++)
            for (uint32_t i = 0; i < hd; i++) {
                size_t a = ((size_t)t * nh + j) * hd + i;
                h[((size_t)j * ntok + t) * hdp + i] = f2h(x[a]);
                xr[a] = (float)h2d(h[((size_t)j * ntok + t) * hdp + i]);
            }
    return h;
}

/* op_attention_dense_f16 against the float64 reference on the same f16-rounded operands: what is left is the
 * kernel's own rounding of the softmax weights to f16 (2^-11 relative) and its order of summation */
#define TOL_ATTN_F16 2e-3
static void attn_f16_case(const uint32_t *rows, uint32_t nimg, uint32_t nh, uint32_t nkv, uint32_t hd, float scale)
{
    uint32_t ntok = 0, hdp = ops_vision_fa(&O, hd);
    for (uint32_t i = 0; i < nimg; i++) ntok += rows[i];
    if (!hdp) {
        printf("  attention_dense_f16 head dim %u: no tensor-core kernel on this device, refused\n", hd);
        CHECK(OPRC(op_attention_dense_f16(&O, NULL, NULL, NULL, 80, NULL, NULL, NULL, 1, ntok, nh, nkv, hd,
                                          scale)) == -1,
              "attention_dense_f16 without a kernel not refused");
        return;
    }
    attn_io a = attn_io_make(rows, nimg, ntok, nh, nkv, hd);
    size_t nq = a.nq;
    float *q = a.q, *k = a.k, *v = a.v, *out = a.out;
    double *ref = a.ref;
    int32_t *rng = a.rng;
    uint16_t *q16 = heads_f16(q, q, ntok, nh, hd, hdp), *k16 = heads_f16(k, k, ntok, nkv, hd, hdp);
    uint16_t *v16 = heads_f16(v, v, ntok, nkv, hd, hdp);
    int32_t *tiles = malloc(((size_t)ntok / OPS_VFA_TILE + nimg + 1) * 8);
    uint32_t nt = 0;
    for (uint32_t i = 0, r0 = 0; i < nimg; r0 += rows[i++]) ops_vision_tiles(tiles, &nt, r0, rows[i]);
    attn_ref(q, k, v, rng, ref, ntok, nh, nkv, hd, scale);
    cl_mem T = dbuf((size_t)nt * 8, tiles);
    cl_mem Q = dbuf((size_t)nh * ntok * hdp * 2, q16), K = dbuf((size_t)nkv * ntok * hdp * 2, k16),
           V = dbuf((size_t)nkv * ntok * hdp * 2, v16), R = dbuf((size_t)ntok * 8, rng),
           OUT = dbuf((nq + PAD) * 4, NULL);
    poison(OUT, (nq + PAD) * 4);
    char what[112];
    snprintf(what, sizeof what, "attention_dense_f16 %u images, %u rows, %u/%u heads of %u (width %u), scale %g", nimg,
             ntok, nh, nkv, hd, hdp, scale);
    OPOK(op_attention_dense_f16(&O, Q, K, V, hdp, OUT, R, T, nt, ntok, nh, nkv, hd, scale));
    dread(OUT, out, (nq + PAD) * 4);
    check_close(what, out, ref, nq, TOL_ATTN_F16);
    check_untouched(what, out, nq, nq + PAD);
    /* the last image alone: its rows exactly as in the batch (its tiles and key blocks are the same) */
    uint32_t last = rows[nimg - 1], r0 = ntok - last, nt1 = 0;
    int32_t rng1[2 * 1024], t1[2 * (1024 / OPS_VFA_TILE + 1)];
    if (nimg > 1 && last <= 1024) {
        for (uint32_t j = 0; j < last; j++) rng1[2 * j] = 0, rng1[2 * j + 1] = (int32_t)last;
        ops_vision_tiles(t1, &nt1, 0, last);
        uint16_t *q1 = heads_f16(q + (size_t)r0 * nh * hd, q + (size_t)r0 * nh * hd, last, nh, hd, hdp);
        uint16_t *k1 = heads_f16(k + (size_t)r0 * nkv * hd, k + (size_t)r0 * nkv * hd, last, nkv, hd, hdp);
        uint16_t *v1 = heads_f16(v + (size_t)r0 * nkv * hd, v + (size_t)r0 * nkv * hd, last, nkv, hd, hdp);
        cl_mem Q1 = dbuf((size_t)nh * last * hdp * 2, q1), K1 = dbuf((size_t)nkv * last * hdp * 2, k1),
               V1 = dbuf((size_t)nkv * last * hdp * 2, v1), R1 = dbuf((size_t)last * 8, rng1),
               T1 = dbuf((size_t)nt1 * 8, t1), O1 = dbuf((size_t)last * nh * hd * 4, NULL);
        float *o1 = malloc((size_t)last * nh * hd * 4);
        OPOK(op_attention_dense_f16(&O, Q1, K1, V1, hdp, O1, R1, T1, nt1, last, nh, nkv, hd, scale));
        dread(O1, o1, (size_t)last * nh * hd * 4);
        CHECK(memcmp(o1, out + (size_t)r0 * nh * hd, (size_t)last * nh * hd * 4) == 0,
              "%s: the last image alone differs from its rows in the batch", what);
        cl_mem m1[] = { Q1, K1, V1, R1, T1, O1 };
        for (size_t i = 0; i < sizeof m1 / sizeof *m1; i++) clReleaseMemObject(m1[i]);
        free(q1), free(k1), free(v1), free(o1);
    }
    cl_mem ms[] = { Q, K, V, R, T, OUT };
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) clReleaseMemObject(ms[i]);
    attn_io_free(&a);
    free(q16), free(k16), free(v16), free(tiles);
}

static void test_attention_dense_f16(void)
{
    reseed("attention_dense_f16");
    attn_f16_case((const uint32_t[]){ 70, 130, 1 }, 3, 4, 2, 72, 0.125f); /* 31B's head dim: width 80, a tile
                                                                            * across three images */
    attn_f16_case((const uint32_t[]){ 630, 333 }, 2, 3, 3, 64, 1.0f);      /* the E tower's, scale 1 */
    attn_f16_case((const uint32_t[]){ 64, 63 }, 2, 3, 3, 24, 1.0f);        /* the fixture's: width 32 */
    attn_f16_case((const uint32_t[]){ 100 }, 1, 2, 1, 128, 0.08f);         /* the widest */
}

/* ------------------------------------------------------------------ per-head norm and 2-D RoPE */

static void norm_rope2d_ref(const float *x, const float *w, int norm, const int32_t *pos, double theta, double eps,
                            double *y, uint32_t ntok, uint32_t nh, uint32_t hd)
{
    for (size_t r = 0; r < (size_t)ntok * nh; r++) {
        const float *xr = x + r * hd;
        double *yr = y + r * hd, ss = 0;
        for (uint32_t i = 0; i < hd; i++) ss += (double)xr[i] * xr[i];
        double inv = norm ? 1.0 / sqrt(ss / hd + eps) : 1.0;
        for (uint32_t i = 0; i < hd; i++) yr[i] = xr[i] * inv * (norm == 1 ? w[i] : 1.0);
        if (!pos) continue;
        uint32_t half = hd / 2, q = hd / 4, t = (uint32_t)(r / nh);
        for (uint32_t part = 0; part < 2; part++) /* rotate_half inside each half, cos/sin laid out [f, f] */
            for (uint32_t j = 0; j < q; j++) {
                double ang = pos[2 * t + part] * pow(theta, -(double)(2 * j) / half);
                double a = yr[part * half + j], b = yr[part * half + j + q];
                yr[part * half + j] = a * cos(ang) - b * sin(ang);
                yr[part * half + j + q] = b * cos(ang) + a * sin(ang);
            }
    }
}

static void rope_case(uint32_t ntok, uint32_t nh, uint32_t hd, int norm, int rope)
{
    size_t n = (size_t)ntok * nh * hd;
    float *x = malloc((n + PAD) * 4), *w = malloc(hd * 4), *y = malloc((n + PAD) * 4);
    double *ref = malloc(n * 8);
    int32_t *pos = malloc((size_t)ntok * 8);
    fill_rows(x, ntok * nh, hd);
    for (uint32_t i = 0; i < hd; i++) w[i] = 1.0f + 0.5f * nrand();
    for (uint32_t t = 0; t < ntok; t++) pos[2 * t] = (int32_t)irand(64), pos[2 * t + 1] = (int32_t)irand(64);
    norm_rope2d_ref(x, w, norm, rope ? pos : NULL, 100.0, 1e-6, ref, ntok, nh, hd);
    for (size_t i = n; i < n + PAD; i++) x[i] = poison_f();
    /* the f16 copy [nh][ntok][hdp] (op_attention_dense_f16's operands): hdp past hd, padded with zeros */
    uint32_t hdp = hd + 8;
    size_t nh16 = (size_t)nh * ntok * hdp;
    uint16_t *h16 = malloc(nh16 * 2 + 64);
    memset(h16, 0xff, nh16 * 2 + 64);
    cl_mem X = dbuf((n + PAD) * 4, x), W = dbuf(hd * 4, w), P = dbuf((size_t)ntok * 8, pos);
    cl_mem H = dbuf(nh16 * 2 + 64, h16);
    char what[112];
    snprintf(what, sizeof what, "norm_rope2d %u rows x %u heads of %u, norm %d, rope %d", ntok, nh, hd, norm, rope);
    OPOK(op_norm_rope2d(&O, X, ntok, nh, hd, norm == 1 ? W : NULL, norm, 1e-6f, rope ? P : NULL, 100.0f, H, hdp));
    dread(X, y, (n + PAD) * 4);
    check_close(what, y, ref, n, TOL_RED);
    check_untouched(what, y, n, n + PAD);
    dread(H, h16, nh16 * 2 + 64);
    float *g16 = malloc(n * 4);
    size_t pad_bad = 0, tail_bad = 0;
    for (uint32_t t = 0; t < ntok; t++)
        for (uint32_t j = 0; j < nh; j++)
            for (uint32_t i = 0; i < hdp; i++) {
                uint16_t v = h16[((size_t)j * ntok + t) * hdp + i];
                if (i < hd) g16[((size_t)t * nh + j) * hd + i] = (float)h2d(v);
                else pad_bad += v != 0;
            }
    for (size_t i = nh16; i < nh16 + 32; i++) tail_bad += h16[i] != 0xffff;
    snprintf(what + strlen(what), sizeof what - strlen(what), ", f16 copy");
    check_close(what, g16, ref, n, TOL_HALF);
    CHECK(pad_bad == 0 && tail_bad == 0, "%s: %zu padding halves not zero, %zu halves past the copy written", what,
          pad_bad, tail_bad);
    clReleaseMemObject(X), clReleaseMemObject(W), clReleaseMemObject(P), clReleaseMemObject(H);
    free(x), free(w), free(y), free(ref), free(pos), free(h16), free(g16);
}

static void test_norm_rope2d(void)
{
    reseed("norm_rope2d");
    rope_case(40, 5, 72, 1, 1); /* q / k: weighted norm, then RoPE */
    rope_case(33, 4, 24, 1, 1);
    rope_case(40, 5, 72, 2, 0); /* v: weightless norm only */
    rope_case(17, 3, 24, 0, 1); /* RoPE alone */
}

/* ------------------------------------------------------------------ position add, pooling, clamp, standardize */

static void test_pos_add2d(void)
{
    reseed("pos_add2d");
    uint32_t n = 40, n_pos = 9, ntok = 25;
    size_t m = (size_t)ntok * n;
    float *x = malloc((m + PAD) * 4), *tab = malloc(2 * n_pos * n * 4), *y = malloc((m + PAD) * 4);
    double *ref = malloc(m * 8);
    int32_t *pos = malloc((size_t)ntok * 8);
    for (size_t i = 0; i < m; i++) x[i] = nrand();
    for (size_t i = m; i < m + PAD; i++) x[i] = poison_f();
    for (size_t i = 0; i < 2 * n_pos * n; i++) tab[i] = nrand();
    for (uint32_t t = 0; t < ntok; t++) pos[2 * t] = (int32_t)irand(n_pos), pos[2 * t + 1] = (int32_t)irand(n_pos);
    pos[2 * 7] = (int32_t)n_pos; /* outside the table: row 7 must be NaN */
    for (uint32_t t = 0; t < ntok; t++)
        for (uint32_t j = 0; j < n; j++)
            ref[(size_t)t * n + j] = t == 7 ? 0 : (double)x[(size_t)t * n + j] + tab[(size_t)pos[2 * t] * n + j] +
                                                       tab[((size_t)n_pos + pos[2 * t + 1]) * n + j];
    cl_mem X = dbuf((m + PAD) * 4, x), T = dbuf(2 * n_pos * n * 4, tab), P = dbuf((size_t)ntok * 8, pos);
    OPOK(op_pos_add2d(&O, X, T, n_pos, P, ntok, n));
    dread(X, y, (m + PAD) * 4);
    int nan7 = 1;
    for (uint32_t j = 0; j < n; j++) nan7 &= isnan(y[7 * n + j]), y[7 * n + j] = 0;
    CHECK(nan7, "pos_add2d: the row of a position outside the table is not NaN");
    check_close("pos_add2d", y, ref, m, TOL_ELEM);
    check_untouched("pos_add2d", y, m, m + PAD);
    clReleaseMemObject(X), clReleaseMemObject(T), clReleaseMemObject(P);
    free(x), free(tab), free(y), free(ref), free(pos);
}

static void test_avgpool(void)
{
    reseed("avgpool");
    /* two grids, 6 x 3 then 3 x 9 patches (k = 3): 2 + 3 cells, row-major within each */
    uint32_t n = 20, k = 3, gw[2] = { 6, 3 }, gh[2] = { 3, 9 }, rows = 6 * 3 + 3 * 9, nout = 5;
    float s = 0.7f, *x = malloc((size_t)rows * n * 4), *y = malloc(((size_t)nout * n + PAD) * 4);
    double *ref = calloc((size_t)nout * n, 8);
    int32_t cells[10];
    for (size_t i = 0; i < (size_t)rows * n; i++) x[i] = nrand();
    for (uint32_t g = 0, off = 0, c = 0; g < 2; off += gw[g] * gh[g], g++)
        for (uint32_t cy = 0; cy < gh[g] / k; cy++)
            for (uint32_t cx = 0; cx < gw[g] / k; cx++, c++) {
                cells[2 * c] = (int32_t)(off + cy * k * gw[g] + cx * k), cells[2 * c + 1] = (int32_t)gw[g];
                for (uint32_t py = cy * k; py < cy * k + k; py++) /* the patches whose floor(x/k), floor(y/k) is c */
                    for (uint32_t px = cx * k; px < cx * k + k; px++)
                        for (uint32_t j = 0; j < n; j++)
                            ref[(size_t)c * n + j] += (double)x[(size_t)(off + py * gw[g] + px) * n + j] * s;
            }
    cl_mem X = dbuf((size_t)rows * n * 4, x), C = dbuf(sizeof cells, cells);
    cl_mem Y = dbuf(((size_t)nout * n + PAD) * 4, NULL);
    poison(Y, ((size_t)nout * n + PAD) * 4);
    OPOK(op_avgpool(&O, X, C, Y, nout, n, k, s));
    dread(Y, y, ((size_t)nout * n + PAD) * 4);
    check_close("avgpool", y, ref, (size_t)nout * n, TOL_ELEM);
    check_untouched("avgpool", y, (size_t)nout * n, (size_t)nout * n + PAD);
    clReleaseMemObject(X), clReleaseMemObject(C), clReleaseMemObject(Y);
    free(x), free(y), free(ref);
}

static void test_clamp_standardize(void)
{
    reseed("clamp_standardize");
    uint32_t rows = 7, n = 36;
    size_t m = (size_t)rows * n;
    float *x = malloc(m * 4), *b = malloc(n * 4), *sc = malloc(n * 4), *y = malloc((m + PAD) * 4);
    double *ref = malloc(m * 8);
    for (size_t i = 0; i < m; i++) x[i] = 3 * nrand();
    for (uint32_t j = 0; j < n; j++) b[j] = nrand(), sc[j] = frand(0.5, 2);
    cl_mem X = dbuf(m * 4, x), B = dbuf(n * 4, b), S = dbuf(n * 4, sc), Y = dbuf((m + PAD) * 4, NULL);
    for (size_t i = 0; i < m; i++) ref[i] = x[i] < -1.5 ? -1.5 : x[i] > 2.0 ? 2.0 : x[i];
    poison(Y, (m + PAD) * 4);
    OPOK(op_clamp(&O, X, Y, -1.5f, 2.0f, (uint32_t)m));
    dread(Y, y, (m + PAD) * 4);
    check_close("clamp", y, ref, m, TOL_ELEM);
    check_untouched("clamp", y, m, m + PAD);
    OPOK(op_clamp(&O, X, X, -INFINITY, 0.5f, (uint32_t)m)); /* one-sided, in place */
    dread(X, y, m * 4);
    for (size_t i = 0; i < m; i++) ref[i] = x[i] > 0.5f ? 0.5 : x[i];
    check_close("clamp in place, no lower bound", y, ref, m, TOL_ELEM);
    dwrite(X, x, m * 4);
    for (size_t i = 0; i < m; i++) ref[i] = ((double)x[i] - b[i % n]) * sc[i % n];
    poison(Y, (m + PAD) * 4);
    OPOK(op_standardize(&O, X, Y, B, S, rows, n));
    dread(Y, y, (m + PAD) * 4);
    check_close("standardize", y, ref, m, TOL_ELEM);
    check_untouched("standardize", y, m, m + PAD);
    cl_mem ms[] = { X, B, S, Y };
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) clReleaseMemObject(ms[i]);
    free(x), free(b), free(sc), free(y), free(ref);
}

int main(void)
{
    if (fixture_setup()) return 1;
    fflush(stdout);
    RUN_TEST(test_attention_dense);
    RUN_TEST(test_attention_dense_f16);
    RUN_TEST(test_norm_rope2d);
    RUN_TEST(test_pos_add2d);
    RUN_TEST(test_avgpool);
    RUN_TEST(test_clamp_standardize);
    fixture_teardown();
    CHECK_EXIT();
}
