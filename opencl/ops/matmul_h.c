/* matmul_h.c — batched decode products on f16 tensor cores with X shared in local memory (mma_h.cl,
 * NVIDIA): X made f16 once per product (mmh_x, the activation applied for a down product) into
 * matmul's f16 X buffer, then mmh_T_NT over up to three matrices of one X; k slices go through
 * matmul_q8's partial Ys and mmq8_sum, as the int8 products' do. */
#include "ops_int.h"

#include <stdio.h>

int ops_mmh_init(ops *o, cl_runtime *rt, char *err, size_t errlen)
{
    ops_mmh_fam *h = &o->mmh;
    if (!o->has_mma) return 0;
    for (uint32_t t = 0; t < GGML_TYPE_COUNT; t++)
        for (int nt = 0; dev_type_has(t, DT_MMH) && nt < OPS_MMH_NT; nt++) {
            char name[64];
            snprintf(name, sizeof name, "mmh_%s_%d", dev_type_of(t)->suffix, 2 << nt);
            if (!(h->mm[nt][t] = rt_kernel(rt, name, err, errlen))) return -1;
        }
    return (h->x = rt_kernel(rt, "mmh_x", err, errlen)) ? 0 : -1;
}

void ops_mmh_release(ops *o)
{
    ops_mmh_fam *h = &o->mmh;
    for (int t = 0; t < GGML_TYPE_COUNT; t++)
        for (int nt = 0; nt < OPS_MMH_NT; nt++) ops_kernel_release(&h->mm[nt][t]);
    ops_kernel_release(&h->x);
}

int ops_mmh_takes(const ops *o, uint32_t ntok)
{
    return o->mmh.x && ntok >= o->pol.mmh_min_tok && ntok <= o->pol.mmh_max_tok;
}

/* the groups of 32 * OPS_MMH_WARPS rows that cover rows */
static size_t mmh_row_groups(size_t rows) { return (rows + 32 * OPS_MMH_WARPS - 1) / (32 * OPS_MMH_WARPS); }

int ops_mmh_fits(const ops *o, uint32_t type, uint32_t rows, uint32_t k, uint32_t ntok)
{
    if (type >= GGML_TYPE_COUNT || !o->mmh.mm[0][type] || k % 64 || (size_t)rows * k < o->pol.mmq8_min_elems)
        return 0;
    /* q6_k's few-row products (FFN down) from fewer tokens: mmq8 reads q6_k unstaged, mmh through its
     * ring in k slices; its many-row ones (the head) ran no faster there */
    int q6_early = type == GGML_TYPE_Q6_K && mmh_row_groups(rows) < o->pol.mmh_slots;
    return ops_mmh_takes(o, ntok) || (q6_early && o->mmh.x && ntok >= o->pol.mmh_min_tok_q6k &&
                                      ntok <= o->pol.mmh_max_tok);
}

/* k slices for g groups of nu units each: the kg (1-16, each slice keeping pol.mmq8_slice_units
 * units) with the least time counted in units, a group's slice taking as long in a wave of
 * pol.mmh_slots groups however full the wave is, and the partial Ys (4 * ntok * rows bytes a
 * slice, written and read, and Y) costing their bytes at pol.mmh_unit_bytes a unit */
static uint32_t mmh_slices(const ops *o, size_t g, uint32_t nu, uint32_t ntok, size_t rows)
{
    uint32_t best = 1, slots = o->pol.mmh_slots;
    double best_t = 0;
    for (uint32_t kg = 1; kg <= 16 && (kg == 1 || nu / kg >= o->pol.mmq8_slice_units); kg++) {
        double waves = (double)((g * kg + slots - 1) / slots), units = (nu + kg - 1) / kg;
        double t = waves * units + (kg > 1 ? 4.0 * ntok * rows * (2 * kg + 1) / o->pol.mmh_unit_bytes : 0.0);
        if (kg == 1 || t < best_t) best = kg, best_t = t;
    }
    return best;
}

