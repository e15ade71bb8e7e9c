"""CUPTI's timestamps onto the host's ``perf_counter_ns`` (``CuptiClock``), read in pairs, from C where
the shim can (``_c_reads``: no wait for the GIL falls between the two readings there)."""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable

import numpy as np

from profiler.capture.clocks.cupti.lib import Lib
from profiler.capture.clocks.cupti.shim import Shim


def _c_reads(lib: Lib, shim: Shim) -> Callable[[], tuple[int, int, int]] | None:
    """The shim's back-to-back clock readings around ``cuptiGetTimestamp``; None where the shim or the
    library lacks them (the readings from Python are used then)."""
    try:
        address = ctypes.cast(lib.handle.cuptiGetTimestamp, ctypes.c_void_p).value
        return shim.clock_reads(address) if address else None
    except (AttributeError, TypeError):
        return None


class CuptiClock:
    """CUPTI's timestamps onto ``perf_counter_ns``: ``host = p + (cupti - c) / rate`` from the latest
    paired read (p, c), the rate from the first and the latest.

    CUPTI's own clock runs at one tick a ns (the rate is then exactly 1), but a client may register its
    own: torch.profiler's Kineto registers the CPU's cycle counter (about 2.1 ticks a ns on the H200)
    and leaves it registered after it ends, so the copies read 2.1 times too long and 11 s off until
    the rate was measured. The first pair is taken whenever recording (re)starts."""

    MIN_SPAN_NS = 20_000_000  # the rate from pairs at least this far apart (a pair is good to ~0.3 us)
    # Readings from C whose host clock is more than this from perf_counter_ns are not the same clock.
    SAME_CLOCK_NS = 1_000_000

    def __init__(self, now: Callable[[], int], reads: Callable[[], tuple[int, int, int]] | None = None) -> None:
        """``now``: CUPTI's clock; ``reads``: (host ns, CUPTI's clock, host ns) read back to back in C
        (``Shim.clock_reads``), used where it reads ``perf_counter_ns``'s clock."""
        self._now = now
        self._reads = reads if reads is not None and self._same_clock(reads) else None
        self.reset()

    def _same_clock(self, reads: Callable[[], tuple[int, int, int]]) -> bool:
        try:
            a = time.perf_counter_ns()
            before, _, after = reads()
            b = time.perf_counter_ns()
        except OSError:
            return False
        return a - self.SAME_CLOCK_NS <= before <= after <= b + self.SAME_CLOCK_NS

    def _read(self) -> tuple[int, int, int]:
        """(host ns before, CUPTI's clock, host ns after). From Python a wait for the GIL can fall
        between the readings (``shim.c``, ``pinprof_clock_reads``): in C none can."""
        if self._reads is not None:
            return self._reads()
        a = time.perf_counter_ns()
        c = self._now()
        return a, c, time.perf_counter_ns()

    def _pair(self) -> tuple[int, int]:
        best: tuple[int, int, int] | None = None
        for _ in range(5):
            a, c, b = self._read()
            if best is None or b - a < best[0]:
                best = (b - a, (a + b) // 2, c)
        return best[1], best[2]  # type: ignore[index]

    def reset(self) -> None:
        self.first = self.last = self._pair()
        self.rate = 1.0
        self.measured = False

    def update(self, wait: bool = False) -> None:
        """A new pair; ``wait``: sleep, if need be, until the rate can be measured (the end of a run)."""
        if wait and not self.measured:
            short = self.MIN_SPAN_NS - (time.perf_counter_ns() - self.first[0])
            if short > 0:
                time.sleep(short / 1e9)
        self.last = self._pair()
        span = self.last[0] - self.first[0]
        if span >= self.MIN_SPAN_NS:
            rate = (self.last[1] - self.first[1]) / span
            self.rate = 1.0 if abs(rate - 1.0) < 1e-4 else rate
            self.measured = True

    def to_host(self, cupti: np.ndarray) -> np.ndarray:
        p, c = self.last
        return p + np.round((cupti - c) / self.rate).astype(np.int64)
