/* test_kv_quant.c — the quantized KV cache's kernels (kernels/kv.cl) for q8_0 and q4 (or the one
 * named on the command line), each in a program built for it as the engine builds it:
 *   test_kv_write: qkv_rope writes every position of four sequences (shuffled blocks, tokens in
 *     shuffled order) into quantized rows. Reference: llama.cpp's quantize_row_q8_0_ref /
 *     quantize_row_q4_0_ref, in float32 as there, on the values the kernel quantizes. Without RoPE
 *     and norms those are the inputs themselves, so the bytes must be exact: the f16 scales always,
 *     a quant off by one only where its value lies within 1e-4 of a rounding step's edge (the
 *     device may contract x * id + 8.5 into one rounding). With RoPE and norms, against the
 *     float64 rows: each scale within 1e-3 relative of the reference's, each value within d / 2 of
 *     it (q4_0: within d, as its one-sided range clamps the value opposite the block's maximum
 *     at 7 d) plus |q| times the scale's rounding to f16; rows holding a zero block (d = 0)
 *     and a single spike included. No byte outside the written rows changes.
 *   test_kv_read: attn_partial (split-KV) over that cache against a float64 softmax over the rows
 *     dequantized on the host (q * d): relative L2 within TOL_RED (1e-4), the f16 cache's
 *     tolerance, as the kernel must read exactly these values. Windows, softcap, GQA, head dims
 *     64 / 128 / 256 / 512. */
#include "kernels_fixture.h"

#include <stdlib.h>

static int TYPE; /* engine_kv_type under test */

/* quant bytes of a block of 32 values, and a row's bytes */
static uint32_t qb(void) { return TYPE == ENGINE_KV_Q8_0 ? 32 : 16; }
static size_t row_bytes(uint32_t hd) { return (size_t)kv_bytes(TYPE, hd); }

/* llama.cpp's reference quantization of one block of 32 (ggml-quants.c), float32 throughout; edge[j]:
 * 1 where value j's rounding is within 1e-4 of a step's edge. Returns the scale before its f16 rounding. */
static float quant_ref(const float *x, uint8_t *q, uint16_t *dh, uint8_t *edge)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; j++)
        if (amax < fabsf(x[j])) { amax = fabsf(x[j]); max = x[j]; }
    if (TYPE == ENGINE_KV_Q8_0) {
        const float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
        *dh = f2h(d);
        for (int j = 0; j < 32; j++) {
            float v = x[j] * id;
            q[j] = (uint8_t)(int8_t)roundf(v);
            edge[j] = fabsf(fabsf(v - truncf(v)) - 0.5f) < 1e-4f;
        }
        return d;
    }
    {
        const float d = max / -8.0f, id = d ? 1.0f / d : 0.0f;
        *dh = f2h(d);
        for (int j = 0; j < 16; j++) {
            float v0 = x[j] * id + 8.5f, v1 = x[16 + j] * id + 8.5f;
            int8_t a = (int8_t)v0, b = (int8_t)v1;
            q[j] = (uint8_t)((a < 15 ? a : 15) | (b < 15 ? b : 15) << 4);
            edge[j] = fabsf(v0 - roundf(v0)) < 1e-4f;
            edge[16 + j] = fabsf(v1 - roundf(v1)) < 1e-4f;
        }
        return d;
    }
}

/* quant j of a block as a signed step, and a row's value i (host dequantization: q * d) */
static int quant_at(const uint8_t *q, int j)
{
    if (TYPE == ENGINE_KV_Q8_0) return (int8_t)q[j];
    return (j < 16 ? q[j] & 15 : q[j - 16] >> 4) - 8;
}
static double row_scale(const uint8_t *row, uint32_t hd, uint32_t b)
{
    uint16_t h;
    memcpy(&h, row + (size_t)hd / 32 * qb() + 2 * b, 2);
    return h2d(h);
}
static double deq(const uint8_t *row, uint32_t hd, uint32_t i)
{
    return quant_at(row + (size_t)(i / 32) * qb(), (int)(i % 32)) * row_scale(row, hd, i / 32);
}

typedef struct cfg {
    uint32_t nh, nkv, hd, rot;
    int qk_norm, v_norm, window;
    float scale, softcap;
} cfg;

static const cfg CFGS[] = {
    { 4, 1, 256, 0, 0, 0, 0, 0.0625f, 0.0f },   /* Gemma 3 270M's shape, raw rows: exact bytes */
    { 4, 2, 64, 0, 0, 0, 7, 0.125f, 30.0f },    /* tiny window, softcap, raw rows */
    { 8, 2, 128, 128, 1, 2, 24, 1.0f, 0.0f },   /* Gemma 4 sliding layers: norms, RoPE */
    { 16, 2, 512, 128, 1, 2, 0, 1.0f, 0.0f },   /* Gemma 4 global layers: partial rotation */
};
#define NCFG (sizeof CFGS / sizeof *CFGS)
enum { NSEQ = 4, MAXT = 1024 };

