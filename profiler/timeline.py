"""The per-batch timeline: its columns, units and dtypes, and how raw records become a DataFrame.

Columns (one row per (run, scenario, batch); times are milliseconds from the run's start, durations
milliseconds; an empty cell (NaN) means "not measured", never 0):

identity
    run (str), scenario (str: mode and loader settings), mode (str), batch (int, 0-based),
    warmup (bool: excluded from summaries), rank, local_rank, world_size (int; 0, 0, 1 outside
    torch.distributed)
data
    bytes (int: all tensors in the batch), src_memory (str: what the H2D copy reads from,
    ``pageable`` / ``pinned`` / ``device`` / ``mixed``, as CUPTI's srcKind would say)
durations, ms
    fetch_ms      main thread blocked in ``next(loader)``
    pin_ms        the DataLoader pin step for this batch (pin thread, or main thread without workers)
    stage_ms      main thread's explicit staging into pinned memory (``staged`` mode)
    h2d_ms        GPU time of the copy on its stream (CUDA events)
    h2d_call_ms   host time spent inside the copy call (blocks for pageable sources or blocking copies)
    dma_ms, hidden_stage_ms
                  ``h2d_ms`` of a pageable copy split into the DMA proper and the driver's hidden
                  staging (see ``profiler.split``); empty until a calibration is applied
    cpu_work_ms   user CPU work meant to overlap the copy (sum if entered several times)
    compute_ms    user GPU work (CUDA events on the compute stream; host clock on a CPU device)
    wait_ms       exposed transfer: for copies that block the host, the copy call; for asynchronous
                  copies, the time from when the consumer asked for the data (``compute()`` entry, or the
                  batch's end) until the copy finished, 0 if it was already done
    overlap_ms    part of ``h2d`` that ran while ``cpu_work`` ran (interval intersection)
    batch_ms      from this batch's fetch start to the next batch's fetch start
intervals, ms from the run's start
    <phase>_start_ms, <phase>_end_ms for fetch, pin, stage, h2d, cpu_work, compute, wait, overlap, batch
configuration
    device (str), batch_size (Int64), num_workers (Int64), pin_memory (boolean), non_blocking (boolean),
    prefetch_factor (Int64; empty with no workers)
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from .clock import ClockMap

PHASES: tuple[str, ...] = ("fetch", "pin", "stage", "h2d", "cpu_work", "compute", "wait", "overlap", "batch")
DURATIONS: tuple[str, ...] = (
    "fetch_ms", "pin_ms", "stage_ms", "h2d_ms", "h2d_call_ms", "dma_ms", "hidden_stage_ms",
    "cpu_work_ms", "compute_ms", "wait_ms", "overlap_ms", "batch_ms",
)
INTERVALS: tuple[str, ...] = tuple(f"{p}_{edge}_ms" for p in PHASES for edge in ("start", "end"))
IDENTITY: dict[str, str] = {
    "run": "str", "scenario": "str", "mode": "str", "batch": "int64", "warmup": "bool",
    "rank": "int64", "local_rank": "int64", "world_size": "int64", "bytes": "int64", "src_memory": "str",
}
CONFIG: dict[str, str] = {
    "device": "str", "batch_size": "Int64", "num_workers": "Int64", "pin_memory": "boolean",
    "non_blocking": "boolean", "prefetch_factor": "Int64",
}
# What a missing identity column means in a file from elsewhere (an nsys import, an older version).
DEFAULTS: dict[str, Any] = {"warmup": False, "rank": 0, "local_rank": 0, "world_size": 1}
SCHEMA: dict[str, str] = {**IDENTITY, **{c: "float64" for c in DURATIONS + INTERVALS}, **CONFIG}
COLUMNS: tuple[str, ...] = tuple(SCHEMA)

# Raw per-batch fields the recorder fills: host times in ms on the now_ms clock, GPU times in ms
# elapsed since the first anchor event (NaN when absent).
RAW_HOST = ("batch_s", "batch_e", "fetch_s", "fetch_e", "pin_s", "pin_e", "stage_s", "stage_e",
            "call_s", "call_e", "cpu_s", "cpu_e", "cpu_sum", "comp_s", "comp_e", "comp_sum", "request")
RAW_GPU = ("h2d_gs", "h2d_ge", "comp_gs", "comp_ge")


def empty_timeline() -> pd.DataFrame:
    """A timeline with no rows and every column typed."""
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in SCHEMA.items()})


def build_timeline(
    raw: Mapping[str, Sequence[Any]], t0_ms: float, clock: ClockMap | None, static: Mapping[str, Any]
) -> pd.DataFrame:
    """Turn the recorder's raw columns into the timeline (see the module docstring for columns)."""
    n = len(raw["batch"])
    if n == 0:
        return empty_timeline()
    f = {k: np.asarray(raw[k], dtype=float) - t0_ms for k in RAW_HOST if k != "cpu_sum" and k != "comp_sum"}
    out: dict[str, Any] = {}
    _interval(out, "fetch", f["fetch_s"], f["fetch_e"])
    _interval(out, "pin", f["pin_s"], f["pin_e"])
    _interval(out, "stage", f["stage_s"], f["stage_e"])
    if clock is not None:
        gpu = {k: clock.host_ms(np.asarray(raw[k], dtype=float)) - t0_ms for k in RAW_GPU}
        h2d_s, h2d_e = gpu["h2d_gs"], gpu["h2d_ge"]
        comp_s, comp_e, comp_ms = gpu["comp_gs"], gpu["comp_ge"], gpu["comp_ge"] - gpu["comp_gs"]
    else:
        h2d_s = h2d_e = np.full(n, np.nan)
        comp_s, comp_e = f["comp_s"], f["comp_e"]
        comp_ms = np.asarray(raw["comp_sum"], dtype=float)
    sync = np.asarray(raw["copy_sync"], dtype=bool)
    _interval(out, "h2d", h2d_s, h2d_e)
    out["h2d_call_ms"] = f["call_e"] - f["call_s"]
    out["dma_ms"] = out["hidden_stage_ms"] = np.full(n, np.nan)
    _interval(out, "cpu_work", f["cpu_s"], f["cpu_e"], np.asarray(raw["cpu_sum"], dtype=float))
    _interval(out, "compute", comp_s, comp_e, comp_ms)
    request = np.where(np.isnan(f["request"]), f["batch_e"], f["request"])
    wait_s = np.where(sync, f["call_s"], request)
    wait_e = np.where(sync, f["call_e"], np.fmax(request, h2d_e))
    no_copy = np.isnan(f["call_s"])
    _interval(out, "wait", np.where(no_copy, np.nan, wait_s), np.where(no_copy, np.nan, wait_e))
    ov_s, ov_e = np.fmax(h2d_s, f["cpu_s"]), np.fmin(h2d_e, f["cpu_e"])
    has = ~np.isnan(h2d_s) & ~np.isnan(f["cpu_s"])
    overlap = np.where(has, np.clip(ov_e - ov_s, 0.0, None), np.nan)
    positive = has & (overlap > 0)
    out["overlap_start_ms"], out["overlap_end_ms"] = np.where(positive, ov_s, np.nan), np.where(positive, ov_e, np.nan)
    out["overlap_ms"] = overlap
    _interval(out, "batch", f["batch_s"], f["batch_e"])
    frame = pd.DataFrame({
        **{k: static.get(k) for k in ("run", "scenario", "mode")},
        "batch": raw["batch"], "warmup": raw["warmup"],
        **{k: static.get(k, d) for k, d in (("rank", 0), ("local_rank", 0), ("world_size", 1))},
        "bytes": raw["bytes"], "src_memory": raw["src_memory"], **out,
        **{k: static.get(k) for k in CONFIG},
    }, index=pd.RangeIndex(n))
    return conform(frame)


def _interval(out: dict[str, Any], phase: str, start: np.ndarray, end: np.ndarray,
              duration: np.ndarray | None = None) -> None:
    out[f"{phase}_start_ms"], out[f"{phase}_end_ms"] = start, end
    out[f"{phase}_ms"] = end - start if duration is None else np.where(np.isnan(start), np.nan, duration)


def conform(frame: pd.DataFrame) -> pd.DataFrame:
    """Columns in schema order and dtype; missing columns added empty (older or foreign files)."""
    for col, dtype in SCHEMA.items():
        if col not in frame:
            fill: Any = DEFAULTS.get(col, np.nan if dtype == "float64" else pd.NA)
            frame[col] = pd.Series(fill, index=frame.index)
    frame = frame[list(COLUMNS) + [c for c in frame.columns if c not in SCHEMA]]
    return frame.astype({c: t for c, t in SCHEMA.items()})


def concat(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Stack timelines of several scenarios, keeping the schema's dtypes."""
    frames = [f for f in frames if len(f)]
    if not frames:
        return empty_timeline()
    return conform(pd.concat(frames, ignore_index=True))
