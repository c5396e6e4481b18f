"""The official client libraries against the stack, unchanged but for base URL, key and our CA (issue 19): LangChain
(langchain-openai's ChatOpenAI), litellm and the openai SDK's parse / stream helpers. `test_clients.py gemma3` (from
tests/suites/e2e_api.sh, the 270M base model): LangChain's with_structured_output (json_schema whole and streamed,
json_mode; function_calling is Gemma 3's 400 on tools), litellm's response_format (a json_schema dict, a pydantic
class), a litellm chat completion whole and streamed and a text completion, and a prompt past --ctx 1024 mapped by
litellm to ContextWindowExceededError. `test_clients.py gemma4` (from tests/suites/e2e_tools.sh, the tiny random Gemma
4 with the real template): forced tool calls (the random model calls only when tool_choice forces one) through
LangChain's bind_tools, whole and streamed, its AIMessage and ToolMessage sent back for a second turn,
with_structured_output by function calling; litellm's tool_calls whole and streamed and its reasoning token count; the
openai SDK's chat.completions.parse with pydantic_function_tool and its chat.completions.stream helper's tool-call
events. Arguments are checked against the tool's JSON schema (python jsonschema) and the pydantic model."""
import json
import os
import sys
import warnings
from typing import Literal, Optional

import httpx
import jsonschema
import openai
import pydantic
from e2e import CERT, KEY, MODEL, URL, Owner, client, run_all, test

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch of the price list at import (no network)
import litellm  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langchain_core.utils.function_calling import convert_to_openai_tool  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402

# our CA: litellm.ssl_verify = CERT would do for chat (set before the first call: litellm caches its clients), but
# litellm 1.110's text-completion path ignores it; its shared httpx client serves both
litellm.client_session = httpx.Client(verify=CERT, timeout=120)
litellm.suppress_debug_info = True
# LangChain's structured stream serializes a parsed model into a field typed None: pydantic warns, harmlessly
warnings.filterwarnings("ignore", message="Pydantic serializer warnings")

GROUPS = {"gemma3": [], "gemma4": []}


def on(group):
    def add(fn):
        GROUPS[group].append(fn)
        return fn
    return add


def chat_model(**kw):
    """LangChain's ChatOpenAI on our server: its own httpx client trusting our CA"""
    return ChatOpenAI(model=MODEL, base_url=URL + "/v1", api_key=KEY, max_retries=0, timeout=120,
                      http_client=httpx.Client(verify=CERT, timeout=120), **kw)


def lite(**kw):
    return litellm.completion(model="openai/" + MODEL, api_base=URL + "/v1", api_key=KEY, max_retries=0, timeout=120, **kw)


def user(text):
    return [{"role": "user", "content": text}]


# ---- Gemma 3: structured output and plain completions -----------------------------------------------------------

class Colour(pydantic.BaseModel):
    colour: Literal["red", "green", "blue"]
    bright: bool


COLOUR_SHOT = 'JSON: {"colour": "blue", "bright": false}\nJSON:'  # json_mode sends no schema: the prompt shows one


@on("gemma3")
def langchain_structured_output_gives_the_pydantic_model():
    llm = chat_model(temperature=0, max_tokens=200)
    out = llm.with_structured_output(Owner, include_raw=True).invoke("An owner and pets.")  # the default: json_schema
    assert out["parsing_error"] is None and isinstance(out["parsed"], Owner), out
    assert out["raw"].response_metadata["finish_reason"] == "stop", out["raw"]
    # streamed (the SDK's stream helper underneath), strict
    parts = list(llm.with_structured_output(Colour, method="json_schema", strict=True).stream("A colour."))
    assert parts and isinstance(parts[-1], Colour), parts
    # json_mode sends {"type": "json_object"}: any object, so the prompt shows the shape and greedy follows it
    out = llm.with_structured_output(Colour, method="json_mode", include_raw=True).invoke(COLOUR_SHOT)
    assert isinstance(json.loads(out["raw"].content), dict), out["raw"].content
    assert out["parsing_error"] is None and isinstance(out["parsed"], Colour), out


