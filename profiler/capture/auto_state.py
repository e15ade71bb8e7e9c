"""What an ``AutoSession`` holds (``SessionState``: the loaders' profilers, the batches in flight, the
rows a step ended, what the loop has shown so far), and the row's close every way of ending one
comes to (``_close``: where its step ends, by the batch's GPU clock), the marks (``_mark``) and the
moment of an edge (``_edge``); the journal its completed rows go to (``flush``, ``stop_writer``).
"""

from __future__ import annotations

import sys
import threading
from typing import Any, NamedTuple

import torch

from profiler.capture import own_threads, rows
from profiler.capture.clock import now_ms
from profiler.capture.clocks import choice as clocks
from profiler.capture.dense import Leaves
from profiler.capture.devices import resolve_device
from profiler.capture.in_flight import BY_STEP, Mark, Patterns
from profiler.capture.journaling import Appender, Journal
from profiler.capture.nvtx import NvtxEmitter
from profiler.capture.pin_hook import PIN_HOOK
from profiler.capture.profiler import TransferProfiler
from profiler.capture.workers import WorkerWatch
from profiler.timeline.build import RawRows, build_rows
from profiler.timeline.schema import PLAIN


def _trained(rec: dict[str, Any]) -> bool:
    """Whether a backward trained the batch (``AutoSession.backward``: ``_back`` before the ``next()``
    after it, ``_trained`` after)."""
    return "_back" in rec or "_trained" in rec


def _release(prof: TransferProfiler, mark: Mark | None) -> None:
    """A mark that times nothing: its CUDA event (if any) back to the profiler's pool."""
    if mark is not None and mark.event is not None:
        prof._pool.put(mark.event)


def _drop_done(prof: TransferProfiler, rec: dict[str, Any]) -> None:
    """A training end not used (a later backward of the batch replaces it, or its row ends elsewhere):
    its events back to the pool (``_twin`` comes only with ``_done``)."""
    if "_done" in rec:
        _release(prof, rec.pop("_done"))
        _release(prof, rec.pop("_twin", None))


def _used_after_tent(rec: dict[str, Any]) -> bool:
    """Whether the batch was copied after the ``next()`` that gave it its tentative end (``_tent``):
    it was still in use then, and that ``next()`` is not where its row ends."""
    return bool(rec["call_e"] > rec["_tent"].host_ms)


# Where a next() ends a batch that no step claimed (AutoSession._end_at_next): its row's end (host ms),
# at_tent and start (the arguments of its AutoSession._close), and the loop's pattern it showed (None:
# none). A held batch's row still starts where the row closed before it ended (_close): held batches
# are let go in the order they came. A plain tuple: made for every row a next() ends, where a
# NamedTuple's construction cost 0.3 us on the CPU machine.
_NextEnd = tuple[float, bool, Mark | None, str | None]


class _Ending(NamedTuple):
    """A row an optimizer step ended, written at the next ``next()`` (``AutoSession._settle``): the
    arguments of its ``AutoSession._close``. ``ended``: the step's mark, where its step ends; a later
    step before that ``next()`` (a second optimizer of the same iteration) replaces it. None for a
    row that ends at a moment already past (its tent, its training's end), which no step moves."""

    prof: TransferProfiler
    rec: dict[str, Any]
    end: float
    boundary: str
    at_tent: bool
    until: Mark | None
    ended: Mark | None


