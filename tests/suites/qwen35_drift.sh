#!/bin/sh
# The recurrent state's drift over 4,000 greedy tokens of the tiny Qwen 3.5 fixtures (slow-decay copies): the
# engine's decode path (build/tools/qwen35_drift) against the float64 reference teacher-forced on the same tokens,
# with a bf16-state negative control (tests/qwen35_drift_check.py; docs/design-qwen35.md 6.3).
cd "$(dirname "$0")/../.." || exit 1
if [ ! -x .venv/bin/python ] || [ ! -x build/tools/qwen35_drift ]; then
  echo "FAIL qwen35_drift: .venv/bin/python or build/tools/qwen35_drift missing (make all; the venv from tools/requirements.txt)"
  exit 1
fi
exec .venv/bin/python tests/qwen35_drift_check.py
