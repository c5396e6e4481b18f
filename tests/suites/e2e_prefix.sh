#!/bin/sh
# Automatic prefix caching end to end through nginx to one clgemma-fcgi worker on the real 270M model
# (tests/e2e/test_prefix.py): a worker with --prefix-cache 0 answers the prompts cold first, then a worker
# with the cache on must give the same answers, report cached_tokens, reuse a shared 1,000-token system
# prompt and reach the first token of a repeated prompt at least 5x sooner. --max-batch 256 makes the
# sliding-window ring (768 tokens) wrap inside the 1,000-token prefill.
cd "$(dirname "$0")/../.." || exit 1
. tests/e2e/lib.sh
opts="--ctx 2048 --max-seqs 2 --max-queue 2 --threads 6 --max-batch 256"
e2e_two_phases e2e_prefix tests/e2e/test_prefix.py PREFIX_PHASE cold "$opts --prefix-cache 0" \
  warm "$opts --prefix-cache 1"
