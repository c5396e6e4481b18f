"""Chunked prefill mixed with decode, end to end through nginx to one clgemma-fcgi worker on the real 270M model
(--prefix-cache 0, so every prompt is computed). Run by tests/suites/e2e_chunked.sh in two phases:

CHUNKED_PHASE=small, a worker with --step-tokens 64: a greedy stream alone (its reference answer), then the same
stream with a long prompt (about 600 tokens: 10 chunks, and three prefills of it fit the suite's time) sent while it flows. The long prompt enters in chunks of what the
stream's decode token leaves of each step, so the stream's largest gap while the long prompt is prefilled stays
below a third of the long prompt's time to first token and within a few times the stream's median gap then;
/metrics counts at least n_long / 64 prefill chunks. Results go to E2E_REF.
CHUNKED_PHASE=large, a worker whose budget (--step-tokens 4096) gives the prompt a whole forward per step (one
sequence's share of a forward: 512 tokens here, fit_seq_chunk): the long prompt alone (its reference answer), then
the same pair. The stream now stalls for a forward of the prompt at a time: its largest gap breaks the small
phase's bound (the test of the bound can fail), and the prompt goes in ceil(n_long / 512) chunks. Every answer equals its reference token for token (greedy): chunking changes no result."""
import json
import os
import statistics
import threading
import time

from e2e import MODEL, auth, http, metrics, run_all, test

PHASE = os.environ["CHUNKED_PHASE"]
REF = os.environ["E2E_REF"]
BUDGET = {"small": 64, "large": 4096}[PHASE]
SEQ_CHUNK = 512  # one sequence's tokens in one forward (fit_seq_chunk; max-batch is 512 off a GPU)
STREAM_PROMPT = "The history of the old harbour town begins in the year"
STREAM_TOKENS = 20
WORDS = ["harbour", "lantern", "granite", "meadow", "copper", "river", "orchard", "signal", "timber", "voyage"]
LONG_PROMPT = "Inventory of the northern warehouse, shelf by shelf. " + " ".join(
    f"Shelf {i} holds {i * 7 % 31 + 2} crates of {WORDS[i % 10]} parts." for i in range(1, 48)) + " The last shelf holds"
LONG_TOKENS = 6


