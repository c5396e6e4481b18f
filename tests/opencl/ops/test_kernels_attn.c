/* test_kernels_attn.c — the attention kernels, through the ops.h launchers, against a plain-C
 * float64 softmax over the paged cache (kernels_fixture.h): attn_partial with its in-kernel merge
 * and attn_dec (GQA, several sequences with shuffled block tables, windows, softcap, several chunk
 * sizes, token slices, the int8 output for the next product), op_attention_batch (runs of one
 * sequence: attn_fa on NVIDIA for head dims 128 / 256 / 512, split-KV elsewhere, short runs between long
 * ones),
 * op_qkv_attention (decode batches from the raw projections: attn_decq on NVIDIA). */
#include "kernels_fixture.h"

/* ------------------------------------------------------------------ attention */

/* chunk: keys per split-KV chunk; 0 = what ops_attn_split picks for the batch (the engine's way) */
typedef struct attn_cfg { int window; float scale, softcap; uint32_t hd, chunk; } attn_cfg;

/* n split-KV merge counters, zero as op_attention expects them */
static cl_mem zeroed_counters(size_t n)
{
    uint32_t *zero = calloc(n, 4);
    cl_mem c = dbuf(n * 4, zero);
    free(zero);
    return c;
}

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

/* every case for nh q heads on nkv KV heads; decm: the NVIDIA layers on attn_decm, else on attn_dec */
static void attention_cases(uint32_t nh, uint32_t nkv, int decm)
{
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
        /* chunks past attn_partial's (ATTN_MAX_CHUNK): attn_dec only, two chunks and one */
        { 0, 0.0625f, 0.0f, 256, 512 },
        { 280, 0.0625f, 20.0f, 256, 1024 },
        { 0, 0.044f, 0.0f, 512, 512 },
        { 0, 0.044f, 5.0f, 512, 1024 },
    };
    uint32_t keep_max = O.pol.attn_max_chunk, keep_decm = O.pol.attn_decm_min_keys;
    O.pol.attn_max_chunk = 4096;
    O.pol.attn_decm_min_keys = decm ? 0 : 1u << 31;
    const uint32_t nseq = 4;
    for (size_t c = 0; c < sizeof cfgs / sizeof *cfgs; c++) {
        const attn_cfg *cf = &cfgs[c];
        uint32_t hd = cf->hd;
        int kind = ops_attn_kind(&O, hd, ENGINE_KV_F16, nh, nkv, 1);
        if ((cf->chunk > OPS_ATTN_CHUNK && kind == OPS_ATTN_PARTIAL) || (decm && kind != OPS_ATTN_DECM)) continue;
        double tol = kind == OPS_ATTN_DECM ? TOL_MMA : TOL_RED; /* attn_decm rounds Q and the weights to f16 */
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
        else ops_attn_split(&O, span, T, nh, nkv, hd, kind, &chunk, &nchunk);
        size_t npart = (size_t)T * nh * nchunk;
        cl_mem Q = dbuf(nq * 4, q), KC = dbuf(nc * 2, K), VC = dbuf(nc * 2, V), BT = dbuf(sizeof p.table, p.table),
               P = dbuf(sizeof pos, pos), S = dbuf(sizeof seq, seq), PA = dbuf(npart * hd * 4, NULL),
               PM = dbuf(npart * 2 * 4, NULL), OUT = dbuf(tot * 4, NULL);
        uint32_t *cnt = calloc((size_t)T * nh, 4);
        cl_mem CNT = dbuf((size_t)T * nh * 4, cnt);
        kv_view kk = { KC, BT, p.max_blocks, KV_BLOCK, ENGINE_KV_F16 }, vv = { VC, BT, p.max_blocks, KV_BLOCK, ENGINE_KV_F16 };
        char what[160];
        uint32_t t0 = 2 + irand(T - 4);
        snprintf(what, sizeof what,
                 "attention (%s) T %u nh %u nkv %u hd %u window %d softcap %g chunk %u x %u lens %u/%u/%u/%u",
                 kind == OPS_ATTN_DECM ? "attn_decm" : kind == OPS_ATTN_DEC ? "attn_dec" : "attn_partial", T, nh, nkv,
                 hd, cf->window, cf->softcap, nchunk, chunk, lens[0], lens[1], lens[2], lens[3]);
        poison(OUT, tot * 4);
        poison(PA, npart * hd * 4);
        poison(PM, npart * 2 * 4);
        /* slice [t0, T) first: rows before t0 must stay untouched */
        OPOK(op_attention(&O, Q, t0, T - t0, nh, nkv, hd, &kk, &vv, P, S, cf->window, cf->scale, cf->softcap, kind,
                          nchunk, chunk, PA, PM, CNT, OUT));
        dread(OUT, out, tot * 4);
        char w2[200];
        snprintf(w2, sizeof w2, "%s, slice t0 %u", what, t0);
        check_close(w2, out + (size_t)t0 * nh * hd, ref + (size_t)t0 * nh * hd, nq - (size_t)t0 * nh * hd, tol);
        check_untouched(w2, out, 0, (size_t)t0 * nh * hd);
        check_untouched(w2, out, nq, tot);
        /* then [0, t0) with freshly poisoned partials */
        poison(PA, npart * hd * 4);
        poison(PM, npart * 2 * 4);
        OPOK(op_attention(&O, Q, 0, t0, nh, nkv, hd, &kk, &vv, P, S, cf->window, cf->scale, cf->softcap, kind,
                          nchunk, chunk, PA, PM, CNT, OUT));
        dread(OUT, out, tot * 4);
        snprintf(w2, sizeof w2, "%s, all tokens", what);
        check_close(w2, out, ref, nq, tol);
        check_untouched(w2, out, nq, tot);
        /* a decode batch (from token 0) also leaves its output as the int8 X of the output
         * projection: for 1-4 tokens in mvqg's layout, for 5-16 in mmq8's (any k here) */
        for (int lay = 0; lay < 2 && kind != OPS_ATTN_PARTIAL; lay++) {
            if (lay ? !O.act.q8x || T < 5 : !O.act.mvq_xq) continue;
            uint32_t nt = lay ? (T < 16 ? T : 16) : (T < 4 ? T : 4);
            uint32_t *min_k = lay ? &O.pol.q8x_min_k : &O.pol.mvqg_min_k, keep_k = *min_k;
            *min_k = 0;
            OPOK(op_attention(&O, Q, 0, nt, nh, nkv, hd, &kk, &vv, P, S, cf->window, cf->scale, cf->softcap, kind,
                              nchunk, chunk, PA, PM, CNT, OUT));
            *min_k = keep_k;
            snprintf(w2, sizeof w2, "%s, int8 output of %u tokens (%s layout)", what, nt, lay ? "mmq8" : "mvqg");
            CHECK(O.act.xq_of == OUT, "%s: no int8 output", w2);
            dread(OUT, out, tot * 4);
            check_close(w2, out, ref, (size_t)nt * nh * hd, tol);
            if (lay) check_q8x_of(w2, out, nt, nh * hd);
            else check_xq_of(w2, out, nt, nh * hd);
        }
        /* the merging groups reset their counters: the next launch finds them at zero */
        dread(CNT, cnt, (size_t)T * nh * 4);
        size_t stale = 0;
        for (size_t i = 0; i < (size_t)T * nh; i++) stale += cnt[i] != 0;
        CHECK(stale == 0, "%s: %zu attention counters left non-zero", what, stale);
        if (c == 0) { /* chunks the kernel's score buffer cannot hold are refused */
            CHECK(OPRC(op_attention(&O, Q, 0, T, nh, nkv, hd, &kk, &vv, P, S, 0, 1.0f, 0.0f, kind, 1,
                                    OPS_ATTN_CHUNK + 1, PA, PM, CNT, OUT)) != 0,
                  "op_attention accepted chunk %u", OPS_ATTN_CHUNK + 1);
            CHECK(OPRC(op_attention(&O, Q, 0, T, nh, nkv, hd, &kk, &vv, P, S, 0, 1.0f, 0.0f, kind, 1, 0, PA, PM, CNT,
                                    OUT)) != 0, "op_attention accepted chunk 0");
            CHECK(OPRC(op_attention(&O, Q, 0, T, nh, nkv, hd, &kk, &vv, P, S, 0, 1.0f, 0.0f, OPS_ATTN_DECM, 1, 64,
                                    PA, PM, CNT, OUT)) != 0, "op_attention took head dim %u on attn_decm", hd);
        }
        free(K); free(V); free(q); free(out); free(ref); free(cnt);
        cl_mem all[] = { Q, KC, VC, BT, P, S, PA, PM, CNT, OUT };
        for (size_t i = 0; i < sizeof all / sizeof *all; i++) clReleaseMemObject(all[i]);
    }
    O.pol.attn_max_chunk = keep_max;
    O.pol.attn_decm_min_keys = keep_decm;
}

