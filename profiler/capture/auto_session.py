"""Profiling a loop nobody instrumented: batch boundaries from DataLoader iteration, copies as they come.

An ``AutoSession`` keeps one ``TransferProfiler`` per DataLoader dataset (so a train and a validation
loader are separate scenarios) and is driven by the hooks of ``profiler.capture.auto_hooks``:

- each ``__next__`` of a DataLoader iterator ends the batch that was current (any loader's) and
  starts the next of its own: the fetch is timed around the real ``__next__``, the pin thread's
  interval comes from the pin hook as in ``TransferProfiler.batches``;
- each host-to-device copy of the main thread while a batch is current (``Tensor.to``, ``.cuda``,
  ``copy_``) is timed with CUDA events on the stream it runs on and added to that batch, as
  ``TransferProfiler.to_device`` adds its copies (bytes, ``copies``, call time, ``src_memory``);
- the batch's GPU compute runs from its last copy's end (or from the handoff, with no copy) to an
  event recorded on the current stream at the next batch boundary; the step asks for its data when
  its last copy call returns (``request``), where an asynchronous copy's wait begins;
- a copy whose source is a tensor of the loader's previous batch, still alive, shows a loop that
  fetches one batch ahead of its copies: its scenario goes into ``lagging`` (the report says so);
- NVTX: ``loop <scenario>`` around each ``batch <n>`` range, so an nsys import tells loaders apart.

The mode column says what the copies were: ``pinned_nb`` (pinned source, non_blocking), ``pinned``,
``pageable_nb`` or ``pageable``, from the first copy. Batches before ``skip`` (when given) are flagged warm-up;
after ``limit`` batches of a loader, its later batches are not recorded.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

import pandas as pd
import torch

from profiler.capture import rows
from profiler.capture.batch_tree import tensor_bytes
from profiler.capture.clock import now_ms
from profiler.capture.cuda.events import current_stream, record
from profiler.capture.devices import resolve_device
from profiler.capture.loop import arrived, fetch_begin, fetch_end
from profiler.capture.nvtx import NvtxEmitter
from profiler.capture.one_ahead import OneAhead
from profiler.capture.phases import account
from profiler.capture.pin_hook import PIN_HOOK
from profiler.capture.profiler import TransferProfiler
from profiler.capture.store import note_memory
from profiler.modes import Mode
from profiler.names import clean
from profiler.report.journal import Journal
from profiler.timeline.schema import concat


def iterator_config(it: Any) -> dict[str, Any]:
    """The loader settings a DataLoader iterator carries (the configuration columns)."""
    sampler = getattr(it, "_index_sampler", None)
    workers = int(getattr(it, "_num_workers", 0))
    return {
        "batch_size": getattr(sampler, "batch_size", None),
        "num_workers": workers,
        "pin_memory": bool(getattr(it, "_pin_memory", False)),
        "prefetch_factor": getattr(it, "_prefetch_factor", None) if workers else None,
    }


def copy_mode(pinned: bool, non_blocking: bool) -> Mode:
    if pinned:
        return "pinned_nb" if non_blocking else "pinned"
    return "pageable_nb" if non_blocking else "pageable"


class AutoSession:
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
    ) -> None:
        self.device = resolve_device(device)
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
        # Completed batches go to the journal every ``flush`` interval (PINPROF_FLUSH_S, 2 s) from a
        # thread of their own (``rows.JournalWriter``): a kill -9 loses at most the last interval, and
        # the loop's thread pays nothing for the appends (on the H200 an append cost 10-20 ms of it).
        self.journal = journal
        self.clock = flush or rows.FlushClock.from_settings()
        self._flushed: dict[int, int] = {}
        self.journal_error: str | None = None  # why appends stopped (a full disk), said once
        self._writer = rows.JournalWriter(self.flush, self.clock.every_ms / 1e3) if journal is not None else None
        self._ahead = OneAhead()
        self.lagging = self._ahead.found  # scenarios of a loop one batch ahead (capture.one_ahead)
        if journal is not None:
            journal.start()
        PIN_HOOK.install(NvtxEmitter(enabled=nvtx))
        if self._writer is not None:
            self._writer.start()

    # -- batch boundaries ---------------------------------------------------------------------------
    def profiler_for(self, it: Any) -> TransferProfiler:
        dataset = getattr(it, "_dataset", it)
        prof = self.profs.get(id(dataset))
        if prof is None:
            cfg = iterator_config(it)
            name = clean(f"{type(dataset).__name__}/bs{cfg['batch_size']}/w{cfg['num_workers']}")
            names = {p.scenario for p in self.profs.values()}
            name = name if name not in names else f"{name}#{len(self.profs) + 1}"
            prof = TransferProfiler(
                "auto",
                self.device,
                nvtx=self.nvtx,
                run=self.run,
                scenario=name,
                warmup=self.skip,
                origin_ms=self.origin,
                config=cfg,
                gate=self.gate,  # on unless asked: pinprof's own pinned copies go behind it (copy_pinned)
            )
            prof._begin(())
            self.profs[id(dataset)] = prof
            self._keep.append(dataset)
        return prof

    def begin(self, it: Any) -> tuple[TransferProfiler, dict[str, Any]] | None:
        """Before the loader's real ``__next__``: the current batch ends, this loader's next one starts
        (None once ``limit`` batches of it were recorded)."""
        self.end_batch()
        prof = self.profiler_for(it)
        prof._new_epoch(it)
        n = prof._next_batch
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
        """After it returned ``batch``: the fetch's end, the pin, the compute's start; the batch is current."""
        fetch_end(prof, rec)
        arrived(rec, batch)
        self._ahead.arrived(str(prof.scenario), rec, batch)
        rec["batch_s"] = rec["fetch_s"]
        if prof._cupti_on():
            rec["_calls"] = []  # CUPTI times this batch: its copy calls, then its step's launches
        elif self.cuda:
            ev = rec["_comp_start"] = prof._pool.get()
            record(ev, current_stream(prof._index))  # re-recorded after each copy of the batch
        else:
            rec["comp_s"] = rec["fetch_e"]  # moved to the batch's last copy, if it makes copies
        prof._cur = rec
        self.cur = (prof, rec)

    def abandon(self, prof: TransferProfiler, rec: dict[str, Any]) -> None:
        """After it raised (StopIteration at the loader's end, or the user's error): no batch."""
        fetch_end(prof, rec)
        if prof.nvtx.active:
            prof.nvtx.pop()  # batch
            prof.nvtx.pop()  # loop

    def end_batch(self) -> None:
        """Close the current batch: its end on the host and, on the current stream, its compute's end."""
        if self.cur is None:
            return
        prof, rec = self.cur
        self.cur = None
        prof._cur = None
        if prof.nvtx.active:
            prof.nvtx.pop()  # batch
            prof.nvtx.pop()  # loop
        rec["batch_e"] = now_ms()
        self._ahead.ended(id(prof), rec)
        if "_calls" in rec:
            # CUPTI: every kernel launched between the batch's arrival and the next boundary is its step's
            rec["_window"] = [(rec["fetch_e"], rec["batch_e"])]
        elif self.cuda:
            ev = rec["_comp_end"] = prof._pool.get()
            record(ev, current_stream(prof._index))
        else:  # no GPU: the step is timed on the host, from the batch's last copy to the next batch
            rec["comp_e"] = rec["batch_e"]
            rec["comp_sum"] = rec["comp_e"] - rec["comp_s"]
        prof._commit(rec)
        self.batches += 1
        if len(prof._pending) >= 8:  # amortise: read finished events a few batches at a time
            prof._pending.resolve(prof._anchor)

    def flush(self) -> None:
        """Append every loader's batches completed since the last flush to the journal (the writer's
        thread, or the end of the run). A full disk stops the appends, not the profile: the rows
        appended before stay, and one line says where and how many."""
        journal = self.journal
        if journal is None or self.journal_error is not None:
            return
        started = now_ms()
        try:
            for key, prof in list(self.profs.items()):  # the loop's thread may add a loader meanwhile
                frame, done = rows.completed(prof, self._flushed.get(key, 0))
                journal.append(frame)
                self._flushed[key] = done
        except OSError as err:
            self.journal_error = (
                f"{journal.path}: {err.strerror or err}; appends stopped with {journal.rows} batches on disk "
                "(kept), the run goes on measuring in memory"
            )
            print(f"pinprof: {self.journal_error}", file=sys.stderr)
        self.clock.flushed(started)

    def stop_writer(self) -> None:
        """Stop the journal's thread (the run ended, or is exiting), after its append in progress."""
        if self._writer is not None:
            self._writer.stop()

    # -- copies ---------------------------------------------------------------------------------
    def takes_over(self, src: torch.Tensor, device: torch.device | None, dtype: Any, extra: bool) -> bool:
        """Whether a ``.to()``/``.cuda()`` of ``src`` is one pinprof makes itself (``copy_pinned``): a
        plain non_blocking copy of a dense pinned tensor to the session's device, nothing else
        asked of it (``extra``: a dtype change, ``copy=True``, a memory format, grad)."""
        return bool(
            self.cuda
            and not extra
            and "_calls" not in self.cur[1]  # type: ignore[index]  # CUPTI times the user's own copy exactly
            and type(src) is torch.Tensor
            and not src.requires_grad
            and (dtype is None or dtype == src.dtype)
            and (device is None or device.index is None or device.index == self.device.index)
            and src.is_pinned()
        )

    def copy_pinned(self, src: torch.Tensor) -> torch.Tensor:
        """The copy made as ``TransferProfiler.to_device`` makes it: the destination allocated first,
        then the DMA alone between its events behind the stream gate, so the events time the DMA and
        not the host's dispatch before it (a plain event pair around the user's call read 0.81 ms for
        CUPTI's 0.70 ms on the H200); the current stream waits on its end, as after ``.to()``."""
        prof, rec = cur = self.cur  # type: ignore[misc]
        self._ahead.copied(id(prof), str(prof.scenario), rec, src)
        self.cur = None  # pinprof's own copy_ inside is not the user's: the hooks let it through
        try:
            out = prof._copy_into(rec, src)
        finally:
            self.cur = cur
        rec["request"] = now_ms()  # the script's next op may use the data: see copy_end
        record(rec["_comp_start"], current_stream(prof._index))  # compute starts after the batch's last copy
        return out  # type: ignore[no-any-return]

    def copy_begin(self) -> tuple[Any, Any, Any, float]:
        """Before one of the user's host-to-device copies in the current batch: its start event on
        the current stream, where the copy runs (no events on a CPU device, where the ``.to(device)``
        of the batch is counted as ``TransferProfiler.to_device`` counts it there, host-timed).
        Returns what ``copy_end`` takes."""
        prof, rec = self.cur  # type: ignore[misc]
        prof.nvtx.push("h2d")
        if not self.cuda or "_calls" in rec:  # no events: a CPU device, or CUPTI's records time it
            return None, None, None, now_ms()
        stream = current_stream(prof._index)
        start, end = prof._pool.get(), prof._pool.get()
        record(start, stream)
        return stream, start, end, now_ms()

    def copy_end(
        self, began: tuple[Any, Any, Any, float], src: torch.Tensor, non_blocking: bool, alt_bytes: int | None = None
    ) -> None:
        """After it: its end event, and the copy added to the current batch (bytes, ``copies``, call
        time, whether it blocked, ``src_memory``) as ``TransferProfiler.to_device`` adds its own.
        ``alt_bytes``: the copy's size in the dtype it was asked for, when it converts (torch may
        convert before the copy); CUPTI's record may have either size."""
        call_e = now_ms()
        stream, start, end, call_s = began
        prof, rec = self.cur  # type: ignore[misc]
        if stream is not None:
            record(end, stream)
        self._ahead.copied(id(prof), str(prof.scenario), rec, src)
        prof.nvtx.pop()
        pinned = self.cuda and src.is_pinned()  # is_pinned() asks CUDA: not on a CPU machine
        nbytes = tensor_bytes(src)
        rec["bytes"] = max(rec["bytes"], 0) + nbytes
        rec["copies"] += 1
        account(rec, "call_s", "call_sum", "call_e", call_s, call_e)
        rec["copy_sync"] = rec["copy_sync"] or not (pinned and non_blocking)
        if stream is not None:
            # No compute() context says when the step needs the data: the script's next GPU op may
            # use it as soon as the call returns, so that is when it is asked for (the wait of an
            # asynchronous copy runs from the last copy's return to its end). Without it, the wait
            # fell back to the batch's end and read 0 on a loop whose GPU idled 2.8 ms per step
            # for its copy (resnet50 on the H200).
            rec["request"] = call_e
            rec.setdefault("_h2d", []).append((start, end, True))
            record(rec["_comp_start"], stream)  # compute starts when the batch's last copy has ended
        elif "_calls" in rec:
            rec["request"] = call_e  # as above: the step may use the data once the call returns
            expect = (nbytes,) if alt_bytes in (None, nbytes) else (nbytes, alt_bytes)
            rec["_calls"].append((round(call_s * 1e6), round(call_e * 1e6), (expect,) if nbytes else ()))
        else:
            rec["comp_s"] = call_e  # host clock: the step starts when the batch's last copy has returned
        note_memory(rec, "pinned" if pinned else "pageable", None)
        if prof.mode == "auto":
            prof.mode = copy_mode(pinned, non_blocking)

    def pin_end(self, start: float) -> None:
        """A ``pin_memory()`` the main thread made inside the current batch, from ``start`` (host ms)
        to now: the batch's pin interval (first start, last end)."""
        rec = self.cur[1]  # type: ignore[index]
        if rec["pin_s"] != rec["pin_s"]:  # NaN: the first pin of this batch
            rec["pin_s"] = start
        rec["pin_e"] = now_ms()

    # -- the end ----------------------------------------------------------------------------------
    def close(self) -> pd.DataFrame:
        """End the current batch, stop watching pins, and return every loader's timeline."""
        self.stop_writer()
        self.end_batch()
        PIN_HOOK.uninstall()
        frames = []
        for prof in self.profs.values():
            if prof.mode == "auto":
                prof.mode = "pageable"  # no copy was seen: nothing was pinned by the loop either
            frames.append(prof.timeline())
        return concat(frames)
