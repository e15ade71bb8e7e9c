"""``pinprof tune`` as safe as ``pinprof profile``: every run bounded in time, the script's output
streamed to files, the stall line shown, the script's own error quoted, a folder a stopped tune left
refused in one line, no write through a planted ``trials`` link, ``--out`` resolved before the script
runs; and ``pinprof profile``'s report where ``--out`` says when the script changes directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

from profiler.drivers.trial_process import STDERR, STDOUT, run_trial

HERE = Path(__file__).parent
ROOT = HERE.parent
ODD = HERE / "scripts" / "odd_loop.py"


def _tune(out: Path, *args: str, cwd: Path = ROOT, env: dict[str, str] | None = None, timeout: float = 240):
    cmd = [sys.executable, "-m", "profiler", "tune", "--out", str(out), "--steps", "8", "--skip", "2", *args]
    return subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )


def test_tune_bounds_its_first_run_by_the_budget_and_shows_the_stall_line(tmp_path: Path) -> None:
    """A script whose loop blocks: the first run (no duration known yet) is stopped at the budget, the
    stall line pinprof profile prints is shown as it comes, and tune ends with one line."""
    t0 = time.monotonic()
    res = _tune(tmp_path / "t", "--budget-s", "15", "--", "python", str(ODD), "block", env={"PINPROF_STALL_S": "2"})
    took = time.monotonic() - t0
    assert res.returncode == 1, res.stderr[-3000:]
    assert took < 120  # it never ended before
    assert "pinprof: no new batch for" in res.stderr  # profile's stall line, shown by tune
    assert "took more than the whole budget (--budget-s 15)" in res.stderr, res.stderr[-3000:]


def test_a_failed_run_is_told_by_the_scripts_own_error(tmp_path: Path) -> None:
    res = _tune(tmp_path / "t", "--", "python", str(ODD), "raise")
    assert res.returncode == 1
    said = [ln for ln in res.stderr.splitlines() if "exit status 1" in ln]
    assert said and "ValueError: odd_loop failed on purpose" in said[0], res.stderr[-3000:]
    assert "report written" not in said[0]
    assert "odd_loop failed on purpose" in (tmp_path / "t" / "trials" / "00-baseline" / STDERR).read_text()


def test_a_runs_output_goes_to_files_in_its_folder_with_bounded_memory(tmp_path: Path) -> None:
    """64 MB on each of stdout and stderr: both files hold it all, and reading the stderr for the
    stall line and the error took a few MB at most (it took 3.5 times the output)."""
    folder = tmp_path / "run"
    folder.mkdir()
    src = "import sys\nfor _ in range(64 * 1024):\n    sys.stdout.write('x' * 1023 + '\\n')\n"
    src += "    sys.stderr.write('y' * 1023 + '\\n')\nprint('ZeroDivisionError: last', file=sys.stderr)\n"
    cmd = [sys.executable, "-c", src]
    tracemalloc.start()
    code, last = run_trial(cmd, dict(os.environ), folder, 120, print)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert code == 0 and last == "ZeroDivisionError: last"
    assert (folder / STDOUT).stat().st_size == 64 << 20
    assert (folder / STDERR).stat().st_size > 64 << 20
    assert peak < 4 << 20, peak


def test_a_folder_a_stopped_tune_left_is_refused_before_any_run(tmp_path: Path) -> None:
    out = tmp_path / "t"
    (out / "trials" / "00-baseline").mkdir(parents=True)
    t0 = time.monotonic()
    res = _tune(out, "--", "python", str(ODD), "raise")
    assert res.returncode == 2 and time.monotonic() - t0 < 60
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "already holds" in lines[0] and "trials" in lines[0], res.stderr


def test_a_planted_trials_link_is_refused_and_nothing_written_through_it(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    out = tmp_path / "t"
    out.mkdir()
    (out / "trials").symlink_to(victim)
    res = _tune(out, "--", "python", str(ODD), "raise")
    assert res.returncode == 2, res.stderr[-2000:]
    assert list(victim.iterdir()) == []


def test_budget_s_infinite_is_refused_in_one_line(tmp_path: Path) -> None:
    for bad in ("inf", "nan", "-1"):
        res = _tune(tmp_path / "t", "--budget-s", bad, "--", "python", str(ODD), "raise", timeout=60)
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert res.returncode == 2 and len(lines) == 1 and f"--budget-s {bad}" in lines[0].replace("-1.0", "-1")


def test_a_relative_out_stays_where_asked_when_the_script_changes_directory(tmp_path: Path) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "profiler", "profile", "--out", "rep", "--no-plots", "--", "python", str(ODD), "chdir"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)},  # the script's new folder
    )
    assert res.returncode == 0, res.stderr[-3000:]
    meta = json.loads((tmp_path / "rep" / "meta.json").read_text())
    assert meta.get("status") != "running" and not (tmp_path / "rep" / ".pinprof.lock").exists()
    assert len((tmp_path / "rep" / "timeline.csv").read_text().splitlines()) == 41  # 40 batches and the header
    tune = _tune(Path("t"), "--", "python", str(ODD), "chdir", cwd=tmp_path, env={"TMPDIR": str(tmp_path)})
    assert tune.returncode == 0, tune.stderr[-3000:]
    assert (tmp_path / "t" / "tune.csv").is_file() and (
        tmp_path / "t" / "trials" / "00-baseline" / "timeline.csv"
    ).is_file()
