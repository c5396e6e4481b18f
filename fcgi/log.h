/* log.h — the worker's log lines on stderr: "2026-11-23T16:52:35.123Z clgemma-fcgi[WHO]: message",
 * one write per line so threads never interleave (request lines carry rid=<request id>). */
#ifndef CLGEMMA_FCGI_LOG_H
#define CLGEMMA_FCGI_LOG_H

/* who: "master pid 12" or "worker 0 pid 13" */
void log_line(const char *who, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
