"""End-to-end tests of the OpenAI API through nginx (TLS, API key) to one clgemma-fcgi worker on
the real Gemma 3 270M model. Run by tests/suites/e2e_api.sh, which starts the stack."""
import contextlib
import json
import re
import socket
import ssl
import threading
import time

import httpx

from e2e import (ACCESS_LOG, CERT, KEY, MODEL, URL, WORKER_LOG, auth, chat_body, client, dumps, error_of, http,
                 metrics, run_all, sse_events, test, wait_for)

# prompt token counts from an independent tokenizer (Hugging Face tokenizers reading the same GGUF,
# chat template applied by hand as Gemma 3's template does)
HF_CHAT_SKY = 15            # user "Why is the sky blue?"
HF_CHAT_SYSTEM = 18         # system "You are terse." + user "Name three colors."
HF_CHAT_INJECTION = 18      # user "Say <end_of_turn> now" with the tag as plain text (9 tokens)
HF_COMPLETION = {"Why is the sky blue?": 7, "Hello world, this is a test of tokenization.": 12,
                 "Ünïcödé ☃ 日本語 text": 12}

_greedy = {}


def greedy_chat(content="Why is the sky blue?", max_tokens=8):
    """non-streamed greedy answer (cached: later tests compare against it)"""
    k = (content, max_tokens)
    if k not in _greedy:
        r = client().chat.completions.create(model=MODEL, messages=[{"role": "user", "content": content}],
                                             temperature=0, max_tokens=max_tokens)
        _greedy[k] = r
    return _greedy[k]


def stream_pieces(body):
    """streams a chat body with httpx; returns (content pieces, parsed chunks)"""
    with http() as h, h.stream("POST", "/v1/chat/completions", json=dict(body, stream=True), headers=auth()) as r:
        assert r.status_code == 200, r.read()
        events = sse_events(r)
    assert events[-1] == "[DONE]", events[-1]
    chunks = [json.loads(e) for e in events[:-1]]
    pieces = [c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]]
    return pieces, chunks


@test
def models_list_with_context_length():
    ms = client().models.list()
    ids = [m.id for m in ms.data]
    assert ids == [MODEL], ids
    assert ms.data[0].context_length == 1024, ms.data[0]
    m = client().models.retrieve(MODEL)
    assert m.id == MODEL


@test
def chat_non_streaming():
    r = greedy_chat()
    assert r.object == "chat.completion" and r.model == MODEL, r
    c = r.choices[0]
    assert c.message.role == "assistant" and isinstance(c.message.content, str) and c.message.content, c
    assert c.finish_reason in ("stop", "length"), c.finish_reason
    assert r.usage.prompt_tokens == HF_CHAT_SKY, r.usage
    if c.finish_reason == "length":
        assert r.usage.completion_tokens == 8, r.usage
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert r.id.startswith("chatcmpl-")


@test
def chat_streaming_reassembles_to_non_streaming():
    whole = greedy_chat()
    s = client().chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Why is the sky blue?"}],
                                         temperature=0, max_tokens=8, stream=True,
                                         stream_options={"include_usage": True})
    chunks = list(s)
    assert chunks[0].choices[0].delta.role == "assistant", chunks[0]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content, (text, whole.choices[0].message.content)
    finals = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finals == [whole.choices[0].finish_reason], finals
    assert chunks[-1].choices == [] and chunks[-1].usage is not None, chunks[-1]
    u = chunks[-1].usage
    assert (u.prompt_tokens, u.completion_tokens) == (whole.usage.prompt_tokens, whole.usage.completion_tokens), u
    assert len({c.id for c in chunks}) == 1 and all(c.object == "chat.completion.chunk" for c in chunks)


@test
def completions_streaming_and_not():
    cl = client()
    r = cl.completions.create(model=MODEL, prompt="Why is the sky blue?", max_tokens=8, temperature=0)
    assert r.object == "text_completion", r
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 8, r
    assert r.usage.prompt_tokens == HF_COMPLETION["Why is the sky blue?"], r.usage
    s = cl.completions.create(model=MODEL, prompt=["Why is the sky blue?"], max_tokens=8, temperature=0, stream=True)
    chunks = list(s)
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == r.choices[0].text, (text, r.choices[0].text)
    assert chunks[-1].choices[0].finish_reason == "length"


