#!/usr/bin/env bash
# The test command (README, .ci/run): installs everything it needs, then runs the test suite.
#   - a virtual environment in .venv with torch 2.14.1 / torchvision 0.29.1 and pinprof[test];
#   - Nsight Systems 2023.4 unpacked into .nsys by scripts/get_nsys.sh (for the nsys tests);
#   - then pytest. GPU tests are skipped without CUDA (run them with scripts/gpu_check.sh).
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check torch==2.14.1 torchvision==0.29.1
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'
PINPROF_NSYS=$(bash scripts/get_nsys.sh .nsys | tail -n 1)
export PINPROF_NSYS
.venv/bin/python -m pytest -ra "$@"
