"""The pinned H2D rate a scenario's copies would reach: measured in the run, else calibrated."""

from __future__ import annotations

import pandas as pd

from profiler.timeline.calibration import pinned_rate_GBps as interpolated_rate

# Pinned copies within this factor of a batch's size stand in for its pinned bandwidth: the rate
# climbs steeply below about 4 MiB (``profiler.timeline.calibration`` gives the H200's figures).
SIZE_MATCH_FACTOR = 2.0


def pinned_rate_GBps(tl: pd.DataFrame, nbytes: float, calibration: pd.DataFrame | None = None) -> float:
    """Pinned H2D bandwidth for copies of ``nbytes``: measured in this run if it has pinned copies of a
    similar size, else interpolated in a calibration (columns bytes, pinned_GBps), else NaN."""
    # Three columns only, not the whole frame: on a 1,000,000-row timeline a row filter of all ~60
    # columns per scenario took 6 s of diagnose's 9.
    h2d = tl.h2d_ms.to_numpy(float, na_value=float("nan"))
    size = tl.bytes.to_numpy(float)
    keep = (tl.src_memory.to_numpy() == "pinned") & (h2d > 0) & ~tl.warmup.to_numpy(bool)
    keep &= (size >= nbytes / SIZE_MATCH_FACTOR) & (size <= nbytes * SIZE_MATCH_FACTOR)
    if keep.any():
        return float(pd.Series(size[keep] / h2d[keep] / 1e6).median())
    if calibration is not None and len(calibration):
        return float(interpolated_rate(calibration, nbytes))
    return float("nan")
