"""Reading verbs on inputs that are not reports: refused at once with a line that names the file."""

from __future__ import annotations

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
