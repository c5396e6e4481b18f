"""Failover that balances, through nginx with two workers of --max-seqs 4 --max-queue 4 each
(tests/suites/e2e_balance.sh): a worker that answered 503 while it loaded is not benched, so the
burst right after it is ready spreads evenly; N x max_seqs and then N x (max_seqs + max_queue) concurrent requests
are all accepted, spread evenly over the workers (least_conn, a full worker's 429 retried on the
other, nobody benched); beyond that capacity the excess gets 429 with Retry-After, and only after
every worker said so. Counts come from nginx's access log: the last $upstream_addr served it."""
import os
import re
import signal
import threading
import time

from e2e import ACCESS_LOG, auth, chat_body, http, run_all, serving_pids, test, wait_for, worker_pids

SEQS = int(os.environ["BALANCE_SEQS"])
QUEUE = int(os.environ["BALANCE_QUEUE"])
WORKERS = 2


def burst(n, max_tokens=24):
    """n concurrent chat requests released together; returns [(status, headers, request id)]"""
    out = [None] * n
    gate = threading.Barrier(n)

    def run(i):
        with http() as h:
            h.get("/health")  # TLS handshake done before the gate: the requests arrive together
            gate.wait()
            r = h.post("/v1/chat/completions", headers=auth(),
                       json=chat_body("Write a long story about rivers.", max_tokens=max_tokens))
            out[i] = (r.status_code, r.headers, r.headers.get("x-request-id"))
    ts = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(300)
    return out


def upstreams(rids):
    """{request id: [upstream addresses tried, in order]} from the access log"""
    want = set(rids)
    found = {}

    def scan():
        for line in open(ACCESS_LOG):
            m = re.search(r"rid=(\S+) .* up=(.*)$", line.rstrip("\n"))
            if m and m.group(1) in want:
                found[m.group(1)] = [a.strip() for a in re.split(r"[,:] (?=unix:)", m.group(2))]
        return len(found) == len(want)
    wait_for(scan, 10, "every request in the access log")
    return found


def per_worker(results):
    ups = upstreams([rid for _, _, rid in results])
    served = {}
    for status, _, rid in results:
        served.setdefault(ups[rid][-1], {}).setdefault(status, 0)
        served[ups[rid][-1]][status] += 1
    return served, ups


def report(name, results):
    served, ups = per_worker(results)
    line = "; ".join(f"{os.path.basename(w)}: " + ", ".join(f"{n}x{s}" for s, n in sorted(c.items()))
                     for w, c in sorted(served.items()))
    print(f"  {name}: {len(results)} concurrent -> {line}", flush=True)
    return served, ups


def check_accepted_and_even(n):
    res = burst(n)
    statuses = [s for s, _, _ in res]
    served, _ = report(f"{n} requests", res)
    assert statuses.count(200) == n, f"{statuses.count(200)} of {n} accepted: {sorted(statuses)}"
    counts = [c.get(200, 0) for c in served.values()]
    assert len(counts) == WORKERS, f"served by {len(counts)} worker(s): {served}"
    mean = n / WORKERS
    assert all(abs(c - mean) <= 0.1 * mean for c in counts), f"uneven: {counts}"


@test
def both_workers_ready():
    wait_for(lambda: len(worker_pids()) == WORKERS and len(serving_pids()) == WORKERS, 120, "both workers ready")


@test
def a_worker_that_answered_503_while_loading_is_not_benched():
    pids = worker_pids()
    os.kill(pids[0], signal.SIGKILL)
    # killed again as soon as it is back: the second restart spends a 1 s back-off answering 503
    again = wait_for(lambda: [p for p in worker_pids() if p not in pids], 30, "the restarted worker")[0]
    os.kill(again, signal.SIGKILL)
    pids.append(again)
    rids, stop = [], threading.Event()

    def trickle():  # small requests while the restarted worker loads: its 503s go to the other
        with http() as h:
            while not stop.is_set():
                r = h.post("/v1/chat/completions", headers=auth(), json=chat_body(max_tokens=1))
                assert r.status_code == 200, r.status_code
                rids.append(r.headers["x-request-id"])
    ts = [threading.Thread(target=trickle) for _ in range(3)]
    for t in ts:
        t.start()
    try:
        wait_for(lambda: len(serving_pids()) == WORKERS and pids[0] not in worker_pids(), 120, "the restart")
    finally:
        stop.set()
        for t in ts:
            t.join(60)
    retried = sum(len(u) > 1 for u in upstreams(rids).values())
    assert retried, f"none of {len(rids)} requests met the loading worker (it loaded too fast to test)"
    print(f"  {retried} of {len(rids)} requests during the restart were passed on from the loading worker", flush=True)
    check_accepted_and_even(WORKERS * SEQS)


@test
def workers_x_max_seqs_all_accepted_evenly():
    check_accepted_and_even(WORKERS * SEQS)


@test
def workers_x_capacity_all_accepted_evenly():
    check_accepted_and_even(WORKERS * (SEQS + QUEUE))


@test
def overload_gets_429_only_when_every_worker_is_full():
    cap = WORKERS * (SEQS + QUEUE)
    n = cap + 8
    res = burst(n)
    served, ups = report(f"overload, {n} requests", res)
    statuses = [s for s, _, _ in res]
    assert statuses.count(200) == cap, f"{statuses.count(200)} accepted, capacity {cap}: {sorted(statuses)}"
    assert statuses.count(429) == n - cap and 503 not in statuses, sorted(statuses)
    for status, headers, rid in res:
        if status == 429:
            assert headers.get("retry-after"), f"429 without Retry-After: {dict(headers)}"
            assert len(set(ups[rid])) == WORKERS, f"429 after trying only {ups[rid]}"
    counts = [c.get(200, 0) for c in served.values()]
    assert sorted(counts) == [SEQS + QUEUE] * WORKERS, f"accepted per worker: {served}"


if __name__ == "__main__":
    raise SystemExit(run_all())
