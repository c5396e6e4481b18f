/* test_kernels.c — every OpenCL kernel, through the ops.h launchers, against an independent
 * plain-C float64 reference.
 *
 * Runs on the default device (env CLGEMMA_DEVICE=P:D picks another). Inputs are fresh random
 * numbers each run; the seed is printed and env CLGEMMA_TEST_SEED=N replays a run. Each test
 * reseeds from (seed, test name), so one test can be replayed on its own seed too.
 * CLGEMMA_TEST_VERBOSE=1 prints every comparison's error.
 *
 * Weight kernels (deq_*, mv4_* / mv16_*, mv_multi, emb_*, the MoE expert products, and the deq + CLBlast GEMM path of
 * op_matmul) are checked against tests/golden/quant_blocks.bin (tools/gen_quant_golden.py):
 * random GGUF blocks of every supported type and their dequantization by gguf-py, which
 * mirrors llama.cpp's layouts independently of the kernels.
 * The rest: rmsnorm, rmsnorm_add, rmsnorm_add_norm, norm_chain (norm_fuse), norm_rope (Q in place, K into the paged
 * cache, partial rotation), v_store, qkv_rope, attn_partial with its in-kernel merge (GQA, several
 * sequences with shuffled block tables, windows, softcap, several chunk sizes, token slices),
 * op_attention_batch (runs of one sequence: flash kernel on NVIDIA, split-KV elsewhere),
 * geglu, gather_rows, softcap, add_rows, scale_rows, argmax_part + argmax_final.
 *
 * Every output buffer is poisoned with a NaN bit pattern before each launch and has padding
 * (extra rows, ld > width, spare cache blocks); outputs must be finite and correct, and every
 * element the op must not write must still hold the poison afterwards.
 *
 * Tolerances (relative L2 error, ||got - ref|| / ||ref||, against float64):
 *   TOL_ELEM 1e-5   elementwise ops, dequantization, embedding
 *   TOL_RED  1e-4   reductions: GEMV / GEMM, RMSNorm, norm+RoPE, attention
 *   TOL_HALF 1e-3   values stored as half in the paged KV cache */
#include "check.h"
#include "kv.h"
#include "ops.h"
#include "ops_gemma4.h"
#include "runtime.h"

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define TOL_ELEM 1e-5
#define TOL_RED 1e-4
#define TOL_HALF 1e-3
#define TOL_MMA 3e-3 /* tensor-core products round X and W to f16 (unit roundoff 4.9e-4) */
#define TOL_Q8X 1.5e-2 /* int8 decode products round X to 1/254 of each 32-block's max (llama.cpp's q8_1):
                         ~5e-3 expected for Gaussian X, measured 2.6e-3..7.2e-3 on the H200 */
#define TOL_Q8X_GEGLU 3e-2 /* the same for X = gelu(g) * u (heavier tails: 0.91% rounding error per value
                              vs 0.54% for Gaussian X, numpy), measured 0.86e-2..2.2e-2 on the H200 */

#define POISON32 0x7fc0deadu   /* quiet NaN with a payload: float outputs before launch */
#define POISON16 0x7e5bu       /* NaN half: unwritten KV cache slots */
#define PAD 67                 /* extra floats after each output that must stay poisoned */
#define GEMM_SCRATCH 1600      /* floats: tiles of 3 rows at 512 columns, 2 at 768, 6 at 256 */

static cl_runtime RT;
static ops O;
static ops_g4 G4; /* Gemma 4 launchers: the MoE expert products */
static char err[512];

/* ------------------------------------------------------------------ random numbers */

static uint64_t seed0, rs;

static uint64_t rnext(void)
{
    uint64_t z = (rs += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double urand(void) { return (double)(rnext() >> 11) * 0x1p-53; }
static float frand(double lo, double hi) { return (float)(lo + (hi - lo) * urand()); }
static float nrand(void)
{
    double u = urand(), v = urand();
    return (float)(sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v));
}
static uint32_t irand(uint32_t n) { return (uint32_t)(rnext() % n); }
static void shuffle(int32_t *a, uint32_t n)
{
    for (uint32_t i = n; i > 1; i--) {
        uint32_t j = irand(i);
        int32_t t = a[i - 1]; a[i - 1] = a[j]; a[j] = t;
    }
}
/* every test starts from its own stream: seed0 mixed with the test's name (its first statement) */
static void reseed(const char *name)
{
    uint64_t h = 1469598103934665603ull;
    for (; *name; name++) { h ^= (unsigned char)*name; h *= 1099511628211ull; }
    rs = seed0 ^ h;
}

/* ------------------------------------------------------------------ half floats (IEEE binary16) */

static double h2d(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 0) v = ldexp(m, -24);
    else if (e == 31) v = m ? NAN : INFINITY;
    else v = ldexp(m | 1024, e - 25);
    return (h & 0x8000) ? -v : v;
}
/* round to nearest even; only used to make cache contents, values well inside the half range */
static uint16_t f2h(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    x &= 0x7fffffff;
    if (x >= 0x477ff000u) return sign | 0x7c00;          /* >= 65520: inf (no NaN inputs here) */
    if (x < 0x38800000u) {                               /* below 2^-14: subnormal half */
        float a;
        memcpy(&a, &x, 4);
        return sign | (uint16_t)rintf(a * 0x1p24f);
    }
    uint32_t h = ((((x >> 23) - 127 + 15) << 10) | ((x & 0x7fffff) >> 13));
    uint32_t rem = x & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
    return sign | (uint16_t)h;
}

/* ------------------------------------------------------------------ device helpers */

static void die(const char *what)
{
    printf("FAIL %s: %s: %s\n", check_current, what, err);
    fflush(stdout);
    exit(1);
}
static cl_mem dbuf(size_t bytes, const void *host)
{
    cl_mem m = rt_alloc(&RT, bytes, host, err, sizeof err);
    if (!m) die("allocation");
    return m;
}
static void dwrite(cl_mem m, const void *p, size_t bytes)
{
    cl_int e = clEnqueueWriteBuffer(RT.q, m, CL_TRUE, 0, bytes, p, 0, NULL, NULL);
    if (e != CL_SUCCESS) { snprintf(err, sizeof err, "%s", rt_errstr(e)); die("write"); }
}
static void dread(cl_mem m, void *p, size_t bytes)
{
    cl_int e = clEnqueueReadBuffer(RT.q, m, CL_TRUE, 0, bytes, p, 0, NULL, NULL);
    if (e != CL_SUCCESS) { snprintf(err, sizeof err, "%s", rt_errstr(e)); die("read"); }
}
static void poison(cl_mem m, size_t bytes)
{
    uint32_t pat = POISON32;
    cl_int e = clEnqueueFillBuffer(RT.q, m, &pat, 4, 0, bytes, 0, NULL, NULL);
    if (e != CL_SUCCESS) { snprintf(err, sizeof err, "%s", rt_errstr(e)); die("fill"); }
}
static void poison16(cl_mem m, size_t bytes)
{
    uint16_t pat = POISON16;
    cl_int e = clEnqueueFillBuffer(RT.q, m, &pat, 2, 0, bytes, 0, NULL, NULL);
    if (e != CL_SUCCESS) { snprintf(err, sizeof err, "%s", rt_errstr(e)); die("fill"); }
}
static void finish(void)
{
    cl_int e = clFinish(RT.q);
    if (e != CL_SUCCESS) { snprintf(err, sizeof err, "clFinish: %s", rt_errstr(e)); die("finish"); }
}
static int is_poison(float f) { uint32_t u; memcpy(&u, &f, 4); return u == POISON32; }
static float poison_f(void) { float f; uint32_t u = POISON32; memcpy(&f, &u, 4); return f; }

#define OPOK(call) do { err[0] = 0; int rc_ = (call); CHECK(rc_ == 0, "%s failed: %s", #call, err); \
                        if (rc_) return; } while (0)

/* ------------------------------------------------------------------ comparisons */

/* relative L2 error of got against ref; infinite if got holds inf/NaN (e.g. poison left) */
static double rel_l2(const float *got, const double *ref, size_t n, size_t *worst)
{
    double num = 0, den = 0, wd = -1;
    *worst = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) { *worst = i; return INFINITY; }
        double d = fabs((double)got[i] - ref[i]);
        if (d > wd) { wd = d; *worst = i; }
        num += d * d;
        den += ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static int verbose; /* env CLGEMMA_TEST_VERBOSE=1: print every comparison's error */

static void check_close(const char *what, const float *got, const double *ref, size_t n, double tol)
{
    size_t w;
    double e = rel_l2(got, ref, n, &w);
    if (verbose) printf("  %-90s rel L2 %.3g (tol %.0e)\n", what, e, tol);
    CHECK(e < tol, "%s: relative L2 error %.3g (tolerance %.0e); worst at %zu: got %.9g, want %.9g", what, e,
          tol, w, n ? got[w] : 0.0, n ? ref[w] : 0.0);
}

/* elements [from, to) of p must hold the poison pattern */
static void check_untouched(const char *what, const float *p, size_t from, size_t to)
{
    size_t bad = 0, first = 0;
    for (size_t i = from; i < to; i++)
        if (!is_poison(p[i])) { if (!bad) first = i; bad++; }
    CHECK(bad == 0, "%s: %zu elements outside the output were written (first at %zu: %.9g)", what, bad, first,
          bad ? p[first] : 0.0);
}

/* ------------------------------------------------------------------ golden quantized blocks */

typedef struct golden {
    uint32_t type, rows, cols, row_bytes;
    uint8_t *raw;
    float *exp;
} golden;

static golden G[32];
static uint32_t NG;

static const char *type_name(uint32_t t)
{
    switch (t) {
    case GGML_TYPE_F32: return "F32";
    case GGML_TYPE_F16: return "F16";
    case GGML_TYPE_BF16: return "BF16";
    case GGML_TYPE_Q8_0: return "Q8_0";
    case GGML_TYPE_Q4_0: return "Q4_0";
    case GGML_TYPE_Q4_1: return "Q4_1";
    case GGML_TYPE_Q5_0: return "Q5_0";
    case GGML_TYPE_Q5_1: return "Q5_1";
    case GGML_TYPE_Q4_K: return "Q4_K";
    case GGML_TYPE_Q5_K: return "Q5_K";
    case GGML_TYPE_Q6_K: return "Q6_K";
    default: return "?";
    }
}

