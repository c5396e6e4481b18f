#!/bin/sh
# Chunked prefill mixed with decode end to end through nginx to one clgemma-fcgi worker on the real 270M model
# (tests/e2e/test_chunked.py): with --step-tokens 64 a greedy stream keeps flowing while a 600-token prompt
# enters (its largest gap well under the prompt's time to first token) and the prompt goes in chunks; then a
# worker whose budget takes the prompt in one step stalls the stream past that bound; every answer equals its
# answer alone. --prefix-cache 0: every prompt is computed.
cd "$(dirname "$0")/../.." || exit 1
. tests/e2e/lib.sh
opts="--ctx 2048 --max-seqs 2 --max-queue 2 --threads 6 --prefix-cache 0"
e2e_two_phases e2e_chunked tests/e2e/test_chunked.py CHUNKED_PHASE small "$opts --step-tokens 64" \
  large "$opts --step-tokens 4096"