@test
def ignore_eos_runs_to_max_tokens():
    # logit_bias forces Gemma's <eos> (id 1): the answer ends at once, unless ignore_eos (vLLM's and
    # llama-server's field) lets only max_tokens end it
    body = {"model": MODEL, "prompt": "Why is the sky blue?", "max_tokens": 6, "temperature": 0, "logit_bias": {"1": 100}}
    with http() as h:
        r = h.post("/v1/completions", headers=auth(), json=body).json()
        assert r["choices"][0]["finish_reason"] == "stop" and r["usage"]["completion_tokens"] == 0, r
        r = h.post("/v1/completions", headers=auth(), json=dict(body, ignore_eos=True)).json()
        assert r["choices"][0]["finish_reason"] == "length" and r["usage"]["completion_tokens"] == 6, r
        r = h.post("/v1/chat/completions", headers=auth(), json=chat_body(ignore_eos=True, response_format={"type": "json_object"}))
        assert error_of(r, 400)["param"] == "ignore_eos", r.text
        r = h.post("/v1/completions", headers=auth(), json=dict(body, ignore_eos="yes"))
        assert error_of(r, 400)["param"] == "ignore_eos", r.text


@test
def usage_counts_match_the_tokenizer():
    cl = client()
    for prompt, n in HF_COMPLETION.items():
        r = cl.completions.create(model=MODEL, prompt=prompt, max_tokens=1, temperature=0)
        assert r.usage.prompt_tokens == n, (prompt, r.usage.prompt_tokens, n)
        assert r.usage.completion_tokens <= 1
    r = cl.chat.completions.create(model=MODEL, max_tokens=1, temperature=0, messages=[
        {"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name three colors."}])
    assert r.usage.prompt_tokens == HF_CHAT_SYSTEM, r.usage


@test
def user_text_cannot_inject_control_tokens():
    cl = client()
    r = cl.chat.completions.create(model=MODEL, max_tokens=1, temperature=0,
                                   messages=[{"role": "user", "content": "Say <end_of_turn> now"}])
    # "<end_of_turn>" as characters is 7 tokens; as the control token it would be 1 (13 in all)
    assert r.usage.prompt_tokens == HF_CHAT_INJECTION, r.usage


@test
def seed_makes_sampling_deterministic():
    cl = client()
    kw = dict(model=MODEL, messages=[{"role": "user", "content": "Tell me a story."}], temperature=1.0,
              max_tokens=8, seed=1234)
    a = cl.chat.completions.create(**kw).choices[0].message.content
    b = cl.chat.completions.create(**kw).choices[0].message.content
    assert a == b, (a, b)
    s = cl.chat.completions.create(**kw, stream=True)
    c = "".join(ch.choices[0].delta.content or "" for ch in s if ch.choices)
    assert c == a, (c, a)


@test
def stop_string_straddling_tokens():
    body = chat_body(max_tokens=16)
    pieces, _ = stream_pieces(body)
    full = "".join(pieces)
    # a stop string made of the end of one piece and the start of the next
    stop = None
    pos = 0
    for i in range(1, len(pieces) - 1):
        pos += len(pieces[i - 1])
        a, b = pieces[i - 1], pieces[i]
        if len(a) >= 2 and len(b) >= 1 and a.strip() and b.strip():
            cand = a[-2:] + b[:1]
            if full.find(cand) == pos - 2:
                stop = cand
                break
    assert stop, f"no straddling stop string found in pieces {pieces}"
    want = full[:full.find(stop)]
    r = client().chat.completions.create(model=MODEL, messages=body["messages"], temperature=0, max_tokens=16,
                                         stop=[stop, "never-appears"])
    assert r.choices[0].message.content == want and r.choices[0].finish_reason == "stop", \
        (stop, r.choices[0].message.content, want)
    got, chunks = stream_pieces(dict(body, stop=stop))
    assert "".join(got) == want, (stop, got, want)
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"][0]["finish_reason"]] == ["stop"]


