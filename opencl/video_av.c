/* video_av.c — see video.h. One pass of the demuxer over the bytes keeps the stream's packets (counting and
 * timing them as torchcodec's exact scan does), then the decoder runs over them up to the last sampled frame;
 * every sampled frame goes through swscale to RGB8 and out to the caller. Bounds: the file's bytes, the
 * demuxers and decoders allowed, the packets counted, the duration, each frame's size, the pixels decoded,
 * the bytes the demuxer may read (a seek loop) and the wall clock (a backstop for the rest). */
#include "video.h"
#include "image_codec.h"
#include "errf.h"

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/imgutils.h>
#include <libavutil/mem.h>
#include <libswscale/swscale.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define IO_BUF 65536
#define WALL_SECONDS 60.0 /* no honest file within the other limits takes this long */
/* the decoders a request may reach: the codecs MP4, QuickTime, WebM and Matroska carry in practice */
static const char *const DECODERS[] = { "h264", "hevc", "vp8", "vp9", "libvpx", "libvpx-vp9", "av1", "libdav1d",
                                        "libaom-av1", "mpeg4", "mpeg2video", "mjpeg", "prores" };

video_limits video_limits_default(void)
{
    return (video_limits){ VIDEO_MAX_BYTES_DEFAULT, VIDEO_MAX_FRAMES, VIDEO_MAX_PACKETS_DEFAULT,
                           VIDEO_MAX_SECONDS_DEFAULT, VIDEO_MAX_DECODED_PX_DEFAULT,
                           { 0, VIDEO_MAX_PIXELS_DEFAULT, VIDEO_MAX_SIDE_DEFAULT } };
}

int video_sample(int64_t total, int max_frames, int64_t *idx)
{
    if (total < 1 || max_frames < 1) return 0;
    int n = total < max_frames ? (int)total : max_frames; /* transformers raises below num_frames: all frames */
    for (int k = 0; k < n; k++) idx[k] = (int64_t)k * total / n;
    return n;
}

/* the bytes as a seekable read-only stream; reads are counted so a demuxer that seeks back forever ends */
typedef struct {
    const uint8_t *data;
    size_t n, at;
    uint64_t read, read_cap;
    struct timespec deadline;
} mem_io;

static int past(const struct timespec *d)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec > d->tv_sec || (t.tv_sec == d->tv_sec && t.tv_nsec > d->tv_nsec);
}

static int io_read(void *opaque, uint8_t *buf, int len)
{
    mem_io *m = opaque;
    size_t k = m->n - m->at < (size_t)len ? m->n - m->at : (size_t)len;
    if (k == 0) return AVERROR_EOF;
    if (m->read + k > m->read_cap || past(&m->deadline)) return AVERROR_EXIT; /* custom IO skips the interrupt */
    memcpy(buf, m->data + m->at, k);
    m->at += k;
    m->read += k;
    return (int)k;
}

static int64_t io_seek(void *opaque, int64_t off, int whence)
{
    mem_io *m = opaque;
    if (whence & AVSEEK_SIZE) return (int64_t)m->n;
    int64_t base = (whence & 3) == SEEK_CUR ? (int64_t)m->at : (whence & 3) == SEEK_END ? (int64_t)m->n : 0;
    if ((whence & 3) != SEEK_SET && (whence & 3) != SEEK_CUR && (whence & 3) != SEEK_END) return AVERROR(EINVAL);
    if (off > (int64_t)m->n || off < -(int64_t)m->n || base + off < 0 || base + off > (int64_t)m->n)
        return AVERROR(EINVAL);
    m->at = (size_t)(base + off);
    return (int64_t)m->at;
}

static int on_interrupt(void *opaque) { return past(&((mem_io *)opaque)->deadline); }

/* everything one decode holds, freed by one function */
typedef struct {
    mem_io io;
    AVIOContext *pb;
    AVFormatContext *fmt;
    AVCodecContext *dec;
    struct SwsContext *sws;
    AVPacket **pkts;
    int n_pkts;
    AVFrame *frame;
    image_rgb *rgb;
} video_run;

