"""The timed host-to-device copy of one batch (modes ``pageable``, ``pageable_nb``, ``pinned``, ``pinned_nb``).

Copies from pinned memory are issued behind a held stream (``profiler.capture.cuda.gate``), so the
start event fires right before the DMA. Pageable copies cannot be held (the driver stages them on
this thread and waits for its own DMAs); they are issued by a direct ``cudaMemcpyAsync``
(``profiler.capture.cuda.cudart``), which puts the runtime call closer to the start event than
torch's dispatch does. Gated blocking copies also run on the copy stream, after the compute stream's
queued work (the order a ``.to()`` on the compute stream has): events around a copy on the default
stream read more than CUPTI once kernels had run there. Figures: DESIGN.md, "Timing a copy".

Only copies that are provably one asynchronous memcpy from pinned memory are held: a copy torch
must stage on the host (a non-dense source, a conj/neg view, a dtype change) blocks the calling
thread until its DMA ran, which a held stream never runs (it hung before this rule). Non-dense
sources are first made contiguous here, on the host, timed as the ``layout`` phase (what ``copy_``
would do inside the call, where it would be counted as DMA); their DMA then reads pageable memory.

Where CUPTI's records time the copies, nothing has to sit between the call and the DMA: contiguous
sources are copied by the ``.to()`` the mode stands for, one dispatch a tensor (``DeviceCopier._plain``).
"""

from __future__ import annotations

from typing import Any

import torch

from profiler.capture import batch_tree
from profiler.capture.batch_tree import MemoryKind, combined_kind
from profiler.capture.clock import now_ms
from profiler.capture.clocks.gpu_clock import GpuClock
from profiler.capture.cuda import cudart
from profiler.capture.cuda.events import EventPool, current_stream, record, set_stream, wait
from profiler.capture.cuda.gate import StreamGate
from profiler.capture.nvtx import NvtxEmitter
from profiler.capture.phases import account
from profiler.modes import ModeSpec

# (destination, source, whether the direct cudaMemcpyAsync may copy it)
Call = tuple[torch.Tensor, torch.Tensor, bool]


def single_memcpy(dst: torch.Tensor, src: torch.Tensor) -> bool:
    """Whether ``dst.copy_(src)`` is one plain memcpy of ``src``'s bytes, with nothing staged on the
    host: same layout (``empty_like`` gives a dense source its own strides, and the same dtype), no
    lazy conj/neg bit, something to copy. The contiguous case, the common one, is decided first."""
    if src.numel() == 0 or src.is_conj() or src.is_neg():
        return False
    return src.is_contiguous() or (src.layout == torch.strided and src.stride() == dst.stride())


def needs_layout(dst: torch.Tensor, src: torch.Tensor) -> bool:
    """Whether torch would first make ``src`` contiguous on the host to copy it into ``dst``."""
    return (
        not src.is_contiguous()  # first: the common case returns here
        and src.layout == torch.strided
        and src.numel() > 0
        and src.stride() != dst.stride()
        and dst.is_contiguous()
    )


def _dma_kind(rec: dict[str, Any], spec: ModeSpec, src_kinds: list[MemoryKind]) -> MemoryKind:
    """The memory kind one ``to_device`` call's DMA reads; ``rec["copy_sync"]`` notes whether the
    call blocked the host (a blocking mode, or a source the driver stages)."""
    kind = combined_kind(src_kinds) if src_kinds else "device"
    rec["copy_sync"] = rec["copy_sync"] or (not spec.non_blocking) or kind != "pinned"
    return kind


