#!/usr/bin/env python3
"""loadgen.py — replays one fixed request trace against an OpenAI-compatible server (clgemma through nginx,
llama-server, vLLM) at arrival rates ramped until saturation, and reports per rate: output throughput,
TTFT and inter-token latency percentiles, rejected requests (a stream cut before [DONE] counts as one) and
prefix-cache hits. "sat tok/s" is the throughput while every request is admitted (until the last first token),
without the drain of the longest answers that ends a finite trace; "steady" is the same less its first quarter
(the ramp: the first batch's prefill), the capacity figure for scaling.

The trace (issue 20's): N requests (200), prompt lengths 50..4,000 tokens with a long tail (log-normal,
median ~350), outputs 20..500 tokens (log-normal, median ~100), 30% of them opening with one shared
1,000-token system prompt. Prompts are words of a fixed list (about one token each on Gemma's
vocabularies; the report gives the tokens the server counted). Requests are streamed completions
(/v1/completions, greedy, ignore_eos so every answer runs its length, stream_options.include_usage), so
both servers do the same work on the same file; a request arrives every 1/rate seconds ("inf": all at once),
or, with --concurrency N, when fewer than N are in flight (a closed loop: the capacity of a server whose
connections are bounded, as a worker's request threads are).

  tools/loadgen.py --url http://127.0.0.1:8080 --model NAME --rates 2,4,8,16,inf [--requests 200]
                   [--api-key KEY] [--cacert CERT] [--label clgemma] [--json out.json] [--scale 0.05]
                   [--procs 8] [--concurrency 512]

Hits: usage.prompt_tokens_details.cached_tokens where the server reports it (clgemma, vLLM, recent
llama-server), else llama-server's timings.cache_n; "-" when neither comes back.
"""
import argparse
import asyncio
import json
import math
import multiprocessing
import random
import ssl
import statistics
import sys
import time

import httpx

WORDS = ("time person year way day thing man world life hand part child eye woman place work week case point "
         "government company number group problem fact river mountain city village garden window table letter "
         "story music paper money water light night morning evening summer winter market road bridge station "
         "forest field ocean island street house school family friend teacher doctor student history science "
         "language picture kitchen animal weather journey question answer reason moment memory season voice").split()


