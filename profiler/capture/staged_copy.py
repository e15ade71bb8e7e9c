"""The timed copy of mode ``staged``: pinprof's own pageable-to-pinned pipeline (``profiler.capture.staging``)."""

from __future__ import annotations

from typing import Any

import torch

from profiler.capture.cuda.events import current_stream
from profiler.capture.cuda.gate import StreamGate
from profiler.capture.nvtx import NvtxEmitter
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

    def copy(self, batch: Any, rec: dict[str, Any], kind: str) -> Any:
        """``batch`` on the device; raises ``PinnedMemoryError`` when no buffer can be pinned."""
        cuda = self.device.type == "cuda"
        if self._stager is None:
            self._stager = PinnedStager(self.device, stream=self._copy_stream, pin=cuda, gate=self._gate)
        self._nvtx.push("stage")
        try:
            consumer = rec["_stream"] = current_stream(self._index) if cuda else None
            res = self._stager.copy(batch, consumer=consumer)
        finally:
            self._nvtx.pop()
        rec["stage_s"], rec["stage_e"] = res.stage_start_ms, res.stage_end_ms
        if cuda and res.dma_start is not None:
            rec["call_s"], rec["call_e"] = res.stage_start_ms, res.stage_end_ms
            rec["_h2d"] = (res.dma_start, res.dma_end)
            rec["_pooled"] = False  # the stager's own events, not the pool's
            rec["src_memory"] = "pinned"
        else:
            rec["src_memory"] = kind
        return res.batch

    def close(self) -> None:
        """Free the staging buffers (pinned memory) once their copies are done."""
        if self._stager is not None:
            self._stager.close()
            self._stager = None
