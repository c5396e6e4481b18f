/* test_kernels_delta.c — the gated-delta ops (ops/delta.c, kernels/delta.cl) against float64
 * references written here from the math of transformers' Qwen3_5GatedDeltaNet (the recurrent form,
 * torch_recurrent_gated_delta_rule; docs/design-qwen35.md 1.3): op_delta_conv (conv taps over the
 * run and its slot's conv state, SiLU, L2 norms, β and g, the new conv state), op_delta_scan on
 * delta_step and on the chunk form (several runs of different lengths and start positions in one
 * launch, in place and slot to slot, both head orders), op_rmsnorm_gated, and the refusals.
 *
 * Tolerances (relative L2 against float64, kernels_fixture.h):
 *   TOL_SCAN 1e-5 for op_delta_scan's outputs and states: each is a chain of FP32 dot products of
 *     length dk (128) per token, and the recurrence does not amplify their rounding (e^g <= 1; with
 *     |k| = 1 and β < 1, I − βkkᵀ contracts; the chunk form's triangular solve has a unit diagonal and
 *     |A_ij| < 1), so the error stays near FP32 roundoff whatever the run length: measured <= 5.1e-7
 *     on PoCL (300-token runs, both paths), 20x below the tolerance, for other devices' orders of
 *     summation; a dropped term (β, a decay) costs 1e-2 or more.
 *   TOL_RED 1e-4 for the conv output and the gated norm (reductions, as the other kernel tests);
 *   TOL_ELEM 1e-5 for β, g and the conv state (elementwise or copies); the conv state carried across
 *     launches bit-equal to one launch (the same taps of the same inputs).
 * The device ops were checked once against transformers 5.23.0's own functions (causal_conv1d_update,
 * l2norm, torch_recurrent/chunk_gated_delta_rule, Qwen3_5RMSNormGated; grouped heads, 70 tokens):
 * relative L2 <= 4.1e-7, and 1.8e-6 against its FP32 chunk form. */
#include "kernels_fixture.h"

#define KC 4
#define TOL_SCAN 1e-5

typedef struct layer {
    delta_shape sh;
    delta_state st;          /* st.buf: set per case */
    uint32_t dc, conv, ssm;  /* channels; floats of the conv and delta states */
} layer;

static layer make_layer(uint32_t hk, uint32_t hv, int tiled, uint32_t n_slots)
{
    layer l = { .sh = { hk, hv, 128, 128, KC, tiled } };
    l.dc = 2 * hk * 128 + hv * 128;
    l.conv = (KC - 1) * l.dc;
    l.ssm = hv * 128 * 128;
    /* gaps before, between and after the two states, which no op may write */
    l.st = (delta_state){ NULL, n_slots, 5 + l.conv + 3 + l.ssm + 4, 5, 5 + l.conv + 3 };
    return l;
}

static uint32_t khead(const layer *l, uint32_t h)
{
    return l->sh.tiled ? h % l->sh.hk : h / (l->sh.hv / l->sh.hk);
}

/* runs of lens[i] tokens, a spare row after every other run (rows no op may write), positions from
 * pos[i], slots: run i reads slot 2i + 1 and writes slot 2i + 1 (in place, even i) or 2i + 2 */
static uint32_t make_runs(delta_run *rs, uint32_t n, const uint32_t *lens, const uint32_t *pos)
{
    uint32_t t = 0;
    for (uint32_t i = 0; i < n; i++) {
        rs[i] = (delta_run){ (int32_t)t, (int32_t)lens[i], (int32_t)pos[i], (int32_t)(2 * i + 1),
                             (int32_t)(i % 2 ? 2 * i + 2 : 2 * i + 1) };
        t += lens[i] + (i % 2);
    }
    return t;
}

static cl_mem run_table(const delta_run *rs, uint32_t n)
{
    return dbuf((size_t)n * sizeof(delta_run), (void *)rs);
}

/* ------------------------------------------------------------------ float64 references */

static double silu_d(double x) { return x / (1.0 + exp(-x)); }

/* the conv of one run: rows t0.. of x (taps before the run from the slot's state cs, [KC-1][dc]),
 * SiLU, L2 norms, q × dk^-1/2, gates; new state into ns */
