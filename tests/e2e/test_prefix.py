"""Automatic prefix caching end to end through nginx to one clgemma-fcgi worker on the real 270M model
(sliding window 512; the suite runs --max-batch 256, so a sequence's sliding-window ring holds 768 tokens and a
prompt of 1,000 wraps it while it is prefilled). Run by tests/suites/e2e_prefix.sh in two phases:

PREFIX_PHASE=cold, a worker started with --prefix-cache 0: the answers (temperature 0) to a 1,000-token system
prompt with a second question, written to E2E_REF; nothing is reported cached.
PREFIX_PHASE=warm, a worker with the prefix cache on: the same prompt twice (the second time-to-first-token at
least 5x shorter, its cached_tokens the whole blocks before the last token, the same answer), the second question
after the same system prompt (reusing it; the answer the cold worker gave), n=2 on a cached prefix (both choices
the greedy answer, the prompt counted once), and /metrics' prefix-cache counters."""
import json
import os
import time

from e2e import MODEL, auth, http, metrics, run_all, sse_events, test

PHASE = os.environ["PREFIX_PHASE"]
REF = os.environ["E2E_REF"]
BLOCK = 32  # tokens per KV block: reuse is in whole blocks
COLOURS = ["red", "green", "blue", "amber", "violet", "teal", "ochre"]
SYSTEM = " ".join(f"Rule {i}: when asked about item {i}, answer with the colour {COLOURS[i % 7]} and the number "
                  f"{i * 37 % 101}." for i in range(1, 42))
QUESTIONS = ["Which colour goes with item 7?", "Which number goes with item 12?"]


def body(question, n=1, max_tokens=12):
    return {"model": MODEL, "temperature": 0, "max_tokens": max_tokens, "n": n, "stream": True,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]}


def ask(question, n):
    """a streamed greedy answer's texts per choice and usage"""
    with http() as h, h.stream("POST", "/v1/chat/completions", json=body(question, n), headers=auth()) as r:
        assert r.status_code == 200, r.read()
        events = sse_events(r)
    assert events[-1] == "[DONE]", events[-1]
    texts, usage = [""] * n, None
    for e in events[:-1]:
        c = json.loads(e)
        usage = c.get("usage") or usage
        for ch in c["choices"]:
            texts[ch["index"]] += ch["delta"].get("content") or ""
    return texts, usage


def ttft(question):
    """(text, usage, seconds from the request to its first content chunk) of a streamed greedy answer"""
    text, usage, first, buf = "", None, None, ""
    t0 = time.monotonic()
    with http() as h, h.stream("POST", "/v1/chat/completions", json=body(question), headers=auth()) as r:
        assert r.status_code == 200, r.read()
        for chunk in r.iter_text():
            buf += chunk
            while "\n\n" in buf:
                block, buf = buf.split("\n\n", 1)
                if block.startswith(":") or block == "data: [DONE]":
                    continue  # a heartbeat comment while queued or in prefill; the end
                c = json.loads(block[len("data: "):])
                usage = c.get("usage") or usage
                for ch in c["choices"]:
                    piece = ch["delta"].get("content") or ""
                    if piece and first is None:
                        first = time.monotonic() - t0
                    text += piece
    assert first is not None, f"no content in the answer: {usage}"
    return text, usage, first


def cached(usage):
    return usage["prompt_tokens_details"]["cached_tokens"]


if PHASE == "cold":
    @test
    def cold_worker_reuses_nothing():
        ref = {}
        for q in QUESTIONS:
            text, usage, first = ttft(q)
            assert cached(usage) == 0, usage
            ref[q] = {"text": text, "prompt_tokens": usage["prompt_tokens"], "ttft": first}
            print(f"  cold worker: {usage['prompt_tokens']} prompt tokens, first token after {first:.2f}s: {text!r}")
        text, usage, _ = ttft(QUESTIONS[0])
        assert cached(usage) == 0 and text == ref[QUESTIONS[0]]["text"], (usage, text)
        with open(REF, "w") as f:
            json.dump(ref, f)
else:
    with open(REF) as f:
        REFS = json.load(f)
    first_answer = {}

    @test
    def repeated_prompt_is_5x_faster_to_its_first_token():
        text1, u1, t1 = ttft(QUESTIONS[0])
        text2, u2, t2 = ttft(QUESTIONS[0])
        n = u1["prompt_tokens"]
        assert n >= 1000, f"the prompt has {n} tokens, want about 1,000"
        assert cached(u1) == 0, f"the first time reused {cached(u1)} tokens"
        assert cached(u2) == (n - 1) // BLOCK * BLOCK, f"the second time reused {cached(u2)} of {n} tokens"
        assert text2 == text1, (text1, text2)
        print(f"  {n} prompt tokens: first token after {t1:.2f}s, then {t2:.2f}s with {cached(u2)} cached "
              f"({t1 / t2:.1f}x)")
        assert t1 >= 5 * t2, f"time to first token {t1:.2f}s, then {t2:.2f}s: only {t1 / t2:.1f}x"
        first_answer["text"] = text1

    @test
    def answers_equal_the_cold_workers():
        assert first_answer.get("text") == REFS[QUESTIONS[0]]["text"], (first_answer, REFS[QUESTIONS[0]])

    @test
    def another_question_after_the_system_prompt_reuses_it():
        text, usage, first = ttft(QUESTIONS[1])
        n = usage["prompt_tokens"]
        assert n == REFS[QUESTIONS[1]]["prompt_tokens"], (usage, REFS[QUESTIONS[1]])
        assert cached(usage) >= 960 and cached(usage) < n, f"reused {cached(usage)} of {n} tokens"
        assert text == REFS[QUESTIONS[1]]["text"], (text, REFS[QUESTIONS[1]]["text"])
        print(f"  second question: {cached(usage)} of {n} tokens reused, first token after {first:.2f}s "
              f"(cold worker {REFS[QUESTIONS[1]]['ttft']:.2f}s)")

    @test
    def n_choices_fork_after_a_cached_prefix():
        texts, usage = ask(QUESTIONS[0], 2)
        assert texts == [REFS[QUESTIONS[0]]["text"]] * 2, texts
        n = usage["prompt_tokens"]
        assert n == REFS[QUESTIONS[0]]["prompt_tokens"] and cached(usage) == (n - 1) // BLOCK * BLOCK, usage

    @test
    def metrics_count_hits():
        m = metrics()
        hits = m[("clgemma_prefix_cache_hit_tokens_total", frozenset())]
        looked = m[("clgemma_prefix_cache_prompt_tokens_total", frozenset())]
        ratio = m[("clgemma_prefix_cache_hit_ratio", frozenset())]
        assert hits >= 3 * 960 and looked > hits, (hits, looked)
        assert abs(ratio - hits / looked) < 1e-3, (ratio, hits, looked)
        assert m[("clgemma_kv_blocks_used", frozenset({("pool", "full")}))] == 0, "blocks held with nothing running"
        assert m[("clgemma_kv_blocks_cached", frozenset({("pool", "full")}))] > 0, "no cached block"

if __name__ == "__main__":
    raise SystemExit(run_all())
