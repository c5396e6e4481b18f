"""Tool calls and thinking through nginx on a tiny Gemma 4 (tests/fixtures/gemma4_dense.gguf: random weights, the
real Gemma 4 control tokens and the real 31B chat template; tests/suites/e2e_tools.sh). A random model calls no tool
by itself, so the calls checked here are the enforced ones (tool_choice "required" / named): every reply must parse
into OpenAI tool_calls whose arguments validate against the tool's parameters (python jsonschema, an independent
validator), whole and streamed through the official openai SDK, which assembles the deltas. Also: tool_choice "none"
never yields a call, the follow-up turns (assistant tool_calls with null content, role "tool") are accepted and
templated, bad tool shapes are 400s naming the field, thinking on/off changes the prompt as the template says, and a
thought channel is reported as reasoning_content / reasoning_tokens, never as content."""
import json

import jsonschema
from e2e import MODEL, auth, chat_body, client, error_of, http, run_all, sse_events, test

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name", "maxLength": 20},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer"},
            },
            "required": ["city", "unit"],
        },
    },
}
SEARCH = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "maxLength": 30},
                "filters": {"type": "object", "properties": {"site": {"type": "string", "maxLength": 10},
                                                             "recent": {"type": "boolean"}},
                            "required": ["recent"]},
                "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 3},
            },
            "required": ["query", "filters"],
        },
    },
}
TOOLS = [WEATHER, SEARCH]
PARAMS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


def ask(**kw):
    body = chat_body("What is the weather in Paris?", **{"max_tokens": 120, **kw})
    with http() as h:
        return h.post("/v1/chat/completions", headers=auth(), json=body)


def check_calls(calls, names):
    assert calls, "no tool calls"
    ids = set()
    for c in calls:
        assert c["type"] == "function", c
        assert c["function"]["name"] in names, c
        args = json.loads(c["function"]["arguments"])
        jsonschema.validate(args, PARAMS[c["function"]["name"]])
        assert c["id"] not in ids, "duplicate call id"
        ids.add(c["id"])


@test
def required_gives_valid_calls_greedy_and_sampled():
    for temp, seed in ((0, 0), (1.0, 1), (1.3, 2), (1.0, 3)):
        r = ask(tools=TOOLS, tool_choice="required", temperature=temp, seed=seed)
        assert r.status_code == 200, r.text[:300]
        ch = r.json()["choices"][0]
        assert ch["finish_reason"] == "tool_calls", ch
        assert ch["message"]["content"] is None, ch["message"]
        check_calls(ch["message"]["tool_calls"], {"get_weather", "search"})


@test
def named_choice_calls_that_function_once_without_parallel_calls():
    for seed in range(3):
        r = ask(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "search"}},
                parallel_tool_calls=False, temperature=1.0, seed=seed)
        assert r.status_code == 200, r.text[:300]
        ch = r.json()["choices"][0]
        assert ch["finish_reason"] == "tool_calls", ch
        assert len(ch["message"]["tool_calls"]) == 1, ch["message"]["tool_calls"]
        check_calls(ch["message"]["tool_calls"], {"search"})