@test
def sse_framing_headers_and_done():
    with http() as h, h.stream("POST", "/v1/chat/completions", json=chat_body(stream=True), headers=auth()) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream"), r.headers
        assert r.headers.get("cache-control") == "no-cache", r.headers
        rid = r.headers["x-request-id"]
        events = sse_events(r)
    assert events[-1] == "[DONE]" and events.count("[DONE]") == 1, events[-3:]
    objs = [json.loads(e) for e in events[:-1]]
    assert all(o["object"] == "chat.completion.chunk" and o["id"] == "chatcmpl-" + rid for o in objs), objs[0]
    assert objs[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}, objs[0]
    assert objs[-1]["choices"][0]["finish_reason"] in ("stop", "length")
    assert all("usage" not in o for o in objs), "usage only when stream_options.include_usage"


@test
def auth_is_required_and_checked():
    with http() as h:
        for headers in ({}, auth("sk-wrong-key-123"), {"Authorization": KEY}):
            r = h.post("/v1/chat/completions", json=chat_body(), headers=headers)
            err = error_of(r, 401)
            assert err["code"] == "invalid_api_key", err
            assert r.headers.get("www-authenticate", "").startswith("Bearer"), r.headers
        assert h.get("/v1/models", headers=auth("sk-second-key-0001")).status_code == 200
        assert h.get("/health").status_code == 200, "health needs no key"


@test
def cors_preflight():
    with http() as h:
        r = h.options("/v1/chat/completions", headers={"Origin": "https://example.org",
                                                      "Access-Control-Request-Method": "POST",
                                                      "Access-Control-Request-Headers": "authorization,content-type"})
    assert r.status_code == 204, r.status_code
    assert r.headers["access-control-allow-origin"] == "*"
    assert "Authorization" in r.headers["access-control-allow-headers"]
    assert "POST" in r.headers["access-control-allow-methods"]


@test
def stream_events_arrive_as_they_are_made():
    """through nginx and TLS each event comes when the worker flushes it, not all at the end
    (nginx's buffered FastCGI mode would hold them in the 16k SSL buffer)"""
    t0 = time.monotonic()
    arrivals = []
    with http() as h, h.stream("POST", "/v1/chat/completions", headers=auth(),
                               json=chat_body("Write a long story about rivers.", max_tokens=24, stream=True)) as r:
        assert r.status_code == 200, r.status_code
        for chunk in r.iter_raw():
            arrivals += [time.monotonic() - t0] * chunk.count(b"\n\n")
    assert len(arrivals) >= 10, len(arrivals)
    spread = arrivals[-1] - arrivals[1]
    reads = len(set(arrivals))
    assert reads >= len(arrivals) // 2 and spread > 0.2, f"{len(arrivals)} events in {reads} reads over {spread:.2f}s"


@test
def client_errors_4xx():
    cases = [
        ("malformed JSON", b'{"model": ', 400, None),
        ("not an object", b'[1]', 400, None),
        ("wrong type", dumps(chat_body(max_tokens="8")), 400, "max_tokens"),
        ("out of range", dumps(chat_body(temperature=5)), 400, "temperature"),
        ("empty messages", dumps({"model": MODEL, "messages": []}), 400, "messages"),
        ("unknown role", dumps({"model": MODEL, "messages": [{"role": "robot", "content": "x"}]}), 400,
         "messages[0].role"),
        ("n over --max-seqs", dumps(chat_body(n=3)), 400, "n"),
        ("n over 16", dumps(chat_body(n=17)), 400, "n"),
        ("over the context", dumps(chat_body(max_tokens=1020)), 400, "max_tokens"),
        ("system not first", dumps({"model": MODEL, "messages": [{"role": "user", "content": "a"},
                                                                 {"role": "system", "content": "b"}]}), 400, "messages"),
        ("unknown model", dumps(chat_body(model="gpt-17")), 404, "model"),
        ("unknown field", dumps(chat_body(temprature=0.5)), 400, "temprature"),
        ("unknown response_format type", dumps(chat_body(response_format={"type": "yaml"})), 400,
         "response_format.type"),
        ("tools not served yet", dumps(chat_body(tools=[{"type": "function", "function": {"name": "f"}}])), 400,
         "tools"),
        ("top_logprobs without logprobs", dumps(chat_body(top_logprobs=2)), 400, "top_logprobs"),
    ]
    with http() as h:
        for what, body, status, param in cases:
            r = h.post("/v1/chat/completions", content=body, headers=dict(auth(), **{"Content-Type": "application/json"}))
            err = error_of(r, status)
            assert err["param"] == param, (what, err)
        err = error_of(h.post("/v1/completions", json={"model": MODEL, "prompt": "x " * 1100, "max_tokens": 4},
                              headers=auth()), 400)
        assert err["code"] == "context_length_exceeded", err
        # OpenAI's wording, which client libraries (litellm's ContextWindowExceededError) match on
        assert err["message"].startswith("This model's maximum context length is 1024 tokens."), err
        err = error_of(h.get("/v1/nope", headers=auth()), 404)
        err = error_of(h.get("/v1/chat/completions", headers=auth()), 405)
        assert h.get("/v1/chat/completions", headers=auth()).headers.get("allow") == "POST"
        err = error_of(h.get("/v1/models/other-model", headers=auth()), 404)
        assert err["code"] == "model_not_found", err
        # the worker's own limit (1 MiB) and nginx's (2 MiB) both answer 413 in OpenAI's shape
        big = {"model": MODEL, "messages": [{"role": "user", "content": "a" * 1_500_000}]}
        error_of(h.post("/v1/chat/completions", json=big, headers=auth()), 413)
        big["messages"][0]["content"] = "a" * 3_000_000
        error_of(h.post("/v1/chat/completions", json=big, headers=auth()), 413)
        # and the worker still serves
        assert h.post("/v1/chat/completions", json=chat_body(max_tokens=2), headers=auth()).status_code == 200


