"""Read an Nsight Systems SQLite export into pinprof's per-batch table.

Tables read (names as in nsys 2022.4 - 2025.x):
- ``NVTX_EVENTS``: push/pop ranges (eventType 59) and domain creations (75); the name is inline in
  ``text`` or, for registered strings (what pinprof emits), in ``StringIds`` through ``textId``;
  some versions have only one of the two columns.
- ``CUPTI_ACTIVITY_KIND_MEMCPY``: one row per GPU copy: ``bytes``, ``copyKind`` (1 = HtoD),
  ``srcKind`` (0 = pageable, 1 = pinned in nsys' ``ENUM_CUDA_MEM_KIND``; read from that table
  when present), ``start``/``end`` (ns), ``correlationId``.
- ``CUPTI_ACTIVITY_KIND_RUNTIME``: the API call that issued each copy (joined on ``correlationId``),
  for its host duration and thread.
A CPU-only capture has no CUPTI tables: the GPU columns are then empty.

The result has pinprof's timeline columns where the meaning is the same (see ``profiler.timeline``):
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

from .modes import MODES
from .report_io import ReportError
from .timeline import conform

NS_PER_MS = 1e6
PUSH_POP = 59
DOMAIN_CREATE = 75
BATCH = re.compile(r"^batch (\d+)$")
LOOP = re.compile(r"^loop (.+)$")
PHASE_NAMES = ("fetch", "stage", "h2d", "cpu_work", "compute")
DEFAULT_MEM_KINDS = {0: "pageable", 1: "pinned", 2: "device"}


def _tables(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in con.execute(f"PRAGMA table_info({table})")}


def read_nvtx(con: sqlite3.Connection) -> pd.DataFrame:
    """Push/pop ranges with their names: columns start, end (ns), name, tid, domain."""
    tables = _tables(con)
    if "NVTX_EVENTS" not in tables:
        raise ReportError("no NVTX_EVENTS table in this export: the capture recorded no NVTX. Profile with "
                          "--trace=nvtx (pinprof nsys does) and check that the program was instrumented")
    cols = _columns(con, "NVTX_EVENTS")
    text = "e.text" if "text" in cols else "NULL"
    if "textId" in cols and "StringIds" in tables:
        name = f"COALESCE({text}, s.value)"
        join = "LEFT JOIN StringIds s ON s.id = e.textId"
    else:
        name, join = text, ""
    domain = "e.domainId" if "domainId" in cols else "0"
    tid = "e.globalTid" if "globalTid" in cols else "0"
    frame = pd.read_sql_query(
        f"SELECT e.start AS start, e.end AS end, e.eventType AS type, {name} AS name, {tid} AS tid, "
        f"{domain} AS domain FROM NVTX_EVENTS e {join}", con)
    domains = frame[frame.type == DOMAIN_CREATE]
    ours = set(domains.loc[domains.name == "pinprof", "domain"])
    ranges = frame[(frame.type == PUSH_POP) & frame.end.notna() & frame.name.notna()].copy()
    if ours:  # pinprof's own domain; without one (torch.cuda.nvtx fallback) the default domain
        ranges = ranges[ranges.domain.isin(ours)]
    return ranges.drop(columns=["type"]).reset_index(drop=True)


def read_memcpy(con: sqlite3.Connection) -> pd.DataFrame:
    """HtoD memcpy records joined to their runtime calls; empty when the capture had no CUDA trace."""
    tables = _tables(con)
    cols = ["start", "end", "bytes", "src_memory", "api_start", "api_end", "tid"]
    if "CUPTI_ACTIVITY_KIND_MEMCPY" not in tables:
        return pd.DataFrame(columns=cols)
    kinds = dict(DEFAULT_MEM_KINDS)
    if "ENUM_CUDA_MEM_KIND" in tables:
        for val, label in con.execute("SELECT id, name FROM ENUM_CUDA_MEM_KIND"):
            low = str(label).lower()
            for key in ("pageable", "pinned", "device"):
                if key in low:
                    kinds[int(val)] = key
    runtime = "CUPTI_ACTIVITY_KIND_RUNTIME" in tables
    join = ("LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = m.correlationId" if runtime else "")
    api = "r.start AS api_start, r.end AS api_end, r.globalTid AS tid" if runtime else \
        "NULL AS api_start, NULL AS api_end, NULL AS tid"
    frame = pd.read_sql_query(
        f"SELECT m.start AS start, m.end AS end, m.bytes AS bytes, m.srcKind AS src_kind, {api} "
        f"FROM CUPTI_ACTIVITY_KIND_MEMCPY m {join} WHERE m.copyKind = 1", con)
    frame["src_memory"] = frame.pop("src_kind").map(lambda k: kinds.get(int(k), f"kind{k}"))
    return frame[cols]


def open_export(path: Path) -> sqlite3.Connection:
    path = Path(path)
    if not path.is_file():
        raise ReportError(f"{path}: no such file; pass the .sqlite from `nsys export --type sqlite` or a .nsys-rep")
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        con.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.DatabaseError as err:
        raise ReportError(f"{path}: not an SQLite export ({err})") from err
    return con


def import_sqlite(path: Path, run: str | None = None) -> pd.DataFrame:
    """The per-batch table of one export (columns in the module docstring)."""
    con = open_export(path)
    try:
        try:
            nvtx, memcpy = read_nvtx(con), read_memcpy(con)
        except (sqlite3.DatabaseError, pd.errors.DatabaseError) as err:
            raise ReportError(f"{path}: the export is damaged or not from Nsight Systems ({err})") from err
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


def per_batch(nvtx: pd.DataFrame, memcpy: pd.DataFrame, run: str) -> pd.DataFrame:
    """Join NVTX ranges and memcpy records into one row per batch range (vectorised)."""
    names = nvtx.name.astype(str)
    batches = nvtx[names.str.match(BATCH.pattern)].copy()
    if batches.empty:
        raise ReportError("no `batch <n>` NVTX ranges found: was the program wrapped with "
                          "TransferProfiler.batches(), and traced with --trace=nvtx?")
    batches["batch"] = batches.name.str.extract(BATCH.pattern)[0].astype(int)
    loops = nvtx[names.str.match(LOOP.pattern)]
    loop_of = owner(loops, batches.tid, batches.start, batches.end)
    loop_names = loops.name.reindex(loop_of).fillna("").astype(str).to_numpy()
    batches["scenario"] = [n[5:] for n in loop_names]  # "loop <scenario>" -> "<scenario>"
    batches = batches.sort_values("start", ignore_index=True)
    batches = _drop_exhausted(batches, nvtx)
    origin = batches.start.min()

    def ms(x: pd.Series) -> pd.Series:
        return x / NS_PER_MS

    first = batches.scenario.str.split("/").str[0]
    out = pd.DataFrame({"run": run, "scenario": batches.scenario, "mode": first.where(first.isin(MODES), ""),
                        "batch": batches.batch, "batch_ms": ms(batches.end - batches.start),
                        "batch_start_ms": ms(batches.start - origin), "batch_end_ms": ms(batches.end - origin)})
    phases = nvtx[nvtx.name.isin(PHASE_NAMES)].copy()
    phases["owner"] = owner(batches, phases.tid, phases.start, phases.end)
    phases = phases[phases.owner >= 0]
    agg = phases.assign(dur=phases.end - phases.start).groupby(["owner", "name"]).agg(
        dur=("dur", "sum"), s=("start", "min"), e=("end", "max"))
    for phase in PHASE_NAMES:
        if phase not in agg.index.get_level_values("name"):
            continue
        g = agg.xs(phase, level="name")
        key = "h2d_call" if phase == "h2d" else phase
        out[f"{key}_ms"] = ms(g.dur).reindex(out.index)
        if phase != "h2d":  # h2d's interval is CUPTI's, below
            out[f"{phase}_start_ms"] = ms(g.s - origin).reindex(out.index)
            out[f"{phase}_end_ms"] = ms(g.e - origin).reindex(out.index)
    cp = memcpy.copy()
    cp["owner"] = owner(batches, cp.tid, cp.api_start) if len(cp) and cp.api_start.notna().all() else -1
    cp = cp[cp.owner >= 0]
    g = cp.assign(api=cp.api_end - cp.api_start).groupby("owner")
    counts = g.size().reindex(out.index, fill_value=0)
    kinds = g.src_memory.agg(lambda k: k.iloc[0] if k.nunique() == 1 else "mixed")
    out["h2d_start_ms"] = ms(g.start.min() - origin).reindex(out.index)
    out["h2d_end_ms"] = ms(g.end.max() - origin).reindex(out.index)
    out["h2d_ms"] = out.h2d_end_ms - out.h2d_start_ms
    out["bytes"] = g.bytes.sum().reindex(out.index, fill_value=0).astype("int64")
    out["src_memory"] = kinds.reindex(out.index).fillna("")
    api = ms(g.api.sum()).reindex(out.index)
    result = conform(out)
    result["api_ms"] = api.astype(float).to_numpy()
    result["memcpy_count"] = counts.astype(int).to_numpy()
    result["h2d_span_ms"] = ms(g.end.max() - g.api_start.min()).reindex(out.index).astype(float).to_numpy()
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


def compare(ours: pd.DataFrame, cupti: pd.DataFrame) -> pd.DataFrame:
    """pinprof's CUDA-event h2d_ms next to CUPTI's figure of the same meaning, per (scenario, batch).

    The reference depends on the source memory. From pinned memory, pinprof's events bracket the DMA
    alone: CUPTI's memcpy records (first start to last end). From pageable memory they bracket the
    driver's staging and the DMA, and the staging starts with the runtime call: CUPTI's span from
    the call's start to the last record's end (``h2d_span_ms``; the memcpy records alone miss the
    staging before the first DMA: medians of 0.13 and 0.27 ms of 12 MiB batches taking 1.6 and
    2.6 ms in two H200 captures).

    Columns: scenario, mode, batch, bytes, src_memory, h2d_ms_pinprof, h2d_ms_cupti (ms), reference
    (``memcpy`` or ``call+memcpy``), rel_diff (pinprof / CUPTI - 1), h2d_call_ms (pinprof, host),
    api_ms (CUPTI runtime call, host), h2d_memcpy_ms (CUPTI memcpy records alone).
    """
    left = ours[["scenario", "mode", "batch", "bytes", "src_memory", "h2d_ms", "h2d_call_ms"]]
    cols = ["scenario", "batch", "h2d_ms", "api_ms"] + (["h2d_span_ms"] if "h2d_span_ms" in cupti else [])
    right = cupti[cols].rename(columns={"h2d_ms": "h2d_memcpy_ms"})
    joined = left.merge(right, on=["scenario", "batch"], how="inner").rename(columns={"h2d_ms": "h2d_ms_pinprof"})
    pageable = (joined.src_memory == "pageable").to_numpy()
    span = joined["h2d_span_ms"] if "h2d_span_ms" in joined else pd.Series(np.nan, index=joined.index)
    joined["h2d_ms_cupti"] = np.where(pageable, span, joined.h2d_memcpy_ms)
    joined["reference"] = np.where(pageable, "call+memcpy", "memcpy")
    joined["rel_diff"] = joined.h2d_ms_pinprof / joined.h2d_ms_cupti - 1.0
    return joined.drop(columns=["h2d_span_ms"], errors="ignore")
