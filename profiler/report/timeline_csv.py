"""A timeline CSV read back: parsed chunk by chunk into arrays sized once, typed by the schema, and
checked cell by cell (``read_timeline``), so that a damaged or hostile file fails with one line naming
the file and the column."""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from profiler.errors import ReportError
from profiler.names import clean
from profiler.report.bounded import MAX_CSV_BYTES, regular_file
from profiler.timeline.schema import DURATIONS, SCHEMA, conform

TIMELINE = "timeline.csv"


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
    "kernels",
)


# The columns every read keeps, whatever ``columns`` asks: a row's identity and what a file must hold.
KEYS = ("run", "scenario", "rank", "batch", "mode", "bytes")


def read_timeline(path: Path, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """Read a timeline CSV (pinprof's or an nsys import) back into the typed frame it was written from.

    Read typed first (numbers parsed by the CSV reader, text as categories: a 1,000,000-row timeline in
    seconds and well under 1 GB); a file that does not parse so is read again as text, cell by cell,
    to name the column that is wrong. ``columns``: only these (and ``KEYS``) are parsed and kept, for
    a reader that needs few of them (``pinprof compare`` holds two timelines)."""
    path = resolve_timeline_path(path)
    wanted = None if columns is None else {*columns, *KEYS}
    source: Path | io.BytesIO = path
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        if size:
            fh.seek(size - 1)
            torn = fh.read(1) != b"\n"
        else:
            torn = False
    if torn:
        # pinprof ends every file with a newline: without one the file was cut while being written
        # (or by hand). A torn header is unusable; a torn last row is dropped, the rows before kept.
        data = path.read_bytes()
        if b"\n" not in data:
            raise ReportError(f"{path}: the header line is incomplete; the file was cut while being written")
        source = io.BytesIO(data[: data.rindex(b"\n") + 1])
    raw = _read_typed(path, source, wanted)
    if raw is None:
        raw = _read_text(path, source, wanted)
    _check_values(path, raw)
    _check_names(path, raw)
    frame = conform(raw, copy=False, only=wanted)
    del raw
    if frame.scenario.isna().any():  # a file from elsewhere with no scenario: its mode names it
        frame["scenario"] = frame.scenario.fillna(frame["mode"].astype(str))
    _check_unique(path, frame)
    return frame


CHUNK_ROWS = 25_000  # the parser's buffers for this many rows at a time, not for the whole file


def _csv(path: Path, source: Path | io.BytesIO, **kwargs: Any) -> pd.DataFrame:
    """The CSV parsed chunk by chunk into one frame of arrays sized once (see ``_Table``). One thread:
    parsed in slices on two, a 1,000,000-row timeline read 3.9 s instead of 4.7 s on the 2-core
    machine, but peaked at 874 MB instead of 637 (each thread's parser buffers held apart), and more
    with more cores."""
    try:
        if isinstance(source, io.BytesIO):
            source.seek(0)
            rows = source.getvalue().count(b"\n")
        else:
            rows = _newlines(source)
        table = _Table(rows)
        with pd.read_csv(source, keep_default_na=False, na_values=[""], chunksize=CHUNK_ROWS, **kwargs) as reader:
            table.fill(reader)
        return table.frame()
    except pd.errors.EmptyDataError as err:
        raise ReportError(f"{path}: the file is empty") from err
    except (pd.errors.ParserError, UnicodeDecodeError) as err:
        raise ReportError(f"{path}: not a CSV file pinprof can read ({str(err).splitlines()[0]})") from err


def _newlines(path: Path) -> int:
    """The file's newlines: its rows, header included, where no cell holds one (``_Table`` grows
    where more come)."""
    n = 0
    with open(path, "rb") as fh:
        while block := fh.read(16 << 20):
            n += block.count(b"\n")
    return n


class _Table:
    """Columns in arrays sized once for ``rows`` rows (grown where the file holds more), filled chunk
    by chunk: no second copy of the table in memory. Text columns are kept as codes into one list of
    categories."""

    def __init__(self, rows: int) -> None:
        self.rows = max(rows, 1)
        self.arrays: dict[str, np.ndarray] = {}
        self.kinds: dict[str, str] = {}
        self.cats: dict[str, dict[Any, int]] = {}
        self.end = 0
        self.columns: list[str] = []

    def _array(self, col: str, values: pd.Series) -> np.ndarray:
        if col not in self.arrays:
            self.columns.append(col)
            if isinstance(values.dtype, pd.CategoricalDtype):
                self.kinds[col] = "cat"
                self.arrays[col] = np.full(self.rows, -1, dtype=np.int32)
            else:
                self.kinds[col] = "num" if values.dtype.kind in "fiu" else "obj"
                self.arrays[col] = np.empty(self.rows, dtype=values.dtype if self.kinds[col] == "num" else object)
        return self.arrays[col]

    def _grow(self, rows: int) -> None:
        """Room for ``rows`` rows: more than the newlines counted (a bare carriage return ends a row)."""
        rows = max(rows, 2 * self.rows)
        for col, arr in self.arrays.items():
            grown = np.full(rows, -1, dtype=arr.dtype) if self.kinds[col] == "cat" else np.empty(rows, arr.dtype)
            grown[: self.rows] = arr
            self.arrays[col] = grown
        self.rows = rows

    def fill(self, chunks: Any) -> None:
        n = 0
        for chunk in chunks:
            m = len(chunk)
            if n + m > self.rows:
                self._grow(n + m)
            for col in chunk.columns:
                values = chunk[col]
                arr = self._array(col, values)
                if self.kinds[col] == "cat":
                    index = self.cats.setdefault(col, {})
                    cats = values.cat.categories
                    lut = np.array([index.setdefault(c, len(index)) for c in cats] + [-1], dtype=np.int32)
                    arr[n : n + m] = lut[values.cat.codes.to_numpy()]
                else:
                    arr[n : n + m] = values.to_numpy()
            n += m
        self.end = n

    def frame(self) -> pd.DataFrame:
        out: dict[str, Any] = {}
        for col in self.columns:
            arr = self.arrays[col][: self.end]
            if self.kinds[col] == "cat":
                out[col] = pd.Categorical.from_codes(arr, categories=pd.Index(list(self.cats[col]), dtype=object))
            else:
                out[col] = arr
        return pd.DataFrame(out, copy=False)  # one block per column: no second copy of the table


def _require(path: Path, raw: pd.DataFrame) -> None:
    missing = [c for c in REQUIRED if c not in raw.columns]
    if missing:
        raise ReportError(
            f"{path}: missing column(s) {', '.join(missing)}; is this a pinprof timeline? "
            f"(found: {', '.join(map(str, raw.columns[:8]))})"
        )


def _usecols(wanted: set[str] | None) -> dict[str, Any]:
    return {} if wanted is None else {"usecols": lambda c: c in wanted}


def _read_typed(path: Path, source: Path | io.BytesIO, wanted: set[str] | None = None) -> pd.DataFrame | None:
    """The timeline parsed by type in one pass; None when a cell does not parse (the text path names it)."""
    numeric = {c for c, t in SCHEMA.items() if t in ("float64", "int64", "Int64")}
    dtype = {c: ("float64" if c in numeric else "category") for c in SCHEMA}
    try:
        raw = _csv(path, source, dtype=dtype, **_usecols(wanted))
    except (ValueError, TypeError, OverflowError) as err:
        if isinstance(err, ReportError):
            raise
        return None
    _require(path, raw)
    for col, kind in SCHEMA.items():
        if col not in raw:
            continue
        values = raw[col]
        if kind in ("int64", "Int64"):
            v = values.to_numpy(float)
            known = v[~np.isnan(v)]
            if not np.isfinite(known).all():
                return None
            if (kind == "int64" and len(known) < len(v)) or (known % 1 != 0).any() or (np.abs(known) >= 2**53).any():
                return None  # the text path names the column
            raw[col] = values.astype("Int64") if kind == "Int64" else values.astype("int64")
        elif kind in ("bool", "boolean"):
            # the reader infers the categories' type (True/False become bools): each is read as text
            lut = [_BOOLS(str(c)) for c in values.cat.categories]
            if any(m is None for m in lut):
                return None
            codes = values.cat.codes.to_numpy()
            out = pd.array(np.array([*lut, False], dtype=bool)[codes], dtype="boolean")  # code -1: NA, below
            out[codes < 0] = pd.NA
            raw[col] = out.astype("boolean" if kind == "boolean" or (codes < 0).any() else "bool")
        elif kind == "str" and not all(isinstance(c, str) for c in values.cat.categories):
            return None  # names the reader took for numbers ("007"): the text path keeps them as written
    return raw


_BOOLS = {"True": True, "False": False, "true": True, "false": False, "1": True, "0": False}.get


def _read_text(path: Path, source: Path | io.BytesIO, wanted: set[str] | None = None) -> pd.DataFrame:
    """Every cell as text, then each column parsed: the slow path, which names a wrong column."""
    raw = _csv(path, source, dtype=str, **_usecols(wanted))
    _require(path, raw)
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
    return raw


# Times pinprof writes lie between a nanosecond and a day (ms); 1e308 ms gave an "inf%" headline, and
# 5e-324 ms a division by zero once scaled.
MIN_TIME_MS, MAX_TIME_MS = 1e-9, 1e9
TEXT_COLUMNS = [c for c, t in SCHEMA.items() if t == "str"]
MAX_NAME = 1000


def _check_names(path: Path, frame: pd.DataFrame) -> None:
    """Text cells as pinprof writes them: no longer than ``MAX_NAME`` characters (a megabyte name held
    a plot for minutes); control characters are escaped (``profiler.names``), so a newline in a name
    never reaches a Markdown heading. Categories (the typed read) are checked once each."""
    for col in TEXT_COLUMNS:
        if col not in frame:
            continue
        values = frame[col]
        distinct = values.cat.categories.astype(str) if isinstance(values.dtype, pd.CategoricalDtype) else values
        lengths = distinct.str.len()
        if (lengths > MAX_NAME).any():
            raise ReportError(
                f"{path}: column {col} holds a value of {int(lengths.max())} characters; pinprof writes names "
                f"of at most {MAX_NAME}"
            )
        if isinstance(values.dtype, pd.CategoricalDtype):
            cleaned = [clean(c, MAX_NAME) for c in values.cat.categories.astype(str)]
            if cleaned != list(values.cat.categories):
                used: set[str] = set()
                for i, name in enumerate(cleaned):  # two names that clean alike stay two names
                    k, unique = 1, name
                    while unique in used:
                        k += 1
                        unique = f"{name}#{k}"
                    used.add(unique)
                    cleaned[i] = unique
                frame[col] = values.cat.rename_categories(cleaned)  # conform makes it text
        elif not values.dropna().map(lambda v: v.isprintable()).all():
            frame[col] = values.map(lambda v: clean(v, MAX_NAME) if isinstance(v, str) else v)


def _check_unique(path: Path, frame: pd.DataFrame) -> None:
    """Each batch once per (run, scenario, rank): a row written twice would be counted twice."""
    keys = frame[["run", "scenario", "rank", "batch"]]
    dup = keys.duplicated()
    if dup.any():
        row = int(dup.to_numpy().argmax())
        r = frame.iloc[row]
        raise ReportError(
            f"{path}: batch {r.batch} of scenario {r.scenario!r} (rank {r['rank']}) appears more than once "
            f"(data row {row + 1}); pinprof writes each batch once"
        )


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
        checks = [("an infinite value", infinite), ("a negative value", negative)]
        if dtype == "float64":  # times, ms
            mag = np.abs(values)
            checks.append(
                ("a time out of range (pinprof writes 1e-9 to 1e9 ms, or 0)", (mag > MAX_TIME_MS) & ~infinite)
            )
            checks.append(
                ("a time out of range (pinprof writes 1e-9 to 1e9 ms, or 0)", (mag > 0) & (mag < MIN_TIME_MS))
            )
        for what, rows in checks:
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
