"""Validates the outputs of tools/constrain_walk: each line must parse with json.loads and validate
against its schema (jsonschema's Draft202012Validator); json_object outputs must be objects.
    python tests/constrain_validate.py SCHEMA_DIR OUT_DIR LABEL
Prints "PASS constrain_<label>_<schema>" or "FAIL ...: why" per output file; exit 1 on a failure."""
import json
import os
import sys

from jsonschema import Draft202012Validator


def main():
    schema_dir, out_dir, label = sys.argv[1:4]
    failed = 0
    for path, base, test in out_files(out_dir, "constrain", label):
        validator = None
        if base != "json_object":
            with open(os.path.join(schema_dir, base), encoding="utf-8") as f:
                validator = Draft202012Validator(json.load(f))
        lines = open(path, "rb").read().split(b"\n")[:-1]
        problems = []
        for i, line in enumerate(lines):
            try:
                value = json.loads(line.decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as e:
                problems.append(f"output {i} does not parse ({e}): {line[:200]!r}")
                continue
            if validator is None:
                if not isinstance(value, dict):
                    problems.append(f"output {i} is not an object: {line[:200]!r}")
                continue
            err = next(iter(validator.iter_errors(value)), None)
            if err is not None:
                problems.append(f"output {i} invalid ({err.message[:200]}): {line[:200]!r}")
        failed += report(test, problems, len(lines), f"{len(lines)} outputs valid")
    return 1 if failed else 0


def out_files(out_dir, prefix, label):
    """(path, input file name, test name) of each output file of constrain_walk, in name order."""
    for name in sorted(os.listdir(out_dir)):
        if name.endswith(".out"):
            base = name[:-4]
            yield os.path.join(out_dir, name), base, f"{prefix}_{label}_{base.removesuffix('.json')}"


def report(test, problems, n, passed):
    """Prints the PASS or FAIL line of one output file of n outputs; 1 when it failed."""
    if not n:
        problems.append("no outputs")
    if problems:
        print(f"FAIL {test}: {len(problems)} of {n} outputs bad; " + "; ".join(problems[:3]))
        return 1
    print(f"PASS {test} ({passed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
