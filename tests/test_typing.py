"""The package, scripts and tests type-check (mypy, configured in setup.cfg)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent


def test_mypy_finds_no_error() -> None:
    if importlib.util.find_spec("mypy") is None:  # the GPU machine has no mypy; CI installs it (.[test])
        assert not os.environ.get("CI"), "CI must type-check: pip install -e '.[test]' installs mypy"
        pytest.skip("mypy is not installed (pip install -e '.[test]')")
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary"], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
