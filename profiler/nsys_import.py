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


def per_batch(nvtx: pd.DataFrame, memcpy: pd.DataFrame, run: str) -> pd.DataFrame:
    """Join NVTX ranges and memcpy records into one row per batch range."""
    names = nvtx.name.astype(str)
    batches = nvtx[names.str.match(BATCH.pattern)].copy()
    if batches.empty:
        raise ReportError("no `batch <n>` NVTX ranges found: was the program wrapped with "
                          "TransferProfiler.batches(), and traced with --trace=nvtx?")
    batches["batch"] = batches.name.str.extract(BATCH.pattern)[0].astype(int)
    loops = nvtx[names.str.match(LOOP.pattern)]
    batches["scenario"] = [_enclosing(loops, r.tid, r.start, r.end, "") for r in batches.itertuples()]
    batches = batches.sort_values("start", ignore_index=True)
    batches = _drop_exhausted(batches, nvtx)
    origin = batches.start.min()
    rows = []
    for b in batches.itertuples():
        scen = str(b.scenario)[5:] if str(b.scenario).startswith("loop ") else ""
        mode = scen.split("/")[0] if scen.split("/")[0] in MODES else ""
        row: dict[str, object] = {"run": run, "scenario": scen, "mode": mode, "batch": b.batch}
        inner = nvtx[(nvtx.tid == b.tid) & (nvtx.start >= b.start) & (nvtx.end <= b.end)]
        for phase in PHASE_NAMES:
            hit = inner[inner.name == phase]
            if len(hit):
                s, e = hit.start.min(), hit.end.max()
                key = "h2d_call" if phase == "h2d" else phase
                row[f"{key}_ms"] = (hit.end - hit.start).sum() / NS_PER_MS
                if phase != "h2d":
                    row[f"{phase}_start_ms"], row[f"{phase}_end_ms"] = (s - origin) / NS_PER_MS, (e - origin) / NS_PER_MS
        row["batch_ms"] = (b.end - b.start) / NS_PER_MS
        row["batch_start_ms"], row["batch_end_ms"] = (b.start - origin) / NS_PER_MS, (b.end - origin) / NS_PER_MS
        mine = memcpy[(memcpy.tid == b.tid) & (memcpy.api_start >= b.start) & (memcpy.api_start <= b.end)]
        row["memcpy_count"] = len(mine)
        if len(mine):
            s, e = mine.start.min(), mine.end.max()
            row.update(h2d_ms=(e - s) / NS_PER_MS, h2d_start_ms=(s - origin) / NS_PER_MS,
                       h2d_end_ms=(e - origin) / NS_PER_MS, bytes=int(mine.bytes.sum()),
                       api_ms=(mine.api_end - mine.api_start).sum() / NS_PER_MS)
            kinds = set(mine.src_memory)
            row["src_memory"] = kinds.pop() if len(kinds) == 1 else "mixed"
        else:
            row.update(bytes=0, src_memory="", api_ms=np.nan)
        rows.append(row)
    frame = pd.DataFrame(rows)
    extra = frame[["api_ms", "memcpy_count"]]
    out = conform(frame.drop(columns=["api_ms", "memcpy_count"]))
    out["api_ms"] = extra.api_ms.astype(float)
    out["memcpy_count"] = extra.memcpy_count.astype(int)
    return out


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


def _enclosing(ranges: pd.DataFrame, tid: int, start: int, end: int, default: str) -> str:
    hit = ranges[(ranges.tid == tid) & (ranges.start <= start) & (ranges.end >= end)]
    return str(hit.name.iloc[-1]) if len(hit) else default


def compare(ours: pd.DataFrame, cupti: pd.DataFrame) -> pd.DataFrame:
    """pinprof's CUDA-event h2d_ms next to CUPTI's, per (scenario, batch).

    Columns: scenario, mode, batch, bytes, src_memory, h2d_ms_pinprof, h2d_ms_cupti (ms),
    rel_diff (pinprof / CUPTI - 1), h2d_call_ms (pinprof, host), api_ms (CUPTI runtime call, host).
    """
    left = ours[["scenario", "mode", "batch", "bytes", "src_memory", "h2d_ms", "h2d_call_ms"]]
    right = cupti[["scenario", "batch", "h2d_ms", "api_ms"]]
    joined = left.merge(right, on=["scenario", "batch"], suffixes=("_pinprof", "_cupti"), how="inner")
    joined["rel_diff"] = joined.h2d_ms_pinprof / joined.h2d_ms_cupti - 1.0
    return joined