@on("gemma3")
def langchain_function_calling_on_gemma3_is_a_400_naming_tools():
    try:
        chat_model(max_tokens=8).with_structured_output(Owner, method="function_calling").invoke("An owner.")
    except openai.BadRequestError as e:
        assert e.status_code == 400 and e.body["param"] == "tools" and "gemma3" in e.body["message"], e.body
    else:
        raise AssertionError("Gemma 3 answered a function-calling request")


@on("gemma3")
def litellm_plain_completion_whole_and_streamed():
    r = lite(messages=user("Why is the sky blue?"), max_tokens=6, temperature=0)
    ch = r.choices[0]
    assert ch.finish_reason == "length" and ch.message.role == "assistant" and ch.message.content, ch
    assert r.usage.completion_tokens == 6 and r.usage.total_tokens == r.usage.prompt_tokens + 6, r.usage
    chunks = list(lite(messages=user("Why is the sky blue?"), max_tokens=6, temperature=0, stream=True,
                       stream_options={"include_usage": True}))
    built = litellm.stream_chunk_builder(chunks)
    assert built.choices[0].message.content == ch.message.content, (built.choices[0].message, ch.message)
    assert built.choices[0].finish_reason == "length" and built.usage.completion_tokens == 6, built


SHIRT = {"type": "object", "properties": {"size": {"enum": ["S", "M", "L"]}, "sold_out": {"type": "boolean"}},
         "required": ["size", "sold_out"], "additionalProperties": False}


@on("gemma3")
def litellm_response_format_output_validates():
    r = lite(messages=user("A shirt."), max_tokens=40, temperature=0,
             response_format={"type": "json_schema", "json_schema": {"name": "shirt", "strict": True, "schema": SHIRT}})
    assert r.choices[0].finish_reason == "stop", r.choices[0]
    jsonschema.validate(json.loads(r.choices[0].message.content), SHIRT)
    # litellm turns a pydantic class into the json_schema format itself
    r = lite(messages=user("A colour."), max_tokens=20, temperature=0.8, seed=1, response_format=Colour)
    assert r.choices[0].finish_reason == "stop", r.choices[0]
    Colour.model_validate_json(r.choices[0].message.content)


@on("gemma3")
def litellm_text_completion():
    r = litellm.text_completion(model="text-completion-openai/" + MODEL, api_base=URL + "/v1", api_key=KEY,
                                prompt="The capital of France is", max_tokens=4, temperature=0, max_retries=0)
    with client() as c:
        want = c.completions.create(model=MODEL, prompt="The capital of France is", max_tokens=4, temperature=0)
    assert r.choices[0].text == want.choices[0].text and r.choices[0].finish_reason == "length", (r, want)
    assert r.usage.completion_tokens == 4, r.usage


@on("gemma3")
def litellm_maps_a_long_prompt_to_context_window_exceeded():
    for stream in (False, True):
        try:
            r = lite(messages=user("word " * 1500), max_tokens=8, stream=stream)  # --ctx 1024
            list(r) if stream else None
        except litellm.ContextWindowExceededError as e:
            assert "maximum context length is 1024 tokens" in str(e), e
        else:
            raise AssertionError(f"no ContextWindowExceededError (stream={stream})")


# ---- Gemma 4: tool calls ------------------------------------------------------------------------------------------

class GetWeather(pydantic.BaseModel):
    """Current weather in a city"""
    city: str = pydantic.Field(description="City name", max_length=20)
    unit: Literal["celsius", "fahrenheit"]
    days: Optional[int] = None


class SearchArgs(pydantic.BaseModel):
    query: str = pydantic.Field(max_length=30)
    recent: bool


@tool(args_schema=SearchArgs)
def search(query: str, recent: bool) -> str:
    """Search the web"""
    return "no results"


LC_TOOLS = [GetWeather, search]
MODELS = {"GetWeather": GetWeather, "search": SearchArgs}
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in map(convert_to_openai_tool, LC_TOOLS)}


