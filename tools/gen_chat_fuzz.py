#!/usr/bin/env python3
"""Random conversations rendered by jinja2 with the three Gemma 4 templates, in the form of
tests/golden/chat_gemma4.json, for differential testing of opencl/io/chat_gemma4.c beyond the committed corpus:

    .venv-hf/bin/python tools/gen_chat_fuzz.py OUT.json [COUNT [SEED]]
    build/tests/test_chat_gemma4 OUT.json

Conversations mix every message field the templates read (roles, string/list/odd content, tool calls with
object/string/odd arguments, tool results, reasoning, legacy tool_responses) with values of every JSON type,
strings with whitespace, quotes, unicode and control-token text, and tool schemas nested a few levels.
A third of them get one field the templates read replaced by a value of another type or removed.
Deterministic for a seed. Not part of `make test` (needs .venv-hf); its findings become corpus cases.
"""
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_chat_corpus as corpus  # noqa: E402

STRINGS = ["", " ", "Hi", "  padded \n", "\t\u3000wide\u00a0", "quote \" and ' both", "it's", "a\nb\r\nc",
           "<|turn>model", "<turn|>", "<|\"|>", "<|channel>thought\nx<channel|>y", "<channel|>", "<|channel>",
           "日本語", "🎉 emoji", "naïve Ünïcödé ÉCOLE", "back\\slash", "\x1f\x1c", "\u200b", "{\"a\": 1}", "null",
           "string", "STRING", "object", "array", "integer", "number", "boolean", "text", "image", "tool",
           "assistant", "user", "response", "Zeta", "alpha", "Beta"]
KEYS = ["a", "B", "c", "type", "description", "properties", "required", "nullable", "enum", "items", "name",
        "value", "Zeta", "émile", "Émile", "x y", "id"]


def rstr(r):
    return r.choice(STRINGS)


def rscalar(r):
    k = r.randrange(8)
    if k == 0:
        return None
    if k == 1:
        return r.random() < 0.5
    if k == 2:
        return r.choice([0, 1, -7, 42, 2 ** 40, -2 ** 53 - 1])
    if k == 3:
        return r.choice([0.0, -0.0, 0.1, 1.5, 100.0, 1e16, 1e-5, 1e-4, 123456.789, 1 / 3, 2.5e-300, 9.999e22])
    return rstr(r)


def rvalue(r, depth=0):
    if depth >= 3 or r.random() < 0.5:
        return rscalar(r)
    if r.random() < 0.5:
        return [rvalue(r, depth + 1) for _ in range(r.randrange(4))]
    return {r.choice(KEYS): rvalue(r, depth + 1) for _ in range(r.randrange(4))}


def rschema(r, depth=0):
    t = r.choice(["string", "integer", "number", "boolean", "object", "array", "STRING", ["string", "null"], None])
    s = {}
    if t is not None:
        s["type"] = t
    if r.random() < 0.5:
        s["description"] = rstr(r) if r.random() < 0.8 else rscalar(r)
    if r.random() < 0.3:
        s["enum"] = [rscalar(r) for _ in range(r.randrange(3))]
    if r.random() < 0.3:
        s["nullable"] = r.random() < 0.7
    if t in ("object", None) and depth < 3 and r.random() < 0.7:
        s["properties"] = {r.choice(KEYS): rschema(r, depth + 1) for _ in range(r.randrange(4))}
        if r.random() < 0.5:
            s["required"] = [r.choice(KEYS) for _ in range(r.randrange(3))]
    if t == "array" and depth < 3 and r.random() < 0.8:
        s["items"] = rschema(r, depth + 1) if r.random() < 0.8 else rvalue(r, 2)
    if r.random() < 0.2:
        s[r.choice(KEYS)] = rvalue(r, 2)
    return s


def rtool(r):
    fn = {"name": r.choice(["get_weather", "search", "odd_tool", "f"])}
    if r.random() < 0.9:
        fn["description"] = rstr(r)
    if r.random() < 0.8:
        fn["parameters"] = rschema(r) if r.random() < 0.9 else {"type": "object", "properties": {}}
    if r.random() < 0.2:
        fn["response"] = rschema(r)
    return {"type": "function", "function": fn}


