"""The host clock every phase is timed with."""

from __future__ import annotations

import time


def now_ms() -> float:
    """Host monotonic clock in milliseconds (``perf_counter_ns``; same clock on every thread and, on
    one host, every process: ``profiler.report.merge`` aligns ranks by it)."""
    return time.perf_counter_ns() / 1e6
