"""Structured output and logit_bias through nginx on the real 270M model (tests/suites/e2e_api.sh):
the official openai SDK's beta.chat.completions.parse with a pydantic model, json_schema (strict) and
json_object outputs that parse and validate (python jsonschema: an independent validator) greedy and
sampled, streamed and whole, beside an unconstrained stream in the same batch; a schema keyword the
grammar does not support is a 400 naming it; logit_bias +100 forces a token, greedy and sampled;
logprobs (chat content entries, completions' four arrays) agree with the text, streamed and whole,
and greedy picks the top alternative (the values themselves are checked against the float64
log-softmax of the logits in tests/opencl/test_engine_choice.c)."""
import json
import threading

import jsonschema
from e2e import MODEL, Owner, auth, chat_body, client, error_of, http, run_all, sse_events, test

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 24},
        "age": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["red", "green", "blue"]}, "maxItems": 3},
        "pet": {"anyOf": [{"type": "null"}, {"type": "object", "properties": {"kind": {"enum": ["cat", "dog"]}},
                                              "required": ["kind"], "additionalProperties": False}]},
    },
    "required": ["name", "age", "tags", "pet"],
    "additionalProperties": False,
}


def schema_format(schema, name="person"):
    return {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": schema}}


def content_of(r):
    assert r.status_code == 200, r.text[:300]
    ch = r.json()["choices"][0]
    assert ch["finish_reason"] == "stop", ch
    return ch["message"]["content"]


@test
def json_schema_outputs_validate_greedy_and_sampled():
    with http() as h:
        for temp, seed in ((0, 0), (0.9, 1), (1.3, 2)):
            r = h.post("/v1/chat/completions", headers=auth(),
                       json=chat_body("Describe a person.", max_tokens=200, temperature=temp, seed=seed,
                                      response_format=schema_format(PERSON)))
            jsonschema.validate(json.loads(content_of(r)), PERSON)


@test
def json_object_mode_gives_an_object():
    with http() as h:
        r = h.post("/v1/chat/completions", headers=auth(),
                   json=chat_body("List three colours as JSON.", max_tokens=40, temperature=0.7, seed=1,
                                  response_format={"type": "json_object"}))
    r.raise_for_status()
    ch = r.json()["choices"][0]
    if ch["finish_reason"] == "stop":
        assert isinstance(json.loads(ch["message"]["content"]), dict), ch
    else:  # cut by max_tokens: what came is still a prefix of an object
        assert ch["finish_reason"] == "length" and ch["message"]["content"].startswith("{"), ch


@test
def streamed_schema_output_beside_an_unconstrained_stream():
    out = {}

    def free():
        with http() as h, h.stream("POST", "/v1/chat/completions", headers=auth(),
                                   json=chat_body("Tell a story.", max_tokens=40, stream=True)) as r:
            out["free"] = sse_events(r)
    t = threading.Thread(target=free)
    t.start()
    with http() as h, h.stream("POST", "/v1/chat/completions", headers=auth(),
                               json=chat_body("Describe a person.", max_tokens=200, stream=True, temperature=0.8,
                                              seed=5, response_format=schema_format(PERSON))) as r:
        ev = sse_events(r)
    t.join(120)
    assert ev[-1] == "[DONE]" and out["free"][-1] == "[DONE]", (ev[-2:], out["free"][-2:])
    text = "".join(json.loads(e)["choices"][0]["delta"].get("content") or "" for e in ev[:-1])
    jsonschema.validate(json.loads(text), PERSON)


@test
def openai_sdk_parse_with_a_pydantic_model():
    c = client()
    r = c.beta.chat.completions.parse(model=MODEL, messages=[{"role": "user", "content": "An owner and pets."}],
                                      response_format=Owner, max_tokens=200, temperature=0)
    parsed = r.choices[0].message.parsed
    assert isinstance(parsed, Owner), r.choices[0].message


@test
def unsupported_schema_keyword_is_a_400_naming_it():
    with http() as h:
        r = h.post("/v1/chat/completions", headers=auth(),
                   json=chat_body(response_format=schema_format(
                       {"type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}}})))
    err = error_of(r, 400)
    assert err["param"] == "response_format" and "pattern" in err["message"], err


@test
def logit_bias_forces_a_token_greedy_and_sampled():
    def text(**kw):
        body = {"model": MODEL, "prompt": "The capital of France is", "max_tokens": 3, "temperature": 0}
        body.update(kw)
        with http() as h:
            r = h.post("/v1/completions", headers=auth(), json=body)
        r.raise_for_status()
        return r.json()["choices"][0]["text"]
    plain = text()
    forced = text(logit_bias={"1234": 100})
    sampled = text(logit_bias={"1234": 100}, temperature=1.2, seed=3)
    assert forced == sampled and forced != plain and len(forced) > 0, (plain, forced, sampled)
    assert forced[:len(forced) // 3] * 3 == forced, f"not one token three times: {forced!r}"
    with http() as h:
        err = error_of(h.post("/v1/completions", headers=auth(),
                              json={"model": MODEL, "prompt": "x", "logit_bias": {"999999999": 1}}), 400)
    assert err["param"] == "logit_bias", err


@test
def chat_logprobs_match_the_text_streamed_and_whole():
    body = chat_body("Why is the sky blue?", max_tokens=12, temperature=0, logprobs=True, top_logprobs=3)
    with http() as h:
        r = h.post("/v1/chat/completions", headers=auth(), json=body)
        r.raise_for_status()
        ch = r.json()["choices"][0]
        entries = ch["logprobs"]["content"]
        with h.stream("POST", "/v1/chat/completions", headers=auth(), json=dict(body, stream=True)) as rs:
            ev = sse_events(rs)
    assert len(entries) == r.json()["usage"]["completion_tokens"], (len(entries), r.json()["usage"])
    assert "".join(bytes(e["bytes"]).decode("utf-8", "replace") for e in entries) == ch["message"]["content"]
    for e in entries:
        tops = [t["logprob"] for t in e["top_logprobs"]]
        assert len(tops) == 3 and tops == sorted(tops, reverse=True) and all(x <= 0 for x in tops), e
        assert abs(e["logprob"] - tops[0]) < 1e-4 and e["token"] == e["top_logprobs"][0]["token"], e  # greedy
    streamed = [x for e in ev[:-1] for x in ((json.loads(e)["choices"] or [{}])[0].get("logprobs") or {}).get("content", [])]
    assert [(x["token"], round(x["logprob"], 3)) for x in streamed] == \
        [(x["token"], round(x["logprob"], 3)) for x in entries], (streamed[:3], entries[:3])


@test
def completion_logprobs_arrays():
    with http() as h:
        r = h.post("/v1/completions", headers=auth(),
                   json={"model": MODEL, "prompt": "The capital of France is", "max_tokens": 8, "temperature": 0.8,
                         "seed": 2, "logprobs": 2})
    r.raise_for_status()
    ch = r.json()["choices"][0]
    lp = ch["logprobs"]
    n = r.json()["usage"]["completion_tokens"]
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == len(lp["text_offset"]) == n, lp
    assert "".join(lp["tokens"]) == ch["text"], (lp["tokens"], ch["text"])
    assert lp["text_offset"] == sorted(lp["text_offset"]) and all(len(t) <= 2 for t in lp["top_logprobs"]), lp
    assert all(x <= 0 for x in lp["token_logprobs"]), lp


@test
def gemma3_template_refuses_tools_and_thinking_by_name():
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    turns = [{"role": "user", "content": "w"},
             {"role": "assistant", "content": None,
              "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
             {"role": "tool", "tool_call_id": "c", "content": "ok"}]
    with http() as h:
        for extra, param in (({"tools": [tool]}, "tools"), ({"tools": [tool], "tool_choice": "required"}, "tools"),
                             ({"reasoning_effort": "high"}, "reasoning_effort"), ({"messages": turns}, "messages")):
            err = error_of(h.post("/v1/chat/completions", headers=auth(), json=chat_body("hi", **extra)), 400)
            assert err["param"] == param and "gemma3" in err["message"], (extra, err)
        for extra in ({"tools": [tool], "tool_choice": "none"}, {"reasoning_effort": "none"}):
            r = h.post("/v1/chat/completions", headers=auth(), json=chat_body("hi", max_tokens=2, **extra))
            assert r.status_code == 200, r.text[:300]
            assert "completion_tokens_details" not in r.json()["usage"]


if __name__ == "__main__":
    raise SystemExit(run_all())