static void conv_ref(const layer *l, const delta_run *u, const float *x, const float *cw, const float *a,
                     const float *b, const float *ssm_a, const float *dt, double eps, const float *cs, double *y,
                     double *beta, double *g, double *ns)
{
    uint32_t dc = l->dc, hk = l->sh.hk, hv = l->sh.hv, dk = l->sh.dk;
    for (int i = 0; i < u->len; i++) {
        size_t t = (size_t)(u->t0 + i);
        for (uint32_t c = 0; c < dc; c++) {
            double acc = 0;
            for (int j = 0; j < KC; j++) {
                int m = i - (KC - 1) + j;
                double xv = m >= 0 ? x[(size_t)(u->t0 + m) * dc + c] : cs[(size_t)(KC - 1 + m) * dc + c];
                acc += (double)cw[(size_t)c * KC + j] * xv;
            }
            y[t * dc + c] = silu_d(acc);
        }
        for (uint32_t hh = 0; hh < 2 * hk; hh++) {
            double ss = 0, *r = y + t * dc + hh * dk;
            for (uint32_t d = 0; d < dk; d++) ss += r[d] * r[d];
            double inv = 1.0 / sqrt(ss + eps) * (hh < hk ? 1.0 / sqrt((double)dk) : 1.0);
            for (uint32_t d = 0; d < dk; d++) r[d] *= inv;
        }
        for (uint32_t h = 0; h < hv; h++) {
            double z = (double)a[t * hv + h] + dt[h];
            beta[t * hv + h] = 1.0 / (1.0 + exp(-(double)b[t * hv + h]));
            g[t * hv + h] = ssm_a[h] * log1p(exp(z));
        }
    }
    for (int q = 0; q < KC - 1; q++) {
        int m = u->len - (KC - 1) + q;
        for (uint32_t c = 0; c < dc; c++)
            ns[(size_t)q * dc + c] = m >= 0 ? x[(size_t)(u->t0 + m) * dc + c] : cs[(size_t)(KC - 1 + m) * dc + c];
    }
}

/* the recurrence of one run, token by token (transformers' torch_recurrent_gated_delta_rule):
 * S ← e^g S; u = β (v − Sᵀk); S ← S + k uᵀ; o = Sᵀq, per value head; S [hv][dk][dv] in place */
static void scan_ref(const layer *l, const delta_run *u, const float *y, const float *beta, const float *g,
                     double *S, double *out)
{
    uint32_t dc = l->dc, hk = l->sh.hk, hv = l->sh.hv, dk = l->sh.dk, dv = l->sh.dv;
    double *kv = malloc(dv * 8);
    for (int i = 0; i < u->len; i++) {
        size_t t = (size_t)(u->t0 + i);
        for (uint32_t h = 0; h < hv; h++) {
            uint32_t kh = khead(l, h);
            const float *q = y + t * dc + kh * dk, *k = y + t * dc + (hk + kh) * dk, *v = y + t * dc + 2 * hk * dk + h * dv;
            double *s = S + (size_t)h * dk * dv, dec = exp((double)g[t * hv + h]), bt = beta[t * hv + h];
            for (uint32_t j = 0; j < dv; j++) kv[j] = 0;
            for (uint32_t d = 0; d < dk; d++)
                for (uint32_t j = 0; j < dv; j++) {
                    s[d * dv + j] *= dec;
                    kv[j] += s[d * dv + j] * k[d];
                }
            for (uint32_t j = 0; j < dv; j++) kv[j] = (v[j] - kv[j]) * bt; /* u */
            double *o = out + (t * hv + h) * dv;
            for (uint32_t j = 0; j < dv; j++) o[j] = 0;
            for (uint32_t d = 0; d < dk; d++)
                for (uint32_t j = 0; j < dv; j++) {
                    s[d * dv + j] += k[d] * kv[j];
                    o[j] += s[d * dv + j] * q[d];
                }
        }
    }
    free(kv);
}

/* ------------------------------------------------------------------ inputs */

/* q̂, k̂ as op_delta_conv leaves them (unit rows, q × dk^-1/2), v ~ silu outputs, β in (0, 1),
 * g with e^g fast (about 0.1) on head 0, slow (about 0.999) on head 1, anywhere between on the rest */
static void scan_inputs(const layer *l, uint32_t ntok, float *y, float *beta, float *g)
{
    uint32_t dc = l->dc, hk = l->sh.hk, hv = l->sh.hv, dk = l->sh.dk;
    for (size_t i = 0; i < (size_t)ntok * dc; i++) y[i] = (float)silu_d(nrand());
    for (uint32_t t = 0; t < ntok; t++) {
        for (uint32_t hh = 0; hh < 2 * hk; hh++) {
            float *r = y + (size_t)t * dc + hh * dk;
            double ss = 0;
            for (uint32_t d = 0; d < dk; d++) { r[d] = nrand(); ss += (double)r[d] * r[d]; }
            double s = 1.0 / sqrt(ss) * (hh < hk ? 1.0 / sqrt((double)dk) : 1.0);
            for (uint32_t d = 0; d < dk; d++) r[d] = (float)(r[d] * s);
        }
        for (uint32_t h = 0; h < hv; h++) {
            double dec = h == 0 ? 0.08 + 0.04 * urand() : h == 1 ? 0.998 + 0.0015 * urand() : 0.1 + 0.899 * urand();
            g[t * hv + h] = (float)log(dec);
            beta[t * hv + h] = (float)(1.0 / (1.0 + exp(-1.5 * nrand())));
        }
    }
}

