/* logit_rows.h — comparing rows of logits in the engine tests (test_engine_fork, test_engine_prefix):
 * the largest absolute difference (NaN counts as the largest) and the greedy choice. */
#ifndef CLGEMMA_LOGIT_ROWS_H
#define CLGEMMA_LOGIT_ROWS_H
#include <math.h>
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

#endif