static void run_free(video_run *r)
{
    for (int i = 0; i < r->n_pkts; i++) av_packet_free(&r->pkts[i]);
    free(r->pkts);
    av_frame_free(&r->frame);
    sws_freeContext(r->sws);
    avcodec_free_context(&r->dec);
    avformat_close_input(&r->fmt);
    if (r->pb) av_freep(&r->pb->buffer);
    avio_context_free(&r->pb);
    image_destroy(r->rgb);
}

static int av_fail(char *err, size_t errlen, const char *what, int code)
{
    char s[AV_ERROR_MAX_STRING_SIZE] = "";
    av_strerror(code, s, sizeof s);
    return ERR("video: %s: %s", what, code == AVERROR_EXIT ? "over the time or read limit" : s);
}

/* w x h against the frame limits, the refusal worded as a video's */
static int frame_size_ok(const video_limits *lim, int w, int h, char *err, size_t errlen)
{
    char why[200];
    if (!image_check_size(&lim->frame, (uint64_t)(w < 0 ? 0 : w), (uint64_t)(h < 0 ? 0 : h), why, sizeof why))
        return 0;
    return ERR("video: frame %s", !strncmp(why, "image: ", 7) ? why + 7 : why);
}

/* the largest block libav may allocate: a 16-bit plane of the largest frame (4096 x 2304) is 19 MB, while a
 * demuxer that trusts a header's entry count asks for hundreds of MB from a file of a few KB */
#define AV_MAX_ALLOC ((size_t)64 << 20)

/* libav's logger and allocation cap are process-wide: a client's corrupt file must neither write to the
 * server's stderr nor make it allocate what no valid file of the limits needs */
static void av_once(void)
{
    av_log_set_level(AV_LOG_QUIET);
    av_max_alloc(AV_MAX_ALLOC);
}

static int open_input(video_run *r, char *err, size_t errlen)
{
    uint8_t *buf = av_malloc(IO_BUF);
    r->pb = buf ? avio_alloc_context(buf, IO_BUF, 0, &r->io, io_read, NULL, io_seek) : NULL;
    if (!r->pb) { av_free(buf); return ERR("video: out of memory"); }
    r->fmt = avformat_alloc_context();
    if (!r->fmt) return ERR("video: out of memory");
    r->fmt->pb = r->pb;
    r->fmt->flags |= AVFMT_FLAG_CUSTOM_IO;
    r->fmt->interrupt_callback = (AVIOInterruptCB){ on_interrupt, &r->io };
    AVDictionary *o = NULL;
    av_dict_set(&o, "format_whitelist", "mov,matroska", 0); /* MP4/QuickTime and WebM/Matroska only */
    av_dict_set(&o, "protocol_whitelist", "none", 0);      /* no file or URL a container names is opened */
    int rc = avformat_open_input(&r->fmt, NULL, NULL, &o);
    av_dict_free(&o);
    if (rc < 0) {
        r->fmt = NULL; /* freed by the failed open */
        return av_fail(err, errlen, "not a readable MP4, QuickTime, WebM or Matroska file", rc);
    }
    return 0;
}

static int open_decoder(video_run *r, const AVStream *st, const video_limits *lim, char *err, size_t errlen)
{
    const AVCodec *c = avcodec_find_decoder(st->codecpar->codec_id);
    int known = 0;
    for (size_t i = 0; c && i < sizeof DECODERS / sizeof *DECODERS && !known; i++)
        known = !strcmp(c->name, DECODERS[i]);
    if (!known)
        return ERR("video: codec %s is not supported (H.264, HEVC, VP8, VP9, AV1, MPEG-4, MPEG-2, MJPEG, ProRes)",
                   avcodec_get_name(st->codecpar->codec_id));
    r->dec = avcodec_alloc_context3(c);
    if (!r->dec) return ERR("video: out of memory");
    int rc = avcodec_parameters_to_context(r->dec, st->codecpar);
    if (rc < 0) return av_fail(err, errlen, "bad codec parameters", rc);
    r->dec->thread_count = 1; /* request threads are the parallelism; same frames either way */
    r->dec->max_pixels = (int64_t)lim->frame.max_pixels;
    r->dec->pkt_timebase = st->time_base;
    if ((rc = avcodec_open2(r->dec, c, NULL)) < 0) return av_fail(err, errlen, "cannot open the decoder", rc);
    return 0;
}

