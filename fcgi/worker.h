/* worker.h — one worker process: loads the model on one device, serves FastCGI requests on a
 * listening socket with several request threads, drains on SIGTERM. */
#ifndef CLGEMMA_FCGI_WORKER_H
#define CLGEMMA_FCGI_WORKER_H

#include "config.h"

enum { WORKER_EXIT_OK = 0, WORKER_EXIT_ERROR = 1, WORKER_EXIT_LOAD = 3 };

/* Runs until SIGTERM/SIGINT (drained: WORKER_EXIT_OK) or a fatal error. Serves (503) from the
 * start; loads the model after load_delay seconds (a restart's back-off). */
int worker_run(const server_config *cfg, int index, int listen_fd, double load_delay);

#endif
