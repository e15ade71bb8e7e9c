from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import torch

from profiler import TransferProfiler
from profiler.atomic import csv_rows, csv_text, write_csv, write_text_atomic
from profiler.errors import ReportError
from profiler.report.files import read_timeline
from profiler.timeline.schema import COLUMNS

DATA = Path(__file__).parent / "data"


def small_timeline() -> pd.DataFrame:
    prof = TransferProfiler(mode="pageable", device="cpu", warmup=1, run="rt")
    for batch in prof.batches([torch.randn(8, 3)] * 4):
        prof.to_device(batch)
        with prof.cpu_work():
            pass
    return prof.timeline()


def test_csv_round_trip_gives_an_equal_frame(tmp_path: Path) -> None:
    tl = small_timeline()
    write_csv(tl, tmp_path / "timeline.csv")
    back = read_timeline(tmp_path)  # a folder resolves to its timeline.csv
    pd.testing.assert_frame_equal(tl, back)
    assert back["h2d_ms"].isna().all()  # written empty, read back as NaN, never 0
    assert ",," in (tmp_path / "timeline.csv").read_text()


def test_atomic_write_keeps_the_old_file_when_writing_fails(tmp_path: Path) -> None:
    target = tmp_path / "timeline.csv"
    target.write_text("good\n")

    class Boom(str):
        def __str__(self) -> str:
            raise RuntimeError

    with pytest.raises(TypeError):
        write_text_atomic(target, 123)  # type: ignore[arg-type]
    assert target.read_text() == "good\n"
    assert [p.name for p in tmp_path.iterdir()] == ["timeline.csv"]  # no temporary left behind