/* the slots as the host sees them: poison everywhere, the runs' source slots filled */
static float *make_slots(const layer *l, const delta_run *rs, uint32_t n)
{
    size_t sf = l->st.slot_floats, tot = (size_t)l->st.n_slots * sf;
    float *h = malloc(tot * 4);
    for (size_t i = 0; i < tot; i++) h[i] = poison_f();
    for (uint32_t i = 0; i < n; i++) {
        float *s = h + (size_t)rs[i].src * sf;
        for (uint32_t c = 0; c < l->conv; c++) s[l->st.conv_off + c] = nrand();
        for (uint32_t c = 0; c < l->ssm; c++) s[l->st.ssm_off + c] = 0.3f * nrand();
    }
    return h;
}

/* every float of got equals want, bit for bit, but the given region of the runs' destination slots */
static void check_slots_rest(const char *what, const layer *l, const delta_run *rs, uint32_t n, const float *got,
                             const float *want, uint32_t off, uint32_t len)
{
    size_t sf = l->st.slot_floats, tot = (size_t)l->st.n_slots * sf, bad = 0, first = 0;
    for (size_t i = 0; i < tot; i++) {
        int mine = 0;
        for (uint32_t r = 0; r < n; r++)
            mine |= i >= (size_t)rs[r].dst * sf + off && i < (size_t)rs[r].dst * sf + off + len;
        if (!mine && memcmp(&got[i], &want[i], 4)) { if (!bad) first = i; bad++; }
    }
    CHECK(bad == 0, "%s: %zu state floats outside the destination regions changed (first at %zu)", what, bad, first);
}

/* ------------------------------------------------------------------ op_delta_scan */

typedef struct scan_case {
    layer l;
    uint32_t n, ntok;
    delta_run rs[16];
    float *y, *beta, *g, *slots;
    double *out, *S; /* reference: out [ntok][hv][dv]; S per run [n][hv][dk][dv] */
} scan_case;

static void scan_case_make(scan_case *c, uint32_t hk, uint32_t hv, int tiled, uint32_t n, const uint32_t *lens,
                           const uint32_t *pos)
{
    memset(c, 0, sizeof *c);
    c->l = make_layer(hk, hv, tiled, 2 * n + 2);
    c->n = n;
    c->ntok = make_runs(c->rs, n, lens, pos) + 1;
    layer *l = &c->l;
    c->y = malloc((size_t)c->ntok * l->dc * 4);
    c->beta = malloc((size_t)c->ntok * hv * 4);
    c->g = malloc((size_t)c->ntok * hv * 4);
    scan_inputs(l, c->ntok, c->y, c->beta, c->g);
    c->slots = make_slots(l, c->rs, n);
    c->out = calloc((size_t)c->ntok * hv * l->sh.dv, 8);
    c->S = malloc((size_t)n * l->ssm * 8);
    for (uint32_t i = 0; i < n; i++) {
        const float *s0 = c->slots + (size_t)c->rs[i].src * l->st.slot_floats + l->st.ssm_off;
        double *S = c->S + (size_t)i * l->ssm;
        for (uint32_t k = 0; k < l->ssm; k++) S[k] = s0[k];
        scan_ref(l, &c->rs[i], c->y, c->beta, c->g, S, c->out);
    }
}

static void scan_case_free(scan_case *c)
{
    free(c->y); free(c->beta); free(c->g); free(c->slots); free(c->out); free(c->S);
}

/* one launch of op_delta_scan on the case under the given chunk policy; checks out, the destination
 * states and everything else untouched; the device's out into got_out when given */