static void test_attention(void)
{
    reseed(__func__);
    attention_cases(4, 2, 0);
    if (!O.attn.decm[0]) return;
    /* a KV head's 8 and 16 q heads on tensor cores (16: two groups of 8) */
    attention_cases(16, 2, 1);
    attention_cases(16, 1, 1);
}

/* a forward batch as the engine builds it: each sequence's new tokens form one run at consecutive
 * positions after its earlier context. Long runs take the flash kernel where the device has it for
 * the head dim, short ones the split-KV kernels, in one op_attention_batch call. */
typedef struct attn_bcfg { uint32_t nh, nkv; attn_cfg a; } attn_bcfg;

static void test_attention_batch(void)
{
    reseed(__func__);
    static const attn_bcfg cfgs[] = {
        { 4, 1, { 0, 0.0625f, 0.0f, 256, 0 } },   /* Gemma 3 270M: 4 heads on one KV head */
        { 4, 1, { 24, 0.0625f, 0.0f, 256, 0 } },  /* sliding window shorter than a tile's keys */
        { 16, 2, { 0, 0.044f, 0.0f, 512, 0 } },   /* Gemma 4 global layers: 512 dims, 8 heads per KV head */
        { 4, 2, { 37, 0.125f, 5.0f, 64, 0 } },    /* softcap, window, two KV heads */
        { 8, 8, { 0, 0.0884f, 0.0f, 128, 0 } },   /* no grouping: 64 or 128 tokens per tile (4 or 8 warps) */
    };
    const uint32_t nseq = 4, ncfg = sizeof cfgs / sizeof *cfgs, keep_fw = O.pol.fa_warps;
    /* attn_fa with 4 and 8 warps a group (FA_WARPS) where the device has it */
    for (size_t c = 0; c < 2 * ncfg; c++) {
        O.pol.fa_warps = c < ncfg ? 4 : 8;
        if (O.pol.fa_warps == 8 && !O.has_mma) break;
        const attn_bcfg *bc = &cfgs[c % ncfg];
        const attn_cfg *cf = &bc->a;
        uint32_t nh = bc->nh, nkv = bc->nkv, hd = cf->hd;
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
        cl_mem CNT = zeroed_counters(part_elems / hd);
        kv_view kk = { KC, BT, p.max_blocks, KV_BLOCK, ENGINE_KV_F16 }, vv = { VC, BT, p.max_blocks, KV_BLOCK, ENGINE_KV_F16 };
        attn_layer al = { nh, nkv, hd, cf->window, cf->scale, cf->softcap, &kk, &vv };
        attn_batch ab = { Q, OUT, P, S, seq, T, max_pos, PA, PM, CNT, part_elems, hd, NULL, 0 };
        int flash = ops_flash_ok(&O, nh, nkv, hd, ENGINE_KV_F16);
        char what[200];
        snprintf(what, sizeof what,
                 "attention batch (%s, %u warps) T %u nh %u nkv %u hd %u window %d softcap %g runs %u/%u/%u/%u",
                 flash ? "fa + split" : "split", O.pol.fa_warps,
                 T, nh, nkv, hd, cf->window, cf->softcap, fresh[1], fresh[0],
                 fresh[3], fresh[2]);
        poison(OUT, nq * 4);
        OPOK(op_attention_batch(&O, &ab, &al));
        dread(OUT, out, nq * 4);
        check_close(what, out, ref, nq, flash ? TOL_MMA : TOL_RED);
        free(K); free(V); free(q); free(out); free(ref); free(pos); free(seq);
        cl_mem all[] = { Q, KC, VC, BT, P, S, PA, PM, CNT, OUT };
        for (size_t i = 0; i < sizeof all / sizeof *all; i++) clReleaseMemObject(all[i]);
    }
    O.pol.fa_warps = keep_fw;
}