@pytest.mark.parametrize(
    "content, message",
    [
        ("", "empty"),
        ("a,b\n1,2\n", "missing column"),
        ("\x00\x01\x02binary", "missing column|not a CSV|incomplete"),
        ('mode,batch,bytes\npinned,"unterminated\n', "not a CSV|missing|wrong type"),
        ("mode,batch,bytes\npinned,zero,10\n", "batch.*wrong type"),
        ("mode,batch,bytes,h2d_ms\npinned,0,10,fast\n", "h2d_ms.*wrong type"),
    ],
)
def test_bad_files_give_a_clear_error(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "t.csv"
    path.write_text(content)
    with pytest.raises(ReportError, match=message):
        read_timeline(path)


def test_a_folder_without_a_timeline_says_what_to_pass(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="no timeline.csv"):
        read_timeline(tmp_path)
    with pytest.raises(ReportError, match="no such file"):
        read_timeline(tmp_path / "nope.csv")


def test_a_minimal_foreign_timeline_is_completed_with_empty_columns(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("mode,batch,bytes,h2d_ms,src_memory\npinned,0,100,0.5,pinned\npinned,1,100,,pinned\n")
    tl = read_timeline(path)
    assert tl.h2d_ms.iloc[0] == 0.5 and pd.isna(tl.h2d_ms.iloc[1]) and tl.fetch_ms.isna().all()
    assert not tl.warmup.any()


def test_out_is_checked_when_the_profiler_is_made_and_claimed_for_one_run(tmp_path: Path) -> None:
    from profiler.errors import OutputExistsError, OutputNotWritableError

    first = TransferProfiler(device="cpu", out=tmp_path / "rep")
    with pytest.raises(OutputExistsError, match="being written by another pinprof run"):
        TransferProfiler(device="cpu", out=tmp_path / "rep")  # same folder while the first holds it
    with first as prof:
        for b in prof.batches([torch.ones(2)] * 2):
            prof.to_device(b)
    assert (tmp_path / "rep" / "timeline.csv").is_file() and not (tmp_path / "rep" / ".pinprof.lock").exists()
    with pytest.raises(OutputExistsError, match="already holds a report"):
        TransferProfiler(device="cpu", out=tmp_path / "rep")  # a new run would mix into the old report
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputNotWritableError, match="not writable"):
        TransferProfiler(device="cpu", out=tmp_path / "file" / "sub")  # before any batch, not after the loop


def test_check_refuses_what_claim_refuses_and_creates_nothing(tmp_path: Path) -> None:
    """``claim.check``, which a verb calls before it imports torch, refuses a folder a live run holds
    and a lock pinprof did not make, as ``claim`` does; it takes nothing, and a dead run's lock is no
    refusal (``claim`` takes it over)."""
    import json
    import os
    import platform
    import subprocess
    import sys

    from profiler.errors import OutputExistsError
    from profiler.report.claim import LOCK, check, claim, release

    check(tmp_path / "new", "--out")  # no folder: nothing to refuse, and nothing made
    assert not (tmp_path / "new").exists()
    held = tmp_path / "held"
    lock = claim(held, "--out")  # this process holds it
    with pytest.raises(OutputExistsError, match="--out '.*held' is being written by another pinprof run"):
        check(held, "--out")
    release(lock)
    check(held, "--out")
    assert not (held / LOCK).exists()  # check took no lock
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (held / LOCK).write_text(json.dumps({"pid": int(dead.stdout), "host": platform.node()}))
    check(held, "--out")  # a run that is gone holds nothing
    (held / LOCK).unlink()
    os.mkfifo(held / LOCK)  # not a lock pinprof made: refused, and never opened for reading
    with pytest.raises(OutputExistsError, match="it is not a lock pinprof made"):
        check(held, "--out")


def test_check_leaves_a_folder_it_may_not_read_to_claim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder this user may not read (its lock's stat refused): ``check`` says nothing, and ``claim``
    then gives the run's own error. (The test runs as root, so the refusal is played by the stat.)"""
    from profiler.report.claim import check

    def refused(self: Path, **kwargs: object) -> bool:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "exists", refused)
    monkeypatch.setattr(Path, "is_symlink", refused)
    check(tmp_path / "theirs", "--out")


@pytest.mark.parametrize("verb", ["profile", "run"])
def test_a_locked_out_is_refused_before_torch_is_imported(tmp_path: Path, verb: str) -> None:
    """The CLI checks ``--out``'s lock before it imports its driver: the refusal comes without torch in
    the process (``-X importtime`` lists every module imported)."""
    import subprocess
    import sys

    from profiler.report.claim import LOCK

    (tmp_path / LOCK).symlink_to("/dev/zero")
    argv = ["--", "python", "-c", "pass"] if verb == "profile" else ["--force", "--device", "cpu"]
    res = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "profiler", verb, "--out", str(tmp_path), *argv],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2 and f"{LOCK}: a symbolic link" in res.stderr, res.stderr[-2000:]
    imported = {ln.rsplit("|", 1)[-1].strip() for ln in res.stderr.splitlines() if ln.startswith("import time:")}
    assert "profiler.report.claim" in imported and "torch" not in imported


@pytest.mark.parametrize(
    "recorded",
    [
        "h200_short_step",
        "h200_default",
        "h200_rows/accelerate",
        "h200_profile_resnet",
        "cpu_gc_pauses",
        "cpu_two_epochs",
    ],
)
def test_journal_rows_read_back_as_the_final_file_on_recorded_timelines(recorded: str, tmp_path: Path) -> None:
    """The journal's formatter (``csv_rows``: one printf-style format a row) against the final file's
    (``csv_text``: pandas), on whole recorded timelines of every clock, and with a NaN put into a
    column that has numbers (the one case formatted cell by cell): the same frame reads back."""
    frame = read_timeline(DATA / recorded)[list(COLUMNS)].copy()
    frame.loc[frame.index[len(frame) // 2], "batch_ms"] = float("nan")
    header = ",".join(COLUMNS) + "\n"
    (tmp_path / "rows").mkdir()
    (tmp_path / "rows" / "timeline.csv").write_text(header + csv_rows(frame.head(3)) + csv_rows(frame.iloc[3:]))
    (tmp_path / "text").mkdir()
    (tmp_path / "text" / "timeline.csv").write_text(csv_text(frame))
    rows, text = read_timeline(tmp_path / "rows"), read_timeline(tmp_path / "text")
    pd.testing.assert_frame_equal(rows, text, check_exact=True)
    assert len(rows) == len(frame) and rows.batch_ms.isna().sum() == frame.batch_ms.isna().sum()
