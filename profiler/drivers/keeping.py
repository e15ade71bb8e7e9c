"""What ``pinprof run`` keeps however it ends: the scenarios measured so far, the journal's appends
(a full disk stops the run with what is on disk), the partial report of a failed run, and the merge
of a job's ranks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from profiler.capture import own_threads
from profiler.capture.devices import rank_info
from profiler.capture.profiler import TransferProfiler
from profiler.drivers import distributed
from profiler.drivers.options import RunOptions
from profiler.errors import WriteFailed
from profiler.report import files as report_io
from profiler.report.folder import write_report
from profiler.report.journal import Journal
from profiler.timeline import schema as timeline


@dataclass
class Progress:
    """What the scenarios measured so far, kept for the report however the run ends."""

    frames: list[pd.DataFrame] = field(default_factory=list)
    current: list[TransferProfiler] = field(default_factory=list)  # the scenario running now
    per_epoch: dict[str, int] = field(default_factory=dict)
    # The journal's processes (one a scenario), CPU ms: building and writing rows, and starting up.
    journal_process_ms: float = 0.0
    journal_process_start_ms: float = 0.0

    def own_costs(self) -> dict[str, Any]:
        """meta.json's account of pinprof's own threads and the journal's processes so far
        (``own_threads.meta_fields``); None for the processes where none started."""
        return own_threads.meta_fields(
            round(self.journal_process_ms, 3) or None, round(self.journal_process_start_ms, 3) or None
        )


def appending(write: Callable[[], None], journal: Journal | None, measured: int | None = None) -> None:
    """``write`` to the journal; a disk that refuses it (full, over quota) stops the run: nothing
    measured after could be kept, and the rows already on disk are. ``measured``: the batches the run
    has measured, for the line to count those not written."""
    try:
        write()
    except OSError as err:
        if journal is None:  # the run's first file (meta.json): nothing measured yet
            raise WriteFailed(f"could not write {err.filename or 'the report folder'} ({err.strerror or err})") from err
        kept, path = journal.rows, journal.path
        lost = f" of {measured} measured ({measured - kept} could not be written)" if measured is not None else ""
        raise WriteFailed(
            f"could not append to {path} ({err.strerror or err}); it keeps the {kept} batches flushed before{lost}, "
            "and meta.json says the report is partial: free some space and run again"
        ) from err


def merge_job(out: Path, opts: RunOptions, done: Progress, echo: Callable[[str], None]) -> Path:
    """Once every rank has written its folder, rank 0 merges them into the job's; returns that folder."""
    distributed.barrier()
    if rank_info()["rank"] != 0:
        return out
    from profiler.report.merge import write_merged

    merged = out.parent
    write_merged(merged)  # its meta.json: rank 0's, plus ranks, clock_aligned, partial of any rank
    write_report(
        merged,
        report_io.read_timeline(merged),
        report_io.read_json(merged / report_io.META),
        done.per_epoch,
        echo,
        plots=opts.plots,
    )
    return merged


def keep_current(done: Progress) -> None:
    """The interrupted scenario's completed batches join the finished scenarios' frames."""
    if done.current:
        done.frames.append(done.current[0].timeline())
        done.current.clear()  # kept once, even if this runs again


def write_failed(err: Exception, out: Path, done: Progress, info: dict[str, Any], echo: Callable[[str], None]) -> None:
    """The partial report of a run that an exception stopped (no plots: the run is failing)."""
    info["interrupted_by"], info["error"] = type(err).__name__, str(err)[:500]
    info["partial"] = True
    keep_current(done)
    info.update(done.own_costs())
    write_report(out, timeline.concat(done.frames), info, done.per_epoch, echo, plots=False)
