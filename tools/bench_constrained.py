#!/usr/bin/env python3
"""Throughput of constrained decoding against unconstrained, through one clgemma-fcgi worker speaking HTTP
(no nginx, stdlib only, so it runs on the GPU machine as it is).

  bench_constrained.py URL [runs]

For B = 1 and 16 concurrent chat requests of 128 tokens each (end-of-generation banned with logit_bias so
every request runs its full length), greedy and sampled at temperature 0.8 with fixed seeds, two modes:
plain text and response_format json_schema (an array of 64 short strings: the constraint stays active for
all 128 tokens). Prints one JSON line per (temperature, B, mode): the median over runs of completion
tokens per second of wall time (all requests together), and the ratio to plain."""
import http.client
import json
import statistics
import sys
import threading
import time
from urllib.parse import urlparse

URL = sys.argv[1]
RUNS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
u = urlparse(URL)
_c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
_c.request("GET", "/v1/models")
MODEL = json.loads(_c.getresponse().read())["data"][0]["id"]
SCHEMA = {"type": "object", "properties": {"items": {"type": "array", "items": {"type": "string", "maxLength": 12},
                                                     "minItems": 64, "maxItems": 64}},
          "required": ["items"], "additionalProperties": False}
MODES = {
    "plain": {},
    "json_schema": {"response_format": {"type": "json_schema", "json_schema": {"name": "l", "strict": True, "schema": SCHEMA}}},
}
EOG = {"1": -100, "106": -100}  # <eos>, <end_of_turn> of Gemma 3


def one(extra, seed, out, i, temp=0.8):
    body = {"model": MODEL, "max_tokens": 128, "temperature": temp, "seed": seed, "logit_bias": EOG,
            "messages": [{"role": "user", "content": f"List things, number {seed}."}], **extra}
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = json.loads(r.read())
    assert r.status == 200, data
    out[i] = data["usage"]["completion_tokens"]


def batch(extra, b, run, temp):
    out = [0] * b
    ts = [threading.Thread(target=one, args=(extra, 1000 * run + i, out, i, temp)) for i in range(b)]
    t0 = time.monotonic()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return sum(out) / (time.monotonic() - t0)


one({}, 0, [0], 0)  # warm-up: kernels built, vocabulary trie made
base = {}
for temp in (0.0, 0.8):
    for b in (1, 16):
        for mode, extra in MODES.items():
            rates = [batch(extra, b, r, temp) for r in range(RUNS)]
            med = statistics.median(rates)
            if mode == "plain":
                base[b] = med
            print(json.dumps({"mode": mode, "temperature": temp, "B": b, "tok_s": round(med, 1),
                              "runs": [round(x, 1) for x in rates], "vs_plain": round(med / base[b], 3)}), flush=True)
