/* logit_rows.h — comparing rows of logits in the engine tests (test_engine_fork, test_engine_prefix):
 * the largest absolute difference (NaN counts as the largest), the greedy choice, and the bound of
 * engine-vs-engine differences on the engine's device. */
#ifndef CLGEMMA_LOGIT_ROWS_H
#define CLGEMMA_LOGIT_ROWS_H
#include <math.h>
#include <stddef.h>
#include <stdint.h>

static inline double rows_max_diff(const float *a, const float *b, uint32_t n)
{
    double m = 0;
    for (uint32_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= m)) m = d; /* NaN wins */
    }
    return m;
}

static inline int32_t rows_argmax(const float *x, uint32_t n)
{
    int32_t b = 0;
    for (uint32_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = (int32_t)i;
    return b;
}

/* engine vs engine on one device (test_qwen35's rule): abs_tol where every path computes in f32; where prompts
 * round to f16 for tensor cores (tensor_cores) or decode rounds the inputs of quantized weights to int8 (int8),
 * 2e-3 or 4e-2 of the range of the rows, as each side may differ from the float64 reference by that much */
static inline double rows_engine_tol(int tensor_cores, int int8, double abs_tol, const float *rows, size_t n)
{
    if (!tensor_cores && !int8) return abs_tol;
    float lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        lo = fminf(lo, rows[i]);
        hi = fmaxf(hi, rows[i]);
    }
    return (int8 ? 4e-2 : 2e-3) * ((double)hi - lo);
}

#endif
