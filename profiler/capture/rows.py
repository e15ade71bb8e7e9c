"""Reading a profiler's rows as a timeline: all of them (``timeline``), or the batches completed since
the last read (``completed``, for the journal a run keeps on disk: ``profiler.report.journal``)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pandas as pd

from profiler.capture import gc_pauses, own_threads
from profiler.capture.clock import now_ms
from profiler.capture.cuda.anchor import clock_between, take_anchor
from profiler.capture.cuda.events import current_stream
from profiler.capture.devices import rank_info
from profiler.modes import SPECS
from profiler.settings import current
from profiler.timeline.build import RawRows, build_rows, build_timeline
from profiler.timeline.clockmap import ClockMap
from profiler.timeline.schema import empty_timeline

if TYPE_CHECKING:
    from profiler.capture.journaling import Appender, Journal
    from profiler.capture.profiler_state import ProfilerState


def _static(prof: ProfilerState) -> dict[str, Any]:
    """The columns every row of this profiler shares (run, scenario, mode, loader settings)."""
    static = {"run": prof.run, "mode": prof.mode, "device": str(prof.device), **rank_info(), **prof._config}
    if prof.mode != "auto":
        static["non_blocking"] = SPECS[prof.mode].non_blocking
        static.setdefault("pin_memory", SPECS[prof.mode].pin_memory)
    static["scenario"] = prof.scenario or str(prof.mode)
    return static


def timeline(prof: ProfilerState) -> pd.DataFrame:
    """Every completed batch; waits for their events, and a second anchor corrects the clocks' drift."""
    clock: ClockMap | None = None
    if prof.cuda and prof._anchor is not None:
        last = take_anchor(current_stream(prof._index), prof._gate)  # synchronizes
        prof._pending.resolve(prof._anchor, block=True)
        clock = clock_between(prof._anchor, last)
    # every batch so far: their work is done (synchronized with the anchor), their records come now
    prof._clocks.collect(prof.device, synced=prof._anchor is not None, force=True)
    origin = prof._origin if prof._origin is not None else now_ms()
    return build_timeline(prof._store.columns(), origin, clock, _static(prof), gc_pauses.pauses())


def completed(prof: ProfilerState, start: int) -> tuple[pd.DataFrame, int]:
    """(the batches from row ``start`` whose events have all fired, the row after them).

    Never waits nor synchronizes. The GPU times go on the host clock by the first anchor alone: the
    drift correction needs a second anchor, that is a synchronization, so these rows may sit off by
    the clocks' drift (parts per million of the time since the anchor); durations are unaffected.
    ``timeline()`` at the end of the run gives the corrected rows.
    """
    rows, stop = completed_raw(prof, start)
    return (empty_timeline() if rows is None else build_rows(rows)), stop


def completed_raw(prof: ProfilerState, start: int) -> tuple[RawRows | None, int]:
    """``completed``'s rows before they are built (None: none completed), for a process of their own
    to build and write (``profiler.report.journal_process``)."""
    clock: ClockMap | None = None
    if prof.cuda and prof._anchor is not None:
        prof._pending.resolve(prof._anchor)
        clock = ClockMap(prof._anchor.host_ms, 1.0)
    prof._clocks.collect(prof.device, synced=False)
    waiting = [r for r in (prof._pending.first_row(), prof._store.first_waiting()) if r is not None]
    stop = min(waiting) if waiting else len(prof._store)
    if stop <= start:
        return None, start
    origin = prof._origin if prof._origin is not None else now_ms()
    # One row before the range too, so the first row's gpu_idle_ms sees its predecessor's compute.
    before = 1 if start > 0 else 0
    columns = prof._store.columns(start - before, stop)
    return RawRows(columns, origin, clock, _static(prof), gc_pauses.pauses(), before), stop


# The most of a loop's time the appends may take, unless PINPROF_FLUSH_S fixes their interval. On the
# H200, in a resnet50 loop of 65 ms steps (scripts/bench_profile_overhead.py --ablate), the loader's
# next() took 1.27 ms per step with an append every 2 s and 0.66 ms without the journal: 0.6 ms, about
# 0.9% of the step. An append (a timeline built for the batches since the last) held Python's lock:
# on this project's CPU machine 7-15 ms to build, 6-78 ms to format and write 10-2,000 rows
# (scripts/bench_append.py). Those now run in the journal's own process where one starts
# (``profiler.report.journal_process``); this thread reads the rows out and hands them over.
FLUSH_SHARE = 0.002


class FlushClock:
    """When the next append of completed batches is due: ``every_ms`` after the last one ended, or
    later if appends are slow and ``stretch`` (then each waits at least its own duration divided by
    ``FLUSH_SHARE``: a 20 ms append, 10 s)."""

    def __init__(self, every_ms: float, stretch: bool) -> None:
        self.every_ms, self.stretch = every_ms, stretch
        self.due_ms = now_ms() + every_ms  # the loop compares its clock with this once a batch

    @classmethod
    def from_settings(cls) -> FlushClock:
        """``PINPROF_FLUSH_S`` (2 s), kept exactly when it was given, stretched otherwise."""
        s = current()
        return cls(s.flush_s * 1000.0, stretch=not s.flush_fixed)

    def flushed(self, started_ms: float) -> None:
        """An append that began at ``started_ms`` has ended: the next one's due time."""
        end = now_ms()
        wait = max(self.every_ms, (end - started_ms) / FLUSH_SHARE) if self.stretch else self.every_ms
        self.due_ms = end + wait