static void scan_run(scan_case *c, uint32_t chunk, uint32_t chunk_min, uint32_t cols, float *got_out)
{
    layer *l = &c->l;
    size_t sf = l->st.slot_floats, stot = (size_t)l->st.n_slots * sf, om = (size_t)c->ntok * l->sh.hv * l->sh.dv;
    ops_policy keep = O.pol;
    O.pol.delta_chunk = chunk;
    O.pol.delta_chunk_min = chunk_min;
    O.pol.delta_cols = cols;
    O.pol.delta_scan_cols = cols;
    cl_mem Y = dbuf((size_t)c->ntok * l->dc * 4, c->y), B = dbuf((size_t)c->ntok * l->sh.hv * 4, c->beta);
    cl_mem G = dbuf((size_t)c->ntok * l->sh.hv * 4, c->g), ST = dbuf(stot * 4, c->slots), R = run_table(c->rs, c->n);
    cl_mem OUT = dbuf((om + PAD) * 4, NULL);
    poison(OUT, (om + PAD) * 4);
    l->st.buf = ST;
    delta_runs dr = { c->rs, R, c->n, c->ntok };
    char what[160];
    int m = snprintf(what, sizeof what, "delta_scan Hk %u Hv %u %s C %u min %u cols %u runs", l->sh.hk, l->sh.hv,
                     l->sh.tiled ? "tiled" : "grouped", chunk, chunk_min, cols);
    for (uint32_t i = 0; i < c->n && m < (int)sizeof what - 16; i++)
        m += snprintf(what + m, sizeof what - m, " %d@%d", c->rs[i].len, c->rs[i].pos);
    int rc = OPRC(op_delta_scan(&O, &l->sh, &dr, Y, B, G, &l->st, OUT));
    CHECK(rc == 0, "%s: failed: %s", what, err);
    if (rc == 0) {
        float *out = malloc((om + PAD) * 4), *st = malloc(stot * 4);
        dread(OUT, out, (om + PAD) * 4);
        dread(ST, st, stot * 4);
        /* rows outside the runs stay poisoned; the reference has zeros there, so compare run rows only */
        float *got = malloc(om * 4);
        double *ref = malloc(om * 8);
        size_t k = 0, per = (size_t)l->sh.hv * l->sh.dv;
        for (uint32_t i = 0; i < c->n; i++)
            for (int t = c->rs[i].t0; t < c->rs[i].t0 + c->rs[i].len; t++)
                for (size_t e = 0; e < per; e++, k++) {
                    got[k] = out[(size_t)t * per + e];
                    ref[k] = c->out[(size_t)t * per + e];
                    out[(size_t)t * per + e] = poison_f();
                }
        char w2[200];
        snprintf(w2, sizeof w2, "%s: out", what);
        check_close(w2, got, ref, k, TOL_SCAN);
        check_untouched(w2, out, 0, om + PAD);
        for (uint32_t i = 0; i < c->n; i++) {
            float *s = st + (size_t)c->rs[i].dst * sf + l->st.ssm_off;
            snprintf(w2, sizeof w2, "%s: state of run %u (%d tokens)", what, i, c->rs[i].len);
            check_close(w2, s, c->S + (size_t)i * l->ssm, l->ssm, TOL_SCAN);
        }
        /* the conv states and gaps of every slot, and the other slots, as they were */
        snprintf(w2, sizeof w2, "%s: other state", what);
        check_slots_rest(w2, l, c->rs, c->n, st, c->slots, l->st.ssm_off, l->ssm);
        if (got_out)
            for (size_t i = 0; i < k; i++) got_out[i] = got[i];
        free(out); free(st); free(got); free(ref);
    }
    O.pol = keep;
    cl_mem ms[] = { Y, B, G, ST, R, OUT };
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) clReleaseMemObject(ms[i]);
}

static void test_delta_scan_runs(void)
{
    reseed(__func__);
    /* the brief's lengths in one launch, starts not multiples of the chunk (one that is) */
    uint32_t lens[] = { 1, 2, 7, 63, 64, 65, 300 };
    uint32_t pos[] = { irand(500), 17 + 32 * irand(8), irand(100), 64 * (1 + irand(4)), 5 + irand(20), 33, 40 + irand(7) };
    scan_case c;
    scan_case_make(&c, 2, 4, 1, 7, lens, pos);
    scan_run(&c, 32, 32, 32, NULL);   /* the defaults: 1, 2, 7 on delta_step, the rest chunked */
    scan_run(&c, 64, 1, 48, NULL);    /* all chunked, C = 64, slices of 48 (128 = 48 + 48 + 32) */
    scan_run(&c, 16, 64, 32, NULL);   /* 63 on delta_step, 64.. in chunks of 16 */
    scan_case_free(&c);
}

static void test_delta_scan_heads(void)
{
    reseed(__func__);
    uint32_t lens[] = { 65, 3, 130 }, pos[] = { 31, 7, 200 + irand(50) };
    scan_case c;
    scan_case_make(&c, 2, 4, 0, 3, lens, pos); /* grouped: value heads 0, 1 on q/k head 0 */
    scan_run(&c, 32, 32, 32, NULL);
    scan_case_free(&c);
    scan_case_make(&c, 4, 4, 1, 3, lens, pos); /* Hv = Hk */
    scan_run(&c, 32, 8, 128, NULL);
    /* 128 columns of dk 128 need 82 KB of local memory: on a 48 KB device (an H100) the op takes fewer */
    size_t lm = O.local_mem;
    O.local_mem = 48 * 1024;
    scan_run(&c, 32, 8, 128, NULL);
    O.local_mem = lm;
    scan_case_free(&c);
}

/* a decode-like batch: sixteen sequences, most of one token, at scattered positions */
static void test_delta_scan_decode_batch(void)
{
    reseed(__func__);
    uint32_t lens[16], pos[16];
    for (uint32_t i = 0; i < 16; i++) {
        lens[i] = i == 7 ? 17 : i == 12 ? 40 : irand(4) ? 1 : 2 + irand(4);
        pos[i] = irand(2000);
    }
    scan_case c;
    scan_case_make(&c, 2, 4, 1, 16, lens, pos);
    scan_run(&c, 32, 32, 32, NULL); /* all on delta_step */
    scan_run(&c, 32, 2, 64, NULL);  /* the runs of 2 tokens or more chunked */
    scan_case_free(&c);
}

