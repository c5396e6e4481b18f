"""Speculative decoding in the worker's scheduler end to end through nginx to one clgemma-fcgi worker: prompt
lookup on the real 270M base model (tests/suites/e2e_spec.sh), or SPEC_MODE=mtp the tiny Gemma 4 fixture with its
MTP drafter (tests/suites/e2e_spec_mtp.sh: --spec mtp --draft FILE; the 270M's own texts, such as the stop strings
its answers reach, are not asserted there). Two phases:

SPEC_PHASE=plain, a worker without --spec: greedy completions of copy-heavy prompts (a code edit, a repeated list,
a JSON transform), streamed and not, with stop strings that cut the text, max_tokens 19, n=2, three at once, and
a logprobs request; every answer's text, finish and usage go to E2E_REF; /metrics counts no drafts.
SPEC_PHASE=spec, a worker with --spec ngram --draft-max 8: the same requests give the same texts, finishes and
usage; /metrics shows drafts proposed and accepted; the logprobs request feeds no draft. A sampled request
(temperature 0.7, seeded) drafts too, verified by rejection sampling: its text is its own (not the plain
worker's for the seed), streamed one chunk a token as many as usage counts, and the same seed gives it again."""
import json
import os
import threading
import time

from e2e import MODEL, auth, http, metrics, run_all, sse_events, test

PHASE = os.environ["SPEC_PHASE"]
MODE = os.environ.get("SPEC_MODE", "ngram")
REF = os.environ["E2E_REF"]

CODE = """Rename the variable `total` to `sum` in this Python code.

Before:
def average(values):
    total = 0
    for v in values:
        total += v
    return total / len(values)

After:
"""
LIST = ("Shopping list: apples, bread, milk, eggs, butter, cheese, rice.\n"
        "Shopping list again: apples, bread,")
JSON = """Convert each record to JSON.

name: Alice, age: 31, city: Paris
{"name": "Alice", "age": 31, "city": "Paris"}
name: Bob, age: 27, city: Berlin
{"name": "Bob", "age": 27, "city": "Berlin"}
name: Carol, age: 45, city: Madrid
"""

# name -> (request body beyond model and prompt, prompt); greedy unless it says otherwise
CASES = {
    "code": (CODE, {"max_tokens": 32}),
    "json_stream": (JSON, {"max_tokens": 24, "stream": True}),
    "list_stop_stream": (LIST, {"max_tokens": 48, "stop": ["cheese"], "stream": True}),
    "list_stop_two": (LIST, {"max_tokens": 48, "stop": ["zebra", "rice.\nShopping"]}),
    "list_max19_stream": (LIST, {"max_tokens": 19, "stream": True}),
    "code_n2": (CODE, {"max_tokens": 16, "n": 2}),
}
STOPPED = {"list_stop_stream", "list_stop_two"}  # their stop strings cut the answer
PLAIN_ONLY = {  # requests that may not draft
    "logprobs": (LIST, {"max_tokens": 16, "logprobs": 2}),
}
SAMPLED = {"sampled": (CODE, {"max_tokens": 24, "temperature": 0.7, "seed": 11})}  # drafts, its own draws
TOGETHER = ["code", "json_stream", "list_max19_stream"]  # sent at once: drafts of several sequences in a step


def complete(prompt, extra):
    """(texts per choice, finishes per choice, usage, logprobs of choice 0 or None) of one completion"""
    body = dict({"model": MODEL, "prompt": prompt, "temperature": 0}, **extra)
    n = body.get("n", 1)
    with http() as h:
        if not body.get("stream"):
            r = h.post("/v1/completions", json=body, headers=auth())
            assert r.status_code == 200, r.text[:300]
            out = r.json()
            ch = sorted(out["choices"], key=lambda c: c["index"])
            return [c["text"] for c in ch], [c["finish_reason"] for c in ch], out["usage"], ch[0].get("logprobs")
        body["stream_options"] = {"include_usage": True}
        with h.stream("POST", "/v1/completions", json=body, headers=auth()) as r:
            assert r.status_code == 200, r.read()
            events = sse_events(r)
    assert events[-1] == "[DONE]", events[-1]
    texts, finishes, usage = [""] * n, [None] * n, None
    for e in events[:-1]:
        c = json.loads(e)
        usage = c.get("usage") or usage
        for ch in c["choices"]:
            texts[ch["index"]] += ch["text"]
            finishes[ch["index"]] = ch.get("finish_reason") or finishes[ch["index"]]
    return texts, finishes, usage, None


