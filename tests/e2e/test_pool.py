"""One view of all workers (issue 18): two workers behind nginx; whichever worker answers, /metrics
shows every worker with its own labels and /health reports the whole pool; the latency, queue-wait
and time-per-output-token histograms fill; the KV block gauges add up; a worker killed with -9
shows as down (clgemma_worker_up 0) until its master has it back. Run by tests/suites/e2e_pool.sh."""
import itertools
import os
import signal
import time

import httpx

from e2e import MASTER_PID, auth, chat_body, http, metric_samples, run_all, test, wait_for, MODEL
from e2e import worker_pids as children

SENT = {"chat": 6, "completions": 6}


def health():
    with http() as h:
        r = h.get("/health")
        return r.status_code, r.json()


def scrape():
    with http() as h:
        r = h.get("/metrics")
    assert r.status_code == 200, r.status_code
    return metric_samples(r.text, per_worker=True)


def value(m, name, **labels):
    """the sum over every sample of name whose labels include these"""
    want = set(labels.items())
    return sum(v for (n, ls), v in m.items() if n == name and want <= ls)


def workers_up(m):
    return {dict(ls)["worker"]: v for (n, ls), v in m.items() if n == "clgemma_worker_up"}


def generations(m):
    return sum(value(m, "clgemma_requests_total", endpoint=ep) for ep in SENT)


@test
def both_workers_ready_in_the_pool_view():
    def both():
        code, j = health()
        return code == 200 and j["workers"] == {"ready": 2, "total": 2} and j
    j = wait_for(both, 180, "/health to report 2 of 2 ready")
    pids = sorted(w["pid"] for w in j["pool"])
    assert pids == children(), (pids, children())
    assert j["pid"] in pids and j["status"] == "ok" and j["model"] == MODEL and "context_length" in j, j
    labels = [w["worker"] for w in j["pool"]]
    assert len(set(labels)) == 2 and all(w["state"] == "ok" and w["device"] == "0:0" for w in j["pool"]), j["pool"]


@test
def every_scrape_shows_every_worker_and_the_pool_total():
    with http() as h:
        for i in range(SENT["chat"]):
            r = h.post("/v1/chat/completions", headers=auth(), json=chat_body(f"Say {i}.", max_tokens=2))
            assert r.status_code == 200, r.text[:200]
        for i in range(SENT["completions"]):
            r = h.post("/v1/completions", headers=auth(), json={"model": MODEL, "prompt": f"Count to {i}:",
                                                               "max_tokens": 2, "temperature": 0})
            assert r.status_code == 200, r.text[:200]
    want = sum(SENT.values())
    # a worker counts a request as its handler returns, a moment after the client has the answer
    wait_for(lambda: generations(scrape()) == want, 10, f"{want} generation requests in /metrics")
    served = {}
    for _ in range(10):
        m = scrape()
        up = workers_up(m)
        assert len(up) == 2 and set(up.values()) == {1}, up
        got = generations(m)
        assert got == want, f"{got} generation requests counted over the workers, {want} sent"
        for w in up:
            served[w] = value(m, "clgemma_requests_total", worker=w, endpoint="chat") + \
                value(m, "clgemma_requests_total", worker=w, endpoint="completions")
        info = {dict(ls)["worker"]: int(dict(ls)["pid"]) for (n, ls), v in m.items() if n == "clgemma_worker_info"}
        assert sorted(info.values()) == children() and set(info) == set(up), (info, children())
    print(f"  generation requests per worker: {served}", flush=True)


@test
def new_histograms_fill_and_count_equals_inf():
    m = scrape()
    want = sum(SENT.values())
    lat = value(m, "clgemma_request_duration_seconds_count")
    assert lat == want, f"request duration count {lat}, {want} sent"
    for ep, n in SENT.items():
        assert value(m, "clgemma_request_duration_seconds_count", endpoint=ep) == n, ep
    assert value(m, "clgemma_queue_wait_seconds_count") == want, value(m, "clgemma_queue_wait_seconds_count")
    assert value(m, "clgemma_time_per_output_token_seconds_count") > 0
    assert value(m, "clgemma_request_duration_seconds_sum") > 0
    for name in ("clgemma_request_duration_seconds", "clgemma_queue_wait_seconds",
                 "clgemma_time_per_output_token_seconds", "clgemma_time_to_first_token_seconds"):
        for w in workers_up(m):
            for ep in (("chat", "completions") if name == "clgemma_request_duration_seconds" else (None,)):
                extra = {"endpoint": ep} if ep else {}
                inf = value(m, name + "_bucket", worker=w, le="+Inf", **extra)
                cnt = value(m, name + "_count", worker=w, **extra)
                assert inf == cnt, (name, w, ep, inf, cnt)


@test
def kv_block_gauges_add_up():
    def idle():
        m = scrape()
        return all(value(m, "clgemma_kv_blocks_used", worker=w) == 0 for w in workers_up(m)) and m
    m = wait_for(idle, 10, "every KV block free again")
    for w in workers_up(m):
        pools = {dict(ls)["pool"] for (n, ls), v in m.items() if n == "clgemma_kv_blocks_free" and dict(ls)["worker"] == w}
        assert "full" in pools, pools  # "sliding" only when the windows' rings are smaller than the context
        for pool in pools:
            used = value(m, "clgemma_kv_blocks_used", worker=w, pool=pool)
            free = value(m, "clgemma_kv_blocks_free", worker=w, pool=pool)
            assert used == 0 and free > 0, (w, pool, used, free)


@test
def killed_worker_shows_down_then_back():
    code, j = health()
    victim = j["pool"][0]
    # the master stopped: it cannot reap and restart the victim, so the pool shows it down until SIGCONT
    os.kill(MASTER_PID, signal.SIGSTOP)
    try:
        os.kill(victim["pid"], signal.SIGKILL)
        seen = set()
        kinds = itertools.cycle(["health", "metrics", "health"])  # nginx alternates the two sockets

        def down():
            kind = next(kinds)
            try:  # a request sent to the victim's socket waits for a worker that is not there (yet)
                with http() as h:
                    r = h.get("/" + kind, timeout=2)
            except httpx.TimeoutException:
                return False
            if kind == "health":
                j = r.json()
                if r.status_code == 200 and j["workers"] == {"ready": 1, "total": 2} and \
                        {w["worker"]: w["state"] for w in j["pool"]}[victim["worker"]] == "down":
                    seen.add(kind)
            elif workers_up(metric_samples(r.text, per_worker=True)).get(victim["worker"]) == 0:
                seen.add(kind)
            return seen == {"health", "metrics"}
        wait_for(down, 30, "the killed worker to show as down (state down in /health, clgemma_worker_up 0)")
    finally:
        os.kill(MASTER_PID, signal.SIGCONT)
    t0 = time.monotonic()

    def back():
        code, j = health()
        w = {w["worker"]: w for w in j["pool"]}
        return j["workers"] == {"ready": 2, "total": 2} and w[victim["worker"]]["pid"] != victim["pid"]
    wait_for(back, 180, "the restarted worker to be ready under the same label")
    m = scrape()
    assert set(workers_up(m).values()) == {1} and len(workers_up(m)) == 2, workers_up(m)
    print(f"  restarted and ready under the same label in {time.monotonic() - t0:.1f}s", flush=True)


if __name__ == "__main__":
    raise SystemExit(run_all())