class DeviceCopier:
    """Issues and times one ``to_device`` call's copies; the events go into the batch's record."""

    def __init__(
        self,
        device: torch.device,
        index: int,
        pool: EventPool,
        copy_stream: torch.cuda.Stream,
        gate: StreamGate | None,
        nvtx: NvtxEmitter,
    ) -> None:
        self.device, self._index, self._pool = device, index, pool
        self._copy_stream, self._gate, self._nvtx = copy_stream, gate, nvtx

    def copy(
        self,
        batch: Any,
        tensors: list[torch.Tensor],
        kinds: list[MemoryKind],
        spec: ModeSpec,
        rec: dict[str, Any],
        clock: GpuClock,
        defer: bool = False,
    ) -> tuple[Any, MemoryKind]:
        """(``batch`` with its CPU tensors on the device, the memory kind its DMA reads); ``rec``
        gets the call's host times, any layout copy and the copy's events. ``defer``: a side-stream
        copy's end event goes to ``rec["_ready"]`` for the caller to wait on, instead of the compute
        stream waiting on it now (the prefetch loop, ``profiler.capture.prefetch``). ``clock``: the
        batch's (``profiler.capture.clocks``): where it records each copy as the
        device ran it (CUPTI), no event and no gate go around the copy, and it is given the call's host
        interval and sources."""
        compute_stream = rec["_stream"] = current_stream(self._index)
        srcs = [t for t, k in zip(tensors, kinds) if k != "device"]
        src_kinds: list[MemoryKind] = [k for k in kinds if k != "device"]
        exact = clock.records_copies
        if exact and not defer:
            for t in srcs:  # a loop, not all(): no generator on the hot path
                if not t.is_contiguous():
                    break
            else:
                return self._plain(batch, srcs, src_kinds, spec, rec, compute_stream, clock)
        dsts = self._destinations(srcs, spec.side_stream, compute_stream)
        for d, t in zip(dsts, srcs):  # a loop, not any(): no generator on the hot path
            if needs_layout(d, t):
                srcs, src_kinds = self._relayout(dsts, srcs, src_kinds, rec)
                break
        gated = self._gate is not None and not exact
        if gated:  # the layout checks only matter to the gate: an exact clock's path skips them
            for d, t, k in zip(dsts, srcs, src_kinds):
                if not (k == "pinned" and single_memcpy(d, t)):
                    gated = False
                    break
        stream = self._copy_stream if spec.side_stream or gated else compute_stream
        switch = stream is not compute_stream
        start, end = clock.copy_events(self._pool, defer)
        self._nvtx.push("h2d")
        if switch:
            if not spec.side_stream:
                stream.wait_stream(compute_stream)
            set_stream(stream)  # cheaper than the torch.cuda.stream() context per batch
        try:
            # Everything but the copies happens before the event window and the gate's release, so
            # the copy starts as close as possible to the moment the loop gets its batch back.
            out, calls, rt = self._prepare(batch, srcs, dsts, src_kinds, compute_stream if switch else None)
            call_s = now_ms()
            held = gated and self._gate.hold(stream)  # type: ignore[union-attr]
            try:
                consumer = compute_stream if switch and not defer else None
                self._issue(calls, rt, stream, start, end, consumer)
            finally:
                if held:
                    self._gate.release()  # type: ignore[union-attr]
            if not spec.non_blocking:
                if end is not None:
                    end.synchronize()
                else:
                    stream.synchronize()  # what a blocking .to() waits for
            call_e = now_ms()
            account(rec, "call_s", "call_sum", "call_e", call_s, call_e)
        finally:
            if switch:
                set_stream(compute_stream)
            self._nvtx.pop()
        dma_kind = _dma_kind(rec, spec, src_kinds)
        clock.copy_logged(rec, srcs, call_s, call_e, start, end)
        if defer and switch:
            rec.setdefault("_ready", []).append(end)
        return out, dma_kind

    def _plain(
        self,
        batch: Any,
        srcs: list[torch.Tensor],
        src_kinds: list[MemoryKind],
        spec: ModeSpec,
        rec: dict[str, Any],
        compute_stream: torch.cuda.Stream,
        clock: GpuClock,
    ) -> tuple[Any, MemoryKind]:
        """``copy`` where the batch's clock records each copy as the device ran it (CUPTI's records) and
        every source is contiguous: each copy is the ``.to()`` the mode stands for (``non_blocking`` as it says; a side-stream mode's on the copy
        stream, which the compute stream then waits for). Nothing needs to sit between the call and the
        DMA here (no events, no gate, no layout copy), so torch allocates and copies in one call, as in
        the user's own loop: ``empty_like`` and ``copy_`` from Python cost a second dispatch a tensor."""
        dev, side = self.device, self._copy_stream if spec.side_stream else None
        self._nvtx.push("h2d")
        if side is not None:
            set_stream(side)  # the destinations come from the copy stream's pool, as in _destinations
        try:
            call_s = now_ms()
            dsts = [t.to(dev, non_blocking=spec.non_blocking) for t in srcs]
            if side is not None:
                compute_stream.wait_stream(side)  # GPU-side: compute starts after the copy, the host goes on
            call_e = now_ms()
        finally:
            if side is not None:
                set_stream(compute_stream)
            self._nvtx.pop()
        account(rec, "call_s", "call_sum", "call_e", call_s, call_e)
        out = self._placed(batch, dsts, compute_stream if side is not None else None)
        clock.copy_logged(rec, srcs, call_s, call_e, None, None)
        return out, _dma_kind(rec, spec, src_kinds)

    def _destinations(
        self, srcs: list[torch.Tensor], side_stream: bool, compute_stream: torch.cuda.Stream
    ) -> list[torch.Tensor]:
        """Empty device tensors for ``srcs``, from the pool of the stream that writes them; the consumer
        is noted by record_stream (the pattern torch documents for side streams), so a block the compute
        stream freed while its kernels still read it is never handed to a copy on another stream."""
        if not side_stream:
            return [torch.empty_like(t, device=self.device) for t in srcs]
        set_stream(self._copy_stream)
        try:
            return [torch.empty_like(t, device=self.device) for t in srcs]
        finally:
            set_stream(compute_stream)

    def _relayout(
        self, dsts: list[torch.Tensor], srcs: list[torch.Tensor], kinds: list[MemoryKind], rec: dict[str, Any]
    ) -> tuple[list[torch.Tensor], list[MemoryKind]]:
        """Non-dense sources made contiguous on the host (pageable memory), timed as ``layout``."""
        self._nvtx.push("layout")
        start = now_ms()
        try:
            out: list[torch.Tensor] = []
            out_kinds: list[MemoryKind] = []
            for d, t, k in zip(dsts, srcs, kinds):
                if needs_layout(d, t):
                    out.append(t.contiguous())
                    out_kinds.append("pageable")
                else:
                    out.append(t)
                    out_kinds.append(k)
        finally:
            end = now_ms()
            self._nvtx.pop()
        account(rec, "layout_s", "layout_sum", "layout_e", start, end)
        return out, out_kinds

    def _prepare(
        self,
        batch: Any,
        srcs: list[torch.Tensor],
        dsts: list[torch.Tensor],
        kinds: list[MemoryKind],
        consumer: torch.cuda.Stream | None,
    ) -> tuple[Any, list[Call], cudart.Runtime | None]:
        """The output structure, the allocator's note that the consumer stream will use the
        destinations, the choice of copy call (direct ``cudaMemcpyAsync`` for pageable sources)."""
        rt = cudart.runtime() if "pageable" in kinds else None
        calls = [
            (d, t, rt is not None and k == "pageable" and cudart.direct_copy_ok(d, t))
            for d, t, k in zip(dsts, srcs, kinds)
        ]
        return self._placed(batch, dsts, consumer), calls, rt

    def _placed(self, batch: Any, dsts: list[torch.Tensor], consumer: torch.cuda.Stream | None) -> Any:
        """``batch`` with its CPU tensors replaced by ``dsts`` in order (a tensor already elsewhere
        moved by ``.to()``), and the allocator's note that ``consumer``, if any, uses the destinations
        (a side stream's copies: see ``_destinations``)."""
        dev = self.device
        moved = iter(dsts)
        out = batch_tree.map_tensors(batch, lambda t: next(moved) if t.is_cpu else t.to(dev))
        if consumer is not None:
            for d in dsts:
                d.record_stream(consumer)
        return out

    @staticmethod
    def _issue(
        calls: list[Call],
        rt: cudart.Runtime | None,
        stream: torch.cuda.Stream,
        start: torch.cuda.Event | None,
        end: torch.cuda.Event | None,
        consumer: torch.cuda.Stream | None,
    ) -> None:
        """The event window (none when CUPTI times the copy). Always issued non_blocking; a blocking
        mode then waits on the end event, where a blocking ``.to()`` lets the host go too, but with
        the end event queued right behind the copy rather than recorded once the host is back."""
        if start is not None:
            record(start, stream)
        for d, t, direct in calls:
            if not (direct and cudart.copy_pageable(rt, d, t, stream)):  # type: ignore[arg-type]
                d.copy_(t, non_blocking=True)
        if end is not None:
            record(end, stream)
        if consumer is not None:
            # GPU-side: compute starts after the copy, the host goes on
            if end is not None:
                wait(end, consumer)
            else:
                consumer.wait_stream(stream)
