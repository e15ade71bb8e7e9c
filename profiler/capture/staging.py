"""Explicit pageable-to-pinned staging: a chunked, double-buffered pipeline that beats the driver.

For a pageable source the CUDA driver copies the bytes into its own small pinned buffers and DMAs
them, slowly (4.1 GB/s for 1 GiB on the H200, ``pinprof bandwidth``, reports/h200-bandwidth/). Here the main thread copies one chunk into
one of ``num_buffers`` reused pinned buffers while the copy engine DMAs the previous chunk from the
other, so the memcpy and the DMA overlap.

Correctness rules, each a known hazard:
- a buffer is rewritten only after the event recorded behind its last DMA has completed
  (``Event.synchronize``: the one wait this pipeline needs, on our own buffers only);
- destination tensors are allocated on the copy stream and ``record_stream``-ed on the consumer's
  stream, so the caching allocator never hands their memory out while the consumer still reads it;
- the consumer stream waits on the final copy event (a GPU-side wait; the host is not blocked).

Any size, dtype and layout works: contiguous tensors are cut into flat chunks, non-contiguous ones
along dim 0 (``copy_`` gathers the strided rows into the buffer). The output is contiguous.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from profiler.capture.batch_tree import iter_tensors, map_tensors, tensor_bytes
from profiler.capture.clock import now_ms
from profiler.errors import PinnedMemoryError, UsageError

DEFAULT_CHUNK_BYTES = (
    8 << 20
)  # past the DMA plateau (pinned H2D: 50 GB/s from 4 MiB, 43 at 1 MiB; reports/h200-bandwidth/)


@dataclass
class StageResult:
    """What one staged copy did; host times in ms (``now_ms`` clock)."""

    batch: Any
    stage_start_ms: float
    stage_end_ms: float
    dma_start: torch.cuda.Event | None
    dma_end: torch.cuda.Event | None


class PinnedStager:
    """Reusable staging buffers and the pipeline that drives them.

    ``pin=False`` stages into pageable buffers: used on CPU-only machines, where the memcpy is still
    measured but nothing is transferred.
    """

    def __init__(
        self,
        device: torch.device,
        chunk_bytes: int = DEFAULT_CHUNK_BYTES,
        num_buffers: int = 2,
        stream: torch.cuda.Stream | None = None,
        pin: bool = True,
        gate: Any = None,
    ) -> None:
        if chunk_bytes <= 0:
            raise UsageError(f"chunk_bytes={chunk_bytes} must be positive, e.g. {DEFAULT_CHUNK_BYTES}")
        if num_buffers < 1:
            raise UsageError(f"num_buffers={num_buffers} must be at least 1 (2 overlaps memcpy and DMA)")
        self.device = device
        self.chunk_bytes = chunk_bytes
        self.pin = pin
        self._cuda = device.type == "cuda"
        self.stream = stream if stream is not None or not self._cuda else torch.cuda.Stream(device)
        self._buffers: list[torch.Tensor | None] = [None] * num_buffers
        self._free: list[torch.cuda.Event | None] = [None] * num_buffers
        self._next = 0
        self._gate = gate  # profiler.gate.StreamGate: held only around the first DMA's submission

    @property
    def pinned_bytes(self) -> int:
        """Bytes of page-locked memory this stager holds now."""
        return sum(b.numel() for b in self._buffers if b is not None) if self.pin else 0

    def close(self) -> None:
        """Wait for in-flight copies, then give the buffers back."""
        for event in self._free:
            if event is not None:
                event.synchronize()
        self._buffers = [None] * len(self._buffers)
        self._free = [None] * len(self._free)

    def __enter__(self) -> PinnedStager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _buffer(self, nbytes: int) -> tuple[int, torch.Tensor]:
        k = self._next
        self._next = (k + 1) % len(self._buffers)
        if self._free[k] is not None:
            self._free[k].synchronize()  # type: ignore[union-attr]
        buf = self._buffers[k]
        if buf is None or buf.numel() < nbytes:
            self._buffers[k] = None  # drop the old one before asking for a bigger one
            buf = self._allocate(max(nbytes, self.chunk_bytes))
            self._buffers[k] = buf
        return k, buf

    def _allocate(self, nbytes: int) -> torch.Tensor:
        try:
            return torch.empty(nbytes, dtype=torch.uint8, pin_memory=self.pin)
        except RuntimeError as err:
            raise PinnedMemoryError(
                f"could not allocate {nbytes} bytes of pinned host memory ({err}). Lower chunk_bytes "
                "or check `ulimit -l`; pinprof's pageable modes need no pinned memory."
            ) from err

    def copy(self, batch: Any, consumer: torch.cuda.Stream | None = None) -> StageResult:
        """Stage every tensor of ``batch`` and issue its DMA; returns device tensors (or the batch)."""
        start = now_ms()
        first: list[torch.cuda.Event | None] = [None]
        last: list[torch.cuda.Event | None] = [None]

        def one(t: torch.Tensor) -> torch.Tensor:
            if t.device.type != "cpu":
                return t.to(self.device) if t.device != self.device else t
            return self._copy_tensor(t, first, last)

        out = map_tensors(batch, one)
        if self._cuda and last[0] is not None:
            consumer = consumer or torch.cuda.current_stream(self.device)
            consumer.wait_event(last[0])
            for t in iter_tensors(out):
                if t.device.type == "cuda":
                    t.record_stream(consumer)
        if not self._cuda:
            out = batch  # nothing to transfer: the memcpy was the measurement
        return StageResult(out, start, now_ms(), first[0], last[0])

    def _copy_tensor(
        self, src: torch.Tensor, first: list[torch.cuda.Event | None], last: list[torch.cuda.Event | None]
    ) -> torch.Tensor:
        if src.is_contiguous():
            rows_src = src.reshape(-1)
        else:
            rows_src = src if src.dim() > 0 else src.reshape(-1)
        row_bytes = max(1, tensor_bytes(rows_src[:1]) if rows_src.shape[0] else 1)
        rows_per_chunk = max(1, self.chunk_bytes // row_bytes)
        if self._cuda:
            with torch.cuda.stream(self.stream):
                dst = torch.empty(src.shape, dtype=src.dtype, device=self.device)
        else:
            dst = torch.empty(0)
        dst_rows = dst.reshape(rows_src.shape) if self._cuda else None
        n = rows_src.shape[0]
        for lo in range(0, n, rows_per_chunk):
            part = rows_src[lo : lo + rows_per_chunk]
            nbytes = tensor_bytes(part)
            k, buf = self._buffer(nbytes)
            staged = buf[:nbytes].view(src.dtype).view(part.shape)
            staged.copy_(part)
            if not self._cuda:
                continue
            with torch.cuda.stream(self.stream):
                opening = first[0] is None
                # Hold the stream only until the first DMA is queued: later chunks wait on our own
                # buffers, which a held stream would never free.
                held = opening and self._gate is not None and self._gate.hold(self.stream)
                try:
                    if opening:
                        opened = torch.cuda.Event(enable_timing=True)
                        opened.record(self.stream)
                        first[0] = opened
                    dst_rows[lo : lo + part.shape[0]].copy_(staged, non_blocking=True)  # type: ignore[index]
                    done = torch.cuda.Event(enable_timing=True)
                    done.record(self.stream)
                finally:
                    if held:
                        self._gate.release()
            self._free[k] = done
            last[0] = done
        return dst


def to_device_staged(batch: Any, device: str | torch.device = "cuda", stager: PinnedStager | None = None) -> Any:
    """Copy a pageable ``batch`` to ``device`` through the chunked pinned pipeline.

    Pass a long-lived ``stager`` in a loop so its pinned buffers are reused; without one, a temporary
    stager is made and its buffers are freed before returning (after the copy is complete).
    The returned tensors are safe to use on the current stream at once.
    """
    dev = torch.device(device)
    if stager is not None:
        return stager.copy(batch).batch
    with PinnedStager(dev) as temp:
        return temp.copy(batch).batch
