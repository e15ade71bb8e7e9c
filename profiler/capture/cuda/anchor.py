"""Anchors: CUDA events whose host time is known, so GPU intervals land on the host timeline.

GPU timestamps are only known relative to other CUDA events. With a stream gate
(``profiler.capture.cuda.gate``) the stream is held, the event and a write-back of the gate's value
are queued behind it, and the host reads its clock when it releases the gate (t0) and when it sees
the write-back (t1); the event fired in between, so its host time is the midpoint, within half the
round trip. Without a gate the clock is read around the record call on an idle stream, which reads a
few microseconds early. Each anchor is the best of a few tries (shortest round trip). A second anchor
taken when the timeline is read corrects the rate difference between the clocks (drift). Figures:
DESIGN.md, "Clock anchors".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from profiler.capture.clock import now_ms
from profiler.capture.cuda.events import elapsed_ms
from profiler.timeline.clockmap import ClockMap


@dataclass
class Anchor:
    """A CUDA event whose host time is known (ms, same clock as ``now_ms``)."""

    event: torch.cuda.Event
    host_ms: float


class _Gate(Protocol):
    def hold(self, stream: torch.cuda.Stream) -> bool: ...
    def release(self) -> None: ...
    def echo(self, stream: torch.cuda.Stream) -> bool: ...
    def echoed(self) -> bool: ...


def _one_anchor(stream: torch.cuda.Stream, gate: _Gate | None) -> tuple[float, Anchor]:
    """(round trip ms, anchor) of one try."""
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
    return t1 - t0, Anchor(event, (t0 + t1) / 2)


def take_anchor(stream: torch.cuda.Stream, gate: _Gate | None = None, tries: int = 5) -> Anchor:
    """Synchronize, then time an event on ``stream`` against the host clock (best of ``tries``).

    This is one of the two places pinprof synchronizes on its own (start and end of a timeline read).
    """
    return min((_one_anchor(stream, gate) for _ in range(tries)), key=lambda t: t[0])[1]


def clock_between(first: Anchor, last: Anchor) -> ClockMap:
    """The clock map of a run anchored at ``first`` and ``last``."""
    gpu_span = elapsed_ms(first.event, last.event)
    host_span = last.host_ms - first.host_ms
    # Over very short runs the ratio is dominated by the anchors' own jitter; keep scale 1 there.
    scale = host_span / gpu_span if gpu_span > 50.0 else 1.0
    return ClockMap(first.host_ms, scale)
