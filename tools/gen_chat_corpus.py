#!/usr/bin/env python3
"""Writes tests/golden/chat_gemma4.json, chat_gemma3.json and chat_qwen35.json: conversations and the text
jinja2 renders from the real chat templates, checked byte for byte by tests/opencl/io/test_chat_gemma4.c and
tests/opencl/io/test_chat.c against clgemma's native renderers (opencl/io/chat*.c); and tests/golden/chat_checks.json:
template texts and whether jinja2 parses them, for the structural check of unknown templates.

    .venv-hf/bin/python tools/gen_chat_corpus.py [llama.cpp-dir]

llama.cpp-dir defaults to .cache/llama.cpp (made by deploy/fetch_llama_ref.sh). Templates:
  gemma4              tokenizer.chat_template of llama.cpp's models/ggml-vocab-gemma-4.gguf (read with gguf-py)
  gemma4-interleaved  llama.cpp's models/templates/google-gemma-4-31B-it-interleaved.jinja
  gemma4-31b          llama.cpp's models/templates/google-gemma-4-31B-it.jinja
  gemma3              google/gemma-3-*-it's tokenizer_config.json chat_template (GEMMA3_TEMPLATE below)
  qwen35              llama.cpp's models/templates/Qwen3.5-4B.jinja (every conversation, and QWEN_CASES; rendered
                      with enable_thinking False where a case does not set it, as clgemma's options always do)

Rendering is transformers' own: transformers.utils.chat_template_utils._compile_jinja_template (jinja2's
ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, loopcontrols, raise_exception,
strftime_now, tojson, as apply_chat_template uses it), then template.render(messages=..., tools=...,
documents=None, add_generation_prompt=..., bos_token="<bos>", **options) on the conversation exactly as it
is read back from the JSON written here (so dict order and int/float types are what the C test sees).
Messages are passed as they are: transformers' apply_chat_template would also copy a message's
`reasoning` into `reasoning_content`; mapping API fields onto template fields is the caller's job, not
the template's. A conversation the template refuses (raise_exception, undefined access, a type error) is
recorded with "error": the C renderer must refuse it too. Deterministic: no clock, no randomness.

Gemma 3 cases are the conversations that have no system or developer message after the first one
(clgemma refuses those for Gemma 3, a family that was never trained on them) and no tools-only fields that
would make them meaningless; Gemma 3's template ignores tools, tool calls and reasoning.
"""
import hashlib
import json
import os
import sys

try:
    from transformers.utils.chat_template_utils import _compile_jinja_template
    RENDERER = "transformers " + __import__("transformers").__version__
except ImportError:  # the same environment, built here
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def _compile_jinja_template(text):
        def raise_exception(message):
            raise jinja2.exceptions.TemplateError(message)

        def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
            return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
        env.filters["tojson"] = tojson
        env.globals["raise_exception"] = raise_exception
        return env.from_string(text)
    RENDERER = "jinja2 (transformers' settings)"  # same renderings; no {% generation %} tag for the checks

import jinja2

REF = ".cache/llama.cpp"