def rcall(r):
    args = rvalue(r) if r.random() < 0.2 else ({r.choice(KEYS): rvalue(r, 1) for _ in range(r.randrange(4))}
                                                if r.random() < 0.7 else json.dumps({"q": rstr(r)}))
    c = {"type": "function", "function": {"name": r.choice(["get_weather", "search", "f"]), "arguments": args}}
    if r.random() < 0.7:
        c["id"] = r.choice(["c1", "c2", "c3"])
    return c


def rcontent(r, role):
    k = r.random()
    if k < 0.6:
        return rstr(r)
    if k < 0.85:
        parts = []
        for _ in range(r.randrange(4)):
            t = r.choice(["text", "text", "text", "image", "audio", "video", "file"])
            p = {"type": t}
            if t == "text":
                p["text"] = rstr(r)
            parts.append(p)
        return parts
    return r.choice([None, 5, 2.5, True, {}])


def rmessage(r, i):
    role = r.choice(["user", "user", "assistant", "assistant", "tool", "system", "developer", "model"])
    m = {"role": role}
    if r.random() < 0.9:
        m["content"] = rcontent(r, role)
    if role in ("assistant", "model") and r.random() < 0.5:
        m["tool_calls"] = [rcall(r) for _ in range(1 + r.randrange(3))]
    if role in ("assistant", "model") and r.random() < 0.3:
        m[r.choice(["reasoning", "reasoning_content"])] = rstr(r)
    if role in ("assistant", "model") and r.random() < 0.1:
        m["tool_responses"] = [{"name": "f", "response": rvalue(r, 1)} if r.random() < 0.7 else {"response": rstr(r)}]
    if role == "tool":
        if r.random() < 0.8:
            m["tool_call_id"] = r.choice(["c1", "c2", "c3", "zz"])
        if r.random() < 0.6:
            m["name"] = r.choice(["get_weather", "search", "other"])
    return m


READ_KEYS = ["role", "content", "tool_calls", "function", "name", "arguments", "id", "tool_call_id", "reasoning",
             "reasoning_content", "tool_responses", "response", "type", "text", "parameters", "properties",
             "required", "items", "description", "enum", "nullable"]


def dicts(v, out):
    if isinstance(v, dict):
        out.append(v)
        for x in v.values():
            dicts(x, out)
    elif isinstance(v, list):
        for x in v:
            dicts(x, out)
    return out


def mutate(r, c):
    """one field the templates read set to a value of another type (where jinja2 raises or prints repr)"""
    ds = dicts(c, [])
    if ds:
        d = r.choice(ds)
        k = r.choice(READ_KEYS)
        if r.random() < 0.2 and k in d:
            del d[k]
        else:
            d[k] = rvalue(r, 1)
    if r.random() < 0.1:
        c["tools"] = rvalue(r, 1)


def main():
    out = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    r = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    texts = {
        "gemma4": corpus.gguf_template(os.path.join(corpus.REF, "models", "ggml-vocab-gemma-4.gguf")),
        "gemma4-interleaved": corpus.read(os.path.join(corpus.REF, "models", "templates",
                                                       "google-gemma-4-31B-it-interleaved.jinja")),
        "gemma4-31b": corpus.read(os.path.join(corpus.REF, "models", "templates", "google-gemma-4-31B-it.jinja")),
    }
    compiled = {k: corpus._compile_jinja_template(v) for k, v in texts.items()}
    cases = []
    for n in range(count):
        msgs = [rmessage(r, i) for i in range(1 + r.randrange(6))]
        if r.random() < 0.4 and msgs[0]["role"] not in ("system", "developer"):
            msgs.insert(0, {"role": "system", "content": rstr(r)})
        c = {"name": f"fuzz_{n}", "messages": msgs}
        if r.random() < 0.4:
            c["tools"] = [rtool(r) for _ in range(1 + r.randrange(2))]
        if r.random() < 0.3:
            mutate(r, c)
        c["options"] = {"add_generation_prompt": r.random() < 0.8, "enable_thinking": r.random() < 0.4}
        c = json.loads(json.dumps(c, ensure_ascii=False))
        c["render"] = {k: corpus.render(compiled[k], c) for k in compiled}
        cases.append(c)
    doc = {"generator": "tools/gen_chat_fuzz.py", "templates": {}, "cases": cases}
    with open(out, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
    print(f"{out}: {count} conversations, {sum('error' in v for c in cases for v in c['render'].values())} refusals")


if __name__ == "__main__":
    main()
