"""Where each phase runs, for pictures and traces: four lanes, one per thread or stream."""

from __future__ import annotations

import pandas as pd

LANES: dict[str, tuple[str, ...]] = {
    "main thread": ("fetch", "stage", "layout", "cpu_work", "wait"),
    "pin step": ("pin",),  # the pin thread, or the main thread inside next() without workers
    "copy stream": ("h2d",),
    "compute stream": ("compute",),
}


def with_labels(tl: pd.DataFrame) -> pd.DataFrame:
    """``tl`` with its scenario names made unique per rank when it holds several ranks (merged jobs),
    so pictures and traces draw each rank's batches in a panel of their own."""
    if "rank" in tl and tl["rank"].nunique() > 1:
        return tl.assign(scenario=tl.scenario.astype(str) + " [rank " + tl["rank"].astype(str) + "]")
    return tl


def intervals(tl: pd.DataFrame) -> pd.DataFrame:
    """Long table of drawable intervals: scenario, batch, lane, phase, start_ms, end_ms.

    A copy with a known split is drawn as the driver's hidden staging (where there is some) followed by
    the DMA; a layout copy is the main thread's, before it.
    """
    rows = []
    for lane, phases in LANES.items():
        for phase in phases:
            s, e = tl[f"{phase}_start_ms"], tl[f"{phase}_end_ms"]
            ok = s.notna() & e.notna() & (e >= s)
            part = tl.loc[ok, ["scenario", "batch"]].assign(lane=lane, phase=phase, start_ms=s[ok], end_ms=e[ok])
            if phase == "h2d" and "hidden_stage_ms" in tl:
                split = ok & tl.hidden_stage_ms.notna()
                mid = s + tl.hidden_stage_ms
                part.loc[split[ok].to_numpy(), "phase"] = "dma"
                part.loc[split[ok].to_numpy(), "start_ms"] = mid[split]
                staged = split & (tl.hidden_stage_ms > 0)  # a pinned copy's (0 with CUPTI) draws no bar
                stage = tl.loc[staged, ["scenario", "batch"]].assign(
                    lane=lane, phase="hidden_stage", start_ms=s[staged], end_ms=mid[staged]
                )
                rows.append(stage)
            rows.append(part)
    return (
        pd.concat(rows, ignore_index=True)
        if rows
        else pd.DataFrame(columns=["scenario", "batch", "lane", "phase", "start_ms", "end_ms"])
    )
