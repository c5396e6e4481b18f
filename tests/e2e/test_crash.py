"""Abnormal ends and bounded work through nginx with two workers (tests/suites/e2e_crash.sh): a
stream whose worker is killed (-9) mid-stream raises in the official openai client (the response
is visibly cut: no final chunk); a request whose worker dies before its first byte is retried on
the other worker and completes; a
request sent right after kill -9 of a busy worker is served by the other worker (the time until
the restarted one serves is printed); a request without max_tokens stops at --default-max-tokens;
in the deadline phase, generations (and each of a request's choices) end at --request-timeout as
finish_reason "length"; in the
rerun phase, a request that outlives nginx's read timeout runs on one worker only."""
import json
import os
import signal
import sys
import threading
import time

import httpx
from e2e import MODEL, WORKER_LOG, auth, chat_body, client, http, run_all, serving_pids as ready_pids, sse_events, test, \
    wait_for, worker_pids as workers

CAP = int(os.environ.get("CRASH_CAP", "16"))
TIMEOUT = int(os.environ.get("CRASH_TIMEOUT", "0"))  # the stack's --request-timeout
PHASE = sys.argv[1]


def serving(_base=None):
    """the one worker with a generation (the pool view of /health), or None"""
    with http() as h:
        r = h.get("/health")
    busy = [w["pid"] for w in r.json().get("pool", []) if w["state"] == "ok" and w["active"] + w["queue_depth"] > 0]
    return busy[0] if len(busy) == 1 else None


def kill_when_serving(base):
    pid = wait_for(lambda: serving(base), 30, "the request to reach a worker")
    os.kill(pid, signal.SIGKILL)
    return pid, time.monotonic()


def await_restart(killed, t_kill):
    def new_worker_serves():
        fresh = [p for p in workers() if p != killed and p not in BEFORE]
        return fresh and fresh[0] in ready_pids()
    wait_for(new_worker_serves, 120, "the restarted worker to answer 200")
    return time.monotonic() - t_kill


BEFORE = []
RESTART = []


if PHASE == "deadline":
    @test
    def streamed_request_ends_at_the_deadline_as_length():
        t0 = time.monotonic()
        with http() as h, h.stream("POST", "/v1/chat/completions", headers=auth(),
                                   json=chat_body("Write a long story about rivers.", max_tokens=900, stream=True,
                                                  stream_options={"include_usage": True})) as r:
            assert r.status_code == 200, r.status_code
            ev = sse_events(r)
        took = time.monotonic() - t0
        assert ev[-1] == "[DONE]", ev[-3:]
        usage = json.loads(ev[-2])["usage"]
        fin = json.loads(ev[-3])["choices"][0]["finish_reason"]
        assert fin == "length" and usage["completion_tokens"] < 900, (fin, usage)
        assert took < TIMEOUT + 10, f"took {took:.1f}s with --request-timeout {TIMEOUT}"

    @test
    def whole_request_ends_at_the_deadline_as_length():
        t0 = time.monotonic()
        with http() as h:
            r = h.post("/v1/chat/completions", headers=auth(),
                       json=chat_body("Write a long story about rivers.", max_tokens=900))
        took = time.monotonic() - t0
        assert r.status_code == 200, r.text[:200]
        j = r.json()
        assert j["choices"][0]["finish_reason"] == "length" and j["usage"]["completion_tokens"] < 900, j["usage"]
        assert took < TIMEOUT + 10, f"took {took:.1f}s with --request-timeout {TIMEOUT}"


    @test
    def every_choice_ends_at_the_deadline_as_length():
        t0 = time.monotonic()
        with http() as h, h.stream("POST", "/v1/chat/completions", headers=auth(),
                                   json=chat_body("Write a long story about rivers.", max_tokens=900, stream=True, n=2,
                                                  temperature=1.0, seed=1, stream_options={"include_usage": True})) as r:
            assert r.status_code == 200, r.status_code
            ev = sse_events(r)
        took = time.monotonic() - t0
        assert ev[-1] == "[DONE]", ev[-3:]
        chunks = [json.loads(e) for e in ev[:-1]]
        fins = sorted((c["choices"][0]["index"], c["choices"][0]["finish_reason"]) for c in chunks
                      if c["choices"] and c["choices"][0]["finish_reason"])
        assert fins == [(0, "length"), (1, "length")], fins
        assert chunks[-1]["usage"]["completion_tokens"] < 1800, chunks[-1]["usage"]
        assert took < TIMEOUT + 10, f"took {took:.1f}s with --request-timeout {TIMEOUT}"


