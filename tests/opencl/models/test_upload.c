/* test_upload.c — the uploader (opencl/models/upload.c): bytes from an mmap'd file reach device
 * buffers through the pinned staging ring, read back with clEnqueueReadBuffer.
 *
 * test_ring: 64 KiB slots (4 of them): a buffer of 16 slots and more at an odd offset (slots reused),
 *   a zero-size put, pieces of 1, 3, 5 ... bytes at odd offsets sharing a slot; bytes no put wrote
 *   keep their old value.
 * test_parallel: 4 MiB slots: puts of 1 MiB and more, which the copy threads share, over more
 *   chunks than slots.
 * test_reuse_waits: while the queue is held (a barrier on a user event that a thread completes
 *   100 ms later) the slots fill and a put waits before refilling one the device has not read yet.
 * test_sticky: a write past the end of its buffer fails the put; the error stays (a later good put
 *   does nothing, a later bad one does not replace the message) and upload_finish reports it, twice. */
#include "check.h"
#include "runtime.h"
#include "upload.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static cl_runtime RT;
static char err[512];
static const uint8_t *FILEMAP; /* the test file, mapped read-only as gguf.c maps a model */
static size_t FILESIZE;

static int make_file(size_t n)
{
    char path[] = "/tmp/test_upload_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return -1;
    unlink(path);
    uint8_t *buf = malloc(n);
    uint32_t x = 2463534242u;
    for (size_t i = 0; buf && i < n; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        buf[i] = (uint8_t)x;
    }
    int ok = buf && write(fd, buf, n) == (ssize_t)n;
    free(buf);
    void *p = ok ? mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
    close(fd);
    if (p == MAP_FAILED) return -1;
    FILEMAP = p;
    FILESIZE = n;
    return 0;
}

/* a device buffer of n bytes, each 0xA5 */
static cl_mem filled(size_t n, uint8_t **host)
{
    *host = malloc(n);
    memset(*host, 0xA5, n);
    return rt_alloc(&RT, n, *host, err, sizeof err);
}

/* the device's bytes against want */
static void check_bytes(const char *what, cl_mem m, const uint8_t *want, size_t n)
{
    uint8_t *got = malloc(n);
    cl_int e = clEnqueueReadBuffer(RT.q, m, CL_TRUE, 0, n, got, 0, NULL, NULL);
    CHECK(e == CL_SUCCESS, "%s: read back: %s", what, rt_errstr(e));
    size_t i = 0;
    while (!e && i < n && got[i] == want[i]) i++;
    CHECK(e || i == n, "%s: byte %zu of %zu is %u, expected %u", what, i, n, got[i], want[i]);
    free(got);
}

/* put src at dst_off into the device buffer and the same into its expected copy */
static void put(uploader *u, cl_mem m, uint8_t *want, size_t dst_off, size_t src_off, size_t n)
{
    CHECK(upload_put(u, m, dst_off, FILEMAP + src_off, n) == 0, "put of %zu bytes at %zu", n, dst_off);
    memcpy(want + dst_off, FILEMAP + src_off, n);
}

static uploader *start(uint64_t total)
{
    uploader *u = NULL;
    CHECK(upload_create(&u, &RT, total, err, sizeof err) == 0, "upload_create: %s", err);
    return u;
}

/* finishes u, checks m's n bytes against want, then frees the three */
static void end(uploader *u, const char *what, cl_mem m, uint8_t *want, size_t n)
{
    CHECK(upload_finish(u, err, sizeof err) == 0, "%s: upload_finish: %s", what, err);
    check_bytes(what, m, want, n);
    upload_destroy(u);
    clReleaseMemObject(m);
    free(want);
}

