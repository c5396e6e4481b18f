/* main.c — clgemma-fcgi: options, listening sockets, the master process.
 *
 * The master opens the listening socket(s) (or takes the one spawn-fcgi passes on fd 0), forks
 * one worker per device, restarts a worker that dies at once (it answers 503 while it waits out a
 * back-off before it loads: none after a minute of health, then 1 s doubling to 30 s), and on SIGTERM/SIGINT passes the signal on, waits for the workers
 * to drain and exits 0 when they all did. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <netdb.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "config.h"
#include "fetch.h"
#include "log.h"
#include "worker.h"

static volatile sig_atomic_t got_term, got_child;

static void on_term(int sig) { (void)sig; got_term = 1; }
static void on_child(int sig) { (void)sig; got_child = 1; }

#define LOG(...) do { char who_[32]; snprintf(who_, sizeof who_, "master pid %d", (int)getpid()); \
    log_line(who_, __VA_ARGS__); } while (0)

/* unix:PATH or HOST:PORT (":PORT" = all interfaces); returns a listening fd or -1 with err */
static int open_listener(const char *addr, int mode, char *err, size_t errlen)
{
    int fd;
    if (!strncmp(addr, "unix:", 5)) {
        const char *path = addr + 5;
        struct sockaddr_un sa;
        memset(&sa, 0, sizeof sa);
        sa.sun_family = AF_UNIX;
        if (!*path || strlen(path) >= sizeof sa.sun_path) {
            snprintf(err, errlen, "%s: bad unix socket path", addr);
            return -1;
        }
        strcpy(sa.sun_path, path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) { snprintf(err, errlen, "socket: %s", strerror(errno)); return -1; }
        struct stat st;
        if (!lstat(path, &st) && S_ISSOCK(st.st_mode)) unlink(path); /* a stale socket of an earlier run */
        if (bind(fd, (struct sockaddr *)&sa, sizeof sa) || chmod(path, (mode_t)mode) || listen(fd, 256)) {
            snprintf(err, errlen, "%s: %s", addr, strerror(errno));
            close(fd);
            return -1;
        }
        return fd;
    }
    const char *colon = strrchr(addr, ':');
    if (!colon || !colon[1]) { snprintf(err, errlen, "%s: expected unix:PATH or HOST:PORT", addr); return -1; }
    char host[256];
    size_t hl = (size_t)(colon - addr);
    if (hl >= sizeof host) { snprintf(err, errlen, "%s: host too long", addr); return -1; }
    memcpy(host, addr, hl);
    host[hl] = 0;
    struct addrinfo hints, *res;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    int gr = getaddrinfo(hl ? host : NULL, colon + 1, &hints, &res);
    if (gr) { snprintf(err, errlen, "%s: %s", addr, gai_strerror(gr)); return -1; }
    fd = socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, res->ai_protocol);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
        bind(fd, res->ai_addr, res->ai_addrlen) || listen(fd, 256)) {
        snprintf(err, errlen, "%s: %s", addr, strerror(errno));
        if (fd >= 0) close(fd);
        freeaddrinfo(res);
        return -1;
    }
    freeaddrinfo(res);
    return fd;
}

static int is_listening_socket(int fd)
{
    int v = 0;
    socklen_t l = sizeof v;
    return getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &l) == 0 && v;
}

typedef struct child {
    pid_t pid;               /* 0: not running */
    double started, restart_at;
    double backoff, delay;   /* delay: the back-off the next start waits before loading */
} child;

static pid_t spawn(const server_config *cfg, int i, int fd, double load_delay)
{
    pid_t pid = fork();
    if (pid != 0) return pid;
    /* the worker: dies with the master, has the default signal handling back */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGCHLD, SIG_DFL);
    sigset_t keep; /* SIGTERM/SIGINT stay blocked: worker_run takes them with sigtimedwait */
    sigemptyset(&keep);
    sigaddset(&keep, SIGTERM);
    sigaddset(&keep, SIGINT);
    sigprocmask(SIG_SETMASK, &keep, NULL);
    fflush(stderr);
    _exit(worker_run(cfg, i, fd, load_delay));
}