class SessionState:
    """The state of one profiled program's hooks (``profiler.capture.auto_session``), and the row close
    every way of ending one comes to."""

    def __init__(
        self,
        device: str | torch.device | None = None,
        *,
        skip: int | None = None,
        limit: int | None = None,
        nvtx: bool = True,
        run: str = "profile",
        journal: Journal | None = None,
        appender: Appender | None = None,
        flush: rows.FlushClock | None = None,
        gate: bool = True,
        stop_after: int | None = None,
        force_non_blocking: bool = False,
    ) -> None:
        self.device = resolve_device(device)
        # pinprof tune (profiler.capture.knobs): the trial ends after ``stop_after`` rows, and a copy
        # of a pinned tensor is made non_blocking
        self.stop_after, self.force_non_blocking = stop_after, force_non_blocking
        self.device_type = self.device.type  # read once: torch.device.type costs about 0.5 us a read
        self.cuda = self.device_type == "cuda"
        self.skip, self.limit, self.nvtx, self.run, self.gate = skip or 0, limit, nvtx, run, gate
        # No --skip: the start-up batches are found in the data when the report is read
        # (profiler.analysis.warmup); with one, its flags are the warm-up.
        self.warmup_policy = "auto" if skip is None else "skip"
        self.origin = now_ms()
        self.main = threading.get_ident()
        self.profs: dict[int, TransferProfiler] = {}
        self._keep: list[Any] = []  # the datasets keyed by id: kept alive, so no id is reused
        self.cur: tuple[TransferProfiler, dict[str, Any]] | None = None
        self.batches = 0
        self.trial_extra = 0  # a tune trial's batches past its --skip + steps (profiler_for, capture.trial)
        # Completed batches go to the journal every ``flush`` interval (PINPROF_FLUSH_S, 2 s) from a
        # thread of their own (``rows.JournalWriter``): a kill -9 loses at most the last interval, and
        # the loop's thread makes no append. That thread reads the rows out and hands them to a process
        # of their own, which builds and writes them (the ``appender``, ``report.journal_process``): built and formatted here, they
        # held Python's lock from the loop (``rows.FLUSH_SHARE``'s note: tens of ms an append).
        self.journal = journal
        self._late = appender if journal is not None else None  # not started: at the first rows (flush)
        self._appender: Appender | None = None
        self.journal_process_ms: float | None = None  # its CPU time for the rows, once it ended (meta.json)
        self.journal_process_start_ms: float | None = None  # and to start
        own_threads.reset()  # meta.json's pinprof_threads_ms: this session's threads' CPU time
        self.clock = flush or rows.FlushClock.from_settings()
        self._flushed: dict[int, int] = {}
        self.journal_error: str | None = None  # why appends stopped (a full disk), said once
        self._writer = (
            rows.JournalWriter(self.flush, self.clock.every_ms / 1e3, paced=True) if journal is not None else None
        )
        # Batches fetched and not yet closed into rows, oldest first (profiler.capture.in_flight).
        self.flight: list[tuple[TransferProfiler, dict[str, Any]]] = []
        # Rows the latest optimizer step ended, oldest first, written at the next next() (_settle):
        # until then a later step is the same iteration's (a GAN's second player), and so is any
        # backward (a loop that copied the next batch already took it for that batch's).
        self._ending: list[_Ending] = []
        self.patterns = Patterns()
        self.workers = WorkerWatch()  # how busy each loader's worker processes are (meta.json's loaders)
        self.leaves = Leaves()  # the leaves whose layout copies the hooks made (meta.json's loaders)
        # Each loader's latest batch, to name the leaf of a layout copy (dense.leaf_path): one batch a
        # loader, the one the loop holds anyway.
        self._batches: dict[int, Any] = {}
        self.steps = 0  # optimizer steps seen on the main thread
        self._last_close = float("-inf")  # host ms where the latest row closed
        self._fetched_since_step = True  # a next() since the last step that closed a row
        self._step_stream: Any = None  # the current stream at the latest fetch with batches in flight
        self._walked: dict[int, int] = {}  # per loader (its profiler's id): batches whose tensors were read
        self._older: set[int] = set()  # loaders where a copy read a batch older than the newest
        self._ahead: dict[int, str] = {}  # loaders of a framework that fetches ahead: their pattern
        self._training: set[int] = set()  # loaders (their profiler's id) whose batches a backward trained
        self._owed: dict[int, int] = {}  # per loader: its batches closed untrained, whose backward may come
        self._windowed: set[int] = set()  # loaders that fetch a window before training it (fetches_windows)
        self._unheld: set[int] = set()  # windowed loaders that held HOLD batches with no backward
        self._let_go_all = False  # the held batches close at the next batch's arrival (_at_next)
        self._last_backward = float("-inf")  # host ms where the latest backward on the main thread began
        self._raised: dict[str, Any] | None = None  # the newest batch in flight when a next() last raised
        if journal is not None:
            journal.start()  # the header, before the appender's first rows
        PIN_HOOK.install(NvtxEmitter(enabled=nvtx))
        if self._writer is not None:
            self._writer.start()

    def _edge(self) -> float:
        """Now (host ms), where a row may end: a marker's time where CUPTI's records place kernels
        by markers (``profiler.capture.clocks.cupti.marker``), the clock elsewhere."""
        if self.cuda:
            ms = clocks.edge_ms(self.device)
            if ms is not None:
                return ms
        return now_ms()

    def _mark(self, prof: TransferProfiler, rec: dict[str, Any], stream: Any = None) -> Any:
        """An event now on ``stream`` (the current one if None), for a batch timed by events (None
        otherwise)."""
        return rec["_clock"].mark(prof, stream)

    def _settle(self) -> None:
        """Write the rows the latest step ended (a ``next()`` came, or the run ends), in order."""
        ending, self._ending = self._ending, []
        for e in ending:
            self._close(e.prof, e.rec, e.end, e.boundary, at_tent=e.at_tent, until=e.until, ended=e.ended)

    def _close(
        self,
        prof: TransferProfiler,
        rec: dict[str, Any],
        end: float,
        boundary: str,
        at_tent: bool = False,
        start: Mark | None = None,
        until: Mark | None = None,
        ended: Mark | None = None,
    ) -> None:
        """The batch's row ends at ``end`` (host ms): its step timed by the batch's clock, and the row
        committed. ``at_tent``: it ends at its tentative end, whose event marks its compute's end.
        ``start``: where its step starts, for a row closed at a ``next()`` (``_ahead``). ``until``, a
        window's batch, and ``ended``, an optimizer step's row: the mark where its step ends (its
        event recorded then), ``until`` also leaving out the later batches' fetches and copies."""
        if "_row" in rec:
            # Committed already: a KeyboardInterrupt or SystemExit raised in the hooks after its commit,
            # before the batches in flight were updated, left it there (Ctrl-C in a fresh-clone CI run
            # wrote batch 18 twice, and the report could not be read back).
            return
        tent: Mark | None = rec.pop("_tent", None)
        ahead: Mark | None = rec.pop("_ahead", None)
        first_tent = tent  # where a batch trained after it starts its step (below)
        if until is not None:  # its step ends at ``until`` (a window's batch: its training's end)
            tent, at_tent = until, True
        elif ended is not None:  # its step ends at ``ended`` (the optimizer step's mark: _end_at_step)
            tent, at_tent = ended, True
        _drop_done(prof, rec)  # a training end not used as this row's end
        after: Mark | None = rec.pop("_after", None)  # the batch before in its window ended training here
        bumped: Mark | None = rec.pop("_bump", None)
        # At a step, a later batch's fetch or copy (``_bump``), else the next batch's fetch in a loader
        # that fetches ahead: none is bumped before the first step, and timm's first accumulated row
        # (--accumulate 2) held the forward before its own.
        # A batch trained after its tent (``_trained``: a hand-written loop that fetches ahead) with
        # neither: its step starts at that tent (the first accumulated row of a device prefetcher,
        # --accumulate 2, held the batch before's backward too: 124 ms for 81).
        # A window's batch (``until``) ignores its bump: the later batches' fetches and copies ran after
        # its training.
        if boundary == BY_STEP:
            bump = (
                after or (bumped if until is None else None) or ahead or (first_tent if rec.get("_trained") else None)
            )
        else:
            bump = after or start
            if rec.get("_stepped"):
                self.patterns.saw(str(prof.scenario), PLAIN)
        for left in (bumped, ahead, first_tent):  # marks that are neither the step's start nor its end
            if left is not bump and left is not tent:
                _release(prof, left)
        rec.pop("_ptrs", None)
        rec.pop("_held", None)  # a held batch a step ended after all
        rec.pop("_stepped", None)
        rec.pop("_back", None)
        rec.pop("_trained", None)
        rec["batch_e"] = end
        # A row closed at a step after the next batch was fetched starts where the previous one ended.
        rec["batch_s"] = max(rec["fetch_s"], min(rec.pop("_since", self._last_close), end))
        self._last_close = max(self._last_close, end)
        self.patterns.row(str(prof.scenario), boundary)
        rec["_clock"].end_step(prof, rec, end, tent, at_tent, bump)
        prof._commit(rec)  # sets rec["_row"] as soon as the row is stored
        self.batches += 1
        if len(prof._pending) >= 8:  # amortise: read finished events a few batches at a time
            prof._pending.resolve(prof._anchor)

    def flush(self) -> None:
        """Append every loader's batches completed since the last flush to the journal (the writer's
        thread, or the end of the run). A full disk stops the appends, not the profile: the rows
        appended before stay, and one line says where and how many."""
        self.workers.sample()  # the journal's thread, every append: the loaders' workers read
        journal = self.journal
        if journal is None or self.journal_error is not None:
            return
        started = now_ms()
        try:
            done: list[tuple[int, RawRows | None, int]] = []
            for key, prof in list(self.profs.items()):  # the loop's thread may add a loader meanwhile
                got, stop = rows.completed_raw(prof, self._flushed.get(key, 0))
                done.append((key, got, stop))
            handed = [got for _, got, _ in done if got is not None]
            if handed and self._late is not None:
                # Started at the first rows, as pinprof run's (rows.Flusher): a run shorter than an
                # append needs no process, whose start-up took 2.2 s of CPU on an H100's host. Where
                # none can be had, this thread appends itself.
                late, self._late = self._late, None
                self._appender = late if late.start() else None
            appender = self._appender
            if handed and appender is not None and not appender.send(handed):
                self._appender = None  # the process is gone: its error, if it stopped at one, is the journal's
                self.journal_error = appender.error
            for key, got, stop in done:
                if got is not None and self._appender is None and self.journal_error is None:
                    journal.append(build_rows(got))
                self._flushed[key] = stop
        except OSError as err:
            self.journal_error = journal.stopped_line(err)
            print(f"pinprof: {self.journal_error}", file=sys.stderr)
        self.clock.flushed(started)

    def stop_writer(self) -> None:
        """Stop the journal's thread (the run ended, or is exiting), after its append in progress."""
        if self._writer is not None:
            self._writer.stop()
        self._late = None  # not started by now: it never will be
        appender, self._appender = self._appender, None
        if appender is not None:
            appender.close()  # what it was handed is on disk; later appends (os._exit's) are this thread's
            self.journal_error = self.journal_error or appender.error
            self.journal_process_ms, self.journal_process_start_ms = appender.cpu_ms, appender.start_ms
