# ptxas -v's report as a line per kernel: registers, spilled bytes, stack frame bytes and static local
# (shared) memory bytes; only kernels whose names match the regex pat (default: all). Read by
# tools/ptx_check.sh and tools/gpu_ptxas.sh; run with -F"'".
BEGIN { if (pat == "") pat = "." }
/Compiling entry function/ { k = $2 }
/bytes stack frame/ {
  split($0, w, " ")
  for (i in w) {
    if (w[i] == "stack" && w[i + 1] == "frame,") f = w[i - 2]
    if (w[i] == "spill" && w[i + 1] == "stores,") s = w[i - 2]
  }
}
/Used [0-9]+ registers/ {
  if (k !~ pat) next
  match($0, /Used [0-9]+/); r = substr($0, RSTART + 5, RLENGTH - 5)
  m = 0; if (match($0, /[0-9]+ bytes smem/)) m = substr($0, RSTART, RLENGTH - 11)
  printf "  %-28s %4d registers %5d bytes spilled %5d bytes stack %6d bytes local\n", k, r, s, f, m
}