def check_args(name, args, names=tuple(MODELS)):
    """a call's arguments (a dict) validate against the declared schema and the pydantic model"""
    assert name in names, (name, names)
    jsonschema.validate(args, SCHEMAS[name])
    return MODELS[name].model_validate(args)


def check_lc_calls(msg, names=tuple(MODELS)):
    assert isinstance(msg, AIMessage) and msg.tool_calls and not msg.invalid_tool_calls, msg
    assert msg.response_metadata["finish_reason"] == "tool_calls", msg.response_metadata
    for c in msg.tool_calls:
        assert c["id"] and c["type"] == "tool_call", c
        check_args(c["name"], c["args"], names)


@on("gemma4")
def langchain_bind_tools_with_a_forced_choice():
    llm = chat_model(temperature=1.0, max_tokens=120)
    for seed, choice, names in ((0, "any", MODELS), (1, "required", MODELS), (2, "GetWeather", ["GetWeather"]),
                                (3, "search", ["search"]), (4, {"type": "function", "function": {"name": "search"}}, ["search"])):
        msg = llm.bind_tools(LC_TOOLS, tool_choice=choice, seed=seed).invoke("What is the weather in Paris?")
        check_lc_calls(msg, names)
    msg = llm.bind_tools(LC_TOOLS, tool_choice="GetWeather", parallel_tool_calls=False, seed=5).invoke("Weather?")
    check_lc_calls(msg, ["GetWeather"])
    assert len(msg.tool_calls) == 1, msg.tool_calls


@on("gemma4")
def langchain_tool_round_trip():
    llm = chat_model(temperature=1.0, max_tokens=120, seed=7)
    ask = HumanMessage("What is the weather in Paris?")
    first = llm.bind_tools(LC_TOOLS, tool_choice="any").invoke([ask])
    check_lc_calls(first)
    results = [ToolMessage(json.dumps({"temperature": 21, "sky": "clear"}), tool_call_id=c["id"]) for c in first.tool_calls]
    second = llm.bind_tools(LC_TOOLS).invoke([ask, first, *results], max_tokens=4)  # an exception unless 200
    assert isinstance(second, AIMessage) and second.response_metadata["finish_reason"] in ("stop", "length", "tool_calls")
    # the call and its result were templated into the prompt, not dropped
    grew = second.usage_metadata["input_tokens"] - first.usage_metadata["input_tokens"]
    assert grew > first.usage_metadata["output_tokens"], (first.usage_metadata, second.usage_metadata)


@on("gemma4")
def langchain_streamed_tool_call_assembles():
    llm = chat_model(temperature=1.0, max_tokens=120, seed=3).bind_tools(LC_TOOLS, tool_choice="any")
    whole = llm.invoke("What is the weather in Paris?")
    acc = None
    for chunk in llm.stream("What is the weather in Paris?"):
        assert not chunk.content, f"content in a forced tool call: {chunk.content!r}"
        acc = chunk if acc is None else acc + chunk
    assert acc.tool_call_chunks and acc.response_metadata["finish_reason"] == "tool_calls", acc
    for c in acc.tool_call_chunks:
        check_args(c["name"], json.loads(c["args"]))
    check_lc_calls(AIMessage(content="", tool_calls=acc.tool_calls, response_metadata=acc.response_metadata))
    assert [(c["name"], c["args"]) for c in acc.tool_calls] == [(c["name"], c["args"]) for c in whole.tool_calls], \
        (acc.tool_calls, whole.tool_calls)  # the same seed: the same calls streamed and whole


@on("gemma4")
def langchain_structured_output_by_function_calling():
    llm = chat_model(temperature=1.0, max_tokens=120, seed=2)
    out = llm.with_structured_output(GetWeather, method="function_calling", include_raw=True).invoke("Weather?")
    assert out["parsing_error"] is None and isinstance(out["parsed"], GetWeather), out
    check_lc_calls(out["raw"], ["GetWeather"])


OPENAI_TOOLS = [convert_to_openai_tool(t) for t in LC_TOOLS]


