#!/usr/bin/env python3
"""Compares the clgemma CLI against tests/golden/gemma3_270m.json (see tools/gen_golden.py).

Prints one "PASS name ..." or "FAIL name: why" line per check; exits 1 when any check fails.
Run from the repository root:  .venv/bin/python tests/golden_check.py
Environment:
  CLGEMMA=path        the CLI (default build/clgemma)
  GOLDEN_MODEL=path   the model (default models/<file named in the golden>)
  GOLDEN_ALL=1        check every case of the golden file, not only its "ci" subset (<= 12 CLI runs)
  GOLDEN_TIMEOUT=s    per CLI invocation (default 900)
Checks:
  tokenize:NAME  ids of `clgemma tokenize` equal llama.cpp's (BOS + special-token parsing)
  logits:NAME    `clgemma logits`: n_vocab finite float32 values; max |engine - reference| over the
                 stored ids <= the golden tolerance; argmax equals the reference top-1
  greedy:NAME    `clgemma generate --temp 0 --ids -n 32` equals the golden continuation exactly
  batch:NAME     each line of one `clgemma batch --ids -n 32 -p A -p B -p C` equals the golden
                 continuation and the same prompt decoded alone
"""
import array
import hashlib
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time

GOLDEN = "tests/golden/gemma3_270m.json"

results = []  # (ok, line)


def report(ok, name, msg):
    line = f"PASS {name}{' ' + msg if msg else ''}" if ok else f"FAIL {name}: {msg}"
    print(line, flush=True)
    results.append(ok)


def parse_ids(text):
    """Integers of one output line; None when something else is in it."""
    toks = [t for t in re.split(r"[\s,\[\]]+", text.strip()) if t]
    if not all(re.fullmatch(r"-?\d+", t) for t in toks):
        return None
    return [int(t) for t in toks]


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


