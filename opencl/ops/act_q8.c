/* act_q8.c — the int8 activation hand-off (NVIDIA): the int8 form of a product's X (mvqg's layout
 * for 1-4 tokens, mmq8's for 5-256) in xq / xqs, written by the X's producer where it can (norm_fuse,
 * attn_dec) or by the quantizers here, tagged with the X it came from; the tag is forgotten by
 * every launch that does not read it. */
#include "ops_int.h"

int ops_act_init(ops *o, cl_runtime *rt, char *err, size_t errlen)
{
    if (rt->is_nvidia && !(o->act.mvq_xq = rt_kernel(rt, "mvq_xq", err, errlen))) return -1;
    if (o->has_mma && !(o->act.q8x = rt_kernel(rt, "q8x_quant", err, errlen))) return -1;
    return 0;
}

void ops_act_release(ops *o)
{
    ops_kernel_release(&o->act.mvq_xq);
    ops_kernel_release(&o->act.q8x);
    ops_mem_release(&o->act.xq);
    ops_mem_release(&o->act.xqs);
}

/* scales and scaled half sums of mvqg's int8 X */
static size_t mvqg_xqs_bytes(uint32_t ntok, uint32_t k) { return (size_t)ntok * (k / 32) * 3 * sizeof(float); }

int ops_mvqg_takes_x(const ops *o, uint32_t k, uint32_t ntok)
{
    return o->act.mvq_xq && o->act_int8 && ntok >= 1 && ntok <= 4 && k % 32 == 0 && k >= o->pol.mvqg_min_k;
}

int ops_xq_reserve(ops *o, uint32_t ntok, uint32_t k)
{
    return ops_grow_buf(o, &o->act.xq, &o->act.xq_bytes, (size_t)ntok * k) ||
                   ops_grow_buf(o, &o->act.xqs, &o->act.xqs_bytes, mvqg_xqs_bytes(ntok, k))
               ? -1 : 0;
}

int ops_q8x_takes_x(const ops *o, uint32_t k, uint32_t ntok)
{
    return o->act.q8x && o->act_int8 && ntok >= 5 && ntok <= o->pol.mmq8_max_tok && k % 64 == 0 &&
           k >= o->pol.q8x_min_k && !ops_mmh_takes(o, ntok);
}

uint32_t ops_q8x_tpad(uint32_t ntok)
{
    return ntok <= 8 ? 8 : ntok <= 16 ? 16 : ntok <= 32 ? 32 : (ntok + 63) / 64 * 64;
}

int ops_q8x_reserve(ops *o, uint32_t ntok, uint32_t k)
{
    size_t tp = ops_q8x_tpad(ntok);
    return ops_grow_buf(o, &o->act.xq, &o->act.xq_bytes, tp * k) ||
                   ops_grow_buf(o, &o->act.xqs, &o->act.xqs_bytes, tp * (k / 32) * 2 * sizeof(float))
               ? -1 : 0;
}

void ops_xq_given(ops *o, cl_mem x, uint32_t ntok, uint32_t k)
{
    o->act.xq_of = x;
    o->act.xq_ntok = ntok;
    o->act.xq_k = k;
}

int ops_xq_holds(const ops *o, cl_mem X, uint32_t ldx, uint32_t ntok, uint32_t k)
{
    return o->act.xq_of == X && ldx == k && o->act.xq_ntok == ntok && o->act.xq_k == k;
}

/* the launches that read the int8 X (and so leave it, and X, as they were) */
static const unsigned char READS_XQ[K_COUNT] = { [K_MVQG] = 1, [K_MMQ8] = 1, [K_MMQ8S] = 1, [K_MMQ8P] = 1,
                                                 [K_MMQ8R] = 1, [K_MMQ8_SUM] = 1 };

void ops_xq_launched(ops *o, int kind)
{
    if (!READS_XQ[kind]) o->act.xq_of = NULL; /* xq may be rewritten, or X itself */
}