@on("gemma4")
def litellm_forced_tool_call_whole_and_streamed():
    kw = dict(messages=user("What is the weather in Paris?"), tools=OPENAI_TOOLS, max_tokens=120, temperature=1.0)
    for seed, choice in ((0, "required"), (1, {"type": "function", "function": {"name": "search"}})):
        whole = lite(tool_choice=choice, seed=seed, **kw)
        built = litellm.stream_chunk_builder(list(lite(tool_choice=choice, seed=seed, stream=True, **kw)))
        for r in (whole, built):
            ch = r.choices[0]
            assert ch.finish_reason == "tool_calls" and ch.message.tool_calls, ch
            assert not ch.message.content, ch.message
            for c in ch.message.tool_calls:
                assert c.id and c.type == "function", c
                check_args(c.function.name, json.loads(c.function.arguments),
                           ["search"] if isinstance(choice, dict) else MODELS)
        calls = [[(c.function.name, json.loads(c.function.arguments)) for c in r.choices[0].message.tool_calls]
                 for r in (whole, built)]
        assert calls[0] == calls[1], calls


@on("gemma4")
def litellm_passes_reasoning_effort_and_reports_reasoning_tokens():
    # "<|channel>" forced at every step: all of the reply is thought, none of it content
    r = lite(messages=user("hi"), max_tokens=6, reasoning_effort="high", logit_bias={"100": 100})
    assert r.usage.completion_tokens_details.reasoning_tokens == r.usage.completion_tokens == 6, r.usage
    assert not r.choices[0].message.content, r.choices[0].message


class Forecast(pydantic.BaseModel):
    """Weather forecast for a city"""
    city: str = pydantic.Field(max_length=20)
    unit: Literal["celsius", "fahrenheit"]
    days: Optional[int]


@on("gemma4")
def openai_parse_gives_pydantic_tool_arguments():
    c = client()
    tools = [openai.pydantic_function_tool(Forecast), openai.pydantic_function_tool(SearchArgs, name="search")]
    kinds = {"Forecast": Forecast, "search": SearchArgs}
    for seed, choice, names in ((0, {"type": "function", "function": {"name": "Forecast"}}, ["Forecast"]),
                                (1, "required", list(kinds)), (2, "required", list(kinds))):
        r = c.chat.completions.parse(model=MODEL, messages=user("Forecast for Paris?"), tools=tools,
                                     tool_choice=choice, max_tokens=120, temperature=1.0, seed=seed)
        ch = r.choices[0]
        assert ch.finish_reason == "tool_calls" and ch.message.tool_calls, ch
        for call in ch.message.tool_calls:
            assert call.function.name in names, (call, names)
            assert isinstance(call.function.parsed_arguments, kinds[call.function.name]), call
            params = tools[list(kinds).index(call.function.name)]["function"]["parameters"]
            jsonschema.validate(json.loads(call.function.arguments), params)


@on("gemma4")
def openai_stream_helper_emits_tool_call_events():
    c = client()
    fn = openai.pydantic_function_tool(Forecast)
    done = []
    with c.chat.completions.stream(model=MODEL, messages=user("Forecast for Paris?"), tools=[fn],
                                   tool_choice="required", max_tokens=120, temperature=1.0, seed=3) as s:
        for ev in s:
            if ev.type == "tool_calls.function.arguments.done":
                done.append(ev)
            assert ev.type != "content.delta" or not ev.delta, f"content in a forced tool call: {ev.delta!r}"
        final = s.get_final_completion()
    calls = final.choices[0].message.tool_calls
    assert done and len(done) == len(calls) and final.choices[0].finish_reason == "tool_calls", (done, final)
    for ev, call in zip(done, calls):
        assert ev.name == call.function.name == "Forecast" and ev.arguments == call.function.arguments, (ev, call)
        assert isinstance(ev.parsed_arguments, Forecast) and ev.parsed_arguments == call.function.parsed_arguments, ev


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in GROUPS:
        raise SystemExit(f"usage: {sys.argv[0]} {'|'.join(GROUPS)}")
    for fn in GROUPS[sys.argv[1]]:
        test(fn)
    raise SystemExit(run_all())
