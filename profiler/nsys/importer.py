"""Read an Nsight Systems SQLite export into pinprof's per-batch table (tables: ``profiler.nsys.schema``).

The result has pinprof's timeline columns where the meaning is the same (see ``profiler.timeline.schema``):
``scenario``, ``mode``, ``batch``, ``bytes``, ``src_memory``, ``h2d_ms`` (CUPTI: first memcpy start
to last memcpy end of the batch), ``fetch_ms``/``stage_ms``/``cpu_work_ms``/``compute_ms``/
``batch_ms`` and ``h2d_call_ms`` (NVTX range durations), ``<phase>_start_ms``/``_end_ms`` (from the
first batch range's start), plus:
    api_ms        host time in the runtime calls that issued the batch's copies (ms)
    h2d_span_ms   from the start of the first runtime call to the end of the last memcpy (ms): for a
                  pageable copy the driver stages on the calling thread from the call's start, so
                  this, not the memcpy records alone, spans what pinprof's h2d events bracket
    memcpy_count  number of HtoD memcpy records in the batch
Each memcpy belongs to the ``batch <n>`` range that encloses its runtime call on the same thread.
``pin`` ranges run on the pin thread, outside any batch range, in completion order rather than batch
order, so ``pin_ms`` stays empty here.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd

from profiler.errors import ReportError
from profiler.modes import MODES
from profiler.nsys.schema import NS_PER_MS, BadColumn, open_export, read_memcpy, read_nvtx
from profiler.timeline.schema import conform

BATCH = re.compile(r"^batch (\d+)$")
LOOP = re.compile(r"^loop (.+)$")
PHASE_NAMES = ("fetch", "stage", "layout", "h2d", "cpu_work", "compute")


def import_sqlite(path: Path, run: str | None = None) -> pd.DataFrame:
    """The per-batch table of one export (columns in the module docstring)."""
    con = open_export(path)
    try:
        try:
            nvtx, memcpy = read_nvtx(con), read_memcpy(con)
        except (sqlite3.DatabaseError, pd.errors.DatabaseError, UnicodeDecodeError) as err:
            raise ReportError(f"{path}: the export is damaged or not from Nsight Systems ({err})") from err
        except BadColumn as err:
            raise ReportError(f"{path}: {err}; the export is damaged or not from Nsight Systems") from err
        except ReportError as err:
            if str(path) in str(err):
                raise
            raise ReportError(f"{path}: {err}") from err
    finally:
        con.close()
    return per_batch(nvtx, memcpy, run or Path(path).stem)


def owner(ranges: pd.DataFrame, tid: pd.Series, start: pd.Series, end: pd.Series | None = None) -> np.ndarray:
    """For each interval (or instant, without ``end``), the index in ``ranges`` of the range on the
    same thread that contains it, or -1. Ranges of one name on one thread do not overlap (batches and
    loops follow each other), so a sorted search per thread finds it: O(n log n), not O(n * m)."""
    out = np.full(len(start), -1, dtype=np.int64)
    tid_a, start_a = tid.to_numpy(), start.to_numpy()
    end_a = start_a if end is None else end.to_numpy()
    for th, g in ranges.groupby("tid", sort=False):
        g = g.sort_values("start")
        sel = tid_a == th
        pos = np.searchsorted(g.start.to_numpy(), start_a[sel], side="right") - 1
        safe = np.clip(pos, 0, None)
        inside = (pos >= 0) & (end_a[sel] <= g.end.to_numpy()[safe])
        out[sel] = np.where(inside, g.index.to_numpy()[safe], -1)
    return out


def _ms(x: pd.Series) -> pd.Series:
    return x / NS_PER_MS


def per_batch(nvtx: pd.DataFrame, memcpy: pd.DataFrame, run: str) -> pd.DataFrame:
    """Join NVTX ranges and memcpy records into one row per batch range (vectorised)."""
    batches = _batch_ranges(nvtx)
    origin = batches.start.min()
    first = batches.scenario.str.split("/").str[0]
    out = pd.DataFrame(
        {
            "run": run,
            "scenario": batches.scenario,
            "mode": first.where(first.isin(MODES), ""),
            "batch": batches.batch,
            "batch_ms": _ms(batches.end - batches.start),
            "batch_start_ms": _ms(batches.start - origin),
            "batch_end_ms": _ms(batches.end - origin),
        }
    )
    _add_phases(out, nvtx, batches, origin)
    return _add_memcpy(out, memcpy, batches, origin)


def _batch_ranges(nvtx: pd.DataFrame) -> pd.DataFrame:
    """The ``batch <n>`` ranges with their batch number and scenario (from the enclosing ``loop`` range)."""
    names = nvtx.name.astype(str)
    batches = nvtx[names.str.match(BATCH.pattern)].copy()
    if batches.empty:
        raise ReportError(
            "no `batch <n>` NVTX ranges found: was the program wrapped with "
            "TransferProfiler.batches(), and traced with --trace=nvtx?"
        )
    numbers = batches.name.str.extract(BATCH.pattern)[0]
    huge = numbers.str.len() > 15  # past 2**53 (and int64's end): no batch pinprof numbers
    if huge.any():
        raise ReportError(f"NVTX range {batches.name[huge].iloc[0][:40]!r}: a batch number pinprof never writes")
    batches["batch"] = numbers.astype("int64")
    loops = nvtx[names.str.match(LOOP.pattern)]
    loop_of = owner(loops, batches.tid, batches.start, batches.end)
    loop_names = loops.name.reindex(loop_of).fillna("").astype(str).to_numpy()
    batches["scenario"] = [n[5:] for n in loop_names]  # "loop <scenario>" -> "<scenario>"
    batches = batches.sort_values("start", ignore_index=True)
    return _drop_exhausted(batches, nvtx)


def _add_phases(out: pd.DataFrame, nvtx: pd.DataFrame, batches: pd.DataFrame, origin: float) -> None:
    """Each phase's summed duration and first-start/last-end interval per batch, from its NVTX ranges."""
    phases = nvtx[nvtx.name.isin(PHASE_NAMES)].copy()
    phases["owner"] = owner(batches, phases.tid, phases.start, phases.end)
    phases = phases[phases.owner >= 0]
    agg = (
        phases.assign(dur=phases.end - phases.start)
        .groupby(["owner", "name"])
        .agg(dur=("dur", "sum"), s=("start", "min"), e=("end", "max"))
    )
    for phase in PHASE_NAMES:
        if phase not in agg.index.get_level_values("name"):
            continue
        g = agg.xs(phase, level="name")
        key = "h2d_call" if phase == "h2d" else phase
        out[f"{key}_ms"] = _ms(g.dur).reindex(out.index)
        if phase != "h2d":  # h2d's interval is CUPTI's, below
            out[f"{phase}_start_ms"] = _ms(g.s - origin).reindex(out.index)
            out[f"{phase}_end_ms"] = _ms(g.e - origin).reindex(out.index)


