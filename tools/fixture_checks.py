"""The reference comparisons shared by the tiny-fixture generators (tools/gen_gemma4_fixtures.py,
tools/gen_qwen35_fixtures.py): per file type, the float64 reference against transformers float32 and llama.cpp at
every position, and llama.cpp's greedy tokens under the margin rule; the logits blob of the golden.

A reference model (refs[t]) has forward(tokens, trace=None) -> [T, n_vocab] float64 and n_expert; llama[t] is the
output of llamacpp_gemma4_ref.py run on the sequences followed by the same sequences with the reference's greedy
tokens appended.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
REF_PY = ROOT / ".venv-ref" / "bin" / "python"


def top2_gap(row: np.ndarray) -> float:
    a = np.sort(row)[-2:]
    return float(a[1] - a[0])


def r6(a) -> list:
    return np.round(np.asarray(a, dtype=np.float64), 6).tolist()


def llama_run(path: Path, seqs, texts, n_greedy: int, td: Path) -> dict:
    job, out = td / "job.json", td / "out.json"
    job.write_text(json.dumps({"sequences": seqs, "greedy": n_greedy, "texts": texts}))
    p = subprocess.run([str(REF_PY), str(ROOT / "tools" / "llamacpp_gemma4_ref.py"), "run", str(path), str(job), str(out)],
                       capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"llama.cpp on {path.name} failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return json.loads(out.read_text())


def new_check(types) -> dict:
    return {"max_abs_hf64_vs_ref_f32": 0.0, "max_abs_hf_vs_ref": {t: 0.0 for t in types},
            "max_abs_llama_vs_ref": {t: 0.0 for t in types}, "max_abs_ref_vs_ref_f32": {t: 0.0 for t in types},
            "min_greedy_gap_transformers_f32": float("inf"), "min_router_gap_transformers_f32": None,
            "llama_greedy_steps_checked": {t: 0 for t in types}, "llama_greedy_steps_total": 0}


def agree(name, types, refs, hf_on, model64, seqs, llama, logits, check, hf_max, hf_logits) -> None:
    """Reference vs transformers (asserted within hf_max) and vs llama.cpp at every position; fills the "ref:<t>"
    sets of logits and the "hf:<t>" sets it has, and check's maxima."""
    for t in types:
        for si, toks in enumerate(seqs):
            ref = refs[t].forward(toks)
            logits[f"ref:{t}"].append(ref)
            hf = hf_logits(hf_on[t], toks)
            if f"hf:{t}" in logits:
                logits[f"hf:{t}"].append(hf)
            d = float(np.abs(hf - ref).max())
            assert d <= hf_max, (name, t, si, d)
            check["max_abs_hf_vs_ref"][t] = max(check["max_abs_hf_vs_ref"][t], d)
            check["max_abs_ref_vs_ref_f32"][t] = max(check["max_abs_ref_vs_ref_f32"][t],
                                                     float(np.abs(ref - logits["ref:f32"][si]).max()))
            lc = np.asarray(llama[t]["sequences"][si]["logits"])
            check["max_abs_llama_vs_ref"][t] = max(check["max_abs_llama_vs_ref"][t], float(np.abs(lc - ref).max()))
            if t == "f32":
                d64 = float(np.abs(hf_logits(model64, toks) - ref).max())
                check["max_abs_hf64_vs_ref_f32"] = max(check["max_abs_hf64_vs_ref_f32"], d64)


def hf_greedy_margins(model, seqs, n_greedy, check, logits_fn, router_gap) -> list[list[int]]:
    """transformers' greedy tokens per sequence; records the smallest top-2 and router margins in check."""
    out = []
    for toks in seqs:
        seq, g, gaps = list(toks), [], []
        for _ in range(n_greedy):
            row = logits_fn(seq)[-1]
            g.append(int(np.argmax(row)))
            gaps.append(top2_gap(row))
            seq.append(g[-1])
        out.append(g)
        check["min_greedy_gap_transformers_f32"] = min(check["min_greedy_gap_transformers_f32"], min(gaps))
        rg = router_gap(model, toks + g)
        if rg is not None:
            prev = check["min_router_gap_transformers_f32"]
            check["min_router_gap_transformers_f32"] = rg if prev is None else min(prev, rg)
    return out