/* op_qkv_attention on decode batches (one fresh token per sequence after earlier context of 0 to
 * ~900 keys): the raw Q/K/V normed and rotated, the fresh K/V into the cache as half, attention
 * over the cache with them, all against float64. On NVIDIA one attn_decq launch (the fresh slots
 * hold NaN until written: a read of the cache there before the write shows), elsewhere qkv_rope and
 * the split-KV kernels. */
static void qkv_attention_cases(int decm)
{
    uint32_t keep_decm = O.pol.attn_decm_min_keys;
    if (decm) O.pol.attn_decm_min_keys = 0; /* qkv_rope, then attn_decm */
    static const struct { uint32_t nh, nkv, rot; int qk_norm, v_norm; attn_cfg a; } cfgs[] = {
        { 4, 1, 256, 1, 0, { 0, 0.0625f, 0.0f, 256, 0 } },   /* Gemma 3 270M */
        { 8, 4, 256, 1, 2, { 24, 1.0f, 0.0f, 256, 0 } },     /* Gemma 4 sliding layers: window, scale 1 */
        { 16, 2, 128, 1, 2, { 0, 1.0f, 0.0f, 512, 0 } },     /* Gemma 4 global layers: partial rotation */
        { 4, 2, 128, 0, 0, { 0, 0.0625f, 30.0f, 256, 0 } },  /* no norms, softcap */
    };
    const uint32_t nseq = 4; /* attn_decq takes up to 4 tokens */
    for (size_t c = 0; c < sizeof cfgs / sizeof *cfgs; c++) {
        const attn_cfg *cf = &cfgs[c].a;
        uint32_t nh = cfgs[c].nh, nkv = cfgs[c].nkv, hd = cf->hd, rot = cfgs[c].rot, T = nseq;
        int qn = cfgs[c].qk_norm, vn = cfgs[c].v_norm;
        if (decm && ops_attn_kind(&O, hd, ENGINE_KV_F16, nh, nkv, 1) != OPS_ATTN_DECM) continue;
        uint32_t prior[4] = { 0, 1 + irand(30), 100 + irand(200), 600 + irand(300) }, lens[4];
        for (uint32_t s = 0; s < nseq; s++) lens[s] = prior[s] + 1;
        paged p;
        paged_make(&p, nseq, lens, KV_BLOCK, nkv, hd);
        size_t nc = paged_elems(&p), nq = (size_t)T * nh * hd, nk = (size_t)T * nkv * hd;
        uint16_t *K = malloc(nc * 2), *V = malloc(nc * 2), *got16 = malloc(nc * 2);
        fill_cache(&p, prior, K, V); /* the fresh slots keep the poison */
        int32_t pos[4], seq[4];
        static const uint32_t order[4] = { 3, 0, 1, 2 };
        uint32_t max_pos = 0;
        for (uint32_t t = 0; t < T; t++) {
            seq[t] = (int32_t)order[t];
            pos[t] = (int32_t)prior[order[t]];
            if ((uint32_t)pos[t] > max_pos) max_pos = (uint32_t)pos[t];
        }
        float eps = 1e-6f, *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nk * 4), *qw = malloc(hd * 4),
              *kw = malloc(hd * 4), *one = malloc(hd * 4), *freq = make_freq(rot, 1e6), *qf = malloc(nq * 4),
              *out = malloc(nq * 4);
        double *row = malloc(hd * 8), *rk = malloc(nk * 8), *rv = malloc(nk * 8), *ref = malloc(nq * 8);
        fill_rows(q, T * nh, hd);
        fill_rows(k, T * nkv, hd);
        fill_rows(v, T * nkv, hd);
        for (uint32_t i = 0; i < hd; i++) { qw[i] = 1.0f + 0.5f * nrand(); kw[i] = 1.0f + 0.5f * nrand(); one[i] = 1; }
        uint16_t *Kh = malloc(nc * 2), *Vh = malloc(nc * 2); /* the cache as it must be afterwards */
        memcpy(Kh, K, nc * 2);
        memcpy(Vh, V, nc * 2);
        for (uint32_t t = 0; t < T; t++) {
            for (uint32_t h = 0; h < nh; h++) {
                size_t o = ((size_t)t * nh + h) * hd;
                norm_rope_ref(q + o, qw, qn != 0, qn == 1, eps, freq, hd, rot, pos[t], row);
                for (uint32_t i = 0; i < hd; i++) qf[o + i] = (float)row[i];
            }
            for (uint32_t h = 0; h < nkv; h++) {
                size_t o = ((size_t)t * nkv + h) * hd, at = paged_at(&p, (uint32_t)seq[t], (uint32_t)pos[t], h);
                norm_rope_ref(k + o, kw, qn != 0, qn == 1, eps, freq, hd, rot, pos[t], rk + o);
                norm_rope_ref(v + o, one, vn != 0, 0, eps, NULL, hd, 0, 0, rv + o);
                for (uint32_t i = 0; i < hd; i++) { Kh[at + i] = f2h((float)rk[o + i]); Vh[at + i] = f2h((float)rv[o + i]); }
            }
        }
        for (uint32_t t = 0; t < T; t++)
            for (uint32_t h = 0; h < nh; h++)
                attn_ref(&p, Kh, Vh, qf + ((size_t)t * nh + h) * hd, (uint32_t)seq[t], pos[t], h / (nh / nkv), cf,
                         ref + ((size_t)t * nh + h) * hd);
        size_t part_elems = (size_t)T * nh * hd * (max_pos / OPS_ATTN_MIN_CHUNK + 1);
        cl_mem Q = dbuf(nq * 4, q), KR = dbuf(nk * 4, k), VR = dbuf(nk * 4, v), QW = dbuf(hd * 4, qw),
               KW = dbuf(hd * 4, kw), F = dbuf(rot / 2 * 4, freq), KC = dbuf(nc * 2, K), VC = dbuf(nc * 2, V),
               BT = dbuf(sizeof p.table, p.table), P = dbuf(sizeof pos, pos), S = dbuf(sizeof seq, seq),
               PA = dbuf(part_elems * 4, NULL), PM = dbuf(part_elems / hd * 2 * 4, NULL), OUT = dbuf(nq * 4, NULL);
        cl_mem CNT = zeroed_counters(part_elems / hd);
        kv_view kk = { KC, BT, p.max_blocks, KV_BLOCK, ENGINE_KV_F16 }, vv = { VC, BT, p.max_blocks, KV_BLOCK, ENGINE_KV_F16 };
        attn_layer al = { nh, nkv, hd, cf->window, cf->scale, cf->softcap, &kk, &vv };
        attn_batch ab = { Q, OUT, P, S, seq, T, max_pos, PA, PM, CNT, part_elems, hd, NULL, 0 };
        qkv_raw raw = { KR, VR, qn == 1 ? QW : NULL, qn == 1 ? KW : NULL, F, qn, vn, eps, rot };
        char what[200];
        snprintf(what, sizeof what,
                 "qkv attention (%s) nh %u nkv %u hd %u rot %u qk_norm %d v_norm %d window %d softcap %g",
                 decm ? "qkv_rope + attn_decm" : O.attn.decq[hd == 512] ? "attn_decq" : "qkv_rope + split", nh, nkv, hd,
                 rot, qn, vn, cf->window,
                 cf->softcap);
        poison(OUT, nq * 4);
        OPOK(op_qkv_attention(&O, &raw, &ab, &al));
        dread(OUT, out, nq * 4);
        check_close(what, out, ref, nq, decm ? TOL_MMA : TOL_RED);
        /* the fresh slots against float64, every other half of the caches as it was */
        for (int kv = 0; kv < 2; kv++) {
            dread(kv ? VC : KC, got16, nc * 2);
            const uint16_t *want = kv ? Vh : Kh;
            const double *fr = kv ? rv : rk;
            float *fresh = malloc(nk * 4);
            size_t moved = 0;
            char *is_fresh = calloc(nc, 1);
            for (uint32_t t = 0; t < T; t++)
                for (uint32_t h = 0; h < nkv; h++) {
                    size_t at = paged_at(&p, (uint32_t)seq[t], (uint32_t)pos[t], h), o = ((size_t)t * nkv + h) * hd;
                    for (uint32_t i = 0; i < hd; i++) { fresh[o + i] = (float)h2d(got16[at + i]); is_fresh[at + i] = 1; }
                }
            for (size_t i = 0; i < nc; i++) moved += !is_fresh[i] && got16[i] != want[i];
            char w2[240];
            snprintf(w2, sizeof w2, "%s: %s cache", what, kv ? "V" : "K");
            check_close(w2, fresh, fr, nk, TOL_HALF);
            CHECK(moved == 0, "%s: %zu halves outside the fresh slots changed", w2, moved);
            free(fresh); free(is_fresh);
        }
        free(K); free(V); free(got16); free(q); free(k); free(v); free(qw); free(kw); free(one); free(freq);
        free(qf); free(out); free(row); free(rk); free(rv); free(ref); free(Kh); free(Vh);
        cl_mem all[] = { Q, KR, VR, QW, KW, F, KC, VC, BT, P, S, PA, PM, OUT, CNT };
        for (size_t i = 0; i < sizeof all / sizeof *all; i++) clReleaseMemObject(all[i]);
    }
    O.pol.attn_decm_min_keys = keep_decm;
}

static void test_qkv_attention(void)
{
    reseed(__func__);
    qkv_attention_cases(0);
    if (O.attn.decm[0]) qkv_attention_cases(1);
}

/* ------------------------------------------------------------------ main */

int main(void)
{
    if (fixture_setup()) return 1;
    fflush(stdout);

    RUN_TEST(test_attention);
    RUN_TEST(test_attention_batch);
    RUN_TEST(test_qkv_attention);
    fixture_teardown();
    CHECK_EXIT();
}
