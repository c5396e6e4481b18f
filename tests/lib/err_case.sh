# Sourced by suites: err_case NAME WORD ARGS... runs $CLI ARGS and expects a non-zero exit (not a
# signal) with exactly one stderr line containing WORD. Uses $CLI, $tmp; sets fails=1 on failure.
err_case() {
  name=$1; word=$2; shift 2
  $CLI "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?
  if [ "$rc" -eq 0 ] || [ "$rc" -gt 128 ]; then echo "FAIL $name: exit status $rc"; fails=1
  elif [ "$(wc -l < "$tmp/err")" -ne 1 ] || ! grep -qi -- "$word" "$tmp/err"; then
    echo "FAIL $name: expected one line with '$word': $(head -c 300 "$tmp/err")"; fails=1
  else echo "PASS $name ($(cat "$tmp/err"))"; fi
}
