#!/bin/sh
# Runs every test suite and ends with "N passed, N failed". Exit status non-zero on any failure.
# Suites print one "PASS name" or "FAIL name: why" line per test case; a suite that exits
# non-zero without printing a FAIL line counts as one failure of its own.
cd "$(dirname "$0")/.." || exit 1
log=build/test-logs; rm -rf "$log"; mkdir -p "$log"
pass=0; fail=0
run_suite() { # name, command...
  name=$1; shift
  start=$(date +%s)
  "$@" > "$log/$name.log" 2>&1; rc=$?
  p=$(grep -c '^PASS ' "$log/$name.log"); f=$(grep -c '^FAIL ' "$log/$name.log")
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; echo "FAIL $name: exit status $rc" >> "$log/$name.log"; fi
  pass=$((pass + p)); fail=$((fail + f))
  printf '%-28s %3d passed %3d failed  (%ds)\n' "$name" "$p" "$f" $(( $(date +%s) - start ))
  if [ "$f" -ne 0 ]; then grep '^FAIL ' "$log/$name.log" | head -20; tail -n 15 "$log/$name.log"; fi
}
for t in build/tests/test_*; do
  [ -x "$t" ] && run_suite "$(basename "$t")" "$t"
done
for s in tests/suites/*.sh; do
  [ -f "$s" ] && run_suite "$(basename "$s" .sh)" sh "$s"
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
