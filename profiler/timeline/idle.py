"""``gpu_idle_ms``: the part of a batch's copy that the GPU ran with none of the loop's work under it.

A step that ends in a synchronization (``loss.item()``) lets the host issue the next copy only once the
step's compute is done, so the copy runs on an otherwise idle GPU and the next compute waits for it.
Issued during the step instead (mode ``prefetch``), the copy runs under that step's compute and this is 0.
"""

from __future__ import annotations

import numpy as np


def gpu_idle(h2d_start: np.ndarray, h2d_end: np.ndarray, compute_end: np.ndarray) -> np.ndarray:
    """Per batch (ms): the copy's interval after the previous batch's compute end, clipped at 0.

    Arrays in batch order, times on one clock. The first batch, and any batch after one without
    compute, has no previous end to compare with: NaN.
    """
    prev_end = np.concatenate(([np.nan], np.asarray(compute_end, dtype=float)[:-1]))
    start = np.maximum(h2d_start, prev_end)  # NaN stays NaN: unknown, not idle
    return np.clip(np.asarray(h2d_end, dtype=float) - start, 0.0, None)
