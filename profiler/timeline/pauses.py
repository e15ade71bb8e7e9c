"""The time of a process's pauses (its full garbage collections: ``profiler.capture.gc_pauses``) that
falls inside each of a timeline's intervals."""

from __future__ import annotations

import numpy as np


def within(start: np.ndarray, end: np.ndarray, pauses: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Milliseconds of ``pauses`` inside each interval [``start``, ``end``] (same clock); NaN where
    the interval is. Collections never overlap (each holds the GIL), so the pauses are disjoint and
    ordered, and the time inside an interval is a difference of their running sum."""
    starts, ends = pauses
    start, end = np.asarray(start, dtype=float), np.asarray(end, dtype=float)
    bad = np.isnan(start) | np.isnan(end)
    if len(starts) == 0:
        return np.where(bad, np.nan, 0.0)
    # before(t): pause time before t = the whole pauses ending by t, plus the part of one running at t
    done = np.concatenate(([0.0], np.cumsum(ends - starts)))

    def before(t: np.ndarray) -> np.ndarray:
        safe = np.where(np.isnan(t), 0.0, t)
        k = np.searchsorted(ends, safe, side="right")  # pauses wholly before t
        running = np.where(k < len(starts), np.clip(safe - starts[np.minimum(k, len(starts) - 1)], 0.0, None), 0.0)
        return done[k] + running

    return np.where(bad, np.nan, np.clip(before(end) - before(start), 0.0, None))
