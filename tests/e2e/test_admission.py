"""KV-budget admission through nginx on the real 270M model (tests/suites/e2e_admission.sh): workers
whose KV cache is a context or two (at these contexts every layer is a full-attention one) beside 8
sequence slots, so the cache, not the slots, decides how many requests run. A request reserves the
blocks (32 tokens each) its prompt + max_tokens can take before it starts. Tiny generations: PoCL on
two shared cores decodes one or two tokens a second.

phase queue (--ctx 64 --kv-tokens 64: 2 blocks; --queue-timeout 120): 6 concurrent requests of 1
block each, 3x what fits: at most 2 run at once, the others wait in the queue, every one ends 200;
a request that could never fit the cache is a 400 naming max_tokens (or the prompt) with the largest
max_tokens that would fit, and that many is accepted; a request without max_tokens gets what fits.
No generation is ever a 5xx.
phase timeout (--ctx 32 --kv-tokens 32: 1 block; --queue-timeout 1): 6 concurrent requests, one
fits: those that wait past a second get 503 with Retry-After and code queue_timeout (streams too:
their head waits for the first token), never 500; afterwards the worker serves again."""
import re
import sys
import threading
import time

from e2e import ACCESS_LOG, MODEL, auth, error_of, http, run_all, test

PHASE = sys.argv[1]
PROMPT = "The sky is"  # 4 tokens with BOS: + 12 = 16 tokens, one block


def completion_body(**kw):
    return dict({"model": MODEL, "prompt": PROMPT, "temperature": 0, "max_tokens": 12}, **kw)


def health():
    with http() as h:
        return h.get("/health").json()


def burst(n, body, stream_every=3):
    """n concurrent completions (every stream_every-th streamed); returns [(status, headers, text)] and the
    largest active / queue_depth /health showed meanwhile"""
    out = [None] * n
    seen = {"active": 0, "queued": 0}
    done = threading.Event()

    def one(i):
        b = dict(body, stream=i % stream_every == stream_every - 1)
        try:
            with http() as h, h.stream("POST", "/v1/completions", headers=auth(), json=b) as r:
                text = "".join(r.iter_text())
                out[i] = (r.status_code, dict(r.headers), text, b["stream"])
        except Exception as e:  # reported by the caller's checks
            out[i] = (0, {}, repr(e), b["stream"])

    def watch():
        while not done.is_set():
            hl = health()
            seen["active"] = max(seen["active"], hl["active"])
            seen["queued"] = max(seen["queued"], hl["queue_depth"])
            time.sleep(0.2)

    w = threading.Thread(target=watch)
    w.start()
    ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    done.set()
    w.join()
    return out, seen


def no_5xx_but(allowed=()):
    """no generation answered 5xx (/health is 503 while the worker loads)"""
    codes = [int(m.group(1)) for m in re.finditer(r'"POST [^"]*" (\d{3}) ', open(ACCESS_LOG).read())]
    bad = [c for c in codes if c >= 500 and c not in allowed]
    assert not bad, f"5xx in the access log: {bad}"


if PHASE == "queue":
    @test
    def health_shows_the_fit():
        f = health()["fit"]
        assert f["context_length"] == 64 and f["plan"]["kv_tokens"] == 64 and f["plan"]["full_blocks"] == 2, f
        assert f["plan"]["max_seqs"] == 8 and f["plan"]["sequences"] == 8, f["plan"]
        # 18 layers, all full at this context: 1 KV head x 256 dims x K and V x 2 bytes
        assert f["kv_full"] == {"layers": 18, "bytes_per_token": 18432}, f["kv_full"]
        assert f["kv_sliding"]["layers"] == 0 and f["kv_shared"]["layers"] == 0, f
        assert "planned 8 sequences sharing 64 tokens" in f["summary"], f["summary"]

    @test
    def three_times_what_fits_all_complete():
        res, seen = burst(6, completion_body())
        for status, _, text, streamed in res:
            assert status == 200, f"status {status}: {text[:300]}"
            if streamed:
                ev = sse_events_text(text)
                assert ev[-1] == "[DONE]", ev[-3:]
        assert seen["active"] <= 2, f"{seen['active']} requests ran at once; 2 fit the cache"
        assert seen["queued"] >= 2, f"at most {seen['queued']} queued: the burst did not wait"
        no_5xx_but()

    @test
    def larger_than_the_cache_is_400():
        with http() as h:
            err = error_of(h.post("/v1/completions", headers=auth(), json=completion_body(n=2, max_tokens=40)), 400)
            assert err["param"] == "max_tokens" and err["code"] == "context_length_exceeded", err
            most = int(re.search(r"max_tokens can be at most (\d+)", err["message"]).group(1))
            assert "whole cache of 64 tokens" in err["message"], err["message"]  # in numbers
            # 2 choices of 4 + most tokens: one block each
            assert most == 28, err["message"]
            r = h.post("/v1/completions", headers=auth(), json=completion_body(n=2, max_tokens=most))
            assert r.status_code == 200, r.text[:300]
            error_of(h.post("/v1/completions", headers=auth(), json=completion_body(n=2, max_tokens=most + 1)), 400)
            # a prompt of a whole block and more: its choices' one token each cannot fit, the prompt is named
            err = error_of(h.post("/v1/completions", headers=auth(),
                                  json=completion_body(prompt="hello " * 38, n=2, max_tokens=1)), 400)
            assert err["param"] == "prompt", err
            # without max_tokens the choices get what fits
            body = completion_body(n=2)
            del body["max_tokens"]
            r = h.post("/v1/completions", headers=auth(), json=body)
            assert r.status_code == 200, r.text[:300]
            assert all(c["finish_reason"] in ("stop", "length") for c in r.json()["choices"]), r.json()
            assert r.json()["usage"]["completion_tokens"] <= 2 * most, r.json()["usage"]
        no_5xx_but()
else:
    @test
    def waiting_past_the_queue_timeout_is_503():
        res, _ = burst(6, completion_body(max_tokens=20), stream_every=2)
        statuses = [r[0] for r in res]
        assert statuses.count(200) >= 1 and statuses.count(503) >= 3, statuses
        assert set(statuses) <= {200, 503}, statuses
        for status, headers, text, streamed in res:
            if status != 503:
                continue
            assert headers.get("retry-after") == "1", headers
            assert '"queue_timeout"' in text and "waited 1 s" in text, text[:300]
        assert any(r[3] and r[0] == 503 for r in res), "no stream was among the 503s"
        no_5xx_but(allowed=(503,))

    @test
    def serves_again_after():
        with http() as h:
            r = h.post("/v1/completions", headers=auth(), json=completion_body(max_tokens=8))
            assert r.status_code == 200, r.text[:300]


def sse_events_text(text):
    """the data: payloads of a whole event-stream body (comments skipped)"""
    return [b[6:] for b in text.split("\n\n") if b.startswith("data: ")]


if __name__ == "__main__":
    raise SystemExit(run_all())