/* delta_step over every run equals the chunk form over every run, within FP32 roundoff */
static void test_delta_step_vs_chunks(void)
{
    reseed(__func__);
    uint32_t lens[] = { 64, 97, 300, 33 }, pos[] = { 0, 11, 64 + irand(64), 31 };
    scan_case c;
    scan_case_make(&c, 2, 4, 1, 4, lens, pos);
    size_t k = 0;
    for (uint32_t i = 0; i < c.n; i++) k += (size_t)c.rs[i].len * c.l.sh.hv * c.l.sh.dv;
    float *a = malloc(k * 4), *b = malloc(k * 4);
    double *ad = malloc(k * 8);
    scan_run(&c, 32, UINT32_MAX, 32, a); /* all on delta_step */
    scan_run(&c, 64, 1, 32, b);          /* all chunked */
    for (size_t i = 0; i < k; i++) ad[i] = a[i];
    check_close("delta_step vs chunk form: out", b, ad, k, TOL_SCAN);
    free(a); free(b); free(ad);
    scan_case_free(&c);
}

/* one sequence prefilled in one launch or in two (the second starting mid-chunk, slot to slot),
 * then a decode token: the same outputs and state */
static void test_delta_scan_split(void)
{
    reseed(__func__);
    layer l = make_layer(2, 4, 1, 4);
    uint32_t n1 = 45 + irand(10), n2 = 80, ntok = n1 + n2 + 1;
    size_t sf = l.st.slot_floats, stot = 4 * sf, om = (size_t)ntok * l.sh.hv * l.sh.dv;
    float *y = malloc((size_t)ntok * l.dc * 4), *beta = malloc(ntok * l.sh.hv * 4), *g = malloc(ntok * l.sh.hv * 4);
    scan_inputs(&l, ntok, y, beta, g);
    delta_run one[1] = { { 0, (int32_t)(n1 + n2), 0, 0, 1 } };
    float *slots = make_slots(&l, one, 1);
    cl_mem Y = dbuf((size_t)ntok * l.dc * 4, y), B = dbuf(ntok * l.sh.hv * 4, beta), G = dbuf(ntok * l.sh.hv * 4, g);
    cl_mem ST = dbuf(stot * 4, slots), OUT = dbuf(om * 4, NULL);
    float *o1 = malloc(om * 4), *o2 = malloc(om * 4), *s1 = malloc(stot * 4), *s2 = malloc(stot * 4);
    l.st.buf = ST;
    /* one launch: slot 0 -> 1, then the decode token in place on slot 1 */
    delta_run dec = { (int32_t)(n1 + n2), 1, (int32_t)(n1 + n2), 1, 1 };
    delta_run seqA[2][1] = { { one[0] }, { dec } };
    for (int i = 0; i < 2; i++) {
        cl_mem R = run_table(seqA[i], 1);
        delta_runs dr = { seqA[i], R, 1, ntok };
        OPOK(op_delta_scan(&O, &l.sh, &dr, Y, B, G, &l.st, OUT));
        clReleaseMemObject(R);
    }
    dread(OUT, o1, om * 4);
    dread(ST, s1, stot * 4);
    /* two launches: 0 -> 2 (n1 tokens), 2 -> 3 from position n1 (not a multiple of 32), decode on 3 */
    dwrite(ST, slots, stot * 4);
    delta_run seqB[3][1] = { { { 0, (int32_t)n1, 0, 0, 2 } }, { { (int32_t)n1, (int32_t)n2, (int32_t)n1, 2, 3 } },
                             { { dec.t0, 1, dec.pos, 3, 3 } } };
    for (int i = 0; i < 3; i++) {
        cl_mem R = run_table(seqB[i], 1);
        delta_runs dr = { seqB[i], R, 1, ntok };
        OPOK(op_delta_scan(&O, &l.sh, &dr, Y, B, G, &l.st, OUT));
        clReleaseMemObject(R);
    }
    dread(OUT, o2, om * 4);
    dread(ST, s2, stot * 4);
    double *ref = malloc((om > l.ssm ? om : l.ssm) * 8);
    for (size_t i = 0; i < om; i++) ref[i] = o1[i];
    check_close("delta_scan split in two launches: out", o2, ref, om, TOL_SCAN);
    for (size_t i = 0; i < l.ssm; i++) ref[i] = s1[sf + l.st.ssm_off + i];
    check_close("delta_scan split in two launches: state", s2 + 3 * sf + l.st.ssm_off, ref, l.ssm, TOL_SCAN);
    free(y); free(beta); free(g); free(slots); free(o1); free(o2); free(s1); free(s2); free(ref);
    cl_mem ms[] = { Y, B, G, ST, OUT };
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) clReleaseMemObject(ms[i]);
}

/* ------------------------------------------------------------------ op_delta_conv */

typedef struct conv_io {
    float *x, *cw, *a, *b, *ssm_a, *dt;
} conv_io;

