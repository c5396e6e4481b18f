"""Helpers of the end-to-end tests: the stack's coordinates (from tests/e2e/lib.sh), clients, and
a runner that prints one "PASS name" / "FAIL name: why" line per test, as tests/run_all.sh counts."""
import json
import os
import sys
import time
import traceback
from typing import List, Literal

import httpx
import openai
import pydantic

URL = os.environ["E2E_URL"]
KEY = os.environ["E2E_KEY"]
CERT = os.environ["E2E_CERT"]
MODEL = os.environ["E2E_MODEL_ID"]
MASTER_PID = int(os.environ["E2E_MASTER_PID"])
ACCESS_LOG = os.environ["E2E_ACCESS_LOG"]
WORKER_LOG = os.environ["E2E_WORKER_LOG"]


# a nested pydantic model (its JSON schema has $defs and $ref) for structured output through the client libraries
class Pet(pydantic.BaseModel):
    kind: Literal["cat", "dog"]
    name: str = pydantic.Field(max_length=16)


class Owner(pydantic.BaseModel):
    name: str = pydantic.Field(max_length=20)
    pets: List[Pet] = pydantic.Field(max_length=2)


_tests = []


def test(fn):
    _tests.append(fn)
    return fn


def run_all():
    failed = 0
    for fn in _tests:
        t0 = time.monotonic()
        try:
            fn()
            print(f"PASS {fn.__name__} ({time.monotonic() - t0:.1f}s)", flush=True)
        except Exception as e:  # a failed assertion or any error fails this test only
            failed += 1
            why = str(e).replace("\n", " ")[:400] or type(e).__name__
            print(f"FAIL {fn.__name__}: {why}", flush=True)
            traceback.print_exc(file=sys.stdout)
    return 1 if failed else 0


def client(**kw):
    """the official OpenAI client, unchanged but for base_url and our CA"""
    return openai.OpenAI(base_url=URL + "/v1", api_key=KEY, max_retries=0, timeout=120,
                         http_client=httpx.Client(verify=CERT, timeout=120), **kw)


def http(**kw):
    return httpx.Client(base_url=URL, verify=CERT, timeout=120, **kw)


def auth(key=None):
    return {"Authorization": f"Bearer {key or KEY}"}


def chat_body(content="Why is the sky blue?", **kw):
    body = {"model": MODEL, "messages": [{"role": "user", "content": content}], "temperature": 0, "max_tokens": 8}
    body.update(kw)
    return body


def sse_events(resp):
    """the data: payloads of an event stream, checking the framing as it goes (comments skipped)"""
    events = []
    buf = ""
    for chunk in resp.iter_text():
        buf += chunk
        while "\n\n" in buf:
            block, buf = buf.split("\n\n", 1)
            lines = block.split("\n")
            if all(line.startswith(":") for line in lines):
                continue  # a comment (the worker's heartbeat while queued or in prefill)
            assert len(lines) == 1 and lines[0].startswith("data: "), f"bad SSE block {block!r}"
            events.append(lines[0][6:])
    assert buf == "", f"stream ended inside an event: {buf!r}"
    return events


def error_of(resp, status):
    assert resp.status_code == status, f"status {resp.status_code} (want {status}): {resp.text[:300]}"
    assert resp.headers.get("content-type", "").startswith("application/json"), resp.headers.get("content-type")
    body = resp.json()
    err = body["error"]
    assert set(err) >= {"message", "type", "param", "code"}, f"error object {err}"
    assert err["message"], "empty message"
    return err


WORKER_LABELS = ("worker", "device")


def metric_samples(text, per_worker=False):
    """{(name, frozenset(labels)): value} via prometheus_client's own text parser; unless per_worker,
    the pool's totals: the worker/device labels every sample carries are dropped and the workers summed"""
    from prometheus_client.parser import text_string_to_metric_families
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            labels = s.labels if per_worker else {k: v for k, v in s.labels.items() if k not in WORKER_LABELS}
            key = (s.name, frozenset(labels.items()))
            out[key] = out.get(key, 0) + s.value
    return out


def metrics(per_worker=False):
    with http() as h:
        r = h.get("/metrics")
        assert r.status_code == 200, r.status_code
        return metric_samples(r.text, per_worker)


def wait_for(cond, timeout, what):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def dumps(o):
    return json.dumps(o, ensure_ascii=False)


def worker_pids():
    """pids of the master's children (the workers)"""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if int(open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()[1]) == MASTER_PID:
                    out.append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    return sorted(out)


def serving_pids():
    """pids of the workers /health's pool view says are ready (any worker answers for all of them)"""
    with http() as h:
        r = h.get("/health")
    if r.status_code != 200:
        return set()
    return {w["pid"] for w in r.json()["pool"] if w["state"] == "ok"}
