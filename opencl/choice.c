/* choice.c — see choice.h. */
#include "choice.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "errf.h"

#define LP_WORDS (2 * ENGINE_MAX_LOGPROBS) /* a logprobs row: values, then ids */

_Static_assert(ENGINE_MAX_LOGPROBS == OPS_MAX_LOGPROBS, "the device computes what the API reports");
_Static_assert(sizeof(engine_bias) == 8, "bias pairs travel as two 32-bit words");

/* words of the fixed head: descriptors and logprob rows */
static size_t head_words(const choice_plan *c) { return 5 * (size_t)c->max_rows; }

int choice_create(choice_plan *c, cl_runtime *rt, uint32_t n_vocab, uint32_t max_rows, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    c->n_vocab = n_vocab;
    c->words = (n_vocab + 31) / 32;
    c->max_rows = max_rows;
    size_t cap = head_words(c) + (size_t)max_rows * (c->words + 2 * ENGINE_MAX_BIAS);
    c->h_rules = malloc(4 * cap);
    c->h_lp = malloc(4 * (size_t)max_rows * LP_WORDS);
    c->con_row = malloc(sizeof(int32_t) * max_rows);
    c->lp_row = malloc(sizeof(int32_t) * max_rows);
    c->lp_k = malloc(sizeof(int) * max_rows);
    if (!c->h_rules || !c->h_lp || !c->con_row || !c->lp_row || !c->lp_k) return ERR("out of memory");
    if (!(c->rules = rt_alloc(rt, 4 * cap, NULL, err, errlen))) return -1;
    if (!(c->lp_out = rt_alloc(rt, 4 * (size_t)max_rows * LP_WORDS, NULL, err, errlen))) return -1;
    return 0;
}

void choice_destroy(choice_plan *c)
{
    if (c->rules) clReleaseMemObject(c->rules);
    if (c->lp_out) clReleaseMemObject(c->lp_out);
    free(c->h_rules); free(c->h_lp); free(c->con_row); free(c->lp_row); free(c->lp_k);
    memset(c, 0, sizeof *c);
}

int choice_wanted(const engine_item *it) { return it->allow || it->n_bias > 0 || it->n_logprobs > 0; }

int choice_check(const engine_item *it, uint32_t n_vocab, char *err, size_t errlen)
{
    if (!choice_wanted(it)) return 0;
    if (!it->smp) return ERR("allow, bias and logprobs need a sampler (a token to choose)");
    if (it->n_bias < 0 || it->n_bias > ENGINE_MAX_BIAS) return ERR("%d bias pairs (at most %d)", it->n_bias,
                                                                   ENGINE_MAX_BIAS);
    if (it->n_bias && !it->bias) return ERR("%d bias pairs but no bias array", it->n_bias);
    for (int i = 0; i < it->n_bias; i++) {
        if (it->bias[i].token < 0 || (uint32_t)it->bias[i].token >= n_vocab)
            return ERR("bias token %d out of range [0, %u)", it->bias[i].token, n_vocab);
        if (!isfinite(it->bias[i].bias)) return ERR("bias of token %d is not finite", it->bias[i].token);
    }
    if (it->n_logprobs < 0 || it->n_logprobs > ENGINE_MAX_LOGPROBS)
        return ERR("n_logprobs %d outside 0..%d", it->n_logprobs, ENGINE_MAX_LOGPROBS);
    if (it->n_logprobs && !it->lp) return ERR("n_logprobs %d but no lp to fill", it->n_logprobs);
    if (it->allow) {
        /* a row with nothing allowed has no token to choose */
        uint32_t any = 0, w = (n_vocab + 31) / 32, tail = n_vocab % 32;
        for (uint32_t i = 0; i < w && !any; i++)
            any = i + 1 == w && tail ? it->allow[i] & ((1u << tail) - 1) : it->allow[i];
        if (!any) return ERR("the allow mask allows no token");
    }
    return 0;
}

void choice_begin(choice_plan *c)
{
    c->n_con = c->n_lp = 0;
    c->used = head_words(c);
}

static int cmp_bias(const void *a, const void *b)
{
    int32_t x = ((const int32_t *)a)[0], y = ((const int32_t *)b)[0];
    return (x > y) - (x < y);
}

