#!/bin/sh
# Builds tests/opencl/models/test_gemma4v.c, test_gemma4v_encode.c and test_gemma4v_text.c with the engine under AddressSanitizer +
# UndefinedBehaviorSanitizer (leak checking on) and runs them: the mmproj loader over the fixtures, every refusal
# path and the file cut at many lengths; the encoder's staging, scratch and refusals against the goldens; image rows in the text forward, the image
# cache's pins and evictions, the step's span checks. Leaks inside the OpenCL platform's own libraries are suppressed (not ours to fix);
# any other sanitizer report aborts the run, which fails the suite.
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/asan_test.sh
make -s build/gen/kernels_embed.c || exit 1
supp=build/asan/lsan_opencl.supp
mkdir -p build/asan
printf 'leak:libpocl\nleak:libOpenCL\nleak:libLLVM\nleak:libclang\nleak:libhwloc\n' > "$supp"
srcs=$(ls opencl/*.c opencl/io/*.c opencl/models/*.c opencl/ops/*.c opencl/bench/*.c opencl/constrain/*.c)
# shellcheck disable=SC2086
LSAN_OPTIONS=suppressions=$supp:print_suppressions=0 \
asan_test asan_vision test_gemma4v tests/opencl/models/test_gemma4v.c $srcs build/gen/kernels_embed.c \
    -Iopencl/models -Iopencl/ops -Iopencl/bench -Iopencl/constrain \
    -lclblast -lOpenCL -ljson-c -lpcre2-8 -ljpeg -lpng16 -lwebp -lwebpdemux -lgif -lavformat -lavcodec -lswscale -lavutil -lcrypto -lm -lpthread || exit 1
# shellcheck disable=SC2086
LSAN_OPTIONS=suppressions=$supp:print_suppressions=0 \
asan_test asan_vision test_gemma4v_encode tests/opencl/models/test_gemma4v_encode.c $srcs build/gen/kernels_embed.c \
    -Iopencl/models -Iopencl/ops -Iopencl/bench -Iopencl/constrain \
    -lclblast -lOpenCL -ljson-c -lpcre2-8 -ljpeg -lpng16 -lwebp -lwebpdemux -lgif -lavformat -lavcodec -lswscale -lavutil -lcrypto -lm -lpthread || exit 1
# shellcheck disable=SC2086
LSAN_OPTIONS=suppressions=$supp:print_suppressions=0 \
asan_test asan_vision test_gemma4v_text tests/opencl/models/test_gemma4v_text.c $srcs build/gen/kernels_embed.c \
    -Iopencl/models -Iopencl/ops -Iopencl/bench -Iopencl/constrain \
    -lclblast -lOpenCL -ljson-c -lpcre2-8 -ljpeg -lpng16 -lwebp -lwebpdemux -lgif -lavformat -lavcodec -lswscale -lavutil -lcrypto -lm -lpthread || exit 1
echo "PASS asan_vision"
