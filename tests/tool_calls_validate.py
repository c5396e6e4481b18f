"""Validates the outputs of tools/constrain_walk --tools with a parser of Gemma 4's call syntax written
from the chat template, not from our C code:
    <|tool_call>call:NAME{key:VALUE,...}<tool_call|>   (one or more, nothing else)
VALUE: <|"|>raw text<|"|>, a JSON number, true, false, null, [VALUE,...], {key:VALUE,...} with bare keys.
Each call is checked: NAME is one of the tools (the --only one), the arguments validate against the
function's parameters (jsonschema's Draft202012Validator), keys of declared objects come in the
template's dictsort order (lower-cased, ties in the schema's order) and are declared, one call
unless --parallel (then 1..8).
    python tests/tool_calls_validate.py TOOLS_DIR OUT_DIR LABEL [--only NAME] [--parallel]
Outputs are records: byte count, newline, bytes, newline. Prints "PASS tools_<label>_<file>" or
"FAIL ...: why" per output file; exit 1 on a failure."""
import json
import os
import re
import sys

from jsonschema import Draft202012Validator

from constrain_validate import out_files, report

CALL, END, QUOTE = "<|tool_call>", "<tool_call|>", '<|"|>'
NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
MAX_CALLS = 8


class Bad(Exception):
    pass


class Obj:
    """An object as written: its (key, value) pairs in order."""

    def __init__(self, pairs):
        self.pairs = pairs


class Parser:
    def __init__(self, text):
        self.t, self.i = text, 0

    def expect(self, s):
        if not self.t.startswith(s, self.i):
            raise Bad(f"expected {s!r} at {self.i}: {self.t[self.i:self.i + 40]!r}")
        self.i += len(s)

    def calls(self):
        out = []
        while True:
            self.expect(CALL)
            self.expect("call:")
            j = self.t.find("{", self.i)
            if j <= self.i:
                raise Bad(f"no function name at {self.i}")
            name = self.t[self.i:j]
            self.i = j
            out.append((name, self.obj()))
            self.expect(END)
            if self.i == len(self.t):
                return out

    def value(self):
        t, i = self.t, self.i
        if t.startswith(QUOTE, i):
            j = t.find(QUOTE, i + len(QUOTE))
            if j < 0:
                raise Bad(f"string at {i} does not end")
            self.i = j + len(QUOTE)
            return t[i + len(QUOTE):j]
        if t.startswith("{", i):
            return self.obj()
        if t.startswith("[", i):
            self.i += 1
            items = []
            if t.startswith("]", self.i):
                self.i += 1
                return items
            while True:
                items.append(self.value())
                if t.startswith("]", self.i):
                    self.i += 1
                    return items
                self.expect(",")
        for word, v in (("true", True), ("false", False), ("null", None)):
            if t.startswith(word, i):
                self.i += len(word)
                return v
        m = NUMBER.match(t, i)
        if not m:
            raise Bad(f"no value at {i}: {t[i:i + 40]!r}")
        self.i = m.end()
        return json.loads(m.group())

    def obj(self):
        self.expect("{")
        pairs = []
        if self.t.startswith("}", self.i):
            self.i += 1
            return Obj(pairs)
        while True:
            j = self.t.find(":", self.i)
            key = self.t[self.i:j] if j > self.i else ""
            if not key or any(s in key for s in (QUOTE, CALL, END, "{", "}", ",")):
                raise Bad(f"no bare key at {self.i}: {self.t[self.i:self.i + 40]!r}")
            self.i = j + 1
            pairs.append((key, self.value()))
            if self.t.startswith("}", self.i):
                self.i += 1
                return Obj(pairs)
            self.expect(",")


def plain(v):
    """The parsed value as JSON data; repeated keys are an error."""
    if isinstance(v, Obj):
        d = {}
        for k, x in v.pairs:
            if k in d:
                raise Bad(f"key {k!r} repeats")
            d[k] = plain(x)
        return d
    if isinstance(v, list):
        return [plain(x) for x in v]
    return v


