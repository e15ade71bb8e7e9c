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

from typing import Any

import pandas as pd
import torch

from profiler.capture import trial
from profiler.capture.auto_copies import CopyHooks
from profiler.capture.auto_state import _trained
from profiler.capture.auto_steps import StepHooks
from profiler.capture.cuda.events import current_stream
from profiler.capture.frames import calling_framework, fetches_windows, iterator_config
from profiler.capture.in_flight import LOOKS, Mark, owner, storages
from profiler.capture.loop import arrived, fetch_begin, fetch_end
from profiler.capture.pin_hook import PIN_HOOK
from profiler.capture.profiler import TransferProfiler
from profiler.names import clean
from profiler.timeline.schema import FETCHES_AHEAD, concat


class TrialDone(BaseException):  # a stop, not an error: what the trial came for is recorded
    """Raised from a loader's ``next()`` once a ``pinprof tune`` trial has its batches: the script
    stops there (a BaseException, so the script's own ``except Exception`` lets it through)."""


class AutoSession(StepHooks, CopyHooks):
    """The recorders of one profiled program (see the module docstring)."""

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
        if self.stop_after is not None and (got := self._measured()) >= self.stop_after + self.trial_extra:
            raise TrialDone(f"{got} batches recorded")
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

    def _measured(self) -> int:
        """A tune trial's batches so far: the rows closed and, in a run with no optimizer step, the
        batches whose end a ``next()`` set (``_tent``), trained or of a loader that trains none. Such
        a loop closes a row one ``next()`` late: counted by its closed rows alone, its trial recorded a
        batch more than its window (``tests/test_tune.py``: an update written by hand, an evaluation
        loop). Where optimizer steps come, a step may still claim a batch with such an end (gradient
        accumulation), so only closed rows count: the trial's last row keeps its step."""
        if self.steps:
            return self.batches
        late = 0
        for p, r in self.flight:
            late += "_tent" in r and "_held" not in r and (_trained(r) or id(p) not in self._training)
        return self.batches + late

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
        clock = rec["_clock"] = prof._clocks.for_new_batch()  # it times the batch to its row's end
        clock.open(prof, rec)
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
    def aim(self, src: torch.Tensor) -> tuple[TransferProfiler, dict[str, Any]] | None:
        """Before a copy of ``src`` with batches in flight: the batch it reads becomes the current
        one while the copy is recorded; returns the current one to put back after."""
        was = self.cur
        i = owner([r for _, r in self.flight], src)
        self.cur = self.flight[i]
        if i < len(self.flight) - 1:
            self._older.add(id(self.cur[0]))  # this loader copies batches fetched before the newest
        return was

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