int main(int argc, char **argv)
{
    static server_config cfg; /* large; lives for the whole run */
    char err[512];
    config_defaults(&cfg);
    int pr = config_parse_args(&cfg, argc, argv, err, sizeof err);
    if (pr == 1) return 0;
    if (pr || config_finish(&cfg, err, sizeof err)) {
        fprintf(stderr, "clgemma-fcgi: %s\n", err);
        return 2;
    }
    if (access(cfg.model, R_OK)) {
        fprintf(stderr, "clgemma-fcgi: model %s: %s\n", cfg.model, strerror(errno));
        return 2;
    }
    setvbuf(stderr, NULL, _IOLBF, 0);
    if (fetch_global_init()) { /* before any thread: libcurl's global set-up is not thread-safe */
        fprintf(stderr, "clgemma-fcgi: libcurl's set-up failed\n");
        return 2;
    }

    int fds[CFG_MAX_WORKERS];
    for (int i = 0; i < cfg.n_workers; i++) {
        if (cfg.n_listen == 0) {
            if (!is_listening_socket(0)) {
                fprintf(stderr, "clgemma-fcgi: no --listen given and fd 0 is not a listening socket "
                                "(run under spawn-fcgi, or pass --listen unix:PATH)\n");
                return 2;
            }
            fds[i] = 0;
        } else if (cfg.n_listen == 1 && i > 0) {
            fds[i] = fds[0]; /* one socket shared by all workers */
        } else {
            fds[i] = open_listener(cfg.listen[i], cfg.socket_mode, err, sizeof err);
            if (fds[i] < 0) { fprintf(stderr, "clgemma-fcgi: %s\n", err); return 2; }
        }
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sa.sa_handler = on_child;
    sa.sa_flags = SA_NOCLDSTOP;
    sigaction(SIGCHLD, &sa, NULL);
    /* signals are handled only inside sigsuspend, so none slips between a check and the wait */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGCHLD);
    sigprocmask(SIG_BLOCK, &block, &old);

    child kids[CFG_MAX_WORKERS];
    memset(kids, 0, sizeof kids);
    int alive = 0, failures = 0;
    for (int i = 0; i < cfg.n_workers; i++) {
        kids[i].pid = spawn(&cfg, i, fds[i], 0);
        if (kids[i].pid < 0) { LOG("fork: %s", strerror(errno)); kids[i].pid = 0; kids[i].restart_at = monotonic_seconds() + 1; continue; }
        kids[i].started = monotonic_seconds();
        kids[i].backoff = 0;
        alive++;
    }
    LOG("%d worker(s) for %s", cfg.n_workers, cfg.model_id);

    double term_deadline = 0;
    for (;;) {
        if (got_term && !term_deadline) {
            got_term = 0;
            LOG("SIGTERM: draining workers (up to %ds)", cfg.drain_timeout);
            for (int i = 0; i < cfg.n_workers; i++)
                if (kids[i].pid > 0) kill(kids[i].pid, SIGTERM);
            term_deadline = monotonic_seconds() + cfg.drain_timeout + 15;
        }
        int status;
        pid_t pid;
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
            for (int i = 0; i < cfg.n_workers; i++) {
                if (kids[i].pid != pid) continue;
                kids[i].pid = 0;
                alive--;
                int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
                if (!ok) failures += term_deadline > 0;
                if (WIFEXITED(status)) LOG("worker %d (pid %d) exited with %d", i, (int)pid, WEXITSTATUS(status));
                else LOG("worker %d (pid %d) killed by signal %d", i, (int)pid, WTERMSIG(status));
                if (!term_deadline) {
                    /* restarted now, so its socket answers (503) instead of holding connections
                     * in the backlog; the back-off is spent before the model load */
                    double t = monotonic_seconds();
                    if (t - kids[i].started > 60) kids[i].backoff = 0;
                    kids[i].restart_at = t;
                    kids[i].delay = kids[i].backoff;
                    LOG("restarting worker %d (loading after %.0fs)", i, kids[i].backoff);
                    kids[i].backoff = kids[i].backoff == 0 ? 1 : kids[i].backoff * 2 > 30 ? 30 : kids[i].backoff * 2;
                }
            }
        }
        if (term_deadline) {
            if (alive == 0) break;
            if (monotonic_seconds() > term_deadline) {
                LOG("workers did not drain in time: killing them");
                for (int i = 0; i < cfg.n_workers; i++)
                    if (kids[i].pid > 0) kill(kids[i].pid, SIGKILL);
                failures++;
                term_deadline = monotonic_seconds() + 1e9; /* collect them below */
            }
        } else {
            double t = monotonic_seconds();
            for (int i = 0; i < cfg.n_workers; i++) {
                if (kids[i].pid || t < kids[i].restart_at) continue;
                pid_t p = spawn(&cfg, i, fds[i], kids[i].delay);
                if (p < 0) { LOG("fork: %s", strerror(errno)); kids[i].restart_at = t + kids[i].backoff; continue; }
                kids[i].pid = p;
                kids[i].started = t;
                alive++;
            }
        }
        if (got_term || got_child) { got_child = 0; continue; }
        /* sleep until a signal, or at most 1 s (restarts and deadlines are polled) */
        struct timespec ts = { 1, 0 };
        sigset_t wait = old;
        sigdelset(&wait, SIGTERM);
        sigdelset(&wait, SIGINT);
        sigdelset(&wait, SIGCHLD);
        pselect(0, NULL, NULL, NULL, &ts, &wait);
    }
    for (int i = 0; i < cfg.n_listen; i++) {
        if (!strncmp(cfg.listen[i], "unix:", 5)) unlink(cfg.listen[i] + 5);
    }
    LOG("exit %d", failures ? 1 : 0);
    return failures ? 1 : 0;
}