static uint32_t rd32(const uint8_t *p) { return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

static int load_golden(const char *argv0)
{
    static const char rel[] = "tests/golden/quant_blocks.bin";
    char path[1024];
    FILE *f = fopen(rel, "rb");
    if (!f) { /* run from elsewhere: the binary lives in build/tests/ */
        const char *s = strrchr(argv0, '/');
        snprintf(path, sizeof path, "%.*s/../../%s", s ? (int)(s - argv0) : 1, s ? argv0 : ".", rel);
        f = fopen(path, "rb");
    }
    if (!f) { printf("FAIL golden: cannot open %s (run from the repository root)\n", rel); return -1; }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n);
    if (!b || fread(b, 1, (size_t)n, f) != (size_t)n) { fclose(f); printf("FAIL golden: read error\n"); return -1; }
    fclose(f);
    if (n < 12 || memcmp(b, "CLGQ", 4) || rd32(b + 4) != 1) { printf("FAIL golden: bad header\n"); return -1; }
    uint32_t count = rd32(b + 8);
    size_t off = 12;
    for (uint32_t i = 0; i < count && NG < 32; i++) {
        if (off + 16 > (size_t)n) { printf("FAIL golden: truncated\n"); return -1; }
        golden *g = &G[NG++];
        g->type = rd32(b + off); g->rows = rd32(b + off + 4); g->cols = rd32(b + off + 8);
        g->row_bytes = rd32(b + off + 12);
        off += 16;
        size_t rawn = (size_t)g->rows * g->row_bytes, expn = (size_t)g->rows * g->cols * 4;
        if (off + rawn + expn > (size_t)n || g->cols % 256 || !ops_type_supported(g->type)) {
            printf("FAIL golden: bad entry %u\n", i);
            return -1;
        }
        g->raw = b + off;
        g->exp = (float *)(b + off + rawn); /* aligned while every raw size is a multiple of 4 */
        if ((uintptr_t)g->exp % 4) { g->exp = malloc(expn); memcpy(g->exp, b + off + rawn, expn); }
        off += rawn + expn;
    }
    return 0;
}

static const golden *golden_of(uint32_t type)
{
    for (uint32_t i = 0; i < NG; i++)
        if (G[i].type == type) return &G[i];
    return NULL;
}

static weight upload_weight(const golden *g)
{
    weight w = { dbuf((size_t)g->rows * g->row_bytes, g->raw), g->type, g->rows, g->cols, g->row_bytes };
    return w;
}

/* ------------------------------------------------------------------ golden file itself */

static void test_golden_complete(void)
{
    reseed(__func__);
    static const uint32_t want[] = { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0,
                                     GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K,
                                     GGML_TYPE_Q6_K };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        const golden *g = golden_of(want[i]);
        CHECK(g != NULL, "no golden entry for %s", type_name(want[i]));
        if (!g) continue;
        size_t bad = 0;
        for (size_t j = 0; j < (size_t)g->rows * g->cols; j++) bad += !isfinite(g->exp[j]);
        CHECK(bad == 0, "%s: %zu non-finite expected values", type_name(g->type), bad);
    }
}

/* ------------------------------------------------------------------ deq_* (dequantized tiles) */

static cl_int launch_deq(const weight *w, uint32_t r0, uint32_t n, cl_mem out)
{
    /* same geometry as op_matmul's prefill path */
    cl_kernel k = O.deq[w->type];
    cl_int e = 0;
    e |= clSetKernelArg(k, 0, sizeof(cl_mem), &w->buf);
    e |= clSetKernelArg(k, 1, sizeof(uint32_t), &w->row_bytes);
    e |= clSetKernelArg(k, 2, sizeof(uint32_t), &r0);
    e |= clSetKernelArg(k, 3, sizeof(uint32_t), &n);
    e |= clSetKernelArg(k, 4, sizeof(uint32_t), &w->cols);
    e |= clSetKernelArg(k, 5, sizeof(cl_mem), &out);
    if (e) return e;
    size_t lws[2] = { RT.is_cpu ? 1 : 32, 1 };
    size_t gws[2] = { (w->cols / 32 + lws[0] - 1) / lws[0] * lws[0], n };
    return clEnqueueNDRangeKernel(RT.q, k, 2, NULL, gws, lws, 0, NULL, NULL);
}

static void test_deq_all_types(void)
{
    reseed(__func__);
    for (uint32_t i = 0; i < NG; i++) {
        const golden *g = &G[i];
        weight w = upload_weight(g);
        size_t full = (size_t)g->rows * g->cols;
        cl_mem out = dbuf((full + PAD) * 4, NULL);
        float *got = malloc((full + PAD) * 4);
        double *ref = malloc(full * 8);
        char what[96];
        /* whole matrix, then a tile r0 > 0 that ends before the last row */
        uint32_t r0s[2] = { 0, 1 + irand(g->rows / 2) }, ns[2] = { g->rows, 0 };
        ns[1] = g->rows - r0s[1] - 1 - irand(2);
        for (int c = 0; c < 2; c++) {
            uint32_t r0 = r0s[c], n = ns[c];
            size_t m = (size_t)n * g->cols;
            poison(out, (full + PAD) * 4);
            cl_int e = launch_deq(&w, r0, n, out);
            CHECK(e == CL_SUCCESS, "deq_%s launch: %s", type_name(g->type), rt_errstr(e));
            dread(out, got, (full + PAD) * 4);
            for (size_t j = 0; j < m; j++) ref[j] = g->exp[(size_t)r0 * g->cols + j];
            snprintf(what, sizeof what, "deq %s rows [%u, %u) of %u x %u", type_name(g->type), r0, r0 + n, g->rows,
                     g->cols);
            check_close(what, got, ref, m, TOL_ELEM);
            check_untouched(what, got, m, full + PAD);
        }
        free(got); free(ref);
        clReleaseMemObject(out); clReleaseMemObject(w.buf);
    }
}

/* ------------------------------------------------------------------ mv_* / op_matmul */

/* X of ntok rows with ld > cols; the gap holds NaN, which a correct product never reads */
static float *make_x(uint32_t cols, uint32_t ntok, uint32_t *ldx)
{
    *ldx = cols + 4 * (1 + irand(3)); /* multiple of 4: the mv kernels load float4 */
    float *x = malloc((size_t)ntok * *ldx * 4);
    for (uint32_t t = 0; t < ntok; t++)
        for (uint32_t k = 0; k < *ldx; k++) x[(size_t)t * *ldx + k] = k < cols ? nrand() : poison_f();
    return x;
}

/* float64 w . x over k values, and in *bound the worst case of rounding x to int8 per 32-block
 * (each value to the nearest of its block's 255 levels: sum |w| * (max|x| / 127) / 2) plus float
 * slack */
static double dot_q8_bound(const float *w, const double *x, uint32_t k, double *bound)
{
    double s = 0, mag = 0;
    *bound = 1e-6;
    for (uint32_t k0 = 0; k0 < k; k0 += 32) {
        double am = 0, wsum = 0;
        for (uint32_t i = k0; i < k0 + 32 && i < k; i++) {
            s += w[i] * x[i];
            mag += fabs(w[i] * x[i]);
            wsum += fabs(w[i]);
            if (fabs(x[i]) > am) am = fabs(x[i]);
        }
        *bound += wsum * am / 127.0 / 2.0;
    }
    *bound += 1e-5 * mag;
    return s;
}

/* int8-X products: every output within its rounding bound. A relative L2 figure over few outputs
 * of wide-ranging blocks has tails that flake (1.8% on 64 expert outputs, 1.9% on 9 rows). */
static void check_bounded(const char *what, const float *got, const double *ref, const double *bound, size_t n)
{
    size_t over = 0, worst = 0;
    double worst_r = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs(got[i] - ref[i]);
        if (!(d <= bound[i])) over++;
        if (!(d / bound[i] <= worst_r)) { worst_r = d / bound[i]; worst = i; }
    }
    if (verbose) printf("  %-90s error / int8 bound %.3g at worst\n", what, worst_r);
    CHECK(over == 0, "%s: %zu outputs beyond the int8 rounding bound; worst at %zu: got %.9g, want %.9g (%.3g x bound)",
          what, over, worst, n ? got[worst] : 0.0, n ? ref[worst] : 0.0, worst_r);
}

/* int8-X outputs within their rounding bounds, others within tol of float64 (relative L2) */
static void check_q8_or_close(const char *what, const float *got, const double *ref, const double *bound, size_t n,
                              int q8, double tol)
{
    if (q8)
        check_bounded(what, got, ref, bound, n);
    else
        check_close(what, got, ref, n, tol);
}

/* reads Y (ntok rows of ldy, PAD after) and checks it against float64 products of the golden
 * dequantized matrix (int8-X products, tol >= TOL_Q8X: within the rounding bound); the gaps
 * between rows and the tail must be untouched */
static void check_product(const char *what, const golden *g, const float *x, uint32_t ldx, uint32_t ntok, cl_mem Y,
                          uint32_t ldy, double tol)
{
    size_t ny = (size_t)ntok * ldy + PAD, m = 0, bad = 0, n = (size_t)ntok * g->rows;
    float *y = malloc(ny * 4), *gotc = calloc(n, 4);
    double *ref = calloc(n, 8), *bound = calloc(n, 8), *xd = malloc((size_t)g->cols * 8);
    dread(Y, y, ny * 4);
    for (uint32_t t = 0; t < ntok; t++) {
        for (uint32_t k = 0; k < g->cols; k++) xd[k] = x[(size_t)t * ldx + k];
        for (uint32_t r = 0; r < g->rows; r++, m++) {
            ref[m] = dot_q8_bound(g->exp + (size_t)r * g->cols, xd, g->cols, &bound[m]);
            gotc[m] = y[(size_t)t * ldy + r];
        }
    }
    check_q8_or_close(what, gotc, ref, bound, n, tol >= TOL_Q8X, tol);
    for (size_t i = 0; i < ny; i++) {
        size_t t = i / ldy, r = i % ldy;
        if ((t >= ntok || r >= g->rows) && !is_poison(y[i])) bad++;
    }
    CHECK(bad == 0, "%s: %zu elements of Y outside the product were written", what, bad);
    free(y); free(gotc); free(ref); free(bound); free(xd);
}

/* Y[t][r] = sum_k W[r][k] X[t][k] through op_matmul; Y has ld > rows */
static void matmul_case(const golden *g, uint32_t ntok)
{
    uint32_t ldx, ldy = g->rows + 1 + irand(5);
    float *x = make_x(g->cols, ntok, &ldx);
    size_t ny = (size_t)ntok * ldy + PAD;
    weight w = upload_weight(g);
    cl_mem X = dbuf((size_t)ntok * ldx * 4, x), Y = dbuf(ny * 4, NULL);
    poison(Y, ny * 4);
    char what[96];
    int q8m = ops_mmq8_fits(&O, g->type, g->rows, g->cols, ntok), mma = O.has_mma && ntok > 4 && !q8m;
    int q8x = q8m || ops_mvq_fits(&O, g->type, g->cols, ntok);
    snprintf(what, sizeof what, "matmul %s %u x %u, ntok %u (%s)", type_name(g->type), g->rows, g->cols, ntok,
             ops_mmt_fits(&O, g->type, g->rows, g->cols, ntok) ?
                 (O.mmta ? "mmta, f16 tiles by cp.async" : "mmt, tiled tensor cores") :
             q8m ? (g->type == GGML_TYPE_Q4_K && O.mmq8s && ntok <= 8 ? "mmq8s, int8 tensor cores, cp.async"
                                                              : "mmq8, int8 tensor cores") : mma ? "mmq, tensor cores" : q8x ? "mvq, int8 dot" :
             ntok <= OPS_MV_MAXT ? "mv" : "deq + GEMM");
    err[0] = 0;
    int rc = op_matmul(&O, &w, X, ldx, Y, ldy, ntok, err, sizeof err);
    CHECK(rc == 0, "%s: %s", what, err);
    if (rc == 0) check_product(what, g, x, ldx, ntok, Y, ldy, mma ? TOL_MMA : q8x ? TOL_Q8X : TOL_RED);
    free(x);
    clReleaseMemObject(X); clReleaseMemObject(Y); clReleaseMemObject(w.buf);
}

