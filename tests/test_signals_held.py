"""Reports written with signals held (profiler.report.signals): a handler that raises mid-write cannot
leave the report unwritten, and what it says is delivered afterwards or dropped as asked."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest
import torch

from profiler import TransferProfiler
from profiler.capture.auto_session import AutoSession
from profiler.drivers import library as profiler_module
from profiler.drivers import script
from profiler.report import signals as interrupt
from profiler.report.files import read_timeline
from profiler.report.signals import write_held


class WorkerDied(RuntimeError):
    pass


@pytest.fixture
def raising_sigchld() -> Any:
    """A SIGCHLD handler that raises, as torch's DataLoader installs once a worker has died."""
    calls: list[int] = []

    def handler(signum: int, frame: object) -> None:
        calls.append(signum)
        raise WorkerDied("DataLoader worker (pid 1) is killed by signal: Killed.")

    previous = signal.signal(signal.SIGCHLD, handler)
    yield handler, calls
    signal.signal(signal.SIGCHLD, previous)


def write_two_files(folder: Path) -> int:
    """Two files with a signal between them: unheld, the handler raises before the second."""
    (folder / "timeline.csv").write_text("batch\n0\n")
    signal.raise_signal(signal.SIGCHLD)
    (folder / "meta.json").write_text("{}")
    return 2


def test_unheld_the_handler_cuts_the_write(tmp_path: Path, raising_sigchld: Any) -> None:
    with pytest.raises(WorkerDied):
        write_two_files(tmp_path)
    assert not (tmp_path / "meta.json").exists()  # what write_held is there to prevent


def test_held_write_completes_and_the_signal_is_replayed_after(tmp_path: Path, raising_sigchld: Any) -> None:
    handler, calls = raising_sigchld
    with pytest.raises(WorkerDied):
        write_held(lambda: write_two_files(tmp_path), replay=True)
    assert (tmp_path / "meta.json").exists() and calls == [signal.SIGCHLD]
    assert signal.getsignal(signal.SIGCHLD) is handler


def test_without_replay_the_late_signal_is_dropped(tmp_path: Path, raising_sigchld: Any, python_sigint: None) -> None:
    handler, calls = raising_sigchld
    assert write_held(lambda: write_two_files(tmp_path), replay=False) == 2
    assert (tmp_path / "meta.json").exists() and calls == []
    assert signal.getsignal(signal.SIGCHLD) is handler
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_without_replay_what_a_late_handler_raises_becomes_a_note(tmp_path: Path, raising_sigchld: Any) -> None:
    original = ConnectionResetError(104, "Connection reset by peer")
    write_held(lambda: write_two_files(tmp_path), replay=False, late=interrupt.note_on(original))
    assert (tmp_path / "meta.json").exists()
    assert original.__notes__ == [
        "pinprof: then, while the report was written: WorkerDied: "
        "DataLoader worker (pid 1) is killed by signal: Killed."
    ]


def test_a_handler_firing_before_the_hold_is_in_place_is_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pending signal runs at the next bytecode, which can be inside SignalsHeld.__enter__."""
    real = signal.signal
    fired: list[int] = []

    def signal_with_a_pending_handler(signum: int, handler: Any) -> Any:
        if not fired:  # the first install meets a handler that was already pending, once
            fired.append(signum)
            raise WorkerDied("late")
        return real(signum, handler)

    monkeypatch.setattr(interrupt.signal, "signal", signal_with_a_pending_handler)
    before = {s: signal.getsignal(s) for s in interrupt._HELD}
    writes: list[int] = []

    def write() -> str:
        writes.append(len(writes) + 1)
        return "done"

    assert write_held(write, replay=False) == "done"
    assert writes == [1] and fired
    monkeypatch.undo()
    assert {s: signal.getsignal(s) for s in interrupt._HELD} == before
    with pytest.raises(WorkerDied, match="late"):  # with replay, what it raised is raised after the write
        fired.clear()
        monkeypatch.setattr(interrupt.signal, "signal", signal_with_a_pending_handler)
        write_held(write, replay=True)
    assert writes == [1, 2]


def test_an_error_of_the_write_itself_is_not_retried(tmp_path: Path) -> None:
    calls: list[int] = []

    def failing() -> None:
        calls.append(1)
        raise OSError("No space left on device")

    with pytest.raises(OSError, match="No space"):
        write_held(failing)
    assert calls == [1]


def test_a_handler_set_outside_python_is_left_in_place(monkeypatch: pytest.MonkeyPatch, python_sigint: None) -> None:
    """getsignal() is None for a handler a C library set: signal() could not put it back."""
    real_getsignal = signal.getsignal
    before = real_getsignal(signal.SIGCHLD)
    monkeypatch.setattr(interrupt.signal, "getsignal", lambda s: None if s == signal.SIGCHLD else real_getsignal(s))
    seen: dict[str, Any] = {}

    def write() -> None:
        seen["chld"], seen["int"] = real_getsignal(signal.SIGCHLD), real_getsignal(signal.SIGINT)

    write_held(write)
    assert seen["chld"] is before  # not replaced
    assert seen["int"] is not signal.default_int_handler  # held
    monkeypatch.undo()
    assert real_getsignal(signal.SIGCHLD) is before and signal.getsignal(signal.SIGINT) is signal.default_int_handler


def restore_then_signal(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The first line of TransferProfiler's exit raises SIGCHLD once: its handler runs there, before
    the report's hold, as torch's did a few ms after the reset connection of a worker that died."""
    real = profiler_module.restore_sigterm
    fired: list[int] = []

    def restore(previous: Any) -> None:
        real(previous)
        if not fired:
            fired.append(1)
            signal.raise_signal(signal.SIGCHLD)

    monkeypatch.setattr(profiler_module, "restore_sigterm", restore)
    return fired