def greedy_entries(name, types, refs, seqs, texts, hf_greedy, ref_greedy, llama, check, n_greedy) -> list[dict]:
    """Per sequence: the greedy tokens of each file's reference (f32's must be transformers' hf_greedy[si]) and
    their top-2 margins, llama.cpp's own greedy tokens, and the margin rule: where the reference's margin exceeds
    twice llama.cpp's max |delta logit| on the row that predicts a greedy token, llama.cpp's argmax must be it."""
    out = []
    for si, toks in enumerate(seqs):
        entry = {"tokens": toks, "greedy": {}, "greedy_gap": {}, "greedy_llama": {}}
        if si:
            entry["text"] = texts[si - 1]
        n = len(toks)
        for t in types:
            g = ref_greedy[t][si]
            if t == "f32":
                assert g == hf_greedy[si], (name, si, g, hf_greedy[si])
            ref_rows = refs[t].forward(toks + g)[n - 1:n - 1 + n_greedy]
            llama_rows = np.asarray(llama[t]["sequences"][len(seqs) + si]["logits"])[n - 1:n - 1 + n_greedy]
            gaps = [top2_gap(r) for r in ref_rows]
            for j in range(n_greedy):
                if gaps[j] > 2 * float(np.abs(llama_rows[j] - ref_rows[j]).max()):
                    assert int(np.argmax(llama_rows[j])) == g[j], (name, t, si, j, g)
                    check["llama_greedy_steps_checked"][t] += 1
            entry["greedy"][t], entry["greedy_gap"][t] = g, r6(gaps)
            if refs[t].n_expert:
                tr: dict = {}
                refs[t].forward(toks + g, trace=tr)
                entry.setdefault("router_gap", {})[t] = r6(tr["router_gap_pos"])
            lg = llama[t]["sequences"][si]["greedy"]
            entry["greedy_llama"][t] = lg
            if "llama_greedy_equal_ref" in check:     # length of llama.cpp's greedy prefix equal to the reference's
                check["llama_greedy_equal_ref"][t] += next((j for j in range(n_greedy) if lg[j] != g[j]), n_greedy)
        check["llama_greedy_steps_total"] += n_greedy
        out.append(entry)
    return out


def write_logits(logits: dict, path: Path) -> list[str]:
    """float32 logits, set by set, sequence by sequence, [position][vocab]; returns the set names in order."""
    sets = list(logits)
    blob = np.concatenate([np.asarray(x, dtype=np.float32).reshape(-1) for s in sets for x in logits[s]])
    path.write_bytes(blob.astype("<f4").tobytes())
    return sets


def golden_files(paths: dict, refs, tokdir: Path, n_vocab: int, n_real: int, vocab_source: str, config) -> dict:
    """The golden's description of the files: paths, sizes, tensor types, vocabulary, the HF config."""
    return {
        "gguf": {t: str(p.relative_to(ROOT)) for t, p in paths.items()},
        "file_bytes": {t: p.stat().st_size for t, p in paths.items()},
        "tensor_types": {t: refs[t].types for t in paths},
        "vocab": {"n_vocab": n_vocab, "n_real_ids": n_real, "n_merges": len(json.loads(
            (tokdir / "tokenizer.json").read_text())["model"]["merges"]), "source": vocab_source},
        "hf_config": {k: v for k, v in config.to_dict().items()
                      if k not in ("transformers_version", "architectures", "dtype", "torch_dtype")},
    }


def write_golden(golden: dict, out: Path, paths: dict, bin_path: Path, name: str, seed: int, extra: str = "") -> dict:
    """Writes the golden JSON, prints the agreement numbers; returns the sizes of the files of the variant."""
    check = golden["check"]
    out.write_text(json.dumps(golden, separators=(",", ":")) + "\n")
    sizes = {t: p.stat().st_size for t, p in paths.items()} | {"json": out.stat().st_size, "logits": bin_path.stat().st_size}
    print(f"{name}: seed {seed}; hf64-vs-ref {check['max_abs_hf64_vs_ref_f32']:.2e}; hf-vs-ref "
          f"{ {t: f'{v:.1e}' for t, v in check['max_abs_hf_vs_ref'].items()} }; llama-vs-ref "
          f"{ {t: f'{v:.2g}' for t, v in check['max_abs_llama_vs_ref'].items()} }; ref-vs-f32 "
          f"{ {t: f'{v:.2g}' for t, v in check['max_abs_ref_vs_ref_f32'].items()} }; llama greedy checked "
          f"{check['llama_greedy_steps_checked']} of {check['llama_greedy_steps_total']}; {extra}sizes {sizes}", flush=True)
    return sizes


def generate(variants, write_vocab, build_variant, max_bytes: int | None) -> int:
    """The generators' main: the tokenizer directory, then each variant named on the command line (default all);
    build_variant returns the sizes of what it wrote, each to stay under max_bytes when given."""
    import torch
    from transformers import AutoTokenizer
    torch.set_num_threads(1)
    if not (ROOT / ".cache" / "llama.cpp" / "convert_hf_to_gguf.py").is_file() or not REF_PY.is_file():
        sys.exit("needs .cache/llama.cpp (sh deploy/fetch_llama_ref.sh) and .venv-ref (llama-cpp-python 0.3.36)")
    with tempfile.TemporaryDirectory() as td:
        tokdir = Path(td) / "tokenizer"
        write_vocab(tokdir)
        tok = AutoTokenizer.from_pretrained(tokdir)
        for name in sys.argv[1:] or list(variants):
            sizes = build_variant(name, tokdir, tok)
            assert max_bytes is None or all(v < max_bytes for v in sizes.values()), sizes
    return 0
