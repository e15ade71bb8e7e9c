"""Where a batch's row ends at its training: a backward on the loop's thread (``backward``,
``trained``: which batch it trained, from the tensors it reads) and torch's optimizer step hook
(``stepped``: every batch in flight but the newest ends there, in a loop that fetches ahead; a second
step before the next ``next()`` is the same iteration's, ``_step_again``)."""

from __future__ import annotations

import threading
from typing import Any

from profiler.capture.auto_state import (
    SessionState,
    _drop_done,
    _Ending,
    _release,
    _trained,
    _used_after_tent,
)
from profiler.capture.in_flight import BY_NEXT, BY_STEP, Mark
from profiler.capture.profiler import TransferProfiler
from profiler.timeline.schema import DEVICE_PREFETCH, FETCH_AHEAD


class StepHooks(SessionState):
    """The rows a backward or an optimizer step ends (see the module docstring)."""

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
        now = rec["_clock"].step_edge(ended_ns / 1e6, self._edge)
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
        rec["_clock"].start_step(prof, rec, now)

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