GEMMA3_TEMPLATE = (
    "{{ bos_token }}\n"
    "{%- if messages[0]['role'] == 'system' -%}\n"
    "    {%- if messages[0]['content'] is string -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}\n"
    "    {%- else -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\\n\\n' -%}\n"
    "    {%- endif -%}\n"
    "    {%- set loop_messages = messages[1:] -%}\n"
    "{%- else -%}\n"
    "    {%- set first_user_prefix = \"\" -%}\n"
    "    {%- set loop_messages = messages -%}\n"
    "{%- endif -%}\n"
    "{%- for message in loop_messages -%}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    "        {{ raise_exception(\"Conversation roles must alternate user/assistant/user/assistant/...\") }}\n"
    "    {%- endif -%}\n"
    "    {%- if (message['role'] == 'assistant') -%}\n"
    "        {%- set role = \"model\" -%}\n"
    "    {%- else -%}\n"
    "        {%- set role = message['role'] -%}\n"
    "    {%- endif -%}\n"
    "    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else \"\") }}\n"
    "    {%- if message['content'] is string -%}\n"
    "        {{ message['content'] | trim }}\n"
    "    {%- elif message['content'] is iterable -%}\n"
    "        {%- for item in message['content'] -%}\n"
    "            {%- if item['type'] == 'image' -%}\n"
    "                {{ '<start_of_image>' }}\n"
    "            {%- elif item['type'] == 'text' -%}\n"
    "                {{ item['text'] | trim }}\n"
    "            {%- endif -%}\n"
    "        {%- endfor -%}\n"
    "    {%- else -%}\n"
    "        {{ raise_exception(\"Invalid content type\") }}\n"
    "    {%- endif -%}\n"
    "    {{ '<end_of_turn>\\n' }}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "    {{'<start_of_turn>model\\n'}}\n"
    "{%- endif -%}\n"
)


def gguf_template(path):
    sys.path.insert(0, os.path.join(REF, "gguf-py"))
    from gguf import GGUFReader
    f = GGUFReader(path).fields["tokenizer.chat_template"]
    return bytes(f.parts[f.data[0]]).decode("utf-8")


def read(path):
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def fnv1a64(text):
    """FNV-1a 64 of the UTF-8 text less one trailing newline (jinja2 drops it: keep_trailing_newline=False),
    as opencl/io/chat.c identifies templates."""
    b = text.encode("utf-8")
    if b.endswith(b"\n"):
        b = b[:-1]
    h = 0xcbf29ce484222325
    for c in b:
        h = ((h ^ c) * 0x100000001b3) & 0xffffffffffffffff
    return f"{h:016x}"


# ------------------------------------------------------------------ the conversations

def tool(name, description, parameters=None, **extra):
    fn = {"name": name, "description": description}
    if parameters is not None:
        fn["parameters"] = parameters
    fn.update(extra)
    return {"type": "function", "function": fn}


WEATHER = tool("get_weather", "Current weather for a city.", {
    "type": "object",
    "properties": {
        "location": {"type": "string", "description": "City and country, e.g. Paris, France"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit"},
    },
    "required": ["location"],
})
SEARCH = tool("search", "Search the web.", {
    "type": "object",
    "properties": {"query": {"type": "string"}, "limit": {"type": "integer", "description": "At most this many"}},
    "required": ["query", "limit"],
})
NO_PARAMS = tool("get_time", "The current time.")
EMPTY_PARAMS = tool("ping", "Checks the connection.", {"type": "object", "properties": {}})
NESTED = tool("create_event", "Creates a calendar event.", {
    "type": "object",
    "properties": {
        "title": {"type": "string", "description": "Event title"},
        "when": {
            "type": "object", "description": "Start and end",
            "properties": {"start": {"type": "string", "description": "ISO 8601"}, "end": {"type": "string"},
                           "all_day": {"type": "boolean"}},
            "required": ["start"],
        },
        "attendees": {
            "type": "array", "description": "People invited",
            "items": {"type": "object", "properties": {"email": {"type": "string"}, "name": {"type": "string"},
                                                       "optional": {"type": "boolean", "nullable": True}},
                      "required": ["email"]},
        },
        "tags": {"type": "array", "items": {"type": "string", "enum": ["work", "home"]}},
        "priority": {"type": "integer", "enum": [1, 2, 3], "minimum": 1, "maximum": 3},
        "notes": {"type": "string", "nullable": True},
    },
    "required": ["title", "when"],
})
ODD_SCHEMA = tool("odd", "Schemas as people write them.", {
    "type": "object",
    "properties": {
        "Zeta": {"type": "number", "description": "Upper-case key"},
        "alpha": {"type": "NUMBER"},
        "beta": {"type": ["string", "null"], "description": "A type list"},
        "matrix": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}},
        "choice": {"type": "array", "items": {"type": ["string", "integer"], "description": "Mixed"}},
        "meta": {"type": "object", "additionalProperties": {"type": "string"}},
        "bare": {"type": "object"},
        "type": {"type": "string", "description": "A parameter named like a schema key"},
        "ratio": {"type": "number", "default": 0.5, "description": 1.5},
        "flag": {"type": "boolean", "description": ""},
        "items": {"type": "array", "items": {}},
        "Émile": {"type": "string", "description": "Non-ASCII key"},
        "émile": {"type": "string"},
    },
    "required": ["alpha", "Zeta"],
})
QUOTES = tool("say", "Says \"hello\" and 'bye'.\nSecond line: naïve café — 日本語 🎉\tend", {
    "type": "object",
    "properties": {"text": {"type": "string", "description": "What to say, e.g. \"hi\" <|\"|> or \\n"},
                   "lang": {"type": "string", "enum": ["en", "fr \"quoted\"", "日本語"]}},
    "required": ["text"],
})
WITH_RESPONSE = tool("lookup", "Looks a key up.", {"type": "object", "properties": {"key": {"type": "string"}}},
                     response={"type": "object", "description": "The value found"})
RESPONSE_STRING = tool("echo", "Echoes.", {"type": "object", "properties": {"s": {"type": "string"}}, "required": ["s"]},
                       response={"type": "string", "description": "Same text"})


def call(name, arguments, id=None):
    c = {"type": "function", "function": {"name": name, "arguments": arguments}}
    if id is not None:
        c = {"id": id, **c}
    return c


U = lambda c: {"role": "user", "content": c}
A = lambda c: {"role": "assistant", "content": c}
S = lambda c: {"role": "system", "content": c}

CASES = [
    ("user_only", [U("Hello!")], {}, {"add_generation_prompt": True}),
    ("user_only_no_generation_prompt", [U("Hello!")], {}, {"add_generation_prompt": False}),
    ("user_only_options_absent", [U("Hello!")], {}, {}),
    ("system_user", [S("You are terse."), U("Name three colors.")], {}, {"add_generation_prompt": True}),
    ("developer_user", [{"role": "developer", "content": "Answer in French."}, U("Hi")], {},
     {"add_generation_prompt": True}),
    ("whitespace_trimmed", [S(" \n\tYou are terse.\u3000\n"), U("  \u00a0Hi there \n"), A("\n Hello! \u2003"),
                            U("\r\nAgain\x1f")], {}, {"add_generation_prompt": True}),
    ("multi_turn", [U("What is 2+2?"), A("4."), U("And 3+3?"), A("6."), U("Thanks!")], {},
     {"add_generation_prompt": True}),
    ("multi_turn_ends_with_assistant", [U("Complete: the sky is"), A("blue")], {}, {"add_generation_prompt": False}),
    ("thinking_on", [S("You are a careful solver."), U("Is 221 prime?")], {},
     {"add_generation_prompt": True, "enable_thinking": True}),
    ("thinking_on_no_system", [U("Is 97 prime?")], {}, {"add_generation_prompt": True, "enable_thinking": True}),
    ("thinking_on_no_generation_prompt", [U("Hi"), A("Hello")], {},
     {"add_generation_prompt": False, "enable_thinking": True}),
    ("thinking_off_explicit", [S("Be brief."), U("Hi")], {}, {"add_generation_prompt": True, "enable_thinking": False}),
    ("reasoning_effort_is_not_read", [U("Hi")], {},
     {"add_generation_prompt": True, "enable_thinking": True, "reasoning_effort": "low"}),
    ("thoughts_in_assistant_content", [
        U("What is 6*7?"), A("<|channel>thought\nSix sevens are forty-two.<channel|>42"), U("And 6*8?")], {},
     {"add_generation_prompt": True, "enable_thinking": True}),
    ("several_thought_blocks", [
        U("Go"), A("Before <|channel>a<channel|> middle <|channel>b\n<channel|>  after  "), U("More")], {},
     {"add_generation_prompt": True}),
    ("unterminated_channel_text", [U("x"), A("text<channel|>tail<|channel>never closed"), U("y")], {},
     {"add_generation_prompt": True}),
    ("reasoning_content_in_history", [
        U("Weather in Paris?"),
        {"role": "assistant", "content": None, "reasoning_content": "I should call the tool.",
         "tool_calls": [call("get_weather", {"location": "Paris, France"}, "call_1")]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"temp\": 18}"},
        {"role": "assistant", "content": "It is 18 degrees.", "reasoning_content": "Done."}], [WEATHER],
     {"add_generation_prompt": True, "enable_thinking": True}),
    ("reasoning_before_last_user_dropped", [
        U("First"), {"role": "assistant", "content": "", "reasoning_content": "old thoughts",
                     "tool_calls": [call("get_time", {})]},
        {"role": "tool", "content": "12:00", "name": "get_time"}, U("Second")], [NO_PARAMS],
     {"add_generation_prompt": True, "enable_thinking": True}),
    ("reasoning_field", [
        U("Time?"), {"role": "assistant", "reasoning": "Use the clock.", "content": None,
                     "tool_calls": [call("get_time", {}, "t1")]}], [NO_PARAMS],
     {"add_generation_prompt": True, "enable_thinking": True}),
    ("reasoning_without_tool_calls", [U("Q"), {"role": "assistant", "content": "A", "reasoning_content": "hidden"},
                                      U("Q2")], {}, {"add_generation_prompt": True}),
    ("tools_simple", [U("Weather in Oslo?")], [WEATHER], {"add_generation_prompt": True}),
    ("tools_with_system_and_thinking", [S("Use tools when needed."), U("Search cats")], [WEATHER, SEARCH],
     {"add_generation_prompt": True, "enable_thinking": True}),
    ("tools_nested_objects_arrays_enums_nullable", [U("Plan a meeting")], [NESTED], {"add_generation_prompt": True}),
    ("tools_odd_schemas", [U("Do it")], [ODD_SCHEMA], {"add_generation_prompt": True}),
    ("tools_no_parameters", [U("What time is it?")], [NO_PARAMS, EMPTY_PARAMS], {"add_generation_prompt": True}),
    ("tools_quotes_newlines_unicode", [U("Say hi")], [QUOTES], {"add_generation_prompt": True}),
    ("tools_response_declarations", [U("Look up a")], [WITH_RESPONSE, RESPONSE_STRING], {"add_generation_prompt": True}),
    ("tools_empty_list", [U("Hi")], [], {"add_generation_prompt": True}),
    ("tool_call_object_arguments", [
        U("Weather in Paris?"), {"role": "assistant", "content": None,
                                 "tool_calls": [call("get_weather", {"unit": "celsius", "location": "Paris"}, "c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": "18 degrees, sunny"}], [WEATHER],
     {"add_generation_prompt": True}),
    ("tool_call_string_arguments", [
        U("Weather in Rome?"), {"role": "assistant", "content": None, "tool_calls": [
            call("get_weather", "{\"location\": \"Rome\", \"unit\": \"celsius\"}", "c2")]},
        {"role": "tool", "tool_call_id": "c2", "content": "{\"temp\": 25, \"sky\": \"clear\"}"}], [WEATHER],
     {"add_generation_prompt": True}),
    ("tool_calls_several_responses_in_a_row", [
        S("You can call tools."), U("Weather in Paris and search news"),
        {"role": "assistant", "content": "Let me check both.", "tool_calls": [
            call("get_weather", {"location": "Paris"}, "a"), call("search", {"query": "news", "limit": 3}, "b")]},
        {"role": "tool", "tool_call_id": "a", "name": "get_weather", "content": "Sunny"},
        {"role": "tool", "tool_call_id": "b", "name": "search", "content": [
            {"type": "text", "text": "Result one. "}, {"type": "text", "text": "Result two."}]},
        A("Paris is sunny; two news results."), U("Thanks")], [WEATHER, SEARCH], {"add_generation_prompt": True}),
    ("tool_call_argument_values", [
        U("Values"), {"role": "assistant", "content": None, "tool_calls": [call("odd", {
            "int": 42, "neg": -7, "big": 9007199254740993, "zero": 0, "float": 0.1, "whole_float": 100.0,
            "tiny": 1.5e-7, "huge": 1e16, "huger": 1.2345678901234567e+300, "negzero": -0.0, "third": 1 / 3,
            "t": True, "f": False, "none": None, "s": "quote \" and <|\"|> and 'single'", "nl": "a\nb",
            "uni": "日本 🎉 ñ", "list": [1, "two", 3.5, None, [True]], "obj": {"B": 1, "a": {"z": [], "y": {}}},
            "Upper": "sorted with lower", "empty": ""}, "v1")]},
        {"role": "tool", "tool_call_id": "v1", "content": "ok"}], [ODD_SCHEMA], {"add_generation_prompt": True}),
    ("tool_call_pending_generation_prompt", [
        U("Weather?"), {"role": "assistant", "content": None,
                        "tool_calls": [call("get_weather", {"location": "Oslo"}, "p")]}], [WEATHER],
     {"add_generation_prompt": True}),
    ("tool_call_content_empty_string", [
        U("Time?"), {"role": "assistant", "content": "", "tool_calls": [call("get_time", {}, "e")]},
        {"role": "tool", "tool_call_id": "e", "content": "noon"}, A("It is noon.")], [NO_PARAMS],
     {"add_generation_prompt": False}),
    ("tool_response_json_content", [
        U("Look up x"), {"role": "assistant", "content": None, "tool_calls": [call("lookup", {"key": "x"}, "j")]},
        {"role": "tool", "tool_call_id": "j", "content": "{\"key\": \"x\", \"value\": [1, 2, {\"deep\": null}]}"}],
     [WITH_RESPONSE], {"add_generation_prompt": True}),
    ("tool_response_matched_by_id_without_name", [
        U("Two lookups"), {"role": "assistant", "content": None, "tool_calls": [
            call("lookup", {"key": "a"}, "id_a"), call("echo", {"s": "b"}, "id_b")]},
        {"role": "tool", "tool_call_id": "id_b", "content": "b"},
        {"role": "tool", "tool_call_id": "id_a", "content": "A"}], [WITH_RESPONSE, RESPONSE_STRING],
     {"add_generation_prompt": True}),
    ("tool_response_no_ids", [
        U("Time?"), {"role": "assistant", "tool_calls": [call("get_time", {})]},
        {"role": "tool", "content": "noon"}], [NO_PARAMS], {"add_generation_prompt": True}),
    ("tool_response_unmatched_name", [
        U("Time?"), {"role": "assistant", "tool_calls": [call("get_time", {}, "x1")]},
        {"role": "tool", "tool_call_id": "other", "name": "clock", "content": "noon"}], [NO_PARAMS],
     {"add_generation_prompt": True}),
    ("tool_response_unmatched_no_name", [
        U("Time?"), {"role": "assistant", "tool_calls": [call("get_time", {}, "x1")]},
        {"role": "tool", "tool_call_id": "other", "content": "noon"}], [NO_PARAMS], {"add_generation_prompt": True}),
    ("tool_response_non_string_content", [
        U("n?"), {"role": "assistant", "tool_calls": [call("get_time", {}, "n")]},
        {"role": "tool", "tool_call_id": "n", "content": None},
        {"role": "tool", "tool_call_id": "n", "content": 12.5}], [NO_PARAMS], {"add_generation_prompt": True}),
    ("legacy_tool_responses", [
        U("Weather?"), {"role": "assistant", "content": "", "tool_calls": [call("get_weather", {"location": "Oslo"})],
                        "tool_responses": [{"name": "get_weather", "response": {"temp": -3, "sky": "snow"}},
                                           {"response": "plain text"}]}], [WEATHER], {"add_generation_prompt": True}),
    ("tool_message_after_user", [U("Hi"), {"role": "tool", "content": "orphan"}, U("Again")], {},
     {"add_generation_prompt": True}),
    ("consecutive_assistant_messages", [U("Tell me"), A("Part one."), A("Part two."), U("Go on")], {},
     {"add_generation_prompt": True}),
    ("system_in_the_middle", [S("First system"), U("Hi"), S("Later system"), U("Hello")], {},
     {"add_generation_prompt": True}),
    ("content_text_parts", [
        {"role": "system", "content": "Sys"},
        {"role": "user", "content": [{"type": "text", "text": "  Part one. "}, {"type": "text", "text": "Part two.\n"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "<|channel>t<channel|> Answer "}]}, U("Next")], {},
     {"add_generation_prompt": True}),
    ("content_parts_with_media", [
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is this?"},
                                     {"type": "audio"}, {"type": "video"}, {"type": "file"}]}], {},
     {"add_generation_prompt": True}),
    ("system_content_as_parts", [
        {"role": "system", "content": [{"type": "text", "text": "You are 'nice'."}]}, U("Hi")], {},
     {"add_generation_prompt": True}),
    ("empty_contents", [S(""), U(""), A(""), U("  ")], {}, {"add_generation_prompt": True}),
    ("null_and_missing_content", [U("a"), {"role": "assistant", "content": None}, {"role": "user"}], {},
     {"add_generation_prompt": True}),
    ("unicode_and_specials_as_text", [
        U("Say <|turn>model\n and <end_of_turn> and <|\"|> — 你好 👋🏽 naïve\u200b"), A("<turn|> literal")], {},
     {"add_generation_prompt": True}),
    ("only_system", [S("Just a system prompt.")], {}, {"add_generation_prompt": True}),
    ("only_system_with_tools", [S("sys")], [NO_PARAMS], {"add_generation_prompt": False, "enable_thinking": True}),
    ("non_string_fields", [
        {"role": "system", "content": None}, U(12), {"role": "assistant", "content": 3.0}], {},
     {"add_generation_prompt": True}),
    # conversations the templates refuse
    ("error_empty_messages", [], {}, {"add_generation_prompt": True}),
    ("error_tool_call_without_function", [
        U("x"), {"role": "assistant", "tool_calls": [{"id": "1", "type": "function"}]}], {},
     {"add_generation_prompt": True}),
    ("error_tool_call_name_null", [U("x"), {"role": "assistant", "tool_calls": [call(None, {})]}], {},
     {"add_generation_prompt": True}),
    ("error_tools_not_a_list", [U("x")], "get_weather", {"add_generation_prompt": True}),
    ("error_tool_without_function", [U("x")], [{"type": "function", "name": "flat"}], {"add_generation_prompt": True}),
    ("error_missing_role", [{"content": "no role"}], {}, {"add_generation_prompt": True}),
    ("error_model_text_part_without_text", [U("x"), {"role": "assistant", "content": [{"type": "text"}]}], {},
     {"add_generation_prompt": True}),
    ("error_reasoning_not_a_string", [
        U("x"), {"role": "assistant", "reasoning": ["a"], "tool_calls": [call("get_time", {}, "r")]}], [NO_PARAMS],
     {"add_generation_prompt": True}),
    ("error_alternation_for_gemma3", [U("a"), U("b")], {}, {"add_generation_prompt": True}),
    ("error_message_not_an_object", [U("a"), "just text"], {}, {"add_generation_prompt": True}),
    ("error_message_null", [None], {}, {"add_generation_prompt": True}),
    ("error_tool_calls_not_a_list", [U("a"), {"role": "assistant", "tool_calls": "abc"}], {},
     {"add_generation_prompt": True}),
    ("tool_call_ids_compared_as_python", [
        U("a"), {"role": "assistant", "tool_calls": [call("get_time", {}, 1)]},
        {"role": "tool", "content": "r", "tool_call_id": 1.0}], [NO_PARAMS], {"add_generation_prompt": True}),
    ("legacy_tool_responses_odd_shapes", [
        U("a"), {"role": "assistant", "tool_responses": "ab"}, U("b"), {"role": "assistant", "tool_responses": {"k": 1}},
        U("c"), {"role": "assistant", "tool_responses": [{"name": "f", "response": [1, {"b": None}]}]}], {},
     {"add_generation_prompt": True}),
    ("error_legacy_tool_responses_number", [U("a"), {"role": "assistant", "tool_responses": 5}], {},
     {"add_generation_prompt": True}),
    ("tool_result_parts_odd", [
        U("a"), {"role": "assistant", "tool_calls": [call("get_time", {}, "i")]},
        {"role": "tool", "tool_call_id": "i", "content": [{"type": "image"}, {"type": "text", "text": "x"}]},
        {"role": "tool", "tool_call_id": "i", "content": {}}], [NO_PARAMS], {"add_generation_prompt": True}),
    ("error_tool_result_part_not_an_object", [
        U("a"), {"role": "assistant", "tool_calls": [call("get_time", {}, "i")]},
        {"role": "tool", "tool_call_id": "i", "content": [{"type": "text", "text": "x"}, "s"]}], [NO_PARAMS],
     {"add_generation_prompt": True}),
    ("error_tool_result_text_part_without_text", [
        U("a"), {"role": "assistant", "tool_calls": [call("get_time", {}, "i")]},
        {"role": "tool", "tool_call_id": "i", "content": [{"type": "text"}]}], [NO_PARAMS],
     {"add_generation_prompt": True}),
    ("error_function_declaration_null", [U("a")], [{"type": "function", "function": None}],
     {"add_generation_prompt": True}),
    ("error_function_declaration_string", [U("a")], [{"type": "function", "function": "has a response"}],
     {"add_generation_prompt": True}),
    ("function_declaration_response_string", [U("a")], [tool("x", "d", response="text")],
     {"add_generation_prompt": True}),
    ("error_parameters_properties_list", [U("a")], [tool("x", "d", {"type": "object", "properties": [1]})],
     {"add_generation_prompt": True}),
    ("items_type_and_required_odd", [U("a")], [tool("x", "d", {"type": "object", "properties": {
        "a": {"type": "array", "items": {"type": {"k": 1}, "required": "ab", "nullable": None}}}})],
     {"add_generation_prompt": True}),
    ("error_parameters_required_number", [U("a")], [tool("x", "d", {"type": "object", "required": 5})],
     {"add_generation_prompt": True}),
    ("error_tools_number", [U("a")], 5, {"add_generation_prompt": True}),
]

GEMMA4_TEMPLATES = ["gemma4", "gemma4-interleaved", "gemma4-31b"]

TR = lambda c: {"role": "tool", "content": c}
# Qwen 3.5's template on top of CASES: think blocks after the last real query, reasoning from
# reasoning_content or split off at </think>, tool calls with arguments of every JSON type, tool responses
# grouped in user turns, user turns that are only tool responses (multi-step), vision parts, and its refusals
QWEN_CASES = [
    ("q_reasoning_content_after_query", [U("Is 7 prime?"), {"role": "assistant", "content": "Yes.",
                                                            "reasoning_content": "  \n7 has no divisors.\n "}],
     {}, {"add_generation_prompt": False}),
    ("q_reasoning_before_last_query_dropped", [
        U("a"), {"role": "assistant", "content": "b", "reasoning_content": "r1"}, U("c")], {},
     {"add_generation_prompt": True, "enable_thinking": True}),
    ("q_think_split_from_content", [U("q"), A("<think>\n\nthe reasoning\n\n</think>\n\nthe answer")], {},
     {"add_generation_prompt": False}),
    ("q_think_split_odd", [U("q"), A("pre <think>a<think>\nb\n</think>mid</think>\n\nend </think>")], {},
     {"add_generation_prompt": False}),
    ("q_reasoning_content_keeps_think_text", [
        U("q"), {"role": "assistant", "content": "x</think>y", "reasoning_content": "r"}], {},
     {"add_generation_prompt": False}),
    ("q_tool_calls_every_type", [
        U("Weather?"), {"role": "assistant", "content": "Checking.", "tool_calls": [
            call("get_weather", {"city": "Paris", "days": 3, "hourly": False, "ratio": 0.5, "none": None,
                                 "list": [1, "a", None, True], "obj": {"k": "v\n\"q\"", "n": [1.0, 1e20]}}, "c1"),
            call("get_time", {}, "c2")]},
        TR("sunny"), TR("12:00"), A("Sunny at noon.")], [WEATHER], {"add_generation_prompt": True}),
    ("q_tool_call_without_content", [U("a"), {"role": "assistant", "content": "  ", "tool_calls": [
        {"name": "f", "arguments": {"x": "1"}}]}, TR("r")], {}, {"add_generation_prompt": True}),
    ("q_error_tool_call_arguments_none", [U("a"), {"role": "assistant", "tool_calls": [call("f", None)]}], {},
     {"add_generation_prompt": True}),
    ("q_multi_step_tool_responses_in_user_turn", [
        U("Plan a trip."), {"role": "assistant", "content": "", "reasoning_content": "need weather",
                            "tool_calls": [call("get_weather", {"city": "Rome"})]},
        U("<tool_response>\nrain\n</tool_response>"),
        {"role": "assistant", "content": "Take an umbrella.", "reasoning_content": "it rains"}], [WEATHER],
     {"add_generation_prompt": False}),
    ("q_tool_first_message", [TR("orphan"), U("hi")], {}, {"add_generation_prompt": True}),
    ("q_vision_parts", [S([{"type": "text", "text": "Sys."}]), U([
        {"type": "image", "image": "x.png"}, {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:"}}, {"type": "video", "video": "v.mp4"}, "a text part"])],
     {}, {"add_generation_prompt": True}),
    ("q_error_vision_part_plain_string", [U([{"type": "text", "text": "x"}, "plain"])], {},
     {"add_generation_prompt": True}),
    ("q_tool_call_no_arguments_key", [U("a"), {"role": "assistant", "tool_calls": [
        {"type": "function", "function": {"name": "f"}}, {"name": "g", "arguments": {"k": [{"a": 1}]}}]}, TR("r")],
     {}, {"add_generation_prompt": True}),
    ("q_tools_with_system", [S("  Be brief.  "), U("hi")], [WEATHER, NO_PARAMS], {"add_generation_prompt": True}),
    ("q_tools_with_empty_system", [S("   "), U("hi")], [WEATHER], {"add_generation_prompt": True}),
    ("q_thinking_off", [U("hi")], {}, {"add_generation_prompt": True, "enable_thinking": False}),
    ("q_content_none", [U("hi"), {"role": "assistant", "content": None}], {}, {"add_generation_prompt": False}),
    ("q_error_system_image", [S([{"type": "image"}]), U("hi")], {}, {"add_generation_prompt": True}),
    ("q_error_system_not_first", [U("hi"), S("late")], {}, {"add_generation_prompt": True}),
    ("q_error_no_query", [A("hello"), U("<tool_response>x</tool_response>")], {}, {"add_generation_prompt": True}),
    ("q_error_developer_role", [{"role": "developer", "content": "d"}, U("hi")], {}, {"add_generation_prompt": True}),
    ("q_error_content_number", [U(5)], {}, {"add_generation_prompt": True}),
    ("q_error_content_mapping", [U({"text": "x"})], {}, {"add_generation_prompt": True}),
    ("q_error_part_unknown", [U([{"type": "audio", "audio": "a.wav"}])], {}, {"add_generation_prompt": True}),
    ("q_error_part_number", [U([5])], {}, {"add_generation_prompt": True}),
    ("q_error_arguments_string", [U("a"), {"role": "assistant", "tool_calls": [call("f", "{\"x\": 1}")]}], {},
     {"add_generation_prompt": True}),
    ("q_error_tool_call_name_missing", [U("a"), {"role": "assistant", "tool_calls": [{"arguments": {}}]}], {},
     {"add_generation_prompt": True}),
    ("q_error_empty", [], {}, {"add_generation_prompt": True}),
]
QWEN_TEMPLATE = "Qwen3.5-4B.jinja"

# Template texts for the structural check (opencl/io/chat_check.c): whether jinja2 (transformers' environment)
# parses each is recorded, and the C check must agree. Expressions are not the check's business, so every
# text here has valid expressions.
TEMPLATE_CHECKS = [
    "{% raw %}{% if %}{{ {% endraw %}",
    "{% set x %}a{% endset %}{{ x }}",
    "{% set x = '%}' %}{{ x }}",
    "{{ '}}' }}{{ \"{%\" }}",
    "{% for a in b %}{{ a }}{% else %}none{% endfor %}",
    "{% if a %}x{% elif b %}y{% else %}z{% endif %}",
    "{%- macro m(a) -%}{{ a }}{%- endmacro -%}{{ m(1) }}",
    "{% for a in b %}{% if a %}{% break %}{% endif %}{% continue %}{% endfor %}",
    "{# a comment with {% if %} in it #}text",
    "{% generation %}x{% endgeneration %}",
    "plain text { not a tag } %} #} }}",
    "{% filter upper %}x{% endfilter %}",
    "{% macro m() %}{{ caller() }}{% endmacro %}{% call m() %}x{% endcall %}",
    "{%+ if a +%}x{%- endif -%}",
    "{% if a %}x",
    "{% for a in b %}x{% endif %}",
    "{{ x",
    "{% if a %",
    "{# x",
    "x{% endfor %}",
    "{% else %}",
    "{% if a %}{% for b in c %}{% endif %}{% endfor %}",
    "{% do x.append(1) %}",
    "{% elif a %}",
    "{% for a in b %}{% elif c %}{% endfor %}",
    "{% %}",
    "{% raw %}x",
    "{% macro m() %}x{% endfor %}{% endmacro %}",
    "{{ 'never closed }}",
]


def render(compiled, conv, thinking_default=None):
    kwargs = dict(conv["options"])
    if thinking_default is not None:  # clgemma's chat_opts always define it (0 when the request does not ask)
        kwargs.setdefault("enable_thinking", thinking_default)
    try:
        text = compiled.render(messages=conv["messages"], tools=conv.get("tools"), documents=None,
                               bos_token="<bos>", **kwargs)
        return {"expected": text}
    except (jinja2.exceptions.TemplateError, TypeError, AttributeError, IndexError, KeyError, ValueError) as e:
        return {"error": f"{type(e).__name__}: {e}"}


def gemma3_applicable(conv):
    msgs = conv["messages"]
    return not any(isinstance(m, dict) and m.get("role") in ("system", "developer") for m in msgs[1:])


def main():
    global REF
    if len(sys.argv) > 1:
        REF = sys.argv[1]
    texts = {
        "gemma4": gguf_template(os.path.join(REF, "models", "ggml-vocab-gemma-4.gguf")),
        "gemma4-interleaved": read(os.path.join(REF, "models", "templates", "google-gemma-4-31B-it-interleaved.jinja")),
        "gemma4-31b": read(os.path.join(REF, "models", "templates", "google-gemma-4-31B-it.jinja")),
        "gemma3": GEMMA3_TEMPLATE,
        "qwen35": read(os.path.join(REF, "models", "templates", QWEN_TEMPLATE)),
    }
    sources = {
        "gemma4": "tokenizer.chat_template of llama.cpp models/ggml-vocab-gemma-4.gguf (llama-cpp-python 0.3.36 sdist)",
        "gemma4-interleaved": "llama.cpp models/templates/google-gemma-4-31B-it-interleaved.jinja (same sdist)",
        "gemma4-31b": "llama.cpp models/templates/google-gemma-4-31B-it.jinja (same sdist)",
        "gemma3": "google/gemma-3-*-it tokenizer_config.json chat_template",
        "qwen35": f"llama.cpp models/templates/{QWEN_TEMPLATE} (same sdist)",
    }
    compiled = {k: _compile_jinja_template(v) for k, v in texts.items()}
    # the conversations as the C test reads them: through JSON and back
    convs = []
    for name, messages, tools, options in CASES + QWEN_CASES:
        c = {"name": name, "messages": messages}
        if tools:
            c["tools"] = tools
        c["options"] = options
        convs.append(json.loads(json.dumps(c, ensure_ascii=False)))
    header = {"generator": "tools/gen_chat_corpus.py", "renderer": RENDERER, "jinja2": jinja2.__version__,
              "bos_token": "<bos>"}
    checks = []
    for text in TEMPLATE_CHECKS:
        try:
            _compile_jinja_template(text)
            checks.append({"text": text, "parses": True})
        except jinja2.exceptions.TemplateSyntaxError as e:
            checks.append({"text": text, "parses": False, "error": str(e)})
    with open("tests/golden/chat_checks.json", "w", encoding="utf-8", newline="\n") as f:
        json.dump(dict(header, checks=checks), f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"tests/golden/chat_checks.json: {len(checks)} templates, {sum(not c['parses'] for c in checks)} do not parse")
    qwen_only = {c[0] for c in QWEN_CASES}
    for out, names in (("tests/golden/chat_gemma4.json", GEMMA4_TEMPLATES), ("tests/golden/chat_gemma3.json", ["gemma3"]),
                       ("tests/golden/chat_qwen35.json", ["qwen35"])):
        doc = dict(header)
        doc["templates"] = {k: {"source": sources[k], "fnv1a64": fnv1a64(texts[k]),
                                "sha256": hashlib.sha256(texts[k].encode()).hexdigest(), "text": texts[k]}
                            for k in names}
        cases = []
        for c in convs:
            if names == ["gemma3"] and not gemma3_applicable(c):
                continue
            if (c["name"] in qwen_only) != (names == ["qwen35"]) and c["name"] in qwen_only:
                continue
            r = dict(c)
            r["render"] = {k: render(compiled[k], c, False if k == "qwen35" else None) for k in names}
            cases.append(r)
        doc["cases"] = cases
        with open(out, "w", encoding="utf-8", newline="\n") as f:
            json.dump(doc, f, ensure_ascii=False, indent=1)
            f.write("\n")
        n_err = sum("error" in v for r in cases for v in r["render"].values())
        print(f"{out}: {len(cases)} conversations x {len(names)} templates, {n_err} refused")


if __name__ == "__main__":
    main()
