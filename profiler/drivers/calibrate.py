"""The bandwidth calibration a CUDA run ends with: pinned and pageable rates at the run's batch sizes,
which split each pageable copy into the driver's hidden staging and the DMA (``profiler.timeline.split``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from profiler.report import files as report_io


def calibrate_and_split(
    tl: pd.DataFrame, device: torch.device, out: Path, info: dict[str, Any], echo: Callable[[str], None]
) -> pd.DataFrame:
    """Measure (or reuse) pinned/pageable bandwidth at the run's batch sizes, split pageable copies."""
    from profiler.drivers import bandwidth
    from profiler.timeline import split

    sizes = sorted({int(b) for b in tl.groupby("scenario").bytes.median() if b > 0})
    echo(f"pinprof: calibrating pinned bandwidth at {len(sizes)} size(s) (cached; --no-calibrate skips)")
    cal = bandwidth.calibration(sizes, device)
    report_io.write_csv(cal, out / report_io.CALIBRATION)
    info["calibration"] = cal.to_dict(orient="list")
    return split.apply(tl, cal)
