"""``TransferProfiler``: the one object a user wraps around their own loop.

    prof = TransferProfiler(mode="pinned_nb")
    for batch in prof.batches(loader):      # fetch timed, ``batch <n>`` NVTX range opened
        x, y = prof.to_device(batch)        # stage + H2D, timed with CUDA events
        with prof.cpu_work(): ...           # CPU work meant to overlap the copy
        with prof.compute(): step(x, y)     # GPU work, timed with CUDA events
    df = prof.timeline()                    # one row per batch (columns: profiler.timeline.schema)

Where it synchronizes: once when iteration starts and once in ``timeline()`` (clock anchors); in the
blocking modes on the copy's end event (where a blocking ``.to()`` waits); in ``staged`` only to
wait until one of its own pinned buffers is free again. Events are read when ``Event.query()`` says
they are done, never by waiting. Everything else the loop does is untouched.
"""

from __future__ import annotations

import gc
import warnings
from collections.abc import Iterable, Iterator
from time import perf_counter_ns
from typing import Any, Literal

import pandas as pd
import torch

from profiler.capture import batch_tree, gc_pauses, rows
from profiler.capture.clock import now_ms
from profiler.capture.clocks.choice import clocks_for
from profiler.capture.cuda.anchor import Anchor, take_anchor
from profiler.capture.cuda.events import EventPool, current_stream
from profiler.capture.cuda.gate import StreamGate, gate_wanted, make_gate
from profiler.capture.device_copy import DeviceCopier
from profiler.capture.devices import resolve_device
from profiler.capture.hazards import hazards_wanted
from profiler.capture.loader import cpu_only_notes, loader_config
from profiler.capture.loop import fetch, looping
from profiler.capture.nvtx import NvtxEmitter
from profiler.capture.pending import PendingEvents
from profiler.capture.phases import Compute, CpuWork
from profiler.capture.prefetch import prefetched
from profiler.capture.staged_copy import StagedCopier
from profiler.capture.store import Store, note_memory
from profiler.errors import MisuseError, PinnedMemoryError, PinprofWarning, UsageError
from profiler.modes import SPECS, Mode, parse_mode
from profiler.names import clean

__all__ = ["PinprofWarning", "TransferProfiler"]