/* the cache one configuration's writes leave, kept for the read test */
typedef struct written {
    paged p;
    uint32_t lens[NSEQ];
    uint8_t *K, *V; /* read back */
    int ok;
} written;
static written W[NCFG];

static void test_kv_write(void)
{
    reseed(__func__);
    for (size_t c = 0; c < NCFG; c++) {
        const cfg *cf = &CFGS[c];
        written *w = &W[c];
        uint32_t nh = cf->nh, nkv = cf->nkv, hd = cf->hd, rot = cf->rot;
        w->lens[0] = 1 + irand(5); w->lens[1] = 30 + irand(40); w->lens[2] = 100 + irand(100);
        w->lens[3] = 300 + irand(200);
        paged_make(&w->p, NSEQ, w->lens, KV_BLOCK, nkv, hd);
        int32_t *pos = malloc(MAXT * 4), *seq = malloc(MAXT * 4);
        uint32_t T = 0;
        for (uint32_t s = 0; s < NSEQ; s++)
            for (uint32_t i = 0; i < w->lens[s]; i++) { pos[T] = (int32_t)i; seq[T] = (int32_t)s; T++; }
        for (uint32_t i = T; i > 1; i--) { /* any order: each token writes its own row */
            uint32_t j = irand(i);
            int32_t a = pos[i - 1], b = seq[i - 1];
            pos[i - 1] = pos[j]; seq[i - 1] = seq[j]; pos[j] = a; seq[j] = b;
        }
        size_t rows = (size_t)w->p.nblocks * nkv * KV_BLOCK, cb = rows * row_bytes(hd);
        size_t nq = (size_t)T * nh * hd, nk = (size_t)T * nkv * hd;
        float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nk * 4), *qw = malloc(hd * 4), *kw = malloc(hd * 4),
              *one = malloc(hd * 4), *freq = make_freq(rot ? rot : 2, 1e6);
        fill_rows(q, T * nh, hd);
        fill_rows(k, T * nkv, hd);
        fill_rows(v, T * nkv, hd);
        memset(k, 0, hd * 4);                                             /* a zero row: d = 0 */
        for (uint32_t i = 0; i < hd; i++) v[i] = i == 5 ? 3.0f : 1e-3f * nrand(); /* one spike */
        for (uint32_t i = 0; i < hd; i++) { qw[i] = 1.0f + 0.5f * nrand(); kw[i] = 1.0f + 0.5f * nrand(); one[i] = 1; }
        w->K = malloc(cb);
        w->V = malloc(cb);
        memset(w->K, 0xab, cb);
        float eps = 1e-6f;
        cl_mem Q = dbuf(nq * 4, q), KR = dbuf(nk * 4, k), VR = dbuf(nk * 4, v), QW = dbuf(hd * 4, qw),
               KW = dbuf(hd * 4, kw), F = dbuf((rot ? rot : 2) / 2 * 4, freq), KC = dbuf(cb, w->K), VC = dbuf(cb, w->K),
               BT = dbuf(sizeof w->p.table, w->p.table), P = dbuf((size_t)T * 4, pos), S = dbuf((size_t)T * 4, seq);
        kv_view kk = { KC, BT, w->p.max_blocks, KV_BLOCK, TYPE }, vv = { VC, BT, w->p.max_blocks, KV_BLOCK, TYPE };
        char what[160];
        snprintf(what, sizeof what, "qkv_rope into %s rows: T %u nh %u nkv %u hd %u rot %u norms %d/%d",
                 kv_types[TYPE].name, T, nh, nkv, hd, rot, cf->qk_norm, cf->v_norm);
        OPOK(op_qkv_rope(&O, Q, KR, VR, T, nh, nkv, hd, cf->qk_norm == 1 ? QW : NULL, cf->qk_norm == 1 ? KW : NULL,
                         cf->qk_norm, cf->v_norm, eps, F, rot, P, S, &kk, &vv));
        dread(KC, w->K, cb);
        dread(VC, w->V, cb);
        size_t bad_bytes = 0, ties = 0, bad_scale = 0, bad_val = 0, moved = 0;
        double worst = 0;
        char *is_row = calloc(rows, 1);
        double *ref = malloc(hd * 8);
        float *x = malloc(hd * 4);
        uint8_t qr[32], edge[32];
        for (uint32_t t = 0; t < T; t++)
            for (uint32_t h = 0; h < nkv; h++)
                for (int kv = 0; kv < 2; kv++) {
                    size_t r = paged_at(&w->p, (uint32_t)seq[t], (uint32_t)pos[t], h) / hd, o = ((size_t)t * nkv + h) * hd;
                    const uint8_t *row = (kv ? w->V : w->K) + r * row_bytes(hd);
                    const float *src = (kv ? v : k) + o;
                    is_row[r] = 1;
                    int raw = kv ? cf->v_norm == 0 : cf->qk_norm == 0 && rot == 0;
                    if (kv) norm_rope_ref(src, one, cf->v_norm != 0, 0, eps, NULL, hd, 0, 0, ref);
                    else norm_rope_ref(src, kw, cf->qk_norm != 0, cf->qk_norm == 1, eps, freq, hd, rot, pos[t], ref);
                    /* the f32 value before quantizing may carry qkv_rope's own error, which test_kernels_rows
                     * holds to relative L2 1e-4 over the row (TOL_RED): each value within 1e-4 x its L2 norm */
                    double f32_err = 0;
                    for (uint32_t i = 0; i < hd; i++) {
                        x[i] = raw ? src[i] : (float)ref[i];
                        f32_err += raw ? 0 : ref[i] * ref[i];
                    }
                    f32_err = TOL_RED * sqrt(f32_err);
                    for (uint32_t b = 0; b < hd / 32; b++) {
                        uint16_t dh, got;
                        double df = quant_ref(x + 32 * b, qr, &dh, edge);
                        memcpy(&got, row + (size_t)hd / 32 * qb() + 2 * b, 2);
                        double d = h2d(got), dr = h2d(dh);
                        if (raw) bad_scale += got != dh;
                        else bad_scale += fabs(d - dr) > 1e-3 * fabs(dr) + 1e-30;
                        for (int j = 0; j < 32; j++) {
                            int gq = quant_at(row + (size_t)b * qb(), j), rq = quant_at(qr, j);
                            if (raw && gq != rq) {
                                if (edge[j] && abs(gq - rq) == 1) ties++;
                                else bad_bytes++;
                            }
                            double e = fabs(gq * d - ref[32 * b + j]);
                            /* half a step (q4_0: a step), plus the scale's own f16 rounding times q */
                            double bound = (fabs(df) * (TYPE == ENGINE_KV_Q8_0 ? 0.5 : 1.0) + abs(gq) * fabs(d - df)) *
                                           (1 + 1e-3) + 1e-5 * fabs(d) + f32_err;
                            if (e > bound) bad_val++;
                            if (d != 0 && e / fabs(d) > worst) worst = e / fabs(d);
                        }
                    }
                }
        for (size_t r = 0; r < rows; r++)
            for (size_t i = 0; !is_row[r] && i < row_bytes(hd); i++)
                moved += (w->K[r * row_bytes(hd) + i] != 0xab) + (w->V[r * row_bytes(hd) + i] != 0xab);
        if (verbose) printf("  %s: worst error %.3f d, %zu tie quants\n", what, worst, ties);
        CHECK(bad_scale == 0, "%s: %zu block scales differ from llama.cpp's rule", what, bad_scale);
        CHECK(bad_bytes == 0, "%s: %zu quants differ from llama.cpp's rule (beside %zu at rounding ties)", what,
              bad_bytes, ties);
        CHECK(bad_val == 0, "%s: %zu values off by more than the bound (worst %.3f d)", what, bad_val, worst);
        CHECK(moved == 0, "%s: %zu bytes outside the written rows changed", what, moved);
        w->ok = bad_scale + bad_bytes + bad_val + moved == 0;
        free(pos); free(seq); free(q); free(k); free(v); free(qw); free(kw); free(one); free(freq); free(is_row);
        free(ref); free(x);
        cl_mem all[] = { Q, KR, VR, QW, KW, F, KC, VC, BT, P, S };
        for (size_t i = 0; i < sizeof all / sizeof *all; i++) clReleaseMemObject(all[i]);
    }
}

