/* check.h — the smallest test framework that does the job.
 * Each CHECK failure prints "FAIL test: file:line: message"; each test function that
 * completes without a failure prints "PASS test". tests/run_all.sh counts those lines. */
#ifndef CLGEMMA_CHECK_H
#define CLGEMMA_CHECK_H
#include <stdio.h>
#include <stdlib.h>

static int check_failures_total;
static int check_failures_here;
static const char *check_current = "?";

#define CHECK(cond, ...) do { if (!(cond)) { \
    printf("FAIL %s: %s:%d: ", check_current, __FILE__, __LINE__); \
    printf(__VA_ARGS__); printf("\n"); fflush(stdout); \
    check_failures_here++; check_failures_total++; } } while (0)

#define RUN_TEST(fn) do { check_current = #fn; check_failures_here = 0; fn(); \
    if (!check_failures_here) { printf("PASS %s\n", #fn); } \
    fflush(stdout); } while (0)

#define CHECK_EXIT() return check_failures_total ? 1 : 0

#endif
