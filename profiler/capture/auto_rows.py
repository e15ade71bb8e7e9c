"""Where a batch's row ends at a ``next()`` (``profiler.capture.in_flight``): a loop written by hand
closes a batch's row at the ``next()`` after its step, a loop with no step one ``next()`` late, a
loader that fetches windows holds its batches; a later batch's fetch or copy before a step moves the
step's start (``_bump``); the run's end closes every batch in flight (``close_in_flight``)."""

from __future__ import annotations

from typing import Any

from profiler.capture.auto_state import (
    SessionState,
    _NextEnd,
    _release,
    _trained,
    _used_after_tent,
)
from profiler.capture.clock import now_ms
from profiler.capture.in_flight import BY_NEXT, HOLD, Mark
from profiler.capture.profiler import TransferProfiler


class RowEnds(SessionState):
    """The rows a ``next()`` or the run's end closes (see the module docstring)."""

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