@test
def sdk_assembles_streamed_tool_calls():
    c = client()
    for seed in range(2):
        whole = c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Weather?"}], tools=TOOLS,
                                          tool_choice="required", temperature=1.0, seed=seed, max_tokens=120)
        calls, finish = {}, None
        for chunk in c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Weather?"}],
                                               tools=TOOLS, tool_choice="required", temperature=1.0, seed=seed,
                                               max_tokens=120, stream=True):
            if not chunk.choices:
                continue
            d = chunk.choices[0].delta
            for tc in d.tool_calls or []:
                e = calls.setdefault(tc.index, {"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
                e["id"] = tc.id or e["id"]
                e["function"]["name"] += tc.function.name or ""
                e["function"]["arguments"] += tc.function.arguments or ""
            assert not d.content, f"content in a forced tool call: {d.content!r}"
            finish = chunk.choices[0].finish_reason or finish
        assert finish == "tool_calls", finish
        streamed = [calls[i] for i in sorted(calls)]
        check_calls(streamed, {"get_weather", "search"})
        # the same seed gives the same calls streamed and whole
        got = [(x["function"]["name"], json.loads(x["function"]["arguments"])) for x in streamed]
        want = [(x.function.name, json.loads(x.function.arguments)) for x in whole.choices[0].message.tool_calls]
        assert got == want, (got, want)
        assert whole.choices[0].finish_reason == "tool_calls"


@test
def n_choices_each_make_their_own_calls():
    for stream in (False, True):
        body = chat_body("Weather?", max_tokens=120, tools=TOOLS, tool_choice="required", temperature=1.0, seed=7, n=3,
                         stream=stream)
        with http() as h:
            r = h.post("/v1/chat/completions", headers=auth(), json=body)
            assert r.status_code == 200, r.text[:300]
            if stream:
                calls, finish = {}, {}
                for e in sse_events(r):
                    if e == "[DONE]":
                        continue
                    for ch in json.loads(e)["choices"]:
                        for tc in ch["delta"].get("tool_calls") or []:
                            calls.setdefault(ch["index"], []).append(tc)
                        finish[ch["index"]] = ch["finish_reason"] or finish.get(ch["index"])
                got = [calls[i] for i in range(3)]
                assert all(finish[i] == "tool_calls" for i in range(3)), finish
            else:
                chs = sorted(r.json()["choices"], key=lambda c: c["index"])
                assert [c["finish_reason"] for c in chs] == ["tool_calls"] * 3, chs
                got = [c["message"]["tool_calls"] for c in chs]
        for calls in got:
            check_calls(calls, {"get_weather", "search"})
        ids = [c["id"] for calls in got for c in calls]
        assert len(set(ids)) == len(ids), ids


@test
def a_call_cut_by_max_tokens_is_a_cut_call_not_content():
    # as OpenAI: finish_reason "length" with what of the call was made; Gemma's syntax never leaks into content
    for max_tokens in (3, 8, 20):
        for stream in (False, True):
            body = chat_body("Weather?", max_tokens=max_tokens, tools=TOOLS, tool_choice="required", temperature=1.0,
                             seed=max_tokens, stream=stream)
            with http() as h:
                r = h.post("/v1/chat/completions", headers=auth(), json=body)
                assert r.status_code == 200, r.text[:300]
                if stream:
                    deltas = [json.loads(e)["choices"][0] for e in sse_events(r) if e != "[DONE]"]
                    assert deltas[0]["delta"] == {"role": "assistant", "content": None}, deltas[0]
                    content = "".join(d["delta"].get("content") or "" for d in deltas)
                    calls = [tc for d in deltas for tc in d["delta"].get("tool_calls") or []]
                    finish = deltas[-1]["finish_reason"]
                else:
                    ch = r.json()["choices"][0]
                    content, calls, finish = ch["message"]["content"] or "", ch["message"].get("tool_calls") or [], ch["finish_reason"]
            assert finish == "length", finish
            assert "<|" not in content and "call:" not in content, content
            for c in calls:
                assert c["function"]["name"] in ("get_weather", "search"), c
                assert isinstance(json.loads(c["function"]["arguments"]), dict), c


@test
def tool_choice_none_never_calls():
    for seed in range(3):
        r = ask(tools=TOOLS, tool_choice="none", temperature=1.0, seed=seed, max_tokens=40)
        assert r.status_code == 200, r.text[:300]
        ch = r.json()["choices"][0]
        assert "tool_calls" not in ch["message"], ch
        assert ch["finish_reason"] in ("stop", "length")
        assert "<|tool_call>" not in (ch["message"]["content"] or "")


@test
def auto_replies_are_well_formed():
    for seed in range(3):
        r = ask(tools=TOOLS, temperature=1.0, seed=seed, max_tokens=40)
        assert r.status_code == 200, r.text[:300]
        m = r.json()["choices"][0]["message"]
        if m.get("tool_calls"):
            for c in m["tool_calls"]:
                json.loads(c["function"]["arguments"])


def round_trip_messages(content=None):
    return [
        {"role": "user", "content": "What is the weather in Paris?"},
        {"role": "assistant", "content": content,
         "tool_calls": [{"id": "call_1", "type": "function",
                         "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris", "unit": "celsius"})}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": json.dumps({"temperature": 21, "sky": "clear"})},
    ]


@test
def tool_result_turns_are_templated():
    c = client()
    first = c.chat.completions.create(model=MODEL, messages=round_trip_messages()[:1], tools=TOOLS, max_tokens=4,
                                      temperature=0)
    second = c.chat.completions.create(model=MODEL, messages=round_trip_messages(), tools=TOOLS, max_tokens=4,
                                       temperature=0)
    # the call and its result are in the prompt: call:get_weather{city:<|"|>Paris<|"|>,unit:...}<tool_call|>
    # <|tool_response>response:get_weather{sky:...,temperature:21}<tool_response|> (31B template: no new turn)
    assert second.usage.prompt_tokens > first.usage.prompt_tokens + 20, (first.usage, second.usage)
    with http() as h:  # the SDK's own objects from a tool call, sent back as they came
        r = h.post("/v1/chat/completions", headers=auth(),
                   json={"model": MODEL, "messages": round_trip_messages(""), "tools": TOOLS, "max_tokens": 4})
        assert r.status_code == 200, r.text[:300]


@test
def bad_tool_requests_name_the_field():
    cases = [
        ({"tools": [{"type": "function", "function": {"name": "bad name"}}]}, "tools[0].function.name"),
        ({"tools": [{"type": "retrieval"}]}, "tools[0].type"),
        ({"tools": [WEATHER, WEATHER]}, "tools[1].function.name"),
        ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}},
         "tool_choice.function.name"),
        ({"tool_choice": "required"}, "tool_choice"),
        ({"tools": [WEATHER], "tool_choice": "sometimes"}, "tool_choice"),
        ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
            "x": {"type": "string", "pattern": "^a"}}}}}], "tool_choice": "required"}, "tools"),
        ({"tools": [WEATHER], "tool_choice": "required",
          "response_format": {"type": "json_object"}}, "tool_choice"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0].tool_call_id"),
        ({"messages": [{"role": "user", "content": "x", "tool_call_id": "a"}]}, "messages[0].tool_call_id"),
        ({"messages": [{"role": "assistant", "content": None, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{not json"}}]}]},
         "messages[0].tool_calls[0].function.arguments"),
        ({"reasoning_effort": "extreme"}, "reasoning_effort"),
        ({"chat_template_kwargs": {"enable_thinking": True, "foo": 1}}, "chat_template_kwargs.foo"),
    ]
    with http() as h:
        for extra, param in cases:
            body = chat_body("hi", **extra)
            r = h.post("/v1/chat/completions", headers=auth(), json=body)
            err = error_of(r, 400)
            assert err["param"] == param, (extra, err)
            if "pattern" in json.dumps(extra):
                assert "tools[0].function.parameters" in err["message"] and "pattern" in err["message"], err


@test
def thinking_switch_changes_the_prompt():
    with http() as h:
        n = {}
        for name, extra in (("off", {}), ("none", {"reasoning_effort": "none"}), ("high", {"reasoning_effort": "high"}),
                            ("kw", {"chat_template_kwargs": {"enable_thinking": True}}),
                            ("kw_off", {"reasoning_effort": "high", "chat_template_kwargs": {"enable_thinking": False}})):
            r = h.post("/v1/chat/completions", headers=auth(), json=chat_body("hi", max_tokens=2, **extra))
            assert r.status_code == 200, r.text[:300]
            n[name] = r.json()["usage"]["prompt_tokens"]
    # on: "<|turn>system\n<|think|>\n<turn|>\n" opens the prompt and the empty thought after "<|turn>model\n" goes
    assert n["off"] == n["none"] == n["kw_off"], n
    assert n["high"] == n["kw"] != n["off"], n


@test
def thought_channel_is_reasoning_not_content():
    # "<|channel>" forced at every step: the reply is one open thought, never content
    with http() as h:
        for stream in (False, True):
            body = chat_body("hi", max_tokens=6, logit_bias={"100": 100}, stream=stream,
                             chat_template_kwargs={"enable_thinking": True}, stream_options={"include_usage": True} if stream else None)
            r = h.post("/v1/chat/completions", headers=auth(), json=body)
            assert r.status_code == 200, r.text[:300]
            if stream:
                events = [json.loads(e) for e in sse_events(r) if e != "[DONE]"]
                content = "".join((e["choices"][0]["delta"].get("content") or "") for e in events if e["choices"])
                usage = events[-1]["usage"]
            else:
                content = r.json()["choices"][0]["message"]["content"]
                usage = r.json()["usage"]
            assert "<|channel>" not in (content or ""), content
            assert usage["completion_tokens_details"]["reasoning_tokens"] == usage["completion_tokens"] == 6, usage


@test
def forced_calls_may_follow_a_thought():
    # thinking on: the constraint lets "<|channel>" open the reply (here forced by logit_bias, so the thought never
    # closes and the reply is all reasoning); unforced, the calls come as before
    think = {"chat_template_kwargs": {"enable_thinking": True}}
    r = ask(tools=TOOLS, tool_choice="required", max_tokens=6, logit_bias={"100": 100}, **think)
    assert r.status_code == 200, r.text[:300]
    ch = r.json()["choices"][0]
    assert ch["finish_reason"] == "length" and not ch["message"].get("tool_calls"), ch
    assert r.json()["usage"]["completion_tokens_details"]["reasoning_tokens"] == 6, r.json()["usage"]
    for seed in range(2):
        r = ask(tools=TOOLS, tool_choice="required", temperature=1.0, seed=seed, **think)
        ch = r.json()["choices"][0]
        assert ch["finish_reason"] == "tool_calls", ch
        check_calls(ch["message"]["tool_calls"], {"get_weather", "search"})


if __name__ == "__main__":
    raise SystemExit(run_all())
