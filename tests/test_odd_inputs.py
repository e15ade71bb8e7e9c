"""Inputs that once ended a verb in a traceback (exit 70), each now a report or one line: a CPU loop
whose rows have no phase to draw, a scenario name holding a carriage return, a timeline without batch
start and end times, a damaged Nsight Systems export."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from profiler.cli import main
from profiler.render import plots
from profiler.report.files import read_timeline

HERE = Path(__file__).parent
DATA = HERE / "data"
CONV = """
import sys
import torch, torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
data = TensorDataset(torch.randn(256, 3, 32, 32), torch.randint(0, 10, (256,)))
net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 30 * 30, 10))
for x, y in DataLoader(data, batch_size=16, num_workers=2):
    loss = nn.functional.cross_entropy(net(x), y)
    loss.backward()
sys.exit(4)
"""


def test_profile_of_a_cpu_loop_with_backward_writes_its_plots_and_keeps_the_exit_status(tmp_path: Path) -> None:
    """A conv net's backward on the CPU, 2 workers, no optimizer: the report and both plots are
    written and the program's own status comes back (the gantt's legend ended it with exit 70)."""
    script = tmp_path / "conv.py"
    script.write_text(CONV)
    res = subprocess.run(
        [sys.executable, "-m", "profiler", "profile", "--out", str(tmp_path / "rep"), "--", "python", str(script)],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=HERE.parent,
    )
    assert res.returncode == 4, res.stderr[-3000:]
    assert (tmp_path / "rep" / "gantt.png").is_file() and (tmp_path / "rep" / "phases.png").is_file()


def test_gantt_of_batches_with_no_phase_to_draw(tmp_path: Path) -> None:
    tl = read_timeline(DATA / "cpu_compare" / "w2")
    flat = tl.assign(**{c: tl["batch_start_ms"] for c in tl.columns if c.endswith(("_start_ms", "_end_ms"))})
    assert plots.gantt(flat, tmp_path / "gantt.png").stat().st_size > 0


@pytest.mark.parametrize("cell", ["Slow\rReads/bs16/w2", '"Slow\rReads/bs16/w2"', '"Slow\r\nReads/bs16/w2"'])
def test_a_carriage_return_in_a_scenario_cell_is_read_or_refused_in_one_line_by_every_reading_verb(
    tmp_path: Path, cell: str, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = (DATA / "cpu_compare" / "w2" / "timeline.csv").read_bytes()
    path = tmp_path / "timeline.csv"
    path.write_bytes(raw.replace(b"SlowReads/bs16/w2", cell.encode()))
    for argv in (
        ["diagnose", str(path)],
        ["compare", str(path), str(path)],
        ["plot", str(path), "--out", str(tmp_path / "plots")],
        ["trace", str(path), "--out", str(tmp_path / "trace.json")],
    ):
        code = main(argv)
        captured = capsys.readouterr()
        errors = [ln for ln in captured.err.splitlines() if ln.strip()]
        assert code in (0, 2), (argv, captured.err[-2000:])
        assert code == 0 or len(errors) == 1, (argv, errors)


def test_plot_of_a_timeline_without_batch_start_and_end(tmp_path: Path) -> None:
    tl = pd.read_csv(DATA / "cpu_compare" / "w2" / "timeline.csv")
    tl.drop(columns=["batch_start_ms", "batch_end_ms"]).to_csv(tmp_path / "timeline.csv", index=False)
    assert main(["plot", str(tmp_path / "timeline.csv"), "--out", str(tmp_path / "plots")]) == 0
    assert (tmp_path / "plots" / "gantt.png").is_file()


@pytest.mark.parametrize("seed", [21, 26, 50, 57])
def test_a_damaged_nsys_export_is_refused_in_one_line(tmp_path: Path, seed: int) -> None:
    """200 bytes of the recorded export overwritten at random (these seeds hit a column's name, which
    Python's sqlite3 decodes strictly: UnicodeDecodeError before)."""
    data = bytearray((DATA / "h200_nsys" / "report.sqlite").read_bytes())
    rng = random.Random(seed)
    for _ in range(200):
        data[rng.randrange(100, len(data))] = rng.randrange(256)
    path = tmp_path / "report.sqlite"
    path.write_bytes(bytes(data))
    res = subprocess.run(
        [sys.executable, "-m", "profiler", "nsys-import", str(path), "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=HERE.parent,
    )
    errors = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.returncode == 2 and len(errors) == 1 and "damaged" in errors[0], res.stderr[-2000:]


def _unshare_works() -> bool:
    import shutil

    return shutil.which("unshare") is not None and subprocess.run(["unshare", "-rm", "true"]).returncode == 0


@pytest.mark.skipif(not _unshare_works(), reason="needs `unshare -rm` (user namespaces) to mount a small tmpfs")
def test_trace_on_a_full_disk_says_so_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    """The trace of a 20-row timeline on a 16 KiB tmpfs: one line, exit 1 or 2, and the folder holds
    only what was there before (the partial ``.trace.json.*.tmp`` stayed)."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    src = DATA / "cpu_compare" / "w2" / "timeline.csv"
    cmd = (
        f"mount -t tmpfs -o size=16k none {mnt} && cp {src} {mnt}/ && cd {HERE.parent} && "
        f"{sys.executable} -m profiler trace {mnt}/timeline.csv; echo rc=$?; ls -A {mnt}"
    )
    res = subprocess.run(["unshare", "-rm", "sh", "-c", cmd], capture_output=True, text=True, timeout=120)
    lines = res.stdout.strip().splitlines()
    errors = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert lines[0] in ("rc=1", "rc=2") and len(errors) == 1 and "No space left" in errors[0], res.stdout + res.stderr
    assert lines[1:] == ["timeline.csv"], lines


def test_link_image_and_html_in_names_stay_text_escaped_once(tmp_path: Path) -> None:
    """A Dataset's class name with ``[text](url)``, ``![alt](url)`` and ``<b>``; an exception's class
    name ``Boom<&>`` (it comes back through meta.json): no live link or image in diagnosis.md or
    summary.md, and each name escaped once in Markdown and in HTML (``&amp;lt;`` before)."""
    out, script = tmp_path / "rep", str(HERE / "scripts" / "odd_names.py")
    res = subprocess.run(
        [sys.executable, "-m", "profiler", "profile", "--out", str(out), "--no-plots", "--", "python", script],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=HERE.parent,
    )
    assert res.returncode == 1, res.stderr[-2000:]
    for name in ("diagnosis.md", "summary.md"):
        text = (out / name).read_text()
        assert "](http" not in text.replace("\\](http", ""), name  # every ] before a link target escaped
        assert "![" not in text and "<b>" not in text, name
        assert "interrupted by Boom&lt;&amp;&gt;)" in text and "&amp;lt;" not in text, name
    page = (out / "report.html").read_text()
    assert "Boom&lt;&amp;&gt;" in page and "&amp;lt;" not in page
    assert "report written" in res.stderr and "(PARTIAL: interrupted by Boom<&>)" in res.stderr