def _add_memcpy(out: pd.DataFrame, memcpy: pd.DataFrame, batches: pd.DataFrame, origin: float) -> pd.DataFrame:
    """CUPTI's h2d interval, bytes, source memory, API time and span per batch; the typed table."""
    cp = memcpy.copy()
    cp["owner"] = owner(batches, cp.tid, cp.api_start) if len(cp) and cp.api_start.notna().all() else -1
    cp = cp[cp.owner >= 0]
    g = cp.assign(api=cp.api_end - cp.api_start).groupby("owner")
    counts = g.size().reindex(out.index, fill_value=0)
    kinds = g.src_memory.agg(lambda k: k.iloc[0] if k.nunique() == 1 else "mixed")
    out["h2d_start_ms"] = _ms(g.start.min() - origin).reindex(out.index)
    out["h2d_end_ms"] = _ms(g.end.max() - origin).reindex(out.index)
    out["h2d_ms"] = out.h2d_end_ms - out.h2d_start_ms
    out["bytes"] = g.bytes.sum().reindex(out.index, fill_value=0).astype("int64")
    out["src_memory"] = kinds.reindex(out.index).fillna("")
    api = _ms(g.api.sum()).reindex(out.index)
    result = conform(out)
    result["api_ms"] = api.astype(float).to_numpy()
    result["memcpy_count"] = counts.astype(int).to_numpy()
    result["h2d_span_ms"] = _ms(g.end.max() - g.api_start.min()).reindex(out.index).astype(float).to_numpy()
    return result


def _drop_exhausted(batches: pd.DataFrame, nvtx: pd.DataFrame) -> pd.DataFrame:
    """Drop the range of the final ``next()`` that found the loader exhausted.

    pinprof opens ``batch <n>`` before it knows whether batch n exists (the fetch must nest inside
    it), so each loop that ran to its end leaves one last range holding nothing but ``fetch``.
    """
    last = batches.groupby(["tid", "scenario"], sort=False).tail(1)
    drop = []
    for b in last.itertuples():
        inner = nvtx[(nvtx.tid == b.tid) & (nvtx.start >= b.start) & (nvtx.end <= b.end) & (nvtx.start > b.start - 1)]
        names = set(inner.name) - {b.name}
        if names <= {"fetch"}:
            drop.append(b.Index)
    return batches.drop(index=drop).reset_index(drop=True)
