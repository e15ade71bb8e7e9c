"""A report folder's file names, and readers that fail with a clear message (writers: ``profiler.atomic``)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from profiler.atomic import read_bounded, write_csv, write_json, write_text_atomic
from profiler.errors import ReportError
from profiler.report.bounded import MAX_CSV_BYTES, MAX_JSON_BYTES, regular_file
from profiler.report.timeline_csv import TIMELINE, read_timeline, resolve_timeline_path

SUMMARY = "summary.csv"
SUMMARY_JSON = "summary.json"
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


# meta.json nests two levels; a file nested deeper was not written by pinprof, and walking it would
# overflow the stack (a key nested 950 deep gave a RecursionError after it parsed).
MAX_JSON_DEPTH = 32


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        twice = sorted({k for k in keys if keys.count(k) > 1})
        raise ValueError(f"key {twice[0]!r} given twice")
    return dict(pairs)


def _depth_ok(data: Any) -> bool:
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            return False
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)
    return True


def read_json(path: Path) -> dict[str, Any]:
    raw = read_bounded(path, MAX_JSON_BYTES, "JSON file") if not Path(path).is_symlink() else None
    try:
        if raw is None:  # a report's meta.json may be a link the user made: followed, still bounded
            raw = regular_file(path, MAX_JSON_BYTES).read_bytes()
        data = json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicates)
    except RecursionError as err:  # nesting deeper than the parser's stack: not pinprof's meta.json
        raise ReportError(f"{path}: JSON nested too deeply to be a pinprof file") from err
    except (UnicodeDecodeError, ValueError) as err:  # JSONDecodeError, a duplicate key, a 5,000-digit number
        raise ReportError(
            f"{path}: not valid JSON ({str(err)[:200]}); was the run interrupted while writing it?"
        ) from err
    if not isinstance(data, dict):
        raise ReportError(f"{path}: expected a JSON object, found {type(data).__name__}")
    if not _depth_ok(data):
        raise ReportError(f"{path}: JSON nested more than {MAX_JSON_DEPTH} deep; not a pinprof file")
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
