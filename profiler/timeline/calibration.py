"""The pinned H2D rate at any size, from a bandwidth calibration (columns bytes, pinned_GBps).

The rate climbs steeply with size below about 4 MiB (9.1 GB/s at 64 KiB, 42.7 at 768 KiB, 51.5 at
12.5 MiB on the H200: ``pinprof bandwidth``, reports/h200-bandwidth/), so it is interpolated in log-size.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pandas as pd


def pinned_rate_GBps(calibration: pd.DataFrame, nbytes: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Interpolated pinned rate (GB/s, 1e9 B/s) for each size in ``nbytes``."""
    cal = calibration.sort_values("bytes")
    sizes = np.log(np.asarray(nbytes, dtype=float))
    return np.interp(sizes, np.log(cal.bytes.to_numpy(float)), cal.pinned_GBps.to_numpy(float))
