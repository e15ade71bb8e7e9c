"""What capture hands its completed rows to, declared as protocols: the journal a run keeps on disk and
the process that appends to it. Both are ``profiler.report``'s (``report.journal.Journal``,
``report.journal_process.JournalProcess``), made by the driver that starts the run and handed in, so
that capture measures and never imports the layer that writes.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import pandas as pd

    from profiler.timeline.build import RawRows


class Journal(Protocol):
    """Timeline rows appended to a file as the run goes (``report.journal.Journal``)."""

    path: Path
    rows: int  # rows this journal wrote

    def start(self) -> None:
        """Write the header."""

    def append(self, frame: pd.DataFrame) -> None:
        """Append built rows; an ``OSError`` (a full disk) propagates."""

    def stopped_line(self, err: OSError) -> str:
        """The one line that says appends stopped at ``err``, and what was kept."""


class Appender(Protocol):
    """A process of its own that builds and appends the rows handed to it
    (``report.journal_process.JournalProcess``)."""

    error: str | None  # why its appends stopped, as it said
    failure: OSError | None  # the same, as the error its append raised
    cpu_ms: float | None  # its CPU time for the rows, once it ended
    start_ms: float | None  # and to start

    def start(self) -> bool:
        """Start it; False where no process can be had (the caller then appends itself)."""

    def send(self, rows: list[RawRows]) -> bool:
        """Hand it rows to build and append; False once it is gone."""

    def close(self) -> None:
        """Wait for it to write what it was handed, then end it."""
