#!/bin/sh
# tokenizer.chat_template at load, through the CLI (clgemma tokenize --chat): copies of a Gemma 4 fixture that
# differ only in that key (tools/gen_chat_template_files.py). A template clgemma knows (the three Gemma 4
# texts of tests/golden/chat_gemma4.json) and a file without one load silently; an unknown, a broken
# (jinja2 cannot parse it) and a non-string template each give exactly one stderr line naming
# tokenizer.chat_template, and the file still loads and chats with the family's template. The chat ids
# must equal the tokenizer's ids for the template's text with special-token parsing (llama.cpp's way,
# reference string written out below), and message text holding control-token text must not add
# control tokens. One PASS/FAIL line per case.
cd "$(dirname "$0")/../.." || exit 1
CLI=build/clgemma
SRC=$(ls -S tests/fixtures/gemma4_*.gguf 2>/dev/null | grep -v vision_mmproj | tail -n 1) # the smallest text model
[ -n "$SRC" ] || { echo "FAIL chat_template: no tests/fixtures/gemma4_*.gguf"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
.venv/bin/python tools/gen_chat_template_files.py "$SRC" "$tmp" tests/golden/chat_gemma4.json ||
  { echo "FAIL chat_template: could not write the template variants"; exit 1; }
fails=0
fail() { echo "FAIL $1: $2"; fails=1; }

# the reference: what every Gemma 4 template makes of one user message "Hi", thinking off
want=$($CLI tokenize -m "$SRC" -p "<|turn>user
Hi<turn|>
<|turn>model
<|channel>thought
<channel|>" 2>/dev/null)
[ -n "$want" ] || fail chat_template "cannot tokenize the reference text"

case_() { # name, file, expected stderr text ('' = none)
  name=$1; file=$2; word=$3
  "$CLI" tokenize --chat -p "Hi" -m "$tmp/$file" >"$tmp/out" 2>"$tmp/err"; rc=$?
  lines=$(wc -l < "$tmp/err")
  if [ "$rc" -ne 0 ]; then fail "$name" "exit status $rc: $(head -c 300 "$tmp/err")"
  elif [ "$(cat "$tmp/out")" != "$want" ]; then fail "$name" "ids '$(cat "$tmp/out")', want '$want'"
  elif [ -z "$word" ] && [ "$lines" -ne 0 ]; then fail "$name" "stderr: $(head -c 300 "$tmp/err")"
  elif [ -n "$word" ] && [ "$lines" -ne 1 ]; then fail "$name" "$lines lines on stderr: $(head -c 300 "$tmp/err")"
  elif [ -n "$word" ] && ! grep -q "^clgemma: .*tokenizer.chat_template" "$tmp/err"; then fail "$name" "stderr: $(cat "$tmp/err")"
  elif [ -n "$word" ] && ! grep -qF -- "$word" "$tmp/err"; then fail "$name" "'$word' not in: $(cat "$tmp/err")"
  else echo "PASS $name${word:+ ($(cat "$tmp/err"))}"; fi
}
case_ known_gemma4 known_gemma4.gguf ""
case_ known_gemma4_interleaved known_gemma4-interleaved.gguf ""
case_ known_gemma4_31b known_gemma4-31b.gguf ""
case_ no_template none.gguf ""
case_ unknown_template unknown.gguf "is not a template clgemma knows"
case_ broken_template broken.gguf "does not parse (line 3: '{% if %}' never closed)"
case_ template_not_a_string nonstring.gguf "is not a string"

# control-token text typed by the user stays text: the template's own two <|turn> and one <turn|> only
turn=$($CLI tokenize -m "$SRC" -p "<|turn>" 2>/dev/null | awk '{print $NF}')
eot=$($CLI tokenize -m "$SRC" -p "<turn|>" 2>/dev/null | awk '{print $NF}')
ids=$($CLI tokenize --chat -p "<|turn>model <turn|> <|turn>" -m "$tmp/known_gemma4.gguf" 2>&1)
nt=$(echo "$ids" | tr ' ' '\n' | grep -cx "$turn"); ne=$(echo "$ids" | tr ' ' '\n' | grep -cx "$eot")
if [ -n "$turn" ] && [ "$nt" -eq 2 ] && [ "$ne" -eq 1 ]; then echo "PASS control_text_in_message ($nt <|turn>, $ne <turn|>)"
else fail control_text_in_message "ids '$ids': $nt <|turn> ($turn), $ne <turn|> ($eot)"; fi
exit $fails
