/* logits.c — the choice rows' extras: token mask and logit bias in place, and log-probabilities
 * (log-sum-exp and the top k) of rows that stay on the device (kernels/logits.cl). */
#include "ops_int.h"

_Static_assert(OPS_MAX_LOGPROBS == 20, "LP_MAXK in logits.cl");
_Static_assert(OPS_SAMPLE_MAXK == 2048, "SMP_MAXK in logits.cl");

int ops_logits_init(ops *o, cl_runtime *rt, char *err, size_t errlen)
{
    ops_logits *l = &o->logits;
    struct { cl_kernel *k; const char *name; } ks[] = {
        { &l->constrain, "logits_constrain" }, { &l->lp_part, "logprobs_part" }, { &l->lp_final, "logprobs_final" },
        { &l->sample_topk, "sample_topk" },
    };
    for (size_t i = 0; i < sizeof ks / sizeof *ks; i++)
        if (!(*ks[i].k = rt_kernel(rt, ks[i].name, err, errlen))) return -1;
    return 0;
}

void ops_logits_release(ops *o)
{
    ops_logits *l = &o->logits;
    cl_kernel *ks[] = { &l->constrain, &l->lp_part, &l->lp_final, &l->sample_topk };
    for (size_t i = 0; i < sizeof ks / sizeof *ks; i++) ops_kernel_release(ks[i]);
    cl_mem *ms[] = { &l->lp_m, &l->lp_s, &l->lp_v, &l->lp_i };
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) ops_mem_release(ms[i]);
    l->lp_m_bytes = l->lp_s_bytes = l->lp_v_bytes = l->lp_i_bytes = 0;
}

int op_logits_constrain(ops *o, cl_mem x, uint32_t n, cl_mem rules, uint32_t d0, uint32_t nrows, uint32_t row0)
{
    if (nrows == 0) return o->failed ? -1 : 0;
    size_t lws[2] = { 64, 1 }, gws[2] = { (n + 63) / 64 * 64, nrows };
    return OPS_LAUNCH(o, K_LOGITS_CONSTRAIN, o->logits.constrain, 2, gws, lws, 8.0 * nrows * n, 0, A(x), A(n),
                      A(rules), A(d0), A(row0));
}

int op_logprobs(ops *o, cl_mem x, uint32_t n, cl_mem ids, uint32_t roff, uint32_t nrows, uint32_t row0, uint32_t k,
                cl_mem out)
{
    if (nrows == 0) return o->failed ? -1 : 0;
    if (k < 1 || k > OPS_MAX_LOGPROBS) return ops_fail(o, "logprobs: k %u outside 1..%d", k, OPS_MAX_LOGPROBS);
    ops_logits *l = &o->logits;
    /* the argmax's geometry: parts of a few thousand values spread a row over the device */
    size_t lws = o->rt->is_cpu ? 16 : 256;
    uint32_t parts = o->rt->is_cpu ? 4 : 128;
    if (parts > (n + lws - 1) / lws) parts = (uint32_t)((n + lws - 1) / lws);
    uint32_t slice = (n + parts - 1) / parts;
    size_t np = (size_t)nrows * parts;
    if (ops_grow_buf(o, &l->lp_m, &l->lp_m_bytes, 4 * np) || ops_grow_buf(o, &l->lp_s, &l->lp_s_bytes, 4 * np) ||
        ops_grow_buf(o, &l->lp_v, &l->lp_v_bytes, 4 * np * OPS_MAX_LOGPROBS) ||
        ops_grow_buf(o, &l->lp_i, &l->lp_i_bytes, 4 * np * OPS_MAX_LOGPROBS))
        return -1;
    size_t gws[2] = { parts * lws, nrows }, l2[2] = { lws, 1 };
    if (OPS_LAUNCH(o, K_LOGPROBS, l->lp_part, 2, gws, l2, 4.0 * (k + 1) * nrows * n, 0, A(x), A(n), A(slice), A(ids),
                   A(roff), A(row0), A(k), A(l->lp_m), A(l->lp_s), A(l->lp_v), A(l->lp_i),
                   LOCAL(lws * sizeof(float)), LOCAL(lws * sizeof(int))))
        return -1;
    size_t lf = 64, gf = nrows * lf;
    return OPS_LAUNCH(o, K_LOGPROBS, l->lp_final, 1, &gf, &lf, 8.0 * np * (k + 1), 0, A(l->lp_m), A(l->lp_s),
                      A(l->lp_v), A(l->lp_i), A(parts), A(k), A(out), LOCAL(lf * sizeof(float)),
                      LOCAL(lf * sizeof(int)));
}

int op_sample_topk(ops *o, cl_mem x, uint32_t n, cl_mem desc, uint32_t d0, uint32_t nrows, uint32_t row0, cl_mem pen,
                   cl_mem pval, cl_mem out)
{
    if (nrows == 0) return o->failed ? -1 : 0;
    /* one group per row: four histogram passes and a compaction over the row, then a sort of k */
    size_t lws = o->rt->is_cpu ? 64 : 256, gws = nrows * lws;
    return OPS_LAUNCH(o, K_SAMPLE_TOPK, o->logits.sample_topk, 1, &gws, &lws, 20.0 * nrows * n, 0, A(x), A(n), A(desc),
                      A(d0), A(row0), A(pen), A(pval), A(out), LOCAL(256 * sizeof(cl_uint)),
                      LOCAL(OPS_SAMPLE_MAXK * sizeof(cl_uint)), LOCAL(OPS_SAMPLE_MAXK * sizeof(cl_int)),
                      LOCAL(8 * sizeof(cl_uint)));
}
