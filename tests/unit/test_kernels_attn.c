/* test_kernels_attn.c — the attention kernels, through the ops.h launchers, against a plain-C
 * float64 softmax over the paged cache (kernels_fixture.h): attn_partial with its in-kernel merge
 * and attn_dec (GQA, several sequences with shuffled block tables, windows, softcap, several chunk
 * sizes, token slices, the int8 output for the next product), op_attention_batch (runs of one
 * sequence: attn_fa / attn_flash on NVIDIA, split-KV elsewhere, short runs between long ones). */
#include "kernels_fixture.h"

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
        /* a decode batch (from token 0) also leaves its output as the int8 X of the output
         * projection: for 1-4 tokens in mvqg's layout, for 5-16 in mmq8's (any k here) */
        for (int lay = 0; lay < 2 && O.attn_dec[0] && hd >= 256; lay++) {
            if (lay ? !O.q8x || T < 5 : !O.mvq_xq) continue;
            uint32_t nt = lay ? (T < 16 ? T : 16) : (T < 4 ? T : 4);
            uint32_t *min_k = lay ? &O.q8x_min_k : &O.mvqg_min_k, keep_k = *min_k;
            *min_k = 0;
            OPOK(op_attention(&O, Q, 0, nt, nh, nkv, hd, &kk, &vv, P, S, cf->window, cf->scale, cf->softcap, nchunk,
                              chunk, PA, PM, CNT, OUT, err, sizeof err));
            *min_k = keep_k;
            snprintf(w2, sizeof w2, "%s, int8 output of %u tokens (%s layout)", what, nt, lay ? "mmq8" : "mvqg");
            CHECK(O.xq_of == OUT, "%s: no int8 output", w2);
            dread(OUT, out, tot * 4);
            check_close(w2, out, ref, (size_t)nt * nh * hd, TOL_RED);
            if (lay) check_q8x_of(w2, out, nt, nh * hd);
            else check_xq_of(w2, out, nt, nh * hd);
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

/* ------------------------------------------------------------------ main */

int main(void)
{
    if (fixture_setup()) return 1;
    fflush(stdout);

    RUN_TEST(test_attention);
    RUN_TEST(test_attention_batch);
    fixture_teardown();
    CHECK_EXIT();
}
