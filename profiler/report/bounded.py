"""The first check of any file a reading verb opens: a regular file, and not larger than a report
(``regular_file``), before a byte is read."""

from __future__ import annotations

import stat
from pathlib import Path

from profiler.errors import ReportError

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
