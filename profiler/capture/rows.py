"""Reading a profiler's rows as a timeline: all of them (``timeline``), or the batches completed since
the last read (``completed``, for the journal a run keeps on disk: ``profiler.report.journal``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from profiler.capture.clock import now_ms
from profiler.capture.cuda.anchor import clock_between, take_anchor
from profiler.capture.cuda.events import current_stream
from profiler.capture.devices import rank_info
from profiler.modes import SPECS
from profiler.timeline.build import build_timeline
from profiler.timeline.clockmap import ClockMap
from profiler.timeline.schema import empty_timeline

if TYPE_CHECKING:
    from profiler.capture.profiler import TransferProfiler
    from profiler.report.journal import Journal


def _static(prof: TransferProfiler) -> dict[str, Any]:
    """The columns every row of this profiler shares (run, scenario, mode, loader settings)."""
    static = {"run": prof.run, "mode": prof.mode, "device": str(prof.device), **rank_info(), **prof._config}
    if prof.mode != "auto":
        static["non_blocking"] = SPECS[prof.mode].non_blocking
        static.setdefault("pin_memory", SPECS[prof.mode].pin_memory)
    static["scenario"] = prof.scenario or str(prof.mode)
    return static


def timeline(prof: TransferProfiler) -> pd.DataFrame:
    """Every completed batch; waits for their events, and a second anchor corrects the clocks' drift."""
    clock: ClockMap | None = None
    if prof.cuda and prof._anchor is not None:
        last = take_anchor(current_stream(prof._index), prof._gate)
        prof._pending.resolve(prof._anchor, block=True)
        clock = clock_between(prof._anchor, last)
    origin = prof._origin if prof._origin is not None else now_ms()
    return build_timeline(prof._store.columns(), origin, clock, _static(prof))


def completed(prof: TransferProfiler, start: int) -> tuple[pd.DataFrame, int]:
    """(the batches from row ``start`` whose events have all fired, the row after them).

    Never waits nor synchronizes. The GPU times go on the host clock by the first anchor alone: the
    drift correction needs a second anchor, that is a synchronization, so these rows may sit off by
    the clocks' drift (parts per million of the time since the anchor); durations are unaffected.
    ``timeline()`` at the end of the run gives the corrected rows.
    """
    clock: ClockMap | None = None
    if prof.cuda and prof._anchor is not None:
        prof._pending.resolve(prof._anchor)
        clock = ClockMap(prof._anchor.host_ms, 1.0)
    first = prof._pending.first_row()
    stop = len(prof._store) if first is None else first
    if stop <= start:
        return empty_timeline(), start
    origin = prof._origin if prof._origin is not None else now_ms()
    # One row before the range too, so the first row's gpu_idle_ms sees its predecessor's compute.
    before = 1 if start > 0 else 0
    frame = build_timeline(prof._store.columns(start - before, stop), origin, clock, _static(prof))
    return frame.iloc[before:].reset_index(drop=True), stop


class Flusher:
    """Every ``every_ms`` of the loop, the batches completed since the last flush go to ``journal``
    (``profiler.report.journal``): a crash then loses at most that long of measurements."""

    def __init__(self, prof: TransferProfiler, journal: Journal, every_ms: float) -> None:
        self._prof, self._journal, self._every = prof, journal, every_ms
        self._start = 0
        self.due_ms = now_ms() + every_ms  # the loop compares its clock with this once a batch

    def flush(self) -> None:
        frame, self._start = completed(self._prof, self._start)
        self._journal.append(frame)
        self.due_ms = now_ms() + self._every
