"""What pinprof reads of an Nsight Systems SQLite export, across versions.

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
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pandas as pd

from profiler.atomic import check_file
from profiler.errors import ReportError

NS_PER_MS = 1e6
MAX_EXPORT_BYTES = 64 << 30  # exports of long captures run to gigabytes; sqlite reads them in pages
PUSH_POP = 59
DOMAIN_CREATE = 75
DEFAULT_MEM_KINDS = {0: "pageable", 1: "pinned", 2: "device"}


class BadColumn(ValueError):
    """A column of the export holds a value of the wrong type (``import_sqlite`` names the file)."""


# The export's name of each column read under another (the SQL aliases below), for error messages.
SOURCE = {"type": "eventType", "tid": "globalTid", "domain": "domainId", "src_kind": "srcKind"}


def _integers(frame: pd.DataFrame, table: str, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> None:
    """Check, in place, that ``frame``'s columns hold integers as nsys writes them (ns, ids, kinds):
    SQLite keeps any type in any column, so a TEXT or BLOB cell, or a NULL where nsys always writes a
    value, is named here rather than failing deep in the arithmetic."""
    for col in (*required, *optional):
        values = frame[col]
        if pd.api.types.is_integer_dtype(values.dtype):
            continue  # what every sound export gives: no row to look at
        # NULL reads back as None or NaN: allowed where nsys leaves the cell empty, refused elsewhere
        ok = values.map(lambda v: pd.isna(v) or (isinstance(v, (int, float)) and float(v).is_integer()))
        if col in required:
            ok &= values.notna()
        if not ok.all():
            row = int((~ok).to_numpy().argmax())
            name = SOURCE.get(col, col)
            raise BadColumn(f"{table}: column {name} holds {values.iloc[row]!r} in row {row + 1}, not an integer")
        frame[col] = pd.to_numeric(values, errors="coerce").astype("float64" if values.isna().any() else "int64")


READ_TABLES = frozenset(
    {"NVTX_EVENTS", "StringIds", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_RUNTIME", "ENUM_CUDA_MEM_KIND"}
)


# Rows read from one table at most: an export within MAX_EXPORT_BYTES holds far fewer; a query that
# would return more is not reading an nsys table.
MAX_ROWS = 50_000_000


def _bounded(con: sqlite3.Connection, query: str, table: str) -> pd.DataFrame:
    frame = pd.read_sql_query(f"{query} LIMIT {MAX_ROWS + 1}", con)
    if len(frame) > MAX_ROWS:
        raise ReportError(f"{table}: more than {MAX_ROWS:,} rows; not an export pinprof can read")
    return frame


def _tables(con: sqlite3.Connection) -> set[str]:
    """The export's tables. Views are not read: a view named as a table nsys writes could be a
    recursive query that never ends (one grew 55 MB/s until killed); nsys writes none."""
    found = dict(con.execute("SELECT name, type FROM sqlite_master WHERE type IN ('table', 'view')").fetchall())
    views = sorted(n for n, t in found.items() if t == "view" and n in READ_TABLES)
    if views:
        raise ReportError(f"{', '.join(views)}: a view, not a table; not an export of nsys (it writes tables)")
    return {n for n, t in found.items() if t == "table"}


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in con.execute(f"PRAGMA table_info({table})")}


def read_nvtx(con: sqlite3.Connection) -> pd.DataFrame:
    """Push/pop ranges with their names: columns start, end (ns), name, tid, domain."""
    tables = _tables(con)
    if "NVTX_EVENTS" not in tables:
        raise ReportError(
            "no NVTX_EVENTS table in this export: the capture recorded no NVTX. Profile with "
            "--trace=nvtx (pinprof nsys does) and check that the program was instrumented"
        )
    cols = _columns(con, "NVTX_EVENTS")
    text = "e.text" if "text" in cols else "NULL"
    if "textId" in cols and "StringIds" in tables:
        name = f"COALESCE({text}, s.value)"
        join = "LEFT JOIN StringIds s ON s.id = e.textId"
    else:
        name, join = text, ""
    domain = "e.domainId" if "domainId" in cols else "0"
    tid = "e.globalTid" if "globalTid" in cols else "0"
    frame = _bounded(
        con,
        f"SELECT e.start AS start, e.end AS end, e.eventType AS type, {name} AS name, {tid} AS tid, "
        f"{domain} AS domain FROM NVTX_EVENTS e {join}",
        "NVTX_EVENTS",
    )
    # end is NULL for an instant event; the name may be NULL (the range is then skipped below)
    _integers(frame, "NVTX_EVENTS", ("start", "type"), ("end", "tid", "domain"))
    frame["name"] = frame.name.map(lambda v: v if isinstance(v, str) else None)
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
            if not isinstance(val, int):
                continue  # a damaged row: the default labels stand
            low = str(label).lower()
            for key in ("pageable", "pinned", "device"):
                if key in low:
                    kinds[int(val)] = key
    runtime = "CUPTI_ACTIVITY_KIND_RUNTIME" in tables
    join = "LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = m.correlationId" if runtime else ""
    api = (
        "r.start AS api_start, r.end AS api_end, r.globalTid AS tid"
        if runtime
        else "NULL AS api_start, NULL AS api_end, NULL AS tid"
    )
    frame = _bounded(
        con,
        f"SELECT m.start AS start, m.end AS end, m.bytes AS bytes, m.srcKind AS src_kind, {api} "
        f"FROM CUPTI_ACTIVITY_KIND_MEMCPY m {join} WHERE m.copyKind = 1",
        "CUPTI_ACTIVITY_KIND_MEMCPY",
    )
    # api_* and tid are NULL for a copy whose runtime call was not captured
    _integers(
        frame, "CUPTI_ACTIVITY_KIND_MEMCPY", ("start", "end", "bytes", "src_kind"), ("api_start", "api_end", "tid")
    )
    frame["src_memory"] = frame.pop("src_kind").map(lambda k: kinds.get(int(k), f"kind{k}"))
    return frame[cols]


def open_export(path: Path) -> sqlite3.Connection:
    path = Path(path)
    if not (path.exists() or path.is_symlink()):
        raise ReportError(f"{path}: no such file; pass the .sqlite from `nsys export --type sqlite` or a .nsys-rep")
    check_file(path, MAX_EXPORT_BYTES, "SQLite export")
    try:
        # Read-only through a URI pathlib encodes: a name with '#' or '?' built into "file:..." by hand
        # opened another path (and created it).
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        con.text_factory = lambda raw: raw.decode("utf-8", "replace")  # a damaged string is not a crash
        con.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
    except (sqlite3.DatabaseError, UnicodeDecodeError) as err:  # a column's name is decoded strictly
        raise ReportError(f"{path}: not an SQLite export, or a damaged one ({err})") from err
    return con