static void conv_inputs(const layer *l, uint32_t ntok, conv_io *io)
{
    uint32_t hv = l->sh.hv;
    io->x = malloc((size_t)ntok * l->dc * 4);
    io->cw = malloc((size_t)l->dc * KC * 4);
    io->a = malloc((size_t)ntok * hv * 4);
    io->b = malloc((size_t)ntok * hv * 4);
    io->ssm_a = malloc(hv * 4);
    io->dt = malloc(hv * 4);
    for (size_t i = 0; i < (size_t)ntok * l->dc; i++) io->x[i] = nrand();
    for (size_t i = 0; i < (size_t)l->dc * KC; i++) io->cw[i] = 0.4f * nrand();
    for (size_t i = 0; i < (size_t)ntok * hv; i++) { io->a[i] = 2.0f * nrand(); io->b[i] = 2.0f * nrand(); }
    for (uint32_t h = 0; h < hv; h++) {
        io->ssm_a[h] = (float)-exp(frand(-2.0, 1.5)); /* −exp(A_log) */
        io->dt[h] = nrand();
    }
}

static void conv_io_free(conv_io *io) { free(io->x); free(io->cw); free(io->a); free(io->b); free(io->ssm_a); free(io->dt); }

static void conv_case(uint32_t hk, uint32_t hv, int tiled)
{
    uint32_t lens[] = { 1, 2, 7, 63, 64, 65, 300 }, pos[7] = { 0 }, n = 7;
    layer l = make_layer(hk, hv, tiled, 2 * n + 2);
    delta_run rs[7];
    uint32_t ntok = make_runs(rs, n, lens, pos) + 1, dc = l.dc;
    float eps = 1e-6f;
    conv_io io;
    conv_inputs(&l, ntok, &io);
    float *slots = make_slots(&l, rs, n);
    size_t sf = l.st.slot_floats, stot = (size_t)l.st.n_slots * sf, ym = (size_t)ntok * dc, gm = (size_t)ntok * hv;
    double *y = calloc(ym, 8), *beta = calloc(gm, 8), *g = calloc(gm, 8), *ns = malloc((size_t)n * l.conv * 8);
    for (uint32_t i = 0; i < n; i++)
        conv_ref(&l, &rs[i], io.x, io.cw, io.a, io.b, io.ssm_a, io.dt, eps,
                 slots + (size_t)rs[i].src * sf + l.st.conv_off, y, beta, g, ns + (size_t)i * l.conv);
    cl_mem X = dbuf(ym * 4, io.x), CW = dbuf((size_t)dc * KC * 4, io.cw), Aa = dbuf(gm * 4, io.a);
    cl_mem Bb = dbuf(gm * 4, io.b), SA = dbuf(hv * 4, io.ssm_a), DT = dbuf(hv * 4, io.dt), ST = dbuf(stot * 4, slots);
    cl_mem R = run_table(rs, n), Y = dbuf((ym + PAD) * 4, NULL), BE = dbuf((gm + PAD) * 4, NULL);
    cl_mem GG = dbuf((gm + PAD) * 4, NULL);
    poison(Y, (ym + PAD) * 4); poison(BE, (gm + PAD) * 4); poison(GG, (gm + PAD) * 4);
    l.st.buf = ST;
    delta_runs dr = { rs, R, n, ntok };
    char what[96];
    snprintf(what, sizeof what, "delta_conv Hk %u Hv %u, runs 1 2 7 63 64 65 300", hk, hv);
    int rc = OPRC(op_delta_conv(&O, &l.sh, &dr, X, CW, Aa, Bb, SA, DT, eps, &l.st, Y, BE, GG));
    CHECK(rc == 0, "%s: failed: %s", what, err);
    if (rc == 0) {
        float *gy = malloc((ym + PAD) * 4), *gb = malloc((gm + PAD) * 4), *gg = malloc((gm + PAD) * 4);
        float *st = malloc(stot * 4);
        dread(Y, gy, (ym + PAD) * 4); dread(BE, gb, (gm + PAD) * 4); dread(GG, gg, (gm + PAD) * 4);
        dread(ST, st, stot * 4);
        /* rows between runs: poison in got, zero in the reference; compared after the check below */
        float *bufs[3] = { gy, gb, gg };
        size_t w[3] = { dc, hv, hv };
        double *refs[3] = { y, beta, g };
        const char *names[3] = { "y", "beta", "g" };
        for (int k = 0; k < 3; k++) {
            size_t m = (size_t)ntok * w[k], bad = 0;
            for (uint32_t t = 0; t < ntok; t++) {
                int in = 0;
                for (uint32_t i = 0; i < n; i++) in |= (int)t >= rs[i].t0 && (int)t < rs[i].t0 + rs[i].len;
                for (size_t e = 0; e < w[k]; e++)
                    if (!in) { bad += !is_poison(bufs[k][t * w[k] + e]); bufs[k][t * w[k] + e] = 0; }
            }
            char w2[160];
            snprintf(w2, sizeof w2, "%s: %s", what, names[k]);
            CHECK(bad == 0, "%s: %zu values written in rows outside the runs", w2, bad);
            check_close(w2, bufs[k], refs[k], m, k == 0 ? TOL_RED : TOL_ELEM);
            check_untouched(w2, bufs[k], m, m + PAD);
        }
        for (uint32_t i = 0; i < n; i++) {
            char w2[160];
            snprintf(w2, sizeof w2, "%s: conv state of run %u (%u tokens)", what, i, lens[i]);
            check_close(w2, st + (size_t)rs[i].dst * sf + l.st.conv_off, ns + (size_t)i * l.conv, l.conv, TOL_ELEM);
        }
        check_slots_rest(what, &l, rs, n, st, slots, l.st.conv_off, l.conv);
        free(gy); free(gb); free(gg); free(st);
    }
    conv_io_free(&io);
    free(slots); free(y); free(beta); free(g); free(ns);
    cl_mem ms[] = { X, CW, Aa, Bb, SA, DT, ST, R, Y, BE, GG };
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) clReleaseMemObject(ms[i]);
}