static void test_mv_all_types(void)
{
    reseed(__func__);
    /* 1, 3, 8 and the edges of the mv variants (mv4 up to 4 tokens, mv16 up to OPS_MV_MAXT) */
    uint32_t ntoks[] = { 1, 3, 4, 5, 8, OPS_MV_MAXT };
    size_t nn = sizeof ntoks / sizeof *ntoks - (OPS_MV_MAXT <= 8);
    for (uint32_t i = 0; i < NG; i++)
        for (size_t j = 0; j < nn; j++) matmul_case(&G[i], ntoks[j]);
    /* q4_k at 5-8 tokens again on mmq8 itself (the cp.async-staged mmq8s takes it by default) */
    cl_kernel s8 = O.mmq8s;
    const golden *q4 = golden_of(GGML_TYPE_Q4_K);
    if (s8 && q4) {
        O.mmq8s = NULL;
        for (size_t j = 0; j < nn; j++) matmul_case(q4, ntoks[j]);
        O.mmq8s = s8;
    }
}

static void test_matmul_gemm_path(void)
{
    reseed(__func__);
    /* ntok > OPS_MV_MAXT: deq tiles of GEMM_SCRATCH / cols rows (several tiles, a short last one)
     * and CLBlast SGEMM into Y at a row offset */
    static const uint32_t types[] = { GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_F16, GGML_TYPE_Q8_0 };
    static const uint32_t ntoks[] = { OPS_MV_MAXT + 1, 37, 130 };
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        const golden *g = golden_of(types[i]);
        CHECK(g != NULL, "no golden %s", type_name(types[i]));
        if (!g) continue;
        CHECK(GEMM_SCRATCH / g->cols < g->rows, "%s: scratch holds the whole matrix; no tiling tested",
              type_name(g->type));
        for (int j = 0; j < 3; j++) matmul_case(g, ntoks[j]);
    }
}

/* prefill-sized products (tiled tensor-core kernels mmta and mmt on NVIDIA, deq + GEMM
 * elsewhere): a tall matrix made of the golden rows in a shuffled order (three row tiles, the last
 * partial, so every warp's row quarter is covered) and token counts with partial token tiles; the
 * grid-size threshold is lifted so these small grids take the tiles. On NVIDIA every case runs
 * twice: weights made f16 rows and staged by cp.async (mmta), and dequantized in the tiles (mmt,
 * what weights above OPS_WH_MAX take). */
static void test_matmul_tiles(void)
{
    reseed(__func__);
    uint32_t keep = O.mmt_min_groups;
    cl_kernel mmta = O.mmta;
    O.mmt_min_groups = 0;
    for (uint32_t i = 0; i < NG * (mmta ? 2 : 1); i++) {
        O.mmta = i < NG ? mmta : NULL;
        const golden *g0 = &G[i % NG];
        golden g = *g0;
        g.rows = 261 + irand(8);
        g.raw = malloc((size_t)g.rows * g.row_bytes);
        g.exp = malloc((size_t)g.rows * g.cols * 4);
        for (uint32_t r = 0; r < g.rows; r++) {
            uint32_t s = (r * 7 + 3) % g0->rows;
            memcpy(g.raw + (size_t)r * g.row_bytes, g0->raw + (size_t)s * g.row_bytes, g.row_bytes);
            memcpy(g.exp + (size_t)r * g.cols, g0->exp + (size_t)s * g.cols, (size_t)g.cols * 4);
        }
        /* one partial token tile; one whole and one partial */
        uint32_t ntoks[2] = { 64 + irand(60), 200 + irand(50) };
        for (int j = 0; j < 2; j++) {
            CHECK(!O.has_mma || !O.mmt[g.type] || ops_mmt_fits(&O, g.type, g.rows, g.cols, ntoks[j]),
                  "%s: mmt not chosen for %u x %u, %u tokens", type_name(g.type), g.rows, g.cols, ntoks[j]);
            matmul_case(&g, ntoks[j]);
        }
        free(g.raw); free(g.exp);
    }
    O.mmta = mmta;
    O.mmt_min_groups = keep;
}

/* several matrices of the same X in one op (fused Q/K/V, gate/up): every type goes through
 * mv_multi's run-time type switch in some group of equal column counts */
static void multi_case(const uint32_t *types, int n, uint32_t ntok)
{
    const golden *g[3];
    weight w[3];
    cl_mem Y[3];
    mm_out outs[3];
    uint32_t ldy[3];
    char what[160];
    int len = snprintf(what, sizeof what, "matmul_multi ntok %u:", ntok);
    for (int i = 0; i < n; i++) {
        g[i] = golden_of(types[i]);
        if (!g[i]) { CHECK(0, "no golden %s", type_name(types[i])); return; }
        len += snprintf(what + len, sizeof what - (size_t)len, " %s %ux%u", type_name(g[i]->type), g[i]->rows,
                        g[i]->cols);
    }
    uint32_t ldx;
    float *x = make_x(g[0]->cols, ntok, &ldx);
    cl_mem X = dbuf((size_t)ntok * ldx * 4, x);
    for (int i = 0; i < n; i++) {
        w[i] = upload_weight(g[i]);
        ldy[i] = g[i]->rows + irand(4);
        Y[i] = dbuf(((size_t)ntok * ldy[i] + PAD) * 4, NULL);
        poison(Y[i], ((size_t)ntok * ldy[i] + PAD) * 4);
        outs[i] = (mm_out){ &w[i], Y[i], ldy[i] };
    }
    err[0] = 0;
    int rc = op_matmul_multi(&O, outs, n, X, ldx, ntok, err, sizeof err);
    CHECK(rc == 0, "%s: %s", what, err);
    int q8x = ntok <= 4 && ops_mvq_fits(&O, g[0]->type, g[0]->cols, ntok), q8m = 1;
    for (int i = 1; i < n; i++) q8x &= g[i]->type == g[0]->type;
    uint32_t rows = 0;
    for (int i = 0; i < n; i++) rows += g[i]->rows;
    for (int i = 0; i < n; i++) q8m &= ops_mmq8_fits(&O, g[i]->type, rows, g[i]->cols, ntok) && g[i]->cols == g[0]->cols;
    for (int i = 0; i < n && rc == 0; i++) {
        char w2[200];
        snprintf(w2, sizeof w2, "%s -> output %d", what, i);
        /* mixed sets take each output's own path: mmq8 where it fits, else mmq */
        int own8 = ops_mmq8_fits(&O, g[i]->type, g[i]->rows, g[i]->cols, ntok);
        double tol = q8m || own8 || q8x ? TOL_Q8X : O.has_mma && ntok > 4 ? TOL_MMA : TOL_RED;
        check_product(w2, g[i], x, ldx, ntok, Y[i], ldy[i], tol);
    }
    for (int i = 0; i < n; i++) { clReleaseMemObject(Y[i]); clReleaseMemObject(w[i].buf); }
    clReleaseMemObject(X);
    free(x);
}

/* op_matmul_geglu: Y = W . (gelu(G) * U) with U at an offset and its own row stride (the PLE layout),
 * against float64 of the activation computed here; where the int8 product does not fit the op
 * must decline (1) without launching */
static void test_matmul_geglu(void)
{
    reseed(__func__);
    static const uint32_t types[] = { GGML_TYPE_Q4_K, GGML_TYPE_Q8_0, GGML_TYPE_Q5_0, GGML_TYPE_F16 };
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        const golden *g = golden_of(types[i]);
        CHECK(g != NULL, "no golden %s", type_name(types[i]));
        if (!g) continue;
        static const uint32_t ntoks[] = { 1, 4, 7, 16 }; /* mvq, and mmq8's two token tiles */
        for (size_t nj = 0; nj < sizeof ntoks / sizeof *ntoks; nj++) {
            uint32_t ntok = ntoks[nj];
            uint32_t k = g->cols, ldg, u_off = 4 * (uint32_t)irand(9), ldu = 3 * k, ldy = g->rows + 3;
            float *gt = make_x(k, ntok, &ldg), *u = malloc(((size_t)u_off + (size_t)ntok * ldu) * 4);
            float *x = malloc((size_t)ntok * ldg * 4);
            for (size_t j = 0; j < (size_t)u_off + (size_t)ntok * ldu; j++) u[j] = nrand();
            for (uint32_t t = 0; t < ntok; t++)
                for (uint32_t j = 0; j < ldg; j++) {
                    double v = gt[(size_t)t * ldg + j], uu = j < k ? u[u_off + (size_t)t * ldu + j] : 0;
                    x[(size_t)t * ldg + j] =
                        (float)(0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))) * uu);
                }
            weight w = upload_weight(g);
            size_t ny = (size_t)ntok * ldy + PAD;
            cl_mem Gb = dbuf((size_t)ntok * ldg * 4, gt), Ub = dbuf(((size_t)u_off + (size_t)ntok * ldu) * 4, u),
                   Y = dbuf(ny * 4, NULL);
            poison(Y, ny * 4);
            char what[96];
            snprintf(what, sizeof what, "matmul_geglu %s %u x %u, ntok %u", type_name(g->type), g->rows, k, ntok);
            err[0] = 0;
            int rc = op_matmul_geglu(&O, &w, Gb, ldg, Ub, u_off, ldu, Y, ldy, ntok, err, sizeof err);
            if (!ops_mvq_fits(&O, g->type, k, ntok) && !ops_mmq8_fits(&O, g->type, g->rows, k, ntok)) {
                CHECK(rc == 1, "%s: should decline where the int8 product does not fit (rc %d)", what, rc);
            } else {
                CHECK(rc == 0, "%s: %s", what, err);
                if (rc == 0) check_product(what, g, x, ldg, ntok, Y, ldy, TOL_Q8X_GEGLU);
            }
            free(gt); free(u); free(x);
            clReleaseMemObject(Gb); clReleaseMemObject(Ub); clReleaseMemObject(Y); clReleaseMemObject(w.buf);
        }
    }
}

