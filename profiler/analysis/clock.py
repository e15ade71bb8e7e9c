"""Which clock timed a report's GPU columns: in one sentence for the report's reader, and which rows'
``compute_ms`` is the step's kernels' busy time. The one module of the analysis that reads the clock.

Reads the timeline's ``gpu_clock`` column (str per batch: ``cupti``, ``cupti/events``, ``events``, ``none`` on a CPU,
``unknown`` in a report written before the column) and ``meta.json``'s ``gpu_clock`` (``backend``,
``why`` where CUPTI did not time the run, and ``late_records``: ``profiler.capture.clocks.choice.describe``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from profiler.timeline.schema import BUSY_TIME

HISTORY_S = 30  # profiler.capture.clocks.cupti.records.HISTORY_NS: how long a written batch takes late records
CLOCKS = {
    "cupti": "CUPTI's activity records",
    "cupti/events": "CUPTI's memcpy records for the copies and CUDA events for the step",
    "events": "CUDA events",
}
# Where the step's kernels were not recorded: what would record them.
NO_KERNELS = " CUPTI's kernel records were off (pinprof profile --kernels turns them on)."


def busy_time(tl: pd.DataFrame) -> np.ndarray:
    """Per row, whether its ``compute_ms`` is the step's kernels' busy time (CUPTI's kernel records), not
    a span between events that holds the GPU's waits for the host's launches; False where the timeline
    does not say (an nsys import, an older file)."""
    if "gpu_clock" not in tl:
        return np.zeros(len(tl), dtype=bool)
    return tl.gpu_clock.astype(str).to_numpy() == BUSY_TIME


def clock_line(tl: pd.DataFrame, info: dict[str, Any]) -> str | None:
    """``GPU clock: ...`` for a run whose batches a GPU clock timed; None for a CPU-only run or a
    report that does not say."""
    if "gpu_clock" not in tl or not len(tl):
        return None
    counts = tl["gpu_clock"].astype(str).value_counts()
    named = {k: int(counts.get(k, 0)) for k in CLOCKS if counts.get(k, 0)}
    if not named:
        return None
    meta = info.get("gpu_clock")
    why = meta.get("why") if isinstance(meta, dict) else None
    why = why.strip().rstrip(".") if isinstance(why, str) and why.strip() else None
    kernels = NO_KERNELS if "cupti/events" in named else ""
    if len(named) == 1:
        (only,) = named
        if only == "events":
            return f"GPU clock: {CLOCKS['events']}, every batch" + (f"; not CUPTI: {why}." if why else ".")
        return f"GPU clock: {CLOCKS[only]}, every batch.{kernels}{_late(meta)}"
    first, *rest = sorted(named, key=lambda k: -named[k])
    parts = [f"{CLOCKS[first]} for {named[first]} batches"] + [f"{CLOCKS[k]} for {named[k]}" for k in rest]
    return "GPU clock: " + ", ".join(parts) + (f" ({why})." if why else ".") + kernels + _late(meta)


def _late(meta: Any) -> str:
    """A warning where CUPTI delivered records too late to be added to the batches of their time
    (``late_records``, ``profiler.capture.clocks.cupti.recorder``): those batches' GPU columns miss them."""
    late = meta.get("late_records") if isinstance(meta, dict) else None
    if not isinstance(late, int) or late <= 0:
        return ""
    return (
        f" {late:,} of CUPTI's records came more than {HISTORY_S} s after the batches of their time were "
        "written: those batches' GPU columns (compute_ms) miss them."
    )
