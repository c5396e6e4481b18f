#!/bin/sh
# n choices per request, completions' prompt forms, echo and suffix end to end through nginx to
# one clgemma-fcgi worker on the real 270M model (tests/e2e/test_choices.py): the official openai
# client and SDK stream helper, per-choice stop/logprobs/grammar, usage and metrics, slots and
# cancellation. Four slots, so a request of 3 or 4 choices runs at once.
cd "$(dirname "$0")/../.." || exit 1
. tests/e2e/lib.sh
e2e_start e2e_choices --ctx 1024 --max-seqs 4 --max-queue 2 --threads 10 --drain-timeout 10
PYTHONPATH=tests/e2e "$E2E_PY" tests/e2e/test_choices.py
