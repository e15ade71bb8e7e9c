"""Every file pinprof writes, and every file it reads beyond a report, goes through here.

Writing: each file is written to a temporary name in the same folder (made with O_EXCL), flushed to
disk and renamed over the target, so a crash mid-write leaves the previous good file (or none), never
half a CSV; a target that is a link, a device, a FIFO or a folder is refused, never written through
(a ``gantt.png`` linked to another file, planted in a folder another user made, would otherwise
overwrite that file). A log written while a program runs (``TempFile``) goes to a temporary name too,
renamed when it is complete.

Reading (``read_bounded``): the file is opened without following a link at its last component and
without blocking, checked to be a regular file of at most a given size, and read no further than
that: a lock file linked to ``/dev/zero`` took 23.7 GB of memory, a FIFO hung forever.

Any layer may use these (numpy, pandas and the standard library only).
"""

from __future__ import annotations

import errno
import json
import math
import os
import stat
import tempfile
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd

from profiler.errors import OutputNotWritableError, ReportError

# mkstemp makes its file 0600; the report gets the mode any new file of the user's would (umask).
_UMASK = os.umask(0)
os.umask(_UMASK)


def check_target(path: Path) -> None:
    """Refuse now, before any work, a target ``write_bytes_atomic`` would refuse (see ``_check_target``)."""
    _check_target(Path(path))


