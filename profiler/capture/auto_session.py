"""Profiling a loop nobody instrumented: batch boundaries from DataLoader iteration, copies as they come.

An ``AutoSession`` keeps one ``TransferProfiler`` per DataLoader dataset (so a train and a validation
loader are separate scenarios) and is driven by the hooks of ``profiler.capture.auto_hooks``:

- each ``__next__`` of a DataLoader iterator starts a batch of its own loader: the fetch is timed
  around the real ``__next__``, the pin thread's interval comes from the pin hook as in
  ``TransferProfiler.batches``; the batch is in flight until its row closes;
- each host-to-device copy of the main thread while a batch is in flight (``Tensor.to``, ``.cuda``,
  ``copy_``) is timed with CUDA events on the stream it runs on and added to the batch whose tensor
  it reads (``profiler.capture.in_flight``), as ``TransferProfiler.to_device`` adds its copies
  (bytes, ``copies``, call time, ``src_memory``);
- a row closes at torch's optimizer step hook, for every batch in flight but the newest (a loop that
  fetches ahead: Accelerate, timm's prefetcher, Lightning on an iterable dataset), or at the next
  ``next()`` once its batch's step ran (the loop written by hand); a step's rows are written at the
  next ``next()``, and a later step before it (a GAN's second player) moves their end to it, with
  its backward theirs too; a loop with no optimizer step
  closes a row at the ``next()`` after its batch's (one ``next()`` late, so that a first step can
  still claim it);
- the batch's GPU compute runs from its last copy's end (or from the handoff, with no copy; in a
  loop that fetches ahead, from the last fetch or copy of a later batch before its step) to an event
  recorded on the current stream where its row closes; the step asks for its data when its last copy
  call returns (``request``), where an asynchronous copy's wait begins;
- NVTX: ``loop <scenario>`` around each ``batch <n>`` range (one ``next()`` to the next), so an
  nsys import tells loaders apart.

The mode column says what the copies were: ``pinned_nb`` (pinned source, non_blocking), ``pinned``,
``pageable_nb`` or ``pageable``, from the first copy. Batches before ``skip`` (when given) are flagged warm-up;
after ``limit`` batches of a loader, its later batches are not recorded.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, NamedTuple

import pandas as pd
import torch

from profiler.capture import backend, own_threads, rows, trial
from profiler.capture.auto_copies import CopyHooks
from profiler.capture.clock import now_ms
from profiler.capture.cuda.events import current_stream, record
from profiler.capture.dense import Leaves
from profiler.capture.devices import resolve_device
from profiler.capture.frames import calling_framework, fetches_windows, iterator_config
from profiler.capture.in_flight import BY_NEXT, BY_STEP, HOLD, LOOKS, Mark, Patterns, owner, storages
from profiler.capture.loop import arrived, fetch_begin, fetch_end
from profiler.capture.nvtx import NvtxEmitter
from profiler.capture.pin_hook import PIN_HOOK
from profiler.capture.profiler import TransferProfiler
from profiler.capture.workers import WorkerWatch
from profiler.names import clean
from profiler.report.journal import Journal
from profiler.report.journal_process import JournalProcess, stopped_line
from profiler.timeline.build import RawRows, build_rows
from profiler.timeline.schema import DEVICE_PREFETCH, FETCH_AHEAD, FETCHES_AHEAD, PLAIN, concat


class TrialDone(BaseException):  # a stop, not an error: what the trial came for is recorded
    """Raised from a loader's ``next()`` once a ``pinprof tune`` trial has its batches: the script
    stops there (a BaseException, so the script's own ``except Exception`` lets it through)."""


def _step_by_cupti(rec: dict[str, Any], end: float, bump: Mark | None) -> None:
    """CUPTI: every kernel launched between the batch's handoff and its row's ``end`` is its step's."""
    start = bump.host_ms if bump is not None else max(rec["fetch_e"], rec["batch_s"])
    rec["_window"] = [(start, end)]


def _step_by_events(
    prof: TransferProfiler, rec: dict[str, Any], tent: Mark | None, at_tent: bool, bump: Mark | None
) -> None:
    """CUDA events: the step ends at ``tent``'s event where the row closes at its tentative end
    (``at_tent``), else at one recorded now on the current stream; it starts at ``bump``'s event where
    a later batch's fetch or copy came before it. Events not kept go back to the pool."""
    if at_tent and tent is not None and tent.event is not None:
        ev = tent.event
    else:
        if tent is not None and tent.event is not None and tent is not bump:  # a tent may be the start
            prof._pool.put(tent.event)
        ev = prof._pool.get()
        record(ev, current_stream(prof._index))
    rec["_comp_end"] = ev
    if bump is not None and bump.event is not None:
        if "_comp_start" in rec:
            prof._pool.put(rec["_comp_start"])
        rec["_comp_start"] = bump.event


def _step_by_host(rec: dict[str, Any], end: float, bump: Mark | None) -> None:
    """No GPU: the step is timed on the host, from the batch's last copy (or ``bump``) to ``end``."""
    if bump is not None:
        rec["comp_s"] = max(rec["comp_s"], bump.host_ms)
    rec["comp_e"] = end
    rec["comp_sum"] = rec["comp_e"] - rec["comp_s"]


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


class AutoSession(CopyHooks):
    """The recorders of one profiled program (see the module docstring)."""

    def __init__(
        self,
        device: str | torch.device | None = None,
        *,
        skip: int | None = None,
        limit: int | None = None,
        nvtx: bool = True,
        run: str = "profile",
        journal: Journal | None = None,
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
        # of their own, which builds and writes them (``JournalProcess``): built and formatted here, they
        # held Python's lock from the loop (``rows.FLUSH_SHARE``'s note: tens of ms an append).
        self.journal = journal
        self._appender = JournalProcess(journal) if journal is not None else None
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
        if self._appender is not None and not self._appender.start():
            self._appender = None  # no process to be had: the journal's thread appends itself
        PIN_HOOK.install(NvtxEmitter(enabled=nvtx))
        if self._writer is not None:
            self._writer.start()

    # -- batch boundaries ---------------------------------------------------------------------------
    def profiler_for(self, it: Any) -> TransferProfiler:
        dataset = getattr(it, "_dataset", it)
        prof = self.profs.get(id(dataset))
        if prof is None:
            cfg = iterator_config(it)
            cfg["framework"] = calling_framework()
            name = clean(f"{type(dataset).__name__}/bs{cfg['batch_size']}/w{cfg['num_workers']}")
            names = {p.scenario for p in self.profs.values()}
            name = name if name not in names else f"{name}#{len(self.profs) + 1}"
            # A tune trial (profiler.capture.trial): the workers' queue is warm-up, and a short epoch
            # is measured whole; the trial stops that much later.
            ready = 0
            if self.stop_after is not None:
                ready, steps = trial.queued(cfg), self.stop_after - self.skip
                more = ready + trial.window(steps, trial.epoch_batches(it)) - steps
                self.trial_extra = max(self.trial_extra, more)
            prof = TransferProfiler(
                "auto",
                self.device,
                nvtx=self.nvtx,
                run=self.run,
                scenario=name,
                warmup=self.skip + ready,
                origin_ms=self.origin,
                config=cfg,
                gate=self.gate,  # on unless asked: pinprof's own pinned copies go behind it (copy_pinned)
            )
            prof._begin(())
            self.profs[id(dataset)] = prof
            if fetches_windows():
                self._windowed.add(id(prof))
            ahead = FETCHES_AHEAD.get(cfg["framework"] or "")
            if ahead is not None:
                self._ahead[id(prof)] = ahead
            self._keep.append(dataset)
        return prof

    def begin(self, it: Any) -> tuple[TransferProfiler, dict[str, Any]] | None:
        """Before the loader's real ``__next__``: rows close where this ``next()`` ends them, this
        loader's next batch starts (None once ``limit`` batches of it were recorded)."""
        # The loader's profiler, asked only where some loader holds its batches (a new loader has none
        # to hold, and none is made for a loader whose first next() ends a tune trial).
        fetching = self.profs.get(id(getattr(it, "_dataset", it))) if self._windowed else None
        self._at_next(fetching=fetching)
        if self.stop_after is not None and self.batches >= self.stop_after + self.trial_extra:
            raise TrialDone(f"{self.batches} batches recorded")
        self._fetched_since_step = True
        prof = self.profiler_for(it)
        epoch = prof._epoch
        prof._new_epoch(it)
        if prof._epoch != epoch:  # a pass begins: its worker processes are read from now (once a pass)
            self.workers.watch(str(prof.scenario), it)
        n = prof._next_batch
        for p, _ in self.flight:
            n += p is prof
        if self.limit is not None and n >= self.limit + self.skip:
            return None
        if prof.nvtx.active:
            # Loaders interleave (train, val), so no range can hold one loader's whole loop: each
            # batch gets its own ``loop <scenario>`` range around it, which is how an nsys import
            # tells scenarios apart. The batch range holds the fetch, as in TransferProfiler.batches.
            prof.nvtx.push(f"loop {prof.scenario}")
            prof.nvtx.push(f"batch {n}")
        return prof, fetch_begin(prof, n)

    def arrived(self, prof: TransferProfiler, rec: dict[str, Any], batch: Any) -> None:
        """After it returned ``batch``: the fetch's end, the pin, the compute's start; the batch is
        the current one, in flight."""
        fetch_end(prof, rec)
        if self._let_go_all:
            # Here, not in the next(): the closing is pinprof's own time of this batch (pinprof_ms),
            # so inside its row. Done before the next() began, HOLD rows closed at once on the CPU
            # machine in 0.2 ms, more than that batch's whole row, before its start.
            self._let_go_all = False
            keep = []
            for p, r in self.flight:
                if "_held" in r:
                    self._let_go(p, r, r.pop("_held"))
                else:
                    keep.append((p, r))
            self.flight = keep
        arrived(rec, batch)
        rec["batch_s"] = rec["fetch_s"]
        self._batches[id(prof)] = batch
        # Another batch may come into flight before this one's copies: a copy is then of either, or of
        # neither (a scalar the step logs), so this one's tensors are read, for a loader's first LOOKS
        # batches, and for good once a copy was found of an older batch. Read only once a second batch
        # was in flight, the first batch of a run took every copy of no batch as its own (Lightning's
        # logged values, made after its sanity check's second batch, counted as the first's copies).
        # A loop's order is its code's, the same every batch; the walk and the lookups cost a loop
        # with no optimizer step (two batches in flight at every copy) 35 us a batch on the 2-core
        # machine (scripts/bench_cpu_recorder.py: 109.0 against 74.3 us before them); read for 64
        # batches, 84.4 against 76.7 us.
        key = id(prof)
        walked = self._walked.get(key, 0)
        if walked < LOOKS or key in self._older:
            self._walked[key] = walked + 1
            rec["_ptrs"] = storages(batch)
        if self.flight:
            # The stream the loop's step runs on: where a batch's step start is marked, even from a
            # copy made on a prefetcher's side stream (marked there, it fired before the step before
            # had run: timm's loop read 1.5 times its kernels' time on the H200).
            self._step_stream = current_stream(prof._index) if self.cuda else None
            self._bump(rec)
            if self._ahead and id(prof) in self._ahead:
                # The batch before it, of a loader that fetches ahead, is handed out after this fetch:
                # its step starts here, not at its own copies (Accelerate copies it before this fetch).
                # Used where a next() ends it (_at_next), and where a step ends it with no later
                # batch's fetch or copy marked (_close).
                for p, older in self.flight:
                    if p is prof and "_ahead" not in older:
                        older["_ahead"] = Mark(rec["fetch_e"], self._mark(p, older, self._step_stream))
        if prof._cupti_on():
            rec["_calls"] = []  # CUPTI times this batch: its copy calls, then its step's launches
        elif self.cuda:
            ev = rec["_comp_start"] = prof._pool.get()
            record(ev, current_stream(prof._index))  # re-recorded after each copy of the batch
        else:
            rec["comp_s"] = rec["fetch_e"]  # moved to the batch's last copy, if it makes copies
        prof._cur = rec
        self.cur = (prof, rec)
        self.flight.append(self.cur)
        writer = self._writer
        if writer is not None and writer.due:  # an append waits for a batch's step to run beside
            writer.nudge()

    def abandon(self, prof: TransferProfiler, rec: dict[str, Any]) -> None:
        """After it raised (StopIteration at the loader's end, or the user's error): no batch. In a
        loop that copies a batch after fetching the next (one seen to copy an older batch), the batch
        in flight that no copy has read yet still has its copies to come: it is the current one
        again. Elsewhere no batch is current until the next ``next()``, as a copy made after a plain
        loop's end is no batch's."""
        fetch_end(prof, rec)
        self._raised = self.flight[-1][1] if self.flight else None
        if prof.nvtx.active:
            prof.nvtx.pop()  # batch
            prof.nvtx.pop()  # loop
        # The batches in flight are stepped after this next(), as after one that brought a batch: their
        # step starts once it returned. At a loader's end it shut its workers down (18 ms on the 2-core
        # machine with 2 workers, 26 ms on the H200), which the last row of a loop that fetches ahead
        # read as its step: Accelerate's as 2.9 times its kernels' time (CUDA events).
        self._bump(None)
        if self.flight and self.flight[-1][1]["copies"] == 0 and id(self.flight[-1][0]) in self._older:
            self.cur = self.flight[-1]
            self.cur[0]._cur = self.cur[1]

    def in_loop(self) -> bool:
        """Whether a loader's loop is running: a batch is in flight, and no ``next()`` has raised (a
        loader's end) since the newest came. Read by ``profiler.capture.stall``'s thread."""
        try:
            return self.flight[-1][1] is not self._raised
        except IndexError:  # none in flight (or emptied by the loop's thread meanwhile)
            return False

    # -- rows: where a batch ends (profiler.capture.in_flight) ----------------------------------------
    def _at_next(self, now: float | None = None, fetching: TransferProfiler | None = None) -> None:
        """A ``next()`` of any loader (``fetching``: its profiler where it may hold batches; None at
        the run's end and where no loader fetches windows): the current batch stops
        being current; a batch whose step ran closes now; one with no step since it was fetched gets
        this as its end if no step claims it (``_tent``); one that had such an end already closes
        there (no optimizer: the ``next()`` after it was its boundary), or, before the first optimizer
        step, in a loader that fetches windows (``fetches_windows``), is held open with that end
        (``_held``) while its loader fetches on: a window fetched before any of it is trained
        (``HOLD``)."""
        if self.cur is not None:
            prof = self.cur[0]
            if prof.nvtx.active:
                prof.nvtx.pop()  # batch
                prof.nvtx.pop()  # loop
            prof._cur = None
            self.cur = None
        if now is None:
            now = self._edge()  # after the NVTX pops, as the range's end: an nsys import's rows agree to us
        if self._ending:
            self._settle()
        # before the first step, a loader that fetches windows, not seen to train, holds its batches (HOLD)
        hold = fetching is not None and not self.steps and id(fetching) in self._windowed
        hold = hold and id(fetching) not in self._training and id(fetching) not in self._unheld
        held = 0
        keep = []
        for prof, rec in self.flight:
            if rec.get("_stepped"):
                self._close(prof, rec, now, BY_NEXT)
            elif "_tent" in rec and not _trained(rec) and id(prof) in self._training:
                # A loader whose batches are trained, and this one not yet: its training is still to
                # come (a window of batches fetched before any is trained). Closed here, the first
                # batch of each window read 0 (tests/scripts/ahead_loops.py --loop window).
                keep.append((prof, rec))
            elif "_tent" in rec:
                end = rec.pop("_held", None)
                if end is None or _trained(rec):  # trained since it was held: it ends as others do
                    end = self._end_at_next(prof, rec, now)
                if hold and prof is fetching and not _trained(rec):
                    rec["_held"] = end
                    held += 1
                    keep.append((prof, rec))
                else:
                    self._let_go(prof, rec, end)
            else:
                rec["_tent"] = Mark(now, self._mark(prof, rec))
                keep.append((prof, rec))
        self.flight = keep
        if held >= HOLD:
            # No backward in HOLD batches of this loader: not a window fetched before its training (an
            # evaluation or inference loop). Its batches close as they come from here on, and the held
            # ones end where they would have, once this next() returned (``arrived``).
            self._unheld.add(id(fetching))
            self._let_go_all = True

    def _let_go(self, prof: TransferProfiler, rec: dict[str, Any], end: _NextEnd) -> None:
        """Close a batch at the end a ``next()`` gave it (``end``, kept as ``_held`` while held)."""
        at, at_tent, start, pattern = end
        if not _trained(rec):
            # closed untrained, its loader not seen to train: if a backward comes next, it is this
            # batch's (a first window of more than HOLD batches; ``backward``)
            self._owed[id(prof)] = self._owed.get(id(prof), 0) + 1
        if pattern is not None:
            self.patterns.saw(str(prof.scenario), pattern)
        self._close(prof, rec, at, BY_NEXT, at_tent=at_tent, start=start)

    def _end_at_next(self, prof: TransferProfiler, rec: dict[str, Any], now: float) -> _NextEnd:
        """Where a batch with a tentative end and no step ends, by a ``next()`` at ``now``."""
        ahead = self._ahead.get(id(prof)) if self._ahead else None
        if ahead is None:
            ahead = rec.get("_trained")  # a hand-written loop that fetches ahead: its backward said so
        if ahead is not None:
            # A loader that fetches ahead, and no optimizer step since this batch's tentative end (an
            # evaluation loop, or gradient accumulation): the next() that gave it that end fetched the
            # batch after it, before this one was handed out, so its step ran since, and this next()
            # is its end. Closed at that tent, Accelerate's rows held nothing (compute_ms 0.0) and
            # timm's the batch before's step (tests/scripts/ahead_loops.py --eval, --accumulate 2). Its
            # step starts after the next batch's fetch; the last batch, with none after it, was handed
            # out after the next() that ended the one before (its tent).
            return now, False, rec.get("_ahead") or rec["_tent"], ahead
        if _used_after_tent(rec):
            # Still in use after the next() that gave it that end, so its row ends now. An evaluation
            # loop that copies batch n after fetching n+1 (Lightning's fetcher on a dataset of no
            # length) closed n at that fetch: every compute_ms was negative.
            return now, False, None, None
        return rec["_tent"].host_ms, True, None, None

    def _edge(self) -> float:
        """Now (host ms), where a row may end: a marker's time where CUPTI's records place kernels
        by markers (``profiler.capture.cupti.marker``), the clock elsewhere."""
        if self.cuda:
            ms = backend.edge_ms(self.device)
            if ms is not None:
                return ms
        return now_ms()

    def _mark(self, prof: TransferProfiler, rec: dict[str, Any], stream: Any = None) -> Any:
        """An event now on ``stream`` (the current one if None), for a batch timed by events (None
        otherwise)."""
        if not self.cuda or "_calls" in rec:
            return None
        ev = prof._pool.get()
        record(ev, stream or current_stream(prof._index))
        return ev

    def _bump(self, newer: dict[str, Any] | None) -> None:
        """A later batch's fetch or copy, before the step of the batches in flight before it: their
        step starts after it, if a step closes them (``_bump``; known only once steps were seen).
        ``newer`` None: a ``next()`` that brought no batch, before the step of every batch in flight."""
        if not self.steps:
            return
        now = now_ms()
        for prof, rec in self.flight:
            if rec is newer:
                break  # only the batches fetched before it
            if not rec.get("_stepped"):
                _release(prof, rec.get("_bump"))
                rec["_bump"] = Mark(now, self._mark(prof, rec, self._step_stream))

    def backward(self, started_ns: int) -> tuple[TransferProfiler, dict[str, Any]] | None:
        """A backward on the main thread, before the step it feeds: it trains on the oldest batch in
        flight of the newest's loader copied and not trained yet (batches are trained in the order
        they were fetched). Trained before the ``next()`` after it (``_back``), with no step between (gradient
        accumulation, or a step that GradScaler skipped), a batch ends at that ``next()``
        (``stepped``); trained after it (``_trained``: a loop that fetches ahead), at the ``next()``
        after its training (``_at_next``), as in the loaders of ``FETCHES_AHEAD``; with a later batch
        trained before the step (a window of batches fetched first, as Hugging Face's Trainer
        accumulates), at its training's end (``trained``). ``started_ns``: when the backward began
        (``perf_counter_ns``). Returns the batch's profiler and record where that end is to be
        marked (``trained``), else None."""
        before, self._last_backward = self._last_backward, started_ns / 1e6
        if self._ending:
            # After a step that ended rows, before any next(): a second loss of the batch that step
            # trained on (a GAN's second player). Given to a batch copied ahead (a prefetcher), every
            # later row shifted by one and the first read 0.4 ms; its row ends at the later step.
            return None
        prof, newest = self.flight[-1]
        key = id(prof)
        owed = self._owed.get(key, 0)
        if owed:
            # A batch of this loader closed at a next() before any backward was seen: this backward
            # is its (Hugging Face's Trainer fetches a window's batches first; given to the next
            # batch, every later backward went to the batch after its own).
            self._owed[key] = owed - 1
            self._training.add(key)
            return None
        older_trained = False
        for p, rec in self.flight:
            # A batch not copied yet is not the one trained (a window's later batches are copied as
            # they are used; the first window's, fetched before any backward was seen, may have been
            # closed at their next(), and a backward given to the next batch read -81 ms).
            if p is not prof:
                continue
            if _trained(rec):
                older_trained = True
                continue
            if rec.get("_stepped"):
                continue
            if not rec["copies"] and any(r["copies"] for q, r in self.flight if q is prof):
                # A loop that copies its batches trains none before its copy; one that never copies
                # them (a model on the host, no .to()) trains them as they come. Read as uncopied, no
                # batch of such a loop was ever trained, and its loader (seen to train by the backward
                # owed to its first batch) held every later row open to the run's end. Asked only of
                # an uncopied batch: a GPU loop's backward never pays for it.
                continue
            if rec is newest and older_trained and rec["call_e"] < before and self._ahead.get(key) != FETCH_AHEAD:
                # The newest batch, copied before the backward before this one, which trained an older
                # batch of its loader still in flight: this is that batch's second backward (two
                # losses, or a batch in chunks, before one step), in a loop that copies the next
                # batch before the step (timm's, a device prefetcher). A window's next batch is
                # copied after the backward before it when the loop copies it (Hugging Face's Trainer
                # by hand), and Accelerate's loader, which copies a window's batches as it hands them
                # out, has the next one fetched behind it until the epoch's last window (so not
                # asked of it). Given to the newest, the rows shifted by one (--backwards 2: 41, 0.5,
                # 81, 121 ms for 40, 80, 120, 160).
                return None
            self._training.add(key)
            if "_tent" in rec:
                # trained after the next() that fetched the batch after it: a loop that fetches ahead,
                # its pattern by whether the newest batch was copied already (_at_next); its training's
                # end may be its row's (a window: stepped), so it is marked (trained)
                rec["_trained"] = DEVICE_PREFETCH if newest["copies"] > 0 and newest is not rec else FETCH_AHEAD
                return prof, rec
            rec["_back"] = True  # ends at the next() after it (stepped): its training's end is not needed
            return None
        return None

    def trained(self, prof: TransferProfiler, rec: dict[str, Any], ended_ns: int) -> None:
        """The backward that trained ``rec`` (of ``prof``) returned at ``ended_ns``
        (``perf_counter_ns``): where its training ends, if a later batch's comes before the step
        (``stepped``). Kept short: it runs first after the user's backward, with pinprof's code and
        data out of the caches (``scripts/hook_parts.py``: 25 us a call on the 2-core machine when it
        scanned the batches in flight with a generator and read the clock again)."""
        for _, r in self.flight:
            if r is rec:
                break
        else:
            return  # no longer in flight: its row closed during the backward
        _drop_done(prof, rec)  # a second backward of the batch: the last one counts
        # where markers place a CUPTI batch's kernels, one here (a window's edge)
        now = self._edge() if "_calls" in rec else ended_ns / 1e6
        event = self._mark(prof, rec)
        rec["_done"] = Mark(now, event)
        if event is not None:
            # On the events clock, a second event of the same moment for the next batch's step start:
            # a row's events go back to the pool once read, so two rows never share one.
            rec["_twin"] = Mark(now, self._mark(prof, rec))

    def stepped(self) -> None:
        """torch's optimizer step hook: every batch in flight but the newest was consumed by a step
        that has now run, and closes; the newest alone was this step's, unless a step closed rows
        since it was fetched (a second optimizer of the same iteration)."""
        if threading.get_ident() != self.main:
            return
        if self._ending:
            self.steps += 1
            self._step_again()
            return
        if not self.flight:
            return
        self.steps += 1
        if len(self.flight) == 1:
            if self._fetched_since_step:
                prof, rec = self.flight[0]
                if "_tent" in rec:
                    # A next() came after this batch and brought none of its loader (its end): the step
                    # that trains on the loader's last batch in a loop that fetches ahead. Its row ends
                    # here, not with whatever the script does next (on the H200 the last row of the
                    # Accelerate and timm loops held the script's end: 2.4 and 2.0 times its kernels).
                    self.flight = []
                    self._end_at_step(prof, rec, self._edge())
                else:
                    rec["_stepped"] = True
            return
        now = self._edge()
        newest_prof, newest = self.flight[-1]
        ahead = False  # a batch of the newest's loader came before it: that loader fetches ahead
        before = self._last_close  # where rows had ended before this step closes any
        after: Mark | None = None  # where the batch trained before it ended its training (a window)
        for i, (prof, rec) in enumerate(self.flight[:-1]):
            # a later batch of the newest's loader trained before this step (asked of that loader only)
            later_trained = prof is newest_prof and any(p is prof and _trained(r) for p, r in self.flight[i + 1 :])
            if later_trained and "_trained" in rec and "_done" in rec:
                # Trained, and a later batch after it before this step: a window of batches fetched
                # first (Hugging Face's Trainer, gradient accumulation). Its row ends where its
                # training did; the next batch's step starts there.
                done: Mark = rec.pop("_done")
                twin: Mark | None = rec.pop("_twin", None)
                if after is not None:
                    rec["_after"] = after
                self._ending.append(_Ending(prof, rec, done.host_ms, BY_STEP, True, done, None))
                after = twin or Mark(done.host_ms, None)
                continue
            if after is not None and prof is newest_prof and _trained(rec):
                rec["_after"], after = after, None
            if later_trained and not _trained(rec) and "_tent" in rec and not _used_after_tent(rec):
                # Not trained, and a later batch of its loader was: passed over (a loop that skips a
                # bad batch). Its row ends at the next() after it, not with the later batch's step.
                self._ending.append(_Ending(prof, rec, rec["_tent"].host_ms, BY_NEXT, True, None, None))
                continue
            if prof is newest_prof and "_back" in rec and "_tent" in rec and not _used_after_tent(rec):
                # Trained on (its backward) before the next() after it, and no step came between: a
                # loop written in order that accumulates gradients, or whose step GradScaler skipped.
                # Its row ends at that next(). Read as a loop fetching ahead, every later row of a
                # plain loop held the next batch's step (an accumulation every second batch: rows
                # of 32, 0.1, 10.4, 0.0 ms for 10, 20, 30, 10; one skipped step shifted all rows after).
                self._ending.append(_Ending(prof, rec, rec["_tent"].host_ms, BY_NEXT, True, None, None))
                continue
            if prof is newest_prof:
                ahead = True
                self.patterns.saw(str(prof.scenario), DEVICE_PREFETCH if newest["copies"] > 0 else FETCH_AHEAD)
            elif "_tent" in rec and not _used_after_tent(rec):
                # Another loader's batch, copied (if at all) before the next() that came after it, and
                # left: Lightning's sanity check leaves its second validation batch in flight, with no
                # StopIteration. Its row ends at that next(), not with this step, which is not its.
                self._ending.append(_Ending(prof, rec, rec["_tent"].host_ms, BY_NEXT, True, None, None))
                continue
            self._end_at_step(prof, rec, now)
        self.flight = [self.flight[-1]]
        if after is not None:
            newest["_after"] = after
            before = max(before, after.host_ms)  # its window's batches before it ran before it, not beside
        if not ahead and self._fetched_since_step:
            # The others were other loaders' batches: the newest, its loader's only batch, was this
            # step's, as when it is alone. Left for the next step, every training row of a Lightning
            # fit with a validation loader held the next batch's step. The rows this step closed ran
            # beside it (two loaders zipped: both batches are this step's), so its row starts where
            # rows had ended before them: started at their end, the second loader's rows held only
            # the tail after the step (0.05 ms batches with 8 ms of compute, read as loader bound).
            newest["_stepped"] = True
            newest["_since"] = before
            return
        self._fetched_since_step = False
        # The newest batch's step starts now: copies it had already (a device prefetcher) ran under the
        # step just closed; copies it makes later move the start on, as in any batch.
        self._start_step(newest_prof, newest, now)

    def _start_step(self, prof: TransferProfiler, rec: dict[str, Any], now: float) -> None:
        """The batch's step starts now (host ms): its start event on the current stream, or its host
        start; nothing for a batch CUPTI times (its window starts where the rows before it end:
        ``_close``'s ``batch_s``)."""
        if "_calls" in rec:
            return
        if self.cuda:
            record(rec["_comp_start"], current_stream(prof._index))
        else:
            rec["comp_s"] = now

    def _end_at_step(self, prof: TransferProfiler, rec: dict[str, Any], now: float) -> None:
        """The batch's row ends at this optimizer step (host ms ``now``), unless a later step of the
        same iteration comes before the next ``next()`` (``_step_again``)."""
        self._ending.append(_Ending(prof, rec, now, BY_STEP, False, None, Mark(now, self._mark(prof, rec))))

    def _step_again(self) -> None:
        """An optimizer step after the one that ended rows, with no ``next()`` between: the same
        iteration's (a GAN's second player steps after the first). The rows that step ended end here
        instead; the newest batch's step, started at that step, starts here."""
        now = self._edge()
        for i, ending in enumerate(self._ending):
            if ending.ended is not None:
                _release(ending.prof, ending.ended)
                self._ending[i] = ending._replace(end=now, ended=Mark(now, self._mark(ending.prof, ending.rec)))
        if self.flight and not self._fetched_since_step:
            self._start_step(*self.flight[-1], now)

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
        if "_calls" in rec:
            _step_by_cupti(rec, end, bump)
        elif self.cuda:
            _step_by_events(prof, rec, tent, at_tent, bump)
        else:
            _step_by_host(rec, end, bump)
        prof._commit(rec)  # sets rec["_row"] as soon as the row is stored
        self.batches += 1
        if len(prof._pending) >= 8:  # amortise: read finished events a few batches at a time
            prof._pending.resolve(prof._anchor)

    def close_in_flight(self) -> None:
        """Close every batch in flight (the end of a run): where its step ended it, else now. A batch
        that a loop fetching ahead took and never used (no copy, no step, in a loop that copies its
        batches: Lightning's fetcher on a dataset of no length with ``max_steps``, a loop that breaks
        early) is no training batch: it is left out and counted (meta.json's ``loaders``), as its row
        held only what the script did after its loop (on the CPU machine, Lightning's teardown read
        as the step of a batch of 0 bytes)."""
        now = self._edge()
        self._at_next(now)  # what a next() would close, closes; the rest get their end now
        for prof, rec in self.flight:
            # a loader's mode leaves "auto" at its first copy (copy_end, TransferProfiler._copy_into)
            if rec["copies"] == 0 and prof.mode != "auto" and not rec.get("_stepped"):
                self.patterns.left_unused(str(prof.scenario))
                continue
            self._close(prof, rec, now, BY_NEXT, at_tent=True)
        self.flight = []

    def aim(self, src: torch.Tensor) -> tuple[TransferProfiler, dict[str, Any]] | None:
        """Before a copy of ``src`` with batches in flight: the batch it reads becomes the current
        one while the copy is recorded; returns the current one to put back after."""
        was = self.cur
        i = owner([r for _, r in self.flight], src)
        self.cur = self.flight[i]
        if i < len(self.flight) - 1:
            self._older.add(id(self.cur[0]))  # this loader copies batches fetched before the newest
        return was

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
            appender = self._appender
            if handed and appender is not None and not appender.send(handed):
                self._appender = None  # the process is gone: its error, if it stopped at one, is the journal's
                self.journal_error = appender.error
            for key, got, stop in done:
                if got is not None and self._appender is None and self.journal_error is None:
                    journal.append(build_rows(got))
                self._flushed[key] = stop
        except OSError as err:
            self.journal_error = stopped_line(journal.path, err, journal.rows)
            print(f"pinprof: {self.journal_error}", file=sys.stderr)
        self.clock.flushed(started)

    def stop_writer(self) -> None:
        """Stop the journal's thread (the run ended, or is exiting), after its append in progress."""
        if self._writer is not None:
            self._writer.stop()
        appender, self._appender = self._appender, None
        if appender is not None:
            appender.close()  # what it was handed is on disk; later appends (os._exit's) are this thread's
            self.journal_error = self.journal_error or appender.error
            self.journal_process_ms, self.journal_process_start_ms = appender.cpu_ms, appender.start_ms

    # -- the end ----------------------------------------------------------------------------------
    def close(self) -> pd.DataFrame:
        """End the current batch, stop watching pins, and return every loader's timeline."""
        # The rows in flight end now, before the journal's thread and process are stopped: stopping
        # waits for the process to write what it was handed (its start-up too, in a short run), and
        # closed after, the last row of each loop held that wait (224-258 ms for 160-200 in a
        # fresh-clone CI run on the 2-core machine).
        self.close_in_flight()
        self._batches.clear()  # the latest batches, held to name leaves: let go
        self.workers.sample()  # the last reading of workers still running (persistent ones)
        self.stop_writer()
        PIN_HOOK.uninstall()
        frames = []
        for prof in self.profs.values():
            prof._config["loop"] = self.patterns.pattern(str(prof.scenario))
            if prof.mode == "auto":
                prof.mode = "pageable"  # no copy was seen: nothing was pinned by the loop either
            frames.append(prof.timeline())
        return concat(frames)
