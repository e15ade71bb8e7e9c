"""A report folder's file names, and readers that fail with a clear message (writers: ``profiler.atomic``)."""

from __future__ import annotations

import io
import json
import stat
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from profiler.atomic import read_bounded, write_csv, write_json, write_text_atomic
from profiler.errors import ReportError
from profiler.timeline.schema import DURATIONS, SCHEMA, conform

TIMELINE = "timeline.csv"
SUMMARY = "summary.csv"
META = "meta.json"
CALIBRATION = "calibration.csv"

__all__ = [
    "CALIBRATION",
    "META",
    "SUMMARY",
    "TIMELINE",
    "read_calibration",
    "read_json",
    "read_meta",
    "read_timeline",
    "resolve_timeline_path",
    "write_csv",
    "write_json",
    "write_text_atomic",
]


# Reports pinprof writes stay far below these (a 100,000-batch timeline is about 60 MB); a larger
# input is not a report, and reading it whole could take the machine's memory.
MAX_CSV_BYTES = 2 << 30
MAX_JSON_BYTES = 64 << 20


def regular_file(path: Path, limit: int) -> Path:
    """``path`` if it is a regular file of at most ``limit`` bytes; a FIFO or a device would hang or
    never end (``/dev/zero``), so they are refused before a byte is read."""
    path = Path(path)
    try:
        st = path.stat()
    except FileNotFoundError as err:
        raise ReportError(f"{path}: no such file") from err
    if not stat.S_ISREG(st.st_mode):
        raise ReportError(f"{path}: not a regular file (a FIFO, device or socket); pass a report file")
    if st.st_size > limit:
        raise ReportError(f"{path}: {st.st_size} bytes, more than a pinprof report holds ({limit} at most)")
    return path


def read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(regular_file(path, MAX_JSON_BYTES).read_text(encoding="utf-8"))
    except RecursionError as err:  # nesting deeper than the parser's stack: not pinprof's meta.json
        raise ReportError(f"{path}: JSON nested too deeply to be a pinprof file") from err
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ReportError(f"{path}: not valid JSON ({err}); was the run interrupted while writing it?") from err
    if not isinstance(data, dict):
        raise ReportError(f"{path}: expected a JSON object, found {type(data).__name__}")
    return data


def _whole(low: int) -> Any:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and low <= v < 2**53


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) and abs(v) < 1e300


# The keys of meta.json pinprof reads back, with the values it writes (None: the key may be null).
META_KEYS: dict[str, tuple[str, Any]] = {
    "cpu_count": ("a whole number of at least 1", _whole(1)),
    "rank": ("a whole number of at least 0", _whole(0)),
    "local_rank": ("a whole number of at least 0", _whole(0)),
    "world_size": ("a whole number of at least 1", _whole(1)),
    "origin_monotonic_ms": ("a number of ms", _number),
    "partial": ("true or false", lambda v: isinstance(v, bool)),
    "status": ("a string", lambda v: isinstance(v, str)),
    "interrupted_by": ("a string", lambda v: isinstance(v, str)),
    "host": ("a string", lambda v: isinstance(v, str)),
}


def read_meta(path: Path) -> dict[str, Any]:
    """A report's meta.json, with every key pinprof reads back checked for its type (null allowed)."""
    data = read_json(path)
    for key, (what, ok) in META_KEYS.items():
        value = data.get(key)
        if value is not None and not ok(value):
            raise ReportError(f"{path}: {key} is {json.dumps(value)[:60]}, expected {what}")
    return data


def resolve_timeline_path(path: Path) -> Path:
    """A report folder or a CSV file -> the timeline CSV inside it."""
    path = Path(path)
    if path.is_dir():
        for name in (TIMELINE, "nsys_timeline.csv"):
            if (path / name).is_file():
                return path / name
        raise ReportError(
            f"{path}: no {TIMELINE} in this folder; pass a report folder made by `pinprof run` or a timeline CSV"
        )
    if not path.exists():
        raise ReportError(f"{path}: no such file or folder")
    return regular_file(path, MAX_CSV_BYTES)


def read_calibration(folder: Path) -> pd.DataFrame | None:
    """The report's bandwidth calibration (bytes, pinned_GBps, pageable_GBps), or None if it has none."""
    path = Path(folder) / CALIBRATION
    if not (path.exists() or path.is_symlink()):
        return None
    return parse_calibration(read_bounded(path, MAX_CSV_BYTES, "calibration CSV"), path)


