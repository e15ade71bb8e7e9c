"""The library's ``TransferProfiler`` (``from profiler import TransferProfiler``): the recorder of
``profiler.capture.profiler``, and what it measured kept in a report folder however its ``with``
block ends (``out=``).

    with TransferProfiler(mode="pinned_nb", out="reports/my-run") as prof:
        for batch in prof.batches(loader):
            x, y = prof.to_device(batch)
            ...

The recorder only measures; the folder is this layer's to write (``profiler.drivers.saving``: the
files through ``profiler.report``, with signals held, the ranks of a job merged).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from profiler.capture import profiler as recorder
from profiler.drivers import saving
from profiler.report.claim import release
from profiler.report.signals import install_sigterm, restore_sigterm, retried_until_held


class TransferProfiler(recorder.TransferProfiler):
    """Records every batch's phases (``profiler.capture.profiler.TransferProfiler`` takes the same
    arguments) and, given ``out``, writes them there when used as a context manager (``__enter__``).

    out: the report folder; refused at once if it already holds a report or another run holds it.
    """

    def __init__(self, *args: Any, out: str | Path | None = None, **kwargs: Any) -> None:
        self.out = out
        self._lock = saving.claim_out(out) if out is not None else None  # a bad out= fails now, not after the loop
        try:
            super().__init__(*args, **kwargs)
        except BaseException:
            release(self._lock)
            raise

    def save(self, out: str | Path, partial: bool = False, **extra: Any) -> Path:
        """Write ``timeline.csv`` and ``meta.json`` into ``out`` (atomically); returns the folder."""
        return saving.save(self, out, partial, **extra)

    def __enter__(self) -> TransferProfiler:
        """``with TransferProfiler(out=...) as prof:`` writes the report however the block ends.

        An exception (a loader that raises, a DataLoader worker that dies), Ctrl-C or SIGTERM leave
        ``timeline.csv`` with every batch completed so far and ``"partial": true`` in ``meta.json``;
        the exception then propagates.
        """
        self._previous_sigterm = install_sigterm()
        return self

    def _write_on_exit(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        early: BaseException | None,
        on_held: Callable[[], None],
    ) -> None:
        restore_sigterm(getattr(self, "_previous_sigterm", None))
        saving.save_on_exit(self, self.out, exc_type, exc, early, on_held)  # type: ignore[arg-type]  # out is set

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        try:
            if self.out is None:
                restore_sigterm(getattr(self, "_previous_sigterm", None))
            else:
                # A handler that raises before the report's signals are held (torch's SIGCHLD, once a
                # worker died) costs a retry, not the report (retried_until_held).
                retried_until_held(lambda early, on_held: self._write_on_exit(exc_type, exc, early, on_held))
        finally:
            self.close()
            release(self._lock)
        if exc_type is None and self.out is not None:
            saving.merge_ranks(self.out)  # a barrier across ranks: not with signals held
