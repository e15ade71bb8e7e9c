"""Keeping what a profiler measured: its report folder, written however the loop ends.

The profiler (``profiler.capture``) only measures; this writes its timeline and meta.json
(``profiler.report``), with signals held (``profiler.report.signals``), and merges the ranks of a
distributed job. The library's ``TransferProfiler`` (``profiler.drivers.library``), ``pinprof profile``
and the Lightning callback keep their folders through it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from profiler.capture.devices import rank_info
from profiler.capture.environment import describe
from profiler.errors import OutputExistsError
from profiler.report import files, meta
from profiler.report.claim import claim
from profiler.report.signals import Terminated, note_on, write_held

if TYPE_CHECKING:
    from profiler.capture.profiler_state import ProfilerState


def report_folder(out: str | Path) -> Path:
    """The folder this process writes into: ``out``, or ``out/rank<k>`` in a job of several ranks."""
    ranks = rank_info()
    folder = Path(out)
    return folder / f"rank{ranks['rank']}" if ranks["world_size"] > 1 else folder  # no two processes share a file


def claim_out(out: str | Path) -> Path:
    """Check ``out=`` when the profiler is made, not after the loop: refuse a folder that already holds
    a report (a new run would mix into it) or that another live run holds; take its lock."""
    for folder in {Path(out), report_folder(out)}:
        if (folder / files.TIMELINE).exists():
            raise OutputExistsError(
                f"out={str(out)!r} already holds a report ({folder / files.TIMELINE}); a new run would mix into "
                "it: choose another folder, or delete that one"
            )
    return claim(report_folder(out), "out=")


def save(prof: ProfilerState, out: str | Path, partial: bool = False, **extra: Any) -> Path:
    """Write ``timeline.csv`` and ``meta.json`` into ``out`` (atomically); returns the folder."""
    ranks = rank_info()
    folder = report_folder(out)
    folder.mkdir(parents=True, exist_ok=True)
    files.write_csv(prof.timeline(), folder / files.TIMELINE)
    info: dict[str, Any] = {**ranks, **extra}
    files.write_json(
        meta.collect(describe(prof.device), partial=partial, origin_monotonic_ms=prof._origin, **info),
        folder / files.META,
    )
    return folder


def save_on_exit(
    prof: ProfilerState,
    out: str | Path,
    exc_type: type[BaseException] | None,
    exc: BaseException | None,
    early: BaseException | None = None,
    on_held: Callable[[], None] | None = None,
) -> None:
    """The report of a ``with TransferProfiler(out=...)`` block, written with signals held: once a
    DataLoader worker has died, torch's SIGCHLD handler raises again when the others exit, and a
    second Ctrl-C may come; either, raised inside the write, would leave no report. ``early`` and
    ``on_held``: as ``write_held`` takes them, from ``retried_until_held``."""
    why = None if exc_type is None else ("SIGTERM" if exc_type is Terminated else exc_type.__name__)
    write_held(
        lambda: save(
            prof, out, partial=exc_type is not None, interrupted_by=why, error=None if exc is None else str(exc)[:500]
        ),
        replay=exc_type is None,
        late=None if exc is None else note_on(exc),
        early=early,
        on_held=on_held,
    )


def merge_ranks(out: str | Path) -> None:
    """Under torch.distributed, rank 0 merges every rank's folder once all have written theirs."""
    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        return
    dist.barrier()
    if dist.get_rank() == 0:
        from profiler.report.merge import write_merged

        write_merged(Path(out))