def stream(prompt, max_tokens, out, sent=None):
    """a streamed greedy completion: out gets its text, each content chunk's arrival time and the request's
    start; sent (an Event) is set once the request is on its way"""
    body = {"model": MODEL, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    out.update(text="", times=[], usage=None, finish=None)
    with http() as h:
        out["t0"] = time.monotonic()
        with h.stream("POST", "/v1/completions", json=body, headers=auth()) as r:
            if sent:
                sent.set()
            assert r.status_code == 200, r.read()
            buf = ""
            for chunk in r.iter_text():
                buf += chunk
                while "\n\n" in buf:
                    block, buf = buf.split("\n\n", 1)
                    if block.startswith(":") or block == "data: [DONE]":
                        continue  # a heartbeat while queued or in prefill; the end
                    c = json.loads(block[len("data: "):])
                    out["usage"] = c.get("usage") or out["usage"]
                    for ch in c["choices"]:
                        if ch.get("text"):
                            out["times"].append(time.monotonic())
                            out["text"] += ch["text"]
                        out["finish"] = ch.get("finish_reason") or out["finish"]
    return out


def chunks():
    return metrics()[("clgemma_prefill_chunks_total", frozenset())]


def pair(name):
    """the stream, and the long prompt sent once the stream has 3 tokens; the stream's gaps during the long
    prompt's entry (from its send to its first token), and the prefill chunks the long prompt went in: into
    results[name], reported"""
    s, lp, failed = {}, {}, []

    def run_stream():
        try:
            stream(STREAM_PROMPT, STREAM_TOKENS, s)
        except Exception as e:  # reported by the main thread
            failed.append(e)
    th = threading.Thread(target=run_stream)
    th.start()
    t_wait = time.monotonic()
    while len(s.get("times", [])) < 3 and th.is_alive() and time.monotonic() - t_wait < 120:
        time.sleep(0.02)
    assert len(s.get("times", [])) >= 3, f"the stream did not start: {s} {failed}"
    c0 = chunks()
    stream(LONG_PROMPT, LONG_TOKENS, lp)
    n_chunks = chunks() - c0
    th.join()
    assert not failed, failed
    assert s["finish"] == "length" and lp["finish"] == "length", (s["finish"], lp["finish"])
    start, first = lp["t0"], lp["times"][0]
    # every gap of the stream that overlaps the long prompt's entry
    t = s["times"]
    gaps = [b - a for a, b in zip(t, t[1:]) if b > start and a < first]
    assert len(t) > 3 and t[-1] > first, "the stream ended before the long prompt's first token"
    r = results[name] = {"stream": s["text"], "long": lp["text"], "n_long": lp["usage"]["prompt_tokens"],
                         "ttft": first - start, "max_gap": max(gaps), "median_gap": statistics.median(gaps),
                         "gaps": len(gaps), "chunks": n_chunks}
    print(f"  --step-tokens {BUDGET}: long prompt {r['n_long']} tokens, first token after {r['ttft']:.1f}s in {r['chunks']:.0f} "
          f"chunk(s); stream gaps meanwhile: {r['gaps']}, max {r['max_gap']:.2f}s, median {r['median_gap']:.2f}s "
          f"(max / ttft {r['max_gap'] / r['ttft']:.2f})")
    return r


def health_budget():
    with http() as h:
        return h.get("/health").json()["step_tokens"]


def bounded(r):
    """the stream keeps flowing: no gap near the long prompt's prefill, none far above the others"""
    return r["max_gap"] < r["ttft"] / 3 and r["max_gap"] <= 4 * r["median_gap"]


results = {}


@test
def step_budget_in_health():
    assert health_budget() == BUDGET, health_budget()


if PHASE == "small":
    @test
    def stream_alone():
        s = stream(STREAM_PROMPT, STREAM_TOKENS, {})
        assert s["finish"] == "length", s
        t = s["times"]
        results["stream_ref"] = s["text"]
        results["stream_alone_gap"] = statistics.median([b - a for a, b in zip(t, t[1:])])
        print(f"  stream alone: {len(t)} tokens, median gap {results['stream_alone_gap']:.2f}s")

    @test
    def streams_keep_flowing_while_a_long_prompt_enters():
        r = pair("small")
        assert r["n_long"] >= 550, f"the long prompt has {r['n_long']} tokens, want about 600"
        assert bounded(r), f"stream gap {r['max_gap']:.2f}s against first token {r['ttft']:.2f}s, median gap " \
                           f"{r['median_gap']:.2f}s"

    @test
    def the_long_prompt_went_in_chunks():
        r = results["small"]
        assert r["chunks"] >= r["n_long"] // BUDGET, f"{r['chunks']} chunks for {r['n_long']} tokens"

    @test
    def the_stream_answer_is_the_one_alone():
        assert results["small"]["stream"] == results["stream_ref"], (results["small"]["stream"], results["stream_ref"])
        with open(REF, "w") as f:
            json.dump(results, f)
else:
    with open(REF) as f:
        results.update(json.load(f))

    @test
    def long_alone():
        lp = stream(LONG_PROMPT, LONG_TOKENS, {})
        results["long_ref"] = lp["text"]
        print(f"  long prompt alone: first token after {lp['times'][0] - lp['t0']:.1f}s")

    @test
    def a_whole_prompt_step_stalls_the_stream():
        r = pair("large")
        assert r["chunks"] == -(-r["n_long"] // SEQ_CHUNK), f"{r['chunks']} chunks for {r['n_long']} tokens"
        assert not bounded(r), "the bound holds without chunking too: it tests nothing"
        small = results["small"]
        print(f"  chunking: largest stream gap {r['max_gap']:.2f}s -> {small['max_gap']:.2f}s, long prompt's first "
              f"token {r['ttft']:.1f}s -> {small['ttft']:.1f}s")

    @test
    def answers_are_the_ones_alone():
        for name in ("small", "large"):
            r = results[name]
            assert r["stream"] == results["stream_ref"], (name, r["stream"], results["stream_ref"])
            assert r["long"] == results["long_ref"], (name, r["long"], results["long_ref"])

if __name__ == "__main__":
    raise SystemExit(run_all())
