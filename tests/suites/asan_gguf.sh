#!/bin/sh
# Builds tests/opencl/io/test_gguf.c + opencl/io/gguf.c with ASan + UBSan (+ LeakSanitizer) and runs it.
# The test's PASS/FAIL lines pass through; any sanitizer report makes the suite fail.
cd "$(dirname "$0")/../.." || exit 1
out=build/asan
mkdir -p "$out"
cc=${ASAN_CC:-clang}
command -v "$cc" >/dev/null 2>&1 || cc=cc

if ! "$cc" -g -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all \
     -std=c11 -Wall -Wextra -D_GNU_SOURCE -Iopencl -Iopencl/io -Iopencl/include -Itests/lib \
     tests/opencl/io/test_gguf.c opencl/io/gguf.c -o "$out/test_gguf" 2> "$out/build.log"; then
  echo "FAIL asan_gguf: build failed"; cat "$out/build.log"; exit 1
fi
cat "$out/build.log"

# abort_on_error off: exit with a status; halt_on_error is implied by -fno-sanitize-recover
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=86 \
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
"$out/test_gguf" > "$out/test_gguf.log" 2>&1
rc=$?
cat "$out/test_gguf.log"
if [ "$rc" -ne 0 ]; then
  if grep -q -E 'Sanitizer|runtime error:' "$out/test_gguf.log"; then
    echo "FAIL asan_gguf: sanitizer report (exit $rc), see above"
  elif ! grep -q '^FAIL ' "$out/test_gguf.log"; then
    echo "FAIL asan_gguf: test_gguf exited with status $rc"
  fi
  exit 1
fi
exit 0
