"""Time to first token and decode speed through nginx (TLS) for streamed chat completions.
Needs a running stack (E2E_* variables as tests/e2e/lib.sh exports them, or make serve's:
E2E_URL, E2E_KEY, E2E_CERT, E2E_MODEL_ID). Usage: bench_stream.py [runs] [max_tokens]"""
import json
import statistics
import sys
import time

import httpx

from e2e import CERT, KEY, MODEL, URL

runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
max_tokens = int(sys.argv[2]) if len(sys.argv) > 2 else 64
ttft, rate = [], []
with httpx.Client(base_url=URL, verify=CERT, timeout=300) as h:
    for i in range(runs):
        body = {"model": MODEL, "stream": True, "max_tokens": max_tokens, "temperature": 0,
                "stream_options": {"include_usage": True},
                "messages": [{"role": "user", "content": f"Tell me about the history of bridges, part {i}."}]}
        t0 = time.monotonic()
        first = None
        usage = None
        with h.stream("POST", "/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {KEY}"}) as r:
            for line in r.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                o = json.loads(line[6:])
                if o["choices"] and o["choices"][0]["delta"].get("content") and first is None:
                    first = time.monotonic()
                if o.get("usage"):
                    usage = o["usage"]
        t1 = time.monotonic()
        n = usage["completion_tokens"]
        ttft.append(first - t0)
        if n > 1:
            rate.append((n - 1) / (t1 - first))
        print(f"run {i}: prompt {usage['prompt_tokens']} tok, ttft {first - t0:.3f}s, "
              f"{n} tokens, {(n - 1) / (t1 - first):.1f} tok/s after the first", flush=True)
print(f"median ttft {statistics.median(ttft):.3f}s, median decode {statistics.median(rate):.1f} tok/s "
      f"({runs} runs, max_tokens {max_tokens})")
