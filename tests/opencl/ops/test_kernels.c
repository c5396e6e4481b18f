/* test_kernels.c — the weight kernels, through the ops.h launchers, against an independent
 * plain-C float64 reference (kernels_fixture.h: seeds, poisoned buffers, tolerances).
 *
 * Weight kernels (deq_*, mv4_* / mv16_*, mv_multi, the int8 and tensor-core products, emb_*, the
 * MoE expert products, the norm chain fused into a product, and the deq + CLBlast GEMM path of
 * op_matmul) are checked against tests/golden/quant_blocks.bin (tools/gen_quant_golden.py):
 * random GGUF blocks of every supported type and their dequantization by gguf-py, which
 * mirrors llama.cpp's layouts independently of the kernels. Norms, RoPE, attention and row ops:
 * test_kernels_rows.c. */
#include "kernels_fixture.h"


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

/* a matrix of rows rows made of g0's rows in a shuffled order (r -> (r * mul + add) % g0->rows);
 * free its raw and exp */
static golden golden_rows(const golden *g0, uint32_t rows, uint32_t mul, uint32_t add)
{
    golden g = *g0;
    g.rows = rows;
    g.raw = malloc((size_t)rows * g.row_bytes);
    g.exp = malloc((size_t)rows * g.cols * 4);
    for (uint32_t r = 0; r < rows; r++) {
        uint32_t s = (r * mul + add) % g0->rows;
        memcpy(g.raw + (size_t)r * g.row_bytes, g0->raw + (size_t)s * g.row_bytes, g.row_bytes);
        memcpy(g.exp + (size_t)r * g.cols, g0->exp + (size_t)s * g.cols, (size_t)g.cols * 4);
    }
    return g;
}

/* a matrix of rows rows of wide times g0's columns: row r is g0's rows r * wide .. r * wide + wide - 1
 * (mod g0->rows) side by side (a row of a block type is whole blocks); free its raw and exp */
static golden golden_wide(const golden *g0, uint32_t rows, uint32_t wide)
{
    golden g = *g0;
    g.rows = rows;
    g.cols = g0->cols * wide;
    g.row_bytes = g0->row_bytes * wide;
    g.raw = malloc((size_t)rows * g.row_bytes);
    g.exp = malloc((size_t)rows * g.cols * 4);
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t j = 0; j < wide; j++) {
            uint32_t s = (r * wide + j) % g0->rows;
            memcpy(g.raw + (size_t)r * g.row_bytes + (size_t)j * g0->row_bytes, g0->raw + (size_t)s * g0->row_bytes,
                   g0->row_bytes);
            memcpy(g.exp + (size_t)r * g.cols + (size_t)j * g0->cols, g0->exp + (size_t)s * g0->cols,
                   (size_t)g0->cols * 4);
        }
    return g;
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
    cl_kernel k = O.mm.deq[w->type];
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
    int mmh = ops_mmh_fits(&O, g->type, g->rows, g->cols, ntok);
    int q8m = !mmh && ops_mmq8_fits(&O, g->type, g->rows, g->cols, ntok), mma = O.has_mma && ntok > 4 && !q8m;
    uint32_t tp = ops_q8x_tpad(ntok), nt = tp <= 8 ? 0 : tp <= 16 ? 1 : tp <= 32 ? 2 : 3;
    int q8x = q8m || ops_mvq_fits(&O, g->type, g->cols, ntok);
    snprintf(what, sizeof what, "matmul %s %u x %u, ntok %u (%s)", type_name(g->type), g->rows, g->cols, ntok,
             mmh ? "mmh, f16 tensor cores, X shared" :
             ops_mmt_fits(&O, g->type, g->rows, g->cols, ntok) ?
                 (O.mm.mmtw && O.pol.wgmma && g->type != GGML_TYPE_F16 ? "mmtw, wgmma on bulk-copied tiles" :
                  O.mm.mmta ? "mmta, f16 tiles by cp.async" : "mmt, tiled tensor cores") :
             q8m ? (O.q8.mmq8s[g->type] && ntok <= 8 ? "mmq8s, int8 tensor cores, cp.async" :
                    O.q8.mmq8r[nt][g->type] && ntok >= O.pol.mmq8r_min_tok ? "mmq8r, X shared by 4 warps" :
                    O.q8.mmq8p[nt][g->type] ? "mmq8p, int8 tensor cores, per-warp cp.async" :
                                                                       "mmq8, int8 tensor cores") :
             mma ? "mmq, tensor cores" : q8x ? "mvq, int8 dot" :
             ntok <= OPS_MV_MAXT ? "mv" : "deq + GEMM");
    err[0] = 0;
    int rc = OPRC(op_matmul(&O, &w, X, ldx, Y, ldy, ntok));
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
    /* q4_k again on the kernel the defaults pass over: mmq8p at 5-8 tokens (mmq8s takes them) */
    cl_kernel s8 = O.q8.mmq8s[GGML_TYPE_Q4_K];
    const golden *q4 = golden_of(GGML_TYPE_Q4_K);
    if (s8 && q4) {
        O.q8.mmq8s[GGML_TYPE_Q4_K] = NULL;
        for (size_t j = 0; j < nn; j++) matmul_case(q4, ntoks[j]);
        O.q8.mmq8s[GGML_TYPE_Q4_K] = s8;
    }
}

