/* video.h — a video file held in memory (MP4/QuickTime, WebM/Matroska) decoded into the RGB8 frames that
 * transformers' Gemma 4 video processor would sample from it, under caller-given limits. Host only (no
 * OpenCL); libavformat/libavcodec/libswscale read the bytes through a memory AVIOContext (no files).
 *
 * Sampling (docs/design-vision.md 1.4): the stream's frames are counted and timed by reading every packet,
 * as torchcodec's exact mode does (transformers' default video backend): N = packets, fps = N / (last packet's
 * end - first packet's start), else the header's frame rate; then default_sample_indices_fn with num_frames
 * 32: index k = k * N / n (integer division) for n = min(32, N) frames, at index / fps seconds. Every refusal
 * is one "video: ..." line in err. */
#ifndef CLGEMMA_VIDEO_H
#define CLGEMMA_VIDEO_H
#include <stddef.h>
#include <stdint.h>

#include "image.h"

#define VIDEO_MAX_FRAMES 32                     /* Gemma4VideoProcessor's num_frames */
#define VIDEO_MAX_BYTES_DEFAULT ((size_t)64 << 20)
#define VIDEO_MAX_PACKETS_DEFAULT 20000         /* frames in the stream: 11 minutes at 30 fps */
#define VIDEO_MAX_SECONDS_DEFAULT 1200.0        /* the stream's duration */
#define VIDEO_MAX_DECODED_PX_DEFAULT 8000000000ull /* w * h over the frames decoded: 2 min of 1080p30, 11 of 480p */
#define VIDEO_MAX_SIDE_DEFAULT 4096             /* each frame: 4K UHD fits */
#define VIDEO_MAX_PIXELS_DEFAULT (4096ull * 2304)

typedef struct {
    size_t max_bytes;        /* the file */
    int max_frames;          /* frames sampled, 1..VIDEO_MAX_FRAMES */
    uint32_t max_packets;    /* the stream's frames, counted before anything is decoded */
    double max_seconds;      /* the stream's duration */
    uint64_t max_decoded_px; /* decoding work: pixels of every frame decoded */
    image_limits frame;      /* each frame's size (max_bytes unused), checked from the header and per frame */
} video_limits;

/* the defaults above */
video_limits video_limits_default(void);

/* the sampling rule alone: n = min(max_frames, total) indices into idx (k * total / n); 0 when total < 1 */
int video_sample(int64_t total, int max_frames, int64_t *idx);

/* called once per sampled frame, in order: the k-th of n, the stream's frame index, its time in seconds.
 * 0 goes on; -1 stops the decode, the callback having written its one line into err. */
typedef int (*video_frame_fn)(void *ctx, const image_rgb *frame, int k, int n, int64_t index, double seconds,
                              char *err, size_t errlen);

/* NULL lim means the defaults. Returns the frames delivered (n >= 1), or -1 with one line in err. */
int video_decode(const uint8_t *data, size_t n, const video_limits *lim, video_frame_fn fn, void *ctx, char *err,
                 size_t errlen);

#endif