/* the stream's packets kept in order, counted and timed (torchcodec's exact scan); its fps out */
static int scan(video_run *r, int si, const video_limits *lim, double *fps, char *err, size_t errlen)
{
    AVStream *st = r->fmt->streams[si];
    int64_t begin = INT64_MAX, end = INT64_MIN;
    AVPacket *p = av_packet_alloc();
    if (!p) return ERR("video: out of memory");
    for (;;) {
        int rc = av_read_frame(r->fmt, p);
        if (rc == AVERROR_EOF) break;
        if (past(&r->io.deadline)) rc = AVERROR_EXIT;
        if (rc < 0) { av_packet_free(&p); return av_fail(err, errlen, "cannot read the file", rc); }
        if (p->stream_index != si || (p->flags & AV_PKT_FLAG_DISCARD)) { av_packet_unref(p); continue; }
        if ((uint32_t)r->n_pkts >= lim->max_packets) {
            av_packet_free(&p);
            return ERR("video: more than %u frames", lim->max_packets);
        }
        int64_t t = p->pts != AV_NOPTS_VALUE ? p->pts : p->dts, e;
        if (t != AV_NOPTS_VALUE) {
            begin = t < begin ? t : begin;
            if (__builtin_add_overflow(t, p->duration > 0 ? p->duration : 0, &e)) e = INT64_MAX;
            end = e > end ? e : end;
        }
        if (!(r->n_pkts & (r->n_pkts - 1))) { /* grows at powers of two */
            AVPacket **g = realloc(r->pkts, (size_t)(r->n_pkts ? 2 * r->n_pkts : 1) * sizeof *g);
            if (!g) { av_packet_free(&p); return ERR("video: out of memory"); }
            r->pkts = g;
        }
        r->pkts[r->n_pkts++] = p;
        if (!(p = av_packet_alloc())) return ERR("video: out of memory");
    }
    av_packet_free(&p);
    if (!r->n_pkts) return ERR("video: the video stream has no frames");
    double tb = av_q2d(st->time_base), dur = begin < end ? ((double)end - (double)begin) * tb : 0;
    if (!(dur <= lim->max_seconds))
        return ERR("video: %.0f seconds long, over the limit of %.0f", dur, lim->max_seconds);
    double hdr = av_q2d(st->r_frame_rate) > 0 ? av_q2d(st->r_frame_rate) : av_q2d(st->avg_frame_rate);
    /* 24: the processor's own default; a header rate out of all reason is no rate (times stay finite) */
    *fps = dur > 0 ? r->n_pkts / dur : hdr >= 0.01 && hdr <= 10000 ? hdr : 24;
    return 0;
}

/* a decoded frame as RGB8 (swscale, the frame's own matrix and range) into r->rgb */
static int to_rgb(video_run *r, const AVFrame *f, char *err, size_t errlen)
{
    if (!r->rgb || r->rgb->w != f->width || r->rgb->h != f->height) {
        image_destroy(r->rgb);
        if (!(r->rgb = image_alloc(f->width, f->height, err, errlen))) return ERR("video: out of memory");
    }
    r->sws = sws_getCachedContext(r->sws, f->width, f->height, f->format, f->width, f->height, AV_PIX_FMT_RGB24,
                                  SWS_BILINEAR, NULL, NULL, NULL);
    if (!r->sws) return ERR("video: cannot convert %s frames to RGB", av_get_pix_fmt_name(f->format));
    int *inv, *tab, srange, drange, bri, con, sat;
    if (sws_getColorspaceDetails(r->sws, &inv, &srange, &tab, &drange, &bri, &con, &sat) >= 0) {
        int cs = f->colorspace == AVCOL_SPC_UNSPECIFIED ? SWS_CS_DEFAULT : (int)f->colorspace;
        sws_setColorspaceDetails(r->sws, sws_getCoefficients(cs), srange || f->color_range == AVCOL_RANGE_JPEG, tab,
                                 drange, bri, con, sat);
    }
    uint8_t *dst[4] = { r->rgb->rgb };
    int stride[4] = { r->rgb->w * 3 };
    if (sws_scale(r->sws, (const uint8_t *const *)f->data, f->linesize, 0, f->height, dst, stride) != f->height)
        return ERR("video: converting a frame to RGB failed");
    return 0;
}

