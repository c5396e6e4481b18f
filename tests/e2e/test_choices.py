"""Several choices per request (n), completions' prompt forms, echo and suffix through nginx on the
real 270M model (tests/suites/e2e_choices.sh: --max-seqs 4 --max-queue 2). A prompt with n choices
is prefilled once and its KV forked (the engine side is tests/opencl/test_engine_fork.c); here:
greedy choices are the n=1 answer, seeded ones differ and repeat, streamed ones assemble in the
official openai SDK (chat's stream helper), every choice has its own finish, stop strings, logprobs
and structured-output grammar; usage counts a prompt once and sums the choices; prompts as arrays of
strings, token ids and arrays of ids (ids from tests/golden/tokens.json, llama.cpp's tokenizer)
give one choice per prompt and n, index = prompt * n + choice; echo puts the prompt ahead with its
tokens' logprobs (null for the first); the limits are 400s naming n or the prompt; a request of n
choices waits for n free slots; a client that goes away cancels every choice."""
import json
import threading
import time

import jsonschema
from e2e import MODEL, auth, chat_body, client, dumps, error_of, http, metrics, run_all, sse_events, test, wait_for

SKY = [{"role": "user", "content": "Why is the sky blue?"}]
TOKENS = {c["name"]: c for c in json.load(open("tests/golden/tokens.json"))["cases"]}
HELLO = TOKENS["hello"]  # "Hello world" -> [2, 9259, 1902] (BOS first, as a text prompt gets)
assert HELLO["text"] == "Hello world" and HELLO["ids_special"][0] == 2, HELLO


def completion(**kw):
    with http() as h:
        r = h.post("/v1/completions", headers=auth(), json=dict({"model": MODEL, "temperature": 0, "max_tokens": 6}, **kw))
    assert r.status_code == 200, r.text[:300]
    return r.json()


@test
def greedy_choices_are_the_one_answer():
    cl = client()
    one = cl.chat.completions.create(model=MODEL, messages=SKY, temperature=0, max_tokens=10)
    three = cl.chat.completions.create(model=MODEL, messages=SKY, temperature=0, max_tokens=10, n=3)
    assert [c.index for c in three.choices] == [0, 1, 2], three.choices
    want = one.choices[0]
    for c in three.choices:
        assert (c.message.content, c.finish_reason) == (want.message.content, want.finish_reason), (c, want)
    assert three.usage.prompt_tokens == one.usage.prompt_tokens, "the prompt counts once"
    assert three.usage.completion_tokens == 3 * one.usage.completion_tokens, (three.usage, one.usage)
    c1 = completion(prompt="The sky is")
    c3 = completion(prompt="The sky is", n=3)
    assert [c["text"] for c in c3["choices"]] == [c1["choices"][0]["text"]] * 3, c3["choices"]
    assert c3["usage"]["prompt_tokens"] == c1["usage"]["prompt_tokens"], c3["usage"]


@test
def seeded_choices_differ_and_repeat():
    kw = dict(model=MODEL, messages=[{"role": "user", "content": "Tell me a story."}], temperature=1.0, max_tokens=12,
              seed=77, n=3)
    a = [c.message.content for c in client().chat.completions.create(**kw).choices]
    b = [c.message.content for c in client().chat.completions.create(**kw).choices]
    assert a == b, (a, b)
    assert len(set(a)) >= 2, f"three seeded choices alike: {a}"
    s = client().chat.completions.create(**kw, stream=True)
    got = ["", "", ""]
    for ch in s:
        for c in ch.choices:
            got[c.index] += c.delta.content or ""
    assert got == a, (got, a)


