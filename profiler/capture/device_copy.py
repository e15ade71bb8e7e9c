"""The timed host-to-device copy of one batch (modes ``pageable``, ``pageable_nb``, ``pinned``, ``pinned_nb``).

Copies from pinned memory are issued behind a held stream (``profiler.capture.cuda.gate``), so the
start event fires right before the DMA. Pageable copies cannot be held (the driver stages them on
this thread and waits for its own DMAs); they are issued by a direct ``cudaMemcpyAsync``
(``profiler.capture.cuda.cudart``), which puts the runtime call closer to the start event than
torch's dispatch does. Gated blocking copies also run on the copy stream, after the compute stream's
queued work (the order a ``.to()`` on the compute stream has): events around a copy on the default
stream read more than CUPTI once kernels had run there. Figures: DESIGN.md, "Timing a copy".
"""

from __future__ import annotations

from typing import Any

import torch

from profiler.capture import batch_tree
from profiler.capture.clock import now_ms
from profiler.capture.cuda import cudart
from profiler.capture.cuda.events import EventPool, current_stream, record, set_stream, wait
from profiler.capture.cuda.gate import StreamGate
from profiler.capture.nvtx import NvtxEmitter
from profiler.modes import ModeSpec

# (destination, source, whether the direct cudaMemcpyAsync may copy it)
Call = tuple[torch.Tensor, torch.Tensor, bool]


class DeviceCopier:
    """Issues and times one batch's copies; the events go into the batch's record as ``_h2d``."""

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

    def copy(self, batch: Any, tensors: list[torch.Tensor], kind: str, spec: ModeSpec, rec: dict[str, Any]) -> Any:
        """``batch`` with its CPU tensors on the device; ``rec`` gets the call's host times and events."""
        compute_stream = rec["_stream"] = current_stream(self._index)
        gated = kind == "pinned" and self._gate is not None
        stream = self._copy_stream if spec.side_stream or gated else compute_stream
        switch = stream is not compute_stream
        start, end = self._pool.get(), self._pool.get()
        self._nvtx.push("h2d")
        if switch:
            if not spec.side_stream:
                stream.wait_stream(compute_stream)
            set_stream(stream)  # cheaper than the torch.cuda.stream() context per batch
        try:
            # Everything but the copies happens before the event window and the gate's release, so
            # the copy starts as close as possible to the moment the loop gets its batch back.
            out, calls, rt = self._prepare(batch, tensors, kind, compute_stream if switch else None)
            rec["call_s"] = now_ms()
            held = gated and self._gate.hold(stream)  # type: ignore[union-attr]
            try:
                self._issue(calls, rt, stream, start, end, compute_stream if switch else None)
            finally:
                if held:
                    self._gate.release()  # type: ignore[union-attr]
            if not spec.non_blocking:
                end.synchronize()
            rec["call_e"] = now_ms()
        finally:
            if switch:
                set_stream(compute_stream)
            self._nvtx.pop()
        rec["copy_sync"] = (not spec.non_blocking) or kind != "pinned"
        rec["_h2d"] = (start, end)
        return out

    def _prepare(
        self, batch: Any, tensors: list[torch.Tensor], kind: str, consumer: torch.cuda.Stream | None
    ) -> tuple[Any, list[Call], cudart.Runtime | None]:
        """Destinations (``empty_like`` keeps ``.to()``'s layout rule), the output structure, the
        allocator's note that the consumer stream will use them, the choice of copy call."""
        dev = self.device
        srcs = [t for t in tensors if t.is_cpu]
        dsts = [torch.empty_like(t, device=dev) for t in srcs]
        rt = cudart.runtime() if kind == "pageable" else None
        calls = [(d, t, rt is not None and cudart.direct_copy_ok(d, t)) for d, t in zip(dsts, srcs)]
        moved = iter(dsts)
        out = batch_tree.map_tensors(batch, lambda t: next(moved) if t.is_cpu else t.to(dev))
        if consumer is not None:
            for d in dsts:
                d.record_stream(consumer)
        return out, calls, rt

    @staticmethod
    def _issue(
        calls: list[Call],
        rt: cudart.Runtime | None,
        stream: torch.cuda.Stream,
        start: torch.cuda.Event,
        end: torch.cuda.Event,
        consumer: torch.cuda.Stream | None,
    ) -> None:
        """The event window. Always issued non_blocking; a blocking mode then waits on the end event,
        where a blocking ``.to()`` lets the host go too, but with the end event queued right behind
        the copy rather than recorded once the host is back."""
        record(start, stream)
        for d, t, direct in calls:
            if not (direct and cudart.copy_pageable(rt, d, t, stream)):  # type: ignore[arg-type]
                d.copy_(t, non_blocking=True)
        record(end, stream)
        if consumer is not None:
            wait(end, consumer)  # GPU-side: compute starts after the copy, the host goes on