static void test_ring(void)
{
    uploader *u = start(256 << 10);
    if (!u) return;
    size_t na = (16 << 16) + 12345, nb = 4099;
    uint8_t *wa, *wb;
    cl_mem a = filled(na, &wa), b = filled(nb, &wb);
    put(u, b, wb, 0, 1, 1);
    put(u, b, wb, 5, 77, 3);
    put(u, a, wa, 7, 13, na - 7 - 2);
    put(u, b, wb, 9, 3001, 0);
    put(u, b, wb, 11, 4093, 5);
    put(u, b, wb, 100, 65531, 4093 - 100);
    put(u, a, wa, 1, 999, 5);
    CHECK(upload_finish(u, err, sizeof err) == 0, "upload_finish: %s", err);
    check_bytes("pieces", b, wb, nb);
    /* the uploader goes on after a finish */
    put(u, b, wb, 4095, 17, 4);
    end(u, "large", a, wa, na);
    check_bytes("after finish", b, wb, nb);
    clReleaseMemObject(b);
    free(wb);
}

static void test_parallel(void)
{
    uploader *u = start(16 << 20);
    if (!u) return;
    size_t n = (20 << 20) + 5;
    uint8_t *w;
    cl_mem m = filled(n + 9, &w);
    put(u, m, w, 3, 1, (1 << 20) + 1);
    put(u, m, w, (1 << 20) + 4, (1 << 20) + 3, n - (1 << 20) - 1);
    end(u, "parallel", m, w, n + 9);
}

static void *release_later(void *ev)
{
    usleep(100 * 1000);
    clSetUserEventStatus(ev, CL_COMPLETE);
    return NULL;
}

static void test_reuse_waits(void)
{
    uploader *u = start(256 << 10);
    if (!u) return;
    size_t n = 8 << 16;
    uint8_t *w;
    cl_mem m = filled(n, &w);
    cl_int e;
    cl_event hold = clCreateUserEvent(RT.ctx, &e);
    CHECK(e == CL_SUCCESS, "clCreateUserEvent: %s", rt_errstr(e));
    e = clEnqueueBarrierWithWaitList(RT.q, 1, &hold, NULL);
    CHECK(e == CL_SUCCESS, "clEnqueueBarrierWithWaitList: %s", rt_errstr(e));
    pthread_t th;
    int started = pthread_create(&th, NULL, release_later, hold) == 0;
    CHECK(started, "pthread_create");
    if (!started) clSetUserEventStatus(hold, CL_COMPLETE);
    for (size_t off = 0; off < n; off += 1 << 16) put(u, m, w, off, 3 * off + 5, 1 << 16);
    end(u, "reused slots", m, w, n);
    if (started) pthread_join(th, NULL);
    clReleaseEvent(hold);
}

static void test_sticky(void)
{
    uploader *u = start(1 << 20);
    if (!u) return;
    uint8_t *w;
    cl_mem m = filled(1000, &w);
    put(u, m, w, 0, 0, 10);
    CHECK(upload_put(u, m, 996, FILEMAP, 5) == -1, "a write past the end succeeded");
    CHECK(upload_put(u, m, 100, FILEMAP, 50) == -1, "a put after the error succeeded");
    CHECK(upload_put(u, m, 2000, FILEMAP, 1) == -1, "a second bad put succeeded");
    err[0] = 0;
    CHECK(upload_finish(u, err, sizeof err) == -1, "upload_finish missed the error");
    CHECK(strstr(err, "5 bytes at offset 996") != NULL, "the first error is not reported: '%s'", err);
    char first[512];
    memcpy(first, err, sizeof first);
    CHECK(upload_finish(u, err, sizeof err) == -1 && !strcmp(err, first), "the error did not stay: '%s'", err);
    check_bytes("sticky", m, w, 1000); /* the put before the error landed, none after it */
    upload_destroy(u);
    clReleaseMemObject(m);
    free(w);
}

int main(void)
{
    if (make_file((21 << 20) + 4096)) { printf("FAIL setup: cannot make the test file\n"); return 1; }
    if (rt_create(&RT, NULL, 0, err, sizeof err)) { printf("FAIL setup: rt_create: %s\n", err); return 1; }
    RUN_TEST(test_ring);
    RUN_TEST(test_parallel);
    RUN_TEST(test_reuse_waits);
    RUN_TEST(test_sticky);
    upload_destroy(NULL);
    rt_destroy(&RT);
    munmap((void *)FILEMAP, FILESIZE);
    CHECK_EXIT();
}
