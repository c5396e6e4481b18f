#!/bin/sh
# Builds tests/opencl/test_image_prep.c with the image decoder and preprocessing under AddressSanitizer +
# UndefinedBehaviorSanitizer (leak checking on) and runs it over the fixtures: every decode, resize and
# refusal path of JPEG, PNG, WebP and GIF (truncated files, forged header sizes, corrupt data) with the
# checks on. The test's PASS/FAIL lines pass through; any sanitizer report aborts the run, which fails the suite.
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/asan_test.sh
asan_test asan_image test_image_prep tests/opencl/test_image_prep.c opencl/image.c opencl/image_jpeg_png.c \
    opencl/image_webp_gif.c opencl/image_prep.c opencl/errf.c -ljpeg -lpng16 -lwebp -lwebpdemux -lgif -lm || exit 1
echo "PASS asan_image"