/* the sampled frames out to fn, decoding the kept packets up to the last one */
static int decode(video_run *r, const video_limits *lim, const int64_t *idx, int n, double fps, video_frame_fn fn,
                  void *ctx, char *err, size_t errlen)
{
    if (!(r->frame = av_frame_alloc())) return ERR("video: out of memory");
    int64_t i = 0;
    uint64_t px = 0;
    int k = 0;
    for (int p = 0; p <= r->n_pkts && k < n; p++) {
        if (past(&r->io.deadline)) return ERR("video: decoding took over %.0f seconds", WALL_SECONDS);
        if (p < r->n_pkts && !r->pkts[p]->size) continue; /* counted, but an empty packet would drain the decoder */
        int rc = avcodec_send_packet(r->dec, p < r->n_pkts ? r->pkts[p] : NULL); /* NULL: drain the rest */
        if (rc < 0) return av_fail(err, errlen, "cannot decode", rc);
        while (k < n && (rc = avcodec_receive_frame(r->dec, r->frame)) >= 0) {
            AVFrame *f = r->frame;
            if (frame_size_ok(lim, f->width, f->height, err, errlen)) return -1;
            px += (uint64_t)f->width * (uint64_t)f->height;
            if (px > lim->max_decoded_px)
                return ERR("video: decoding it takes over %llu pixels of frames",
                           (unsigned long long)lim->max_decoded_px);
            if (i == idx[k]) {
                if (to_rgb(r, f, err, errlen)) return -1;
                if (fn(ctx, r->rgb, k, n, i, (double)i / fps, err, errlen)) return -1;
                k++;
            }
            i++;
            av_frame_unref(f);
        }
        if (rc < 0 && rc != AVERROR(EAGAIN) && rc != AVERROR_EOF) return av_fail(err, errlen, "cannot decode", rc);
    }
    if (k < n)
        return ERR("video: it decodes to %lld frames where %d packets were counted", (long long)i, r->n_pkts);
    return n;
}

int video_decode(const uint8_t *data, size_t n, const video_limits *lim, video_frame_fn fn, void *ctx, char *err,
                 size_t errlen)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, av_once);
    video_limits d = video_limits_default();
    if (!lim) lim = &d;
    if (err && errlen) err[0] = 0;
    if (n > lim->max_bytes) return ERR("video: %zu bytes, over the limit of %zu", n, lim->max_bytes);
    if (!n) return ERR("video: empty file");
    if (lim->max_frames < 1 || lim->max_frames > VIDEO_MAX_FRAMES)
        return ERR("video: %d frames asked for, not 1 to %d", lim->max_frames, VIDEO_MAX_FRAMES);
    video_run r;
    memset(&r, 0, sizeof r);
    r.io = (mem_io){ data, n, 0, 0, 16 * (uint64_t)n + (1u << 20), { 0, 0 } };
    clock_gettime(CLOCK_MONOTONIC, &r.io.deadline);
    r.io.deadline.tv_sec += (time_t)WALL_SECONDS;
    int rc = open_input(&r, err, errlen), si = -1;
    if (!rc) {
        si = av_find_best_stream(r.fmt, AVMEDIA_TYPE_VIDEO, -1, -1, NULL, 0);
        if (si < 0) rc = ERR("video: the file has no video stream");
    }
    AVStream *st = rc ? NULL : r.fmt->streams[si];
    /* from the header, before the stream info's probe decodes anything */
    if (!rc && (st->codecpar->width || st->codecpar->height))
        rc = frame_size_ok(lim, st->codecpar->width, st->codecpar->height, err, errlen);
    if (!rc) {
        for (unsigned i = 0; i < r.fmt->nb_streams; i++) /* the other streams' packets are not read */
            r.fmt->streams[i]->discard = (int)i == si ? AVDISCARD_DEFAULT : AVDISCARD_ALL;
        rc = open_decoder(&r, st, lim, err, errlen);
    }
    double fps = 0;
    if (!rc) rc = scan(&r, si, lim, &fps, err, errlen);
    int64_t idx[VIDEO_MAX_FRAMES];
    int k = rc ? 0 : video_sample(r.n_pkts, lim->max_frames, idx);
    if (!rc) rc = decode(&r, lim, idx, k, fps, fn, ctx, err, errlen);
    run_free(&r);
    if (rc < 0 && err && errlen && !err[0]) ERR("video: cannot decode");
    return rc;
}
