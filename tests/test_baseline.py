"""The benchmarks' ``--baseline PATH`` (``profiler.bench.baseline``): a checkout is checked before any
process runs, and each side's processes import their own package."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from profiler.bench import baseline


def test_a_folder_with_no_package_is_refused_with_the_way_to_make_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(SystemExit, match=rf"--baseline {tmp_path}: no profiler package there .*git worktree add"):
        baseline.checkout(str(tmp_path))
    (tmp_path / "profiler").mkdir()
    (tmp_path / "profiler" / "__init__.py").write_text("")
    monkeypatch.chdir(tmp_path.parent)
    assert baseline.checkout(tmp_path.name) == str(tmp_path)  # made absolute


def test_the_checkout_comes_first_on_the_path_and_the_rest_is_kept() -> None:
    env = baseline.env_for("/old", {"PYTHONPATH": "/a" + os.pathsep + "/b", "X": "1"})
    assert env["PYTHONPATH"].split(os.pathsep) == ["/old", "/a", "/b"] and env["X"] == "1"
    assert baseline.env_for("/old", {})["PYTHONPATH"] == "/old"


def test_a_side_that_imported_another_checkouts_package_stops_the_bench() -> None:
    baseline.check_package("package /old/profiler/__init__.py", "/old", "baseline")
    with pytest.raises(SystemExit, match="baseline: imported /new/profiler/__init__.py, not the checkout at /old"):
        baseline.check_package("package /new/profiler/__init__.py", "/old", "baseline")
    with pytest.raises(SystemExit):  # a sibling whose name starts the same is not the checkout
        baseline.check_package("package /old2/profiler/__init__.py", "/old", "baseline")
