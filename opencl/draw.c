/* draw.c — see draw.h. */
#include "draw.h"

#include <stdlib.h>
#include <string.h>

#include "errf.h"

#define OUT_WORDS (2 * OPS_SAMPLE_MAXK)

int draw_create(draw_plan *d, cl_runtime *rt, uint32_t n_vocab, uint32_t max_rows, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    d->n_vocab = n_vocab;
    d->max_rows = max_rows;
    size_t req = (size_t)max_rows * (4 + DRAW_MAX_PEN);
    d->h_req = malloc(4 * req);
    d->h_pval = malloc(4 * req);
    d->h_out = malloc(4 * (size_t)max_rows * OUT_WORDS);
    d->row = malloc(sizeof(int32_t) * max_rows);
    if (!d->h_req || !d->h_pval || !d->h_out || !d->row) return ERR("out of memory");
    if (!(d->req = rt_alloc(rt, 4 * req, NULL, err, errlen))) return -1;
    if (!(d->pval = rt_alloc(rt, 4 * req, NULL, err, errlen))) return -1;
    if (!(d->out = rt_alloc(rt, 4 * (size_t)max_rows * OUT_WORDS, NULL, err, errlen))) return -1;
    return 0;
}

void draw_destroy(draw_plan *d)
{
    cl_mem ms[] = { d->req, d->pval, d->out };
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++)
        if (ms[i]) clReleaseMemObject(ms[i]);
    free(d->h_req); free(d->h_pval); free(d->h_out); free(d->row);
    memset(d, 0, sizeof *d);
}

void draw_begin(draw_plan *d) { d->n = d->used = 0; }

int draw_add(draw_plan *d, const engine_item *it, int32_t row)
{
    if (!it->smp || sampler_is_greedy(it->smp) || it->n_logprobs > 0 || d->n == d->max_rows) return 0;
    int32_t *pen = d->h_req + 4 * (size_t)d->max_rows + d->used;
    int np = sampler_pen_tokens(it->smp, it->tokens, it->n_tokens, pen, DRAW_MAX_PEN);
    uint32_t k = sampler_cand_k(it->smp);
    if (np < 0 || k + (uint32_t)np > OPS_SAMPLE_MAXK) return 0;
    int32_t *desc = d->h_req + 4 * (size_t)d->n;
    desc[0] = row;
    desc[1] = (int32_t)(k + (uint32_t)np);
    desc[2] = (int32_t)(4 * d->max_rows + d->used);
    desc[3] = np;
    d->used += (uint32_t)np;
    d->row[d->n++] = row;
    return 1;
}

int draw_upload(draw_plan *d, cl_command_queue q, char *err, size_t errlen)
{
    if (!d->n) return 0;
    /* blocking, as choice_upload: h_req is refilled by the next step */
    size_t words = 4 * (size_t)d->max_rows + d->used;
    cl_int ce = clEnqueueWriteBuffer(q, d->req, CL_TRUE, 0, 4 * words, d->h_req, 0, NULL, NULL);
    return ce ? ERR("upload of the sampled rows failed: %s", rt_errstr(ce)) : 0;
}

int draw_launch(draw_plan *d, ops *o, cl_mem x, uint32_t r0, uint32_t rn)
{
    uint32_t i = 0, nr = 0;
    while (i < d->n && (uint32_t)d->row[i] < r0) i++;
    while (i + nr < d->n && (uint32_t)d->row[i + nr] < r0 + rn) nr++;
    if (!nr) return o->failed ? -1 : 0;
    if (op_sample_topk(o, x, d->n_vocab, d->req, i, nr, r0, d->req, d->pval, d->out)) return -1;
    cl_int ce = clEnqueueReadBuffer(o->rt->q, d->out, CL_FALSE, 4 * (size_t)i * OUT_WORDS, 4 * (size_t)nr * OUT_WORDS,
                                    (char *)d->h_out + 4 * (size_t)i * OUT_WORDS, 0, NULL, NULL);
    /* the rows' penalized values lie together: from the first row's offset to the last one's end */
    const int32_t *a = d->h_req + 4 * (size_t)i, *z = d->h_req + 4 * (size_t)(i + nr - 1);
    size_t p0 = (size_t)a[2], p1 = (size_t)z[2] + (size_t)z[3];
    if (!ce && p1 > p0)
        ce = clEnqueueReadBuffer(o->rt->q, d->pval, CL_FALSE, 4 * p0, 4 * (p1 - p0), d->h_pval + p0, 0, NULL, NULL);
    return ce ? ops_fail(o, "sampled rows: read failed: %s", rt_errstr(ce)) : 0;
}

int32_t draw_pick(draw_plan *d, int32_t row, sampler *smp)
{
    uint32_t i = 0;
    while (i < d->n && d->row[i] != row) i++;
    if (i == d->n) return -1;
    const int32_t *desc = d->h_req + 4 * (size_t)i;
    const char *o = (const char *)d->h_out + 4 * (size_t)i * OUT_WORDS;
    uint32_t m = (uint32_t)desc[1] < d->n_vocab ? (uint32_t)desc[1] : d->n_vocab;
    return sampler_sample_cands(smp, (const float *)o, (const int32_t *)(o + 4 * OPS_SAMPLE_MAXK), m,
                                d->h_req + desc[2], d->h_pval + desc[2], desc[3]);
}