void choice_add(choice_plan *c, const engine_item *it, int32_t row, int greedy)
{
    if (it->n_logprobs > 0 && greedy) {
        c->h_rules[4 * (size_t)c->max_rows + c->n_lp] = row;
        c->lp_row[c->n_lp] = row;
        c->lp_k[c->n_lp++] = it->n_logprobs;
    }
    if (!it->allow && it->n_bias <= 0) return;
    int32_t *d = c->h_rules + 4 * (size_t)c->n_con, aoff = -1, boff = 0, nb = 0;
    if (it->allow) {
        aoff = (int32_t)c->used;
        memcpy(c->h_rules + c->used, it->allow, 4 * (size_t)c->words);
        c->used += c->words;
    }
    if (it->n_bias > 0) {
        /* sorted by token for the kernel's binary search; a token listed twice: one pair, both biases */
        int32_t *p = c->h_rules + c->used;
        for (int i = 0; i < it->n_bias; i++) {
            p[2 * i] = it->bias[i].token;
            memcpy(&p[2 * i + 1], &it->bias[i].bias, 4);
        }
        qsort(p, (size_t)it->n_bias, 8, cmp_bias);
        for (int i = 0; i < it->n_bias; i++) {
            if (nb && p[2 * (nb - 1)] == p[2 * i]) {
                float a, b;
                memcpy(&a, &p[2 * (nb - 1) + 1], 4);
                memcpy(&b, &p[2 * i + 1], 4);
                a += b;
                memcpy(&p[2 * (nb - 1) + 1], &a, 4);
                continue;
            }
            p[2 * nb] = p[2 * i];
            p[2 * nb + 1] = p[2 * i + 1];
            nb++;
        }
        boff = (int32_t)c->used;
        c->used += 2 * (size_t)nb;
    }
    d[0] = row; d[1] = aoff; d[2] = boff; d[3] = nb;
    c->con_row[c->n_con++] = row;
}

int choice_upload(choice_plan *c, cl_command_queue q, char *err, size_t errlen)
{
    if (!c->n_con && !c->n_lp) return 0;
    /* blocking, as kv_sync: the queue is idle at a step's start, and a non-blocking copy of h_rules gave
     * wrong rows on PoCL (test_mixed_batch) */
    cl_int ce = clEnqueueWriteBuffer(q, c->rules, CL_TRUE, 0, 4 * c->used, c->h_rules, 0, NULL, NULL);
    return ce ? ERR("upload of the allow masks and biases failed: %s", rt_errstr(ce)) : 0;
}

/* the entries of rows[0..n) in [r0, r0 + rn): first index into *i0, count returned */
static uint32_t rows_in(const int32_t *rows, uint32_t n, uint32_t r0, uint32_t rn, uint32_t *i0)
{
    uint32_t i = 0, k = 0;
    while (i < n && (uint32_t)rows[i] < r0) i++;
    while (i + k < n && (uint32_t)rows[i + k] < r0 + rn) k++;
    *i0 = i;
    return k;
}

int choice_constrain(choice_plan *c, ops *o, cl_mem x, uint32_t r0, uint32_t rn)
{
    uint32_t d0, nd = rows_in(c->con_row, c->n_con, r0, rn, &d0);
    return nd ? op_logits_constrain(o, x, c->n_vocab, c->rules, d0, nd, r0) : o->failed ? -1 : 0;
}

int choice_logprobs(choice_plan *c, ops *o, cl_mem x, uint32_t r0, uint32_t rn)
{
    uint32_t l0, nl = rows_in(c->lp_row, c->n_lp, r0, rn, &l0);
    if (!nl) return o->failed ? -1 : 0;
    int k = 1;
    for (uint32_t i = l0; i < l0 + nl; i++) k = c->lp_k[i] > k ? c->lp_k[i] : k;
    /* the launch writes from lp_out's start; each chunk's rows are read back to their place */
    if (op_logprobs(o, x, c->n_vocab, c->rules, 4 * c->max_rows + l0, nl, r0, (uint32_t)k, c->lp_out)) return -1;
    cl_int ce = clEnqueueReadBuffer(o->rt->q, c->lp_out, CL_FALSE, 0, 4 * (size_t)nl * LP_WORDS,
                                    c->h_lp + (size_t)l0 * LP_WORDS, 0, NULL, NULL);
    return ce ? ops_fail(o, "logprobs: read failed: %s", rt_errstr(ce)) : 0;
}

void choice_fill(const choice_plan *c, int32_t row, engine_item *it)
{
    uint32_t i = 0;
    while (i < c->n_lp && c->lp_row[i] != row) i++;
    engine_logprobs *lp = it->lp;
    lp->n_top = 0;
    if (i == c->n_lp) return;
    const float *v = c->h_lp + (size_t)i * LP_WORDS;
    const int32_t *ids = (const int32_t *)(v + ENGINE_MAX_LOGPROBS);
    for (int t = 0; t < it->n_logprobs && ids[t] >= 0; t++) {
        lp->top_id[t] = ids[t];
        lp->top_lp[t] = v[t];
        lp->n_top = t + 1;
    }
    lp->chosen = lp->n_top ? lp->top_lp[0] : -INFINITY;
}
