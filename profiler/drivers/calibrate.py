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
    from profiler.timeline import split

    cal = _calibration(tl, device, info, echo, "(cached; --no-calibrate skips)")
    report_io.write_csv(cal, out / report_io.CALIBRATION)
    return split.apply(tl, cal)


def _calibration(
    tl: pd.DataFrame, device: torch.device, info: dict[str, Any], echo: Callable[[str], None], why: str
) -> pd.DataFrame:
    """The bandwidth calibration at each scenario's median batch size in ``tl`` (measured, or read from
    the cache), said in a line ending with ``why`` and kept in meta.json's fields (``info``)."""
    from profiler.drivers import bandwidth

    sizes = sorted({int(b) for b in tl.groupby("scenario").bytes.median() if b > 0})
    echo(f"pinprof: calibrating pinned bandwidth at {len(sizes)} size(s) {why}")
    cal = bandwidth.calibration(sizes, device)
    info["calibration"] = cal.to_dict(orient="list")
    return cal


def split_profiled(
    tl: pd.DataFrame, device: torch.device, info: dict[str, Any], echo: Callable[[str], None]
) -> pd.DataFrame:
    """``pinprof profile``'s split of the batches the events timed (CUPTI's rows are split as measured,
    ``profiler.timeline.split``): pinned batches read their copies' time as the DMA; batches with a
    pageable copy are split by the pinned rate calibrated at their sizes (cached; meta.json's
    ``calibration``). Rows stay as they are off a GPU or with no events row to split."""
    from profiler.timeline import split

    if device.type != "cuda" or tl.empty:
        return tl
    copies = split.unsplit(tl)
    if copies.empty:
        return tl
    tl = split.pinned_as_measured(tl)
    staged = copies[copies.src_memory.isin(["pageable", "mixed"])]
    if staged.empty:
        return tl
    cal = _calibration(staged, device, info, echo, "to split the pageable copies (cached)")
    return split.apply(tl, cal)