/* float64 softmax attention of one (token, head) over the host-dequantized rows */
static void attn_ref_q(const written *w, const cfg *cf, const float *q, uint32_t seq, int pos, uint32_t kh, double *out)
{
    uint32_t hd = cf->hd;
    int lo = cf->window > 0 && pos - cf->window + 1 > 0 ? pos - cf->window + 1 : 0;
    double *s = malloc(sizeof(double) * (size_t)(pos + 1)), mx = -INFINITY, l = 0;
    for (int j = lo; j <= pos; j++) {
        const uint8_t *k = w->K + paged_at(&w->p, seq, (uint32_t)j, kh) / hd * row_bytes(hd);
        double d = 0;
        for (uint32_t i = 0; i < hd; i++) d += (double)q[i] * deq(k, hd, i);
        d *= cf->scale;
        if (cf->softcap > 0) d = cf->softcap * tanh(d / cf->softcap);
        s[j] = d;
        if (d > mx) mx = d;
    }
    for (uint32_t i = 0; i < hd; i++) out[i] = 0;
    for (int j = lo; j <= pos; j++) {
        double e = exp(s[j] - mx);
        const uint8_t *v = w->V + paged_at(&w->p, seq, (uint32_t)j, kh) / hd * row_bytes(hd);
        l += e;
        for (uint32_t i = 0; i < hd; i++) out[i] += e * deq(v, hd, i);
    }
    for (uint32_t i = 0; i < hd; i++) out[i] /= l;
    free(s);
}