def _check_target(path: Path) -> None:
    # The rename would replace a symlink (not what it points to) or a device node: refuse both, and
    # say so before anything is written.
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise OutputNotWritableError(
            f"{path}: not a regular file (a link, device, FIFO or folder); pinprof writes files only, "
            "remove it or choose another folder"
        )


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """``data`` into ``path`` through a temporary file and a rename (see the module docstring)."""
    path = Path(path)
    _check_target(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        _check_target(path)  # planted while we wrote: still not replaced
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    if not isinstance(text, str):
        raise TypeError(f"write_text_atomic takes text, not {type(text).__name__}")
    write_bytes_atomic(path, text.encode("utf-8"))


class TempFile:
    """A text file written as it goes (a log) under a temporary name in ``path``'s folder, renamed over
    ``path`` by ``commit``; if the process dies first, ``.<name>.<random>.tmp`` holds what was written."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        _check_target(self.path)
        fd, self.tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
        os.fchmod(fd, 0o666 & ~_UMASK)
        self.file: IO[str] = os.fdopen(fd, "w", encoding="utf-8", errors="replace")

    def commit(self) -> None:
        """Close the file and rename it over ``path``; where that fails (the last bytes do not fit on
        the disk, a link planted meanwhile), the temporary file is removed and the error raised."""
        try:
            self.file.close()
            _check_target(self.path)
            os.replace(self.tmp, self.path)
        except BaseException:
            self.discard()
            raise

    def discard(self) -> None:
        """Remove the temporary file (the write failed: the target keeps what it held)."""
        try:
            self.file.close()  # its buffer's last bytes may not fit either: they are not wanted
        except OSError:
            pass
        if os.path.exists(self.tmp):
            os.unlink(self.tmp)


def _open_guarded(path: Path, what: str) -> int:
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        return os.open(path, flags)
    except FileNotFoundError as err:
        raise ReportError(f"{path}: no such {what}") from err
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise ReportError(f"{path}: a symbolic link, not a {what}; pinprof does not follow links here") from err
        raise ReportError(f"{path}: the {what} cannot be read ({err.strerror or err})") from err


def _check_open(fd: int, path: Path, limit: int, what: str) -> None:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise ReportError(f"{path}: not a regular file (a FIFO, device, socket or folder); not a {what}")
    if st.st_size > limit:
        raise ReportError(f"{path}: {st.st_size} bytes, more than a {what} holds ({limit} at most)")


def check_file(path: Path, limit: int, what: str = "file") -> Path:
    """``path`` if it is a regular file, not a link, of at most ``limit`` bytes, for a reader that opens
    it by name (SQLite); refused in one line otherwise."""
    fd = _open_guarded(Path(path), what)
    try:
        _check_open(fd, Path(path), limit, what)
    finally:
        os.close(fd)
    return Path(path)


def read_bounded(path: Path, limit: int, what: str = "file") -> bytes:
    """The bytes of ``path``, refused in one line (``ReportError``) unless it is a regular file, not a
    link, of at most ``limit`` bytes (see the module docstring). ``what`` names it in the messages."""
    path = Path(path)
    fd = _open_guarded(path, what)
    try:
        _check_open(fd, path, limit, what)
        chunks, got = [], 0
        while got <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        if got > limit:
            raise ReportError(f"{path}: grew past {limit} bytes while being read; not a {what}")
        return b"".join(chunks)
    finally:
        os.close(fd)


# A cell a spreadsheet would run as a formula starts with one of these (OWASP's CSV injection list).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def neutralised(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with every text cell that starts like a formula (``=cmd|...``, ``@SUM(...)``) given a
    leading ``'``, as spreadsheets take it: shown as text, never run. Numbers are not text cells."""
    out = frame
    for col in frame.columns:
        values = frame[col]
        if values.dtype != object and not isinstance(values.dtype, pd.StringDtype):
            continue
        # read in Python, not through pandas' string methods: a journal append's few rows paid for
        # four pandas calls a text column
        cells = values.tolist()
        risky = [isinstance(x, str) and x.startswith(FORMULA_START) for x in cells]
        if any(risky):
            if out is frame:
                out = frame.copy()
            out[col] = pd.Series(
                ["'" + x if r else x for x, r in zip(cells, risky)], index=values.index, dtype=values.dtype
            )
    return out


def csv_text(frame: pd.DataFrame, header: bool = True) -> str:
    """CSV with full float precision (round-trips exactly); NaN is written as an empty cell; text cells
    that a spreadsheet would run as a formula are neutralised (``neutralised``)."""
    return neutralised(frame).to_csv(index=False, header=header, float_format="%.17g", lineterminator="\n")


def _text_cell(value: Any) -> str:
    """One cell of a text (or nullable) column as the csv module writes it: missing as empty, quoted
    when it holds a comma, a quote or a line break."""
    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return ""
    text = str(value)
    if any(c in text for c in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


def _column_cells(values: pd.Series) -> tuple[str, list[Any]]:
    """(printf spec, cells) of one column for ``csv_rows``: floats as ``%.17g`` (what ``csv_text``
    writes), formatted one row at a time unless the column has a NaN; integers as ``%d``; the rest
    as text cells, formula-like text neutralised (``neutralised``, one test a distinct value)."""
    dtype = values.dtype
    if dtype == "float64":
        floats = values.to_numpy()
        missing = np.isnan(floats)
        if not missing.any():
            return "%.17g", floats.tolist()
        if missing.all():
            return "%s", [""] * len(floats)
        return "%s", ["" if m else f"{v:.17g}" for v, m in zip(floats.tolist(), missing.tolist())]
    if dtype == "int64":
        return "%d", values.to_numpy().tolist()
    if dtype == "bool":
        return "%s", values.to_numpy().tolist()
    if isinstance(dtype, (pd.Int64Dtype, pd.BooleanDtype)) and not values.hasnans:
        # a nullable column with nothing missing (the configuration's columns): read at numpy's pace
        return ("%d", values.to_numpy(dtype="int64").tolist()) if dtype == "Int64" else ("%s", values.tolist())
    texts: dict[str, str] = {}  # a text column holds few distinct values: each quoted once
    cells = []
    for v in values.tolist():
        if type(v) is str:
            cell = texts.get(v)
            if cell is None:  # neutralised here, as ``neutralised`` does it: text only, never numbers
                cell = texts[v] = _text_cell("'" + v if v.startswith(FORMULA_START) else v)
        else:
            cell = _text_cell(v)
        cells.append(cell)
    return "%s", cells


def csv_lines(frame: pd.DataFrame) -> list[str]:
    """``frame``'s rows as CSV, no header, one string a row (a row may hold a quoted line break), that
    read back as ``csv_text``'s do (every float with 17 significant digits, NaN and NA as an empty cell,
    formula-like text neutralised), each row made by one printf-style format of its cells. For the
    journal's appends, which hold Python's lock while the loop waits: ``scripts/bench_append.py`` on the
    2-core machine formatted 1,000 rows of an H200 run in 13.2 ms, against 20.6 ms with the csv module
    from plain lists."""
    if not len(frame.columns) or not len(frame):
        return []
    specs, columns = zip(*(_column_cells(frame[c]) for c in frame.columns))
    line = ",".join(specs) + "\n"
    return [line % row for row in zip(*columns)]


def csv_rows(frame: pd.DataFrame) -> str:
    """``csv_lines`` joined."""
    return "".join(csv_lines(frame))


def write_csv(frame: pd.DataFrame, path: Path) -> None:
    write_text_atomic(path, csv_text(frame))


def finite(data: Any) -> Any:
    """``data`` with every NaN or infinite float made ``None``: JSON has no NaN nor Infinity, and
    ``json.dumps`` would write them anyway, giving a file other tools refuse."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {k: finite(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [finite(v) for v in data]
    return data


def to_json(data: Any, **kwargs: Any) -> str:
    """Strict JSON text of ``data`` (non-finite floats as null; anything else unknown as its str)."""
    return json.dumps(finite(data), allow_nan=False, default=str, **kwargs)


def write_json(data: dict[str, Any] | list[Any], path: Path, reserve: int = 0) -> None:
    """``data`` as indented JSON; ``reserve``: the file is padded with trailing spaces (JSON allows
    them) to that many bytes, room that ``overwrite_json`` can later write into on a full disk."""
    text = to_json(data, indent=2, sort_keys=True) + "\n"
    write_text_atomic(path, text + " " * max(0, reserve - len(text.encode()) - 1) + ("\n" if reserve else ""))


def overwrite_json(data: dict[str, Any], path: Path) -> None:
    """``data`` written over ``path``'s own bytes, for a disk too full for ``write_json``'s temporary
    file: a file padded by ``write_json(reserve=...)`` has the room, so no new block is needed. Not
    atomic (a crash mid-write leaves a torn file): only for a file that says "running" until then.
    Refused (``OSError``) where the file is not a regular file of at least that size."""
    raw = (to_json(data, indent=2, sort_keys=True) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size < len(raw):
            raise OSError(errno.ENOSPC, f"no room in place for {len(raw)} bytes", str(path))
        view = memoryview(raw)
        while view:
            view = view[os.write(fd, view) :]
        os.ftruncate(fd, len(raw))
    finally:
        os.close(fd)