class Flusher:
    """When ``clock`` says so, the batches completed since the last flush go to ``journal``
    (``profiler.report.journal``): a crash then loses at most that long of measurements. With an
    ``appender`` (made with ``say=False``, not started), a process of their own builds and writes
    them (``JournalProcess``): an append it failed raises here, at the next flush or at ``close``, as
    the append itself would have. It is started at the first flush that has rows (where it cannot be,
    this thread appends): a scenario of ``pinprof run`` shorter than the flush interval needs none, and
    each start took 2.2 s of CPU on an H100's host (12 such starts, 26 s, in a default run of 25 s,
    when each scenario started its own)."""

    def __init__(
        self, prof: ProfilerState, journal: Journal, clock: FlushClock, appender: Appender | None = None
    ) -> None:
        self._prof, self._journal, self.clock = prof, journal, clock
        self._late = appender  # started at the first rows to append
        self._appender: Appender | None = None
        self._start = 0

    @property
    def due_ms(self) -> float:
        return self.clock.due_ms

    def flush(self) -> None:
        started = now_ms()
        rows, stop = completed_raw(self._prof, self._start)
        if rows is not None and self._late is not None:  # the first rows to append: their process starts
            late, self._late = self._late, None
            self._appender = late if late.start() else None
        appender = self._appender
        if rows is not None and appender is not None and not appender.send([rows]):
            self._appender = None  # the process is gone: its error is this append's, else this thread appends
            if appender.failure is not None:
                raise appender.failure
        if rows is not None and self._appender is None:
            self._journal.append(build_rows(rows))
        self._start = stop
        self.clock.flushed(started)

    def close(self) -> None:
        """Wait for the appender to write what it was handed (the scenario ended); raise its error."""
        appender, self._appender = self._appender, None
        if appender is not None:
            appender.close()
            if appender.failure is not None:
                raise appender.failure


# Python's lock passes between threads every 5 ms by default (sys.getswitchinterval): while an append
# holds it, the loop's thread waits up to that long each time it takes the lock back, after every torch
# op or sleep that let it go. During an append the interval is this short, so that wait is too.
APPEND_SWITCH_S = 0.0005


@contextmanager
def quick_switches() -> Iterator[None]:
    """Around an append: Python's switch interval at most ``APPEND_SWITCH_S``, then back as it was
    (unless the program set its own meanwhile)."""
    before = sys.getswitchinterval()
    ours = min(before, APPEND_SWITCH_S)
    sys.setswitchinterval(ours)
    try:
        yield
    finally:
        if sys.getswitchinterval() == ours:
            sys.setswitchinterval(before)


class JournalWriter(threading.Thread):
    """Calls ``flush`` every ``every_s`` seconds from its own thread until ``stop``: the loop's thread
    makes no append (the batches completed since the last, handed to the journal's process, or built
    and written here where none started), but waits for Python's lock while this thread holds it (the
    note at ``FLUSH_SHARE``; its CPU time is counted, ``own_threads``). The interval does
    not stretch, so a ``kill -9`` loses at most the last one: stretched, the stalls fell from 11 to 2 a
    run on the CPU machine and ``tests/test_hostile.py``'s kill kept 398 rows of 1,841. What the loop's
    thread and this one share is locked: the store's arrays (``Store``), the events not read yet
    (``PendingEvents``)."""

    def __init__(self, flush: Callable[[], None], every_s: float, say: bool = True, paced: bool = False) -> None:
        """``paced``: once an append is due, wait (one interval at most) for the loop to say a batch
        has just arrived (``nudge``), so the append runs beside the batch's step."""
        super().__init__(name="pinprof-journal", daemon=True)
        self._flush, self.every_s, self._say, self._paced = flush, every_s, say, paced
        self._stopped = threading.Event()
        self._go = threading.Event()
        self.due = False  # an append waits for ``nudge``: read by the loop's thread once a batch
        self.error: Exception | None = None  # what stopped the appends; ``say=False``: the loop says it

    def nudge(self) -> None:
        """A batch has just arrived, its step is next: the moment for a due append. An append that ran
        while the loop fetched (Python: a DataLoader's collate) took Python's lock from it in 5 ms
        turns; one beside the step overlaps its wait on the GPU (or, in tests/scripts/waiting_steps.py,
        its sleep): on the CPU machine a fetch read 25.5 ms against 0.6 when an append fell in it."""
        self._go.set()

    def run(self) -> None:
        while not self._stopped.wait(self.every_s):
            if self._paced:
                self.due = True
                self._go.wait(self.every_s)  # no batch for an interval (a stall, the end): append anyway
                self.due = False
                self._go.clear()
                if self._stopped.is_set():
                    return
            try:
                with quick_switches(), own_threads.working(own_threads.JOURNAL):
                    self._flush()
            except Exception as err:
                self.error = err
                if self._say:
                    print(
                        f"pinprof: the journal stopped ({type(err).__name__}: {err}); the run goes on", file=sys.stderr
                    )
                return

    def raise_error(self) -> None:
        """Raise what stopped the appends, on the caller's thread (``error`` is set)."""
        if self.error is not None:
            raise self.error

    def stop(self) -> None:
        self._stopped.set()
        self._go.set()  # a paced append waiting for a batch: there will be none
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout=60)