def loop_of_three(out: Path, then: BaseException | None) -> None:
    with TransferProfiler(mode="pageable", device="cpu", out=out) as prof:
        for batch in prof.batches([torch.ones(4)] * 3):
            prof.to_device(batch)
        if then is not None:
            raise then


def test_a_handler_before_the_exits_hold_costs_a_retry_not_the_report(
    tmp_path: Path, raising_sigchld: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    fired = restore_then_signal(monkeypatch)
    reset = ConnectionResetError(104, "Connection reset by peer")
    with pytest.raises(ConnectionResetError) as got:
        loop_of_three(tmp_path / "rep", reset)
    assert fired and got.value is reset  # the loop's own error propagates, not the handler's
    meta = json.loads((tmp_path / "rep" / "meta.json").read_text())
    assert meta["partial"] is True and meta["interrupted_by"] == "ConnectionResetError"
    assert list(read_timeline(tmp_path / "rep").batch) == [0, 1, 2]
    assert reset.__notes__ == [
        "pinprof: then, while the report was written: WorkerDied: DataLoader worker (pid 1) is killed by signal: Killed."
    ]


def test_after_a_clean_loop_a_handler_before_the_hold_is_raised_once_the_report_is_written(
    tmp_path: Path, raising_sigchld: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, calls = raising_sigchld
    restore_then_signal(monkeypatch)
    with pytest.raises(WorkerDied):
        loop_of_three(tmp_path / "rep", None)
    meta = json.loads((tmp_path / "rep" / "meta.json").read_text())
    assert meta["partial"] is False and len(read_timeline(tmp_path / "rep")) == 3
    assert calls == [signal.SIGCHLD]  # raised once, not once more by a replay


def test_pinprof_profile_shows_the_programs_error_whole_with_a_handler_firing_meanwhile(
    tmp_path: Path, raising_sigchld: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The program's error is printed by run_profiled; a SIGCHLD handler raising in that print
    (torch's, ms after a worker's reset connection) is shown after it, and the run still returns."""
    prog = tmp_path / "train.py"
    prog.write_text("raise ConnectionResetError(104, 'Connection reset by peer')\n", encoding="utf-8")
    real = script.as_python_prints
    fired: list[int] = []

    def format_with_a_signal(err: BaseException) -> str:
        if not fired:
            fired.append(1)
            signal.raise_signal(signal.SIGCHLD)
        return real(err)

    monkeypatch.setattr(script, "as_python_prints", format_with_a_signal)
    session = AutoSession("cpu")
    try:
        code, why, error = script.run_profiled(script.parse_target([str(prog)]), session)
    finally:
        session.close()
    assert fired and (code, why, error) == (1, "ConnectionResetError", "[Errno 104] Connection reset by peer")
    err = capsys.readouterr().err
    assert "ConnectionResetError: [Errno 104] Connection reset by peer" in err
    assert err.count("WorkerDied: DataLoader worker (pid 1) is killed by signal: Killed.") == 1


def test_a_sigterm_dropped_inside_a_gc_callback_is_raised_again() -> None:
    """SIGTERM's handler runs inside a garbage-collection callback (as ``gc_pauses`` installs one):
    Python drops what it raises there ("Exception ignored in"), and the program would run on; it is
    raised again a moment later, where it stops the loop. Without that, this loop runs its 5 s out."""
    import gc
    import time

    from profiler.report.signals import Terminated, install_sigterm, restore_sigterm

    dropped: list[bool] = []

    def callback(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and not dropped:
            dropped.append(True)
            signal.raise_signal(signal.SIGTERM)  # its handler raises Terminated here, in the callback

    previous = install_sigterm()
    gc.callbacks.append(callback)
    stopped_after = None
    try:
        gc.collect()  # returns: the callback's Terminated was dropped
        assert dropped
        t0 = time.monotonic()
        with pytest.raises(Terminated):
            while time.monotonic() - t0 < 5:
                time.sleep(0.001)
        stopped_after = time.monotonic() - t0
    finally:
        gc.callbacks.remove(callback)
        restore_sigterm(previous)
    assert stopped_after is not None and stopped_after < 1.0
