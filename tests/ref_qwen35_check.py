#!/usr/bin/env python3
"""Checks tools/ref_qwen35.py against transformers on the committed tiny Qwen 3.5 fixtures.

For every tests/golden/qwen35_*.json and every file it names: the float64 reference recomputes the logits of each
sequence from the GGUF and, at the positions the golden keeps, must lie within the golden's hf_vs_ref_max (1e-3;
logits span about +-15) of transformers' float32 logits on that file's weights (the "hf:<type>" sets of the small
tests/golden/qwen35_<variant>.logits); every forward also runs the recurrent and the chunked scan and fails if they
differ by more than ref_qwen35.SCAN_TOL.  The full logits that `make test` wrote to build/golden/ with
`ref_qwen35.py --golden` (what the engine tests compare with) must be these, to float32 rounding.  On each variant's
first file a prompt split at a position that is no chunk edge, continued from the cache across the chunk edge at 64,
must give the one-shot logits (the conv and delta state carried over).  One PASS/FAIL line per case.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from ref_qwen35 import Qwen35Model  # noqa: E402

SPLIT_TOL = 1e-9     # one-shot vs split forward, both float64
SPLIT_AT = 60        # inside the first chunk: the continuation starts at 61 and crosses the edge at 64
F32_TOL = 1e-5       # build/golden (float32) vs a fresh float64 forward: rounding of logits below 100


def read_sets(spec: dict, rows: list[int], n_vocab: int) -> dict[str, list[np.ndarray]]:
    """The sets of a "logits" part: rows[i] rows of n_vocab per sequence i, set after set."""
    blob = np.fromfile(ROOT / spec["file"], dtype="<f4")
    out, off = {}, 0
    for name in spec["sets"]:
        out[name] = []
        for n in rows:
            out[name].append(blob[off:off + n * n_vocab].reshape(n, n_vocab).astype(np.float64))
            off += n * n_vocab
    if off != blob.size:
        raise AssertionError(f"{spec['file']}: {blob.size} floats, the layout needs {off}")
    return out


def check_file(golden: dict, kind: str, hf: dict, full: dict | None, split: bool) -> str:
    m = Qwen35Model(str(ROOT / golden["gguf"][kind]))
    tol = golden["check"]["thresholds"]["hf_vs_ref_max"]
    pos = golden["logits"]["transformers"]["positions"]
    worst = worst32 = 0.0
    for si, seq in enumerate(golden["sequences"]):
        ref = m.forward(seq["tokens"])
        worst = max(worst, float(np.abs(ref[pos[si]] - hf[f"hf:{kind}"][si]).max()))
        if full is not None:
            worst32 = max(worst32, float(np.abs(ref - full[f"ref:{kind}"][si]).max()))
    if worst > tol:
        raise AssertionError(f"max |ref - transformers| {worst:.3e} > {tol:g}")
    if worst32 > F32_TOL:
        raise AssertionError(f"{golden['logits']['reference']['file']} differs from the reference by {worst32:.3e} "
                             "(stale: make it again)")
    msg = (f"max |ref - transformers| {worst:.1e} at {sum(map(len, pos))} rows, "
           + (f"build/golden {worst32:.1e}" if full is not None else "build/golden missing"))
    if split:
        toks = golden["sequences"][-1]["tokens"]
        whole = m.forward(toks)
        cache: dict = {}
        part = np.concatenate([m.forward(toks[:SPLIT_AT], cache), m.forward(toks[SPLIT_AT:SPLIT_AT + 1], cache),
                               m.forward(toks[SPLIT_AT + 1:], cache)])
        ds = float(np.abs(part - whole).max())
        if ds > SPLIT_TOL:
            raise AssertionError(f"split forward differs from one-shot by {ds:.3e}")
        msg += f", split {ds:.1e}"
    return msg + f", scan max |diff| {m.scan_max_diff:.1e}"


def main() -> int:
    goldens = sorted((ROOT / "tests" / "golden").glob("qwen35_*.json"))
    if not goldens:
        print("FAIL ref_qwen35: no tests/golden/qwen35_*.json")
        return 1
    fails = 0
    for gp in goldens:
        golden = json.loads(gp.read_text())
        n_vocab = golden["hparams"]["n_vocab"]
        lg = golden["logits"]
        hf = read_sets(lg["transformers"], [len(p) for p in lg["transformers"]["positions"]], n_vocab)
        full = None
        if (ROOT / lg["reference"]["file"]).is_file():
            full = read_sets(lg["reference"], [len(s["tokens"]) for s in golden["sequences"]], n_vocab)
        else:
            print(f"FAIL {gp.stem}_reference_logits: {lg['reference']['file']} missing (make {lg['reference']['file']})")
            fails += 1
        for i, kind in enumerate(golden["gguf"]):
            case = f"{gp.stem}_{kind}"
            try:
                print(f"PASS {case} ({check_file(golden, kind, hf, full, i == 0)})")
            except Exception as e:  # noqa: BLE001 - any failure of the reference is this case's failure
                print(f"FAIL {case}: {type(e).__name__}: {e}")
                fails += 1
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
