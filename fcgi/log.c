/* log.c — timestamped log lines (log.h). */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

void log_line(const char *who, const char *fmt, ...)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    char line[1024];
    size_t n = strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &tm);
    n += (size_t)snprintf(line + n, sizeof line - n, ".%03ldZ clgemma-fcgi[%s]: ", ts.tv_nsec / 1000000, who);
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(line + n, sizeof line - n - 1, fmt, ap);
    va_end(ap);
    n = k < 0 ? n : n + (size_t)k < sizeof line - 1 ? n + (size_t)k : sizeof line - 2;
    line[n++] = '\n';
    fwrite(line, 1, n, stderr);
}
