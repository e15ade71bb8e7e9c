"""timeline.csv kept on disk while a run goes: a header first, then each flush's rows appended.

A run killed with SIGKILL, or stopped by a full disk, leaves every row flushed before it: each flush is
one ``write`` to a file opened with ``O_APPEND``, and a write that fails half way (ENOSPC, EDQUOT,
EFBIG) is cut back to the last whole row it wrote, so the file keeps every row the disk could hold
and never a torn row of ours. The reader (``profiler.report.files.read_timeline``) drops a torn last
line in any case. ``keep`` appends what a run measured beyond its appends, as far as the disk holds it:
the report of a run whose final rewrite found the disk full. The page cache
survives the death of the process, so no ``fsync`` is needed for SIGKILL; a power cut may lose the
last flushes.

When the run ends, the whole timeline is rewritten atomically (``profiler.atomic``) over this file;
the next flush appends to that file, as the path is opened afresh each time.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pandas as pd

from profiler.atomic import csv_lines, write_csv, write_text_atomic
from profiler.errors import OutputNotWritableError
from profiler.timeline.schema import COLUMNS


def stopped_line(path: Path, err: OSError, rows: int) -> str:
    """The one line a failed append says (without ``pinprof: ``), in the child or in the process."""
    why = err.strerror or str(err)
    return (
        f"{why if why.startswith(str(path)) else f'{path}: {why}'}; appends stopped with {rows} batches on disk "
        "(kept), the run goes on measuring in memory"
    )


class Journal:
    """Appends timeline rows to ``path``; ``rows`` counts those written by this journal."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.rows = 0

    def stopped_line(self, err: OSError) -> str:
        """The one line an append that failed with ``err`` says (``stopped_line``)."""
        return stopped_line(self.path, err, self.rows)

    def start(self) -> None:
        """Replace ``path`` with the header alone (a ``--force`` run must not append to an old report)."""
        write_text_atomic(self.path, ",".join(COLUMNS) + "\n")

    def replace(self, frame: pd.DataFrame) -> None:
        """Rewrite the whole file atomically with ``frame`` (a finished scenario's corrected rows)."""
        write_csv(frame, self.path)
        self.rows = len(frame)

    def append(self, frame: pd.DataFrame) -> None:
        """Append ``frame``'s rows in one write; where the disk takes only part of it, the file is cut
        back to the last whole row written (``rows`` counts those) and the error raised."""
        if not len(frame):
            return
        # Rows appended here read back exactly as the final file's (write_csv); csv_lines is the faster
        # writer, as the loop waits for Python's lock while they are formatted.
        lines = csv_lines(frame[list(COLUMNS)])
        data = "".join(lines).encode()
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC)
        except FileNotFoundError:
            self.start()  # removed under the run: begin again rather than lose the rows to come
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC)
        except OSError as err:
            if err.errno == errno.ENXIO:  # a FIFO with no reader, planted in its place
                raise OutputNotWritableError(f"{self.path}: not a regular file; pinprof writes files only") from err
            raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise OutputNotWritableError(f"{self.path}: not a regular file; pinprof writes files only")
            size, written = st.st_size, 0
            try:
                while written < len(data):  # a write to a regular file may be short only when the disk fills
                    written += os.write(fd, memoryview(data)[written:])
            except OSError:
                whole, end = _whole_rows(lines, written)
                os.ftruncate(fd, size + end)  # no torn row: the file ends at the last whole row
                self.rows += whole
                raise
        finally:
            os.close(fd)
        self.rows += len(frame)

    def keep(self, frame: pd.DataFrame) -> int:
        """Append ``frame``'s rows after the first ``rows`` (those already in the file, in order), as
        many as the disk holds; returns how many could not be written."""
        rest = frame.iloc[self.rows :]
        before = self.rows
        try:
            self.append(rest)
        except OSError:
            pass  # the disk is full: what it held is kept, the rest counted
        return len(rest) - (self.rows - before)


_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def _whole_rows(lines: list[str], written: int) -> tuple[int, int]:
    """(how many of ``lines`` the first ``written`` bytes hold whole, the byte length of those)."""
    end = 0
    for i, line in enumerate(lines):
        size = len(line.encode())
        if end + size > written:
            return i, end
        end += size
    return len(lines), end
