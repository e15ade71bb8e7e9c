"""``TransferProfiler``: the one object a user wraps around their own loop.

    prof = TransferProfiler(mode="pinned_nb")
    for batch in prof.batches(loader):      # fetch timed, ``batch <n>`` NVTX range opened
        x, y = prof.to_device(batch)        # stage + H2D, timed with CUDA events
        with prof.cpu_work(): ...           # CPU work meant to overlap the copy
        with prof.compute(): step(x, y)     # GPU work, timed with CUDA events
    df = prof.timeline()                    # one row per batch (columns: profiler.timeline)

Where it synchronizes: once when iteration starts and once in ``timeline()`` (clock anchors); in the
blocking modes on the copy's end event (where a blocking ``.to()`` waits); in ``staged`` only to
wait until one of its own pinned buffers is free again. Events are read when ``Event.query()`` says
they are done, never by waiting. Everything else the loop does is untouched.
"""
from __future__ import annotations

import warnings
from collections import deque
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch

from . import batch_tree, cudart
from .clock import Anchor, ClockMap, EventPool, current_stream, elapsed_ms, now_ms, take_anchor
from .devices import rank_info, resolve_device
from .gate import StreamGate, gate_wanted, make_gate
from .hazards import HazardWatch, hazards_wanted
from .interrupt import Terminated, install_sigterm, note_on, restore_sigterm, write_held
from .modes import SPECS, Mode, parse_mode
from .nvtx_ranges import NvtxEmitter
from .pin_hook import PIN_HOOK
from .staging import PinnedMemoryError, PinnedStager
from .store import TEMPLATE, Store
from .timeline import build_timeline

NAN = float("nan")
# The C method behind torch.cuda.Event.record, without the wrapper's stream lookup (hot path).
_record = getattr(getattr(torch._C, "_CudaEventBase", None), "record", None) or torch.cuda.Event.record
_wait = getattr(getattr(torch._C, "_CudaEventBase", None), "wait", None) or torch.cuda.Event.wait
_query = getattr(getattr(torch._C, "_CudaEventBase", None), "query", None) or torch.cuda.Event.query


def _set_stream(stream: torch.cuda.Stream) -> None:
    """``torch.cuda.set_stream`` without its Python wrapper's checks (hot path)."""
    torch._C._cuda_setStream(stream_id=stream.stream_id, device_index=stream.device_index,
                             device_type=stream.device_type)


class PinprofWarning(UserWarning):
    """A setting that makes a mode do something other than its name says."""


class _HostPhase:
    """Host-clock accounting shared by the phase contexts: first start, last end, summed time.

    Classes, not @contextmanager, to keep them cheap; the record keys are class attributes so no key
    string is built per batch.
    """

    __slots__ = ("rec", "start")
    _S, _SUM, _E = "", "", ""
    rec: dict[str, Any]
    start: float

    def _account(self, end: float) -> None:
        rec, start = self.rec, self.start
        if rec[self._S] != rec[self._S]:  # NaN: the first block of this batch
            rec[self._S], rec[self._SUM] = start, end - start
        else:
            rec[self._SUM] += end - start
        rec[self._E] = end


class _CpuWork(_HostPhase):
    """``with prof.cpu_work():`` host clock and NVTX only."""

    __slots__ = ("nvtx",)
    _S, _SUM, _E = "cpu_s", "cpu_sum", "cpu_e"

    def __init__(self, rec: dict[str, Any], nvtx: NvtxEmitter) -> None:
        self.rec, self.nvtx = rec, nvtx

    def __enter__(self) -> None:
        self.start = now_ms()
        self.nvtx.push("cpu_work")

    def __exit__(self, *exc: object) -> None:
        self.nvtx.pop()
        self._account(now_ms())


