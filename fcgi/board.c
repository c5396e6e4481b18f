/* board.c — the stats board's file: naming it from the socket, creating and taking it back,
 * and mapping every board of a stats directory for /metrics and /health. */
#include "board.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

const int board_status_codes[BOARD_N_STATUS - 1] = { 200, 400, 401, 404, 405, 408, 413, 415, 429, 499, 500, 503 };

static void copy(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

void board_identify(int listen_fd, int index, int shared, board_id *id, char *dir, size_t dircap)
{
    memset(id, 0, sizeof *id);
    id->index = index;
    if (dircap) dir[0] = 0;
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    memset(&ss, 0, sizeof ss);
    char name[256] = "";
    if (getsockname(listen_fd, (struct sockaddr *)&ss, &len) == 0) {
        if (ss.ss_family == AF_UNIX) {
            const struct sockaddr_un *su = (const struct sockaddr_un *)&ss;
            size_t n = len > offsetof(struct sockaddr_un, sun_path) ? len - offsetof(struct sockaddr_un, sun_path) : 0;
            if (n && su->sun_path[0] == 0) { /* abstract: no directory to put a file in */
                snprintf(name, sizeof name, "@%.*s", (int)(n - 1 < 200 ? n - 1 : 200), su->sun_path + 1);
                copy(id->listen, sizeof id->listen, name);
            } else if (n) {
                copy(id->listen, sizeof id->listen, su->sun_path);
                const char *slash = strrchr(id->listen, '/');
                copy(name, sizeof name, slash ? slash + 1 : id->listen);
                if (slash && dircap) snprintf(dir, dircap, "%.*s", (int)(slash - id->listen ? slash - id->listen : 1), id->listen);
                else if (dircap) copy(dir, dircap, ".");
            }
        } else if (ss.ss_family == AF_INET || ss.ss_family == AF_INET6) {
            char host[INET6_ADDRSTRLEN] = "";
            int port;
            if (ss.ss_family == AF_INET) {
                const struct sockaddr_in *si = (const struct sockaddr_in *)&ss;
                inet_ntop(AF_INET, &si->sin_addr, host, sizeof host);
                port = ntohs(si->sin_port);
                snprintf(name, sizeof name, "%s:%d", host, port);
            } else {
                const struct sockaddr_in6 *si = (const struct sockaddr_in6 *)&ss;
                inet_ntop(AF_INET6, &si->sin6_addr, host, sizeof host);
                port = ntohs(si->sin6_port);
                snprintf(name, sizeof name, "[%s]:%d", host, port);
            }
            copy(id->listen, sizeof id->listen, name);
        }
    }
    if (!name[0]) snprintf(name, sizeof name, "worker-%d", index);
    if (shared) snprintf(id->label, sizeof id->label, "%.100s#%d", name, index);
    else copy(id->label, sizeof id->label, name);
}

int board_path(const char *dir, const char *label, char *out, size_t cap)
{
    int n = snprintf(out, cap, "%s/%s.stats", dir, label);
    if (n < 0 || (size_t)n >= cap) return -1;
    for (char *p = out + strlen(dir) + 1; *p && strcmp(p, ".stats"); p++) {
        int ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("._:#@-", *p);
        if (!ok) *p = '_';
    }
    return 0;
}

/* a zombie has died: its master just has not reaped it yet */
static int zombie(int64_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%lld/stat", (long long)pid);
    FILE *f = fopen(path, "re");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *paren = strrchr(buf, ')');
    return paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

static int alive(int64_t pid)
{
    if (pid <= 0 || (kill((pid_t)pid, 0) != 0 && errno != EPERM)) return 0; /* EPERM: someone else's, but there */
    return !zombie(pid);
}

static int valid(const board *b, size_t file_size)
{
    return file_size >= sizeof *b && atomic_load_explicit(&b->magic, memory_order_acquire) == BOARD_MAGIC &&
           b->version == BOARD_VERSION && b->size == sizeof *b;
}

static const board *map_ro(const char *path, size_t *size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    struct stat st;
    const board *b = NULL;
    if (!fstat(fd, &st) && S_ISREG(st.st_mode) && (size_t)st.st_size >= sizeof *b) {
        void *p = mmap(NULL, sizeof *b, PROT_READ, MAP_SHARED, fd, 0);
        if (p != MAP_FAILED) b = p;
    }
    *size = b ? (size_t)st.st_size : 0;
    close(fd);
    return b;
}

static void init(board *b, const board_id *id)
{
    /* an earlier incarnation's failed loads stay on record until a load succeeds */
    char last[sizeof b->last_error] = "";
    uint64_t failures = 0;
    if (atomic_load(&b->magic) == BOARD_MAGIC && b->version == BOARD_VERSION && b->size == sizeof *b &&
        !strncmp(b->label, id->label, sizeof b->label)) {
        memcpy(last, b->last_error, sizeof last);
        last[sizeof last - 1] = 0;
        failures = atomic_load(&b->load_failures);
    }
    atomic_store(&b->magic, 0);
    memset((char *)b + sizeof b->magic, 0, sizeof *b - sizeof b->magic); /* readers see zeros, never a lock */
    b->version = BOARD_VERSION;
    b->size = sizeof *b;
    b->pid = getpid();
    b->master_pid = getppid();
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    b->started_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    b->index = id->index;
    copy(b->label, sizeof b->label, id->label);
    copy(b->listen, sizeof b->listen, id->listen);
    copy(b->device, sizeof b->device, id->device);
    copy(b->model, sizeof b->model, id->model);
    atomic_store(&b->state, BOARD_LOADING);
    memcpy(b->last_error, last, sizeof last);
    atomic_store(&b->load_failures, failures);
    atomic_store_explicit(&b->magic, BOARD_MAGIC, memory_order_release);
}

void board_load_failed(board *b, const char *err)
{
    copy(b->last_error, sizeof b->last_error, err);
    atomic_fetch_add(&b->load_failures, 1);
}

void board_loaded(board *b)
{
    atomic_store(&b->load_failures, 0);
    b->last_error[0] = 0;
}

board *board_create(const char *path, const board_id *id, char *err, size_t errlen)
{
    void *p;
    if (!path) {
        p = mmap(NULL, sizeof(board), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) { snprintf(err, errlen, "mmap: %s", strerror(errno)); return NULL; }
        init(p, id);
        return p;
    }
    size_t size;
    const board *old = map_ro(path, &size);
    if (old) {
        int64_t owner = valid(old, size) ? old->pid : 0;
        munmap((void *)old, sizeof *old);
        if (owner && owner != getpid() && alive(owner)) {
            snprintf(err, errlen, "%s belongs to the live process %lld (two workers with one label?)", path,
                     (long long)owner);
            return NULL;
        }
    }
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) { snprintf(err, errlen, "%s: %s", path, strerror(errno)); return NULL; }
    struct stat st;
    /* never shrink it: a reader's mapping past the end would fault */
    if (fstat(fd, &st) || ((size_t)st.st_size < sizeof(board) && ftruncate(fd, sizeof(board)))) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    p = mmap(NULL, sizeof(board), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) { snprintf(err, errlen, "mmap %s: %s", path, strerror(errno)); return NULL; }
    init(p, id);
    return p;
}

void board_destroy(board *b, const char *remove_path)
{
    if (!b) return;
    if (remove_path) unlink(remove_path);
    munmap(b, sizeof *b);
}

/* ---- the directory ---- */

static int by_label(const void *a, const void *b)
{
    return strcmp(((const board_view *)a)->b->label, ((const board_view *)b)->b->label);
}

int board_scan(const char *dir, const board *self, board_view *views, int cap)
{
    int n = 0, have_self = 0;
    DIR *d = dir && dir[0] ? opendir(dir) : NULL;
    struct dirent *e;
    while (d && (e = readdir(d)) && n < cap) {
        size_t len = strlen(e->d_name);
        if (len <= 6 || strcmp(e->d_name + len - 6, ".stats")) continue;
        char path[4096];
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path) continue;
        size_t size;
        const board *b = map_ro(path, &size);
        if (!b) continue;
        if (!valid(b, size)) { munmap((void *)b, sizeof *b); continue; }
        if (self && b->pid == self->pid) {
            munmap((void *)b, sizeof *b);
            if (!have_self) views[n++] = (board_view){ self, 1, 0 };
            have_self = 1;
            continue;
        }
        int up = alive(b->pid);
        if (!up && !alive(b->master_pid)) { /* an earlier run's */
            munmap((void *)b, sizeof *b);
            unlink(path);
            continue;
        }
        views[n++] = (board_view){ b, up, 1 };
    }
    if (d) closedir(d);
    if (self && !have_self && n < cap) views[n++] = (board_view){ self, 1, 0 };
    qsort(views, (size_t)n, sizeof *views, by_label);
    return n;
}

void board_scan_free(board_view *views, int n)
{
    for (int i = 0; i < n; i++)
        if (views[i].mapped) munmap((void *)views[i].b, sizeof *views[i].b);
}