@test
def health_endpoint():
    with http() as h:
        r = h.get("/health")
    assert r.status_code == 200, r.text
    j = r.json()
    assert j["status"] == "ok" and j["model"] == MODEL and j["device"], j
    assert j["queue_depth"] == 0 and j["active"] == 0 and j["uptime_seconds"] > 0, j
    assert j["device_memory_used_bytes"] > 0 and "device_memory_free_bytes" in j, j


@test
def metrics_parse_and_count():
    m = metrics()
    chat200 = m[("clgemma_requests_total", frozenset({("endpoint", "chat"), ("status", "200")}))]
    assert chat200 >= 5, chat200
    assert m[("clgemma_requests_total", frozenset({("endpoint", "chat"), ("status", "400")}))] >= 5
    assert m[("clgemma_prompt_tokens_total", frozenset())] > 50
    assert m[("clgemma_completion_tokens_total", frozenset())] > 20
    assert m[("clgemma_time_to_first_token_seconds_count", frozenset())] >= 5
    assert m[("clgemma_inter_token_latency_seconds_count", frozenset())] >= 20
    inf = m[("clgemma_time_to_first_token_seconds_bucket", frozenset({("le", "+Inf")}))]
    assert inf == m[("clgemma_time_to_first_token_seconds_count", frozenset())]
    assert m[("clgemma_requests_active", frozenset())] == 0
    assert m[("clgemma_requests_queued", frozenset())] == 0
    assert m[("clgemma_device_memory_used_bytes", frozenset())] > 0
    assert m[("clgemma_model_loaded", frozenset())] == 1


@test
def metrics_only_from_loopback_127_0_0_1():
    # 127.0.0.2 is this machine too, but not an address the site allows for /metrics
    host, port = URL.split("//")[1].rsplit(":", 1)
    tr = httpx.HTTPTransport(verify=CERT, local_address="127.0.0.2")
    with httpx.Client(transport=tr, base_url=URL, timeout=30) as h:
        err = error_of(h.get("/metrics"), 403)
        assert h.get("/health").status_code == 200


@test
def request_id_in_both_logs():
    with http() as h:
        r = h.post("/v1/chat/completions", json=chat_body(max_tokens=2), headers=auth())
    rid = r.headers["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{32}", rid), rid
    assert r.json()["id"] == "chatcmpl-" + rid
    wait_for(lambda: f"rid={rid}" in open(ACCESS_LOG).read(), 5, "the access log line")
    wait_for(lambda: f"rid={rid}" in open(WORKER_LOG).read(), 5, "the worker log line")


def cancelled():
    return metrics()[("clgemma_cancellations_total", frozenset({("reason", "client_gone")}))]


