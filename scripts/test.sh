#!/usr/bin/env bash
# The test command (README, .ci/run): installs everything it needs, then runs the test suite.
#   - a virtual environment in .venv with torch 2.14.1 / torchvision 0.29.1 and pinprof[test];
#   - Nsight Systems 2023.4 unpacked into .nsys by scripts/get_nsys.sh (for the nsys tests);
#   - Debian's chromium, through apt as root or sudo, for the check that report.html opens in a browser;
#   - then pytest, in two passes: the suite on two processes at once (pytest-xdist: most tests wait on a
#     subprocess, and two of them keep a 2-core machine busy), then the few tests marked real_clock,
#     which time a real script's sleeps, alone (tests/conftest.py). GPU tests are skipped without
#     CUDA (run them with scripts/gpu_check.sh).
# Extra arguments go to pytest, in both passes.
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
if ! command -v chromium >/dev/null 2>&1; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo -n"
  install=($sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium)
  echo "test.sh: installing Debian's chromium for the browser check (about 115 MB to download)" >&2
  "${install[@]}" >/dev/null 2>&1 || { $sudo apt-get update -q >/dev/null && "${install[@]}" >/dev/null; } ||
    echo "test.sh: could not install chromium (needs root or sudo): the browser check will fail" >&2
fi
# A pass that selects no test (exit 5: the arguments named none of its kind) is no failure; one with
# failed tests (1) lets the other pass run; Ctrl-C, a usage or an internal error (2-4) ends here.
status=0
passed() { case $1 in 0|5) ;; 1) status=1 ;; *) exit "$1" ;; esac; }
PINPROF_TEST_PASS=parallel .venv/bin/python -m pytest -ra -n auto --maxprocesses 2 --dist loadgroup "$@" || passed $?
PINPROF_TEST_PASS=real_clock .venv/bin/python -m pytest -ra "$@" || passed $?
exit "$status"