/* MoE expert products (ops_gemma4.h) for n_exp experts of rows_e rows made of golden rows (drawn
 * with replacement): up, gu[s][r] = W_sel[s][r] . X[s / n_used], and down from [gate | up] rows,
 * Y[t][r] = sum_j wsel[t,j] W_sel[t,j][r] . (gelu(gate) * up), against float64. Decode sizes take
 * the int8 expert kernels on NVIDIA (mvqe_T), the float mv layout elsewhere; more tokens the
 * expert-grouped tensor-core path or the per-pair kernels. */
static void moe_case(const golden *g, uint32_t n_exp, uint32_t rows_e, uint32_t n_used, uint32_t ntok)
{
    uint32_t k = g->cols, nsel = ntok * n_used, ldx, nrow = n_exp * rows_e;
    uint32_t *src = malloc(nrow * sizeof *src);
    uint8_t *raw = malloc((size_t)nrow * g->row_bytes);
    for (uint32_t r = 0; r < nrow; r++) {
        src[r] = (uint32_t)irand((int)g->rows);
        memcpy(raw + (size_t)r * g->row_bytes, g->raw + (size_t)src[r] * g->row_bytes, g->row_bytes);
    }
    int32_t *sel = malloc(nsel * 4);
    float *wsel = malloc(nsel * 4), *x = make_x(k, ntok, &ldx), *gu_in = malloc((size_t)nsel * 2 * k * 4);
    for (uint32_t t = 0; t < ntok; t++)
        for (uint32_t j = 0; j < n_used; j++) { /* distinct experts per token, as top-k gives */
            int32_t e, dup;
            do {
                e = irand((int)n_exp);
                dup = 0;
                for (uint32_t i = 0; i < j; i++) dup |= sel[t * n_used + i] == e;
            } while (dup);
            sel[t * n_used + j] = e;
            wsel[t * n_used + j] = 0.1f + (float)urand();
        }
    for (size_t i = 0; i < (size_t)nsel * 2 * k; i++) gu_in[i] = nrand();
    /* float64 references */
    size_t nup = (size_t)nsel * rows_e, ndn = (size_t)ntok * rows_e;
    double *ref_up = calloc(nup, 8), *ref_dn = calloc(ndn, 8), *act = malloc((size_t)nsel * k * 8);
    double *bnd_up = calloc(nup, 8), *bnd_dn = calloc(ndn, 8), *xs = malloc((size_t)k * 8);
    for (size_t s = 0; s < nsel; s++)
        for (uint32_t i = 0; i < k; i++) {
            double gt = gu_in[s * 2 * k + i], u = gu_in[s * 2 * k + k + i];
            act[s * k + i] = 0.5 * gt * (1.0 + tanh(0.7978845608028654 * (gt + 0.044715 * gt * gt * gt))) * u;
        }
    for (uint32_t s = 0; s < nsel; s++) {
        for (uint32_t i = 0; i < k; i++) xs[i] = x[(size_t)(s / n_used) * ldx + i];
        for (uint32_t r = 0; r < rows_e; r++) {
            const float *wr = g->exp + (size_t)src[(size_t)sel[s] * rows_e + r] * k;
            size_t iu = (size_t)s * rows_e + r, id = (size_t)(s / n_used) * rows_e + r;
            double bd;
            ref_up[iu] = dot_q8_bound(wr, xs, k, &bnd_up[iu]);
            ref_dn[id] += wsel[s] * dot_q8_bound(wr, act + (size_t)s * k, k, &bd);
            bnd_dn[id] += wsel[s] * bd;
        }
    }
    weight w = { dbuf((size_t)nrow * g->row_bytes, raw), g->type, nrow, k, g->row_bytes };
    size_t nord = g4_moe_ord_ints(n_exp, nsel);
    cl_mem X = dbuf((size_t)ntok * ldx * 4, x), SEL = dbuf(nsel * 4, sel), WS = dbuf(nsel * 4, wsel),
           GUI = dbuf((size_t)nsel * 2 * k * 4, gu_in), ACT = dbuf((size_t)nsel * k * 4, NULL),
           ORD = dbuf(nord * 4, NULL), YD = dbuf(nup * 4, NULL), UP = dbuf((nup + PAD) * 4, NULL),
           DN = dbuf((ndn + PAD) * 4, NULL);
    poison(UP, (nup + PAD) * 4);
    poison(DN, (ndn + PAD) * 4);
    int q8 = G4.mvqe[g->type] && ntok <= 4;
    char what[128];
    float *got = malloc((nup + PAD) * 4);
    snprintf(what, sizeof what, "moe up %s %u experts x %u rows x %u, %u tokens x %u (%s)", type_name(g->type), n_exp,
             rows_e, k, ntok, n_used, q8 ? "int8 expert products" : "float / tensor cores");
    OPOK(g4_moe_up(&O, &G4, &w, rows_e, X, ldx, SEL, n_used, UP, ORD, ntok, err, sizeof err));
    dread(UP, got, (nup + PAD) * 4);
    check_q8_or_close(what, got, ref_up, bnd_up, nup, q8, TOL_MMA);
    check_untouched(what, got, nup, nup + PAD);
    snprintf(what, sizeof what, "moe down %s %u experts x %u rows x %u, %u tokens x %u (%s)", type_name(g->type),
             n_exp, rows_e, k, ntok, n_used, q8 ? "int8 expert products, geglu folded" : "float / tensor cores");
    OPOK(g4_moe_down(&O, &G4, &w, rows_e, GUI, ACT, SEL, WS, n_used, DN, ORD, YD, ntok, err, sizeof err));
    dread(DN, got, (ndn + PAD) * 4);
    check_q8_or_close(what, got, ref_dn, bnd_dn, ndn, q8, TOL_MMA);
    check_untouched(what, got, ndn, ndn + PAD);
    free(src); free(raw); free(sel); free(wsel); free(x); free(gu_in); free(ref_up); free(ref_dn); free(act);
    free(got); free(bnd_up); free(bnd_dn); free(xs);
    cl_mem ms[] = { w.buf, X, SEL, WS, GUI, ACT, ORD, YD, UP, DN };
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) clReleaseMemObject(ms[i]);
}

static void test_moe_products(void)
{
    reseed(__func__);
    static const uint32_t types[] = { GGML_TYPE_Q4_K, GGML_TYPE_Q8_0, GGML_TYPE_Q5_0 };
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        const golden *g = golden_of(types[i]);
        CHECK(g != NULL, "no golden %s", type_name(types[i]));
        if (!g) continue;
        moe_case(g, 4, 32, 2, 1);
        moe_case(g, 5, 48, 3, 3);
        moe_case(g, 4, 32, 2, 6);
        /* prefill-sized: 64+ pairs per expert take the 128 x 128 expert tiles on NVIDIA (mmte), two
         * tiles for each of 2 experts, a clamped row tile */
        moe_case(g, 2, 32, 2, 150 + irand(20));
    }
}

static void test_matmul_multi(void)
{
    reseed(__func__);
    static const uint32_t c512[] = { GGML_TYPE_Q4_K, GGML_TYPE_Q8_0, GGML_TYPE_F16 };
    static const uint32_t c512b[] = { GGML_TYPE_Q4_1, GGML_TYPE_Q4_K };
    static const uint32_t c256[] = { GGML_TYPE_BF16, GGML_TYPE_Q5_1, GGML_TYPE_F32 };
    static const uint32_t c256b[] = { GGML_TYPE_Q4_0 };
    static const uint32_t c768[] = { GGML_TYPE_Q5_0, GGML_TYPE_Q5_K };
    static const uint32_t c1024[] = { GGML_TYPE_Q6_K };
    /* one type across the matrices: the int8 dot-product kernels (mvq_T) where the device has them */
    static const uint32_t q4k3[] = { GGML_TYPE_Q4_K, GGML_TYPE_Q4_K, GGML_TYPE_Q4_K };
    static const uint32_t q802[] = { GGML_TYPE_Q8_0, GGML_TYPE_Q8_0 };
    multi_case(q4k3, 3, 1);
    multi_case(q4k3, 3, 4);
    multi_case(q802, 2, 2);
    multi_case(q4k3, 3, 12); /* int8 tensor cores (mmq8) with X quantized once for all three */
    multi_case(q802, 2, 6);
    for (uint32_t ntok = 1; ntok <= 4; ntok++) multi_case(c512, 3, ntok);
    multi_case(c512, 3, 5 + irand(OPS_MV_MAXT - 4)); /* more tokens than the fused kernel takes */
    multi_case(c512b, 2, 2);
    multi_case(c256, 3, 3);
    multi_case(c256b, 1, 1);
    multi_case(c768, 2, 4);
    multi_case(c1024, 1, 2);
}

/* ------------------------------------------------------------------ emb_* */

/* O.xq / O.xqs as a producer left them for x (ntok rows of k): per 32-value block the scale
 * max|x| / 127, every value within half a step of x, and the scaled sums of each 16-value half */
static void check_xq_of(const char *what, const float *x, uint32_t ntok, uint32_t k)
{
    size_t nb = (size_t)ntok * k / 32, bad = 0;
    int8_t *q = malloc((size_t)ntok * k);
    float *ds = malloc(nb * 3 * 4);
    dread(O.xq, q, (size_t)ntok * k);
    dread(O.xqs, ds, nb * 3 * 4);
    for (size_t b = 0; b < nb; b++) {
        double am = 0;
        for (int j = 0; j < 32; j++) am = fmax(am, fabs(x[b * 32 + j]));
        double d = am / 127, got = ds[b];
        if (!(fabs(got - d) <= 1e-6 * d + 1e-30)) bad++;
        for (int hh = 0; hh < 2; hh++) {
            long sq = 0;
            for (int j = 16 * hh; j < 16 * hh + 16; j++) {
                sq += q[b * 32 + j];
                if (!(fabs(q[b * 32 + j] * d - x[b * 32 + j]) <= 0.5001 * d + 1e-30)) bad++;
            }
            if (!(fabs(ds[nb + 2 * b + hh] - d * sq) <= 1e-5 * (d * 16 * 127) + 1e-30)) bad++;
        }
    }
    CHECK(bad == 0, "%s: %zu int8 X values or scales off", what, bad);
    free(q); free(ds);
}

/* the decode products again with X quantized beforehand (mvqg_T) where the device has them: the
 * golden matrices are below the size that takes that path by default */
