"""The importer on damaged and incomplete exports: a clear message, never a KeyError."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from profiler.errors import ReportError
from profiler.nsys.importer import import_sqlite


def test_missing_nvtx_table_says_what_to_trace(tmp_path: Path) -> None:
    db = tmp_path / "x.sqlite"
    sqlite3.connect(db).execute("CREATE TABLE StringIds (id INT, value TEXT)").connection.commit()
    with pytest.raises(ReportError, match="no NVTX_EVENTS table.*--trace=nvtx"):
        import_sqlite(db)


def test_no_batch_ranges_is_an_error_that_names_the_cause(tmp_path: Path) -> None:
    db = tmp_path / "x.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE NVTX_EVENTS (start INT, end INT, eventType INT, text TEXT, globalTid INT)")
    con.execute("INSERT INTO NVTX_EVENTS VALUES (1, 2, 59, 'something else', 7)")
    con.commit()
    con.close()
    with pytest.raises(ReportError, match="no `batch <n>` NVTX ranges"):
        import_sqlite(db)


@pytest.mark.parametrize("content", [b"", b"not sqlite at all", b"SQLite format 3\x00" + b"\x00" * 50])
def test_a_file_that_is_not_an_export_is_a_clear_error(tmp_path: Path, content: bytes) -> None:
    db = tmp_path / "x.sqlite"
    db.write_bytes(content)
    with pytest.raises(ReportError):
        import_sqlite(db)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="no such file"):
        import_sqlite(tmp_path / "none.sqlite")


def test_an_importer_failure_names_its_cause_in_one_line() -> None:
    """Nsight Systems 2023.4 on an H200 CUDA 13 capture printed its error inside a status dump and
    ended with closing braces; the line pinprof printed was ``} | } | }``."""
    from profiler.nsys.run import cause

    dump = (
        "Importer error status: Importation failed.\n{\n  Error {\n    Type: RuntimeError\n"
        '    SubError {\n      Info: "Wrong event order has been detected when adding events to the collection"\n'
        "    }\n  }\n}\n}\n}\n"
    )
    assert cause(dump) == (
        "Importer error status: Importation failed. / "
        "Info: Wrong event order has been detected when adding events to the collection"
    )
    assert cause("}\n}\n") == "no output"
