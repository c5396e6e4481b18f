#!/bin/sh
# MTP speculative decoding (--spec mtp --draft FILE) end to end through nginx to one clgemma-fcgi worker on the tiny
# Gemma 4 fixture and its drafter (trained on the fixture's own text, so drafts are taken and rejected):
# tests/e2e/test_spec.py's requests (copy-heavy greedy completions, streamed and not, stop strings, max_tokens 19,
# n=2, three at once, a logprobs request, a seeded sampled request) give a plain worker's texts, finishes and usage;
# /metrics counts drafts proposed and accepted; /health names the drafter.
cd "$(dirname "$0")/../.." || exit 1
. tests/e2e/lib.sh
E2E_MODEL=tests/fixtures/gemma4_dense.gguf
export SPEC_MODE=mtp
opts="--ctx 1024 --max-seqs 4 --max-queue 4 --threads 12"
e2e_two_phases e2e_spec_mtp tests/e2e/test_spec.py SPEC_PHASE plain "$opts" spec \
  "$opts --spec mtp --draft tests/fixtures/gemma4_mtp_assistant.gguf --draft-max 8"