static void test_products_mvqg(void)
{
    if (!O.mvq_xq) return;
    size_t keep = O.mvqg_min_elems;
    uint32_t keep_k = O.mvqg_min_k;
    O.mvqg_min_elems = 0;
    O.mvqg_min_k = 0;
    test_mv_all_types();
    test_matmul_multi();
    test_matmul_geglu();
    /* a norm chain leaves its output's int8 form for the next product (no mvq_xq / q8x_quant
     * launch): in mvqg's layout for 1-4 rows, in mmq8's for 5-16. The product must match float64
     * on the norm's float output within the int8 bound. */
    uint32_t keep_q8x = O.q8x_min_k;
    O.q8x_min_k = 0;
    for (uint32_t i = 0; i < 2 * NG; i++) {
        const golden *g = &G[i % NG];
        int to_mmq8 = i >= NG;
        uint32_t ntok = to_mmq8 ? 5 + irand(12) : 1 + irand(4), n = g->cols, ldy = g->rows + 3;
        if (to_mmq8 ? !ops_mmq8_fits(&O, g->type, g->rows, n, ntok) : !O.mvqg[g->type] || g->cols % 32) continue;
        float *x = malloc((size_t)ntok * n * 4), *wn = malloc((size_t)n * 4), *y0 = malloc((size_t)ntok * n * 4);
        for (size_t j = 0; j < (size_t)ntok * n; j++) x[j] = 3.0f * nrand();
        for (uint32_t j = 0; j < n; j++) wn[j] = 1.0f + 0.5f * nrand();
        weight w = upload_weight(g);
        size_t ny = (size_t)ntok * ldy + PAD;
        cl_mem X = dbuf((size_t)ntok * n * 4, x), WN = dbuf((size_t)n * 4, wn), Y0 = dbuf((size_t)ntok * n * 4, NULL),
               Y = dbuf(ny * 4, NULL);
        poison(Y, ny * 4);
        norm_chain c = { .x = X, .out = { { WN, Y0 } }, .nout = 1 };
        char what[120];
        snprintf(what, sizeof what, "norm_fuse int8 X -> %s %s %u x %u, ntok %u", to_mmq8 ? "mmq8" : "mvqg",
                 type_name(g->type), g->rows, n, ntok);
        OPOK(op_norm_chain(&O, &c, ntok, n, 1e-6f, err, sizeof err));
        CHECK(O.xq_of == Y0, "%s: the norm left no int8 X", what);
        dread(Y0, y0, (size_t)ntok * n * 4);
        if (!to_mmq8) check_xq_of(what, y0, ntok, n);
        OPOK(op_matmul(&O, &w, Y0, n, Y, ldy, ntok, err, sizeof err));
        check_product(what, g, y0, n, ntok, Y, ldy, TOL_Q8X);
        free(x); free(wn); free(y0);
        cl_mem all[] = { X, WN, Y0, Y, w.buf };
        for (size_t j = 0; j < sizeof all / sizeof *all; j++) clReleaseMemObject(all[j]);
    }
    O.q8x_min_k = keep_q8x;
    O.mvqg_min_elems = keep;
    O.mvqg_min_k = keep_k;
}

/* op_norm_matmul: r = (res + norm(x)·wx)·scale into res_out, Y = W . (norm(r)·w0) in one launch
 * (mvqn on NVIDIA; elsewhere it declines and the caller's two ops run): res_out against float64,
 * Y against float64 on the float y within the int8 bound, res untouched */
static void test_norm_matmul(void)
{
    reseed(__func__);
    for (uint32_t i = 0; i < NG; i++) {
        const golden *g = &G[i];
        uint32_t k = g->cols, ntok = 1 + (i % 2) * irand(4), ldy = g->rows + 2; /* fused at one token */
        size_t m = (size_t)ntok * k;
        float *x = malloc(m * 4), *res = malloc(m * 4), *wx = malloc(k * 4), *w0 = malloc(k * 4), *got = malloc(m * 4),
              *y = malloc(m * 4);
        double *rref = malloc(m * 8);
        float scale = (float)frand(0.5, 1.5), eps = 1e-6f;
        for (size_t j = 0; j < m; j++) { x[j] = 2.0f * nrand(); res[j] = 5.0f * nrand(); }
        for (uint32_t j = 0; j < k; j++) { wx[j] = 1.0f + 0.3f * nrand(); w0[j] = 1.0f + 0.3f * nrand(); }
        for (uint32_t t = 0; t < ntok; t++) {
            const float *xt = x + (size_t)t * k, *rt = res + (size_t)t * k;
            double ss = 0, sr = 0;
            for (uint32_t j = 0; j < k; j++) ss += (double)xt[j] * xt[j];
            double ix = 1.0 / sqrt(ss / k + eps);
            for (uint32_t j = 0; j < k; j++) {
                double r = (rt[j] + xt[j] * ix * wx[j]) * scale;
                rref[(size_t)t * k + j] = r;
                sr += r * r;
            }
            double ir = 1.0 / sqrt(sr / k + eps);
            for (uint32_t j = 0; j < k; j++) y[(size_t)t * k + j] = (float)(rref[(size_t)t * k + j] * ir * w0[j]);
        }
        weight w = upload_weight(g);
        cl_mem X = dbuf(m * 4, x), R = dbuf(m * 4, res), RO = dbuf(m * 4, NULL), WX = dbuf(k * 4, wx),
               W0 = dbuf(k * 4, w0), Y = dbuf(((size_t)ntok * ldy + PAD) * 4, NULL);
        poison(Y, ((size_t)ntok * ldy + PAD) * 4);
        mm_out out = { &w, Y, ldy };
        norm_mm c = { X, WX, R, RO, W0, scale };
        char what[120];
        snprintf(what, sizeof what, "norm_matmul %s %u x %u, ntok %u", type_name(g->type), g->rows, k, ntok);
        err[0] = 0;
        int rc = op_norm_matmul(&O, &c, &out, 1, k, ntok, eps, err, sizeof err);
        int want = ntok == 1 && O.mvqn[g->type] && ops_mvq_fits(&O, g->type, k, ntok) && k % 32 == 0 &&
                   (size_t)g->rows * k < O.mvqg_min_elems;
        CHECK(rc == (want ? 0 : 1), "%s: rc %d (%s), expected %s", what, rc, err, want ? "fused" : "declined");
        if (rc == 0) {
            dread(RO, got, m * 4);
            check_close(what, got, rref, m, TOL_RED);
            dread(R, got, m * 4);
            size_t moved = 0;
            for (size_t j = 0; j < m; j++) moved += got[j] != res[j];
            CHECK(moved == 0, "%s: %zu values of res changed", what, moved);
            check_product(what, g, y, k, ntok, Y, ldy, TOL_Q8X);
        }
        free(x); free(res); free(wx); free(w0); free(got); free(y); free(rref);
        cl_mem all[] = { X, R, RO, WX, W0, Y, w.buf };
        for (size_t j = 0; j < sizeof all / sizeof *all; j++) clReleaseMemObject(all[j]);
    }
}

static void test_emb_all_types(void)
{
    reseed(__func__);
    for (uint32_t i = 0; i < NG; i++) {
        const golden *g = &G[i];
        uint32_t ntok = 6 + irand(4);
        int32_t ids[16];
        for (uint32_t t = 0; t < ntok; t++) ids[t] = (int32_t)irand(g->rows);
        ids[0] = (int32_t)(g->rows - 1);
        ids[1] = 0;
        ids[ntok - 1] = ids[2]; /* a repeat */
        float scale = frand(0.5, 30.0);
        size_t m = (size_t)ntok * g->cols, n = m + PAD;
        weight w = upload_weight(g);
        cl_mem I = dbuf(sizeof ids, ids), Y = dbuf(n * 4, NULL);
        poison(Y, n * 4);
        char what[96];
        snprintf(what, sizeof what, "emb %s %u x %u, %u ids, scale %g", type_name(g->type), g->rows, g->cols, ntok,
                 scale);
        err[0] = 0;
        int rc = op_embed(&O, &w, I, ntok, scale, Y, err, sizeof err);
        CHECK(rc == 0, "%s: %s", what, err);
        if (rc == 0) {
            float *y = malloc(n * 4);
            double *ref = malloc(m * 8);
            dread(Y, y, n * 4);
            for (uint32_t t = 0; t < ntok; t++)
                for (uint32_t k = 0; k < g->cols; k++)
                    ref[(size_t)t * g->cols + k] = (double)g->exp[(size_t)ids[t] * g->cols + k] * scale;
            check_close(what, y, ref, m, TOL_ELEM);
            check_untouched(what, y, m, n);
            free(y); free(ref);
        }
        clReleaseMemObject(I); clReleaseMemObject(Y); clReleaseMemObject(w.buf);
    }
}

/* ------------------------------------------------------------------ RMSNorm */

static void rmsnorm_ref(const float *x, const float *w, double *y, uint32_t rows, uint32_t n, double eps)
{
    for (uint32_t r = 0; r < rows; r++) {
        double ss = 0;
        for (uint32_t i = 0; i < n; i++) ss += (double)x[(size_t)r * n + i] * x[(size_t)r * n + i];
        double inv = 1.0 / sqrt(ss / n + eps);
        for (uint32_t i = 0; i < n; i++) y[(size_t)r * n + i] = x[(size_t)r * n + i] * inv * w[i];
    }
}