def words(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def trace(n, seed, scale=1.0):
    """[(prompt text, max_tokens, shares the system prompt)] — the same for every server and rate
    (scale < 1 shrinks every length, for a quick run on a CPU)"""
    rng = random.Random(seed)
    system = "You are a careful assistant. " + words(random.Random(seed + 1), int(994 * scale))
    out = []
    for _ in range(n):
        p = int(min(4000, max(50, rng.lognormvariate(math.log(350), 1.0))))
        o = int(min(500, max(20, rng.lognormvariate(math.log(100), 0.8))))
        shared = rng.random() < 0.3
        p, o = max(8, int(p * scale)), max(4, int(o * scale))
        if shared:
            text = system + "\n\n" + words(rng, max(10, p - int(1000 * scale)))
        else:
            text = words(rng, p)
        out.append((text, o, shared))
    return out


def pct(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = (len(xs) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


async def one(client, args, prompt, max_tokens, t_sched, res, slots):
    body = {"model": args.model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}}
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    now = time.monotonic()
    if t_sched > now:
        await asyncio.sleep(t_sched - now)
    async with slots:
        await send(client, args, body, headers, res)


async def send(client, args, body, headers, res):
    t0 = time.monotonic()
    r = {"start": t0, "status": 0, "ttft": None, "gaps": [], "times": [], "out": 0, "prompt": 0, "cached": None,
         "end": None, "done": False}
    try:
        async with client.stream("POST", args.url.rstrip("/") + "/v1/completions", json=body, headers=headers) as resp:
            r["status"] = resp.status_code
            if resp.status_code != 200:
                await resp.aread()
                r["end"] = time.monotonic()
                res.append(r)
                return
            last = None
            buf = ""
            async for chunk in resp.aiter_text():
                buf += chunk
                while "\n\n" in buf:
                    ev, buf = buf.split("\n\n", 1)
                    for line in ev.splitlines():
                        if not line.startswith("data:"):
                            continue
                        data = line[5:].strip()
                        if data == "[DONE]":
                            r["done"] = True
                            continue
                        d = json.loads(data)
                        if "error" in d:
                            r["status"] = -1
                            continue
                        if d.get("choices") and d["choices"][0].get("text"):
                            t = time.monotonic()
                            if last is None:
                                r["ttft"] = t - t0
                            else:
                                r["gaps"].append(t - last)
                            last = t
                            r["times"].append(t)
                        u = d.get("usage")
                        if u:
                            r["out"] = u.get("completion_tokens", 0)
                            r["prompt"] = u.get("prompt_tokens", 0)
                            det = u.get("prompt_tokens_details") or {}
                            if det.get("cached_tokens") is not None:
                                r["cached"] = det["cached_tokens"]
                        tm = d.get("timings")
                        if tm and r["cached"] is None and tm.get("cache_n") is not None:
                            r["cached"] = tm["cache_n"]
        if r["status"] == 200 and not r["done"]:  # a cut stream is a failure, whatever its status line said
            r["status"] = -1
            r["error"] = "stream ended before [DONE]"
    except (httpx.HTTPError, json.JSONDecodeError) as e:
        r["status"] = -1
        r["error"] = repr(e)
    r["end"] = time.monotonic()
    res.append(r)


async def run_part(args, reqs, rate, t0, part, procs):
    """requests part, part + procs, ... of the trace, each at its place in the one schedule from t0"""
    res = []
    # --concurrency: requests in flight at most (closed loop), shared evenly by the client processes
    slots = asyncio.Semaphore(-(-args.concurrency // procs) if args.concurrency > 0 else len(reqs) + 1)
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    verify = ssl.create_default_context(cafile=args.cacert) if args.cacert else True
    async with httpx.AsyncClient(timeout=httpx.Timeout(args.timeout), limits=limits, verify=verify) as client:
        dt = 0 if rate == math.inf else 1.0 / rate
        await asyncio.gather(*(one(client, args, p, o, t0 + i * dt, res, slots)
                               for i, (p, o, _) in enumerate(reqs) if i % procs == part))
    return res


def part_main(a):
    return asyncio.run(run_part(*a))


def run_rate(args, reqs, rate):
    # CLOCK_MONOTONIC is one clock for every process of the host, so the parts share t0
    t0 = time.monotonic() + 0.1 + 0.5 * (args.procs > 1)
    if args.procs == 1:
        res = part_main((args, reqs, rate, t0, 0, 1))
    else:
        with multiprocessing.get_context("fork").Pool(args.procs) as pool:
            res = [r for part in pool.map(part_main, [(args, reqs, rate, t0, k, args.procs)
                                                       for k in range(args.procs)]) for r in part]
    ok = [r for r in res if r["status"] == 200]
    span = max(r["end"] for r in res) - min(r["start"] for r in res)
    out = sum(r["out"] for r in ok)
    gaps = [g for r in ok for g in r["gaps"]]
    ttft = [r["ttft"] for r in ok if r["ttft"] is not None]
    prompt = sum(r["prompt"] for r in ok)
    cached = [r["cached"] for r in ok if r["cached"] is not None]
    # saturated throughput: tokens streamed until the last request's first token (every request admitted,
    # the servers full), over that time; the drain after it is one long request's tail, not capacity
    t_start = min(r["start"] for r in res)
    firsts = [r["times"][0] for r in ok if r["times"]]
    sat = steady = 0.0
    if firsts and max(firsts) > t_start:
        t_full = max(firsts)
        toks = sum(r["out"] / len(r["times"]) * sum(1 for t in r["times"] if t <= t_full) for r in ok if r["times"])
        sat = toks / (t_full - t_start)
        # steady: the same window less its first quarter, the ramp where the first batch is still in prefill
        t_a = t_start + 0.25 * (t_full - t_start)
        toks = sum(r["out"] / len(r["times"]) * sum(1 for t in r["times"] if t_a < t <= t_full)
                   for r in ok if r["times"])
        steady = toks / (t_full - t_a)
    return {"rate": "inf" if rate == math.inf else rate, "requests": len(res), "ok": len(ok),
            "rejected": len(res) - len(ok), "span_s": span, "output_tokens": out, "prompt_tokens": prompt,
            "throughput": out / span if span > 0 else 0.0, "sat_throughput": sat,
            "steady_throughput": steady,
            "ttft_p50": pct(ttft, 0.5), "ttft_p99": pct(ttft, 0.99),
            "itl_p50": pct(gaps, 0.5), "itl_p99": pct(gaps, 0.99),
            "hit_rate": sum(cached) / prompt if cached and prompt else None,
            "errors": sorted({r.get("error", str(r["status"])) for r in res if r["status"] != 200})[:5]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--api-key", default="")
    ap.add_argument("--cacert", default="", help="the CA certificate that signed an https server's (make serve's)")
    ap.add_argument("--rates", default="1,2,4,8,inf", help="requests per second, comma-separated; inf: all at once")
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--seed", type=int, default=20)
    ap.add_argument("--scale", type=float, default=1.0, help="every length times this (a quick run on a CPU)")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--procs", type=int, default=1,
                    help="client processes sharing the trace (one Python process parses ~5k SSE events/s)")
    ap.add_argument("--concurrency", type=int, default=0,
                    help="requests in flight at most; the next waits for one to end (0: no limit)")
    ap.add_argument("--label", default="")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    reqs = trace(args.requests, args.seed, args.scale)
    rows = []
    print(f"{args.label or args.url}: {len(reqs)} requests, "
          f"{sum(s for _, _, s in reqs)} opening with the shared system prompt", flush=True)
    print("rate   ok  rej  out tok/s  sat tok/s  steady  TTFT p50   p99     ITL p50  p99      hit", flush=True)
    for rs in args.rates.split(","):
        rate = math.inf if rs.strip() == "inf" else float(rs)
        row = run_rate(args, reqs, rate)
        row["label"] = args.label
        rows.append(row)
        hit = "-" if row["hit_rate"] is None else f"{row['hit_rate']:.2f}"
        print(f"{rs:>5} {row['ok']:4d} {row['rejected']:4d} {row['throughput']:10.1f} {row['sat_throughput']:10.1f} {row['steady_throughput']:7.0f} "
              f"{row['ttft_p50']:8.3f} {row['ttft_p99']:8.3f}  {row['itl_p50'] * 1e3:7.1f} {row['itl_p99'] * 1e3:8.1f} ms "
              f"{hit}", flush=True)
        if row["errors"]:
            print("      errors: " + "; ".join(row["errors"]), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