class _Compute(_HostPhase):
    """``with prof.compute():`` host clock, NVTX, and CUDA events on the stream the work runs on."""

    __slots__ = ("prof", "stream")
    _S, _SUM, _E = "comp_s", "comp_sum", "comp_e"

    def __init__(self, prof: TransferProfiler, rec: dict[str, Any]) -> None:
        self.prof, self.rec = prof, rec

    def __enter__(self) -> None:
        prof, rec = self.prof, self.rec
        start = self.start = now_ms()
        if rec["request"] != rec["request"]:  # NaN: first compute of this batch
            rec["request"] = start
        if prof.cuda:
            stream = self.stream = rec.get("_stream") or current_stream(prof._index)
            if "_comp_start" not in rec:  # later blocks of the same batch extend it: no start event
                ev = prof._pool.get()
                _record(ev, stream)
                rec["_comp_start"] = ev
        prof.nvtx.push("compute")

    def __exit__(self, *exc: object) -> None:
        prof, rec = self.prof, self.rec
        prof.nvtx.pop()
        end = now_ms()
        if prof.cuda:
            ev = prof._pool.get()
            _record(ev, self.stream)
            old = rec.get("_comp_end")
            if old is not None:
                prof._pool.put(old)
            rec["_comp_end"] = ev
        self._account(end)


