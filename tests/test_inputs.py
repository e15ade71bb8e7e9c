"""Reading verbs on inputs that are not reports: refused at once with a line that names the file."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import threading
from pathlib import Path

import pytest

from profiler.cli import main
from profiler.errors import ReportError
from profiler.nsys.importer import import_sqlite
from profiler.report.files import read_calibration, read_json, read_timeline

DATA = Path(__file__).parent / "data"


def test_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "timeline.csv"
    os.mkfifo(fifo)
    result: list[BaseException] = []

    def read() -> None:
        try:
            read_timeline(fifo)
        except ReportError as err:
            result.append(err)

    # Opening a FIFO for reading blocks until a writer comes: run it where a hang cannot stop the suite.
    worker = threading.Thread(target=read)
    worker.daemon = True
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "read_timeline waited on a FIFO"
    assert result and "not a regular file" in str(result[0])


def test_a_device_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", "/dev/zero"]) == 2  # /dev/zero never ends: it used to eat memory
    assert "not a regular file" in capsys.readouterr().err


def test_deep_json_is_a_report_error(tmp_path: Path) -> None:
    path = tmp_path / "meta.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ReportError, match="nested too deeply"):
        read_json(path)


def test_a_calibration_without_its_columns_names_them(tmp_path: Path) -> None:
    (tmp_path / "calibration.csv").write_text("size,rate\n1,2\n")
    with pytest.raises(ReportError, match="missing column\\(s\\) bytes, pinned_GBps"):
        read_calibration(tmp_path)
    (tmp_path / "calibration.csv").write_text("bytes,pinned_GBps\n1048576,inf\n")
    with pytest.raises(ReportError, match="positive finite"):
        read_calibration(tmp_path)
    report = tmp_path / "report"
    shutil.copytree(DATA / "h200_default", report)
    (report / "calibration.csv").write_text("bytes,pinned_GBps\n1048576,-3\n")
    assert main(["diagnose", str(report)]) == 2  # a line, not a traceback


def test_an_export_named_with_a_hash_opens_that_file_and_creates_none(tmp_path: Path) -> None:
    odd = tmp_path / "cap#1.sqlite"
    shutil.copy(DATA / "h200_nsys" / "report.sqlite", odd)
    before = set(os.listdir(tmp_path))
    table = import_sqlite(odd)
    assert len(table) > 0
    assert set(os.listdir(tmp_path)) == before  # no stray "cap" file from a URI cut at '#'
    with sqlite3.connect(odd) as con:  # the copy is still the export it was
        assert con.execute("SELECT count(*) FROM NVTX_EVENTS").fetchone()[0] > 0


def test_writers_refuse_to_replace_a_symlink_or_a_device(tmp_path: Path) -> None:
    from profiler.atomic import write_text_atomic
    from profiler.errors import OutputNotWritableError

    target = tmp_path / "elsewhere.txt"
    target.write_text("keep me")
    link = tmp_path / "diagnosis.md"
    link.symlink_to(target)
    with pytest.raises(OutputNotWritableError, match="not a regular file"):
        write_text_atomic(link, "new")
    assert link.is_symlink() and target.read_text() == "keep me"  # the rename used to replace the link
    with pytest.raises(OutputNotWritableError):
        write_text_atomic(Path("/dev/null"), "x")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--batch-size", "16,16"], "gives 16 twice"),  # used to fuse two scenarios into one
        (["--num-workers", "100000"], "must be <="),
        (["--prefetch-factor", "1000000"], "must be <= 64"),
        (["--nproc", "100000"], "must be <="),
    ],
)
def test_run_refuses_duplicate_and_huge_axis_values(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["run", *args])
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_merge_refuses_two_folders_claiming_one_rank(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for k in (0, 1):
        shutil.copytree(DATA / "h200_default", tmp_path / f"rank{k}")
        meta = json.loads((tmp_path / f"rank{k}" / "meta.json").read_text())
        (tmp_path / f"rank{k}" / "meta.json").write_text(json.dumps({**meta, "rank": 0}))  # both claim rank 0
    assert main(["merge", str(tmp_path)]) == 2
    assert "rank(s) [0] claimed by more than one folder" in capsys.readouterr().err
