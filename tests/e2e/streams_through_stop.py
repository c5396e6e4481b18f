"""Streams that run while the server stops (tests/suites/e2e_serve.sh): starts N streamed
completions, touches READY_FILE once each has sent a few events, then waits for all of them and
prints one line per stream; exits 0 when every stream ended with [DONE] and no error.
usage: streams_through_stop.py URL CERT KEY MODEL N READY_FILE"""
import sys
import threading

import httpx

url, cert, key, model, n, ready_file = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6]
out = [dict(events=0) for _ in range(n)]
started = threading.Semaphore(0)


def run(i):
    o = out[i]
    try:
        with httpx.Client(verify=cert, timeout=180) as h, h.stream(
                "POST", url + "/v1/completions", headers={"Authorization": f"Bearer {key}"},
                json={"model": model, "prompt": "Once upon a time, by a wide river,", "max_tokens": 96,
                      "temperature": 0.8, "seed": i, "stream": True}) as r:
            o["status"] = r.status_code
            buf = ""
            for chunk in r.iter_text():
                buf += chunk
                while "\n\n" in buf:
                    block, buf = buf.split("\n\n", 1)
                    o["events"] += 1
                    o["last"] = block
                    if o["events"] == 3:
                        started.release()
    except Exception as e:
        o["error"] = repr(e)
    if o["events"] < 3:
        started.release()


ts = [threading.Thread(target=run, args=(i,)) for i in range(n)]
for t in ts:
    t.start()
for _ in range(n):
    started.acquire()
open(ready_file, "w").close()
for t in ts:
    t.join(300)
ok = 0
for i, o in enumerate(out):
    done = o.get("last") == "data: [DONE]" and "error" not in o and o.get("status") == 200
    ok += done
    print(f"stream {i}: status {o.get('status')} events {o['events']} last {o.get('last', '')[:60]!r}"
          f"{' error ' + o['error'] if 'error' in o else ''}")
print(f"{ok} of {n} streams completed")
sys.exit(0 if ok == n else 1)