static void test_delta_conv(void)
{
    reseed(__func__);
    conv_case(2, 4, 1);
    conv_case(2, 2, 0);
}

/* a sequence's conv in one launch, or in launches of 2 (shorter than the state), 1 and the rest, in
 * place: the same y and state, bit for bit */
static void test_delta_conv_split(void)
{
    reseed(__func__);
    layer l = make_layer(2, 4, 1, 2);
    uint32_t ntok = 40 + irand(30), dc = l.dc;
    conv_io io;
    conv_inputs(&l, ntok, &io);
    delta_run one = { 0, (int32_t)ntok, 0, 0, 0 };
    float *slots = make_slots(&l, &one, 1);
    size_t stot = 2 * (size_t)l.st.slot_floats, ym = (size_t)ntok * dc, gm = (size_t)ntok * l.sh.hv;
    cl_mem X = dbuf(ym * 4, io.x), CW = dbuf((size_t)dc * KC * 4, io.cw), Aa = dbuf(gm * 4, io.a);
    cl_mem Bb = dbuf(gm * 4, io.b), SA = dbuf(l.sh.hv * 4, io.ssm_a), DT = dbuf(l.sh.hv * 4, io.dt);
    cl_mem ST = dbuf(stot * 4, slots), Y = dbuf(ym * 4, NULL), BE = dbuf(gm * 4, NULL), GG = dbuf(gm * 4, NULL);
    float *y1 = malloc(ym * 4), *y2 = malloc(ym * 4), *s1 = malloc(stot * 4), *s2 = malloc(stot * 4);
    l.st.buf = ST;
    int32_t cuts[][2] = { { 0, (int32_t)ntok }, { 0, 2 }, { 2, 1 }, { 3, (int32_t)ntok - 3 } };
    for (int i = 0; i < 4; i++) {
        if (i == 1) {
            dread(Y, y1, ym * 4);
            dread(ST, s1, stot * 4);
            dwrite(ST, slots, stot * 4);
        }
        delta_run u = { cuts[i][0], cuts[i][1], cuts[i][0], 0, 0 };
        cl_mem R = run_table(&u, 1);
        delta_runs dr = { &u, R, 1, ntok };
        OPOK(op_delta_conv(&O, &l.sh, &dr, X, CW, Aa, Bb, SA, DT, 1e-6f, &l.st, Y, BE, GG));
        clReleaseMemObject(R);
    }
    dread(Y, y2, ym * 4);
    dread(ST, s2, stot * 4);
    CHECK(!memcmp(y1, y2, ym * 4), "delta_conv split in three launches: y differs from one launch");
    CHECK(!memcmp(s1, s2, stot * 4), "delta_conv split in three launches: the state differs from one launch");
    conv_io_free(&io);
    free(slots); free(y1); free(y2); free(s1); free(s2);
    cl_mem ms[] = { X, CW, Aa, Bb, SA, DT, ST, Y, BE, GG };
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) clReleaseMemObject(ms[i]);
}

/* ------------------------------------------------------------------ op_rmsnorm_gated */