def answer(name, cases=CASES):
    texts, finishes, usage, lp = complete(*cases[name])
    usage = {k: usage[k] for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
    return {"texts": texts, "finishes": finishes, "usage": usage,
            "tokens": lp and lp["tokens"], "lps": lp and lp["token_logprobs"]}


def spec_counts():
    m = metrics()
    return tuple(int(m[(f"clgemma_spec_{k}_total", frozenset())]) for k in ("steps", "draft_tokens", "accepted_tokens"))


def together():
    """TOGETHER's answers, the requests sent at once"""
    got, errs = {}, []

    def one(name):
        try:
            got[name] = answer(name)
        except Exception as e:  # reported by the test
            errs.append(f"{name}: {e}")
    ts = [threading.Thread(target=one, args=(n,)) for n in TOGETHER]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errs, errs
    return got


if PHASE == "plain":
    @test
    def plain_worker_answers():
        ref, took = {}, {}
        for name in CASES:
            t0 = time.monotonic()
            ref[name] = answer(name)
            took[name] = time.monotonic() - t0
        for name in STOPPED if MODE == "ngram" else ():  # cut by a stop string (the 270M goes on past its end)
            assert ref[name]["finishes"] == ["stop"] and ref[name]["usage"]["completion_tokens"] < 30, (name, ref[name])
        assert ref["list_max19_stream"]["usage"]["completion_tokens"] == 19 and \
            ref["list_max19_stream"]["finishes"] == ["length"]
        ref.update({name: answer(name, PLAIN_ONLY) for name in PLAIN_ONLY})
        ref["sampled"] = answer("sampled", SAMPLED)
        t0 = time.monotonic()
        ref["together"] = together()
        took["together"] = time.monotonic() - t0
        for name, a in ref.items():
            if name != "together":
                print(f"  {name}: {a['usage']['completion_tokens']} tokens, {a['finishes']}: {a['texts'][0][:60]!r}")
        with open(REF, "w") as f:
            json.dump({"answers": ref, "seconds": took}, f)

    @test
    def plain_worker_drafts_nothing():
        assert spec_counts() == (0, 0, 0), spec_counts()
        with http() as h:
            # no --spec: auto, which the CPU engine (no int8 decode products) resolves to off
            assert h.get("/health").json()["spec"] == {"mode": "off", "configured": "auto", "draft_max": 8}
else:
    with open(REF) as f:
        REFS, SECONDS = (lambda d: (d["answers"], d["seconds"]))(json.load(f))

    @test
    def answers_and_usage_equal_the_plain_workers():
        bad = []
        for name in CASES:
            before, t0 = spec_counts(), time.monotonic()
            a = answer(name)
            took, after = time.monotonic() - t0, spec_counts()
            print(f"  {name}: {after[2] - before[2]} of {after[1] - before[1]} drafted tokens accepted in "
                  f"{after[0] - before[0]} verifications; {a['usage']['completion_tokens']} tokens in {took:.1f}s "
                  f"(plain worker {SECONDS[name]:.1f}s)")
            if a != REFS[name]:
                bad.append(f"{name}: {a} != {REFS[name]}")
        assert not bad, bad

    @test
    def requests_at_once_equal_the_plain_workers():
        t0 = time.monotonic()
        got = together()
        print(f"  three at once: {time.monotonic() - t0:.1f}s (plain worker {SECONDS['together']:.1f}s)")
        assert got == REFS["together"], (got, REFS["together"])

    @test
    def sampled_request_drafts_validly_and_repeats():
        prompt, extra = SAMPLED["sampled"]
        before = spec_counts()
        body = dict({"model": MODEL, "prompt": prompt, "stream": True, "stream_options": {"include_usage": True}},
                    **extra)
        with http() as h, h.stream("POST", "/v1/completions", json=body, headers=auth()) as r:
            assert r.status_code == 200, r.read()
            events = sse_events(r)
        assert events[-1] == "[DONE]", events[-1]
        chunks = [json.loads(e) for e in events[:-1]]
        pieces = [c["choices"][0]["text"] for c in chunks if c["choices"] and c["choices"][0]["text"]]
        finish = [c["choices"][0]["finish_reason"] for c in chunks
                  if c["choices"] and c["choices"][0].get("finish_reason")]
        usage = chunks[-1]["usage"]
        after = spec_counts()
        text = "".join(pieces)
        print(f"  sampled: {after[2] - before[2]} of {after[1] - before[1]} drafted tokens accepted in "
              f"{after[0] - before[0]} verifications; {usage['completion_tokens']} tokens {text[:60]!r} (plain worker: "
              f"{REFS['sampled']['texts'][0][:60]!r})")
        assert after[1] > before[1], "the sampled request drafted nothing"
        assert finish == ["stop"] or finish == ["length"] and usage["completion_tokens"] == 24, (finish, usage)
        assert len(pieces) == usage["completion_tokens"] or not text.isascii(), (len(pieces), usage)  # a chunk a token
        again = answer("sampled", SAMPLED)
        assert again["texts"] == [text] and again["usage"]["completion_tokens"] == usage["completion_tokens"], \
            (again, text)

    @test
    def logprobs_request_decodes_plainly():
        for name in PLAIN_ONLY:
            before = spec_counts()
            a = answer(name, PLAIN_ONLY)
            assert spec_counts() == before, f"{name} drafted: {before} -> {spec_counts()}"
            want = REFS[name]
            assert (a["texts"], a["finishes"], a["usage"], a["tokens"]) == \
                   (want["texts"], want["finishes"], want["usage"], want["tokens"]), (name, a, want)
            if want["lps"]:
                assert all(abs(x - y) < 1e-4 for x, y in zip(a["lps"], want["lps"])), (a["lps"], want["lps"])

    @test
    def metrics_count_drafts():
        steps, drafted, accepted = spec_counts()
        print(f"  /metrics: {accepted} of {drafted} drafted tokens accepted ({accepted / max(drafted, 1):.0%}) in "
              f"{steps} verifications")
        assert steps > 0 and drafted > 0 and 0 < accepted <= drafted, (steps, drafted, accepted)
        with http() as h:
            sp = h.get("/health").json()["spec"]
            drafter = sp.pop("drafter", None)
            assert sp == {"mode": MODE, "configured": MODE, "draft_max": 8}, sp
            assert (drafter is not None) == (MODE == "mtp"), drafter
            assert drafter is None or drafter["arch"] == "gemma4-assistant" and drafter["weight_bytes"] > 0, drafter

if __name__ == "__main__":
    raise SystemExit(run_all())
