#!/bin/sh
# Fuzzes the image decoder and the preprocessing after it (tests/fuzz/fuzz_image.c) with libFuzzer +
# ASan + UBSan for a bounded time over a copy of the committed seeds (tools/gen_image_prep_fixtures.py
# writes them: every PNG colour type, 16-bit, Adam7, tRNS, baseline / progressive / gray / CMYK JPEG,
# lossy / lossless / alpha / animated WebP, GIF with global / local palettes, transparency, offsets,
# interlace and animation, truncated files). Prints "PASS fuzz_image (N execs)" or "FAIL fuzz_image: ..."
# naming the crash file, which reproduces with: build/fuzz/fuzz_image FILE
# FUZZ_SECONDS overrides the 45 s budget (e.g. FUZZ_SECONDS=600 for a long run).
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/libfuzzer_suite.sh
# 64 MB: the target's 4 Mpx limit bounds the image (12 MB, one allocation); 70 tokens of rows are 2 MB
libfuzzer_suite fuzz_image tests/fuzz/corpus_image tests/fuzz/image.dict 64 "${FUZZ_SECONDS:-45}" \
  tests/fuzz/fuzz_image.c opencl/image.c opencl/image_jpeg_png.c opencl/image_webp_gif.c opencl/image_prep.c \
  opencl/errf.c -ljpeg -lpng16 -lwebp -lwebpdemux -lgif -lm
