"""A report folder's file names, and readers that fail with a clear message (writers: ``profiler.atomic``)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pandas as pd

from profiler.atomic import write_csv, write_json, write_text_atomic
from profiler.errors import ReportError
from profiler.timeline.schema import SCHEMA, conform

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
    "read_timeline",
    "resolve_timeline_path",
    "write_csv",
    "write_json",
    "write_text_atomic",
]


def read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as err:
        raise ReportError(f"{path}: no such file") from err
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ReportError(f"{path}: not valid JSON ({err}); was the run interrupted while writing it?") from err
    if not isinstance(data, dict):
        raise ReportError(f"{path}: expected a JSON object, found {type(data).__name__}")
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
    return path


def read_calibration(folder: Path) -> pd.DataFrame | None:
    """The report's bandwidth calibration (bytes, pinned_GBps, pageable_GBps), or None if it has none."""
    path = Path(folder) / CALIBRATION
    return pd.read_csv(path) if path.is_file() else None


REQUIRED = ("mode", "batch", "bytes")


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
        except (ValueError, TypeError):
            bad.append(col)
    if bad:
        raise ReportError(f"{path}: column(s) {', '.join(bad)} hold values of the wrong type")
    return conform(raw)


def _parse(col: pd.Series, dtype: str) -> pd.Series:
    if dtype == "float64":
        return pd.to_numeric(col, errors="raise").astype("float64")
    if dtype in ("int64", "Int64"):
        num = pd.to_numeric(col, errors="raise")
        if dtype == "int64" and num.isna().any():
            raise ValueError("empty integer cell")
        if (num.dropna() % 1 != 0).any():
            raise ValueError("non-integer")
        return num.astype(dtype)
    if dtype in ("bool", "boolean"):
        mapped = col.map({"True": True, "False": False, "true": True, "false": False, "1": True, "0": False})
        if mapped[col.notna()].isna().any():
            raise ValueError("not a boolean")
        return mapped.astype("boolean" if dtype == "boolean" or col.isna().any() else "bool")
    return col
