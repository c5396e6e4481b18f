#!/bin/sh
# Penalties see the prompt in every CLI loop: the engine feeds an item's tokens to its sampler, so
# `batch` (which once skipped the prompt) and `generate` choose the same tokens under a repetition
# penalty, and the first of them is not the unpenalised continuation of a repetitive prompt. Drafts
# (--draft-max) leave greedy-with-penalty output as it is and run with sampling.
cd "$(dirname "$0")/../.." || exit 1
M=models/gemma-3-270m-q4_k_m.gguf
CLI=build/clgemma
P="one two three four five one two three four five one two three four five one two three"
fails=0
ids() { "$CLI" "$@" -m "$M" -p "$P" -n 8 --ids 2>/dev/null | head -n 1; }
plain=$(ids generate)
gen=$(ids generate --repeat-penalty 1.5)
bat=$(ids batch --repeat-penalty 1.5)
if [ -z "$plain" ] || [ -z "$gen" ] || [ -z "$bat" ]; then
  echo "FAIL runs: no output (plain '$plain', generate '$gen', batch '$bat')"; fails=1
else
  if [ "${plain%% *}" != "${gen%% *}" ]; then echo "PASS prompt_penalised (first token ${plain%% *} -> ${gen%% *})"
  else echo "FAIL prompt_penalised: the penalty left the first token ${gen%% *} of '$plain' alone"; fails=1; fi
  if [ "$gen" = "$bat" ]; then echo "PASS batch_equals_generate ($bat)"
  else echo "FAIL batch_equals_generate: generate '$gen', batch '$bat'"; fails=1; fi
fi
# greedy with a penalty verifies drafts on the processed rows: the same tokens as without drafts
log=$(mktemp); trap 'rm -f "$log"' EXIT
drafted() { sed -n 's/.*speculation: [0-9]* steps, \([0-9]*\) drafted, \([0-9]*\) accepted.*/\1 drafted, \2 accepted/p' \
  "$log"; }
pen=$("$CLI" generate -m "$M" -p "$P" -n 12 --ids --repeat-penalty 1.1 2>/dev/null | head -n 1)
spec=$("$CLI" generate -m "$M" -p "$P" -n 12 --ids --repeat-penalty 1.1 --draft-max 4 2>"$log" | head -n 1)
d=$(drafted); d=${d:-0}
if [ -n "$pen" ] && [ "$pen" = "$spec" ] && [ "${d%% *}" -gt 0 ]; then
  echo "PASS draft_penalised_equals_plain ($spec; $d)"
else echo "FAIL draft_penalised_equals_plain: plain '$pen', drafted '$spec' ($d)"; fails=1; fi
# sampling with drafts: 8 tokens, drafts taken
samp() { "$CLI" generate -m "$M" -p "$P" -n 8 --ids --temp 1 --top-k 6 --top-p 0.95 --presence-penalty 0.3 \
  --seed 2 --draft-max 4 2>"$1" | head -n 1; }
s1=$(samp "$log"); d=$(drafted); d=${d:-0}
n=$(echo "$s1" | wc -w)
if [ "$n" -eq 8 ] && [ "${d%% *}" -gt 0 ]; then echo "PASS draft_sampled ($s1; $d)"
else echo "FAIL draft_sampled: '$s1' ($n tokens, $d)"; fails=1; fi
exit $fails
