"""Nothing measured is lost: ``pinprof run`` appends completed batches to timeline.csv as it goes.

SIGKILL (no handler can run) and a full disk (every write fails) are the two ends no ``finally``
reaches; both must leave the batches flushed before, and a meta.json that says the report is partial.
"""

from __future__ import annotations

import errno
import io
import json
import os
import pickle
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import wait_for_journal

from profiler.atomic import csv_rows, write_csv
from profiler.cli import main
from profiler.report.files import read_timeline
from profiler.report.journal import Journal
from profiler.timeline.schema import COLUMNS

ROOT = Path(__file__).parent.parent
DATA = Path(__file__).parent / "data"
# A long CPU run: many more batches than the test waits for, flushed every 0.2 s.
RUN = ["--device", "cpu", "--modes", "pageable", "--batch-size", "16", "--num-workers", "0"]
RUN += ["--dataset-size", "512", "--batches", "1000000", "--cpu-work-ms", "0.5", "--no-plots"]
ENV = {**os.environ, "PINPROF_FLUSH_S": "0.2"}


def rows_on_disk(path: Path) -> int:
    try:
        return max(path.read_bytes().count(b"\n") - 1, 0)
    except FileNotFoundError:
        return 0


def test_sigkill_mid_scenario_keeps_the_flushed_batches(tmp_path: Path) -> None:
    out = tmp_path / "rep"
    proc = subprocess.Popen(
        [sys.executable, "-m", "profiler", "run", "--out", str(out), *RUN],
        cwd=ROOT,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while rows_on_disk(out / "timeline.csv") < 200 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        seen = rows_on_disk(out / "timeline.csv")
        assert seen >= 200, f"no flush reached the disk: {seen} rows (exit {proc.poll()})"
    finally:
        proc.send_signal(signal.SIGKILL)  # no handler runs: only what is on disk survives
        proc.wait(timeout=30)
    wait_for_journal(out / "timeline.csv")  # and what its journal's process was handed, written still
    tl = read_timeline(out)
    assert len(tl) >= seen  # every row seen before the kill is still there, none torn
    assert list(tl.batch) == list(range(len(tl)))
    assert tl.batch_ms.notna().all() and (tl.bytes == 16 * 3 * 32 * 32 * 4 + 16 * 8).all()
    meta = json.loads((out / "meta.json").read_text())
    assert meta["partial"] is True and meta["status"] == "running"  # it never reached its end
    assert main(["diagnose", str(out), "--write"]) == 0
    assert "PARTIAL: the run stopped before its end" in (out / "diagnosis.md").read_text()


def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True)
    return probe.returncode == 0


@pytest.mark.skipif(not _unshare_works(), reason="needs `unshare -rm` (user namespaces) to mount a small tmpfs")
def test_a_full_disk_keeps_the_earlier_batches_and_says_partial(tmp_path: Path) -> None:
    """A 96 KiB tmpfs (mounted in a user namespace, no root needed) fills after some hundreds of rows."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    out = mnt / "rep"
    cmd = " ".join([sys.executable, "-m", "profiler", "run", "--out", str(out), *RUN])
    script = (
        f"mount -t tmpfs -o size=96k none {mnt} && cd {ROOT} && {cmd}; echo rc=$?; "
        f"cp -r {out} {tmp_path}/kept"  # the tmpfs goes with the namespace: keep what it held
    )
    res = subprocess.run(["unshare", "-rm", "sh", "-c", script], env=ENV, capture_output=True, text=True, timeout=300)
    assert "rc=1" in res.stdout, res.stdout + res.stderr[-2000:]
    errors = [line for line in res.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "No space left on device" in errors[0] and "timeline.csv" in errors[0], res.stderr
    kept = tmp_path / "kept"
    tl = read_timeline(kept)
    assert len(tl) >= 50 and list(tl.batch) == list(range(len(tl)))
    assert f"keeps the {len(tl)} batches" in errors[0]  # the line says how many, and they are there
    meta = json.loads((kept / "meta.json").read_text())
    assert meta["partial"] is True
    assert not (kept / ".pinprof.lock").exists()  # the folder is released for a run after


def test_appended_rows_read_back_as_the_final_files_do(tmp_path: Path) -> None:
    """The journal formats its rows with the csv module (``atomic.csv_rows``), the final file with
    pandas (``write_csv``): the same frame reads back the same from both, whatever its cells hold:
    floats of 17 digits, NaN, missing integers, text with commas, quotes, a newline, or a formula."""
    frame = read_timeline(DATA / "h200_default").head(6).copy()
    frame.loc[0, "h2d_ms"] = 0.1 + 0.2  # 0.30000000000000004: needs every digit
    frame.loc[1, "h2d_ms"] = float("nan")
    frame.loc[2, "scenario"] = 'a, "quoted"\nscenario'
    frame.loc[3, "scenario"] = "=cmd|' /c calc'!A0"  # neutralised in both files
    frame["pin_faults"] = pd.array([1, None, 3, None, 5, 6], dtype="Int64")
    (tmp_path / "journal").mkdir()
    journal = Journal(tmp_path / "journal" / "timeline.csv")
    journal.start()
    journal.append(frame.head(2))
    journal.append(frame.tail(4))
    write_csv(frame[list(COLUMNS)], tmp_path / "timeline.csv")
    appended, final = read_timeline(tmp_path / "journal" / "timeline.csv"), read_timeline(tmp_path / "timeline.csv")
    pd.testing.assert_frame_equal(appended, final)
    assert appended.h2d_ms.iloc[0] == 0.1 + 0.2 and pd.isna(appended.h2d_ms.iloc[1])
    assert len(appended) == 6 and appended.scenario.iloc[2].startswith('a, "quoted"')  # one cell, not split
    assert appended.scenario.iloc[3].startswith("'=")
    assert appended.pin_faults.isna().tolist() == [False, True, False, True, False, False]


def test_a_failed_append_keeps_the_whole_rows_the_disk_took(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A filling disk takes half of an append's bytes, then refuses: the file keeps the whole rows of
    that half (one of three here), cut at a row's end, and ``rows`` counts them."""
    frame = read_timeline(DATA / "h200_default").head(6)
    journal = Journal(tmp_path / "timeline.csv")
    journal.start()
    journal.append(frame.head(3))
    real_write = os.write
    calls = []

    def half_then_full(fd: int, data: bytes) -> int:  # what a filling disk does: a short write, then ENOSPC
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_full)
    with pytest.raises(OSError, match="No space"):
        journal.append(frame.tail(3))
    monkeypatch.undo()
    assert journal.rows == 4
    text = (tmp_path / "timeline.csv").read_text()
    assert text.endswith("\n") and text.splitlines()[0] == ",".join(COLUMNS)
    pd.testing.assert_frame_equal(read_timeline(tmp_path / "timeline.csv"), frame.head(4))