@test
def streamed_choices_assemble_in_the_sdk():
    cl = client()
    whole = cl.chat.completions.create(model=MODEL, messages=SKY, temperature=0.8, seed=5, max_tokens=10, n=3)
    with cl.chat.completions.stream(model=MODEL, messages=SKY, temperature=0.8, seed=5, max_tokens=10, n=3,
                                    stream_options={"include_usage": True}) as st:
        done = sum(ev.type == "content.done" for ev in st)  # one per choice, when its finish came
        final = st.current_completion_snapshot  # get_final_completion() refuses "length" (it parses)
    assert done == 3, done
    assert [c.index for c in final.choices] == [0, 1, 2], final.choices
    for f, w in zip(final.choices, whole.choices):
        assert (f.message.content, f.finish_reason) == (w.message.content, w.finish_reason), (f, w)
    assert final.usage.completion_tokens == whole.usage.completion_tokens, (final.usage, whole.usage)
    # the wire: a role chunk and one finish chunk per choice, one choice per chunk, usage last
    with http() as h, h.stream("POST", "/v1/chat/completions", headers=auth(),
                               json=chat_body(n=2, stream=True, stream_options={"include_usage": True})) as r:
        ev = sse_events(r)
    assert ev[-1] == "[DONE]", ev[-2:]
    chunks = [json.loads(e) for e in ev[:-1]]
    assert all(len(c["choices"]) == 1 for c in chunks[:-1]) and chunks[-1]["choices"] == [], chunks[-1]
    roles = [c["choices"][0]["index"] for c in chunks[:-1] if c["choices"][0]["delta"].get("role")]
    fins = [c["choices"][0]["index"] for c in chunks[:-1] if c["choices"][0]["finish_reason"]]
    assert sorted(roles) == [0, 1] and sorted(fins) == [0, 1], (roles, fins)
    one = client().chat.completions.create(model=MODEL, messages=SKY, temperature=0, max_tokens=8)
    u = chunks[-1]["usage"]
    assert u["prompt_tokens"] == one.usage.prompt_tokens and u["completion_tokens"] == 2 * one.usage.completion_tokens, u
    # completions: assembled by index, as the whole answer
    cw = completion(prompt="Once upon a time", n=2, temperature=0.9, seed=3, max_tokens=8)
    with http() as h, h.stream("POST", "/v1/completions", headers=auth(),
                               json={"model": MODEL, "prompt": "Once upon a time", "n": 2, "temperature": 0.9,
                                     "seed": 3, "max_tokens": 8, "stream": True}) as r:
        ev = sse_events(r)
    texts, fin = ["", ""], [None, None]
    for e in ev[:-1]:
        c = json.loads(e)["choices"][0]
        texts[c["index"]] += c["text"]
        fin[c["index"]] = c["finish_reason"] or fin[c["index"]]
    assert texts == [c["text"] for c in cw["choices"]] and fin == [c["finish_reason"] for c in cw["choices"]], \
        (texts, fin, cw["choices"])


@test
def each_choice_stops_and_scores_on_its_own():
    # stop strings per choice: sampled choices cut at their own first space
    r = client().chat.completions.create(model=MODEL, messages=SKY, temperature=1.0, seed=9, max_tokens=12, n=3,
                                         stop=[" "], logprobs=True, top_logprobs=2)
    for c in r.choices:
        assert " " not in c.message.content, c.message.content
        toks = "".join(t.token for t in c.logprobs.content)
        assert toks.startswith(c.message.content), (toks, c.message.content)
        assert all(len(t.top_logprobs) == 2 for t in c.logprobs.content), c.logprobs
    # structured output: every choice its own grammar, each output valid
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"}},
              "required": ["name", "age"], "additionalProperties": False}
    with http() as h:
        j = h.post("/v1/chat/completions", headers=auth(), json=chat_body(
            "Describe a person.", max_tokens=60, temperature=1.0, seed=4, n=3,
            response_format={"type": "json_schema", "json_schema": {"name": "p", "strict": True, "schema": schema}})).json()
    assert len(j["choices"]) == 3, j
    for c in j["choices"]:
        assert c["finish_reason"] == "stop", c
        jsonschema.validate(json.loads(c["message"]["content"]), schema)


