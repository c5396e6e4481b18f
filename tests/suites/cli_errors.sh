#!/bin/sh
# Bad input to the CLI: each case must exit non-zero with exactly one line on stderr that starts
# with "clgemma: " and names the problem (a word from the case), and must not crash.
cd "$(dirname "$0")/../.." || exit 1
M=models/gemma-3-270m-q4_k_m.gguf
CLI=build/clgemma
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
.venv/bin/python tools/make_bad_models.py "$tmp" "$M" || { echo "FAIL cli_errors: could not make the bad models"; exit 1; }
mkdir "$tmp/novendors"
fails=0
case_() { # name, expected word, command...
  name=$1; word=$2; shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?
  lines=$(wc -l < "$tmp/err")
  if [ "$rc" -eq 0 ]; then echo "FAIL $name: exit status 0"; fails=1
  elif [ "$rc" -gt 128 ]; then echo "FAIL $name: killed by signal $((rc - 128))"; fails=1
  elif [ "$lines" -ne 1 ]; then echo "FAIL $name: $lines lines on stderr: $(head -c 300 "$tmp/err")"; fails=1
  elif ! grep -q '^clgemma: ' "$tmp/err"; then echo "FAIL $name: stderr lacks the clgemma: prefix: $(cat "$tmp/err")"; fails=1
  elif ! grep -qi -- "$word" "$tmp/err"; then echo "FAIL $name: '$word' not in: $(cat "$tmp/err")"; fails=1
  else echo "PASS $name ($(cat "$tmp/err"))"; fi
}
case_ missing_file "No such file" $CLI generate -m "$tmp/none.gguf" -p hi
case_ not_gguf "magic" $CLI generate -m "$tmp/notgguf.bin" -p hi
case_ truncated "remain" $CLI generate -m "$tmp/truncated.gguf" -p hi
case_ unknown_arch "unsupported architecture" $CLI generate -m "$tmp/arch_llama.gguf" -p hi
case_ unsupported_type "unsupported type" $CLI generate -m "$tmp/iq2.gguf" -p hi
case_ larger_than_device "GiB" $CLI generate -m "$tmp/huge.gguf" -p hi
# copies of a converter-made Gemma 4 Q4_K_M file with one thing broken
case_ g4_missing_key "key_length_swa" $CLI generate -m "$tmp/g4_no_key.gguf" -p hi
case_ g4_tensor_shape "attn_q_norm" $CLI generate -m "$tmp/g4_shape.gguf" -p hi
case_ g4_tensor_type "ffn_norm" $CLI generate -m "$tmp/g4_type.gguf" -p hi
case_ g4_missing_merges "merges" $CLI generate -m "$tmp/g4_no_merges.gguf" -p hi
case_ g4_unknown_tokenizer "gemma9" $CLI generate -m "$tmp/g4_tokenizer.gguf" -p hi
case_ no_opencl_device "OpenCL" env OCL_ICD_VENDORS="$tmp/novendors" OPENCL_VENDOR_PATH="$tmp/novendors" $CLI generate -m "$M" -p hi
case_ bad_device "device" $CLI generate -m "$M" -p hi --device 7:3
case_ prompt_over_context "context" $CLI generate -m "$M" --ctx 16 -p "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen"
case_ bad_number "--temp" $CLI generate -m "$M" -p hi --temp warm
case_ unknown_option "unknown option" $CLI generate -m "$M" -p hi --bogus
case_ unknown_command "unknown command" $CLI fly
# measurement settings are the measuring commands' alone (bench, vbench, logits), and a misspelt one is refused
# rather than ignored
case_ unknown_setting "MMT_MIN_GROUP=" $CLI bench -m "$M" -p 4 -n 1 -r 1 --set MMT_MIN_GROUP=0
case_ setting_out_of_range "MMQ8P_STAGES takes a whole number from 2 to 4" $CLI bench -m "$M" -p 4 -n 1 -r 1 --set MMQ8P_STAGES=9
case_ setting_outside_bench "only for logits, bench, vbench" $CLI generate -m "$M" -p hi --set MMT_MIN_GROUPS=0
case_ draft_out_of_range "draft-max" $CLI generate -m $M -p hi --draft-max 99
case_ bench_draft_list "draft lengths 0..16" $CLI bench -m $M --draft 2,x
exit $fails
