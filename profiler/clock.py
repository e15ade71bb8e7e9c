"""One timeline for host and GPU: host clock, pooled CUDA events, and the anchors that align them.

GPU timestamps are only known relative to other CUDA events. We record an *anchor* event on an idle
stream right after a synchronize and take the host clock around that record call; the event fires
within microseconds, so the host time of the call is the anchor's host time. A second anchor taken
when the timeline is read corrects the small rate difference between the two clocks (drift), so an
event's host time is ``a0_host + elapsed(a0, event) * scale``.

No synchronize happens per batch: events are created ahead of the loop, recorded around the work and
read once they have completed (``Event.query()``), as triton.testing.do_bench does.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import torch


def now_ms() -> float:
    """Host monotonic clock in milliseconds (``perf_counter_ns``; same clock on every thread)."""
    return time.perf_counter_ns() / 1e6


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


def take_anchor(stream: torch.cuda.Stream) -> Anchor:
    """Synchronize, then record an event on ``stream`` and read the host clock around the record.

    This is one of the two places pinprof synchronizes on its own (start and end of a timeline read).
    """
    torch.cuda.synchronize(stream.device)
    event = torch.cuda.Event(enable_timing=True)
    before = now_ms()
    event.record(stream)
    after = now_ms()
    event.synchronize()
    return Anchor(event, (before + after) / 2)


@dataclass(frozen=True)
class ClockMap:
    """Maps an event's elapsed ms since the first anchor onto the host clock, drift corrected."""

    origin_host_ms: float
    scale: float = 1.0

    @staticmethod
    def between(first: Anchor, last: Anchor) -> ClockMap:
        gpu_span = first.event.elapsed_time(last.event)
        host_span = last.host_ms - first.host_ms
        # Over very short runs the ratio is dominated by the anchors' own jitter; keep scale 1 there.
        scale = host_span / gpu_span if gpu_span > 50.0 else 1.0
        return ClockMap(first.host_ms, scale)

    def host_ms(self, elapsed_since_first_ms: float) -> float:
        return self.origin_host_ms + elapsed_since_first_ms * self.scale