static void test_kv_read(void)
{
    reseed(__func__);
    for (size_t c = 0; c < NCFG; c++) {
        const cfg *cf = &CFGS[c];
        written *w = &W[c];
        if (!w->ok) continue; /* test_kv_write said why */
        uint32_t nh = cf->nh, nkv = cf->nkv, hd = cf->hd;
        int32_t pos[32], seq[32];
        uint32_t T = make_tokens(NSEQ, w->lens, 4, pos, seq), max_pos = 0;
        size_t nq = (size_t)T * nh * hd, cb = (size_t)w->p.nblocks * nkv * KV_BLOCK * row_bytes(hd);
        float *q = malloc(nq * 4), *out = malloc(nq * 4);
        double *ref = malloc(nq * 8);
        for (size_t i = 0; i < nq; i++) q[i] = nrand();
        for (uint32_t t = 0; t < T; t++) {
            if ((uint32_t)pos[t] > max_pos) max_pos = (uint32_t)pos[t];
            for (uint32_t h = 0; h < nh; h++)
                attn_ref_q(w, cf, q + ((size_t)t * nh + h) * hd, (uint32_t)seq[t], pos[t], h / (nh / nkv),
                           ref + ((size_t)t * nh + h) * hd);
        }
        uint32_t span = max_pos + 1, chunk, nchunk;
        if (cf->window > 0 && span > (uint32_t)cf->window) span = (uint32_t)cf->window;
        int kind = ops_attn_kind(&O, hd, TYPE, nh, nkv, span);
        ops_attn_split(&O, span, T, nh, nkv, hd, kind, &chunk, &nchunk);
        size_t npart = (size_t)T * nh * nchunk;
        uint32_t *cnt = calloc((size_t)T * nh, 4);
        cl_mem Q = dbuf(nq * 4, q), KC = dbuf(cb, w->K), VC = dbuf(cb, w->V), BT = dbuf(sizeof w->p.table, w->p.table),
               P = dbuf(sizeof pos, pos), S = dbuf(sizeof seq, seq), PA = dbuf(npart * hd * 4, NULL),
               PM = dbuf(npart * 2 * 4, NULL), OUT = dbuf(nq * 4, NULL), CNT = dbuf((size_t)T * nh * 4, cnt);
        kv_view kk = { KC, BT, w->p.max_blocks, KV_BLOCK, TYPE }, vv = { VC, BT, w->p.max_blocks, KV_BLOCK, TYPE };
        char what[160];
        snprintf(what, sizeof what, "attention over %s rows: T %u nh %u nkv %u hd %u window %d softcap %g chunk %u x %u",
                 kv_types[TYPE].name, T, nh, nkv, hd, cf->window, cf->softcap, nchunk, chunk);
        poison(OUT, nq * 4);
        OPOK(op_attention(&O, Q, 0, T, nh, nkv, hd, &kk, &vv, P, S, cf->window, cf->scale, cf->softcap, kind, nchunk,
                          chunk, PA, PM, CNT, OUT));
        dread(OUT, out, nq * 4);
        check_close(what, out, ref, nq, kind == OPS_ATTN_DECM ? TOL_MMA : TOL_RED);
        free(q); free(out); free(ref); free(cnt);
        cl_mem all[] = { Q, KC, VC, BT, P, S, PA, PM, OUT, CNT };
        for (size_t i = 0; i < sizeof all / sizeof *all; i++) clReleaseMemObject(all[i]);
    }
}

int main(int argc, char **argv)
{
    int only = argc > 1 ? engine_kv_type_parse(argv[1]) : -1;
    if (argc > 1 && only != ENGINE_KV_Q8_0 && only != ENGINE_KV_Q4_0) {
        printf("FAIL setup: usage: test_kv_quant [q8_0|q4] (default: both)\n");
        return 1;
    }
    for (TYPE = ENGINE_KV_Q8_0; TYPE <= ENGINE_KV_Q4_0; TYPE++) { /* a program of its own each */
        if (only >= 0 && TYPE != only) continue;
        if (fixture_setup_with(kv_types[TYPE].build)) return 1;
        printf("KV type %s\n", kv_types[TYPE].name);
        fflush(stdout);
        memset(W, 0, sizeof W);
        RUN_TEST(test_kv_write);
        RUN_TEST(test_kv_read);
        for (size_t c = 0; c < NCFG; c++) { free(W[c].K); free(W[c].V); }
        fixture_teardown();
    }
    CHECK_EXIT();
}