class TransferProfiler:
    """Records every batch's phases (see ``profiler.timeline.schema`` for the columns they become).

    mode: how ``to_device`` copies (``profiler.modes``); ``"auto"`` picks ``pinned_nb`` for a pinned
        first batch and ``pageable`` otherwise.
    device: target device; default ``cuda`` if available, else ``cpu`` (GPU columns stay empty).
    nvtx: emit NVTX ranges in domain ``pinprof``.
    warmup: the first ``warmup`` batches are flagged ``warmup=True`` (kept, excluded from summaries).
    gate: time copies from pinned memory behind a held stream (``profiler.capture.cuda.gate``) for exact h2d_ms.
    hazards: watch the loop for the two non_blocking races and warn once each (``profiler.capture.hazards``;
        costs microseconds per torch operator, so off unless True or ``PINPROF_HAZARDS=1``).
    gpu_clock: ``auto``: CUPTI's records time the GPU where they can be had, CUDA events otherwise
        (``profiler.capture.clocks.choice``); ``events``: CUDA events for this profiler.
    """

    def __init__(
        self,
        mode: Mode | Literal["auto"] = "auto",
        device: str | torch.device | None = None,
        *,
        nvtx: bool = True,
        run: str = "run",
        scenario: str | None = None,
        warmup: int = 0,
        origin_ms: float | None = None,
        config: dict[str, Any] | None = None,
        gate: bool = True,
        hazards: bool | None = None,
        gpu_clock: Literal["auto", "events"] = "auto",
    ) -> None:
        self.mode: Mode | Literal["auto"] = mode if mode == "auto" else parse_mode(mode)
        if warmup < 0:
            raise UsageError(f"warmup={warmup} must be >= 0")
        self.device = resolve_device(device)
        self.cuda = self.device.type == "cuda"
        self.nvtx = NvtxEmitter(enabled=nvtx)
        # names reach CSV, Markdown and HTML: cleaned here, where they enter (profiler.names)
        self.run, self.scenario, self.warmup = clean(run), None if scenario is None else clean(scenario), warmup
        self._origin = origin_ms
        self._config: dict[str, Any] = dict(config or {})
        self._store = Store()
        gc_pauses.watch()  # the timeline's gc_ms: a long batch may be the garbage collector's
        self._cur: dict[str, Any] | None = None
        self._next_batch = 0
        # Which pass over the loader: each new iterator of it is an epoch (its workers may restart).
        self._epoch: int = -1
        self._iterator_id: int | None = None
        self._warned: set[str] = set()
        self._anchor: Anchor | None = None
        self._gate: StreamGate | None = None
        self._hazards = hazards_wanted(hazards)
        index = self.device.index
        self._index = index if index is not None else (torch.cuda.current_device() if self.cuda else 0)
        # CUPTI's records time the GPU where they can be had, events otherwise (profiler.capture.clocks).
        self._clocks = clocks_for(self.device, gpu_clock)
        self._exit_ms = 0.0  # the latest compute() exit's marker, host ms (phases.Compute)
        if self.cuda:
            self._pool = EventPool(self.device)
            self._copy_stream = torch.cuda.Stream(self.device)
            self._gate = make_gate(self.device) if gate and gate_wanted() else None
            self._copier = DeviceCopier(self.device, self._index, self._pool, self._copy_stream, self._gate, self.nvtx)
        self._pending = PendingEvents(self._store, self._pool if self.cuda else None)
        self._staged = StagedCopier(
            self.device, self._index, self._copy_stream if self.cuda else None, self._gate, self.nvtx
        )

    # -- the loop -------------------------------------------------------------------------------
    def batches(self, loader: Iterable[Any], limit: int | None = None) -> Iterator[Any]:
        """Iterate ``loader``, timing each wait in ``next()``; at most ``limit`` batches."""
        with looping(self, loader, limit):
            nvtx = self.nvtx
            named = nvtx.active  # no batch name to format when no tool listens
            it = iter(loader)
            self._new_epoch(it)
            count = 0
            resumed = now_ms()  # pinprof's own time runs from here to the next fetch, and after it
            while limit is None or count < limit:
                if len(self._pending) >= 8:  # amortise: read finished events a few batches at a time
                    self._pending.resolve(self._anchor)
                n = self._next_batch
                if named:
                    nvtx.push(f"batch {n}")
                rec = None
                try:
                    got = fetch(self, it, n)
                    if got is None:
                        break
                    rec, batch = got
                    rec["batch_s"] = rec["fetch_s"]
                    self._cur = rec
                    # the previous batch's commit and this one's fetch bookkeeping, the loader's next() left out
                    rec["own_sum"] = rec["fetch_s"] - resumed + now_ms() - rec["fetch_e"]
                    yield batch
                finally:
                    nvtx.pop()  # before the clock, as the other loops do: the range's end nests inside
                    resumed = now_ms()
                    if rec is not None and self._cur is rec:
                        rec["batch_e"] = resumed
                        # to_device's own work: its time less the copy calls (or the staging, which
                        # is the staged mode's call on a GPU and counted in both) and the layout
                        # copies: those are the transfer's (h2d_call_ms, stage_ms, layout_ms)
                        calls = rec["call_sum"] if rec["call_sum"] == rec["call_sum"] else rec["stage_sum"]
                        own = rec["own_sum"]
                        for part in (calls, rec["layout_sum"]):
                            if part == part:
                                own -= part
                        rec["own_sum"] = own
                        self._commit(rec)
                        self._cur = None
                count += 1

    def _new_epoch(self, it: Any) -> None:
        """``it`` is the loader's iterator now: a different one from before starts the next epoch, and
        so does a DataLoader iterator before its pass's first batch (``_num_yielded`` 0): with
        ``persistent_workers`` every pass reuses one iterator, and a new one can take a freed one's
        address (``id``), as every epoch of a loop with no workers did on the CPU machine."""
        if id(it) != self._iterator_id or getattr(it, "_num_yielded", None) == 0:
            self._epoch += 1
            self._iterator_id = id(it)

    def _begin(self, loader: Iterable[Any]) -> None:
        if self._origin is None:
            self._origin = now_ms()
        if self.cuda and self._anchor is None:
            self._anchor = take_anchor(current_stream(self._index), self._gate)
        loader_config(loader, self._config)
        # Objects gc.freeze() had put out of the collector's reach when the loop began: a remedy in place.
        self._config.setdefault("gc_frozen", gc.get_freeze_count())
        for key, message in [] if self.cuda else cpu_only_notes(self._config, self._hazards):
            self._warn_once(key, message)

    def _commit(self, rec: dict[str, Any]) -> None:
        if rec["bytes"] < 0:
            rec["bytes"] = 0  # to_device() was not called: nothing was moved
        row = self._store.append(rec)
        rec["_row"] = row  # stored: a close interrupted after this (Ctrl-C in the hooks) is not stored twice
        self._clocks.of(rec).commit(self, rec, row)
        self._next_batch += 1

    # -- phases ---------------------------------------------------------------------------------
    def to_device(self, batch: Any) -> Any:
        """Move ``batch`` (tensors, nested containers, dataclasses) to the device as the mode says.

        Called several times in one batch (``x = to_device(x); y = to_device(y)``), the copies add
        up: bytes, ``copies``, the layout and call times; ``h2d`` spans the first copy's start to the
        last one's end."""
        rec = self._current("to_device")
        t0 = perf_counter_ns()
        out = self._copy_into(rec, batch)
        rec["own_sum"] += (perf_counter_ns() - t0) / 1e6  # the copies' own parts come off at the batch's end
        return out

    def device_batches(self, loader: Iterable[Any], limit: int | None = None) -> Iterator[Any]:
        """``to_device`` of each batch of ``batches``; in mode ``prefetch`` batch n+1 is fetched and its
        copy issued before batch n is handed out, to run under step n's compute (``capture.prefetch``)."""
        if self.mode != "auto" and SPECS[self.mode].prefetch:
            yield from prefetched(self, loader, limit)
            return
        for batch in self.batches(loader, limit):
            yield self.to_device(batch)

    def _copy_into(self, rec: dict[str, Any], batch: Any, defer: bool = False) -> Any:
        """``to_device`` of ``batch`` into the batch record ``rec``. ``defer`` (the prefetch loop): the
        compute stream does not wait for the copy now; its end events go to ``rec["_ready"]``."""
        tensors = batch_tree.require_tensors(batch)
        rec["bytes"] = max(rec["bytes"], 0) + sum(batch_tree.tensor_bytes(t) for t in tensors)
        rec["copies"] += 1
        kinds = [batch_tree.memory_kind(t) for t in tensors]
        kind = batch_tree.combined_kind(kinds)
        mode = self._resolve_mode(kind)
        spec = SPECS[mode]
        if spec.staged:
            try:
                out, kind = self._staged.copy(batch, rec, kind)
                return note_memory(rec, kind, out)
            except PinnedMemoryError as err:
                # Page-locked memory is scarce: fall back to the driver's path rather than fail the loop.
                self._warn_once("no-pinned", f"{err}; batch {rec['batch']} and later are copied as in mode 'pageable'")
                self.mode, spec = "pageable", SPECS["pageable"]
        if not self.cuda or kind == "device":
            out = batch_tree.map_tensors(batch, lambda t: t.to(self.device)) if self.cuda else batch
            return note_memory(rec, kind, out)
        if spec.pin_memory and kind != "pinned":
            self._warn_once(
                "expect-pinned",
                f"mode {mode!r} got a {kind} batch: set pin_memory=True on the "
                "DataLoader, or the copy is staged by the driver and blocks",
            )
        out, kind = self._copier.copy(batch, tensors, kinds, spec, rec, self._clocks.of(rec), defer)
        return note_memory(rec, kind, out)

    def cpu_work(self) -> CpuWork:
        """Context manager around CPU work meant to overlap the copy (host clock, NVTX)."""
        return CpuWork(self._current("cpu_work"), self.nvtx)

    def compute(self) -> Compute:
        """Context manager around GPU work (CUDA events on the current stream; host clock on CPU).

        Its entry also marks when the batch's data is needed, for ``wait_ms``.
        """
        return Compute(self, self._current("compute"))

    def _current(self, what: str) -> dict[str, Any]:
        if self._cur is None:
            raise MisuseError(
                f"{what}() must be called inside `for batch in prof.batches(loader):`, "
                "after the batch arrives and before the next one is fetched"
            )
        return self._cur

    def _resolve_mode(self, kind: str) -> Mode:
        if self.mode == "auto":
            self.mode = "pinned_nb" if kind == "pinned" else "pageable"
        return self.mode

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            warnings.warn(message, PinprofWarning, stacklevel=3)

    def live_medians(self) -> dict[str, float]:
        """Median host-side fetch, copy-call and batch times (ms) over the last 50 batches: cheap
        enough for a progress bar; GPU times are only read in ``timeline()``."""
        return self._store.host_medians(50)

    def timeline(self) -> pd.DataFrame:
        """One row per completed batch so far; safe to call mid-run (e.g. for a partial report)."""
        return rows.timeline(self)

    def close(self) -> None:
        """Free the staging buffers (pinned memory) once their copies are done."""
        self._staged.close()

    # The public TransferProfiler (``profiler.drivers.library``) adds ``out=``: what was measured kept
    # however the block ends. Here a ``with`` block only frees the staging buffers.
    def __enter__(self) -> TransferProfiler:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        self.close()