@test
def prompt_arrays_and_token_ids():
    one = [completion(prompt=p)["choices"][0]["text"] for p in ("The sky is", "Hello world")]
    r = completion(prompt=["The sky is", "Hello world"], n=2)
    assert [c["index"] for c in r["choices"]] == [0, 1, 2, 3], r["choices"]
    assert [c["text"] for c in r["choices"]] == [one[0], one[0], one[1], one[1]], r["choices"]
    ids = completion(prompt=HELLO["ids_special"])
    assert ids["choices"][0]["text"] == one[1] and ids["usage"]["prompt_tokens"] == 3, ids
    both = completion(prompt=[HELLO["ids_special"], HELLO["ids_special"][:2]])
    assert both["choices"][0]["text"] == one[1] and len(both["choices"]) == 2, both
    assert both["usage"]["prompt_tokens"] == 5, both["usage"]
    with http() as h:
        def err(prompt, param, **kw):
            e = error_of(h.post("/v1/completions", headers=auth(), json=dict({"model": MODEL, "prompt": prompt}, **kw)),
                         400)
            assert e["param"] == param, (prompt, e)
            return e
        assert "vocabulary" in err([2, 262144], "prompt[1]")["message"]
        err([[2, 5], [2, 300000]], "prompt[1][1]")
        err([2, -1], "prompt[1]")
        err([2, 1.5], "prompt[1]")
        err([], "prompt")
        err([[]], "prompt[0]")
        err(["a", 5], "prompt")
        err(["a"] * 7, "prompt", n=1)  # 7 sequences: more than --max-seqs 4 + --max-queue 2
        err("x", "n", n=5)
        err("x", "n", n=17)


@test
def echo_and_prompt_logprobs():
    r = completion(prompt="Hello world", echo=True, max_tokens=4)
    plain = completion(prompt="Hello world", max_tokens=4)
    assert r["choices"][0]["text"] == "Hello world" + plain["choices"][0]["text"], (r, plain)
    lp = completion(prompt="Hello world", echo=True, max_tokens=4, logprobs=2, n=2)
    for c in lp["choices"]:
        L = c["logprobs"]
        assert c["text"] == "Hello world" + plain["choices"][0]["text"], c["text"]
        assert len(L["tokens"]) == 3 + 4 and "".join(L["tokens"]) == c["text"], L["tokens"]
        assert L["token_logprobs"][0] is None and L["top_logprobs"][0] is None, L
        assert all(isinstance(x, float) for x in L["token_logprobs"][1:]), L["token_logprobs"]
        assert all(len(t) >= 1 for t in L["top_logprobs"][1:]), L["top_logprobs"]
        assert L["text_offset"] == [sum(len(t) for t in L["tokens"][:i]) for i in range(len(L["tokens"]))], L
    # a prompt token's alternatives are the ones the model gives when it generates there
    ids = HELLO["ids_special"]
    e = completion(prompt=ids, max_tokens=1, logprobs=3, echo=True)["choices"][0]
    assert e["text"].startswith("<bos>Hello world"), e["text"]  # id prompts echo their control tokens too
    L = e["logprobs"]
    assert len(L["tokens"]) == 4 and L["token_logprobs"][0] is None, L
    for k in (1, 2):
        gen = completion(prompt=ids[:k], max_tokens=1, logprobs=3)["choices"][0]["logprobs"]["top_logprobs"][0]
        got = L["top_logprobs"][k]
        best = next(iter(gen))
        assert next(iter(got)) == best and abs(got[best] - gen[best]) < 0.05, (k, got, gen)
        assert L["token_logprobs"][k] <= got[best] + 1e-6, (k, L["token_logprobs"][k], got)
    # streamed: the prompt comes first in each choice
    with http() as h, h.stream("POST", "/v1/completions", headers=auth(),
                               json={"model": MODEL, "prompt": "Hello world", "echo": True, "max_tokens": 4, "n": 2,
                                     "temperature": 0, "stream": True}) as s:
        ev = sse_events(s)
    texts = ["", ""]
    for e in ev[:-1]:
        c = json.loads(e)["choices"][0]
        texts[c["index"]] += c["text"]
    assert texts == [r["choices"][0]["text"]] * 2, texts


