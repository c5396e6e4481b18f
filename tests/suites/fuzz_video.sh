#!/bin/sh
# Fuzzes the video decoder (tests/fuzz/fuzz_video.c: MP4/QuickTime, WebM/Matroska through the system's FFmpeg,
# frame sampling, RGB conversion) with libFuzzer + ASan + UBSan for a bounded time over a copy of the committed
# seeds (tests/fuzz/corpus_video: the video fixtures of tools/make_video_fixture.py, H.264 with B-frames in MP4,
# VP9 in WebM, a stream without frames). Prints "PASS fuzz_video (N execs)" or "FAIL fuzz_video: ..." naming the
# crash file, which reproduces with: build/fuzz/fuzz_video FILE
# FUZZ_SECONDS overrides the 30 s budget (e.g. FUZZ_SECONDS=600 for a long run).
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/libfuzzer_suite.sh
# 256 MB: the target's 1024-side, 256 Kpx frames and FFmpeg's own contexts and frame pools
libfuzzer_suite fuzz_video tests/fuzz/corpus_video tests/fuzz/video.dict 256 "${FUZZ_SECONDS:-30}" \
  tests/fuzz/fuzz_video.c opencl/video_av.c opencl/image.c opencl/image_jpeg_png.c opencl/image_webp_gif.c \
  opencl/errf.c -lavformat -lavcodec -lswscale -lavutil -ljpeg -lpng16 -lwebp -lwebpdemux -lgif -lm -lpthread