def test_keep_appends_the_rows_beyond_the_appended_ones_as_far_as_the_disk_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    frame = read_timeline(DATA / "h200_default").head(8)
    journal = Journal(tmp_path / "timeline.csv")
    journal.start()
    journal.append(frame.head(2))
    room = [len(csv_rows(frame.iloc[2:5][list(COLUMNS)]).encode()) + 10]  # three rows and a bit
    real_write = os.write

    def filling(fd: int, data: bytes) -> int:
        if room[0] <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        n = real_write(fd, bytes(data[: room[0]]))
        room[0] -= n
        return n

    monkeypatch.setattr(os, "write", filling)
    assert journal.keep(frame) == 3  # rows 2-4 fit, 5-7 did not
    monkeypatch.undo()
    assert journal.rows == 5
    pd.testing.assert_frame_equal(read_timeline(tmp_path / "timeline.csv"), frame.head(5))


def test_the_journal_clock_stretches_after_a_slow_append_unless_the_interval_was_given() -> None:
    """Appends take at most FLUSH_SHARE of the loop by default; PINPROF_FLUSH_S given is kept exactly."""
    from profiler.capture.clock import now_ms
    from profiler.capture.rows import FLUSH_SHARE, FlushClock
    from profiler.settings import load

    stretched, fixed = FlushClock(2000.0, stretch=True), FlushClock(2000.0, stretch=False)
    began = now_ms() - 20.0  # an append that took 20 ms
    stretched.flushed(began)
    fixed.flushed(began)
    assert stretched.due_ms - now_ms() >= 20.0 / FLUSH_SHARE - 1.0 > 2000.0  # 10 s
    assert fixed.due_ms - now_ms() <= 2000.0
    quick = FlushClock(2000.0, stretch=True)
    quick.flushed(now_ms() - 0.5)  # a 0.5 ms append: the interval stays 2 s
    assert 1990.0 <= quick.due_ms - now_ms() <= 2000.0
    assert load({}).flush_fixed is False and load({"PINPROF_FLUSH_S": "0.2"}).flush_fixed is True