def parse_calibration(raw: bytes, path: Path) -> pd.DataFrame:
    """A calibration CSV's bytes, checked (``path`` names it in the one-line errors)."""
    try:
        cal = pd.read_csv(io.BytesIO(raw))
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as err:
        raise ReportError(f"{path}: not a calibration CSV ({str(err).splitlines()[0][:200]})") from err
    missing = [c for c in ("bytes", "pinned_GBps") if c not in cal]
    if missing:
        raise ReportError(f"{path}: missing column(s) {', '.join(missing)}; remove the file or re-run the calibration")
    values = cal[["bytes", "pinned_GBps"]].apply(pd.to_numeric, errors="coerce")
    v = values.to_numpy(float)
    if not (np.isfinite(v).all() and (v > 0).all() and (v[:, 0] < 2**53).all() and (v[:, 1] < 1e6).all()):
        raise ReportError(f"{path}: bytes and pinned_GBps must be positive finite numbers in every row")
    return cal.assign(bytes=values.bytes, pinned_GBps=values.pinned_GBps)


REQUIRED = ("mode", "batch", "bytes")
NON_NEGATIVE = (
    "batch",
    "bytes",
    "copies",
    "rank",
    "local_rank",
    "world_size",
    "batch_size",
    "num_workers",
    "prefetch_factor",
    "pin_faults",
    "pin_allocs",
)


def read_timeline(path: Path) -> pd.DataFrame:
    """Read a timeline CSV (pinprof's or an nsys import) back into the typed frame it was written from."""
    path = resolve_timeline_path(path)
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        # pinprof ends every file with a newline: without one the file was cut while being written
        # (or by hand). A torn header is unusable; a torn last row is dropped, the rows before kept.
        if b"\n" not in data:
            raise ReportError(f"{path}: the header line is incomplete; the file was cut while being written")
        data = data[: data.rindex(b"\n") + 1]
    try:
        raw = pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False, na_values=[""])
    except pd.errors.EmptyDataError as err:
        raise ReportError(f"{path}: the file is empty") from err
    except (pd.errors.ParserError, UnicodeDecodeError) as err:
        raise ReportError(f"{path}: not a CSV file pinprof can read ({str(err).splitlines()[0]})") from err
    missing = [c for c in REQUIRED if c not in raw.columns]
    if missing:
        raise ReportError(
            f"{path}: missing column(s) {', '.join(missing)}; is this a pinprof timeline? "
            f"(found: {', '.join(map(str, raw.columns[:8]))})"
        )
    bad: list[str] = []
    for col, dtype in SCHEMA.items():
        if col not in raw:
            continue
        try:
            raw[col] = _parse(raw[col], dtype)
        except (ValueError, TypeError, OverflowError):
            bad.append(col)
    if bad:
        raise ReportError(f"{path}: column(s) {', '.join(bad)} hold values of the wrong type")
    _check_values(path, raw)
    return conform(raw)


def _check_values(path: Path, frame: pd.DataFrame) -> None:
    """Refuse what pinprof never writes and the analysis would turn into "inf%" or invalid JSON:
    infinite times anywhere, negative durations, byte counts or batch numbers (an empty cell, NaN,
    is a phase that did not happen and is fine)."""
    for col, dtype in SCHEMA.items():
        if col not in frame or dtype not in ("float64", "int64", "Int64"):
            continue  # strings and booleans are neither infinite nor negative
        values = frame[col].to_numpy(dtype=float, na_value=np.nan)  # parsed by _parse already
        infinite = np.isinf(values)
        negative = (values < 0) & (col in DURATIONS or col in NON_NEGATIVE)
        for what, rows in (("an infinite value", infinite), ("a negative value", negative)):
            if rows.any():
                row = int(np.argmax(rows))
                raise ReportError(
                    f"{path}: column {col} holds {what} ({values[row]:g}) at data row {row + 1}; "
                    "pinprof writes finite, non-negative times, sizes and counts there"
                )


def _parse(col: pd.Series, dtype: str) -> pd.Series:
    if dtype == "float64":
        return pd.to_numeric(col, errors="raise").astype("float64")
    if dtype in ("int64", "Int64"):
        num = pd.to_numeric(col, errors="raise")
        if dtype == "int64" and num.isna().any():
            raise ValueError("empty integer cell")
        if (num.dropna() % 1 != 0).any():
            raise ValueError("non-integer")
        if (num.dropna().abs() >= 2**53).any():  # past float64's exact integers, and 2**64 past int64
            raise ValueError("out of range")
        return num.astype(dtype)
    if dtype in ("bool", "boolean"):
        mapped = col.map({"True": True, "False": False, "true": True, "false": False, "1": True, "0": False})
        if mapped[col.notna()].isna().any():
            raise ValueError("not a boolean")
        return mapped.astype("boolean" if dtype == "boolean" or col.isna().any() else "bool")
    return col
