"""Per-scenario statistics derived from the per-batch timeline (never from stored means).

``summarize`` returns one row per scenario with columns:
    run, scenario, mode, device, batch_size, num_workers, pin_memory, non_blocking, prefetch_factor
    batches (int: measured batches, warm-up excluded), bytes (int: median bytes per batch)
    <phase>_ms_p50, <phase>_ms_p90 (ms) for fetch, pin, stage, layout, h2d, h2d_gpu, h2d_call, dma, hidden_stage,
        cpu_work, compute, wait, overlap, batch
    h2d_GBps (GB/s, 1e9 bytes: median over batches of bytes / h2d time)
    exposed_pct (%: total wait_ms over total batch_ms; the share of loop time spent waiting on copies)
    overlap_pct (%: total overlap_ms over total h2d_ms; how much of the copy was hidden behind CPU work)
    measured_s (s: sum of batch_ms), epoch_s (s: mean batch_ms times batches per epoch, when known)
    aggregate_h2d_GBps (GB/s: with several ranks, all ranks' bytes of a scenario over the span from the
        first copy's start to the last copy's end on the merged clock; the host link's total rate)
"""

from __future__ import annotations

import numpy as np
import pandas as pd

KEYS = [
    "run",
    "scenario",
    "mode",
    "rank",
    "device",
    "batch_size",
    "num_workers",
    "pin_memory",
    "non_blocking",
    "prefetch_factor",
]
STAT_PHASES = (
    "fetch",
    "pin",
    "stage",
    "layout",
    "h2d",
    "h2d_gpu",
    "h2d_call",
    "dma",
    "hidden_stage",
    "cpu_work",
    "compute",
    "wait",
    "overlap",
    "batch",
)


def _ratio_pct(num: pd.Series, den: pd.Series) -> float:
    n, d = num.sum(min_count=1), den.sum(min_count=1)
    return float(100.0 * n / d) if pd.notna(n) and pd.notna(d) and d > 0 else np.nan


def summarize(timeline: pd.DataFrame, batches_per_epoch: dict[str, int] | None = None) -> pd.DataFrame:
    """One row per scenario (see module docstring); warm-up batches are left out."""
    rows = timeline[~timeline["warmup"].astype(bool)]
    keys = [k for k in KEYS if k in rows]
    out = []
    for key, g in rows.groupby(keys, dropna=False, sort=False):
        rec = dict(zip(keys, key if isinstance(key, tuple) else (key,)))
        rec["batches"] = len(g)
        rec["bytes"] = int(g["bytes"].median())
        for p in STAT_PHASES:
            col = g[f"{p}_ms"]
            rec[f"{p}_ms_p50"] = col.median()
            rec[f"{p}_ms_p90"] = col.quantile(0.9)
        rate = g["bytes"] / g["h2d_ms"] / 1e6
        rec["h2d_GBps"] = rate.median()
        rec["exposed_pct"] = _ratio_pct(g["wait_ms"], g["batch_ms"])
        rec["overlap_pct"] = _ratio_pct(g["overlap_ms"], g["h2d_ms"])
        rec["measured_s"] = g["batch_ms"].sum() / 1e3
        per_epoch = (batches_per_epoch or {}).get(str(rec["scenario"]))
        rec["epoch_s"] = g["batch_ms"].mean() * per_epoch / 1e3 if per_epoch else np.nan
        out.append(rec)
    frame = pd.DataFrame(out)
    if len(frame) and "world_size" in rows and rows["world_size"].max() > 1:
        g = rows[rows.h2d_ms.notna()].groupby("scenario")
        agg = g.bytes.sum() / (g.h2d_end_ms.max() - g.h2d_start_ms.min()) / 1e6
        frame["aggregate_h2d_GBps"] = frame.scenario.map(agg).astype(float)
    return frame
