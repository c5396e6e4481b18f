#!/bin/sh
# Penalties see the prompt in every CLI loop: the engine feeds an item's tokens to its sampler, so
# `batch` (which once skipped the prompt) and `generate` choose the same tokens under a repetition
# penalty, and the first of them is not the unpenalised continuation of a repetitive prompt.
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
exit $fails
