"""``pinprof compare`` with several runs a side: the noise a change must beat is the spread of the
runs' means (``analysis.stats.difference_interval``), so drift between runs is not called a change;
one run a side says it cannot tell drift apart. Then the whole verb on ``pinprof profile`` runs of
one script: a loader three times slower is reported slower, and two sets of runs of one script differ
by a small part of that."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from profiler.analysis.before_after import compare, compare_runs
from profiler.analysis.stats import difference_interval
from profiler.cli import main

HERE = Path(__file__).parent
SLEEPY = HERE / "scripts" / "sleepy_loader.py"


def test_the_difference_interval_is_welchs() -> None:
    # 1, 2, 3 against 4, 5, 6: each side's variance of the mean 1/3, 4 degrees of freedom, t 2.776
    assert difference_interval(np.array([1.0, 2, 3]), np.array([4.0, 5, 6])) == pytest.approx(
        2.776 * np.sqrt(2 / 3), rel=1e-3
    )
    assert np.isnan(difference_interval(np.array([1.0]), np.array([4.0, 5, 6])))


def test_the_difference_interval_holds_no_change_about_as_often_as_it_says() -> None:
    """Three runs a side of one script (their means drawn alike): in 2,000 seeded draws the interval
    holds 0 in 93-97% of them."""
    held = 0
    for seed in range(2000):
        rng = np.random.default_rng(seed)
        b, a = rng.normal(10.0, 0.5, 3), rng.normal(10.0, 0.5, 3)
        held += abs(a.mean() - b.mean()) <= difference_interval(b, a)
    assert 0.93 <= held / 2000 <= 0.97, held


def _run(mean_ms: float, spread_ms: float, seed: int, batches: int = 60) -> pd.DataFrame:
    """One run's timeline: ``batches`` steady batches of one scenario around ``mean_ms``."""
    rng = np.random.default_rng(seed)
    batch = mean_ms + rng.normal(0.0, spread_ms, batches)
    return pd.DataFrame(
        {
            "scenario": "Sleepy/bs4/w0",
            "mode": "pageable",
            "warmup": False,
            "batch": np.arange(batches),
            "batch_ms": batch,
            "fetch_ms": batch - 0.3,
        }
    )


def test_drift_between_runs_is_no_change_with_runs_a_side_but_fools_one_run_a_side() -> None:
    """Each run's batches barely spread (0.05 ms), but runs drift (their means 10.0 to 10.6 ms): one
    run a side calls the drift a change; three runs a side judge it by the runs' spread, and do not."""
    means_b, means_a = (10.0, 10.6, 10.2), (10.5, 10.1, 10.4)
    befores = [_run(m, 0.05, k) for k, m in enumerate(means_b)]
    afters = [_run(m, 0.05, 10 + k) for k, m in enumerate(means_a)]
    one, _ = compare(befores[0], afters[0])
    assert next(c for c in one if c.phase == "batch").measurable  # 10.0 -> 10.5: "slower", drift alone
    many, matched = compare_runs(befores, afters)
    batch = next(c for c in many if c.phase == "batch")
    assert matched == [("Sleepy/bs4/w0", "Sleepy/bs4/w0", True)]
    assert not batch.measurable and (batch.before_runs, batch.after_runs) == (3, 3)
    assert batch.before_batches == 180 and "no measurable difference" in batch.text() and "runs' noise" in batch.text()
    # a loader three times slower stands well out of the same drift
    slower = [_run(3 * m, 0.15, 20 + k) for k, m in enumerate(means_a)]
    batch = next(c for c in compare_runs(befores, slower)[0] if c.phase == "batch")
    assert batch.measurable and batch.delta_ms > 0 and "slower" in batch.text()


def test_the_sides_are_split_at_the_double_dash(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for k, m in enumerate((10.0, 10.6, 10.2, 30.0, 31.0)):
        _run(m, 0.05, k).assign(bytes=0).to_csv(tmp_path / f"r{k}.csv", index=False)
    runs = [str(tmp_path / f"r{k}.csv") for k in range(5)]
    assert main(["compare", *runs[:3], "--", *runs[3:]]) == 0
    out = capsys.readouterr().out
    assert "in 3 and 2 runs" in out and "slower" in out and "one run a side" not in out
    assert main(["compare", *runs[:3]]) == 2  # three runs, no --: which side is which?
    assert "3 runs and no --" in capsys.readouterr().err
    assert main(["compare", runs[0], "--", *runs[3:]]) == 2  # one run against two: no spread on one side
    assert "1 run(s) before -- and 2 after" in capsys.readouterr().err
    assert main(["compare", runs[0], runs[1], "--", runs[3], runs[0]]) == 2  # a run on both sides
    assert "named more than once" in capsys.readouterr().err
    assert main(["compare", runs[0], runs[3]]) == 0
    assert "one run a side" in capsys.readouterr().out  # what it cannot tell, said


def _profile(out: Path, item_ms: float) -> None:
    cmd = [sys.executable, "-m", "profiler", "profile", "--out", str(out), "--no-plots", "--"]
    cmd += [sys.executable, str(SLEEPY), "--one-loader", "--epochs", "1", "--items", "200", "--item-ms", str(item_ms)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=HERE.parent)
    assert done.returncode == 0, done.stderr[-2000:]


def _delta_ms(line: str) -> float:
    """The batch's change a ``compare`` line states (``"8.120 ms slower per batch"``), faster negative."""
    found = re.search(r"batch: ([0-9.]+) ms (slower|faster) per batch", line)
    assert found is not None, line
    return float(found[1]) * (1 if found[2] == "slower" else -1)


def _batch_line(*runs: Path) -> str:
    words = ["compare", *map(str, runs[:3]), "--", *map(str, runs[3:])]
    cmd = [sys.executable, "-m", "profiler", *words]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=HERE.parent)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.splitlines()[0]


def test_compare_of_three_runs_a_side_tells_a_slower_loader_from_drift(tmp_path: Path) -> None:
    """Nine ``pinprof profile`` runs of one script, interleaved (as a user should run them, so that
    the machine's drift falls on both sides): items that wait 1 ms (two sets) and 3 ms, four items a
    batch, so the slower loader's batches are about 8 ms longer.

    Two sets of one script are not asked for "no measurable difference": a 95% interval calls one
    such pair in twenty a change by design, and the CI machine's load moves runs more than that (one
    suite read 0.683 ms faster, 1.1 times the runs' noise). What is asked is that their difference is
    a small part of the slower loader's; the interval itself is tested above on known means."""
    fast: list[Path] = []
    again: list[Path] = []
    slow: list[Path] = []
    for k in range(3):
        for runs, item_ms, name in ((fast, 1.0, "fast"), (slow, 3.0, "slow"), (again, 1.0, "again")):
            runs.append(tmp_path / f"{name}{k}")
            _profile(runs[-1], item_ms)
    line = _batch_line(*fast, *slow)
    assert "in 3 and 3 runs): batch:" in line and " slower per batch" in line, line
    slower = _delta_ms(line)
    assert slower >= 6.0, line  # 4 items a batch, each sleeping 2 ms more: 8 ms, less the runs' noise
    line = _batch_line(*fast, *again)
    assert "in 3 and 3 runs): batch: " in line, line
    assert "no measurable difference" in line or abs(_delta_ms(line)) < slower / 4, line
