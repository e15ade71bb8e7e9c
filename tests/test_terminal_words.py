"""What ``pinprof profile`` says on the terminal: the program's traceback as Python prints it, no
report.html promised where none was written (and why no batch was measured), pinprof's own threads
in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
BAD_TO = """
import torch
from torch.utils.data import DataLoader
for x in DataLoader([torch.zeros(4)] * 8, batch_size=2):
    x.to("cpu", dtype=torch.float32)
    x.to("bogus")
"""
NO_LOADER = """
import torch
print(sum(torch.ones(3)).item())
"""


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=cwd)


def test_the_programs_traceback_is_the_one_python_prints(tmp_path: Path) -> None:
    """An error raised in a ``.to()`` that pinprof's hook passed on: the same traceback as the bare
    script's, with no frame of pinprof's (its runner, its hook) and no chained error of its own."""
    (tmp_path / "bad_to.py").write_text(BAD_TO)
    bare = _run([sys.executable, "bad_to.py"], tmp_path)
    prof = _run(
        [sys.executable, "-m", "profiler", "profile", "--out", "rep", "--no-plots", "--", "python", "bad_to.py"],
        tmp_path,
    )
    assert bare.returncode == prof.returncode == 1
    shown = prof.stderr[prof.stderr.index("Traceback") :]
    assert shown.startswith(bare.stderr), prof.stderr[-3000:]
    assert "profiler" not in shown[: len(bare.stderr)] and "During handling" not in prof.stderr


def test_no_batch_measured_promises_no_report_html_and_says_why(tmp_path: Path) -> None:
    (tmp_path / "no_loader.py").write_text(NO_LOADER)
    res = _run([sys.executable, "-m", "profiler", "profile", "--out", "rep", "--", "python", "no_loader.py"], tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "report.html" not in res.stderr and not (tmp_path / "rep" / "report.html").exists()
    said = [ln for ln in res.stderr.splitlines() if "no batch was measured" in ln]
    assert len(said) == 1 and "DataLoader" in said[0]


def test_pinprofs_own_threads_take_one_line_on_the_terminal(tmp_path: Path) -> None:
    """A run long enough for the journal's thread to append (about 4 s, an append every 0.5 s)."""
    loop = str(HERE / "hostile" / "steady_loop.py")
    cmd = [sys.executable, "-m", "profiler", "profile", "--out", "rep", "--no-plots", "--", "python", loop]
    res = subprocess.run(
        [*cmd, str(tmp_path / "it.log"), "800"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "PINPROF_FLUSH_S": "0.5"},
    )
    assert res.returncode == 0, res.stderr[-2000:]
    threads = [ln for ln in res.stderr.splitlines() if "pinprof's own threads" in ln]
    assert len(threads) == 1 and threads[0].endswith("(report.html has the detail)"), res.stderr[-2000:]
    after = res.stderr.splitlines()[res.stderr.splitlines().index(threads[0]) + 1]
    assert after.startswith("pinprof: report written to")  # no paragraph follows it


FLAGS = """
import sys
import torch
from torch.utils.data import DataLoader
for x in DataLoader([torch.zeros(4)] * 4, batch_size=2):
    x.to("cpu")
print("flags", sys.stdout.write_through, sys.flags.dev_mode, sys.warnoptions)
"""


def test_pythons_own_options_reach_the_scripts_interpreter(tmp_path: Path) -> None:
    """``python -u -X dev -W error::UserWarning script.py`` under pinprof profile: the script sees
    those options as it would run bare (they were refused)."""
    (tmp_path / "flags.py").write_text(FLAGS)
    opts = ["-u", "-X", "dev", "-W", "error::UserWarning"]
    bare = _run([sys.executable, *opts, "flags.py"], tmp_path)
    prof = _run(
        [sys.executable, "-m", "profiler", "profile", "--out", "rep", "--no-plots", "--", "python", *opts, "flags.py"],
        tmp_path,
    )
    assert prof.returncode == 0, prof.stderr[-2000:]
    said = [ln for ln in prof.stdout.splitlines() if ln.startswith("flags")]
    assert said == [ln for ln in bare.stdout.splitlines() if ln.startswith("flags")]
    assert said[0].startswith("flags True True [") and "'error::UserWarning'" in said[0]
    assert (tmp_path / "rep" / "timeline.csv").read_text().count("\n") == 3  # two batches and the header


def test_an_option_that_changes_what_runs_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "flags.py").write_text(FLAGS)
    res = _run(
        [sys.executable, "-m", "profiler", "profile", "--out", "rep", "--", "python", "-I", "flags.py"], tmp_path
    )
    errors = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.returncode == 2 and len(errors) == 1 and "'-I' is not supported" in errors[0], res.stderr