static void fill_rows(float *x, uint32_t rows, uint32_t n)
{
    for (uint32_t r = 0; r < rows; r++) {
        float s = (float)pow(10.0, urand() * 4 - 2); /* row scales 0.01 .. 100 */
        for (uint32_t i = 0; i < n; i++) x[(size_t)r * n + i] = nrand() * s;
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
    OPOK(op_rmsnorm(&O, X, W, Y, rows, n, eps, err, sizeof err));
    dread(Y, y, tot * 4);
    check_close(what, y, ref, m, TOL_RED);
    check_untouched(what, y, m, tot);
    /* in place (y == x), as the engine does for the final norm */
    OPOK(op_rmsnorm(&O, X, W, X, rows, n, eps, err, sizeof err));
    dread(X, y, tot * 4);
    snprintf(what, sizeof what, "rmsnorm in place %u x %u", rows, n);
    check_close(what, y, ref, m, TOL_RED);
    check_untouched(what, y, m, tot);
    free(x); free(w); free(y); free(ref);
    clReleaseMemObject(X); clReleaseMemObject(W); clReleaseMemObject(Y);
}

static void test_rmsnorm(void)
{
    reseed(__func__);
    rmsnorm_case(3 + irand(5), 640 + 1 + 2 * irand(200)); /* odd: not a multiple of any work-group */
    rmsnorm_case(2, 7);                                   /* fewer values than work-items */
    rmsnorm_case(1 + irand(4), 4 * (160 + irand(500)));    /* float4 rows: the fused kernel */
}

static void test_rmsnorm_add(void)
{
    reseed(__func__);
    uint32_t rows = 3 + irand(5), n = 1152 - 1 - 2 * irand(100);
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
    OPOK(op_rmsnorm_add(&O, X, W, R, rows, n, eps, err, sizeof err));
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
    uint32_t rows = 3 + irand(5), n = 1152 - 1 - 2 * irand(100);
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
    OPOK(op_rmsnorm_add_norm(&O, X, W1, R, W2, Y, rows, n, eps, err, sizeof err));
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
    OPOK(op_norm_chain(&O, &c, rows, n, eps, err, sizeof err));
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
    /* bad arguments are refused, not launched */
    norm_chain bad = { .x = NULL, .nout = 0 };
    CHECK(op_norm_chain(&O, &bad, 1, 64, 1e-6f, err, sizeof err) != 0, "a chain without outputs or residual ran");
    CHECK(op_norm_chain(&O, &bad, 1, 66, 1e-6f, err, sizeof err) != 0, "a chain of 66 values (not float4s) ran");
}

/* ------------------------------------------------------------------ paged KV layout (kv.h) */

typedef struct paged {
    uint32_t nseq, max_blocks, bs, nblocks, nkv, hd;
    int32_t table[64 * 32];
    uint32_t spare; /* a pool block no sequence owns: unused table entries point at it */
} paged;

/* block tables for sequences of lens[s] positions, blocks drawn from a shuffled pool with spares */
static void paged_make(paged *p, uint32_t nseq, const uint32_t *lens, uint32_t bs, uint32_t nkv, uint32_t hd)
{
    memset(p, 0, sizeof *p);
    p->nseq = nseq; p->bs = bs; p->nkv = nkv; p->hd = hd;
    uint32_t need = 0, mb = 0;
    for (uint32_t s = 0; s < nseq; s++) {
        uint32_t b = (lens[s] + bs - 1) / bs;
        need += b;
        if (b > mb) mb = b;
    }
    p->max_blocks = mb + 2;
    p->nblocks = need + 3;
    int32_t perm[256];
    for (uint32_t i = 0; i < p->nblocks; i++) perm[i] = (int32_t)i;
    shuffle(perm, p->nblocks);
    uint32_t k = 0;
    p->spare = (uint32_t)perm[p->nblocks - 1];
    for (uint32_t s = 0; s < nseq; s++)
        for (uint32_t b = 0; b < p->max_blocks; b++)
            p->table[s * p->max_blocks + b] = b < (lens[s] + bs - 1) / bs ? perm[k++] : (int32_t)p->spare;
}

static size_t paged_elems(const paged *p) { return (size_t)p->nblocks * p->nkv * p->bs * p->hd; }
static size_t paged_at(const paged *p, uint32_t seq, uint32_t pos, uint32_t head)
{
    size_t blk = (size_t)p->table[seq * p->max_blocks + pos / p->bs];
    return ((blk * p->nkv + head) * p->bs + pos % p->bs) * p->hd;
}

/* ------------------------------------------------------------------ norm + NEOX RoPE */

typedef struct rope_cfg { uint32_t hd, rot; int norm, has_w; double base; } rope_cfg;

static float *make_freq(uint32_t rot, double base)
{
    float *f = malloc((rot / 2 + 1) * 4);
    for (uint32_t i = 0; i < rot / 2; i++) f[i] = (float)pow(base, -2.0 * i / rot);
    return f;
}

/* one row of hd values: optional RMS norm (times w), then NEOX rotation of pairs (i, i + rot/2) */
static void norm_rope_ref(const float *x, const float *w, int norm, int has_w, double eps, const float *freq,
                          uint32_t hd, uint32_t rot, int pos, double *y)
{
    double inv = 1.0;
    if (norm) {
        double ss = 0;
        for (uint32_t i = 0; i < hd; i++) ss += (double)x[i] * x[i];
        inv = 1.0 / sqrt(ss / hd + eps);
    }
    double b[1024];
    for (uint32_t i = 0; i < hd; i++) b[i] = x[i] * inv * (norm && has_w ? w[i] : 1.0);
    for (uint32_t i = 0; i < hd; i++) y[i] = b[i];
    for (uint32_t i = 0; i < rot / 2; i++) {
        double th = (double)pos * freq[i], c = cos(th), s = sin(th);
        y[i] = b[i] * c - b[i + rot / 2] * s;
        y[i + rot / 2] = b[i] * s + b[i + rot / 2] * c;
    }
}

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
        int rc = op_norm_rope(&O, X, ntok, nh, hd, cf->has_w ? W : NULL, cf->norm, eps, F, cf->rot, P, S, NULL, err,
                              sizeof err);
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

/* Rows (token, kv head) written to the paged cache as half: checks every written slot against ref
 * and that every other half of the cache still holds the poison. */
static void check_cache(const char *what, const paged *p, const uint16_t *cache, uint32_t ntok, const int32_t *pos,
                        const int32_t *seq, const double *ref)
{
    size_t n = paged_elems(p), m = (size_t)ntok * p->nkv * p->hd;
    char *written = calloc(n, 1);
    float *got = malloc(m * 4);
    for (uint32_t t = 0; t < ntok; t++)
        for (uint32_t h = 0; h < p->nkv; h++) {
            size_t at = paged_at(p, (uint32_t)seq[t], (uint32_t)pos[t], h);
            for (uint32_t i = 0; i < p->hd; i++) {
                written[at + i] = 1;
                got[((size_t)t * p->nkv + h) * p->hd + i] = (float)h2d(cache[at + i]);
            }
        }
    check_close(what, got, ref, m, TOL_HALF);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (!written[i] && cache[i] != POISON16) { if (!bad) first = i; bad++; }
    CHECK(bad == 0, "%s: %zu halves of the cache outside the token slots were written (first at %zu)", what, bad,
          first);
    free(written); free(got);
}

/* tokens: distinct (seq, pos) pairs within lens, in shuffled order */
static uint32_t make_tokens(uint32_t nseq, const uint32_t *lens, uint32_t per_seq, int32_t *pos, int32_t *seq)
{
    uint32_t n = 0;
    for (uint32_t s = 0; s < nseq; s++) {
        uint32_t k = per_seq < lens[s] ? per_seq : lens[s];
        for (uint32_t i = 0; i < k; i++) {
            int32_t p;
            int dup;
            do {
                p = i == 0 ? (int32_t)lens[s] - 1 : (int32_t)irand(lens[s]);
                dup = 0;
                for (uint32_t j = 0; j < n; j++) dup |= seq[j] == (int32_t)s && pos[j] == p;
            } while (dup);
            pos[n] = p; seq[n] = (int32_t)s; n++;
        }
    }
    for (uint32_t i = n; i > 1; i--) { /* shuffle the pairs together */
        uint32_t j = irand(i);
        int32_t a = pos[i - 1], b = seq[i - 1];
        pos[i - 1] = pos[j]; seq[i - 1] = seq[j]; pos[j] = a; seq[j] = b;
    }
    return n;
}

static void test_norm_rope_k_cache(void)
{
    reseed(__func__);
    for (size_t c = 0; c < sizeof rope_cfgs / sizeof *rope_cfgs; c++) {
        const rope_cfg *cf = &rope_cfgs[c];
        uint32_t nkv = 2, hd = cf->hd, bs = c % 2 ? 16 : KV_BLOCK;
        uint32_t lens[3] = { 40 + irand(100), 1 + irand(40), 100 + irand(60) };
        paged p;
        paged_make(&p, 3, lens, bs, nkv, hd);
        int32_t pos[16], seq[16];
        uint32_t ntok = make_tokens(3, lens, 3, pos, seq);
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
        kv_view kv = { C, BT, p.max_blocks, bs };
        char what[128];
        snprintf(what, sizeof what, "norm_rope K->cache ntok %u nkv %u hd %u rot %u norm %d w %d block %u", ntok,
                 nkv, hd, cf->rot, cf->norm, cf->has_w, bs);
        err[0] = 0;
        int rc = op_norm_rope(&O, X, ntok, nkv, hd, cf->has_w ? W : NULL, cf->norm, eps, F, cf->rot, P, S, &kv, err,
                              sizeof err);
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

static void test_v_store(void)
{
    reseed(__func__);
    for (int norm = 0; norm < 2; norm++) {
        uint32_t nkv = 2, hd = norm ? 256 : 64, bs = norm ? KV_BLOCK : 16;
        uint32_t lens[3] = { 1 + irand(30), 60 + irand(100), 33 + irand(10) };
        paged p;
        paged_make(&p, 3, lens, bs, nkv, hd);
        int32_t pos[16], seq[16];
        uint32_t ntok = make_tokens(3, lens, 4, pos, seq);
        float eps = 1e-6f;
        size_t m = (size_t)ntok * nkv * hd, nc = paged_elems(&p);
        float *x = malloc(m * 4), *one = malloc(hd * 4);
        double *ref = malloc(m * 8);
        uint16_t *cache = malloc(nc * 2);
        fill_rows(x, ntok * nkv, hd);
        for (uint32_t i = 0; i < hd; i++) one[i] = 1.0f;
        for (uint32_t r = 0; r < ntok * nkv; r++) /* rot 0: norm only (or identity) */
            norm_rope_ref(x + (size_t)r * hd, one, norm, 0, eps, NULL, hd, 0, 0, ref + (size_t)r * hd);
        cl_mem X = dbuf(m * 4, x), P = dbuf(sizeof pos, pos), S = dbuf(sizeof seq, seq), C = dbuf(nc * 2, NULL),
               BT = dbuf(sizeof p.table, p.table);
        poison16(C, nc * 2);
        kv_view kv = { C, BT, p.max_blocks, bs };
        char what[96];
        snprintf(what, sizeof what, "v_store ntok %u nkv %u hd %u norm %d block %u", ntok, nkv, hd, norm, bs);
        err[0] = 0;
        int rc = op_v_store(&O, X, ntok, nkv, hd, norm, eps, P, S, &kv, err, sizeof err);
        CHECK(rc == 0, "%s: %s", what, err);
        if (rc == 0) {
            dread(C, cache, nc * 2);
            check_cache(what, &p, cache, ntok, pos, seq, ref);
        }
        free(x); free(one); free(ref); free(cache);
        clReleaseMemObject(X); clReleaseMemObject(P); clReleaseMemObject(S); clReleaseMemObject(C);
        clReleaseMemObject(BT);
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
    cl_kernel wk = O.qkv_rope_w;
    size_t ncfg = sizeof cfgs / sizeof *cfgs, keep_rows = O.qkv_rope_w_min_rows;
    O.qkv_rope_w_min_rows = 0; /* these few tokens take it too */
    for (size_t cp = 0; cp < ncfg * (wk ? 2 : 1); cp++) {
        size_t c = cp % ncfg;
        O.qkv_rope_w = cp < ncfg ? wk : NULL;
        uint32_t nh = 4, nkv = 2, hd = cfgs[c].hd, rot = cfgs[c].rot, bs = c % 2 ? 16 : KV_BLOCK;
        int qn = cfgs[c].qk_norm, vn = cfgs[c].v_norm;
        uint32_t lens[3] = { 40 + irand(100), 1 + irand(40), 100 + irand(60) };
        paged p;
        paged_make(&p, 3, lens, bs, nkv, hd);
        int32_t pos[16], seq[16];
        uint32_t ntok = make_tokens(3, lens, 3, pos, seq);
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
        kv_view kk = { KC, BT, p.max_blocks, bs }, vv = { VC, BT, p.max_blocks, bs };
        char what[160];
        snprintf(what, sizeof what, "qkv_rope%s ntok %u nh %u nkv %u hd %u rot %u qk_norm %d v_norm %d block %u",
                 O.qkv_rope_w && rot % 64 == 0 ? "_w" : "", ntok, nh, nkv, hd, rot, qn, vn, bs);
        err[0] = 0;
        int rc = op_qkv_rope(&O, Q, K, V, ntok, nh, nkv, hd, qn == 1 ? QW : NULL, qn == 1 ? KW : NULL, qn, vn, eps, F,
                             rot, P, S, &kk, &vv, err, sizeof err);
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
    O.qkv_rope_w = wk;
    O.qkv_rope_w_min_rows = keep_rows;
}

/* ------------------------------------------------------------------ attention */

/* chunk: keys per split-KV chunk; 0 = what ops_attn_split picks for the batch (the engine's way) */
typedef struct attn_cfg { int window; float scale, softcap; uint32_t hd, chunk; } attn_cfg;

/* float64 softmax attention of one (token, head) over the paged cache */
static void attn_ref(const paged *p, const uint16_t *K, const uint16_t *V, const float *q, uint32_t seq, int pos,
                     uint32_t kh, const attn_cfg *cf, double *out)
{
    int lo = cf->window > 0 && pos - cf->window + 1 > 0 ? pos - cf->window + 1 : 0;
    double *s = malloc(sizeof(double) * (size_t)(pos + 1)), mx = -INFINITY, l = 0;
    for (int j = lo; j <= pos; j++) {
        const uint16_t *k = K + paged_at(p, seq, (uint32_t)j, kh);
        double d = 0;
        for (uint32_t i = 0; i < p->hd; i++) d += (double)q[i] * h2d(k[i]);
        d *= cf->scale;
        if (cf->softcap > 0) d = cf->softcap * tanh(d / cf->softcap);
        s[j] = d;
        if (d > mx) mx = d;
    }
    for (uint32_t i = 0; i < p->hd; i++) out[i] = 0;
    for (int j = lo; j <= pos; j++) {
        double e = exp(s[j] - mx);
        l += e;
        const uint16_t *v = V + paged_at(p, seq, (uint32_t)j, kh);
        for (uint32_t i = 0; i < p->hd; i++) out[i] += e * h2d(v[i]);
    }
    for (uint32_t i = 0; i < p->hd; i++) out[i] /= l;
    free(s);
}

/* random K and V for positions [0, lens[s]) of every sequence; unfilled slots hold NaN */
static void fill_cache(const paged *p, const uint32_t *lens, uint16_t *K, uint16_t *V)
{
    for (size_t i = 0; i < paged_elems(p); i++) K[i] = V[i] = POISON16;
    for (uint32_t s = 0; s < p->nseq; s++)
        for (uint32_t j = 0; j < lens[s]; j++)
            for (uint32_t h = 0; h < p->nkv; h++) {
                size_t at = paged_at(p, s, j, h);
                for (uint32_t i = 0; i < p->hd; i++) { K[at + i] = f2h(nrand()); V[at + i] = f2h(nrand()); }
            }
}

static void test_attention(void)
{
    reseed(__func__);
    static const attn_cfg cfgs[] = {
        { 0, 0.125f, 0.0f, 64, OPS_ATTN_CHUNK },     /* plain causal, largest chunks (2-3 per long context) */
        { 100, 0.125f, 0.0f, 64, 0 },                /* sliding window shorter than one chunk */
        { 0, 0.5f, 3.0f, 64, OPS_ATTN_MIN_CHUNK },   /* softcap saturating the scores, many small chunks */
        { 280, 0.25f, 20.0f, 64, 100 },              /* window spanning chunks of an odd size, softcap */
        { 7, 0.125f, 5.0f, 64, OPS_ATTN_MIN_CHUNK }, /* tiny window, softcap */
        { 0, 0.0625f, 0.0f, 256, 0 },                /* Gemma 3 head_dim */
        /* head dims of the warp-per-key kernels (attn_dec on NVIDIA) */
        { 280, 0.0625f, 20.0f, 256, 100 },           /* window over odd chunks, softcap */
        { 7, 0.0625f, 5.0f, 256, OPS_ATTN_MIN_CHUNK }, /* tiny window */
        { 0, 0.044f, 0.0f, 512, OPS_ATTN_CHUNK },    /* Gemma 4 global layers, largest chunks */
        { 0, 0.044f, 0.0f, 512, 0 },
    };
    const uint32_t nh = 4, nkv = 2, nseq = 4;
    for (size_t c = 0; c < sizeof cfgs / sizeof *cfgs; c++) {
        const attn_cfg *cf = &cfgs[c];
        uint32_t hd = cf->hd;
        /* one context past two 256-key chunks, one past one, a short one and a tiny one */
        uint32_t lens[4] = { 520 + irand(60), 257 + irand(100), 30 + irand(60), 1 + irand(5) };
        paged p;
        paged_make(&p, nseq, lens, KV_BLOCK, nkv, hd);
        int32_t pos[32], seq[32];
        uint32_t T = make_tokens(nseq, lens, 4, pos, seq);
        /* make sure chunk edges are among the query positions of the long sequence */
        for (uint32_t t = 0; t < T; t++)
            if (seq[t] == 0 && pos[t] != (int32_t)lens[0] - 1) { pos[t] = 256; break; }
        for (uint32_t t = 0; t < T; t++)
            if (seq[t] == 1 && pos[t] != (int32_t)lens[1] - 1) { pos[t] = 255; break; }
        size_t nc = paged_elems(&p), nq = (size_t)T * nh * hd, tot = nq + PAD;
        uint16_t *K = malloc(nc * 2), *V = malloc(nc * 2);
        fill_cache(&p, lens, K, V);
        float *q = malloc(nq * 4), *out = malloc(tot * 4);
        double *ref = malloc(nq * 8);
        for (size_t i = 0; i < nq; i++) q[i] = nrand();
        uint32_t max_pos = 0;
        for (uint32_t t = 0; t < T; t++) {
            if ((uint32_t)pos[t] > max_pos) max_pos = (uint32_t)pos[t];
            for (uint32_t h = 0; h < nh; h++)
                attn_ref(&p, K, V, q + ((size_t)t * nh + h) * hd, (uint32_t)seq[t], pos[t], h / (nh / nkv), cf,
                         ref + ((size_t)t * nh + h) * hd);
        }
        /* chunks cover the longest span in the batch, as the engine sizes them */
        uint32_t span = max_pos + 1, chunk = cf->chunk, nchunk;
        if (cf->window > 0 && span > (uint32_t)cf->window) span = (uint32_t)cf->window;
        if (chunk) nchunk = (span + chunk - 1) / chunk;
        else ops_attn_split(&O, span, T, nh, &chunk, &nchunk);
        size_t npart = (size_t)T * nh * nchunk;
        cl_mem Q = dbuf(nq * 4, q), KC = dbuf(nc * 2, K), VC = dbuf(nc * 2, V), BT = dbuf(sizeof p.table, p.table),
               P = dbuf(sizeof pos, pos), S = dbuf(sizeof seq, seq), PA = dbuf(npart * hd * 4, NULL),
               PM = dbuf(npart * 2 * 4, NULL), OUT = dbuf(tot * 4, NULL);
        uint32_t *cnt = calloc((size_t)T * nh, 4);
        cl_mem CNT = dbuf((size_t)T * nh * 4, cnt);
        kv_view kk = { KC, BT, p.max_blocks, KV_BLOCK }, vv = { VC, BT, p.max_blocks, KV_BLOCK };
        char what[160];
        uint32_t t0 = 2 + irand(T - 4);
        snprintf(what, sizeof what,
                 "attention T %u nh %u nkv %u hd %u window %d softcap %g chunk %u x %u lens %u/%u/%u/%u", T, nh, nkv,
                 hd, cf->window, cf->softcap, nchunk, chunk, lens[0], lens[1], lens[2], lens[3]);
        poison(OUT, tot * 4);
        poison(PA, npart * hd * 4);
        poison(PM, npart * 2 * 4);
        /* slice [t0, T) first: rows before t0 must stay untouched */
        OPOK(op_attention(&O, Q, t0, T - t0, nh, nkv, hd, &kk, &vv, P, S, cf->window, cf->scale, cf->softcap, nchunk,
                          chunk, PA, PM, CNT, OUT, err, sizeof err));
        dread(OUT, out, tot * 4);
        char w2[200];
        snprintf(w2, sizeof w2, "%s, slice t0 %u", what, t0);
        check_close(w2, out + (size_t)t0 * nh * hd, ref + (size_t)t0 * nh * hd, nq - (size_t)t0 * nh * hd, TOL_RED);
        check_untouched(w2, out, 0, (size_t)t0 * nh * hd);
        check_untouched(w2, out, nq, tot);
        /* then [0, t0) with freshly poisoned partials */
        poison(PA, npart * hd * 4);
        poison(PM, npart * 2 * 4);
        OPOK(op_attention(&O, Q, 0, t0, nh, nkv, hd, &kk, &vv, P, S, cf->window, cf->scale, cf->softcap, nchunk,
                          chunk, PA, PM, CNT, OUT, err, sizeof err));
        dread(OUT, out, tot * 4);
        snprintf(w2, sizeof w2, "%s, all tokens", what);
        check_close(w2, out, ref, nq, TOL_RED);
        check_untouched(w2, out, nq, tot);
        if (O.attn_dec[0] && hd >= 256 && O.mvq_xq) {
            /* a decode batch (up to 4 tokens from 0) also leaves its output as the int8 X of the
             * output projection when that takes mvqg (any k here) */
            uint32_t nt = T < 4 ? T : 4, keep_k = O.mvqg_min_k;
            O.mvqg_min_k = 0;
            OPOK(op_attention(&O, Q, 0, nt, nh, nkv, hd, &kk, &vv, P, S, cf->window, cf->scale, cf->softcap, nchunk,
                              chunk, PA, PM, CNT, OUT, err, sizeof err));
            O.mvqg_min_k = keep_k;
            snprintf(w2, sizeof w2, "%s, int8 output of %u tokens", what, nt);
            CHECK(O.xq_of == OUT, "%s: no int8 output", w2);
            dread(OUT, out, tot * 4);
            check_close(w2, out, ref, (size_t)nt * nh * hd, TOL_RED);
            check_xq_of(w2, out, nt, nh * hd);
        }
        /* the merging groups reset their counters: the next launch finds them at zero */
        dread(CNT, cnt, (size_t)T * nh * 4);
        size_t stale = 0;
        for (size_t i = 0; i < (size_t)T * nh; i++) stale += cnt[i] != 0;
        CHECK(stale == 0, "%s: %zu attention counters left non-zero", what, stale);
        if (c == 0) { /* chunks the kernel's score buffer cannot hold are refused */
            CHECK(op_attention(&O, Q, 0, T, nh, nkv, hd, &kk, &vv, P, S, 0, 1.0f, 0.0f, 1, OPS_ATTN_CHUNK + 1, PA, PM,
                               CNT, OUT, err, sizeof err) != 0, "op_attention accepted chunk %u", OPS_ATTN_CHUNK + 1);
            CHECK(op_attention(&O, Q, 0, T, nh, nkv, hd, &kk, &vv, P, S, 0, 1.0f, 0.0f, 1, 0, PA, PM, CNT, OUT, err,
                               sizeof err) != 0, "op_attention accepted chunk 0");
        }
        free(K); free(V); free(q); free(out); free(ref); free(cnt);
        cl_mem all[] = { Q, KC, VC, BT, P, S, PA, PM, CNT, OUT };
        for (size_t i = 0; i < sizeof all / sizeof *all; i++) clReleaseMemObject(all[i]);
    }
}

/* a forward batch as the engine builds it: each sequence's new tokens form one run at consecutive
 * positions after its earlier context. Long runs take the flash kernel where the device has it,
 * short ones the split-KV kernels, in one op_attention_batch call. */
typedef struct attn_bcfg { uint32_t nh, nkv; attn_cfg a; } attn_bcfg;

static void test_attention_batch(void)
{
    reseed(__func__);
    static const attn_bcfg cfgs[] = {
        { 4, 1, { 0, 0.0625f, 0.0f, 256, 0 } },   /* Gemma 3 270M: 4 heads on one KV head */
        { 4, 1, { 24, 0.0625f, 0.0f, 256, 0 } },  /* sliding window shorter than a tile's keys */
        { 16, 2, { 0, 0.044f, 0.0f, 512, 0 } },   /* Gemma 4 global layers: 512 dims, 8 heads per KV head */
        { 4, 2, { 37, 0.125f, 5.0f, 64, 0 } },    /* softcap, window, two KV heads */
        { 8, 8, { 0, 0.0884f, 0.0f, 128, 0 } },   /* no grouping: 64 tokens per tile */
    };
    const uint32_t nseq = 4;
    /* on NVIDIA every case twice: attn_fa (head dims 128 / 256 / 512) and attn_flash */
    cl_kernel fa[3] = { O.fa[0], O.fa[1], O.fa[2] };
    size_t ncfg = sizeof cfgs / sizeof *cfgs, passes = fa[0] ? 2 : 1;
    for (size_t cp = 0; cp < ncfg * passes; cp++) {
        size_t c = cp % ncfg;
        for (int i = 0; i < 3; i++) O.fa[i] = cp < ncfg ? fa[i] : NULL;
        const attn_cfg *cf = &cfgs[c].a;
        uint32_t nh = cfgs[c].nh, nkv = cfgs[c].nkv, hd = cf->hd;
        /* earlier context and new tokens per sequence: long runs, a short run, a single token */
        uint32_t prior[4] = { 200 + irand(100), 0, 33 + irand(40), 5 + irand(20) };
        uint32_t fresh[4] = { 40 + irand(30), 3, 70 + irand(60), 1 };
        uint32_t lens[4];
        for (uint32_t s = 0; s < nseq; s++) lens[s] = prior[s] + fresh[s];
        paged p;
        paged_make(&p, nseq, lens, KV_BLOCK, nkv, hd);
        uint32_t T = 0, max_pos = 0;
        for (uint32_t s = 0; s < nseq; s++) T += fresh[s];
        int32_t *pos = malloc(T * 4), *seq = malloc(T * 4);
        /* sequence order shuffled so the short runs sit between the long ones */
        static const uint32_t order[4] = { 1, 0, 3, 2 };
        uint32_t t = 0;
        for (uint32_t i = 0; i < nseq; i++)
            for (uint32_t j = 0; j < fresh[order[i]]; j++, t++) {
                seq[t] = (int32_t)order[i];
                pos[t] = (int32_t)(prior[order[i]] + j);
                if ((uint32_t)pos[t] > max_pos) max_pos = (uint32_t)pos[t];
            }
        size_t nc = paged_elems(&p), nq = (size_t)T * nh * hd;
        uint16_t *K = malloc(nc * 2), *V = malloc(nc * 2);
        fill_cache(&p, lens, K, V);
        float *q = malloc(nq * 4), *out = malloc(nq * 4);
        double *ref = malloc(nq * 8);
        for (size_t i = 0; i < nq; i++) q[i] = nrand();
        for (t = 0; t < T; t++)
            for (uint32_t h = 0; h < nh; h++)
                attn_ref(&p, K, V, q + ((size_t)t * nh + h) * hd, (uint32_t)seq[t], pos[t], h / (nh / nkv), cf,
                         ref + ((size_t)t * nh + h) * hd);
        /* partials for 8 tokens at the smallest chunk: the split path must slice */
        size_t part_elems = (size_t)8 * nh * hd * (max_pos / OPS_ATTN_MIN_CHUNK + 1);
        cl_mem Q = dbuf(nq * 4, q), KC = dbuf(nc * 2, K), VC = dbuf(nc * 2, V), BT = dbuf(sizeof p.table, p.table),
               P = dbuf(T * 4, pos), S = dbuf(T * 4, seq), PA = dbuf(part_elems * 4, NULL),
               PM = dbuf(part_elems / hd * 2 * 4, NULL), OUT = dbuf(nq * 4, NULL);
        uint32_t *zero = calloc(part_elems / hd, 4);
        cl_mem CNT = dbuf(part_elems / hd * 4, zero);
        free(zero);
        kv_view kk = { KC, BT, p.max_blocks, KV_BLOCK }, vv = { VC, BT, p.max_blocks, KV_BLOCK };
        attn_layer al = { nh, nkv, hd, cf->window, cf->scale, cf->softcap, &kk, &vv };
        attn_batch ab = { Q, OUT, P, S, seq, T, max_pos, PA, PM, CNT, part_elems, hd };
        int flash = ops_flash_ok(&O, nh, nkv, hd);
        char what[200];
        snprintf(what, sizeof what, "attention batch (%s) T %u nh %u nkv %u hd %u window %d softcap %g runs %u/%u/%u/%u",
                 !flash ? "split" : (hd == 128 || hd == 256 || hd == 512) && O.fa[0] ? "fa + split" : "flash + split",
                 T, nh, nkv, hd, cf->window, cf->softcap, fresh[1], fresh[0],
                 fresh[3], fresh[2]);
        poison(OUT, nq * 4);
        OPOK(op_attention_batch(&O, &ab, &al, err, sizeof err));
        dread(OUT, out, nq * 4);
        check_close(what, out, ref, nq, flash ? TOL_MMA : TOL_RED);
        free(K); free(V); free(q); free(out); free(ref); free(pos); free(seq);
        cl_mem all[] = { Q, KC, VC, BT, P, S, PA, PM, CNT, OUT };
        for (size_t i = 0; i < sizeof all / sizeof *all; i++) clReleaseMemObject(all[i]);
    }
    for (int i = 0; i < 3; i++) O.fa[i] = fa[i];
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
    OPOK(op_geglu(&O, G_, U, Y, n, err, sizeof err));
    dread(Y, y, tot * 4);
    check_close("geglu", y, ref, n, TOL_ELEM);
    check_untouched("geglu", y, n, tot);
    OPOK(op_geglu(&O, G_, U, G_, n, err, sizeof err)); /* in place, as the engine runs it */
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
    OPOK(op_gather_rows(&O, S, I, Y, rows, n, err, sizeof err));
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
    OPOK(op_softcap(&O, X, cap, n, err, sizeof err));
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
    OPOK(op_add(&O, X, U, n, err, sizeof err));
    OPOK(op_scale(&O, X, s, n, err, sizeof err));
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
    OPOK(op_argmax(&O, X, rows, n, Y, err, sizeof err));
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
    CHECK(op_argmax(&O, X, 257, 1, Y, err, sizeof err) != 0, "op_argmax accepted 257 rows (limit 256)");
    clReleaseMemObject(X); clReleaseMemObject(Y);
}

/* ------------------------------------------------------------------ main */

int main(int argc, char **argv)
{
    (void)argc;
    const char *s = getenv("CLGEMMA_TEST_SEED");
    seed0 = s && *s ? strtoull(s, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)clock() << 20);
    verbose = getenv("CLGEMMA_TEST_VERBOSE") != NULL;
    printf("seed %llu (replay: CLGEMMA_TEST_SEED=%llu)\n", (unsigned long long)seed0, (unsigned long long)seed0);
    check_current = "setup";
    if (rt_create(&RT, NULL, 0, err, sizeof err)) { printf("FAIL setup: rt_create: %s\n", err); return 1; }
    printf("device: %s (%s)\n", RT.device_name, RT.platform_name);
    if (rt_build(&RT, NULL, NULL, err, sizeof err)) { printf("FAIL setup: rt_build: %s\n", err); return 1; }
    printf("kernels built in %.2f s (%s)\n", RT.build_seconds, RT.cache_hit ? "binary cache" : "from source");
    if (ops_init(&O, &RT, GEMM_SCRATCH, err, sizeof err)) { printf("FAIL setup: ops_init: %s\n", err); return 1; }
    O.mmq8_min_elems = 0; /* the golden matrices are small: every fitting product takes mmq8 */
    if (ops_g4_init(&G4, &RT, err, sizeof err)) { printf("FAIL setup: ops_g4_init: %s\n", err); return 1; }
    if (load_golden(argv[0])) return 1;
    fflush(stdout);

    RUN_TEST(test_golden_complete);
    RUN_TEST(test_deq_all_types);
    RUN_TEST(test_mv_all_types);
    RUN_TEST(test_emb_all_types);
    RUN_TEST(test_matmul_gemm_path);
    RUN_TEST(test_matmul_tiles);
    RUN_TEST(test_matmul_multi);
    RUN_TEST(test_moe_products);
    RUN_TEST(test_matmul_geglu);
    RUN_TEST(test_products_mvqg);
    RUN_TEST(test_norm_matmul);
    RUN_TEST(test_rmsnorm);
    RUN_TEST(test_rmsnorm_add);
    RUN_TEST(test_rmsnorm_add_norm);
    RUN_TEST(test_norm_chain);
    RUN_TEST(test_norm_rope_q);
    RUN_TEST(test_norm_rope_k_cache);
    RUN_TEST(test_v_store);
    RUN_TEST(test_qkv_rope);
    RUN_TEST(test_attention);
    RUN_TEST(test_attention_batch);
    RUN_TEST(test_geglu);
    RUN_TEST(test_gather_rows);
    RUN_TEST(test_softcap);
    RUN_TEST(test_add_scale);
    RUN_TEST(test_argmax_rows);
    check_current = "teardown";
    finish();
    ops_g4_destroy(&G4);
    ops_destroy(&O);
    rt_destroy(&RT);
    CHECK_EXIT();
}