@test
def disconnect_mid_stream_cancels():
    before = cancelled()
    h = http()
    body = chat_body("Write a long story about the sea.", max_tokens=200, stream=True)
    with h.stream("POST", "/v1/chat/completions", json=body, headers=auth()) as r:
        n = 0
        for line in r.iter_lines():
            if line.startswith("data: "):
                n += 1
                if n == 3:
                    break
    h.close()  # the connection goes away mid-stream
    wait_for(lambda: cancelled() == before + 1, 10, "clgemma_cancellations_total{reason=client_gone} + 1")
    with http() as h2:
        j = h2.get("/health").json()
        assert j["active"] == 0 and j["queue_depth"] == 0, j
        t0 = time.monotonic()
        r = h2.post("/v1/chat/completions", json=chat_body(max_tokens=4), headers=auth())
        took = time.monotonic() - t0
    assert r.status_code == 200, r.text
    assert took < 15, f"the next request took {took:.1f}s"


@test
def two_concurrent_streams():
    prompts = ["Why is the sky blue?", "Name a famous painter."]
    want = [greedy_chat(p, 12).choices[0].message.content for p in prompts]
    got = [None, None]
    overlap = []

    def run(i):
        pieces, chunks = stream_pieces(chat_body(prompts[i], max_tokens=12))
        got[i] = ("".join(pieces), chunks[-1]["choices"][0]["finish_reason"])

    def active_probe():
        for _ in range(100):
            with http() as h:
                a = h.get("/health").json()["active"]
            overlap.append(a)
            if a == 2 or all(g is not None for g in got):
                return
            time.sleep(0.05)

    ts = [threading.Thread(target=run, args=(i,)) for i in range(2)] + [threading.Thread(target=active_probe)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    for i in range(2):
        assert got[i] is not None, f"stream {i} did not finish"
        assert got[i][0] == want[i], (i, got[i][0], want[i])
        assert got[i][1] in ("stop", "length")
    assert 2 in overlap, f"the engine never ran both sequences together: active={overlap}"


@contextlib.contextmanager
def two_running_streams(body):
    """two streams running in the --max-seqs 2 slots (their first event arrived); yields the lists
    of streams and clients, which a test may extend; all closed after, and the engine idle again"""
    streams, clients, readers = [], [], []
    try:
        for _ in range(2):
            h = http()
            clients.append(h)
            r = h.send(h.build_request("POST", "/v1/chat/completions", json=body, headers=auth()), stream=True)
            streams.append(r)
            assert r.status_code == 200, r.status_code
            # keep the line iterator: dropping it closes the connection (httpcore closes the stream on
            # GeneratorExit), the server then cancels the generation as client-gone and frees its slot
            readers.append(r.iter_lines())
            next(readers[-1])
        yield streams, clients
    finally:
        for r in streams:
            r.close()
        for h in clients:
            h.close()
    with http() as h:
        wait_for(lambda: h.get("/health").json()["active"] == 0, 30, "the engine to be idle again")


# --max-seqs 2 --max-queue 1. The running streams must not finish (and free a slot) during a test:
# they get far more tokens than it takes (this prompt does not stop early on greedy decoding).
LONG = chat_body("Write a long story about mountains.", max_tokens=600, stream=True)


@test
def queue_full_is_429():
    # two running, one waiting, the fourth is refused
    with two_running_streams(LONG) as (streams, clients):
        # the third waits in the queue; its head comes later, so it is sent aside
        h3 = http()
        clients.append(h3)
        threading.Thread(target=lambda: streams.append(
            h3.send(h3.build_request("POST", "/v1/chat/completions", json=LONG, headers=auth()), stream=True)),
            daemon=True).start()
        with http() as h:
            wait_for(lambda: h.get("/health").json()["queue_depth"] == 1, 10, "one queued request")
            err = error_of(h.post("/v1/chat/completions", json=chat_body(), headers=auth()), 429)
            assert err["code"] == "queue_full", err


@test
def queued_stream_gets_heartbeat_comments():
    # a third stream waits; its head and ": queued" comments come every 2 s until its first token,
    # so clients and proxies do not time out on a long wait
    with two_running_streams(LONG) as (streams, clients):
        h = http()
        clients.append(h)
        t0 = time.monotonic()
        r = h.send(h.build_request("POST", "/v1/chat/completions", json=dict(LONG, max_tokens=4), headers=auth()),
                   stream=True)
        streams.append(r)
        took = time.monotonic() - t0
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream"), r.status_code
        lines = r.iter_lines()
        seen = [next(lines) for _ in range(4)]
        assert 1.5 < took < 6, f"head after {took:.1f}s (heartbeat every 2 s)"
        assert ": queued" in seen, seen


if __name__ == "__main__":
    raise SystemExit(run_all())
