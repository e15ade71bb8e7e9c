"""The timed copy of mode ``staged``: pinprof's own pageable-to-pinned pipeline (``profiler.capture.staging``)."""

from __future__ import annotations

from typing import Any

import torch

from profiler.capture.batch_tree import MemoryKind
from profiler.capture.cuda.events import current_stream
from profiler.capture.cuda.gate import StreamGate
from profiler.capture.nvtx import NvtxEmitter
from profiler.capture.phases import account
from profiler.capture.staging import PinnedStager


class StagedCopier:
    """Stages each batch through reused pinned buffers; the stage and DMA times go into its record."""

    def __init__(
        self,
        device: torch.device,
        index: int,
        copy_stream: torch.cuda.Stream | None,
        gate: StreamGate | None,
        nvtx: NvtxEmitter,
    ) -> None:
        self.device, self._index, self._copy_stream, self._gate, self._nvtx = device, index, copy_stream, gate, nvtx
        self._stager: PinnedStager | None = None  # made at the first batch: pinned memory is scarce

    def copy(self, batch: Any, rec: dict[str, Any], kind: MemoryKind) -> tuple[Any, MemoryKind]:
        """(``batch`` on the device, the memory kind its DMA reads); raises ``PinnedMemoryError``
        when no buffer can be pinned."""
        cuda = self.device.type == "cuda"
        if self._stager is None:
            self._stager = PinnedStager(self.device, stream=self._copy_stream, pin=cuda, gate=self._gate)
        self._nvtx.push("stage")
        try:
            consumer = rec["_stream"] = current_stream(self._index) if cuda else None
            res = self._stager.copy(batch, consumer=consumer)
        finally:
            self._nvtx.pop()
        account(rec, "stage_s", "stage_sum", "stage_e", res.stage_start_ms, res.stage_end_ms)
        if cuda and res.dma_start is not None:
            account(rec, "call_s", "call_sum", "call_e", res.stage_start_ms, res.stage_end_ms)
            rec.setdefault("_h2d", []).append((res.dma_start, res.dma_end, False))  # the stager's own events
            return res.batch, "pinned"
        return res.batch, kind

    def close(self) -> None:
        """Free the staging buffers (pinned memory) once their copies are done."""
        if self._stager is not None:
            self._stager.close()
            self._stager = None