def resolve(root, ref):
    """A "#/..." JSON pointer into the parameters document."""
    node = root
    for part in ref[1:].split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def order_problem(v, schema, validator):
    """None when every object written for a schema with properties has declared keys in dictsort order."""
    while isinstance(schema, dict) and "$ref" in schema:
        schema = resolve(validator.schema, schema["$ref"])
    if not isinstance(schema, dict):
        return None
    alts = schema.get("anyOf") or schema.get("oneOf")
    if alts:
        probs = [order_problem(v, a, validator) for a in alts if validator.evolve(schema=a).is_valid(plain(v))]
        return None if not probs or None in probs else probs[0]
    if isinstance(v, Obj):
        keys = [k for k, _ in v.pairs]
        props = schema.get("properties")
        if "enum" in schema or "const" in schema:
            lows = [k.lower() for k in keys]
            return None if lows == sorted(lows) else f"literal keys {keys} not in dictsort order"
        if props is None:
            return None
        index = {k: n for n, k in enumerate(props)}
        if any(k not in index for k in keys):
            return f"undeclared key among {keys}"
        want = sorted(keys, key=lambda k: (k.lower(), index[k]))
        if keys != want:
            return f"keys {keys} not in dictsort order {want}"
        for k, x in v.pairs:
            p = order_problem(x, props[k], validator)
            if p:
                return p
    elif isinstance(v, list):
        prefix = schema.get("prefixItems", [])
        for n, x in enumerate(v):
            p = order_problem(x, prefix[n] if n < len(prefix) else schema.get("items", True), validator)
            if p:
                return p
    return None


def functions(path, only):
    with open(path, encoding="utf-8") as f:
        tools = json.load(f)
    out = {}
    for t in tools:
        fn = t["function"]
        params = fn.get("parameters") or {"type": "object"}
        if only is None or fn["name"] == only:
            out[fn["name"]] = (params, Draft202012Validator(params))
    return out


def records(path):
    data, recs, i = open(path, "rb").read(), [], 0
    while i < len(data):
        nl = data.index(b"\n", i)
        n = int(data[i:nl])
        recs.append(data[nl + 1:nl + 1 + n])
        if data[nl + 1 + n:nl + 2 + n] != b"\n":
            raise Bad(f"record {len(recs) - 1} is not followed by a newline")
        i = nl + 2 + n
    return recs


def check(raw, fns, parallel):
    text = raw.decode("utf-8")
    calls = Parser(text).calls()
    if not parallel and len(calls) != 1:
        raise Bad(f"{len(calls)} calls without parallel")
    if len(calls) > MAX_CALLS:
        raise Bad(f"{len(calls)} calls")
    for name, args in calls:
        if name not in fns:
            raise Bad(f"function {name!r} is not allowed")
        params, validator = fns[name]
        err = next(iter(validator.iter_errors(plain(args))), None)
        if err is not None:
            raise Bad(f"arguments of {name} invalid: {err.message[:200]}")
        p = order_problem(args, params, validator)
        if p:
            raise Bad(f"arguments of {name}: {p}")
    return len(calls)


def main():
    tools_dir, out_dir, label = sys.argv[1:4]
    opts = sys.argv[4:]
    only = opts[opts.index("--only") + 1] if "--only" in opts else None
    parallel = "--parallel" in opts
    failed = 0
    for path, base, test in out_files(out_dir, "tools", label):
        fns = functions(os.path.join(tools_dir, base), only)
        problems, n_calls, recs = [], 0, []
        try:
            recs = records(path)
        except (ValueError, Bad) as e:
            problems.append(f"unreadable output file: {e}")
        for i, raw in enumerate(recs):
            try:
                n_calls += check(raw, fns, parallel)
            except (Bad, UnicodeDecodeError) as e:
                problems.append(f"output {i} ({e}): {raw[:200]!r}")
        failed += report(test, problems, len(recs), f"{len(recs)} outputs, {n_calls} calls valid")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