int ops_mmh(ops *o, const mm_out *outs, int n, cl_mem X, uint32_t ldx, const geglu_in *gg, uint32_t ntok)
{
    ops_mmh_fam *h = &o->mmh;
    uint32_t k = outs[0].w->cols, act = gg ? gg->act : 0, u_off = gg ? gg->u_off : 0, ldu = gg ? gg->ldu : 0;
    int nt = ntok <= 16 ? 0 : ntok <= 32 ? 1 : 2; /* past 64 tokens, blocks of 64 */
    uint32_t tpb = 16u << nt, blocks = (ntok + tpb - 1) / tpb, tp = blocks * tpb;
    cl_mem U = gg ? gg->U : NULL; /* unread without an activation */
    size_t xl[2] = { 64, 1 }, xg[2] = { ((size_t)k / 8 + 63) / 64 * 64, tp };
    cl_mem *xh = &o->mm.xh;
    if (ops_grow_buf(o, xh, &o->mm.xh_bytes, (size_t)tp * k * 2) ||
        OPS_LAUNCH(o, K_MMH_X, h->x, 2, xg, xl, 4.0 * ntok * k * (act ? 2 : 1) + 2.0 * tp * k, 0, A(X), A(ldx), A(U),
                   A(u_off), A(ldu), A(act), A(ntok), A(tp), A(k), A(*xh)))
        return -1;
    /* matrices of one type whose rows are whole warps' go in one launch (Q/K/V, gate/up) */
    int together = n > 1;
    for (int i = 0; i < n; i++)
        together &= outs[i].w->type == outs[0].w->type && outs[i].w->rows % 32 == 0;
    for (int i = 0; i < n; i++) {
        const weight *w = outs[i].w;
        multi_args a;
        if (ops_gather_multi(o, together ? outs : &outs[i], together ? n : 1, &a)) return -1;
        size_t groups = mmh_row_groups(a.rows) * blocks;
        /* matrices sharing X take slices only in tiles of up to pol.mmh_slice_shared_max_tok tokens (none by
         * default): the sums of their many rows cost more than the slices gain */
        uint32_t kg = together && tpb > o->pol.mmh_slice_shared_max_tok ? 1 : mmh_slices(o, groups, k / 64, ntok, a.rows);
        int parts = together ? n : 1;
        cl_mem Y[3] = { a.Y[0], a.Y[1], a.Y[2] };
        uint32_t ld[3] = { a.ld[0], a.ld[1], a.ld[2] };
        for (int j = 0; kg > 1 && j < parts; j++) { /* each matrix's partial Ys in a buffer of its own */
            if (ops_grow_buf(o, &o->q8.part[j], &o->q8.part_bytes[j], (size_t)kg * ntok * a.nr[j] * sizeof(float)))
                return -1;
            Y[j] = o->q8.part[j];
            ld[j] = a.nr[j];
        }
        size_t lws[2] = { 32 * OPS_MMH_WARPS, 1 }, gws[2] = { groups / blocks * lws[0], (size_t)blocks * kg };
        double bytes = a.bytes * blocks + 2.0 * tp * k * (groups / blocks) * kg + 4.0 * ntok * a.rows * kg;
        if (OPS_LAUNCH(o, K_MMH, h->mm[nt][w->type], 2, gws, lws, bytes, 2.0 * ntok * a.rows * k, A(a.W[0]),
                       A(a.rb[0]), A(a.nr[0]), A(Y[0]), A(ld[0]), A(a.W[1]), A(a.rb[1]), A(a.nr[1]), A(Y[1]),
                       A(ld[1]), A(a.W[2]), A(a.rb[2]), A(a.nr[2]), A(Y[2]), A(ld[2]), A(k), A(*xh),
                       A(ntok), A(kg), A(o->pol.mmh_prefetch)))
            return -1;
        for (int j = 0; kg > 1 && j < parts; j++) {
            uint32_t rows = a.nr[j];
            size_t sl[2] = { 64, 1 }, sg[2] = { (rows + 63) / 64 * 64, ntok };
            if (OPS_LAUNCH(o, K_MMQ8_SUM, o->q8.mmq8_sum, 2, sg, sl, 4.0 * (kg + 1) * ntok * rows, 0, A(o->q8.part[j]),
                           A(kg), A(rows), A(ntok), A(a.Y[j]), A(a.ld[j])))
                return -1;
        }
        if (together) break;
    }
    return 0;
}
