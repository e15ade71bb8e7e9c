"""The linter and the formatter (ruff, configured in pyproject.toml) find nothing to change."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ruff(*args: str) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec("ruff") is None:  # the GPU machine has no ruff; CI installs it (.[test])
        assert not os.environ.get("CI"), "CI must lint: pip install -e '.[test]' installs ruff"
        pytest.skip("ruff is not installed (pip install -e '.[test]')")
    return subprocess.run([sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_ruff_check_finds_nothing() -> None:
    run = _ruff("check", "--output-format", "concise", ".")
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]


def test_ruff_format_would_change_nothing() -> None:
    run = _ruff("format", "--check", ".")
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
