"""One timeline for host and GPU: host clock, pooled CUDA events, and the anchors that align them.

GPU timestamps are only known relative to other CUDA events. An *anchor* is an event whose host time
is bracketed: with a stream gate (``profiler.gate``) the stream is held, the event and a write-back
of the gate's value are queued behind it, and the host reads its clock when it releases the gate
(t0) and when it sees the write-back (t1); the event fired in between, so its host time is the
midpoint, within half the round trip (about 2.7 us on the H200). Without a gate the clock is read
around the record call on an idle stream, which reads a few microseconds early (3 us median on the
H200, -5 to +11 us). Each anchor is the best of a few tries (shortest round trip). A second anchor
taken when the timeline is read corrects the rate difference between the two clocks (drift), so an
event's host time is ``a0_host + elapsed(a0, event) * scale``.

No synchronize happens per batch: events are created ahead of the loop, recorded around the work and
read once they have completed (``Event.query()``), as triton.testing.do_bench does.
"""
from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

import numpy as np
import numpy.typing as npt
import torch

# One elapsed time or a column of them.
Times = TypeVar("Times", float, npt.NDArray[np.float64])


def now_ms() -> float:
    """Host monotonic clock in milliseconds (``perf_counter_ns``; same clock on every thread)."""
    return time.perf_counter_ns() / 1e6


def _driver_elapsed_v1() -> Callable[[torch.cuda.Event, torch.cuda.Event], float] | None:
    """The driver's original ``cuEventElapsedTime`` entry point, or None where it cannot be loaded."""
    try:
        fn = ctypes.CDLL("libcuda.so.1").cuEventElapsedTime
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.POINTER(ctypes.c_float), ctypes.c_void_p, ctypes.c_void_p]
    fn.restype = ctypes.c_int

    def elapsed(first: torch.cuda.Event, second: torch.cuda.Event) -> float:
        out = ctypes.c_float()
        err = fn(ctypes.byref(out), first.cuda_event, second.cuda_event)
        if err:
            raise RuntimeError(f"cuEventElapsedTime failed with CUresult {err} (events not recorded or not done)")
        return out.value

    return elapsed


def _pick_elapsed() -> Callable[[torch.cuda.Event, torch.cuda.Event], float]:
    # Under a CUDA tool (Nsight Systems sets CUDA_INJECTION64_PATH), read events through the
    # driver's original entry point: on the H200 with CUDA 13, one call of cuEventElapsedTime_v2
    # (what torch's elapsed_time and cuda.bindings call) stopped Nsight Systems 2023.4 recording
    # every later CUDA record (8 of 24 copies kept); through cuEventElapsedTime all 24 were.
    # Otherwise torch's C method: 0.8 us against 1.9 us for the ctypes call (H200).
    if os.environ.get("CUDA_INJECTION64_PATH") and os.environ.get("PINPROF_ELAPSED") != "torch":
        v1 = _driver_elapsed_v1()
        if v1 is not None:
            return v1
    base = getattr(torch._C, "_CudaEventBase", None)
    return getattr(base, "elapsed_time", None) or torch.cuda.Event.elapsed_time


elapsed_ms: Callable[[torch.cuda.Event, torch.cuda.Event], float] = _pick_elapsed()
"""Milliseconds between two completed events (``Event.elapsed_time``, tool-safe; see above)."""


class EventPool:
    """Reuses timing events: creating one costs microseconds, reusing a completed one costs nothing."""

    def __init__(self, device: torch.device) -> None:
        self._device = device
        self._free: list[torch.cuda.Event] = []

    def get(self) -> torch.cuda.Event:
        if self._free:
            return self._free.pop()
        return torch.cuda.Event(enable_timing=True)

    def put(self, *events: torch.cuda.Event | None) -> None:
        self._free.extend(e for e in events if e is not None)


@dataclass
class Anchor:
    """A CUDA event whose host time is known (ms, same clock as ``now_ms``)."""

    event: torch.cuda.Event
    host_ms: float


_streams: dict[tuple[int, int, int], torch.cuda.Stream] = {}


def current_stream(device_index: int) -> torch.cuda.Stream:
    """``torch.cuda.current_stream(device)`` for the hot path: 0.3 us instead of 5-7 us on the H200,
    by keeping one Stream object per (id, device, type) triple instead of building one per call."""
    key = torch._C._cuda_getCurrentStream(device_index)
    stream = _streams.get(key)
    if stream is None:
        stream = _streams[key] = torch.cuda.Stream(stream_id=key[0], device_index=key[1], device_type=key[2])
    return stream


class _Gate(Protocol):
    def hold(self, stream: torch.cuda.Stream) -> bool: ...
    def release(self) -> None: ...
    def echo(self, stream: torch.cuda.Stream) -> bool: ...
    def echoed(self) -> bool: ...


def take_anchor(stream: torch.cuda.Stream, gate: _Gate | None = None, tries: int = 5) -> Anchor:
    """Synchronize, then time an event on ``stream`` against the host clock (see the module doc).

    This is one of the two places pinprof synchronizes on its own (start and end of a timeline read).
    """
    best: tuple[float, Anchor] | None = None
    for _ in range(tries):
        torch.cuda.synchronize(stream.device)
        event = torch.cuda.Event(enable_timing=True)
        if gate is not None and gate.hold(stream):
            event.record(stream)
            echoing = gate.echo(stream)
            t0 = now_ms()
            gate.release()
            deadline = t0 + 1000.0
            while echoing and not gate.echoed():
                if now_ms() > deadline:  # never hang the user's loop on a lost write-back
                    break
            t1 = now_ms()  # without a write-back (echo refused) this reads early by the wake-up, as ungated
        else:
            t0 = now_ms()
            event.record(stream)
            t1 = now_ms()
        event.synchronize()
        if best is None or t1 - t0 < best[0]:
            best = (t1 - t0, Anchor(event, (t0 + t1) / 2))
    assert best is not None
    return best[1]


@dataclass(frozen=True)
class ClockMap:
    """Maps an event's elapsed ms since the first anchor onto the host clock, drift corrected."""

    origin_host_ms: float
    scale: float = 1.0

    @staticmethod
    def between(first: Anchor, last: Anchor) -> ClockMap:
        gpu_span = elapsed_ms(first.event, last.event)
        host_span = last.host_ms - first.host_ms
        # Over very short runs the ratio is dominated by the anchors' own jitter; keep scale 1 there.
        scale = host_span / gpu_span if gpu_span > 50.0 else 1.0
        return ClockMap(first.host_ms, scale)

    def host_ms(self, elapsed_since_first_ms: Times) -> Times:
        """Host ms for one elapsed value or an array of them (NaN stays NaN)."""
        return self.origin_host_ms + elapsed_since_first_ms * self.scale