/* the float GEMV over few rows (the MoE router's geometry): items a row doubled past MV_TPR until
 * the grid has its warps, here to the largest group, so a row's sums cross warps (mv4 at 1 token,
 * mv16 at 5) */
static void test_mv_few_rows(void)
{
    reseed(__func__);
    uint32_t keep = O.pol.mv_warps_per_cu;
    O.pol.mv_warps_per_cu = 1u << 20;
    for (uint32_t i = 0; i < NG; i++) {
        for (uint32_t ntok = 1; ntok <= 5; ntok += 4) matmul_case(&G[i], ntok);
        /* rows of 8,192+ values: segments of up to a whole group */
        golden g = golden_wide(&G[i], 37, (8192 + G[i].cols - 1) / G[i].cols);
        matmul_case(&g, 1 + irand(4));
        free(g.raw); free(g.exp);
    }
    O.pol.mv_warps_per_cu = keep;
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
 * on each tile kernel the device has: weights made f16 tiles and multiplied by wgmma (mmtw, compute
 * capability 9.0) or staged by cp.async (mmta), and dequantized in the tiles (mmt, what weights
 * above OPS_WH_MAX take). */
static void test_matmul_tiles(void)
{
    reseed(__func__);
    uint32_t keep = O.pol.mmt_min_groups;
    cl_kernel mmta = O.mm.mmta, mmtw = O.mm.mmtw;
    uint32_t passes = mmtw ? 3 : mmta ? 2 : 1;
    uint32_t keep_h = O.pol.mmh_max_tok;
    O.pol.mmt_min_groups = 0;
    O.pol.mmh_max_tok = 0; /* below 256 tokens a product takes mmh first */
    O.act_int8 = 0; /* prefill forwards: below 256 tokens a decode step's products take mmq8 */
    for (uint32_t i = 0; i < NG * passes; i++) {
        O.mm.mmtw = i < NG ? mmtw : NULL;
        O.mm.mmta = i / NG + 1 < passes ? mmta : NULL;
        golden g = golden_rows(&G[i % NG], 261 + irand(8), 7, 3);
        /* one partial token tile; one whole and one partial */
        uint32_t ntoks[2] = { 64 + irand(60), 200 + irand(50) };
        for (int j = 0; j < 2; j++) {
            CHECK(!O.has_mma || !O.mm.mmt[g.type] || ops_mmt_fits(&O, g.type, g.rows, g.cols, ntoks[j]),
                  "%s: mmt not chosen for %u x %u, %u tokens", type_name(g.type), g.rows, g.cols, ntoks[j]);
            matmul_case(&g, ntoks[j]);
        }
        free(g.raw); free(g.exp);
    }
    O.mm.mmta = mmta;
    O.mm.mmtw = mmtw;
    O.pol.mmt_min_groups = keep;
    O.pol.mmh_max_tok = keep_h;
    O.act_int8 = 1;
}

/* several matrices of the same X in one op (fused Q/K/V, gate/up): every type goes through
 * mv_multi's run-time type switch in some group of equal column counts */
/* rows: each matrix's row count (golden rows repeated), or NULL for the golden matrices themselves */
static void multi_case_rows(const uint32_t *types, int n, uint32_t ntok, const uint32_t *rows_of)
{
    const golden *g[3];
    golden tall[3];
    weight w[3];
    cl_mem Y[3];
    mm_out outs[3];
    uint32_t ldy[3];
    char what[160];
    int len = snprintf(what, sizeof what, "matmul_multi ntok %u:", ntok);
    for (int i = 0; i < n; i++) {
        g[i] = golden_of(types[i]);
        if (!g[i]) { CHECK(0, "no golden %s", type_name(types[i])); return; }
        if (rows_of) {
            tall[i] = golden_rows(g[i], rows_of[i], 5 + 2 * (uint32_t)i, (uint32_t)i);
            g[i] = &tall[i];
        }
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
    int rc = OPRC(op_matmul_multi(&O, outs, n, X, ldx, ntok));
    CHECK(rc == 0, "%s: %s", what, err);
    /* int8 dot products where every matrix's type has them (mixed types: a launch per run of one type) */
    int q8x = ntok <= 4, q8m = 1;
    for (int i = 0; i < n; i++) q8x &= ops_mvq_fits(&O, g[i]->type, g[i]->cols, ntok) && g[i]->cols == g[0]->cols;
    uint32_t rows = 0;
    for (int i = 0; i < n; i++) rows += g[i]->rows;
    int hm = 1; /* mmh for all, X made f16 once */
    for (int i = 0; i < n; i++) hm &= ops_mmh_fits(&O, g[i]->type, rows, g[i]->cols, ntok) && g[i]->cols == g[0]->cols;
    for (int i = 0; i < n; i++) q8m &= !hm && ops_mmq8_fits(&O, g[i]->type, rows, g[i]->cols,
    ntok) && g[i]->cols == g[0]->cols;
    for (int i = 0; i < n && rc == 0; i++) {
        char w2[200];
        snprintf(w2, sizeof w2, "%s -> output %d", what, i);
        /* mixed sets take each output's own path: mmq8 where it fits, else mmq */
        int own8 = !hm && !ops_mmh_fits(&O, g[i]->type, g[i]->rows, g[i]->cols, ntok) &&
                   ops_mmq8_fits(&O, g[i]->type, g[i]->rows, g[i]->cols, ntok);
        double tol = q8m || own8 || q8x ? TOL_Q8X : O.has_mma && ntok > 4 ? TOL_MMA : TOL_RED;
        check_product(w2, g[i], x, ldx, ntok, Y[i], ldy[i], tol);
    }
    for (int i = 0; i < n; i++) { clReleaseMemObject(Y[i]); clReleaseMemObject(w[i].buf); }
    for (int i = 0; i < n && rows_of; i++) { free(tall[i].raw); free(tall[i].exp); }
    clReleaseMemObject(X);
    free(x);
}

static void multi_case(const uint32_t *types, int n, uint32_t ntok) { multi_case_rows(types, n, ntok, NULL); }

/* op_matmul_geglu: Y = W . (gelu(G) * U) with U at an offset and its own row stride (the PLE layout),
 * against float64 of the activation computed here; where the int8 product does not fit, the
 * activation in place then the product, on the layouts that path takes (G rows of k; U laid out
 * as G, or a slice of wider rows at a multiple of k). The same for op_matmul_glu with SiLU (Qwen's
 * SwiGLU; U laid out as G where the int8 product does not fit). */
static void test_matmul_geglu(void)
{
    reseed(__func__);
    static const uint32_t types[] = { GGML_TYPE_Q4_K, GGML_TYPE_Q8_0, GGML_TYPE_Q5_0, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, GGML_TYPE_F16 };
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        const golden *g = golden_of(types[i]);
        CHECK(g != NULL, "no golden %s", type_name(types[i]));
        if (!g) continue;
        /* mvq, mmq8's two token tiles, and a prefill's tiles (on NVIDIA the activation written as the
         * down product's f16 tiles, mmt_cvt_glu), the grid threshold lifted for them */
        static const uint32_t ntoks[] = { 1, 4, 7, 16, 40, 130 };
        uint32_t keep_mg = O.pol.mmt_min_groups, keep_h = O.pol.mmh_max_tok;
        for (int act = OPS_ACT_GELU; act <= OPS_ACT_SILU; act++)
        for (size_t nj = 0; nj < sizeof ntoks / sizeof *ntoks; nj++) {
            uint32_t ntok = ntoks[nj];
            int tiles = ntok > 64; /* 40: mmh, the activation applied as X is made f16 */
            O.act_int8 = !tiles;
            O.pol.mmt_min_groups = tiles ? 0 : keep_mg;
            O.pol.mmh_max_tok = tiles ? 0 : keep_h;
            uint32_t k = g->cols, ldg, u_off = 4 * (uint32_t)irand(9), ldu = 3 * k, ldy = g->rows + 3;
            float *gt = make_x(k, ntok, &ldg);
            int hf = ops_mmh_fits(&O, g->type, g->rows, k, ntok);
            int q8 = !hf && (ops_mvq_fits(&O, g->type, k, ntok) || ops_mmq8_fits(&O, g->type, g->rows, k, ntok));
            if (!q8 && !hf) {
                for (uint32_t t = 1; t < ntok; t++) memmove(gt + (size_t)t * k, gt + (size_t)t * ldg, k * 4);
                ldg = k;
                u_off = nj % 2 && act == OPS_ACT_GELU ? k * (uint32_t)irand(3) : 0;
                ldu = nj % 2 && act == OPS_ACT_GELU ? 3 * k : k;
            }
            float *u = malloc(((size_t)u_off + (size_t)ntok * ldu) * 4), *x = malloc((size_t)ntok * ldg * 4);
            for (size_t j = 0; j < (size_t)u_off + (size_t)ntok * ldu; j++) u[j] = nrand();
            for (uint32_t t = 0; t < ntok; t++)
                for (uint32_t j = 0; j < ldg; j++) {
                    double v = gt[(size_t)t * ldg + j], uu = j < k ? u[u_off + (size_t)t * ldu + j] : 0;
                    double av = act == OPS_ACT_SILU ? v / (1.0 + exp(-v))
                                                    : 0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
                    x[(size_t)t * ldg + j] = (float)(av * uu);
                }
            weight w = upload_weight(g);
            size_t ny = (size_t)ntok * ldy + PAD;
            cl_mem Gb = dbuf((size_t)ntok * ldg * 4, gt), Ub = dbuf(((size_t)u_off + (size_t)ntok * ldu) * 4, u),
                   Y = dbuf(ny * 4, NULL);
            poison(Y, ny * 4);
            char what[96];
            snprintf(what, sizeof what, "matmul_glu %s %s %u x %u, ntok %u%s", act == OPS_ACT_SILU ? "silu" : "gelu",
                     type_name(g->type), g->rows, k, ntok, tiles ? " (prefill tiles)" : "");
            err[0] = 0;
            int rc = act == OPS_ACT_GELU ? OPRC(op_matmul_geglu(&O, &w, Gb, ldg, Ub, u_off, ldu, Y, ldy, ntok))
                                         : OPRC(op_matmul_glu(&O, act, &w, Gb, ldg, Ub, u_off, ldu, Y, ldy, ntok));
            CHECK(rc == 0, "%s: %s", what, err);
            if (rc == 0)
                check_product(what, g, x, ldg, ntok, Y, ldy,
                              q8 ? TOL_Q8X_GEGLU : O.has_mma && ntok > 4 ? TOL_MMA : TOL_RED);
            free(gt); free(u); free(x);
            clReleaseMemObject(Gb); clReleaseMemObject(Ub); clReleaseMemObject(Y); clReleaseMemObject(w.buf);
        }
        O.act_int8 = 1;
        O.pol.mmt_min_groups = keep_mg;
        O.pol.mmh_max_tok = keep_h;
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
    size_t nord = ops_moe_ord_ints(n_exp, nsel);
    cl_mem X = dbuf((size_t)ntok * ldx * 4, x), SEL = dbuf(nsel * 4, sel), WS = dbuf(nsel * 4, wsel),
           GUI = dbuf((size_t)nsel * 2 * k * 4, gu_in), ACT = dbuf((size_t)nsel * k * 4, NULL),
           ORD = dbuf(nord * 4, NULL), YD = dbuf(nup * 4, NULL), UP = dbuf((nup + PAD) * 4, NULL),
           DN = dbuf((ndn + PAD) * 4, NULL);
    poison(UP, (nup + PAD) * 4);
    poison(DN, (ndn + PAD) * 4);
    int q8 = O.moe.mvqe[g->type] && ntok <= 4;
    char what[128];
    float *got = malloc((nup + PAD) * 4);
    snprintf(what, sizeof what, "moe up %s %u experts x %u rows x %u, %u tokens x %u (%s)", type_name(g->type), n_exp,
             rows_e, k, ntok, n_used, q8 ? "int8 expert products" : "float / tensor cores");
    OPOK(op_moe_up(&O, &w, rows_e, X, ldx, SEL, n_used, UP, ORD, ntok));
    dread(UP, got, (nup + PAD) * 4);
    check_q8_or_close(what, got, ref_up, bnd_up, nup, q8, TOL_MMA);
    check_untouched(what, got, nup, nup + PAD);
    snprintf(what, sizeof what, "moe down %s %u experts x %u rows x %u, %u tokens x %u (%s)", type_name(g->type),
             n_exp, rows_e, k, ntok, n_used, q8 ? "int8 expert products, geglu folded" : "float / tensor cores");
    OPOK(op_moe_down(&O, &w, rows_e, GUI, ACT, SEL, WS, n_used, DN, ORD, YD, ntok));
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
    static const uint32_t types[] = { GGML_TYPE_Q4_K, GGML_TYPE_Q8_0, GGML_TYPE_Q5_0, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K };
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
        /* experts of whole row tiles: on compute capability 9.0 wgmma over gathered X tiles (mmtwe),
         * two row tiles an expert, partial pair tiles */
        moe_case(g, 3, 256, 2, 200 + irand(40));
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
    /* rows in whole mmq8 groups: the matrices share one launch (Q/K/V, gate/up) */
    static const uint32_t qkv_rows[] = { 96, 32, 64 }, gu_rows[] = { 64, 64 };
    multi_case_rows(q4k3, 3, 13, qkv_rows);
    multi_case_rows(q802, 2, 7, gu_rows);
    multi_case_rows(q802, 2, 16, gu_rows);
    for (uint32_t ntok = 1; ntok <= 4; ntok++) multi_case(c512, 3, ntok);
    multi_case(c512, 3, 5 + irand(OPS_MV_MAXT - 4)); /* more tokens than the fused kernel takes */
    multi_case(c512b, 2, 2);
    multi_case(c256, 3, 3);
    multi_case(c256b, 1, 1);
    multi_case(c768, 2, 4); /* q5_0 beside q5_k: int8 products of each type, X quantized once */
    multi_case(c768, 2, 1);
    multi_case(c1024, 1, 2);
}

/* batched decode past 16 tokens on the int8 tensor cores: every token-tile width (32, 64) and
 * several 64-token blocks, with partial tiles and blocks, for every int8 type (q6_k's two mmas
 * per sub-block among them), against float64 within the int8 bound; then the tiles' side of the
 * limit (MMQ8_MAX_TOK) */
static void test_mmq8_wide(void)
{
    reseed(__func__);
    static const uint32_t ntoks[] = { 17, 32, 33, 64, 65, 100, 256 };
    int ran = 0;
    uint32_t keep_g = O.pol.mmq8g_max_tok, keep_h = O.pol.mmh_max_tok;
    O.pol.mmq8g_max_tok = OPS_MMQ8_MAXT; /* every type's kernel at every width, not only q4_k's */
    O.pol.mmh_max_tok = 0;                /* the int8 kernels, not mmh, at 17-256 tokens */
    for (uint32_t i = 0; i < NG; i++)
        for (size_t j = 0; j < sizeof ntoks / sizeof *ntoks; j++) {
            if (!ops_mmq8_fits(&O, G[i].type, G[i].rows, G[i].cols, ntoks[j])) continue;
            matmul_case(&G[i], ntoks[j]);
            ran++;
        }
    if (!O.has_mma) { O.pol.mmq8g_max_tok = keep_g; O.pol.mmh_max_tok = keep_h; return; }
    CHECK(ran >= 5 * 7, "int8 tensor-core products ran %d cases, want all of q4_k, q5_k, q6_k, q8_0, q5_0", ran);
    const golden *q6 = golden_of(GGML_TYPE_Q6_K);
    CHECK(q6 && !ops_mmq8_fits(&O, q6->type, q6->rows, q6->cols, OPS_MMQ8_MAXT + 1),
          "%u tokens still taken by mmq8", OPS_MMQ8_MAXT + 1);
    /* Q/K/V in one launch (q4_k's ring kernel), and of two types (the q5_0 pair in one launch, q5_k
     * alone), X quantized once */
    static const uint32_t q4k3[] = { GGML_TYPE_Q4_K, GGML_TYPE_Q4_K, GGML_TYPE_Q4_K };
    static const uint32_t mixed[] = { GGML_TYPE_Q5_0, GGML_TYPE_Q5_0, GGML_TYPE_Q5_K };
    static const uint32_t rows[] = { 96, 64, 64 };
    multi_case_rows(q4k3, 3, 70, rows);
    multi_case_rows(mixed, 3, 24, rows);
    multi_case_rows(mixed, 3, 129, rows);
    /* k split across groups (the partial Ys added by mmq8_sum): one warp a group, a unit a slice */
    ops_policy keep = O.pol;
    O.pol.mmq8_warps = 1;
    O.pol.mmq8_slice_units = 1;
    static const uint32_t few[] = { 6, 16, 40, 64, 130 };
    for (uint32_t i = 0; i < NG; i++)
        for (size_t j = 0; j < sizeof few / sizeof *few; j++)
            if (ops_mmq8_fits(&O, G[i].type, G[i].rows, G[i].cols, few[j])) matmul_case(&G[i], few[j]);
    /* q4_k on mmq8r from 9 tokens: 4 warps of 32 rows share each unit's X, so a group's warps may lie
     * in different matrices (Q/K/V of 96 + 64 + 64 rows) or past the last row, and k slices */
    const golden *q4 = golden_of(GGML_TYPE_Q4_K);
    O.pol = keep;
    O.pol.mmq8r_min_tok = 9;
    static const uint32_t shared[] = { 9, 16, 17, 32, 33, 64, 100, 256 };
    for (size_t j = 0; q4 && j < sizeof shared / sizeof *shared; j++) matmul_case(q4, shared[j]);
    multi_case_rows(q4k3, 3, 12, rows);
    multi_case_rows(q4k3, 3, 70, rows);
    O.pol.mmq8_slice_units = 1;
    for (size_t j = 0; q4 && j < sizeof few / sizeof *few; j++)
        if (few[j] >= 9) matmul_case(q4, few[j]);
    O.pol = keep;
    O.pol.mmq8g_max_tok = keep_g;
    O.pol.mmh_max_tok = keep_h;
}

/* batched decode from 17 tokens on f16 tensor cores (mmh): every quantized type at every token-tile
 * width (16, 32, 64) and several 64-token blocks with partial tiles and blocks, against float64
 * within TOL_MMA; matrices sharing X in one launch (warps of one group in different matrices, and
 * past the last row); k split across groups (the partial Ys added); 9 and 16 tokens (16 a group) */
static void test_mmh_wide(void)
{
    reseed(__func__);
    static const uint32_t ntoks[] = { 17, 32, 33, 64, 65, 100, 256 };
    int ran = 0;
    for (uint32_t i = 0; i < NG; i++)
        for (size_t j = 0; j < sizeof ntoks / sizeof *ntoks; j++) {
            if (!ops_mmh_fits(&O, G[i].type, G[i].rows, G[i].cols, ntoks[j])) continue;
            matmul_case(&G[i], ntoks[j]);
            ran++;
        }
    if (!O.has_mma) return;
    CHECK(ran >= 8 * 7, "mmh ran %d cases, want every quantized type at every width", ran);
    static const uint32_t q4k3[] = { GGML_TYPE_Q4_K, GGML_TYPE_Q4_K, GGML_TYPE_Q4_K };
    static const uint32_t q6q8[] = { GGML_TYPE_Q6_K, GGML_TYPE_Q8_0 };
    static const uint32_t rows[] = { 96, 64, 64 }, odd[] = { 100, 60 };
    multi_case_rows(q4k3, 3, 70, rows);
    multi_case_rows(q4k3, 3, 20, rows);
    multi_case_rows(q6q8, 2, 40, odd); /* of two types: a launch each */
    ops_policy keep = O.pol;
    O.pol.mmh_slots = 1u << 20; /* k slices wherever a slice keeps a unit */
    O.pol.mmq8_slice_units = 1;
    static const uint32_t few[] = { 17, 40, 64, 130 };
    for (uint32_t i = 0; i < NG; i++)
        for (size_t j = 0; j < sizeof few / sizeof *few; j++)
            if (ops_mmh_fits(&O, G[i].type, G[i].rows, G[i].cols, few[j])) matmul_case(&G[i], few[j]);
    O.pol.mmh_slice_shared_max_tok = 64; /* matrices sharing X, each with its partial Ys */
    multi_case_rows(q4k3, 3, 70, rows);
    multi_case_rows(q4k3, 3, 20, rows);
    O.pol.mmh_min_tok = 9;
    multi_case_rows(q4k3, 3, 16, rows);
    multi_case_rows(q4k3, 3, 9, rows);
    O.pol = keep;
    O.pol.mmh_min_tok = 9; /* the 16-token kernels, which the defaults leave to the int8 products */
    for (uint32_t i = 0; i < NG; i++)
        for (uint32_t nt = 9; nt <= 16; nt += 7)
            if (ops_mmh_fits(&O, G[i].type, G[i].rows, G[i].cols, nt)) matmul_case(&G[i], nt);
    O.pol = keep;
}

/* ------------------------------------------------------------------ int8 X hand-offs, fused norm chains */


/* the decode products again with X quantized beforehand (mvqg_T) where the device has them: the
 * golden matrices are below the size that takes that path by default */
static void test_products_mvqg(void)
{
    if (!O.act.mvq_xq) return;
    uint32_t keep = O.pol.mvqg_min_elems, keep_k = O.pol.mvqg_min_k, keep_pair = O.pol.mvqg_pair;
    O.pol.mvqg_min_elems = 0;
    O.pol.mvqg_min_k = 0;
    test_mv_all_types();
    O.pol.mvqg_pair = 2; /* q4_k in sub-block pairs at every row length, then by the rule again */
    test_mv_all_types();
    O.pol.mvqg_pair = keep_pair;
    test_matmul_multi();
    test_matmul_geglu();
    /* rows of 8,192+ values (a 2-byte aligned q6_k row is many super-blocks of each alignment) */
    static const uint32_t long_types[] = { GGML_TYPE_Q4_K, GGML_TYPE_Q8_0, GGML_TYPE_Q5_0, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K };
    for (size_t i = 0; i < sizeof long_types / sizeof *long_types; i++) {
        const golden *g0 = golden_of(long_types[i]);
        if (!g0 || !O.q8.mvqg[g0->type]) continue;
        golden g = golden_wide(g0, 37, (8192 + g0->cols - 1) / g0->cols + (uint32_t)irand(3));
        for (uint32_t ntok = 1; ntok <= 4; ntok++) matmul_case(&g, ntok);
        free(g.raw); free(g.exp);
    }
    /* a norm chain leaves its output's int8 form for the next product (no mvq_xq / q8x_quant
     * launch): in mvqg's layout for 1-4 rows, in mmq8's for 5-16. The product must match float64
     * on the norm's float output within the int8 bound. */
    uint32_t keep_q8x = O.pol.q8x_min_k;
    O.pol.q8x_min_k = 0;
    for (uint32_t i = 0; i < 2 * NG; i++) {
        const golden *g = &G[i % NG];
        int to_mmq8 = i >= NG;
        uint32_t ntok = to_mmq8 ? 5 + irand(12) : 1 + irand(4), n = g->cols, ldy = g->rows + 3;
        if (to_mmq8 ? !ops_mmq8_fits(&O, g->type, g->rows, n, ntok) : !O.q8.mvqg[g->type] || g->cols % 32) continue;
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
        OPOK(op_norm_chain(&O, &c, ntok, n, 1e-6f));
        CHECK(O.act.xq_of == Y0, "%s: the norm left no int8 X", what);
        dread(Y0, y0, (size_t)ntok * n * 4);
        if (to_mmq8) check_q8x_of(what, y0, ntok, n);
        else check_xq_of(what, y0, ntok, n);
        OPOK(op_matmul(&O, &w, Y0, n, Y, ldy, ntok));
        check_product(what, g, y0, n, ntok, Y, ldy, TOL_Q8X);
        free(x); free(wn); free(y0);
        cl_mem all[] = { X, WN, Y0, Y, w.buf };
        for (size_t j = 0; j < sizeof all / sizeof *all; j++) clReleaseMemObject(all[j]);
    }
    O.pol.q8x_min_k = keep_q8x;
    O.pol.mvqg_min_elems = keep;
    O.pol.mvqg_min_k = keep_k;
}

/* op_norm_matmul: r = (res + norm(x)·wx)·scale, Y = W . (norm(r)·w0): in one launch (mvqn on NVIDIA,
 * the new residual written to the spare buffer, the pair flipped, the old one untouched) or as the
 * chain then the product. The new residual against float64, Y against float64 on the float y
 * (within the int8 bound where X is rounded to int8) */
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
        int raw = i % 3 == 2; /* y = r itself (no w0): the PLE input of Gemma 4 E-models */
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
            for (uint32_t j = 0; j < k; j++)
                y[(size_t)t * k + j] = (float)(raw ? rref[(size_t)t * k + j] : rref[(size_t)t * k + j] * ir * w0[j]);
        }
        weight w = upload_weight(g);
        cl_mem X = dbuf(m * 4, x), R = dbuf(m * 4, res), RO = dbuf(m * 4, NULL), WX = dbuf(k * 4, wx),
               W0 = dbuf(k * 4, w0), Y = dbuf(((size_t)ntok * ldy + PAD) * 4, NULL), YN = dbuf(m * 4, NULL);
        poison(Y, ((size_t)ntok * ldy + PAD) * 4);
        mm_out out = { &w, Y, ldy };
        norm_chain c = { .x = X, .wx = WX, .scale = scale, .out = { { W0, YN } }, .nout = raw ? 0 : 1 };
        resid r = { R, RO };
        char what[120];
        snprintf(what, sizeof what, "norm_matmul%s %s %u x %u, ntok %u", raw ? " (raw)" : "", type_name(g->type),
                 g->rows, k, ntok);
        err[0] = 0;
        int rc = OPRC(op_norm_matmul(&O, &r, &c, &out, 1, k, ntok, eps));
        int want = ntok == 1 && O.q8.mvqn[g->type] && ops_mvq_fits(&O, g->type, k, ntok) && k % 32 == 0 &&
                   (size_t)g->rows * k < O.pol.mvqg_min_elems;
        CHECK(rc == 0, "%s: rc %d (%s)", what, rc, err);
        CHECK(r.cur == (want ? RO : R) && r.spare == (want ? R : RO), "%s: residual pair %s, expected %s", what,
              r.cur == RO ? "flipped" : "kept", want ? "flipped (fused)" : "kept (chain, then product)");
        if (rc == 0) {
            dread(r.cur, got, m * 4);
            check_close(what, got, rref, m, TOL_RED);
            if (want) {
                dread(R, got, m * 4);
                size_t moved = 0;
                for (size_t j = 0; j < m; j++) moved += got[j] != res[j];
                CHECK(moved == 0, "%s: %zu values of res changed", what, moved);
            }
            int q8 = want || ops_mvq_fits(&O, g->type, k, ntok) || ops_mmq8_fits(&O, g->type, g->rows, k, ntok);
            check_product(what, g, y, k, ntok, Y, ldy, q8 ? TOL_Q8X : TOL_RED);
        }
        free(x); free(res); free(wx); free(w0); free(got); free(y); free(rref);
        cl_mem all[] = { X, R, RO, WX, W0, Y, YN, w.buf };
        for (size_t j = 0; j < sizeof all / sizeof *all; j++) clReleaseMemObject(all[j]);
    }
}

/* ------------------------------------------------------------------ emb_* */

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
        int rc = OPRC(op_embed(&O, &w, I, ntok, scale, Y));
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

/* ------------------------------------------------------------------ main */

int main(int argc, char **argv)
{
    (void)argc;
    if (fixture_setup()) return 1;
    O.pol.mmq8_min_elems = 0; /* the golden matrices are small: every fitting product takes mmq8 */
    if (load_golden(argv[0])) return 1;
    fflush(stdout);

    RUN_TEST(test_golden_complete);
    RUN_TEST(test_deq_all_types);
    RUN_TEST(test_mv_all_types);
    RUN_TEST(test_mv_few_rows);
    RUN_TEST(test_emb_all_types);
    RUN_TEST(test_matmul_gemm_path);
    RUN_TEST(test_matmul_tiles);
    RUN_TEST(test_matmul_multi);
    RUN_TEST(test_mmq8_wide);
    RUN_TEST(test_mmh_wide);
    RUN_TEST(test_moe_products);
    RUN_TEST(test_matmul_geglu);
    RUN_TEST(test_products_mvqg);
    RUN_TEST(test_norm_matmul);
    fixture_teardown();
    CHECK_EXIT();
}
