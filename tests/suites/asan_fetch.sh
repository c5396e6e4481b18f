#!/bin/sh
# The image-URL allowlist (fcgi/fetch.c: operators' entries parsed, clients' URLs judged through libcurl's URL
# parser) under ASan + UBSan: test_fcgi_fetch with fetch.c instrumented, the option parser from the built library.
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/asan_test.sh
[ -f build/libclgemma-fcgi.a ] || { echo "FAIL asan_fetch: build/libclgemma-fcgi.a is not built (make all)"; exit 1; }
asan_test asan_fetch test_fcgi_fetch -Ifcgi tests/fcgi/test_fcgi_fetch.c fcgi/fetch.c build/libclgemma-fcgi.a \
  build/libclgemma.a -lfcgi -lhttp_parser -lcurl -ljson-c -lclblast -lOpenCL -lpcre2-8 -ljpeg -lpng16 -lwebp \
  -lwebpdemux -lgif -lavformat -lavcodec -lswscale -lavutil -lcrypto -lm -lpthread && echo "PASS asan_fetch"