if PHASE == "crash":
    @test
    def two_workers_up():
        BEFORE[:] = workers()
        assert len(BEFORE) == 2, BEFORE
        wait_for(lambda: len(ready_pids()) == 2, 120, "both workers ready")


    @test
    def kill9_mid_stream_raises_in_the_openai_client():
        # the worker sends the stream chunked and its last chunk only when the handler ends; nginx
        # (proxy_pass, unbuffered) cuts the client's response short when the body ends unterminated
        BEFORE[:] = workers()
        base = None
        stream = client().chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "Write a long story about rivers."}],
            max_tokens=600, temperature=0, stream=True)
        chunks, finish, killed, raised, t_kill = 0, None, None, None, None
        try:
            for ch in stream:
                chunks += 1
                if ch.choices and ch.choices[0].finish_reason:
                    finish = ch.choices[0].finish_reason
                if chunks == 5:
                    killed = serving(base)
                    assert killed, "cannot tell which worker serves the stream"
                    t_kill = time.monotonic()
                    os.kill(killed, signal.SIGKILL)
        except AssertionError:
            raise
        except Exception as e:  # what the SDK surfaces for a cut stream (httpx.RemoteProtocolError)
            raised = e
        assert killed, f"the stream ended after {chunks} chunks, before the kill"
        assert raised is not None, f"the stream ended cleanly after the kill ({chunks} chunks, finish {finish})"
        assert finish is None, finish
        print(f"  after kill -9 at chunk 5 the client raised {type(raised).__name__}: {str(raised)[:120]}", flush=True)
        await_restart(killed, t_kill)


    @test
    def worker_dead_before_first_byte_is_retried_elsewhere():
        BEFORE[:] = workers()
        base = None
        out = {}

        def run():  # a long prompt: its prefill gives time to stop the worker before any output
            try:
                with http() as h, h.stream("POST", "/v1/chat/completions", headers=auth(),
                                           json=chat_body("rivers and lakes " * 70, max_tokens=8, stream=True)) as r:
                    out["t_head"] = time.monotonic()
                    out["status"] = r.status_code
                    out["events"] = sse_events(r)
            except Exception as e:
                out["error"] = e
        t = threading.Thread(target=run)
        t.start()
        pid = wait_for(lambda: serving(base), 30, "the request to reach a worker")
        os.kill(pid, signal.SIGSTOP)
        t_stop = time.monotonic()
        head_first = "t_head" in out
        os.kill(pid, signal.SIGKILL)
        t.join(120)
        assert not head_first, "the worker answered before it could be stopped (prefill too quick to test)"
        assert "error" not in out, f"the client saw {out.get('error')!r}"
        assert out["status"] == 200 and out["events"][-1] == "[DONE]", (out.get("status"), out.get("events", [])[-2:])
        print(f"  retried on the other worker: the client had its head {out['t_head'] - t_stop:.2f}s after the kill",
              flush=True)
        await_restart(pid, t_stop)


    @test
    def request_after_kill9_is_served_by_the_other_worker():
        BEFORE[:] = workers()
        base = None
        out = {}

        def run():
            try:
                with http() as h, h.stream("POST", "/v1/chat/completions", headers=auth(),
                                           json=chat_body("Write a long story about rivers.", max_tokens=60,
                                                          stream=True)) as r:
                    for _ in r.iter_bytes():
                        pass
            except httpx.HTTPError:
                pass
        t = threading.Thread(target=run)
        t.start()
        killed, t_kill = kill_when_serving(base)
        with http() as h:
            r = h.post("/v1/chat/completions", json=chat_body(max_tokens=2), headers=auth())
        assert r.status_code == 200, f"request after the kill: {r.status_code} {r.text[:200]}"
        took = await_restart(killed, t_kill)
        print(f"  restart-to-serving after kill -9: {took:.2f}s", flush=True)
        t.join(120)  # cut, or (killed before its first token) retried on the other worker


    @test
    def missing_max_tokens_is_capped():
        body = chat_body("Write a long story about rivers.")
        del body["max_tokens"]
        with http() as h:
            r = h.post("/v1/chat/completions", json=body, headers=auth())
        assert r.status_code == 200, r.text[:200]
        j = r.json()
        assert j["usage"]["completion_tokens"] == CAP and j["choices"][0]["finish_reason"] == "length", j["usage"]


if PHASE == "rerun":
    @test
    def nginx_read_timeout_does_not_rerun_the_request():
        with http() as h:
            r = h.post("/v1/chat/completions", headers=auth(),
                       json=chat_body("Write a long story about rivers.", max_tokens=100))
        assert r.status_code >= 500, f"status {r.status_code}: the generation beat nginx's read timeout"
        rid = r.headers["x-request-id"]

        def runs():
            return sum(f"rid={rid} POST" in line for line in open(WORKER_LOG))
        wait_for(runs, 240, "the worker to finish the request")
        try:  # a copy re-sent to the other worker one read timeout later ends soon after
            wait_for(lambda: runs() > 1, 30, "a second run")
        except AssertionError:
            pass
        assert runs() == 1, f"{runs()} workers ran request {rid}"


if __name__ == "__main__":
    raise SystemExit(run_all())
