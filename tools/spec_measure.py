#!/usr/bin/env python3
"""Speculative decoding's speed on copy-heavy prompts, through one clgemma-fcgi worker (issue 22's measurement).

    tools/spec_measure.py http://127.0.0.1:PORT [--conc 1,16] [--max-tokens 128] [--reps 3]

Greedy completions of three prompts whose answers copy their text (a code edit, a summary with quotes, a JSON
transform), each alone (--conc 1: one request at a time, every prompt --reps times) and N at once (the prompts
cycled, --reps rounds). One JSON line per concurrency: output tokens per second of wall time (median of the
rounds), and the drafts the worker verified and accepted meanwhile (its /metrics). Run it against a worker with
--spec off and one with --spec ngram (or mtp) on the same model; tools/gpu_spec.sh does both. Standard library only.
"""
import argparse
import json
import statistics
import threading
import time
import urllib.request

CODE = """Rename the variable `total` to `sum` in this Python code.

Before:
def average(values):
    total = 0
    count = 0
    for v in values:
        total += v
        count += 1
    if count == 0:
        return 0
    return total / count

After:
"""
SUMMARY = """Article: The city council met on Tuesday to discuss the new bridge. "We have waited ten years for this
bridge," said Mayor Ana Ruiz. "It will connect the north and south of the city." Engineer Tom Lee added: "The
bridge will be finished in 2027, if the weather allows." Residents were divided. "It is too expensive," said
shop owner Mia Chen, while teacher Paul Kim said: "My students will finally have a short way to school."

Summary with the exact quotes:
- Mayor Ana Ruiz: \""""
JSON = """Convert each record to JSON.

name: Alice, age: 31, city: Paris, job: engineer
{"name": "Alice", "age": 31, "city": "Paris", "job": "engineer"}
name: Bob, age: 27, city: Berlin, job: teacher
{"name": "Bob", "age": 27, "city": "Berlin", "job": "teacher"}
name: Carol, age: 45, city: Madrid, job: doctor
"""
PROMPTS = {"code_edit": CODE, "summary_quotes": SUMMARY, "json_transform": JSON}


def post(url, body):
    req = urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def spec_counts(url):
    got = {}
    with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
        for line in r.read().decode().splitlines():
            for k in ("steps", "draft_tokens", "accepted_tokens"):
                if line.startswith(f"clgemma_spec_{k}_total"):
                    got[k] = got.get(k, 0) + float(line.split()[-1])
    return got


def round_at(url, model, names, max_tokens):
    """names sent at once; (output tokens, seconds)"""
    out, errs = [0] * len(names), []

    def one(i):
        try:
            r = post(url, {"model": model, "prompt": PROMPTS[names[i]], "max_tokens": max_tokens, "temperature": 0})
            out[i] = r["usage"]["completion_tokens"]
        except Exception as e:  # reported below
            errs.append(f"{names[i]}: {e}")
    t0 = time.monotonic()
    ts = [threading.Thread(target=one, args=(i,)) for i in range(len(names))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errs:
        raise SystemExit(f"spec_measure: {errs[0]}")
    return sum(out), time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--conc", default="1,16")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    with urllib.request.urlopen(a.url + "/v1/models", timeout=30) as r:
        model = json.loads(r.read())["data"][0]["id"]
    names = list(PROMPTS)
    round_at(a.url, model, names[:1], 8)  # warm: kernels, caches
    for n in [int(x) for x in a.conc.split(",")]:
        before, rates, per_prompt = spec_counts(a.url), [], {}
        for _ in range(a.reps):
            if n == 1:  # each prompt alone
                toks = secs = 0
                for p in names:
                    t, s = round_at(a.url, model, [p], a.max_tokens)
                    per_prompt.setdefault(p, []).append(t / s)
                    toks, secs = toks + t, secs + s
            else:
                toks, secs = round_at(a.url, model, [names[i % len(names)] for i in range(n)], a.max_tokens)
            rates.append(toks / secs)
        after = spec_counts(a.url)
        d = {k: int(after.get(k, 0) - before.get(k, 0)) for k in ("steps", "draft_tokens", "accepted_tokens")}
        line = {"label": a.label, "conc": n, "tok_s": round(statistics.median(rates), 1),
                "tok_s_all": [round(x, 1) for x in rates], "max_tokens": a.max_tokens, **d}
        if per_prompt:
            line["per_prompt_tok_s"] = {p: round(statistics.median(v), 1) for p, v in per_prompt.items()}
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
