"""``gpu_idle_ms``: the part of a batch's copy that the GPU ran with none of the loop's work under it.

A step that ends in a synchronization (``loss.item()``) lets the host issue the next copy only once the
step's compute is done, so the copy runs on an otherwise idle GPU and the next compute waits for it.
Issued during the step instead (mode ``prefetch``), the copy runs under that step's compute and this is 0.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def gpu_idle(h2d_start: np.ndarray, h2d_end: np.ndarray, compute_end: np.ndarray) -> np.ndarray:
    """Per batch (ms): the copy's interval after the previous batch's compute end, clipped at 0.

    Arrays in batch order, times on one clock. The first batch, and any batch after one without
    compute, has no previous end to compare with: NaN.
    """
    prev_end = np.concatenate(([np.nan], np.asarray(compute_end, dtype=float)[:-1]))
    start = np.maximum(h2d_start, prev_end)  # NaN stays NaN: unknown, not idle
    return np.clip(np.asarray(h2d_end, dtype=float) - start, 0.0, None)


def with_gpu_idle(tl: pd.DataFrame) -> pd.DataFrame:
    """``tl`` with ``gpu_idle_ms`` computed per (run, scenario, rank) in batch order (for timelines
    assembled from elsewhere, such as an nsys import)."""
    out = tl.copy()
    out["gpu_idle_ms"] = np.nan
    keys = [k for k in ("run", "scenario", "rank") if k in out]
    for _, g in out.groupby(keys, sort=False, dropna=False):
        g = g.sort_values("batch")
        idle = gpu_idle(g.h2d_start_ms.to_numpy(float), g.h2d_end_ms.to_numpy(float), g.compute_end_ms.to_numpy(float))
        out.loc[g.index, "gpu_idle_ms"] = idle
    return out
