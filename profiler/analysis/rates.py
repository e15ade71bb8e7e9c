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
    pinned = tl[(tl.src_memory == "pinned") & tl.h2d_ms.notna() & (tl.h2d_ms > 0) & ~tl.warmup]
    near = pinned[(pinned.bytes >= nbytes / SIZE_MATCH_FACTOR) & (pinned.bytes <= nbytes * SIZE_MATCH_FACTOR)]
    if len(near):
        return float((near.bytes / near.h2d_ms / 1e6).median())
    if calibration is not None and len(calibration):
        return float(interpolated_rate(calibration, nbytes))
    return float("nan")
