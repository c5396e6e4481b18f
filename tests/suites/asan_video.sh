#!/bin/sh
# Builds tests/opencl/test_video.c with the video decoder under AddressSanitizer + UndefinedBehaviorSanitizer (leak
# checking on) and runs it over the fixtures: decode and sampling against PyAV's reference, and every refusal path
# (truncated and corrupt files, forged sizes, no frames, each limit, a callback that stops the decode) with the
# checks on. The test's PASS/FAIL lines pass through; any sanitizer report aborts the run, which fails the suite.
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/asan_test.sh
asan_test asan_video test_video tests/opencl/test_video.c opencl/video_av.c opencl/image.c opencl/image_jpeg_png.c \
    opencl/image_webp_gif.c opencl/errf.c -lavformat -lavcodec -lswscale -lavutil -ljpeg -lpng16 -lwebp -lwebpdemux \
    -lgif -ljson-c -lcrypto -lm -lpthread || exit 1
echo "PASS asan_video"
