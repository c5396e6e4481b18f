/* gguf_write.c — see gguf_write.h. Layout: "GGUF", version 3, tensor count, pair count, the
 * pairs, the tensor table, zeros up to the alignment, then the data section. */
#include "gguf_write.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OUT_BUF (32u << 20) /* bytes per write(2): large writes keep the disk, not the calls, the limit */

typedef struct bytes { uint8_t *p; size_t n, cap; } bytes;

struct gguf_writer {
    uint32_t align;
    bytes kv, table;           /* serialized pairs and tensor table */
    uint64_t n_kv, n_t;
    uint64_t *nbytes;          /* per tensor */
    size_t nbytes_cap;
    uint64_t data_size;        /* data section, padding included */
    int fd, is_reg;            /* is_reg: a regular file we created (removed again on failure) */
    char path[512];
    uint64_t header_size;
    uint8_t *buf[2], *out;     /* two buffers: one fills while a thread writes the other */
    size_t out_n;
    pthread_t thread;
    int has_thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    const uint8_t *job;        /* buffer handed to the thread (NULL: idle) */
    size_t job_n;
    int quit, thread_errno;
    uint64_t cur, in_cur;      /* tensor being written, bytes of it so far */
    int failed;
    char err[320];
};

static void fail(gguf_writer *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(gguf_writer *w, const char *fmt, ...)
{
    if (w->failed) return;
    w->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->err, sizeof w->err, fmt, ap);
    va_end(ap);
}

static void put(gguf_writer *w, bytes *b, const void *d, size_t n)
{
    if (w->failed) return;
    if (b->n + n > b->cap) {
        size_t c = b->cap ? b->cap : 4096;
        while (c < b->n + n) c *= 2;
        uint8_t *q = realloc(b->p, c);
        if (!q) { fail(w, "out of memory for the GGUF header"); return; }
        b->p = q;
        b->cap = c;
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void put_u32(gguf_writer *w, bytes *b, uint32_t v) { put(w, b, &v, 4); }
static void put_u64(gguf_writer *w, bytes *b, uint64_t v) { put(w, b, &v, 8); }
static void put_strn(gguf_writer *w, bytes *b, const char *s, uint64_t n) { put_u64(w, b, n); put(w, b, s, n); }

gguf_writer *gguf_writer_create(uint32_t alignment)
{
    gguf_writer *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->align = alignment ? alignment : 32;
    w->fd = -1;
    return w;
}

static void stop_thread(gguf_writer *w);

void gguf_writer_destroy(gguf_writer *w)
{
    if (!w) return;
    stop_thread(w);
    if (w->fd >= 0) close(w->fd);
    free(w->kv.p);
    free(w->table.p);
    free(w->nbytes);
    free(w->buf[0]);
    free(w->buf[1]);
    free(w);
}

static int writable(gguf_writer *w, const char *what)
{
    if (w->failed) return 0;
    if (w->fd >= 0) { fail(w, "GGUF writer: %s after the header was written", what); return 0; }
    return 1;
}

static void key(gguf_writer *w, const char *k, uint32_t type)
{
    put_strn(w, &w->kv, k, strlen(k));
    put_u32(w, &w->kv, type);
    w->n_kv++;
}

void gguf_w_u32(gguf_writer *w, const char *k, uint32_t v)
{
    if (!writable(w, k)) return;
    key(w, k, GGUF_VT_U32);
    put_u32(w, &w->kv, v);
}

void gguf_w_f32(gguf_writer *w, const char *k, float v)
{
    if (!writable(w, k)) return;
    key(w, k, GGUF_VT_F32);
    put(w, &w->kv, &v, 4);
}

void gguf_w_bool(gguf_writer *w, const char *k, int v)
{
    if (!writable(w, k)) return;
    uint8_t b = v != 0;
    key(w, k, GGUF_VT_BOOL);
    put(w, &w->kv, &b, 1);
}

void gguf_w_str(gguf_writer *w, const char *k, const char *v)
{
    if (!writable(w, k)) return;
    key(w, k, GGUF_VT_STRING);
    put_strn(w, &w->kv, v, strlen(v));
}

/* bytes of one scalar of a GGUF value type; 0 for strings, arrays and unknown types */
static size_t scalar_size(uint32_t t)
{
    static const uint8_t SZ[] = { [GGUF_VT_U8] = 1, [GGUF_VT_I8] = 1, [GGUF_VT_U16] = 2, [GGUF_VT_I16] = 2,
                                  [GGUF_VT_U32] = 4, [GGUF_VT_I32] = 4, [GGUF_VT_F32] = 4, [GGUF_VT_BOOL] = 1,
                                  [GGUF_VT_U64] = 8, [GGUF_VT_I64] = 8, [GGUF_VT_F64] = 8 };
    return t < sizeof SZ ? SZ[t] : 0;
}

void gguf_w_arr(gguf_writer *w, const char *k, uint32_t elem_type, const void *elems, uint64_t n)
{
    if (!writable(w, k)) return;
    size_t es = scalar_size(elem_type);
    if (!es) { fail(w, "GGUF writer: '%s': array elements of value type %u are not numbers", k, elem_type); return; }
    key(w, k, GGUF_VT_ARRAY);
    put_u32(w, &w->kv, elem_type);
    put_u64(w, &w->kv, n);
    put(w, &w->kv, elems, (size_t)(n * es));
}

/* the value part of a pair (type already written); arrays recurse for nested arrays */
static void put_value(gguf_writer *w, const gguf_kv *kv)
{
    if (kv->type == GGUF_VT_STRING) { put_strn(w, &w->kv, kv->str.ptr, kv->str.len); return; }
    if (kv->type != GGUF_VT_ARRAY) {
        size_t es = scalar_size(kv->type);
        if (!es) {
            fail(w, "GGUF writer: '%.*s': unknown value type %u", (int)kv->key.len, kv->key.ptr, kv->type);
            return;
        }
        put(w, &w->kv, kv->data, es);
        return;
    }
    put_u32(w, &w->kv, kv->arr_type);
    put_u64(w, &w->kv, kv->arr_n);
    if (kv->arr_type == GGUF_VT_STRING) {
        for (uint64_t i = 0; i < kv->arr_n && !w->failed; i++)
            put_strn(w, &w->kv, kv->arr_strs[i].ptr, kv->arr_strs[i].len);
    } else if (kv->arr_type == GGUF_VT_ARRAY) {
        for (uint64_t i = 0; i < kv->arr_n && !w->failed; i++) put_value(w, &kv->arr_sub[i]);
    } else {
        size_t es = scalar_size(kv->arr_type);
        if (!es) {
            fail(w, "GGUF writer: '%.*s': unknown element type %u", (int)kv->key.len, kv->key.ptr, kv->arr_type);
            return;
        }
        put(w, &w->kv, kv->data, (size_t)(kv->arr_n * es));
    }
}

void gguf_w_kv(gguf_writer *w, const gguf_kv *kv)
{
    if (!writable(w, "a copied pair")) return;
    put_strn(w, &w->kv, kv->key.ptr, kv->key.len);
    put_u32(w, &w->kv, kv->type);
    w->n_kv++;
    put_value(w, kv);
}

static uint64_t padded(const gguf_writer *w, uint64_t n) { return (n + w->align - 1) / w->align * w->align; }

uint64_t gguf_w_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims, const uint64_t *ne)
{
    if (!writable(w, name)) return 0;
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS) {
        fail(w, "GGUF writer: tensor '%s' has %u dimensions", name, n_dims);
        return 0;
    }
    uint64_t rows = 1;
    for (uint32_t d = 1; d < n_dims; d++) rows *= ne[d];
    uint64_t rb = ggml_row_bytes(type, ne[0]);
    if (!rb) {
        fail(w, "GGUF writer: tensor '%s': a row of %llu is no whole number of %s blocks", name,
             (unsigned long long)ne[0], ggml_type_name(type));
        return 0;
    }
    if (w->n_t == w->nbytes_cap) {
        size_t c = w->nbytes_cap ? 2 * w->nbytes_cap : 256;
        uint64_t *q = realloc(w->nbytes, c * sizeof *q);
        if (!q) { fail(w, "out of memory for the GGUF tensor table"); return 0; }
        w->nbytes = q;
        w->nbytes_cap = c;
    }
    put_strn(w, &w->table, name, strlen(name));
    put_u32(w, &w->table, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) put_u64(w, &w->table, ne[d]);
    put_u32(w, &w->table, type);
    put_u64(w, &w->table, w->data_size);
    w->nbytes[w->n_t++] = rb * rows;
    w->data_size += padded(w, rb * rows);
    return rb * rows;
}