class Cli:
    def __init__(self, exe, model, timeout):
        self.exe, self.model, self.timeout = exe, model, timeout
        self.runs = 0

    def run(self, args):
        """Returns (stdout, None) or (None, why)."""
        cmd = [self.exe, args[0], "-m", self.model] + args[1:]
        self.runs += 1
        t0 = time.time()
        try:
            p = subprocess.run(cmd, capture_output=True, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            return None, f"`clgemma {args[0]}` timed out after {self.timeout}s"
        except OSError as e:
            return None, f"cannot run {self.exe}: {e}"
        self.last_seconds = time.time() - t0
        if p.returncode != 0:
            err = p.stderr.decode("utf-8", "replace").strip().splitlines()
            return None, f"`clgemma {args[0]}` exited with status {p.returncode}" + \
                (f": {err[-1]}" if err else "")
        return p.stdout.decode("utf-8", "replace"), None


def check_tokenize(cli, case):
    name = f"tokenize:{case['name']}"
    out, why = cli.run(["tokenize", "-p", case["prompt"]])
    if why:
        return report(False, name, why)
    lines = [ln for ln in out.splitlines() if ln.strip()]
    ids = parse_ids(lines[-1]) if lines else None
    if ids is None:
        return report(False, name, f"unparsable output {out[:200]!r}")
    want = case["ids"]
    if ids != want:
        i = first_diff(ids, want)
        return report(False, name, f"ids differ at index {i}: got {ids[i:i + 6]}..., want "
                                   f"{want[i:i + 6]}... ({len(ids)} vs {len(want)} ids)")
    report(True, name, f"({len(ids)} ids)")


def check_logits(cli, case, n_vocab, tol):
    name = f"logits:{case['name']}"
    fd, path = tempfile.mkstemp(prefix="golden_logits_", suffix=".f32")
    os.close(fd)
    try:
        _, why = cli.run(["logits", "-p", case["prompt"], "-o", path])
        if why:
            return report(False, name, why)
        with open(path, "rb") as f:
            raw = f.read()
    finally:
        os.unlink(path)
    if len(raw) != 4 * n_vocab:
        return report(False, name, f"output has {len(raw)} bytes, want {4 * n_vocab} ({n_vocab} float32)")
    lg = array.array("f")
    lg.frombytes(raw)
    if sys.byteorder != "little":
        lg.byteswap()
    bad = [i for i, v in enumerate(lg) if not math.isfinite(v)]
    if bad:
        return report(False, name, f"{len(bad)} non-finite logits (first at id {bad[0]}: {lg[bad[0]]})")
    top1 = max(range(n_vocab), key=lg.__getitem__)
    ids, ref, lla = case["logit_ids"], case["ref_logits"], case["llama_logits"]
    d_ref = [abs(lg[i] - r) for i, r in zip(ids, ref)]
    worst = max(range(len(ids)), key=d_ref.__getitem__)
    d_llama = max(abs(lg[i] - v) for i, v in zip(ids, lla))
    info = (f"max|d| vs reference {d_ref[worst]:.4f} (tol {tol}, at id {ids[worst]}), vs llama.cpp "
            f"{d_llama:.4f}, top1 {top1}")
    if d_ref[worst] > tol:
        return report(False, name, f"{info}: engine {lg[ids[worst]]:.4f} vs reference {ref[worst]:.4f} "
                                   f"at id {ids[worst]} exceeds the tolerance")
    if top1 != case["ref_top1"]:
        return report(False, name, f"{info}: top-1 {top1} (logit {lg[top1]:.4f}) != reference top-1 "
                                   f"{case['ref_top1']} (engine logit {lg[case['ref_top1']]:.4f})")
    report(True, name, info)


def check_greedy(cli, case, n):
    """Returns the engine's ids (or None) for the batch comparison."""
    name = f"greedy:{case['name']}"
    out, why = cli.run(["generate", "-p", case["prompt"], "-n", str(n), "--temp", "0", "--ids"])
    if why:
        report(False, name, why)
        return None
    lines = [ln for ln in out.splitlines() if ln.strip()]
    ids = parse_ids(lines[-1]) if lines else None
    if ids is None:
        report(False, name, f"unparsable output {out[:200]!r}")
        return None
    want = case["greedy_ids"]
    if ids != want:
        i = first_diff(ids, want)
        report(False, name, f"continuation differs at step {i}: got {ids[i:i + 6]}..., want "
                            f"{want[i:i + 6]}... ({len(ids)} vs {len(want)} ids)")
    else:
        report(True, name, f"({len(ids)} ids, {cli.last_seconds:.1f}s)")
    return ids


def check_batch(cli, cases, n, alone):
    names = [c["name"] for c in cases]
    args = ["batch", "-n", str(n), "--ids"]
    for c in cases:
        args += ["-p", c["prompt"]]
    out, why = cli.run(args)
    if why:
        for nm in names:
            report(False, f"batch:{nm}", why)
        return
    lines = [ln for ln in out.splitlines() if ln.strip()]
    if len(lines) != len(cases):
        for nm in names:
            report(False, f"batch:{nm}", f"expected {len(cases)} output lines, got {len(lines)}: {out[:200]!r}")
        return
    for c, ln in zip(cases, lines):
        name = f"batch:{c['name']}"
        ids = parse_ids(ln)
        if ids is None:
            report(False, name, f"unparsable line {ln[:200]!r}")
            continue
        want = c["greedy_ids"]
        solo = alone.get(c["name"])
        if solo is not None and ids != solo:
            i = first_diff(ids, solo)
            report(False, name, f"batched decode differs from the same prompt decoded alone at step {i}: "
                                f"{ids[i:i + 6]}... vs {solo[i:i + 6]}... (the batched one "
                                f"{'equals' if ids == want else 'differs from'} the golden)")
        elif ids != want:
            i = first_diff(ids, want)
            report(False, name, f"differs from the golden at step {i}: got {ids[i:i + 6]}..., want "
                                f"{want[i:i + 6]}...")
        else:
            report(True, name, f"(= golden{' = alone' if solo is not None else ''}, batch of {len(cases)})")


def main():
    with open(GOLDEN, encoding="utf-8") as f:
        g = json.load(f)
    exe = os.environ.get("CLGEMMA", "build/clgemma")
    model = os.environ.get("GOLDEN_MODEL", os.path.join("models", g["model"]))
    run_all = os.environ.get("GOLDEN_ALL", "") not in ("", "0")
    timeout = int(os.environ.get("GOLDEN_TIMEOUT", "900"))

    if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
        report(False, "golden_gemma3", f"{exe} not found (build it with make)")
        return 1
    if not os.path.isfile(model):
        report(False, "golden_gemma3", f"model {model} not found (fetch it first)")
        return 1
    h = hashlib.sha256()
    with open(model, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    if h.hexdigest() != g["model_sha256"]:
        report(False, "golden_gemma3", f"{model} is not the file the golden was made from (sha256 "
                                       f"{h.hexdigest()[:16]}..., want {g['model_sha256'][:16]}...)")
        return 1

    cli = Cli(exe, model, timeout)
    ci = g["ci"]
    lcases = g["logits"]["cases"]
    gcases = g["greedy"]["cases"]
    by_name = {c["name"]: c for c in lcases}
    gby_name = {c["name"]: c for c in gcases}
    # tokenize: the logits cases carry the prompt ids (and so do the greedy ones, for GOLDEN_ALL)
    tok_cases = list(lcases) + [c for c in gcases if c["name"] not in by_name] if run_all \
        else [by_name[n] for n in ci["tokenize"]]
    for c in tok_cases:
        check_tokenize(cli, c)
    for c in (lcases if run_all else [by_name[n] for n in ci["logits"]]):
        check_logits(cli, c, g["logits"]["n_vocab"], g["logits"]["tolerance"])
    alone = {}
    for c in (gcases if run_all else [gby_name[n] for n in ci["greedy"]]):
        alone[c["name"]] = check_greedy(cli, c, g["greedy"]["n"])
    check_batch(cli, [gby_name[n] for n in g["greedy"]["batch"]], g["greedy"]["n"], alone)

    n_fail = results.count(False)
    print(f"# golden_gemma3: {len(results) - n_fail} passed, {n_fail} failed, {cli.runs} CLI invocations",
          flush=True)
    return 1 if n_fail else 0


if __name__ == "__main__":
    sys.exit(main())
