# asan_test.sh — sourced by tests/suites/asan_*.sh: asan_test SUITE TEST ARG... builds build/asan/TEST from
# ARG... (sources, extra -I and -l flags) under AddressSanitizer + UndefinedBehaviorSanitizer (leak checking
# on) and runs it from the repository root. The test's PASS/FAIL lines pass through; any sanitizer report
# aborts the run. Returns non-zero after printing "FAIL SUITE: TEST: ..." on a failed build or run. CC
# overrides cc.
asan_test() {
    suite=$1 t=$2
    shift 2
    mkdir -p build/asan
    if ! ${CC:-cc} -std=c11 -Wall -Wextra -D_GNU_SOURCE -O1 -g \
            -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all \
            -Iopencl -Iopencl/io -Iopencl/include -Itests/lib -o "build/asan/$t" "$@"; then
        echo "FAIL $suite: $t: build failed"
        return 1
    fi
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:halt_on_error=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "build/asan/$t"
    rc=$?
    if [ "$rc" -ne 0 ]; then
        echo "FAIL $suite: $t: exit status $rc (sanitizer report or failed checks above)"
        return 1
    fi
}