/* write(2) all of n bytes: 0, or the errno of the failure (EIO for a write of 0 bytes) */
static int write_all(int fd, const uint8_t *c, size_t n)
{
    while (n) {
        ssize_t k = write(fd, c, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return k < 0 ? errno : EIO;
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

/* the writer thread: writes each handed-over buffer while the caller fills the other one */
static void *writer_main(void *arg)
{
    gguf_writer *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->job && !w->quit) pthread_cond_wait(&w->cv, &w->mu);
        if (!w->job) break;
        const uint8_t *p = w->job;
        size_t n = w->job_n;
        pthread_mutex_unlock(&w->mu);
        int e = w->thread_errno ? 0 : write_all(w->fd, p, n);
        pthread_mutex_lock(&w->mu);
        if (e) w->thread_errno = e;
        w->job = NULL;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* waits until the thread has written what it was given; picks up its error */
static void wait_idle(gguf_writer *w)
{
    if (!w->has_thread) return;
    pthread_mutex_lock(&w->mu);
    while (w->job) pthread_cond_wait(&w->cv, &w->mu);
    int e = w->thread_errno;
    pthread_mutex_unlock(&w->mu);
    if (e) fail(w, "cannot write %s: %s", w->path, strerror(e));
}

static void stop_thread(gguf_writer *w)
{
    if (!w->has_thread) return;
    wait_idle(w);
    pthread_mutex_lock(&w->mu);
    w->quit = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    w->has_thread = 0;
}

/* hands the filled buffer to the thread and continues in the other one */
static void flush(gguf_writer *w)
{
    wait_idle(w);
    if (w->failed || !w->out_n) return;
    pthread_mutex_lock(&w->mu);
    w->job = w->out;
    w->job_n = w->out_n;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    w->out = w->out == w->buf[0] ? w->buf[1] : w->buf[0];
    w->out_n = 0;
}

static void out(gguf_writer *w, const void *p, size_t n)
{
    const uint8_t *c = p;
    while (n && !w->failed) {
        size_t k = OUT_BUF - w->out_n < n ? OUT_BUF - w->out_n : n;
        memcpy(w->out + w->out_n, c, k);
        w->out_n += k;
        c += k;
        n -= k;
        if (w->out_n == OUT_BUF) flush(w);
    }
}

static void out_zeros(gguf_writer *w, size_t n)
{
    static const uint8_t zero[256];
    while (n) {
        size_t k = n < sizeof zero ? n : sizeof zero;
        out(w, zero, k);
        n -= k;
    }
}

int gguf_w_open(gguf_writer *w, const char *path)
{
    if (!writable(w, "open")) return -1;
    snprintf(w->path, sizeof w->path, "%s", path);
    w->buf[0] = malloc(OUT_BUF);
    w->buf[1] = malloc(OUT_BUF);
    if (!w->buf[0] || !w->buf[1]) { fail(w, "out of memory for the write buffers"); return -1; }
    w->out = w->buf[0];
    w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (w->fd < 0) { fail(w, "cannot create %s: %s", path, strerror(errno)); return -1; }
    struct stat sb;
    w->is_reg = fstat(w->fd, &sb) == 0 && S_ISREG(sb.st_mode);
    if (pthread_mutex_init(&w->mu, NULL) || pthread_cond_init(&w->cv, NULL) ||
        pthread_create(&w->thread, NULL, writer_main, w)) {
        fail(w, "cannot start the writer thread");
        return -1;
    }
    w->has_thread = 1;
    bytes h = { 0 };
    put(w, &h, "GGUF", 4);
    put_u32(w, &h, 3);
    put_u64(w, &h, w->n_t);
    put_u64(w, &h, w->n_kv);
    if (!w->failed) { out(w, h.p, h.n); out(w, w->kv.p, w->kv.n); out(w, w->table.p, w->table.n); }
    uint64_t n = h.n + w->kv.n + w->table.n;
    free(h.p);
    w->header_size = padded(w, n);
    out_zeros(w, (size_t)(w->header_size - n));
    /* tensors of 0 bytes take no data: step over them so the first write lands in a real one */
    while (w->cur < w->n_t && w->nbytes[w->cur] == 0) w->cur++;
    return w->failed ? -1 : 0;
}

uint64_t gguf_w_file_size(const gguf_writer *w) { return w->header_size + w->data_size; }

int gguf_w_write(gguf_writer *w, const void *data, size_t n)
{
    const uint8_t *p = data;
    if (!w->failed && w->fd < 0) fail(w, "GGUF writer: data before gguf_w_open");
    while (n && !w->failed) {
        if (w->cur >= w->n_t) { fail(w, "GGUF writer: %zu bytes past the last tensor", n); break; }
        uint64_t left = w->nbytes[w->cur] - w->in_cur;
        size_t k = n < left ? n : (size_t)left;
        if (p) {
            out(w, p, k);
            p += k;
        } else { /* a hole: write out what is buffered, then step over k bytes */
            flush(w);
            wait_idle(w);
            if (!w->failed && lseek(w->fd, (off_t)k, SEEK_CUR) < 0)
                fail(w, "cannot seek in %s: %s", w->path, strerror(errno));
        }
        n -= k;
        w->in_cur += k;
        if (w->in_cur == w->nbytes[w->cur]) {
            out_zeros(w, (size_t)(padded(w, w->in_cur) - w->in_cur));
            w->in_cur = 0;
            do w->cur++; while (w->cur < w->n_t && w->nbytes[w->cur] == 0);
        }
    }
    return w->failed ? -1 : 0;
}

int gguf_w_close(gguf_writer *w, char *err, size_t errlen)
{
    if (!w->failed && w->fd < 0) fail(w, "GGUF writer: closed before gguf_w_open");
    if (!w->failed && w->cur < w->n_t) fail(w, "GGUF writer: %s: %llu of %llu tensors written", w->path,
                                            (unsigned long long)w->cur, (unsigned long long)w->n_t);
    if (!w->failed) flush(w);
    stop_thread(w);
    /* a file that ends in a hole must still reach its full length (regular files: not /dev/null) */
    if (!w->failed && w->is_reg && ftruncate(w->fd, (off_t)gguf_w_file_size(w)) != 0)
        fail(w, "cannot size %s: %s", w->path, strerror(errno));
    if (w->fd >= 0 && close(w->fd) != 0) fail(w, "cannot close %s: %s", w->path, strerror(errno));
    w->fd = -1;
    if (w->failed) {
        if (w->is_reg) unlink(w->path); /* no half-written model left behind */
        snprintf(err, errlen, "%s", w->err);
        return -1;
    }
    return 0;
}
