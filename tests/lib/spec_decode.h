/* spec_decode.h — greedy decoding of one sequence plainly or with speculative drafts (opencl/spec.c), for the
 * tests that compare the two (test_engine_spec, test_qwen35_spec). Include check.h first. */
#ifndef CLGEMMA_SPEC_DECODE_H
#define CLGEMMA_SPEC_DECODE_H
#include <stdio.h>
#include <stdlib.h>

#include "engine.h"
#include "sampler.h"
#include "spec.h"

static inline sampler *spec_greedy_sampler(uint32_t n_vocab)
{
    sampler_params p;
    sampler_params_default(&p);
    sampler *s = NULL;
    if (sampler_create(&s, &p, n_vocab)) { printf("FAIL sampler_create\n"); exit(1); }
    return s;
}

/* n_gen greedy tokens after prompt into out: one token a step (k = 0) or with drafts of up to k (spec_next);
 * st gets the drafting's counters (NULL: dropped; else spec_end it) */
static inline void spec_decode(engine *e, const int32_t *prompt, int n, int k, int n_gen, int32_t *out, spec_run *st)
{
    char err[512];
    sampler *s = spec_greedy_sampler(engine_get_info(e)->n_vocab);
    int seq = engine_seq_new(e);
    engine_item it = { .seq = seq, .tokens = prompt, .n_tokens = n, .smp = s };
    CHECK(engine_step(e, &it, 1, err, sizeof err) == 0, "prefill: %s", err);
    spec_run r = { 0 };
    if (k) CHECK(spec_begin(&r, prompt, n, k, s) == 0, "spec_begin: %s", r.err);
    int got = 0;
    int32_t tok = it.token_out;
    while (got < n_gen) {
        int32_t o[SPEC_MAX_DRAFT + 1];
        int m = k ? spec_next(&r, e, seq, tok, o) : (o[0] = tok, 1);
        if (m < 0) { CHECK(0, "spec_next: %s", r.err); break; }
        for (int i = 0; i < m && got < n_gen; i++) out[got++] = o[i];
        if (k) { tok = r.next; continue; }
        it.tokens = &tok;
        it.n_tokens = 1;
        if (engine_step(e, &it, 1, err, sizeof err)) { CHECK(0, "decode: %s", err); break; }
        tok = it.token_out;
    }
    if (st) *st = r;
    else spec_end(&r);
    engine_seq_free(e, seq);
    sampler_destroy(s);
}

#endif
