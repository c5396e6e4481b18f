/* fuzz_video.c — libFuzzer target for the video decoder (video.h: MP4/QuickTime and WebM/Matroska through
 * libavformat/libavcodec/libswscale from memory, transformers' frame sampling).
 *
 * Input bytes go to video_decode under tight limits (the fuzzer's -malloc_limit_mb then proves the decode is
 * bounded by them; -timeout that it ends). Checks the promises rather than just touching memory: an accepted
 * video delivers 1..max_frames frames in order, at rising stream indices and times, each within the frame
 * limits and every byte of it readable; a refusal leaves one "video: ..." line. Only our code is instrumented:
 * the system's FFmpeg runs as shipped.
 *
 * Build: tests/suites/fuzz_video.sh (clang -fsanitize=fuzzer,address,undefined). */
#include "video.h"

#include <stdint.h>
#include <string.h>

#define REQUIRE(c) do { if (!(c)) __builtin_trap(); } while (0)

typedef struct {
    const video_limits *lim;
    int next;
    int64_t last_index;
    double last_seconds;
} seen;

static int on_frame(void *ctx, const image_rgb *f, int k, int n, int64_t index, double seconds, char *err,
                    size_t errlen)
{
    (void)err;
    (void)errlen;
    seen *s = ctx;
    REQUIRE(k == s->next && n >= 1 && n <= s->lim->max_frames && k < n);
    REQUIRE(index > s->last_index && seconds >= s->last_seconds && seconds >= 0);
    REQUIRE(f->w > 0 && f->h > 0 && f->w <= s->lim->frame.max_side && f->h <= s->lim->frame.max_side);
    REQUIRE((uint64_t)f->w * (uint64_t)f->h <= s->lim->frame.max_pixels);
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < (size_t)f->w * f->h * 3; i++) sink ^= f->rgb[i]; /* ASan checks each byte */
    (void)sink;
    s->next++;
    s->last_index = index;
    s->last_seconds = seconds;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    video_limits lim = video_limits_default();
    lim.max_bytes = 1 << 20;
    lim.max_frames = 8;
    lim.max_packets = 2000;
    lim.max_decoded_px = 20000000; /* e.g. 300 frames of 256x256 */
    lim.frame = (image_limits){ 0, 1 << 18, 1024 };
    seen s = { &lim, 0, -1, 0 };
    char err[256] = "";
    int n = video_decode(data, size, &lim, on_frame, &s, err, sizeof err);
    if (n < 0) {
        REQUIRE(!strncmp(err, "video: ", 7) && strlen(err) > 7 && !memchr(err, '\n', strlen(err)));
        return 0;
    }
    REQUIRE(n >= 1 && n == s.next);
    return 0;
}
