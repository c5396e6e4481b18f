"""Worker lifecycle through nginx: a crashed worker is restarted by the master; SIGTERM during a
stream lets it finish (new requests get 503) and then the process exits; past --drain-timeout a
stream is cut with an error event and no [DONE]. Run by tests/suites/e2e_drain.sh, which checks exit codes."""
import json
import os
import signal
import sys
import threading
import time

from e2e import MASTER_PID, auth, chat_body, http, run_all, sse_events, test, wait_for, error_of

PHASE = sys.argv[1]


def health():
    with http() as h:
        r = h.get("/health")
        return r.status_code, r.json()


def stream_in_thread(max_tokens, out):
    def run():
        try:
            with http() as h, h.stream("POST", "/v1/chat/completions", headers=auth(),
                                       json=chat_body("Write a long story about rivers.", max_tokens=max_tokens,
                                                      stream=True)) as r:
                out["status"] = r.status_code
                events = []
                buf = ""
                for chunk in r.iter_text():
                    buf += chunk
                    while "\n\n" in buf:
                        block, buf = buf.split("\n\n", 1)
                        events.append(block[6:])
                        out["n"] = len(events)
                out["events"] = events
        except Exception as e:  # reported by the test that reads out
            out["error"] = repr(e)
    t = threading.Thread(target=run)
    t.start()
    wait_for(lambda: out.get("n", 0) >= 3 or "error" in out or "events" in out, 60, "the stream to start")
    return t


if PHASE == "graceful":
    @test
    def crashed_worker_is_restarted():
        code, j = health()
        assert code == 200, j
        os.kill(j["pid"], signal.SIGKILL)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 60:
            try:
                code2, j2 = health()
                if code2 == 200 and j2["pid"] != j["pid"]:
                    break
            except Exception:
                pass
            time.sleep(0.2)
        else:
            raise AssertionError("no healthy restarted worker within 60 s")
        os.kill(MASTER_PID, 0)  # the master is still there
        with http() as h:
            assert h.post("/v1/chat/completions", json=chat_body(max_tokens=2), headers=auth()).status_code == 200

    @test
    def sigterm_lets_the_stream_finish():
        out = {}
        t = stream_in_thread(24, out)
        os.kill(MASTER_PID, signal.SIGTERM)
        code, j = wait_for(lambda: (lambda c, j: (c, j) if j["status"] == "draining" else None)(*health()), 10,
                           "/health to say draining")
        assert code == 503, (code, j)
        with http() as h:
            err = error_of(h.post("/v1/chat/completions", json=chat_body(), headers=auth()), 503)
        t.join(120)
        assert "error" not in out, out.get("error")
        ev = out["events"]
        assert out["status"] == 200 and ev[-1] == "[DONE]", ev[-3:]
        last = json.loads(ev[-2])
        assert last["choices"][0]["finish_reason"] in ("stop", "length"), last
        wait_for(lambda: not os.path.exists(f"/proc/{MASTER_PID}") or
                 open(f"/proc/{MASTER_PID}/stat").read().split()[2] == "Z", 30, "the master to exit")

elif PHASE == "deadline":
    @test
    def drain_deadline_cuts_long_streams():
        out = {}
        t = stream_in_thread(900, out)
        t0 = time.monotonic()
        os.kill(MASTER_PID, signal.SIGTERM)
        t.join(60)
        took = time.monotonic() - t0
        assert "error" not in out, out.get("error")
        ev = out["events"]
        assert "[DONE]" not in ev, ev[-3:]
        err = json.loads(ev[-1])
        assert "error" in err and err["error"]["code"] == "unavailable", err
        assert took < 15, f"the stream ran {took:.1f}s after SIGTERM with --drain-timeout 1"
        wait_for(lambda: not os.path.exists(f"/proc/{MASTER_PID}") or
                 open(f"/proc/{MASTER_PID}/stat").read().split()[2] == "Z", 30, "the master to exit")

if __name__ == "__main__":
    raise SystemExit(run_all())