def _recorded_rows(batches: int) -> list:
    """A CPU loop's rows as the journal's thread hands them over (``rows.completed_raw``), in three
    ranges, with the profiler that holds them."""
    import torch

    from profiler import TransferProfiler
    from profiler.capture import rows

    prof = TransferProfiler("pageable", torch.device("cpu"))
    data = [torch.randn(16, 3, 8, 8) for _ in range(batches)]
    for b in prof.batches(data):
        x = prof.to_device(b)
        with prof.compute():
            x.sum()
    prof.timeline()  # every row complete
    got, start = [], 0
    for stop in (batches // 3, 2 * batches // 3, batches):
        raw, done = rows.completed_raw(prof, start)
        assert raw is not None and done == batches  # all complete: a range is cut below
        got.append(raw._replace(raw={k: v[: stop - start + raw.before] for k, v in raw.raw.items()}))
        start = stop
    return got


def _messages(*parts: tuple[str, object]) -> bytes:
    out = b""
    for part in parts:
        data = pickle.dumps(part)
        out += struct.pack("<Q", len(data)) + data
    return out


def test_the_journal_process_writes_what_the_loops_process_would_have(tmp_path: Path) -> None:
    """The rows handed to the journal's process (``journal_process.serve``) make the same file, byte
    for byte, as the same rows built and appended in the loop's process, as before the process."""
    from profiler.report.journal_process import ROWS, STOP, serve
    from profiler.timeline.build import build_rows

    ranges = _recorded_rows(30)
    mine = Journal(tmp_path / "here.csv")
    mine.start()
    for r in ranges:
        mine.append(build_rows(r))
    theirs = Journal(tmp_path / "there.csv")
    theirs.start()
    said = serve(theirs.path, io.BytesIO(_messages((ROWS, ranges[:2]), (ROWS, ranges[2:]), (STOP, None))))
    assert said["rows"] == 30 and said["error"] is None
    assert theirs.path.read_bytes() == mine.path.read_bytes()
    assert list(read_timeline(theirs.path).batch) == list(range(30))


def test_the_journal_process_keeps_its_rows_at_a_full_disk_and_at_a_cut_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A full disk stops the child's appends with one line, what follows is read and dropped; an input
    that ends (the loop's process killed) or is cut mid-message ends the child with what it wrote."""
    from profiler.report.journal_process import ROWS, serve

    ranges = _recorded_rows(30)
    journal = Journal(tmp_path / "timeline.csv")
    journal.start()
    real_write, calls = os.write, []

    def full_after_first(fd: int, data: bytes) -> int:
        calls.append(len(data))
        if len(calls) > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", full_after_first)
    said = serve(journal.path, io.BytesIO(_messages(*((ROWS, [r]) for r in ranges))))
    monkeypatch.undo()
    assert said["rows"] == 10 and "No space left on device" in said["error"] and "with 10 batches" in said["error"]
    assert len(calls) == 2  # the third message was read, not written
    assert capsys.readouterr().err.count("pinprof: ") == 1
    assert list(read_timeline(journal.path).batch) == list(range(10))
    # Quiet (``pinprof run``): the child ends at the failed append, unsaid, with its errno for the
    # sender to raise, whose next message then finds no reader.
    quiet = Journal(tmp_path / "quiet.csv")
    quiet.start()
    calls.clear()
    monkeypatch.setattr(os, "write", full_after_first)
    stream = io.BytesIO(_messages(*((ROWS, [r]) for r in ranges)))
    said = serve(quiet.path, stream, say=False)
    monkeypatch.undo()
    assert said["rows"] == 10 and said["error"] == "No space left on device" and said["errno"] == errno.ENOSPC
    assert stream.read() != b""  # the third message left unread
    assert capsys.readouterr().err == ""
    cut = tmp_path / "cut.csv"
    Journal(cut).start()
    sent = _messages((ROWS, ranges[:1]), (ROWS, ranges[1:]))
    said = serve(cut, io.BytesIO(sent[: len(sent) - 7]))  # no stop; the second message cut short
    assert said["rows"] == 10 and said["error"] is None
    assert list(read_timeline(cut).batch) == list(range(10))
    garbled = tmp_path / "garbled.csv"
    Journal(garbled).start()
    sent = _messages((ROWS, ranges[:1])) + struct.pack("<Q", 5) + b"\x80junk" + _messages((ROWS, ranges[1:]))
    said = serve(garbled, io.BytesIO(sent))  # two writers interleaved: read as the end
    assert said["rows"] == 10 and said["error"] is None
    assert list(read_timeline(garbled).batch) == list(range(10))


def test_a_dead_journal_process_hands_the_appends_back(tmp_path: Path) -> None:
    """Where the child dies (killed, out of memory), ``send`` says so and the caller appends itself;
    what the child wrote before stays, and its count comes back at ``close``."""
    from profiler.report.journal_process import NICE, JournalProcess

    ranges = _recorded_rows(30)
    journal = Journal(tmp_path / "timeline.csv")
    journal.start()
    child = JournalProcess(journal)
    assert child.start()
    mine = os.getpriority(os.PRIO_PROCESS, 0)
    assert os.getpriority(os.PRIO_PROCESS, child._proc.pid) == min(mine + NICE, 19)  # type: ignore[union-attr]  # the loop first
    assert child.send(ranges[:1])
    child.close()
    assert journal.rows == 10 and child.error is None
    assert (
        child.cpu_ms is not None and child.start_ms is not None and 0 < child.cpu_ms < child.start_ms
    )  # 10 rows, against pandas imported
    assert list(read_timeline(journal.path).batch) == list(range(10))
    again = JournalProcess(journal)
    assert again.start()
    again._proc.kill()  # type: ignore[union-attr]
    again._proc.wait()  # type: ignore[union-attr]
    assert not again.send(ranges[1:2]) and not again.running
    assert journal.rows == 10 and again.error is None
