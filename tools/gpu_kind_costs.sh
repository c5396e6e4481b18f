#!/bin/bash
# What each kernel kind costs the device at decode: `clgemma bench --hold` (a step's launches queued behind a
# gate, timed alone) with every launch of one kind enqueued twice (--set LAUNCH_TWICE=N), and with an empty
# kernel on its grid in place of each of its launches (--set LAUNCH_EMPTY=N), against the held step without:
# doubled, the kind's whole cost; emptied, its work alone (the rest of the whole is its launches' own cost). On the GPU machine (repo root; carry .gpu as tools/gpu_vs_llama.sh wants it, which writes
# the files):
#   bash tools/gpu_kind_costs.sh [MODELS] [BENCH ARGS...]
# MODELS (default "26b e4b 31b"): gpu_vs_llama.sh's names, or paths of GGUF files to use as they are.
# BENCH ARGS (default "-p 64 -n 64 -r 3"). One profiled run lists the decode's kinds; those with at least
# MIN_SHARE percent (default 1) of its kernel time are doubled and emptied in turn. $OUT/kinds-NAME.txt (OUT
# defaults to ./profiles) gets, per kind, its launches a step, the held milliseconds a step doubling adds
# and emptying saves (against the mean of the plain runs before and after), and both per launch ("-" for
# the kinds that cannot run empty: they write expert or token ids). A doubled launch finds its weights in L2 where they fit:
# for small products the figure is a lower bound.
models=${1:-26b e4b 31b}
shift
args=("$@"); [ ${#args[@]} -eq 0 ] && args=(-p 64 -n 64 -r 3)
export OUT=${OUT:-profiles} VS_DIR=${PROFILE_DIR:-/tmp/clgemma-profile} XDG_CACHE_HOME=${XDG_CACHE_HOME:-/tmp/cc}
mkdir -p "$OUT" "$VS_DIR"
cg=build/clgemma; [ -x .gpu/now/clgemma ] && cg=.gpu/now/clgemma
PY=.venv/bin/python; [ -x "$PY" ] || PY=python3
held() { # bench args... -> the held ms a step ("-" where bench refuses)
  $cg bench -m "$file" "${args[@]}" --hold "$@" 2>/dev/null | tail -1 |
    "$PY" -c 'import json, sys; print(json.load(sys.stdin)["device_ms_per_step"])' 2>/dev/null || echo -
}
for m in $models; do
  case $m in
    *.gguf) file=$m; name=$(basename "$m" .gguf) ;;
    *) KEEP=1 bash tools/gpu_vs_llama.sh "$m" none || exit 1; file=$VS_DIR/$m.gguf; name=$m ;;
  esac
  # the decode table of bench --profile: kind, ms, share, launches, GB/s, TFLOP/s, us/launch, twice
  kinds=$($cg bench -m "$file" "${args[@]}" --profile 2>&1 >/dev/null | "$PY" -c '
import re, sys
text = sys.stdin.read().split("profile: decode")[-1].split("kernel time")[0]
steps = int(re.search(r"([0-9]+) steps", text).group(1))
for kind, share, n, twice in re.findall(
        r"^(\S.*?) +[0-9.]+ +([0-9.]+)% +([0-9]+) +\S+ +\S+ +\S+ +([0-9]+)$", text, re.M):
    if float(share) >= float(sys.argv[1]):
        print("%s|%.1f|%s" % (twice, int(n) / steps, kind))' "${MIN_SHARE:-1}")
  [ -n "$kinds" ] || { echo "$name: no decode profile"; exit 1; }
  base1=$(held)
  rows=()
  while IFS='|' read -r twice per kind; do
    rows+=("$kind|$per|$(held --set LAUNCH_TWICE=$twice)|$(held --set LAUNCH_EMPTY=$twice)")
  done <<< "$kinds"
  base2=$(held)
  { echo "$name: held step $base1 / $base2 ms (before / after), bench ${args[*]} --hold"
    printf '%s\n' "${rows[@]}" | "$PY" -c '
import sys
base = (float(sys.argv[1]) + float(sys.argv[2])) / 2
print("%-44s %9s %10s %10s %12s %12s" % ("kind", "launches", "ms added", "ms saved", "us a launch", "us of work"))
print("%-44s %9s %10s %10s %12s %12s" % ("", "a step", "(doubled)", "(emptied)", "(doubled)", "(emptied)"))
def f(ms, per, sign):
    try:
        d = sign * (float(ms) - base)
    except ValueError:
        return "-", "-"
    return "%.3f" % d, "%.1f" % (1e3 * d / float(per)) if float(per) else "-"
for line in sys.stdin:
    kind, per, twice, empty = line.rstrip("\n").split("|")
    (a, au), (s, su) = f(twice, per, 1), f(empty, per, -1)
    print("%-44s %9s %10s %10s %12s %12s" % (kind, per, a, s, au, su))' "$base1" "$base2"
  } > "$OUT/kinds-$name.txt"
  cat "$OUT/kinds-$name.txt"
  case $m in *.gguf) ;; *) [ "${KEEP:-0}" = 1 ] || rm -f "$file" ;; esac
done
