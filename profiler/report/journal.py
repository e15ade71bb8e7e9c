"""timeline.csv kept on disk while a run goes: a header first, then each flush's rows appended.

A run killed with SIGKILL, or stopped by a full disk, leaves every row flushed before it: each flush is
one ``write`` to a file opened with ``O_APPEND``, and a write that fails half way (ENOSPC, EDQUOT,
EFBIG) is cut back to the last whole row, so the file never holds a torn row of ours. The reader
(``profiler.report.files.read_timeline``) drops a torn last line in any case. The page cache
survives the death of the process, so no ``fsync`` is needed for SIGKILL; a power cut may lose the
last flushes.

When the run ends, the whole timeline is rewritten atomically (``profiler.atomic``) over this file;
the next flush appends to that file, as the path is opened afresh each time.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pandas as pd

from profiler.atomic import csv_rows, write_csv, write_text_atomic
from profiler.errors import OutputNotWritableError
from profiler.timeline.schema import COLUMNS


class Journal:
    """Appends timeline rows to ``path``; ``rows`` counts those written by this journal."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.rows = 0

    def start(self) -> None:
        """Replace ``path`` with the header alone (a ``--force`` run must not append to an old report)."""
        write_text_atomic(self.path, ",".join(COLUMNS) + "\n")

    def replace(self, frame: pd.DataFrame) -> None:
        """Rewrite the whole file atomically with ``frame`` (a finished scenario's corrected rows)."""
        write_csv(frame, self.path)
        self.rows = len(frame)

    def append(self, frame: pd.DataFrame) -> None:
        """Append ``frame``'s rows in one write; on failure the file is cut back and the error raised."""
        if not len(frame):
            return
        # Rows appended here read back exactly as the final file's (write_csv); csv_rows is the faster
        # writer, as the loop waits for Python's lock while they are formatted.
        data = csv_rows(frame[list(COLUMNS)]).encode()
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            self.start()  # removed under the run: begin again rather than lose the rows to come
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise OutputNotWritableError(f"{self.path}: not a regular file; pinprof writes files only")
            size = st.st_size
            try:
                view = memoryview(data)
                while view:  # a write to a regular file may be short only when the disk fills
                    view = view[os.write(fd, view) :]
            except OSError:
                os.ftruncate(fd, size)  # no torn row: the file ends at the last whole flush
                raise
        finally:
            os.close(fd)
        self.rows += len(frame)