class TransferProfiler:
    """Records every batch's phases (see ``profiler.timeline`` for the columns they become).

    mode: how ``to_device`` copies (``profiler.modes``); ``"auto"`` picks ``pinned_nb`` for a pinned
        first batch and ``pageable`` otherwise.
    device: target device; default ``cuda`` if available, else ``cpu`` (GPU columns stay empty).
    nvtx: emit NVTX ranges in domain ``pinprof``.
    warmup: the first ``warmup`` batches are flagged ``warmup=True`` (kept, excluded from summaries).
    gate: time copies from pinned memory behind a held stream (``profiler.gate``) for exact h2d_ms.
    out: report folder written when the profiler is used as a context manager (see ``__enter__``).
    hazards: watch the loop for the two non_blocking races and warn once each (``profiler.hazards``;
        costs microseconds per torch operator, so off unless True or ``PINPROF_HAZARDS=1``).
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
        out: str | Path | None = None,
        hazards: bool | None = None,
    ) -> None:
        self.mode: Mode | Literal["auto"] = mode if mode == "auto" else parse_mode(mode)
        if warmup < 0:
            raise ValueError(f"warmup={warmup} must be >= 0")
        self.device = resolve_device(device)
        self.cuda = self.device.type == "cuda"
        self.nvtx = NvtxEmitter(enabled=nvtx)
        self.run, self.scenario, self.warmup = run, scenario, warmup
        self.out = out
        self._origin = origin_ms
        self._config: dict[str, Any] = dict(config or {})
        self._store = Store()
        self._pending: deque[tuple[int, tuple[Any, ...], bool]] = deque()
        self._cur: dict[str, Any] | None = None
        self._next_batch = 0
        self._warned: set[str] = set()
        self._anchor: Anchor | None = None
        self._stager: PinnedStager | None = None
        self._gate: StreamGate | None = None
        self._hazards = hazards_wanted(hazards)
        index = self.device.index
        self._index = index if index is not None else (torch.cuda.current_device() if self.cuda else 0)
        if self.cuda:
            self._pool = EventPool(self.device)
            self._copy_stream = torch.cuda.Stream(self.device)
            self._gate = make_gate(self.device) if gate and gate_wanted() else None

    # -- the loop -------------------------------------------------------------------------------
    def batches(self, loader: Iterable[Any], limit: int | None = None) -> Iterator[Any]:
        """Iterate ``loader``, timing each wait in ``next()``; at most ``limit`` batches."""
        if limit is not None and limit < 0:
            raise ValueError(f"limit={limit} must be >= 0 or None")
        self._begin(loader)
        nvtx = self.nvtx
        named = nvtx.active  # no batch name to format when no tool listens
        watch = HazardWatch(lambda: self._next_batch) if self._hazards and self.cuda else None
        if watch is not None:
            watch.__enter__()
        PIN_HOOK.install(nvtx)
        # One range around the loop names the scenario, so an nsys import can tell loops apart.
        nvtx.push(f"loop {self.scenario or self.mode}")
        try:
            it = iter(loader)
            count = 0
            while limit is None or count < limit:
                if len(self._pending) >= 8:  # amortise: read finished events a few batches at a time
                    self._resolve_ready()
                n = self._next_batch
                rec = dict(TEMPLATE)
                rec["batch"], rec["warmup"] = n, n < self.warmup
                if named:
                    nvtx.push(f"batch {n}")
                try:
                    rec["batch_s"] = rec["fetch_s"] = now_ms()
                    nvtx.push("fetch")
                    try:
                        batch = next(it)
                    except StopIteration:
                        break
                    finally:
                        nvtx.pop()  # clock after the pop, as before the push: the NVTX range nests inside
                        rec["fetch_e"] = now_ms()
                    pin = PIN_HOOK.pop(batch)
                    if pin is not None:
                        rec["pin_s"], rec["pin_e"] = pin
                    self._cur = rec
                    yield batch
                finally:
                    nvtx.pop()
                    if self._cur is rec:
                        rec["batch_e"] = now_ms()
                        self._commit(rec)
                        self._cur = None
                count += 1
        finally:
            nvtx.pop()
            PIN_HOOK.uninstall()
            if watch is not None:
                watch.__exit__(None, None, None)

    def _begin(self, loader: Iterable[Any]) -> None:
        if self._origin is None:
            self._origin = now_ms()
        if self.cuda and self._anchor is None:
            self._anchor = take_anchor(current_stream(self._index), self._gate)
        for key in ("batch_size", "num_workers", "pin_memory", "prefetch_factor"):
            if key not in self._config and hasattr(loader, key):
                self._config[key] = getattr(loader, key)
        if self._config.get("num_workers") == 0:
            self._config["prefetch_factor"] = None  # the DataLoader ignores it without workers
        if self._hazards and not self.cuda:
            self._warn_once("hazards-no-cuda", "hazard detection watches CUDA copies and there is no CUDA "
                            "device: it stays off")
        if self._config.get("pin_memory") and not self.cuda:
            self._warn_once("pin-no-cuda", "the loader has pin_memory=True but there is no CUDA device: "
                            "torch skips pinning, so pin_ms stays empty")

    def _commit(self, rec: dict[str, Any]) -> None:
        if rec["bytes"] < 0:
            rec["bytes"] = 0  # to_device() was not called: nothing was moved
        h2d = rec.get("_h2d", (None, None))
        events = (h2d[0], h2d[1], rec.get("_comp_start"), rec.get("_comp_end"))
        row = self._store.append(rec)
        if h2d[0] is not None or events[2] is not None or events[3] is not None:
            self._pending.append((row, events, rec.get("_pooled", True)))
        self._next_batch += 1

    # -- phases ---------------------------------------------------------------------------------
    def to_device(self, batch: Any) -> Any:
        """Move ``batch`` (tensors, nested containers, dataclasses) to the device as the mode says."""
        rec = self._current("to_device")
        tensors = batch_tree.require_tensors(batch)
        rec["bytes"] = sum(batch_tree.tensor_bytes(t) for t in tensors)
        kind = batch_tree.batch_memory_kind(tensors)
        mode = self._resolve_mode(kind)
        spec = SPECS[mode]
        if spec.staged:
            try:
                return self._staged(batch, rec, kind)
            except PinnedMemoryError as err:
                # Page-locked memory is scarce: fall back to the driver's path rather than fail the loop.
                self._warn_once("no-pinned", f"{err}; batch {rec['batch']} and later are copied as in mode 'pageable'")
                self.mode, spec = "pageable", SPECS["pageable"]
        rec["src_memory"] = kind
        if not self.cuda or kind == "device":
            return batch_tree.map_tensors(batch, lambda t: t.to(self.device)) if self.cuda else batch
        if spec.pin_memory and kind != "pinned":
            self._warn_once("expect-pinned", f"mode {mode!r} got a {kind} batch: set pin_memory=True on the "
                            "DataLoader, or the copy is staged by the driver and blocks")
        compute_stream = rec["_stream"] = current_stream(self._index)
        # Copies from pinned memory are issued behind a held stream (profiler.gate), so the start
        # event fires right before the DMA. Pageable copies cannot be held (the driver stages them on
        # this thread and waits for its own DMAs); they are issued by a direct cudaMemcpyAsync
        # (profiler.cudart), which puts the runtime call 3-8 us after the start event instead of
        # 5-20 us through torch's dispatch (H200, against CUPTI).
        gated = kind == "pinned" and self._gate is not None
        # Gated blocking copies also run on the copy stream, after the compute stream's queued work
        # (the order a .to() on the compute stream has): on the H200, events around a copy on the
        # default stream read 4.8-5.7 us more than CUPTI once kernels had run there, 2.6 us on a
        # side stream.
        stream = self._copy_stream if spec.side_stream or gated else compute_stream
        start, end = self._pool.get(), self._pool.get()
        dev = self.device
        switch = stream is not compute_stream
        self.nvtx.push("h2d")
        if switch:
            if not spec.side_stream:
                stream.wait_stream(compute_stream)
            _set_stream(stream)  # cheaper than the torch.cuda.stream() context per batch
        try:
            # Everything but the copies happens before the event window and the gate's release, so
            # the copy starts as close as possible to the moment the loop gets its batch back:
            # destinations (empty_like keeps .to()'s layout rule), the output structure, the
            # allocator's note that the consumer stream will use them, the choice of copy call.
            srcs = [t for t in tensors if t.is_cpu]
            dsts = [torch.empty_like(t, device=dev) for t in srcs]
            rt = cudart.runtime() if kind == "pageable" else None
            calls = [(d, t, rt is not None and cudart.direct_copy_ok(d, t)) for d, t in zip(dsts, srcs)]
            moved = iter(dsts)
            out = batch_tree.map_tensors(batch, lambda t: next(moved) if t.is_cpu else t.to(dev))
            if switch:
                for d in dsts:
                    d.record_stream(compute_stream)
            rec["call_s"] = now_ms()
            held = gated and self._gate.hold(stream)  # type: ignore[union-attr]
            try:
                _record(start, stream)
                # Always issued non_blocking; a blocking mode waits on the end event below, which is
                # where a blocking .to() lets the host go too (the end of the stream's work so far),
                # but with the end event queued right behind the copy rather than recorded once the
                # host is back (9-26 us late for pageable copies on the H200).
                for d, t, direct in calls:
                    if not (direct and cudart.copy_pageable(rt, d, t, stream)):  # type: ignore[arg-type]
                        d.copy_(t, non_blocking=True)
                _record(end, stream)
                if switch:
                    _wait(end, compute_stream)  # GPU-side: compute starts after the copy, host goes on
            finally:
                if held:
                    self._gate.release()  # type: ignore[union-attr]
            if not spec.non_blocking:
                end.synchronize()
            rec["call_e"] = now_ms()
        finally:
            if switch:
                _set_stream(compute_stream)
            self.nvtx.pop()
        rec["copy_sync"] = (not spec.non_blocking) or kind != "pinned"
        rec["_h2d"] = (start, end)
        return out

    def _staged(self, batch: Any, rec: dict[str, Any], kind: str) -> Any:
        if self._stager is None:
            self._stager = PinnedStager(self.device, stream=self._copy_stream if self.cuda else None,
                                        pin=self.cuda, gate=self._gate)
        self.nvtx.push("stage")
        try:
            consumer = rec["_stream"] = current_stream(self._index) if self.cuda else None
            res = self._stager.copy(batch, consumer=consumer)
        finally:
            self.nvtx.pop()
        rec["stage_s"], rec["stage_e"] = res.stage_start_ms, res.stage_end_ms
        if self.cuda and res.dma_start is not None:
            rec["call_s"], rec["call_e"] = res.stage_start_ms, res.stage_end_ms
            rec["_h2d"] = (res.dma_start, res.dma_end)
            rec["_pooled"] = False
            rec["src_memory"] = "pinned"
        else:
            rec["src_memory"] = kind
        return res.batch

    def cpu_work(self) -> _CpuWork:
        """Context manager around CPU work meant to overlap the copy (host clock, NVTX)."""
        return _CpuWork(self._current("cpu_work"), self.nvtx)

    def compute(self) -> _Compute:
        """Context manager around GPU work (CUDA events on the current stream; host clock on CPU).

        Its entry also marks when the batch's data is needed, for ``wait_ms``.
        """
        return _Compute(self, self._current("compute"))

    def _current(self, what: str) -> dict[str, Any]:
        if self._cur is None:
            raise RuntimeError(f"{what}() must be called inside `for batch in prof.batches(loader):`, "
                               "after the batch arrives and before the next one is fetched")
        return self._cur

    def _resolve_mode(self, kind: str) -> Mode:
        if self.mode == "auto":
            self.mode = "pinned_nb" if kind == "pinned" else "pageable"
        return self.mode

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            warnings.warn(message, PinprofWarning, stacklevel=3)

    # -- reading the events ---------------------------------------------------------------------
    def _resolve_ready(self, block: bool = False) -> None:
        """Read events of finished batches (never waits unless ``block``) and recycle them."""
        anchor = self._anchor
        pending, store = self._pending, self._store
        while pending:
            row, events, pooled = pending[0]
            last = next((e for e in reversed(events) if e is not None), None)
            if last is not None and not block and not _query(last):
                return
            pending.popleft()
            if anchor is not None:
                first = anchor.event
                for field, ev in enumerate(events):
                    if ev is not None:
                        store.set_gpu(row, field, elapsed_ms(first, ev))
            if pooled:
                self._pool.put(*events)
            else:
                self._pool.put(*events[2:])

    def live_medians(self) -> dict[str, float]:
        """Median host-side fetch, copy-call and batch times (ms) over the last 50 batches: cheap
        enough for a progress bar; GPU times are only read in ``timeline()``."""
        last = self._store.tail(50)  # read from the stored rows: nothing extra kept per batch
        if not len(last["batch"]):
            return {}
        spans = {"fetch": last["fetch_e"] - last["fetch_s"], "copy": last["call_e"] - last["call_s"],
                 "batch": last["batch_e"] - last["batch_s"]}
        return {k: float(np.nanmedian(v)) if not np.all(np.isnan(v)) else NAN for k, v in spans.items()}

    def timeline(self) -> pd.DataFrame:
        """One row per completed batch so far; safe to call mid-run (e.g. for a partial report)."""
        clock: ClockMap | None = None
        if self.cuda and self._anchor is not None:
            last = take_anchor(current_stream(self._index), self._gate)
            self._resolve_ready(block=True)
            clock = ClockMap.between(self._anchor, last)
        static = {"run": self.run, "mode": self.mode, "device": str(self.device), **rank_info(), **self._config}
        if self.mode != "auto":
            static["non_blocking"] = SPECS[self.mode].non_blocking
            static.setdefault("pin_memory", SPECS[self.mode].pin_memory)
        static["scenario"] = self.scenario or str(self.mode)
        origin = self._origin if self._origin is not None else now_ms()
        return build_timeline(self._store.columns(), origin, clock, static)

    def close(self) -> None:
        """Free the staging buffers (pinned memory) once their copies are done."""
        if self._stager is not None:
            self._stager.close()
            self._stager = None

    # -- keeping what was measured ----------------------------------------------------------------
    def save(self, out: str | Path, partial: bool = False, **extra: Any) -> Path:
        """Write ``timeline.csv`` and ``meta.json`` into ``out`` (atomically); returns the folder."""
        from . import meta, report_io

        ranks = rank_info()
        folder = Path(out)
        if ranks["world_size"] > 1:  # one folder per rank: no two processes write the same file
            folder = folder / f"rank{ranks['rank']}"
        folder.mkdir(parents=True, exist_ok=True)
        report_io.write_csv(self.timeline(), folder / report_io.TIMELINE)
        info: dict[str, Any] = {**ranks, **extra}
        report_io.write_json(meta.collect(self.device, partial=partial, origin_monotonic_ms=self._origin, **info),
                             folder / report_io.META)
        return folder

    def __enter__(self) -> TransferProfiler:
        """``with TransferProfiler(out=...) as prof:`` writes the report however the block ends.

        An exception (a loader that raises, a DataLoader worker that dies), Ctrl-C or SIGTERM leave
        ``timeline.csv`` with every batch completed so far and ``"partial": true`` in ``meta.json``;
        the exception then propagates.
        """
        self._previous_sigterm = install_sigterm()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        # Signals held while the report is written: once a DataLoader worker has died, torch's SIGCHLD
        # handler raises again when the others exit, and a second Ctrl-C may come; either, raised
        # inside save(), would leave no report.
        restore_sigterm(getattr(self, "_previous_sigterm", None))
        try:
            if self.out is not None:
                why = None if exc_type is None else ("SIGTERM" if exc_type is Terminated else exc_type.__name__)
                out = self.out
                write_held(lambda: self.save(out, partial=exc_type is not None, interrupted_by=why,
                                             error=None if exc is None else str(exc)[:500]),
                           replay=exc_type is None, late=None if exc is None else note_on(exc))
        finally:
            self.close()
        if exc_type is None and self.out is not None:
            self._merge_ranks()  # a barrier across ranks: not with signals held

    def _merge_ranks(self) -> None:
        """Under torch.distributed, rank 0 merges every rank's folder once all have written theirs."""
        dist = torch.distributed
        if self.out is None or not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
            return
        dist.barrier()
        if dist.get_rank() == 0:
            from .merge import write_merged

            write_merged(Path(self.out))