@test
def suffix_is_refused_unless_empty():
    with http() as h:
        e = error_of(h.post("/v1/completions", headers=auth(), json={"model": MODEL, "prompt": "a", "suffix": "b"}), 400)
        assert e["param"] == "suffix" and "fill-in-the-middle" in e["message"], e
        assert h.post("/v1/completions", headers=auth(),
                      json={"model": MODEL, "prompt": "a", "suffix": "", "max_tokens": 1}).status_code == 200
        error_of(h.post("/v1/completions", headers=auth(), json={"model": MODEL, "prompt": "a", "best_of": 2}), 400)


@test
def usage_and_metrics_count_the_prompt_once():
    m0 = metrics()
    r = completion(prompt=["The sky is", "Hello world"], n=3, max_tokens=5)
    m1 = metrics()
    u = r["usage"]
    assert u["prompt_tokens"] == 4 + 3, u  # "The sky is" 4 tokens, "Hello world" 3, each once
    assert m1[("clgemma_prompt_tokens_total", frozenset())] - m0[("clgemma_prompt_tokens_total", frozenset())] == 7
    assert (m1[("clgemma_completion_tokens_total", frozenset())] - m0[("clgemma_completion_tokens_total", frozenset())]
            == u["completion_tokens"]), u
    assert u["completion_tokens"] <= 6 * 5 and u["completion_tokens"] >= 6, u


LONG = chat_body("Write a long story about mountains.", max_tokens=600, stream=True)


@test
def a_request_of_n_choices_waits_for_n_slots():
    # two running streams hold 2 of 4 slots; n=3 waits (queued) until they go, then runs
    hs, streams = [], []
    try:
        for _ in range(2):
            h = http()
            hs.append(h)
            r = h.send(h.build_request("POST", "/v1/chat/completions", json=LONG, headers=auth()), stream=True)
            assert r.status_code == 200
            streams.append((r, r.iter_lines()))
            next(streams[-1][1])
        out = {}
        t = threading.Thread(target=lambda: out.setdefault("r", completion(prompt="The sky is", n=3)))
        t.start()
        with http() as h:
            wait_for(lambda: h.get("/health").json()["queue_depth"] == 1, 10, "the n=3 request queued")
            time.sleep(1.0)
            assert h.get("/health").json()["queue_depth"] == 1, "n=3 started with 2 slots free"
    finally:
        for r, _ in streams:
            r.close()
        for h in hs:
            h.close()
    t.join(120)
    assert len(out["r"]["choices"]) == 3, out


def cancelled():
    return metrics()[("clgemma_cancellations_total", frozenset({("reason", "client_gone")}))]


@test
def a_client_gone_cancels_every_choice():
    before = cancelled()
    h = http()
    with h.stream("POST", "/v1/chat/completions", json=dict(LONG, n=3), headers=auth()) as r:
        n = 0
        for line in r.iter_lines():
            n += line.startswith("data: ")
            if n == 8:
                break
    h.close()
    wait_for(lambda: cancelled() == before + 1, 10, "one cancellation for the request")
    with http() as h2:
        wait_for(lambda: h2.get("/health").json()["active"] == 0, 10, "the engine idle")
        t0 = time.monotonic()
        r4 = h2.post("/v1/completions", headers=auth(), json={"model": MODEL, "prompt": "a", "n": 4, "max_tokens": 2})
    assert r4.status_code == 200 and len(r4.json()["choices"]) == 4, r4.text[:200]
    assert time.monotonic() - t0 < 30, "every slot free again"


if __name__ == "__main__":
    raise SystemExit(run_all())