static void test_rmsnorm_gated(void)
{
    reseed(__func__);
    uint32_t rows = 4 * (30 + irand(20)), n = 128;
    float eps = 1e-6f;
    size_t m = (size_t)rows * n, tot = m + PAD;
    float *x = malloc(m * 4), *z = malloc(m * 4), *w = malloc(n * 4), *y = malloc(tot * 4);
    double *ref = malloc(m * 8);
    fill_rows(x, rows, n);
    for (size_t i = 0; i < m; i++) z[i] = 2.0f * nrand();
    for (uint32_t i = 0; i < n; i++) w[i] = 1.0f + 0.3f * nrand();
    for (uint32_t r = 0; r < rows; r++) {
        double ss = 0;
        for (uint32_t i = 0; i < n; i++) ss += (double)x[(size_t)r * n + i] * x[(size_t)r * n + i];
        double inv = 1.0 / sqrt(ss / n + eps);
        for (uint32_t i = 0; i < n; i++)
            ref[(size_t)r * n + i] = x[(size_t)r * n + i] * inv * w[i] * silu_d(z[(size_t)r * n + i]);
    }
    cl_mem X = dbuf(tot * 4, NULL), Z = dbuf(m * 4, z), W = dbuf(n * 4, w), Y = dbuf(tot * 4, NULL);
    poison(X, tot * 4); dwrite(X, x, m * 4); poison(Y, tot * 4);
    OPOK(op_rmsnorm_gated(&O, X, Z, W, Y, rows, n, eps));
    dread(Y, y, tot * 4);
    check_close("rmsnorm_gated", y, ref, m, TOL_RED);
    check_untouched("rmsnorm_gated", y, m, tot);
    OPOK(op_rmsnorm_gated(&O, X, Z, W, X, rows, n, eps));
    dread(X, y, tot * 4);
    check_close("rmsnorm_gated in place", y, ref, m, TOL_RED);
    check_untouched("rmsnorm_gated in place", y, m, tot);
    free(x); free(z); free(w); free(y); free(ref);
    clReleaseMemObject(X); clReleaseMemObject(Z); clReleaseMemObject(W); clReleaseMemObject(Y);
}

/* ------------------------------------------------------------------ refusals */

static void test_delta_refused(void)
{
    reseed(__func__);
    layer l = make_layer(2, 4, 1, 4);
    cl_mem M = dbuf(4096, NULL), ST = dbuf((size_t)4 * l.st.slot_floats * 4, NULL);
    l.st.buf = ST;
    delta_run ok[2] = { { 0, 3, 0, 0, 1 }, { 3, 2, 9, 2, 2 } };
    struct { const char *why; delta_shape sh; delta_run rs[2]; uint32_t n, ntok, slot_floats; } cases[] = {
        { "Hv not a multiple of Hk", { 2, 3, 128, 128, KC, 1 }, { ok[0], ok[1] }, 2, 8, 0 },
        { "dk over 128", { 2, 4, 256, 128, KC, 1 }, { ok[0], ok[1] }, 2, 8, 0 },
        { "kc over 8", { 2, 4, 128, 128, 9, 1 }, { ok[0], ok[1] }, 2, 8, 0 },
        { "overlapping runs", l.sh, { ok[0], { 2, 2, 9, 2, 2 } }, 2, 8, 0 },
        { "an empty run", l.sh, { ok[0], { 3, 0, 9, 2, 2 } }, 2, 8, 0 },
        { "a run past the rows", l.sh, { ok[0], ok[1] }, 2, 4, 0 },
        { "a slot past the pool", l.sh, { ok[0], { 3, 2, 9, 2, 4 } }, 2, 8, 0 },
        { "a run writing another's source", l.sh, { ok[0], { 3, 2, 9, 2, 0 } }, 2, 8, 0 },
        { "states overlapping in a slot", l.sh, { ok[0], ok[1] }, 2, 8, l.st.ssm_off + 10 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        delta_state st = l.st;
        if (cases[i].slot_floats) st.slot_floats = cases[i].slot_floats;
        delta_runs dr = { cases[i].rs, M, cases[i].n, cases[i].ntok };
        int a = OPRC(op_delta_scan(&O, &cases[i].sh, &dr, M, M, M, &st, M));
        CHECK(a == -1 && strstr(err, "delta_scan"), "%s: op_delta_scan not refused (%s)", cases[i].why, err);
        int b = OPRC(op_delta_conv(&O, &cases[i].sh, &dr, M, M, M, M, M, M, 1e-6f, &st, ST, M, M));
        CHECK(b == -1 && strstr(err, "delta_conv"), "%s: op_delta_conv not refused (%s)", cases[i].why, err);
    }
    delta_runs dr = { ok, M, 2, 8 };
    CHECK(OPRC(op_delta_conv(&O, &l.sh, &dr, M, M, M, M, M, M, 1e-6f, &l.st, M, M, M)) == -1,
          "delta_conv with y == x not refused");
    CHECK(OPRC(op_rmsnorm_gated(&O, M, M, M, M, 2, 0, 1e-6f)) == -1, "rmsnorm_gated on rows of 0 not refused");
    clReleaseMemObject(M); clReleaseMemObject(ST);
}

int main(void)
{
    if (fixture_setup()) return 1;
    fflush(stdout);
    RUN_TEST(test_delta_conv);
    RUN_TEST(test_delta_conv_split);
    RUN_TEST(test_delta_scan_runs);
    RUN_TEST(test_delta_scan_heads);
    RUN_TEST(test_delta_scan_decode_batch);
    RUN_TEST(test_delta_step_vs_chunks);
    RUN_TEST(test_delta_scan_split);
    RUN_TEST(test_rmsnorm_gated);
    RUN_TEST(test_delta_refused);
    fixture_teardown();
    CHECK_EXIT();
}
