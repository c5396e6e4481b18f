/* errf.h — the one way engine code reports an error: format one line into the caller's buffer
 * and return -1, so `return errf(err, errlen, "...", ...)` both reports and fails. */
#ifndef CLGEMMA_ERRF_H
#define CLGEMMA_ERRF_H
#include <stddef.h>
int errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#define ERR(...) errf(err, errlen, __VA_ARGS__)
#endif
