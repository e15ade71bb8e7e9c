"""Correlation ids against launch times: whether a step's kernels could be bounded by correlation id
(markers at its window's edges) instead of by CUPTI's launch times (``scripts/corr_windows.py``).

CUPTI numbers every CUDA API call, on any thread, as it begins (its correlation id); a kernel record
carries its launch's id and, with latency timestamps on, its launch time (``queued``). Both arrays here
are of kernels sorted by correlation id; times in host ns.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def out_of_order(queued: np.ndarray, corr: np.ndarray) -> np.ndarray:
    """For each kernel (sorted by ``corr``), how many ns it was launched before the latest launch
    among the kernels numbered before it: 0 where the two orders agree."""
    if not len(queued):
        return np.zeros(0, dtype=np.int64)
    latest = np.concatenate(([queued[0]], np.maximum.accumulate(queued)[:-1]))
    return np.clip(latest - queued, 0, None)


def markers(queued: np.ndarray, corr: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The correlation id a marker call made at each host time of ``at`` would bound: just above every
    kernel launched by then (as far as the kernels show the calls), as a float between two ids."""
    by_time = np.argsort(queued, kind="stable")
    q, top = queued[by_time], np.maximum.accumulate(corr[by_time]).astype(float)
    i = np.searchsorted(q, at, side="right")
    return np.where(i > 0, top[np.clip(i - 1, 0, None)], -1.0) + 0.5


def counts(queued: np.ndarray, corr: np.ndarray, windows: Sequence[tuple[float, float]]) -> tuple[int, int]:
    """A row's kernels counted by launch time inside its ``windows`` (host ns, edges included), and by
    correlation id between its windows' edge markers."""
    by_launch = by_corr = 0
    for a, e in windows:
        by_launch += int(((queued >= a) & (queued <= e)).sum())
        lo, hi = markers(queued, corr, np.array([a, e], dtype=float))
        by_corr += int(((corr > lo) & (corr < hi)).sum())
    return by_launch, by_corr
