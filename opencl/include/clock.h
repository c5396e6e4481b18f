/* clock.h — monotonic seconds: the one clock for durations (load, steps, TTFT, restarts, drain
 * deadlines), in the engine and on both sides of its API. */
#ifndef CLGEMMA_CLOCK_H
#define CLGEMMA_CLOCK_H

#include <time.h>

static inline double monotonic_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

#endif
