#!/bin/sh
# Speculative decoding (prompt lookup, --spec ngram) end to end through nginx to one clgemma-fcgi worker on the
# real 270M base model (tests/e2e/test_spec.py): a plain worker answers copy-heavy greedy completions first (a code
# edit, a repeated list, a JSON transform; streamed and not, stop strings, max_tokens 19, n=2, three at once, a
# logprobs request), then a worker with --spec ngram must give the same texts, finishes and usage, count drafts
# proposed and accepted in /metrics, and feed none for the logprobs request; a seeded sampled request drafts there,
# a streamed chunk a token as usage counts, the same text twice.
cd "$(dirname "$0")/../.." || exit 1
. tests/e2e/lib.sh
opts="--ctx 1024 --max-seqs 4 --max-queue 4 --threads 12"
e2e_two_phases e2e_spec tests/e2e/test_spec.py SPEC_PHASE plain "$opts" spec "$opts --spec ngram --draft-max 8"
